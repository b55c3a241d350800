import CommandBusSupport
import CommandBusLoading
import CommandBusSQLite
import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A bus with the plugins from the chosen directories loaded and, for commands that keep one,
/// the journal opened, event-sourced state replayed and unfinished work recovered.
package struct HostSession: Sendable {
    package let bus: CommandBus
    package let catalog: PluginCatalog
    package let journal: SQLiteJournal?
    /// The loader that loaded the catalog, for loading more files later (a server's hot loading).
    package let loader: PluginLoader
    /// The commands this session runs again because a dead process left them unfinished (with
    /// `Recovery.run`), so a server can cancel them as it cancels what its clients sent.
    package private(set) var recovered: [CommandTicket<Data>] = []

    /// What a session does with commands a dead process left unfinished in the journal.
    package enum Recovery: Sendable {
        /// Runs them again (`cmdbus serve`, `journal recover`); with `await`, before the session is used.
        case run(await: Bool)
        /// Says in one line how many there are, the oldest, and how to run or drop them, and
        /// leaves them: a one-shot command does not run someone else's work first.
        case report
    }

    /// Loads plugins as `plugins` says and, if `journal` is enabled, opens the journal,
    /// replays event-sourced commands into their plugins and, as `recovery` says, runs again or
    /// reports what a dead process left unfinished.
    package static func start(
        plugins: PluginOptions, journal journalOptions: JournalOptions, console: Console, reportSkipped: Bool,
        usesAllowlist: Bool = true, observers: [any CommandObserver] = [], recovery: Recovery = .report,
        fallback: (any DynamicCommandHandler)? = nil, busJournal: (any Journal)? = nil,
        pluginLog: (@Sendable (LogLevel, String) -> Void)? = nil
    ) async throws(HostFailure) -> HostSession {
        let journal = journalOptions.enabled ? try openJournal(journalOptions.path, durability: journalOptions.durability) : nil
        let directories = PluginLoader.directories(explicit: plugins.directories, environment: ProcessInfo.processInfo.environment)
        let bus = CommandBus(configuration: .init(journal: journal ?? busJournal, maxPayloadBytes: journalOptions.maxPayloadBytes, fallback: fallback))
        for observer in observers { bus.addObserver(observer) }
        let trust = PluginTrustPolicy(insecure: plugins.insecure, usesAllowlist: usesAllowlist)
        let loader = try loader(plugins, directories: directories, trust: trust)
        // Before loading, so what loading logs (an isolated plugin's worker starting) goes there too.
        if let pluginLog { loader.log.redirect(to: pluginLog) }
        // Loading probes, dlopens and starts workers: blocking work, done off the cooperative pool.
        let catalog = await DetachedThread.value { loader.load(into: bus) }
        if reportSkipped, !plugins.quiet {
            for skipped in catalog.skipped { console.err("cmdbus: warning: skipped \(skipped.message)") }

        }
        var session = HostSession(bus: bus, catalog: catalog, journal: journal, loader: loader)
        if journal != nil { session.recovered = try await session.restore(console: console, recovery: recovery) }
        return session
    }

    /// The loader the options ask for: probing new files in a child process unless told not to, and
    /// opening known files on first use if the command is a one-shot one.
    static func loader(_ options: PluginOptions, directories: [String], trust: PluginTrustPolicy) throws(HostFailure) -> PluginLoader {
        let environment = ProcessInfo.processInfo.environment
        let configured = try HostConfiguration.load(HostConfiguration.defaultPath(environment: environment)).isolatedFiles
        // --isolate isolates every plugin; the configuration file, the ones it names.
        let isolation = options.isolateAll || !configured.isEmpty ? PluginProbe().executable : nil
        let isolatedFiles = options.isolateAll ? nil : configured
        return PluginLoader(
            directories: directories, trust: trust, probe: options.probe ? PluginProbe(deadline: options.probeTimeout) : nil,
            registryPath: PluginRegistry.defaultPath(environment: environment), isolatingWith: isolation, isolatedFiles: isolatedFiles,
            defersLoading: options.defersLoading, loadsPrivateCopies: options.loadsPrivateCopies
        )
    }

    /// Opens the journal at `path`, as a failure that names the file if it cannot be used.
    package static func openJournal(_ path: String, durability: SQLiteJournal.Durability, create: Bool = true) throws(HostFailure) -> SQLiteJournal {
        do {
            return try SQLiteJournal(path: path, durability: durability, create: create)
        } catch {
            throw .journal(error)
        }
    }

    /// Replays the journal into event-sourced plugins (state, not recovery: always), then runs
    /// unfinished commands again or reports them; returns those it runs again.
    private func restore(console: Console, recovery: Recovery) async throws(HostFailure) -> [CommandTicket<Data>] {
        guard let journal else { return [] }
        let replayed = Set(catalog.plugins.flatMap { plugin in plugin.declared.filter(\.replaysOnStart).map(\.name) })
        do {
            if !replayed.isEmpty {
                let report = try await JournalReplayer(bus: bus, journal: journal).replay(commands: replayed)
                for failure in report.failures { console.err("cmdbus: warning: replay: \(failure)") }
            }
            switch recovery {
            case .report:
                let unfinished = try await journal.unfinished().filter { $0.envelope.parentID == nil }
                if let oldest = unfinished.min(by: { $0.sequence < $1.sequence }) {
                    console.err(
                        "cmdbus: note: \(counted(unfinished.count, "command")) a process that died left unfinished in \(journal.path) "
                            + "(oldest: \(quoted(oldest.envelope.commandName)) \(oldest.envelope.id)); "
                            + "'cmdbus journal recover' runs them, 'cmdbus journal discard ID...' drops them"
                    )
                }
            case .run(let wait):
                let recovered = try await bus.recover()
                if !recovered.isEmpty {
                    console.err("cmdbus: running \(counted(recovered.count, "command")) a process that died left unfinished in \(journal.path)")
                    if wait { for ticket in recovered { _ = try? await ticket.result } }
                }
                return recovered
            }
        } catch {
            throw .journal(error)
        }
        return []
    }

    /// One warning line per plugin built without optimization, for a long-running host to log once.
    package var debugBuildWarnings: [String] {
        catalog.plugins.filter(\.isDebugBuild).map { plugin in
            "plugin \(quoted(plugin.name)) (\(FileSystem.lastComponent(plugin.path))) is a debug build: "
                + "it runs unoptimized, often ten times slower; rebuild it with 'swift build -c release'"
        }
    }

    /// Waits until everything written to the journal is durable.
    package func close() async {
        try? await journal?.flush()
    }

    /// A bus error as a CLI failure, naming the plugin that handles the command where there is one.
    package func failure(_ error: CommandBusError, command: String) -> HostFailure {
        let route = catalog.routes.first { $0.command == command }?.plugins.first
        let plugin = route?.name
        var message = error.message
        // A timeout or cancellation names the plugin and its file, as every other error does.
        if [.timedOut, .cancelled].contains(error.code), let route, !message.contains("plugin '") {
            message += " in plugin \(quoted(route.name)) (\(FileSystem.lastComponent(route.path)))"
        }
        if error.code == .noHandler { message += catalog.noHandlerDetail(for: command, registered: bus.handlerCount(for: command)) }
        return HostFailure(.init(error), message, command: command, plugin: plugin)
    }
}
