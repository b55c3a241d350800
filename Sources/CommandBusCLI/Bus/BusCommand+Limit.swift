import CommandBus
import CommandBusHost
import CommandBusPostgres
import CommandBusSupport

/// `cmdbus bus limit`: how many commands of a name run at once across the bus (`N`), and how
/// many start in a period (`--rate 10/s`), each set, kept or removed on its own.
extension BusCommand {
    /// `bus limit NAME... [N|none] [--rate R|none]`: one line a name and limit changed, and a
    /// warning for each live host too old to know what was set that claims one of the names all
    /// the same; `bus limit` alone lists the limits.
    static func limit(_ arguments: ArgumentSpec.Parsed, _ operands: [String], _ console: Console) async throws(HostFailure) {
        let rate = try rateSetting(arguments.value("rate"), option: "--rate")
        guard let last = operands.last else {
            if rate != .keep { throw .usage("'cmdbus bus limit --rate' needs the command names to limit: 'cmdbus bus limit report --rate 10/s'") }
            return try await listLimits(arguments, console)
        }
        let atOnce: BusLimit.Setting<Int>
        var names = operands
        switch last {
        case "none":
            atOnce = .remove
            names.removeLast()
        // A number that is not whole (`1e9`, `2.5`) is a limit mistyped, not a command name.
        case _ where Int(last) != nil || Double(last)?.isFinite == true:
            guard let number = Int(last), number >= 1, number <= Int(Int32.max) else {
                throw .usage("\(quoted(last)) is not a limit: give a whole number of at least 1, or 'none' to remove the limit")
            }
            atOnce = .set(number)
            names.removeLast()
        default:
            guard rate != .keep else {
                throw .usage("'cmdbus bus limit' needs command names and a limit: 'cmdbus bus limit \(quotedLine(last)) 2' (at once), "
                    + "'--rate 10/s' (starts a second), or 'none' to remove one")
            }
            atOnce = .keep
        }
        guard !names.isEmpty else {
            throw .usage("'cmdbus bus limit' needs the command names before the limit: 'cmdbus bus limit report \(last)'")
        }
        if let problem = names.lazy.compactMap(commandNameProblem).first { throw .usage(problem) }
        // `bus limit greet 1 2`: a second limit, not a command named "1".
        if let number = names.first(where: { Int($0) != nil || $0 == "none" }) {
            throw .usage("\(quoted(number)) looks like a limit, not a command name: give the names, then one limit ('cmdbus bus limit report 2')")
        }
        let setting = atOnce != .remove || (rate != .remove && rate != .keep)
        let (outcome, unhandled) = try await withClient(arguments, verb: "limit", console: console) { client throws(HostFailure) in
            (try await client.setLimit(names, atOnce: atOnce, rate: rate), setting ? await client.namesNoHostHandles(Set(names)) : [])
        }
        for change in outcome.changes {
            if arguments.has("json") { console.out(change.json.text); continue }
            let work = "\(change.pending) pending, \(change.running) running"
            if atOnce != .keep { console.out(atOnceLine(change, work: work)) }
            if rate != .keep { console.out(rateLine(change, work: work)) }
        }
        for name in unhandled {
            console.err("cmdbus: warning: no live host on the bus handles \(quoted(name)); it is limited all the same, for hosts that join later ('cmdbus bus status' lists what the hosts handle)")
        }
        let before = rate == .keep || rate == .remove ? "limits" : "rates (--rate)"
        for (host, command) in outcome.unaware {
            console.err("cmdbus: warning: host \(quotedLine(host)) runs a cmdbus from before \(before) and claims \(quoted(command)) without one; upgrade it")
        }
    }

    /// What `--rate` (or the dashboard's `rate`, named by `option`) asks: keep the rate (not
    /// given), remove it (`none`) or set it (`10/s`).
    static func rateSetting(_ text: String?, option: String) throws(HostFailure) -> BusLimit.Setting<BusLimit.Rate> {
        guard let text else { return .keep }
        if text == "none" { return .remove }
        guard let rate = rate(in: text) else {
            throw .usage("\(option) takes how many may start in a period, such as 10/s, 100/m, 5/10s or 1000/h "
                + "(1 to \(BusLimit.Rate.mostStarts) in up to a week), or 'none' to remove it; got \(quoted(text))")
        }
        return .set(rate)
    }

    /// What the dashboard's `atOnce` (named by `option`) asks: keep the limit at once (not
    /// given), remove it (`none`) or set it (a whole number of at least 1).
    static func atOnceSetting(_ text: String?, option: String) throws(HostFailure) -> BusLimit.Setting<Int> {
        guard let text else { return .keep }
        if text == "none" { return .remove }
        guard let number = Int(text), number >= 1, number <= Int(Int32.max) else {
            throw .usage("\(option) takes how many may run at once, a whole number of at least 1, or 'none' to remove the limit; got \(quoted(text))")
        }
        return .set(number)
    }

