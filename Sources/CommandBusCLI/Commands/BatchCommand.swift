import CommandBusSupport
import CommandBusSQLite
import CommandBusHost
import CommandBusServer
import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `cmdbus batch [FILE|-]`: runs NDJSON commands with bounded concurrency, one result line each.
enum BatchCommand {
    static let spec = ArgumentSpec(command: "batch", options: [
        .init(name: "concurrency", short: "c", value: "N", help: "Commands in flight at once (default 64); posts to the shared bus, statements at once."),
        .init(name: "timeout", short: "t", value: "SECONDS", help: "A deadline for each command, in seconds."),
        .init(name: "no-wait", short: nil, help: "Post each command and print its id once the bus has it (with --connect or --bus)."),
        .connect, .bus, .help,
    ] + QueueOptions.options + PluginOptions.options + JournalOptions.options)

    static let help = """
        Usage: cmdbus batch [FILE|-] [options]

        Reads one command per line, {"command": NAME, "payload": {...}}, from FILE or
        standard input (a line may add envelope metadata, "metadata": {KEY: TEXT}, such
        as "idempotency-key" on the shared bus, and there a "priority": N and a
        "maxAttempts": N of its own, over the options'), runs them with bounded concurrency, and
        writes one NDJSON line per command to stdout as it finishes:
          {"line": 1, "id": "...", "command": "greet", "state": "succeeded", "result": {...}}
          {"line": 2, "id": "...", "command": "greet", "state": "failed", "error": {"code": ..., "message": ...}}
        A command counts as acknowledged once its line is printed; by then its outcome
        is durable in the journal. A malformed input line gets a line with its error.
        With --no-wait (through a server or the shared bus), each command is posted
        and its line, {"line": 1, "id": "...", "command": "greet", "state": "pending"},
        is printed once the bus has it; the commands run there.

        A reader that stops reading (| head) stops the batch once the commands in flight
        have ended; it then ends by SIGPIPE, as a tool whose reader left does.

        Exit codes: 0 every command succeeded, 1 some did not, 64 usage, 74 journal unusable.

        Options:
        \(spec.optionsHelp)
        """

    /// One input line: a command name, its payload and, if it has any, envelope metadata.
    private struct Line: Decodable {
        let command: String
        let payload: JSONValue?
        let metadata: [String: String]?
        /// Its place in the shared bus's queue and how often the bus runs it at most, over the options.
        let priority: Int?
        let maxAttempts: Int?
    }

    static func run(_ arguments: ArgumentSpec.Parsed, console: Console) async throws(HostFailure) {
        guard arguments.positionals.count <= 1 else { throw .usage("'cmdbus batch' reads one FILE (or - for standard input)") }
        let reader = try LineReader(path: arguments.positionals.first ?? "-")
        let concurrency = try arguments.positiveInteger("concurrency") ?? 64
        let timeout = try arguments.seconds("timeout")
        let connection = try ConnectionOptions(arguments)
        let queueing = try QueueOptions(arguments, connection: connection)
        let posting = arguments.has("no-wait")
        if posting { try connection.requireLastingBus(forNoWaitOn: "batch") }
        let client = try await BusClientFactory.client(
            connection: connection, plugins: try PluginOptions(arguments).deferringLoads, journal: try JournalOptions(arguments), console: console
        )
        var number = 0, failures = 0
        /// Writes the outcome of a line refused before it could be sent: failed, `decodingFailed`.
        func refuse(_ message: String, command: String? = nil) {
            failures += 1
            var fields: [String: JSONValue] = [
                "line": .integer(Int64(number)), "state": .string(CommandState.failed.rawValue),
                "error": .object(["code": .string("decodingFailed"), "message": .string(message)]),
            ]
            if let command { fields["command"] = .string(command) }
            console.out(JSONValue.object(fields).text)
        }
        // Hands out the next well-formed line as a request; a malformed line gets its error line here.
        // A reader that went away (`| head`) takes no more lines: those in flight end, and
        // the process then ends as the tool's reader left it (``CommandLineTool/run(_:notUTF8:)``).
        func next() -> CommandRequest? {
            while !console.readerWentAway, let bytes = reader.next() {
                number += 1
                if bytes.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D || $0 == 0x0B || $0 == 0x0C }) { continue }
                guard let line = try? JSONDecoder().decode(Line.self, from: Data(bytes)) else {
                    // The line's own number is said first; within it, the column is enough.
                    let syntax = JSONValue.syntaxError(in: bytes)?.replacingOccurrences(of: " at line 1, column ", with: " at column ")
                    refuse("line \(number) is not {\"command\": NAME, \"payload\": {...}} (with \"metadata\", if any, an object of strings)"
                        + (syntax.map { ": it is not JSON (\($0))" } ?? ""))
                    continue
                }
                if let fault = commandNameFault(line.command) {
                    refuse("line \(number): its \"command\" is not a command name: \(fault)", command: line.command)
                    continue
                }
                if let problem = QueueOptions.problem(priority: line.priority, maxAttempts: line.maxAttempts, onTheBus: connection.bus != nil) {
                    refuse("line \(number): \(problem)", command: line.command)
                    continue
                }
                var request = CommandRequest(
                    name: line.command, payload: (line.payload ?? .object([:])).data, metadata: line.metadata ?? [:], timeout: timeout, tag: number
                )
                queueing.apply(to: &request)
                if let priority = line.priority { request.priority = priority }
                if let maxAttempts = line.maxAttempts { request.maxAttempts = maxAttempts }
                return request
            }
            return nil
        }
        var posted: Set<String> = []
        let report = { (outcome: CommandOutcome) in
            if posting && outcome.state == .pending { posted.insert(outcome.command) }
            if outcome.state != (posting ? .pending : .succeeded) { failures += 1 }
            console.out(outcome.json.text)
        }
        if posting {
            try await client.postAll(concurrency: concurrency, next: next, isNextReady: { reader.hasInputReady }, onOutcome: report)
            await BusClientFactory.warnOfPostsNoHostTakes(posted, on: client, console: console)
        } else {
            try await client.sendAll(concurrency: concurrency, next: next, onOutcome: report)
        }
        await client.close()
        if failures > 0 {
            throw HostFailure(.someFailed, "\(failures) of the batch's commands did not \(posting ? "post" : "succeed")")
        }
    }
}
