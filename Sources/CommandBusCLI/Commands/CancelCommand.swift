import CommandBusSupport
import CommandBusHost
import CommandBusServer
import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `cmdbus cancel <id>...`: cancels commands in flight on a running server or on the shared bus.
enum CancelCommand {
    static let spec = ArgumentSpec(command: "cancel", options: [.connect, .bus, .json, .help])

    static let help = """
        Usage: cmdbus cancel <id>... [--connect[=SOCKET] | --bus URL] [--json]

        Cancels commands in flight, by the ids 'run --no-wait' and 'journal list' print: on a
        running 'cmdbus serve' (the default socket \(CommandServer.defaultSocketPath) unless
        --connect names another), or on the shared bus with --bus URL (or $CMDBUS_BUS). A
        command still pending ends cancelled at once; a running one is asked to stop, and its
        subcommands with it. A server cancels a tree from its root (what its clients sent or
        posted, and what it recovered at start); the bus, from any command of it. A one-shot
        'cmdbus run' is cancelled with Ctrl-C.

        Prints 'cancelled ID' for each; exits 1 if one was not in flight (it had ended, or
        is not a root the server can cancel), and 'cmdbus journal show ID' says how it ended.

        Options:
        \(spec.optionsHelp)
        """

    static func run(_ arguments: ArgumentSpec.Parsed, console: Console) async throws(HostFailure) {
        guard !arguments.positionals.isEmpty else { throw .usage("'cmdbus cancel' needs the ids of the commands to cancel; see 'cmdbus cancel --help'") }
        var ids: [UUID] = []
        for operand in arguments.positionals {
            guard let id = UUID(uuidString: operand) else {
                throw .usage("\(quoted(operand)) is not a command id (a UUID); 'run --no-wait' and 'journal list' print them")
            }
            ids.append(id)
        }
        let connection = try ConnectionOptions(arguments)
        // As `status`: without --connect or --bus, the server on the default socket.
        let client: any BusClient = if let bus = connection.bus {
            try BusClientFactory.sharedBus(bus, console: console)
        } else {
            SocketBusClient(socket: connection.socket ?? CommandServer.defaultSocketPath)
        }
        // A server cancels a tree from its root; the bus, from any command of it.
        let place = connection.bus == nil ? "on the server (it ended, or is a subcommand: cancel its root)" : "on the bus (it ended, or never was there)"
        var notInFlight: [UUID] = []
        for id in ids {
            let cancelled: Bool
            do { cancelled = try await client.cancel(id) } catch {
                await client.close()
                throw error
            }
            if !cancelled { notInFlight.append(id) }
            if arguments.has("json") {
                console.out(JSONValue.object(["commandId": .string(id.uuidString), "cancelled": .bool(cancelled)]).text)
            } else if cancelled {
                console.out("cancelled \(id.uuidString)")
            }
        }
        await client.close()
        guard let first = notInFlight.first else { return }
        let which = notInFlight.count == 1 ? first.uuidString : "\(first.uuidString) and \(counted(notInFlight.count - 1, "other"))"
        throw HostFailure(
            .entryNotApplicable,
            "\(which) \(notInFlight.count == 1 ? "was" : "were") not in flight \(place); 'cmdbus journal show \(first.uuidString)\(connection.bus == nil ? "" : " --bus URL")' says how it ended"
        )
    }
}