    /// The rate `COUNT/PERIOD` names: a period is a unit alone (`s`, `m`, `h`, `d`, or `second`,
    /// `minute`, `hour`, `day`) or a duration (`10s`, `500ms`, `5m`).
    static func rate(in text: String) -> BusLimit.Rate? {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let starts = Int(parts[0]) else { return nil }
        let words: [String: Double] = [
            "second": 1, "sec": 1, "minute": 60, "min": 60, "hour": 3600, "day": 86_400, "week": 604_800,
        ]
        let period = String(parts[1])
        let unitAlone = ["ms", "s", "m", "h", "d", "w"].contains(period) ? ArgumentSpec.Parsed.seconds(in: "1" + period) : nil
        guard let seconds = words[period] ?? unitAlone ?? ArgumentSpec.Parsed.seconds(in: period), seconds > 0 else { return nil }
        return BusLimit.Rate(starts: starts, milliseconds: Int64((seconds * 1000).rounded()))
    }

    /// A rate as a person reads it: "10 starts a second", "1 start in any 10 s".
    static func describe(_ rate: BusLimit.Rate) -> String {
        let starts = counted(rate.starts, "start")
        switch rate.milliseconds {
        case 1000: return "\(starts) a second"
        case 60_000: return "\(starts) a minute"
        case 3_600_000: return "\(starts) an hour"
        case 86_400_000: return "\(starts) a day"
        default: return "\(starts) in any \(roughly(Double(rate.milliseconds) / 1000))"
        }
    }

    /// A rate as ``BusLimit/Rate/json`` writes it, as a person reads it.
    static func rateText(_ json: JSONValue) -> String? {
        guard case .object(let rate) = json, case .integer(let starts)? = rate["starts"], let period = rate["periodSeconds"]?.doubleValue,
              let known = BusLimit.Rate(starts: Int(starts), milliseconds: Int64((period * 1000).rounded())) else { return nil }
        return describe(known)
    }

    private static func atOnceLine(_ change: BusLimit.Change, work: String) -> String {
        let name = quoted(change.name)
        let was = change.before.map { ", where it was \($0)" } ?? ""
        if let after = change.after {
            let over = change.running >= after ? ": none starts until fewer than \(after) run" : ""
            return "limited \(name) to \(after) at once across the bus\(change.before == after ? " (as it was)" : was) (\(work)\(over))"
        } else if let before = change.before {
            return "\(name) has no limit at once across the bus now, where it was \(before) (\(work))"
        }
        return "\(name) had no limit at once across the bus (\(work))"
    }

    private static func rateLine(_ change: BusLimit.Change, work: String) -> String {
        let name = quoted(change.name)
        let was = change.rateBefore.map { ", where it was \(describe($0))" } ?? ""
        if let after = change.rateAfter {
            return "limited \(name) to \(describe(after)) across the bus\(change.rateBefore == after ? " (as it was)" : was) (\(work))"
        } else if let before = change.rateBefore {
            return "\(name) has no rate across the bus now, where it was \(describe(before)) (\(work))"
        }
        return "\(name) had no rate across the bus (\(work))"
    }

    /// `bus limit` alone: the limited names.
    private static func listLimits(_ arguments: ArgumentSpec.Parsed, _ console: Console) async throws(HostFailure) {
        let limits = try await withClient(arguments, verb: "limit", console: console) { client throws(HostFailure) in try await client.limits() }
        if arguments.has("json") { return console.out(limits.text) }
        let all = limits.arrayValue?.compactMap(\.objectValue) ?? []
        if all.isEmpty { return console.out("no command name is limited across the bus ('cmdbus bus limit NAME N' limits one)") }
        for limit in all { console.out(limitLine(limit)) }
    }

    /// One limit as `bus limit` and `bus status` show it: how many at once, the rate with how
    /// many started in its period just ended, who set them and when.
    static func limitLine(_ limit: [String: JSONValue]) -> String {
        var parts: [String] = []
        if case .integer(let most)? = limit["limit"] { parts.append("at most \(most) at once") }
        if let rate = limit["rate"], let text = rateText(rate) {
            let period = rate.objectValue?["periodSeconds"]?.doubleValue ?? 0
            parts.append("\(text) (\(limit["recentStarts"]?.text ?? "?") in the last \(roughly(period)))")
        }
        return "\(quotedLine(limit["command"]?.stringValue ?? "?")): \(parts.isEmpty ? "no limit" : parts.joined(separator: " and ")) across the bus, "
            + "set \(roughly(limit["setSeconds"]?.doubleValue ?? 0)) ago by \(quotedLine(limit["setBy"]?.stringValue ?? "?"))"
    }
}
