import CommandBus
import CommandBusHost
import CommandBusLoading
import CommandBusPostgres
import CommandBusSupport

/// `cmdbus bus status|pause|resume|limit|periodic|cancel|retry`: the shared bus's schema
/// version, live hosts, queue depth per command name and how long its oldest waits; pausing and
/// resuming command names, limiting how many of a name run at once or start in a period across
/// the bus, commands the hosts post on a schedule, cancelling what waits of a name and retrying
/// what failed of it.
enum BusCommand {
    static let spec = ArgumentSpec(command: "bus", options: [
        .init(name: "all", short: nil, help: "pause: every name the live hosts handle or that has commands waiting; resume: every paused name."),
        .init(name: "rate", short: nil, value: "N/PERIOD", help: "limit: at most N start in any PERIOD across the bus (10/s, 100/m, 5/10s), or 'none'."),
        .init(name: "every", short: nil, value: "DURATION", help: "periodic: post it every DURATION (30s, 5m, 1h, 1d)."),
        .init(name: "cron", short: nil, value: "EXPR", help: "periodic: post it at the minutes a cron expression names, in UTC ('0 3 * * *')."),
        .init(name: "timezone", short: nil, value: "ZONE", help: "periodic: read --cron in this IANA time zone (Europe/Paris), not UTC."),
        .init(name: "as", short: nil, value: "NAME", help: "periodic: the entry's name (default: the command's), for a second schedule of one command."),
        .init(name: "no-overlap", short: nil, help: "periodic: skip a slot while the command posted before is still pending or running."),
        .init(name: "timeout", short: "t", value: "SECONDS", help: "periodic: each posted command's timeout."),
        .init(name: "param", short: "p", value: "KEY=VALUE", help: "periodic: set a payload field (repeatable)."),
        .init(name: "remove", short: nil, help: "periodic: remove the named entries."),
        .init(name: "pause", short: nil, help: "periodic: the named entries post nothing until resumed; their schedules stand."),
        .init(name: "resume", short: nil, help: "periodic: the named entries post again, from their next slot."),
        .init(name: "run-now", short: nil, help: "periodic: post the named entries' commands now, once; their schedules stand."),
        .init(name: "dry-run", short: nil, help: "periodic: print the next five slots, and set nothing."),
        .init(name: "running", short: nil, help: "cancel: ask the running commands of the names to stop too."),
        .init(name: "state", short: nil, value: "STATE", help: "retry: the commands that ended so (failed, timedOut, cancelled; default failed,timedOut)."),
        .init(name: "since", short: nil, value: "AGE", help: "retry: only those that ended within AGE (1h, 30m)."),
        .bus, .json, .help,
    ] + QueueOptions.options)

    static let help = """
        Usage: cmdbus bus status [--bus URL] [--json]
               cmdbus bus pause (<command>... | --all) [--bus URL] [--json]
               cmdbus bus resume (<command>... | --all) [--bus URL] [--json]
               cmdbus bus limit [<command>... [<N|none>] [--rate N/PERIOD|none]] [--bus URL] [--json]
               cmdbus bus periodic [<command> [<json>] (--every D | --cron EXPR) [--as NAME] [--no-overlap]]
               cmdbus bus periodic (--remove | --pause | --resume | --run-now) <name>...
               cmdbus bus cancel <command>... [--running] [--bus URL] [--json]
               cmdbus bus retry <command>... [--state S] [--since AGE] [--bus URL] [--json]

        status: shows the shared bus in PostgreSQL (--bus URL, else $CMDBUS_BUS): its schema
        version, each host with its last heartbeat, the commands it handles and runs now, and
        per command name the pending commands (due, waiting for a host) and how long the oldest
        has waited, the scheduled ones (due later) and when the next is due, and the paused names.

        pause: no host claims these command names until they are resumed: what is posted for
        them waits, pending, and what runs finishes. For a service their handlers call that is
        down, or a build to hold back. resume: hosts claim them again, at once. --all pauses
        every name the live hosts handle or that has commands waiting or running (a name that
        comes later is not paused), and resumes every paused name.

        limit: at most N commands of these names run at once across the bus, on every host
        together: a host claims one only while fewer run. For a service that takes so many
        calls at once, or work that must run one at a time (1). --rate 10/s: at most 10 start
        in any one second (5/10s, 100/m, 1000/h), for a service that takes so many calls a
        second; a retry is a start. Each is set on its own, and 'none' removes one; with no
        operands, the limits are listed, with how many started in each rate's last period.

        periodic: the hosts post the command on a schedule: --every 1h (from now on), or
        --cron '0 3 * * *' (minute hour day-of-month month day-of-week, in UTC, or in the
        --timezone given; */15, 1-5, MON-FRI and @hourly, @daily, @weekly, @monthly, @yearly
        as in crontab). Whichever live host comes first posts each slot, once; a slot that
        passes while no host is live is skipped (after an outage, one command for the
        latest). Setting a name again replaces it, and keeps its next slot if the schedule
        is the same. With no operands, the entries are listed, with when each is next due
        and how its last run went; with --dry-run, the next five slots are printed and
        nothing is set. --pause keeps an entry and its schedule and posts nothing (setting
        it again leaves it paused); --resume goes on from its next slot, the ones it was
        paused for not posted; --run-now posts its command at once, apart from its schedule.

        cancel: every command of these names that waits on the bus (pending, due now or
        later) ends cancelled at once, recorded with who cancelled it; what runs finishes
        unless --running asks it to stop too. To cancel one command: cmdbus cancel ID.

        retry: every command of these names that failed or timed out (--state cancelled,
        or a list, for others), sent or posted on its own and ended within --since if
        given, goes back to pending at once, its attempts from 0, for the hosts to run
        again; a subcommand runs again when its parent does. One command: journal retry ID.

        Passwords in URLs are never shown.

        Options:
        \(spec.optionsHelp)
        """

