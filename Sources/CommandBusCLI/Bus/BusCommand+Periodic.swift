import CommandBus
import CommandBusHost
import CommandBusPostgres
import CommandBusSupport
// Foundation, not FoundationEssentials alone: a cron expression's time zone needs its ICU data.
import Foundation

/// `cmdbus bus periodic`: commands the hosts post on a schedule (``BusPeriodic``).
extension BusCommand {
    /// `bus periodic` lists; `bus periodic COMMAND [JSON] --every D | --cron 'EXPR'` sets one;
    /// `bus periodic --remove NAME...` removes them, and `--pause`, `--resume` and `--run-now`
    /// act on them.
    static func periodic(_ arguments: ArgumentSpec.Parsed, _ operands: [String], _ console: Console) async throws(HostFailure) {
        let actions = ["remove", "pause", "resume", "run-now"].filter(arguments.has)
        if actions.count > 1 {
            throw .usage("--\(actions[0]) and --\(actions[1]) are two things to do; give one")
        }
        if let action = actions.first {
            guard !operands.isEmpty else {
                throw .usage("'cmdbus bus periodic --\(action)' needs the names of the periodic commands; 'cmdbus bus periodic' lists them")
            }
            let entryOptions = ["every", "cron", "timezone", "as", "param", "priority", "max-attempts", "timeout", "no-overlap", "dry-run"]
            if let option = entryOptions.first(where: { arguments.value($0) != nil || arguments.has($0) }) {
                throw .usage("--\(action) takes names only, not --\(option); set the entry again to change it")
            }
            if action == "remove" { return try await removePeriodic(arguments, operands, console) }
            return try await actOnPeriodic(action, arguments, operands, console)
        }
        guard let command = operands.first else {
            if let option = ["every", "cron", "timezone", "as", "param", "priority", "max-attempts"].first(where: { arguments.value($0) != nil }) {
                throw .usage("'cmdbus bus periodic --\(option)' needs the command to post: 'cmdbus bus periodic report --every 1h'")
            }
            return try await listPeriodic(arguments, console)
        }
        let entry = try periodicEntry(command: command, operands: operands, arguments)
        if arguments.has("dry-run") { return showSlots(of: entry, console: console, json: arguments.has("json")) }
        let (outcome, unhandled) = try await withClient(arguments, verb: "periodic", console: console) { client throws(HostFailure) in
            (try await client.setPeriodic(entry), await client.namesNoHostHandles([entry.command]))
        }
        let change = outcome.change
        if arguments.has("json") {
            console.out(JSONValue.object([
                "name": .string(entry.name), "command": .string(entry.command), "schedule": .string(entry.recurrence.description),
                "replaced": .bool(change.replaced), "paused": .bool(change.paused), "nextDueSeconds": .number(change.nextDueSeconds),
            ]).text)
        } else {
            let verb = change.replaced ? "replaced" : "set"
            let kept = change.paused ? " once resumed (it stays paused: 'cmdbus bus periodic --resume \(entry.name)')"
                : change.replaced && change.sameSchedule ? " (the schedule is as it was, so its next slot stands)" : ""
            let named = entry.name == entry.command ? "" : " as \(quoted(entry.name))"
            console.out("\(verb) periodic \(quoted(entry.command))\(named): \(entry.recurrence.description)\(entry.noOverlap ? ", no overlap" : ""); "
                + "the first is due in \(roughly(change.nextDueSeconds))\(kept)")
        }
        for name in unhandled {
            console.err("cmdbus: warning: no live host on the bus handles \(quoted(name)); what is posted for it waits for a host that does ('cmdbus bus status' lists what the hosts handle)")
        }
        if outcome.firingHosts == 0 {
            console.err("cmdbus: warning: no live host on the bus posts periodic commands yet; the first 'cmdbus serve --bus' (of this version or later) to join posts it")
        }
    }

