import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `cmdbus batch [FILE|-]`: runs NDJSON commands with bounded concurrency, one result line each.
enum BatchCommand {
    static let spec = ArgumentSpec(command: "batch", options: [
        .init(name: "concurrency", short: "c", takesValue: true, help: "Commands in flight at once (default 64)."),
        .init(name: "timeout", short: "t", takesValue: true, help: "A deadline for each command, in seconds."),
        .plugins, .connect, .insecurePlugins, .isolate, .noProbe, .probeTimeout, .quiet, .help,
    ] + HostSession.journalOptions)

    static let help = """
        Usage: cmdbus batch [FILE|-] [options]

        Reads one command per line, {"command": NAME, "payload": {...}}, from FILE or
        standard input, runs them with bounded concurrency, and writes one NDJSON
        line per command to stdout as it finishes:
          {"line": 1, "id": "...", "command": "greet", "state": "succeeded", "result": {...}}
          {"line": 2, "id": "...", "command": "greet", "state": "failed", "error": {"code": ..., "message": ...}}
        A command counts as acknowledged once its line is printed; by then its outcome
        is durable in the journal. A malformed input line gets a line with its error.

        Exit codes: 0 every command succeeded, 1 some did not, 64 usage, 74 journal unusable.

        Options:
        \(spec.optionsHelp)
        """

    /// One input line: a command name and its payload.
    private struct Line: Decodable {
        let command: String
        let payload: JSONValue?
    }

    static func run(_ arguments: ArgumentSpec.Parsed, console: Console) async throws(CLIFailure) {
        guard arguments.positionals.count <= 1 else { throw .usage("'cmdbus batch' reads one FILE (or - for standard input)") }
        let reader = try LineReader(path: arguments.positionals.first ?? "-")
        let concurrency = try positiveInteger(arguments.value("concurrency"), option: "--concurrency") ?? 64
        let timeout = try RunCommand.timeout(arguments.value("timeout"))
        if let socket = ServerClient.socket(arguments) {
            return try runRemotely(socket, reader: reader, concurrency: concurrency, timeout: timeout, console: console)
        }
        let session = try await HostSession.start(arguments, console: console, reportSkipped: true, journaling: true)

        var number = 0, failures = 0
        await withTaskGroup(of: JSONValue.self) { group in
            var inFlight = 0
            while let text = reader.next() {
                number += 1
                if text.allSatisfy(\.isWhitespace) { continue }
                if inFlight >= concurrency, let line = await group.next() {
                    inFlight -= 1
                    if !emit(line, console) { failures += 1 }
                }
                let lineNumber = number
                group.addTask { await execute(text, line: lineNumber, bus: session.bus, journal: session.journal, timeout: timeout) }
                inFlight += 1
            }
            for await line in group where !emit(line, console) { failures += 1 }
        }
        await session.close()
        if failures > 0 {
            throw CLIFailure(message: "\(failures) of the batch's commands did not succeed", exitCode: .failure, code: "handlerFailed", command: nil, plugin: nil)
        }
    }

    /// `batch --connect`: the server runs the commands; requests are pipelined on one connection,
    /// at most `concurrency` unanswered, and each answer is printed as a local batch prints it.
    private static func runRemotely(_ socket: String, reader: LineReader, concurrency: Int, timeout: Duration?, console: Console) throws(CLIFailure) {
        let connection = try ServerConnection(socket)
        var number = 0, waiting = 0, failures = 0
        var names: [Int: String] = [:]
        func answer() throws(CLIFailure) {
            let response = try connection.receive()
            guard case .integer(let line)? = response["id"] else { return }
            waiting -= 1
            var fields: [String: JSONValue] = ["line": .integer(line), "command": .string(names.removeValue(forKey: Int(line)) ?? "")]
            if case .string(let id)? = response["commandId"] { fields["id"] = .string(id) }
            if response["ok"] == .bool(true) {
                fields["state"] = .string(CommandState.succeeded.rawValue)
                fields["result"] = response["result"] ?? .null
            } else {
                let code = if case .object(let error)? = response["error"], case .string(let code)? = error["code"] { code } else { "failed" }
                fields["state"] = .string(code == "timedOut" ? "timedOut" : code == "cancelled" ? "cancelled" : "failed")
                fields["error"] = response["error"] ?? .null
            }
            if !emit(.object(fields), console) { failures += 1 }
        }
        while let text = reader.next() {
            number += 1
            if text.allSatisfy(\.isWhitespace) { continue }
            guard let parsed = try? JSONDecoder().decode(Line.self, from: Data(text.utf8)) else {
                failures += 1
                _ = emit(.object([
                    "line": .integer(Int64(number)), "state": .string(CommandState.failed.rawValue),
                    "error": .object(["code": .string("decodingFailed"), "message": .string("line \(number) is not {\"command\": NAME, \"payload\": {...}}")]),
                ]), console)
                continue
            }
            while waiting >= concurrency { try answer() }
            var request: [String: JSONValue] = [
                "id": .integer(Int64(number)), "op": .string("send"), "command": .string(parsed.command), "payload": parsed.payload ?? .object([:]),
            ]
            if let timeout { request["timeout"] = .number(Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18) }
            names[number] = parsed.command
            try connection.send(.object(request))
            waiting += 1
        }
        while waiting > 0 { try answer() }
        if failures > 0 {
            throw CLIFailure(message: "\(failures) of the batch's commands did not succeed", exitCode: .failure, code: "handlerFailed", command: nil, plugin: nil)
        }
    }

    /// Prints a result line; returns whether its command succeeded.
    private static func emit(_ line: JSONValue, _ console: Console) -> Bool {
        console.out(line.text)
        guard case .object(let fields) = line else { return false }
        return fields["state"] == .string(CommandState.succeeded.rawValue)
    }

    /// Runs one input line and describes its outcome; the outcome is durable before this returns.
    private static func execute(_ text: String, line: Int, bus: CommandBus, journal: SQLiteJournal?, timeout: Duration?) async -> JSONValue {
        guard let parsed = try? JSONDecoder().decode(Line.self, from: Data(text.utf8)) else {
            return .object([
                "line": .integer(Int64(line)), "state": .string(CommandState.failed.rawValue),
                "error": .object(["code": .string("decodingFailed"), "message": .string("line \(line) is not {\"command\": NAME, \"payload\": {...}}")]),
            ])
        }
        let payload = Data((parsed.payload ?? .object([:])).text.utf8)
        let ticket = bus.post(name: parsed.command, payload: payload, timeout: timeout)
        var fields: [String: JSONValue] = [
            "line": .integer(Int64(line)), "id": .string(ticket.id.uuidString), "command": .string(parsed.command),
        ]
        do {
            let result = try await ticket.result
            fields["result"] = JSONValue.parse(String(decoding: result, as: UTF8.self)) ?? .string(String(decoding: result, as: UTF8.self))
        } catch {
            fields["error"] = .object(["code": .string(error.code.description), "message": .string(error.message)])
        }
        fields["state"] = .string(ticket.state.rawValue)
        return .object(fields)
    }

    static func positiveInteger(_ text: String?, option: String) throws(CLIFailure) -> Int? {
        guard let text else { return nil }
        guard let value = Int(text), value > 0 else { throw .usage("\(option) takes a positive whole number, got \(quoted(text))") }
        return value
    }
}