    static func run(_ arguments: ArgumentSpec.Parsed, console: Console) async throws(HostFailure) {
        if let verb = arguments.positionals.first, verbs[verb] != nil { try refuseOptionsOtherVerbsTake(verb, arguments) }
        try await Verb.dispatch(verbs, command: "bus", arguments, console)
    }

    /// The options only some verbs read, by option. Given to another verb they would be ignored
    /// (`bus status --every 1h`), so they are refused instead.
    private static let verbOptions: [String: [String]] = [
        "every": ["periodic"], "cron": ["periodic"], "timezone": ["periodic"], "as": ["periodic"], "no-overlap": ["periodic"],
        "timeout": ["periodic"], "param": ["periodic"], "remove": ["periodic"], "dry-run": ["periodic"], "pause": ["periodic"], "resume": ["periodic"], "run-now": ["periodic"], "priority": ["periodic"], "max-attempts": ["periodic"],
        "running": ["cancel"], "state": ["retry"], "since": ["retry"], "rate": ["limit"], "all": ["pause", "resume"],
    ]

    private static func refuseOptionsOtherVerbsTake(_ verb: String, _ arguments: ArgumentSpec.Parsed) throws(HostFailure) {
        for (option, verbs) in verbOptions.sorted(by: { $0.key < $1.key })
        where !verbs.contains(verb) && (arguments.has(option) || arguments.value(option) != nil) {
            throw .usage("--\(option) is for 'cmdbus bus \(verbs.joined(separator: "' and '"))', not 'bus \(verb)', which would ignore it; leave it out")
        }
    }

    private static let verbs: [String: Verb] = [
        "status": Verb(run: status), "pause": Verb(run: pause), "resume": Verb(run: resume), "limit": Verb(run: limit),
        "periodic": Verb(run: periodic), "cancel": Verb(run: cancel), "retry": Verb(run: retry),
    ]

    /// The subcommands of `cmdbus bus`, for shell completion.
    static var verbNames: [String] { verbs.keys.sorted() }

    /// The shared bus's client, for `verb`.
    private static func client(_ arguments: ArgumentSpec.Parsed, verb: String, console: Console) throws(HostFailure) -> PostgresBusClient {
        guard let url = try ConnectionOptions(arguments).bus else {
            throw .usage("'cmdbus bus \(verb)' needs the bus: --bus postgres://… or $CMDBUS_BUS")
        }
        return try BusClientFactory.sharedBus(url, console: console)
    }

    /// Runs `body` with the shared bus's client for `verb`, and closes it whether `body` succeeds or throws.
    static func withClient<T>(
        _ arguments: ArgumentSpec.Parsed, verb: String, console: Console, _ body: (PostgresBusClient) async throws(HostFailure) -> T
    ) async throws(HostFailure) -> T {
        let client = try client(arguments, verb: verb, console: console)
        do {
            let value = try await body(client)
            await client.close()
            return value
        } catch {
            await client.close()
            throw error
        }
    }

    private static func pause(_ arguments: ArgumentSpec.Parsed, _ operands: [String], _ console: Console) async throws(HostFailure) {
        try await setPaused(true, arguments, operands, console)
    }

    private static func resume(_ arguments: ArgumentSpec.Parsed, _ operands: [String], _ console: Console) async throws(HostFailure) {
        try await setPaused(false, arguments, operands, console)
    }