    /// `--dry-run`: the next five slots from now, by this machine's clock, in UTC and in the
    /// cron expression's zone; nothing is written, and no bus is needed.
    private static func showSlots(of entry: BusPeriodic.Entry, console: Console, json: Bool) {
        let now = Int64(Date.now.timeIntervalSince1970 * 1000)
        // An interval's first slot is one interval from now, as when it is set.
        var slots: [Int64] = []
        var after = now
        while slots.count < 5, let next = entry.recurrence.next(after: after, from: after) {
            slots.append(next)
            after = next
        }
        let zone: TimeZone? = if case .cron(let schedule) = entry.recurrence, schedule.zoneName != "UTC" { TimeZone(identifier: schedule.zoneName) } else { nil }
        let utc = Date.ISO8601FormatStyle()
        let local = zone.map { Date.ISO8601FormatStyle(timeZone: $0) }
        let times = slots.map { Date(timeIntervalSince1970: Double($0) / 1000) }
        if json {
            return console.out(JSONValue.object([
                "name": .string(entry.name), "command": .string(entry.command), "schedule": .string(entry.recurrence.description),
                "next": .array(times.map { .string($0.formatted(utc)) }),
            ]).text)
        }
        console.out("periodic \(quoted(entry.name)) would post \(quoted(entry.command)) \(entry.recurrence.description); the next \(times.count) (nothing was set):")
        for time in times { console.out("  \(time.formatted(utc))" + (local.map { "  (\(time.formatted($0)))" } ?? "")) }
    }

    /// The entry `bus periodic COMMAND [JSON] …` describes.
    private static func periodicEntry(command: String, operands: [String], _ arguments: ArgumentSpec.Parsed) throws(HostFailure) -> BusPeriodic.Entry {
        guard operands.count <= 2 else {
            throw .usage("'cmdbus bus periodic' takes a command and at most one JSON payload; got \(operands.count - 1) payloads (quote the payload whole)")
        }
        if let problem = commandNameProblem(command) { throw .usage(problem) }
        // An entry's own name is shown and typed, not claimed: a space is fine, a control character is not.
        let name = arguments.value("as") ?? command
        if let control = name.unicodeScalars.first(where: { $0.properties.generalCategory == .control }) {
            throw .usage("--as \(quoted(name)) holds a control character (U+\(String(control.value, radix: 16, uppercase: true))); name the entry in printable characters")
        }
        let recurrence: BusPeriodic.Recurrence
        switch (arguments.value("every"), arguments.value("cron")) {
        case (.some, .some):
            throw .usage("--every and --cron are two schedules; give one: --every 1h, or --cron '0 3 * * *'")
        case (.none, .none):
            throw .usage("'cmdbus bus periodic \(quotedLine(command))' needs a schedule: --every 1h (30s, 5m, 1d), or --cron '0 3 * * *' (minute hour day month weekday, UTC)")
        case (.some, .none):
            guard let every = try arguments.duration("every"), every >= .seconds(1) else {
                throw .usage("--every takes a duration of at least 1s (30s, 5m, 1h, 1d), got \(quoted(arguments.value("every") ?? ""))")
            }
            recurrence = .every(milliseconds: every.milliseconds)
        case (.none, .some(let text)):
            var expression = text
            if let zone = arguments.value("timezone") {
                let lead = text.drop(while: \.isWhitespace)
                if lead.hasPrefix("CRON_TZ=") || lead.hasPrefix("TZ=") {
                    throw .usage("--timezone and the cron expression's own CRON_TZ= name two time zones; give one")
                }
                expression = "CRON_TZ=\(zone) \(text)"
            }
            do { recurrence = .cron(try CronSchedule(parsing: expression)) } catch { throw .usage(error.message) }
        }
        if arguments.value("timezone") != nil, arguments.value("cron") == nil {
            throw .usage("--timezone is for --cron: an --every interval runs from now, whatever the zone")
        }
        let payload = try PayloadBuilder.build(
            command: command, operand: operands.dropFirst().first, pairs: arguments.all("param"), maxBytes: JournalOptions.defaultMaxPayloadBytes
        )
        var entry = BusPeriodic.Entry(name: name, command: command, payload: payload, recurrence: recurrence)
        entry.noOverlap = arguments.has("no-overlap")
        entry.timeout = try arguments.seconds("timeout")
        let queueing = try QueueOptions(arguments, connection: try ConnectionOptions(arguments))
        entry.priority = queueing.priority ?? 0
        entry.maxAttempts = queueing.maxAttempts
        return entry
    }

