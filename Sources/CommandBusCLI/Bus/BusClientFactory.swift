import CommandBusHost
import CommandBusPostgres
import CommandBusServer
import CommandBusSupport

/// The one place a subcommand gets its bus: a running server with `--connect`, else one in this process.
enum BusClientFactory {
    static func client(
        connection: ConnectionOptions, plugins: PluginOptions, journal: JournalOptions, console: Console,
        reportSkipped: Bool = true, usesAllowlist: Bool = true
    ) async throws(HostFailure) -> any BusClient {
        if let socket = connection.socket { return SocketBusClient(socket: socket) }
        if let bus = connection.bus { return try sharedBus(bus, console: console) }
        return try await LocalBusClient.start(
            plugins: plugins, journal: journal, console: console, reportSkipped: reportSkipped, usesAllowlist: usesAllowlist
        )
    }

    /// A client of the shared bus at `url`; while the server is away it says so on stderr,
    /// once, and waits up to 10 s for it.
    static func sharedBus(_ url: String, console: Console) throws(HostFailure) -> PostgresBusClient {
        try PostgresBusClient(url: url) { reason in console.err("cmdbus: warning: \(quotedLine(reason))") }
    }

    /// Warns of posts that wait for a host: on the shared bus a post of a name no host handles
    /// is kept, pending, until one that does joins, and `--no-wait` printed its id as if all
    /// were well (a misspelt name waited for ever, unseen).
    static func warnOfPostsNoHostTakes(_ names: Set<String>, on client: any BusClient, console: Console) async {
        let waiting = await client.namesNoHostHandles(names)
        if !waiting.isEmpty {
            console.err("cmdbus: warning: no live host on the bus handles \(list(waiting)): what was posted waits, pending, "
                + "until a host that does joins ('cmdbus bus status' shows the hosts; 'cmdbus cancel ID --bus URL' drops a command)")
        }
        let paused = await client.namesPaused(names)
        if !paused.isEmpty {
            console.err("cmdbus: note: \(list(paused)) \(paused.count == 1 ? "is" : "are") paused on the bus: what was posted waits, pending, "
                + "until 'cmdbus bus resume \(paused.map(quotedLine).joined(separator: " "))'")
        }
    }

    /// Up to five names, quoted, and how many more.
    private static func list(_ names: [String]) -> String {
        names.prefix(5).map(quoted).joined(separator: ", ") + (names.count > 5 ? " and \(counted(names.count - 5, "other"))" : "")
    }
}
