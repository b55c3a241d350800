import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `cmdbus run <command> [<json>] [-p key=value ...]`: sends one command and prints its result.
enum RunCommand {
    static let spec = ArgumentSpec(command: "run", options: [
        .init(name: "param", short: "p", takesValue: true, help: "Set a payload field: key=value (repeatable)."),
        .init(name: "meta", short: "m", takesValue: true, help: "Set envelope metadata: key=value (repeatable)."),
        .init(name: "timeout", short: "t", takesValue: true, help: "Fail with exit 75 after SECONDS."),
        .plugins, .connect, .insecurePlugins, .isolate, .noProbe, .probeTimeout, .json, .quiet, .help,
    ] + HostSession.journalOptions)

    static let help = """
        Usage: cmdbus run <command> [<json>] [-p key=value ...] [options]

        Sends one command on the bus and prints its JSON result on stdout.
        Events and logs go to stderr; a command with subcommands shows a
        progress line there when stderr is a terminal.

        Options:
        \(spec.optionsHelp)

        The command is journaled to \(HostSession.defaultJournalPath) unless --no-journal;
        commands a killed run left unfinished there run again first.

        Exit codes: 0 ok, 1 handler failed, 64 usage, 65 malformed payload,
        69 no handler, 74 journal unusable, 75 timed out.

        Example: cmdbus run greet '{"name": "Ada"}'    or    cmdbus run greet -p name=Ada
        """

    static func run(_ arguments: ArgumentSpec.Parsed, console: Console) async throws(CLIFailure) {
        guard let command = arguments.positionals.first else { throw .usage("'cmdbus run' needs a command name; see 'cmdbus run --help'") }
        guard arguments.positionals.count <= 2 else {
            throw .usage("'cmdbus run' takes a command and at most one JSON payload; got \(arguments.positionals.count - 1) payloads")
        }
        let payload = try PayloadBuilder.build(command: command, json: arguments.positionals.dropFirst().first, pairs: arguments.all("param"))
        let metadata = try keyValues(arguments.all("meta"), option: "--meta")
        let timeout = try timeout(arguments.value("timeout"))

        if let socket = ServerClient.socket(arguments) {
            return try runRemotely(socket, command: command, payload: payload, metadata: metadata, timeout: timeout, console: console)
        }
        let session = try await HostSession.start(arguments, console: console, reportSkipped: true, journaling: true)
        let printer = EventPrinter(console: console, stream: session.bus.events())
        let result: Result<Data, CommandBusError>
        do {
            result = .success(try await session.bus.send(name: command, payload: payload, metadata: metadata, timeout: timeout))
        } catch {
            result = .failure(error)
        }
        await session.close()
        session.bus.finishEventStreams()
        await printer.finish()
        switch result {
        case .success(let data): console.out(String(decoding: data, as: UTF8.self))
        case .failure(let error): throw session.failure(error, command: command)
        }
    }

    /// `run --connect`: the server runs the command; the output and exit code are those of a local run.
    private static func runRemotely(
        _ socket: String, command: String, payload: Data, metadata: [String: String], timeout: Duration?, console: Console
    ) throws(CLIFailure) {
        guard let value = JSONValue.parse(String(decoding: payload, as: UTF8.self)) else {
            throw CLIFailure(message: "payload for '\(command)' is not valid JSON", exitCode: .malformedPayload, code: "decodingFailed", command: command, plugin: nil)
        }
        var request: [String: JSONValue] = ["op": .string("send"), "command": .string(command), "payload": value, "events": .bool(true)]
        if !metadata.isEmpty { request["metadata"] = .object(metadata.mapValues(JSONValue.string)) }
        if let timeout { request["timeout"] = .number(Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18) }
        let response = try ServerClient.request(socket, request) { event in
            EventPrinter.printRemote(event, console: console)
        }
        guard response["ok"] == .bool(true), let result = response["result"] else { throw ServerClient.failure(response, command: command) }
        console.out(result.text)
    }

    /// `--timeout SECONDS` as a duration.
    static func timeout(_ text: String?) throws(CLIFailure) -> Duration? {
        guard let text else { return nil }
        guard let seconds = Double(text), seconds > 0, seconds.isFinite else {
            throw .usage("--timeout takes a positive number of seconds, got \(quoted(text))")
        }
        return .milliseconds(Int64(seconds * 1000))
    }

    static func keyValues(_ pairs: [String], option: String) throws(CLIFailure) -> [String: String] {
        var values: [String: String] = [:]
        for pair in pairs {
            guard let equals = pair.firstIndex(of: "="), equals != pair.startIndex else {
                throw .usage("\(option) takes key=value, got \(quoted(pair))")
            }
            values[String(pair[..<equals])] = String(pair[pair.index(after: equals)...])
        }
        return values
    }
}