    /// `bus periodic --pause|--resume|--run-now NAME...`: one line a name, and a warning for each
    /// live host too old to know a pause, which posts a paused entry all the same.
    private static func actOnPeriodic(_ action: String, _ arguments: ArgumentSpec.Parsed, _ names: [String], _ console: Console) async throws(HostFailure) {
        let (done, unaware) = try await withClient(arguments, verb: "periodic", console: console) { client throws(HostFailure) in
            action == "run-now"
                ? (try await client.runPeriodicNow(names), [])
                : try await client.setPeriodicPaused(names, paused: action == "pause")
        }
        for entry in done {
            if arguments.has("json") { console.out(entry.json.text); continue }
            let name = quoted(entry.name)
            guard entry.found else {
                console.out("there is no periodic \(name) ('cmdbus bus periodic' lists them)")
                continue
            }
            let next = "the next is due in \(roughly(entry.nextDueSeconds))"
            switch action {
            case "pause" where entry.wasPaused: console.out("periodic \(name) was paused already")
            case "pause": console.out("paused periodic \(name): it posts nothing until 'cmdbus bus periodic --resume \(entry.name)'")
            case "resume" where !entry.wasPaused: console.out("periodic \(name) was not paused; \(next)")
            case "resume": console.out("resumed periodic \(name): \(next)")
            default:
                let schedule = entry.paused ? "it stays paused" : "its schedule stands, \(next)"
                console.out("periodic \(name) posted its command now, as \(entry.posted?.uuidString ?? "?"); \(schedule)")
            }
        }
        for host in unaware {
            console.err("cmdbus: warning: host \(quotedLine(host)) runs a cmdbus from before periodic pauses and posts a paused entry all the same; upgrade it")
        }
    }

    /// `bus periodic --remove NAME...`: one line a name.
    private static func removePeriodic(_ arguments: ArgumentSpec.Parsed, _ names: [String], _ console: Console) async throws(HostFailure) {
        let removed = Set(try await withClient(arguments, verb: "periodic", console: console) { client throws(HostFailure) in
            try await client.removePeriodic(names)
        })
        for name in names {
            if arguments.has("json") {
                console.out(JSONValue.object(["name": .string(name), "removed": .bool(removed.contains(name))]).text)
            } else if removed.contains(name) {
                console.out("removed periodic \(quoted(name)): the hosts post it no more (what it posted already runs)")
            } else {
                console.out("there is no periodic \(quoted(name)) ('cmdbus bus periodic' lists them)")
            }
        }
    }

    /// `bus periodic` alone: the entries.
    private static func listPeriodic(_ arguments: ArgumentSpec.Parsed, _ console: Console) async throws(HostFailure) {
        let entries = try await withClient(arguments, verb: "periodic", console: console) { client throws(HostFailure) in try await client.periodic() }
        if arguments.has("json") { return console.out(entries.text) }
        let all = entries.arrayValue?.compactMap(\.objectValue) ?? []
        if all.isEmpty { return console.out("no periodic command on the bus ('cmdbus bus periodic report --every 1h' sets one)") }
        for entry in all { console.out(periodicLine(entry)) }
    }

    /// One periodic command as `bus periodic` and `bus status` show it; given the names the live
    /// hosts handle (`bus status`), it says so of a command none of them does: what it posts waits.
    static func periodicLine(_ entry: [String: JSONValue], handled: Set<String>? = nil) -> String {
        let name = entry["name"]?.stringValue ?? "?", command = entry["command"]?.stringValue ?? "?"
        let schedule = entry["every"].map { "every \($0.stringValue ?? "?")" }
            ?? "cron \(quoted(entry["cron"]?.stringValue ?? "?")) (\(entry["timeZone"]?.stringValue ?? "UTC"))"
        let due = entry["nextDueSeconds"]?.doubleValue ?? 0
        // A short payload is shown; `{}` says nothing.
        let payload = entry["payload"].map(\.text).flatMap { $0 != "{}" && $0.count <= 60 ? " with \($0)" : nil } ?? ""
        let priority = (entry["priority"].map { ", priority \($0.text)" } ?? "") + (entry["maxAttempts"].map { ", at most \($0.text) attempts" } ?? "")
        let paused = entry["paused"] == .bool(true)
            ? "paused \(roughly(entry["pausedSeconds"]?.doubleValue ?? 0)) ago by \(quotedLine(entry["pausedBy"]?.stringValue ?? "?"))" : nil
        var line = "\(quotedLine(name)): posts \(quotedLine(command))\(payload) \(schedule)\(priority)\(entry["noOverlap"] == .bool(true) ? ", no overlap" : ""), "
            + (paused ?? (due > 0 ? "next in \(roughly(due))" : "due now"))
        if let ago = entry["lastSlotSecondsAgo"]?.doubleValue {
            let state = entry["lastState"]?.stringValue.map { ", \($0)" } ?? ""
            line += "; last posted \(roughly(ago)) ago (\(entry["lastCommand"]?.stringValue ?? "?")\(state))"
        }
        let skipped = entry["skipped"]?.text ?? "0"
        line += "; posted \(entry["fired"]?.text ?? "0")" + (skipped == "0" ? "" : ", skipped \(skipped)")
        if let handled, !handled.contains(command) { line += "; no live host handles it" }
        return line
    }
}
