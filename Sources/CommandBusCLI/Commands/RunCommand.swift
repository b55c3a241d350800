import CommandBusSupport
import CommandBusHost
import CommandBusServer
import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `cmdbus run <command> [<json>] [-p key=value ...]`: sends one command and prints its result.
enum RunCommand {
    static let spec = ArgumentSpec(command: "run", options: [
        .init(name: "param", short: "p", value: "KEY=VALUE", help: "Set a payload field: key=value (repeatable)."),
        .init(name: "meta", short: "m", value: "KEY=VALUE", help: "Set envelope metadata: key=value (repeatable)."),
        .init(name: "verbose", short: "v", help: "Print the command's id on stderr as soon as the bus accepts it."),
        .init(name: "timeout", short: "t", value: "SECONDS", help: "Fail with exit 75 after SECONDS."),
        .init(name: "delay", short: nil, value: "SECONDS", help: "Start no sooner than SECONDS from now (30, 30s, 5m)."),
        .init(name: "no-wait", short: nil, help: "Print the command's id once the bus has it; don't wait (with --connect or --bus)."),
        .connect, .bus, .json, .help,
    ] + QueueOptions.options + PluginOptions.options + JournalOptions.options)

    static let help = """
        Usage: cmdbus run <command> [<json> | @FILE | -] [-p key=value ...] [options]

        Sends one command on the bus and prints its JSON result on stdout
        (with --no-wait, its id once the bus has it). The payload is JSON text,
        @FILE for a file's, or - for standard input's; -p fields go on top.
        Events and logs go to stderr; a command with subcommands shows a
        progress line there when stderr is a terminal.

        Options:
        \(spec.optionsHelp)

        The command is journaled to \(JournalOptions.defaultPath) unless --no-journal;
        commands a killed run left unfinished there run again first.

        Exit codes: 0 ok, 1 handler failed, 64 usage, 65 malformed payload,
        69 no handler, 74 journal unusable, 75 timed out.

        Example: cmdbus run greet '{"name": "Ada"}'    or    cmdbus run greet -p name=Ada
        """

    static func run(_ arguments: ArgumentSpec.Parsed, console: Console) async throws(HostFailure) {
        guard let command = arguments.positionals.first else { throw .usage("'cmdbus run' needs a command name; see 'cmdbus run --help'") }
        if let problem = commandNameProblem(command) { throw .usage(problem + "; 'cmdbus plugins' lists the commands") }
        guard arguments.positionals.count <= 2 else {
            throw .usage("'cmdbus run' takes a command and at most one JSON payload; got \(arguments.positionals.count - 1) payloads")
        }
        let payload = try PayloadBuilder.build(
            command: command, operand: arguments.positionals.dropFirst().first, pairs: arguments.all("param"),
            maxBytes: try arguments.positiveInteger("max-payload") ?? JournalOptions.defaultMaxPayloadBytes
        )
        let metadata = try arguments.keyValues("meta")
        if let trace = metadata[TraceContext.key], !TraceContext.isValid(trace) { throw .usage(TraceContext.problem(trace)) }
        var request = CommandRequest(name: command, payload: payload, metadata: metadata, timeout: try arguments.seconds("timeout"),
            delay: try arguments.duration("delay")
        )
        let connection = try ConnectionOptions(arguments)
        try QueueOptions(arguments, connection: connection).apply(to: &request)
        if arguments.has("no-wait") {
            try connection.requireLastingBus(forNoWaitOn: "run")
            if connection.socket != nil, request.delay != nil {
                throw .usage("--delay with --connect is waited out by this run, so it cannot go with --no-wait; the shared bus (--bus) keeps a delay itself")
            }
        }
        let client = try await BusClientFactory.client(
            connection: connection, plugins: try PluginOptions(arguments).deferringLoads, journal: try JournalOptions(arguments), console: console
        )
        if arguments.has("no-wait") {
            return try await post(request, on: client, console: console, json: arguments.has("json"))
        }
        if let delay = request.delay, delay >= .seconds(1), !arguments.has("json"), let text = arguments.value("delay") {
            // A run that waits out a delay says so: otherwise it looks hung.
            let seconds = Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18
            let at = Date.now.addingTimeInterval(seconds).formatted(.iso8601)
            console.err("cmdbus: \(quoted(command)) starts in \(Double(text) == nil ? text : text + "s") (at \(at)); this run waits for its result (Ctrl-C cancels it)")
        }
        if !arguments.has("json"), await !client.namesPaused([command]).isEmpty {
            // As a delay: a run that waits for a resume says so, or it looks hung.
            console.err("cmdbus: \(quoted(command)) is paused on the bus: this run waits until 'cmdbus bus resume \(quotedLine(command))' (Ctrl-C cancels it)")
        }
        let printer = EventPrinter(console: console, json: arguments.has("json"), verbose: arguments.has("verbose"))
        let result: Result<Data, HostFailure>
        do {
            result = .success(try await client.send(request, onEvent: printer.print))
        } catch {
            result = .failure(error)
        }
        await client.close()
        printer.finish()
        do {
            console.out(String(decoding: try result.get(), as: UTF8.self))
        } catch {
            var failure = hinted(error, pairs: arguments.all("param"))
            failure.commandID = failure.commandID ?? printer.commandID
            throw failure
        }
    }

    /// `--no-wait`: posts the command and prints its id once the bus has it (a server's journal,
    /// or the shared bus's table).
    private static func post(_ request: CommandRequest, on client: any BusClient, console: Console, json: Bool) async throws(HostFailure) {
        let posted: Result<UUID, HostFailure>
        do { posted = .success(try await client.post(request)) } catch { posted = .failure(error) }
        if case .success(let id) = posted {
            console.out(json ? JSONValue.object(["commandId": .string(id.uuidString)]).text : id.uuidString)
            await BusClientFactory.warnOfPostsNoHostTakes([request.name], on: client, console: console)
        }
        await client.close()
        _ = try posted.get()
    }

    /// A payload that did not decode, with a hint when a `-p` value was read as a non-string.
    private static func hinted(_ failure: HostFailure, pairs: [String]) -> HostFailure {
        guard failure.code == .decodingFailed else { return failure }
        for field in PayloadBuilder.nonStringFields(pairs) where failure.message.contains("'\(field.key)'") {
            let hint = " (-p read \(field.key)=\(field.value) as \(field.kind); for a string, quote it: -p '\(field.key)=\"\(field.value)\"')"
            return HostFailure(failure.code, failure.message + hint, command: failure.command, plugin: failure.plugin)
        }
        return failure
    }
}