    /// `bus pause NAME...` and `bus resume NAME...` (or `--all`): one line a name, and a warning
    /// for each live host too old to know a pause that claims one of them all the same.
    private static func setPaused(_ paused: Bool, _ arguments: ArgumentSpec.Parsed, _ operands: [String], _ console: Console) async throws(HostFailure) {
        let verb = paused ? "pause" : "resume"
        let all = arguments.has("all")
        if all, let name = operands.first {
            throw .usage("--all \(verb)s every command name; give the names (\(quoted(name))…) or --all, not both")
        }
        guard all || !operands.isEmpty else {
            throw .usage("'cmdbus bus \(verb)' needs the command names to \(verb), or --all; 'cmdbus bus status' lists the queues")
        }
        if let problem = operands.lazy.compactMap(commandNameProblem).first { throw .usage(problem) }
        let (outcome, unhandled) = try await withClient(arguments, verb: verb, console: console) { client throws(HostFailure) in
            let outcome = try await client.setPaused(all ? nil : operands, paused)
            // A name no host handles is paused all the same (a host may join later), but may be a typo.
            return (outcome, paused && !all ? await client.namesNoHostHandles(Set(operands)) : [])
        }
        if all, outcome.changes.isEmpty {
            return console.out(paused
                ? "nothing to pause: no live host handles a command, and no command waits or runs"
                : "nothing to resume: no command name is paused")
        }
        for change in outcome.changes {
            if arguments.has("json") { console.out(change.json.text); continue }
            let name = quoted(change.name)
            let work = "\(change.pending) pending" + (change.running > 0 ? ", \(change.running) running" : "")
            switch (paused, change.changed) {
            case (true, true):
                let running = change.running > 0 ? "; the \(change.running) running finish" : ""
                console.out("paused \(name): no host claims it until 'cmdbus bus resume \(quotedLine(change.name))'; \(change.pending) pending wait\(running)")
            case (true, false): console.out("\(name) was paused already (\(work))")
            case (false, true): console.out("resumed \(name): hosts claim it again (\(work))")
            case (false, false): console.out("\(name) was not paused (\(work))")
            }
        }
        for name in unhandled {
            console.err("cmdbus: warning: no live host on the bus handles \(quoted(name)); it is paused all the same, for hosts that join later ('cmdbus bus status' lists what the hosts handle)")
        }
        for (host, command) in outcome.unaware {
            console.err("cmdbus: warning: host \(quotedLine(host)) runs a cmdbus from before pauses and claims \(quoted(command)) all the same; upgrade it")
        }
    }

