import CommandBus
import CommandBusHost
import CommandBusServer
import CommandBusSupport
/// `cmdbus status --connect[=SOCKET]`: a running server's uptime, plugins, work in flight,
/// counts, and latency per command.
enum StatusCommand {
    static let spec = ArgumentSpec(command: "status", options: [.connect, .bus, .json, .help])

    static let help = """
        Usage: cmdbus status [--connect[=SOCKET]] [--json]

        Asks a running 'cmdbus serve' (default socket \(CommandServer.defaultSocketPath)) for its
        uptime, plugins, commands in flight, completed and failed counts, its memory,
        descriptors and threads, how often it held clients back at --max-in-flight, and
        p50/p99 latency per command name.

        Options:
        \(spec.optionsHelp)
        """

    static func run(_ arguments: ArgumentSpec.Parsed, console: Console) async throws(HostFailure) {
        guard arguments.positionals.isEmpty else { throw .usage("'cmdbus status' takes no operands") }
        let connection = try ConnectionOptions(arguments)
        if connection.bus != nil { return try await BusCommand.status(arguments, [], console) }
        // A status is a running server's: without --connect, the default socket's.
        let client = SocketBusClient(socket: connection.socket ?? CommandServer.defaultSocketPath)
        let status = try await client.status().objectValue ?? [:]
        if arguments.has("json") { return console.out(JSONValue.object(status).text) }
        // A figure to a tenth, or "?" where the server sent none.
        func number(_ value: JSONValue?) -> String {
            switch value {
            case .integer(let value)?: String(value)
            case .number(let value)?: String((value * 10).rounded() / 10)
            default: "?"
            }
        }
        func count(_ value: JSONValue?, _ noun: String) -> String {
            if case .integer(let count)? = value { counted(Int(count), noun) } else { "? \(noun)s" }
        }
        console.out("uptime \(number(status["uptimeSeconds"])) s, \(count(status["plugins"], "plugin")), \(number(status["inFlight"])) in flight, "
            + "\(number(status["completed"])) completed, \(number(status["failed"])) failed")
        if let problem = status["journalProblem"]?.stringValue { console.out("warning: \(problem)") }
        for case .object(let plugin) in status["quarantined"]?.arrayValue ?? [] {
            let name = quotedLine(plugin["plugin"]?.stringValue ?? "?"), path = quotedLine(plugin["path"]?.stringValue ?? "?")
            console.out("warning: plugin '\(name)' (\(path)) \(quotedLine(plugin["reason"]?.stringValue ?? "quarantined"))")
        }
        if case .integer(let resident)? = status["residentBytes"] {
            console.out("resident \(resident >> 20) MB, \(number(status["openDescriptors"])) of \(number(status["maxDescriptors"])) descriptors open, \(count(status["threads"], "thread"))")
        }
        if case .integer(let times)? = status["maxInFlightReached"], times > 0 {
            console.out("clients held back \(counted(Int(times), "time")) at the bound of \(number(status["maxInFlight"])) commands in flight (--max-in-flight)")
        }
        if case .object(let commands)? = status["commands"] {
            for name in commands.keys.sorted() {
                guard case .object(let figures)? = commands[name] else { continue }
                console.out("  \(name): \(count(figures["count"], "run")), p50 \(number(figures["p50Ms"])) ms, p99 \(number(figures["p99Ms"])) ms")
            }
        }
        if case .array(let oldest)? = status["oldestInFlight"], !oldest.isEmpty {
            console.out("oldest in flight (cancel with 'cmdbus cancel ID'):")
            for case .object(let entry) in oldest {
                let name = entry["command"]?.stringValue ?? "?", id = entry["commandId"]?.stringValue ?? "?"
                console.out("  \(quotedLine(name)) \(id) \(entry["state"]?.stringValue ?? "?") for \(number(entry["ageSeconds"])) s")
            }
        }
    }
}
