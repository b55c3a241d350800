import CommandBusSupport
import CommandBusHost
import CommandBusServer
import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `cmdbus can <command> [<json>]`: exits 0 if some handler would take the command now, 69 if none would.
enum CanCommand {
    static let spec = ArgumentSpec(command: "can", options: [
        .init(name: "param", short: "p", value: "KEY=VALUE", help: "Set a payload field: key=value (repeatable)."),
        .connect, .bus, .json, .help, .maxPayload,
    ] + PluginOptions.options)

    static let help = """
        Usage: cmdbus can <command> [<json> | @FILE | -] [-p key=value ...] [options]

        Asks whether some handler would take the command now, without running it.
        Exits 0 if one would, 69 if none would, 65 if the payload is malformed.

        Options:
        \(spec.optionsHelp)
        """

    static func run(_ arguments: ArgumentSpec.Parsed, console: Console) async throws(HostFailure) {
        guard let command = arguments.positionals.first else { throw .usage("'cmdbus can' needs a command name; see 'cmdbus can --help'") }
        if let problem = commandNameProblem(command) { throw .usage(problem + "; 'cmdbus plugins' lists the commands") }
        guard arguments.positionals.count <= 2 else { throw .usage("'cmdbus can' takes a command and at most one JSON payload") }
        let payload = try PayloadBuilder.build(
            command: command, operand: arguments.positionals.dropFirst().first, pairs: arguments.all("param"),
            maxBytes: try arguments.positiveInteger("max-payload") ?? JournalOptions.defaultMaxPayloadBytes
        )
        let client = try await BusClientFactory.client(
            connection: try ConnectionOptions(arguments), plugins: try PluginOptions(arguments).deferringLoads, journal: try .withoutJournal(arguments), console: console
        )
        let answer = try await client.canHandle(command, payload: payload)
        if arguments.has("json") { console.out(JSONValue.object(["command": .string(command), "canHandle": .bool(answer)]).text) }
        guard answer else { throw client.noHandler(command) }
    }
}