    /// `cmdbus bus status` (and `cmdbus status --bus`).
    static func status(_ arguments: ArgumentSpec.Parsed, _ operands: [String], _ console: Console) async throws(HostFailure) {
        guard operands.isEmpty else { throw .usage("'cmdbus bus status' takes no operands") }
        let client = try client(arguments, verb: "status", console: console)
        let status = try await client.status().objectValue ?? [:]
        await client.close()
        if arguments.has("json") { return console.out(JSONValue.object(status).text) }
        let hosts = status["hosts"]?.arrayValue?.compactMap(\.objectValue) ?? []
        let live = hosts.filter { $0["live"] == .bool(true) }
        let queues = status["queues"]?.arrayValue?.compactMap(\.objectValue) ?? []
        func total(_ key: String) -> Int { queues.reduce(0) { $0 + (Int($1[key]?.text ?? "") ?? 0) } }
        let pausedNames = status["paused"]?.arrayValue?.count ?? 0
        console.out("bus \(client.redactedURL), schema version \(status["schemaVersion"]?.text ?? "?"), "
            + "\(counted(live.count, "live host")), \(status["running"]?.text ?? "0") running, \(total("pending")) pending, \(total("scheduled")) scheduled"
            + (pausedNames > 0 ? ", \(counted(pausedNames, "paused name"))" : ""))
        for host in hosts {
            let commands = host["commands"]?.arrayValue?.compactMap(\.stringValue).joined(separator: ", ") ?? ""
            let silent = host["secondsSinceHeartbeat"]?.doubleValue ?? 0
            console.out("  host \(host["id"]?.stringValue ?? "?") \(quotedLine(host["hostname"]?.stringValue ?? "?")) pid \(host["pid"]?.text ?? "?"): "
                + "\(host["live"] == .bool(true) ? "live" : "silent")\(host["draining"] == .bool(true) ? ", draining (claims nothing new)" : ""), heartbeat \((silent * 10).rounded() / 10) s ago, "
                + "running \(host["running"]?.text ?? "0"); handles \(quotedLine(commands))")
            for case .object(let quarantine) in host["quarantined"]?.arrayValue ?? [] {
                let what = quarantine["plugin"]?.stringValue.map { "plugin '\(quotedLine($0))' (\(quotedLine(quarantine["path"]?.stringValue ?? "?")))" }
                    ?? quotedLine(quarantine["path"]?.stringValue ?? "?")
                // Its reason says "quarantined: …" itself.
                let reason = quarantine["reason"]?.stringValue ?? "?"
                console.out("    quarantined: \(what): \(quotedLine(reason.hasPrefix("quarantined: ") ? String(reason.dropFirst(13)) : reason))")
            }
        }
        if hosts.contains(where: { $0["quarantined"] != nil }) {
            console.out("  ('cmdbus plugins forget FILE.so --bus URL' loads a quarantined file again on every host that has it)")
        }
        if queues.isEmpty { console.out("  nothing running, pending or scheduled") }
        let handled = Set(live.flatMap { $0["commands"]?.arrayValue?.compactMap(\.stringValue) ?? [] })
        for queue in queues {
            // The shallower queues past the limit come as one, saying how many names it holds.
            let names = queue["commands"].map { " (\(counted(Int($0.text) ?? 0, "more command name")))" } ?? ""
            let pending = queue["pending"]?.text ?? "0", scheduled = Int(queue["scheduled"]?.text ?? "0") ?? 0
            let running = Int(queue["running"]?.text ?? "0") ?? 0
            var parts = running > 0 ? ["\(running) running"] : []
            if pending != "0" || (scheduled == 0 && running == 0) {
                parts.append("\(pending) pending, oldest \(roughly(queue["oldestPendingSeconds"]?.doubleValue ?? 0))")
            }
            if scheduled > 0 { parts.append("\(scheduled) scheduled, next due in \(roughly(queue["nextDueSeconds"]?.doubleValue ?? 0))") }
            // What waits for a name no live host handles waits until a host whose plugins do joins.
            if queue["commands"] == nil, pending != "0" || scheduled > 0, let name = queue["command"]?.stringValue, !handled.contains(name) {
                parts.append("no live host handles it")
            }
            if let labels = queue["quarantinedOn"]?.arrayValue?.compactMap(\.stringValue), !labels.isEmpty {
                parts.append("quarantined on \(labels.map(quotedLine).joined(separator: ", "))")
            }
            let limits = [queue["limit"].map { "\($0.text) at once" }, queue["rate"].flatMap(rateText)].compactMap { $0 }
            let pause = (queue["paused"] == .bool(true) ? " (paused)" : "") + (limits.isEmpty ? "" : " (at most \(limits.joined(separator: ", ")))")
            console.out("  \(quotedLine(queue["command"]?.stringValue ?? "?"))\(names)\(pause): \(parts.joined(separator: "; "))")
        }
        for paused in status["paused"]?.arrayValue?.compactMap(\.objectValue) ?? [] {
            console.out("  paused: \(quotedLine(paused["command"]?.stringValue ?? "?")) for \(roughly(paused["pausedSeconds"]?.doubleValue ?? 0)), by \(quotedLine(paused["pausedBy"]?.stringValue ?? "?"))")
        }
        for limit in status["limits"]?.arrayValue?.compactMap(\.objectValue) ?? [] { console.out("  limit: \(limitLine(limit))") }
        for entry in status["periodic"]?.arrayValue?.compactMap(\.objectValue) ?? [] { console.out("  periodic: \(periodicLine(entry, handled: handled))") }
        warnOfDifferences(status["differences"], console: console)
    }

    /// Warns of the plugins the bus's live hosts load different builds of, and the commands
    /// different plugins take on different hosts (``BusCatalog``'s `differences`).
    static func warnOfDifferences(_ differences: JSONValue?, console: Console) {
        for difference in differences?.arrayValue ?? [] {
            console.err("cmdbus: warning: \(difference.objectValue?["message"]?.stringValue ?? "?")")
        }
    }

    /// A wait or a delay as a person reads it: seconds to a tenth under a minute, then minutes,
    /// hours, days; a whole number without its ".0" ("30 s", "1 h", "2.5 h").
    static func roughly(_ seconds: Double) -> String {
        switch seconds {
        case ..<60: "\(tenths(seconds)) s"
        case ..<3600: "\(Int(seconds / 60)) min"
        case ..<86400: "\(tenths(seconds / 3600)) h"
        default: "\(tenths(seconds / 86400)) d"
        }
    }

    /// `value` to a tenth, as "2.5", or "3" where the tenth is 0.
    private static func tenths(_ value: Double) -> String {
        let rounded = (value * 10).rounded() / 10
        return rounded == rounded.rounded() && abs(rounded) < 1e15 ? String(Int(rounded)) : String(rounded)
    }
}
