import CommandBus
import CommandBusHost
import CommandBusLoading
import CommandBusPostgres
import CommandBusSupport

/// `cmdbus bus status`: the shared bus's schema version, live hosts, queue depth per command
/// name and the age of the oldest pending command.
enum BusCommand {
    static let spec = ArgumentSpec(command: "bus", options: [.bus, .json, .help])

    static let help = """
        Usage: cmdbus bus status [--bus URL] [--json]

        Shows the shared bus in PostgreSQL (--bus URL, else $CMDBUS_BUS): its schema version,
        each host with its last heartbeat, the commands it handles and runs now, and per command
        name the pending commands and the age of the oldest. Passwords in URLs are never shown.

        Options:
        \(spec.optionsHelp)
        """

    static func run(_ arguments: ArgumentSpec.Parsed, console: Console) async throws(HostFailure) {
        try await Verb.dispatch(verbs, command: "bus", arguments, console)
    }

    private static let verbs: [String: Verb] = ["status": Verb(run: status)]

    /// The subcommands of `cmdbus bus`, for shell completion.
    static var verbNames: [String] { verbs.keys.sorted() }

    /// `cmdbus bus status` (and `cmdbus status --bus`).
    static func status(_ arguments: ArgumentSpec.Parsed, _ operands: [String], _ console: Console) async throws(HostFailure) {
        guard operands.isEmpty else { throw .usage("'cmdbus bus status' takes no operands") }
        guard let url = try ConnectionOptions(arguments).bus else {
            throw .usage("'cmdbus bus status' needs the bus: --bus postgres://… or $CMDBUS_BUS")
        }
        let client = try BusClientFactory.sharedBus(url, console: console)
        let status = try await client.status().objectValue ?? [:]
        await client.close()
        if arguments.has("json") { return console.out(JSONValue.object(status).text) }
        let hosts = status["hosts"]?.arrayValue?.compactMap(\.objectValue) ?? []
        let live = hosts.filter { $0["live"] == .bool(true) }
        console.out("bus \(client.redactedURL), schema version \(status["schemaVersion"]?.text ?? "?"), "
            + "\(counted(live.count, "live host")), \(status["running"]?.text ?? "0") running")
        for host in hosts {
            let commands = host["commands"]?.arrayValue?.compactMap(\.stringValue).joined(separator: ", ") ?? ""
            let silent = host["secondsSinceHeartbeat"].flatMap { value -> Double? in if case .number(let n) = value { n } else { nil } } ?? 0
            console.out("  host \(host["id"]?.stringValue ?? "?") \(quotedLine(host["hostname"]?.stringValue ?? "?")) pid \(host["pid"]?.text ?? "?"): "
                + "\(host["live"] == .bool(true) ? "live" : "silent"), heartbeat \((silent * 10).rounded() / 10) s ago, "
                + "running \(host["running"]?.text ?? "0"); handles \(quotedLine(commands))")
        }
        let queues = status["queues"]?.arrayValue?.compactMap(\.objectValue) ?? []
        if queues.isEmpty { console.out("  no pending commands") }
        for queue in queues {
            func seconds(_ key: String) -> Double? { queue[key].flatMap { value -> Double? in if case .number(let n) = value { n } else { nil } } }
            // The shallower queues past the limit come as one, saying how many names it holds.
            let names = queue["commands"].map { " (\(counted(Int($0.text) ?? 0, "more command name")))" } ?? ""
            let pending = queue["pending"]?.text ?? "0", scheduled = Int(queue["scheduled"]?.text ?? "0") ?? 0
            var parts = pending == "0" && scheduled > 0 ? [] : ["\(pending) pending, oldest \(roughly(seconds("oldestPendingSeconds") ?? 0))"]
            if scheduled > 0 { parts.append("\(scheduled) scheduled, next due in \(roughly(seconds("nextDueSeconds") ?? 0))") }
            console.out("  \(quotedLine(queue["command"]?.stringValue ?? "?"))\(names): \(parts.joined(separator: "; "))")
        }
        for difference in status["differences"]?.arrayValue ?? [] {
            console.err("cmdbus: warning: \(difference.objectValue?["message"]?.stringValue ?? "?")")
        }
    }

    /// A wait or a delay as a person reads it: seconds to a tenth under a minute, then minutes, hours, days.
    static func roughly(_ seconds: Double) -> String {
        switch seconds {
        case ..<60: "\((seconds * 10).rounded() / 10) s"
        case ..<3600: "\(Int(seconds / 60)) min"
        case ..<86400: "\((seconds / 360).rounded() / 10) h"
        default: "\((seconds / 8640).rounded() / 10) d"
        }
    }
}
