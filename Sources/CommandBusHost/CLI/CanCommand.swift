import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `cmdbus can <command> [<json>]`: exits 0 if some handler would take the command now, 69 if none would.
enum CanCommand {
    static let spec = ArgumentSpec(command: "can", options: [
        .init(name: "param", short: "p", takesValue: true, help: "Set a payload field: key=value (repeatable)."),
        .plugins, .connect, .insecurePlugins, .isolate, .noProbe, .probeTimeout, .json, .quiet, .help,
        .init(name: "max-payload", short: nil, takesValue: true, help: "Largest payload in bytes (default 16777216)."),
    ])

    static let help = """
        Usage: cmdbus can <command> [<json>] [-p key=value ...] [options]

        Asks whether some handler would take the command now, without running it.
        Exits 0 if one would, 69 if none would, 65 if the payload is malformed.

        Options:
        \(spec.optionsHelp)
        """

    static func run(_ arguments: ArgumentSpec.Parsed, console: Console) async throws(CLIFailure) {
        guard let command = arguments.positionals.first else { throw .usage("'cmdbus can' needs a command name; see 'cmdbus can --help'") }
        guard arguments.positionals.count <= 2 else { throw .usage("'cmdbus can' takes a command and at most one JSON payload") }
        let payload = try PayloadBuilder.build(command: command, json: arguments.positionals.dropFirst().first, pairs: arguments.all("param"))
        if let socket = ServerClient.socket(arguments) {
            let value = JSONValue.parse(String(decoding: payload, as: UTF8.self)) ?? .string(String(decoding: payload, as: UTF8.self))
            let response = try ServerClient.request(socket, ["op": .string("can"), "command": .string(command), "payload": value])
            guard response["ok"] == .bool(true) else { throw ServerClient.failure(response, command: command) }
            if arguments.has("json") { console.out(JSONValue.object(["command": .string(command), "canHandle": response["canHandle"] ?? .bool(false)]).text) }
            guard response["canHandle"] == .bool(true) else {
                throw CLIFailure(message: "no handler for command '\(command)' would take it now (server at \(socket))", exitCode: .noHandler, code: "noHandler", command: command, plugin: nil)
            }
            return
        }
        let session = try await HostSession.start(arguments, console: console, reportSkipped: true)
        let answer: Bool
        do {
            answer = try session.bus.canHandle(name: command, payload: payload)
        } catch {
            throw session.failure(error, command: command)
        }
        if arguments.has("json") { console.out(JSONValue.object(["command": .string(command), "canHandle": .bool(answer)]).text) }
        guard answer else {
            let registered = session.bus.handlerCount(for: command)
            throw session.failure(.noHandler(command, registered: registered), command: command)
        }
    }
}
