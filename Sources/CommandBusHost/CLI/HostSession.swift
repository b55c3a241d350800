import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A bus with the plugins from the chosen directories loaded and, for commands that keep one,
/// the journal opened, event-sourced state replayed and unfinished work recovered.
struct HostSession: Sendable {
    let bus: CommandBus
    let catalog: PluginCatalog
    let journal: SQLiteJournal?
    /// The loader that loaded the catalog, for loading more files later (a server's hot loading).
    let loader: PluginLoader

    /// Where `run` and `batch` journal unless told otherwise.
    static let defaultJournalPath = "./.cmdbus/journal.sqlite"

    /// The journal options `run` and `batch` share.
    static let journalOptions: [ArgumentSpec.Option] = [
        .init(name: "journal", short: nil, takesValue: true, help: "Journal file (default \(defaultJournalPath))."),
        .init(name: "no-journal", short: nil, takesValue: false, help: "Keep no journal."),
        .init(name: "durability", short: nil, takesValue: true, help: "batched (group commit, default) or synced."),
        .init(name: "max-payload", short: nil, takesValue: true, help: "Largest payload in bytes (default 16777216)."),
    ]

    /// The payload limit unless `--max-payload` says otherwise: 16 MiB.
    static let defaultMaxPayloadBytes = 16 << 20

    /// Loads plugins from `--plugins` (else `$CMDBUS_PLUGINS`, else `./plugins`).
    /// - Parameter journaling: Open the journal (unless `--no-journal`), replay event-sourced
    ///   commands into their plugins, and run again what a dead process left unfinished.
    static func start(
        _ arguments: ArgumentSpec.Parsed, console: Console, reportSkipped: Bool, journaling: Bool = false,
        usesAllowlist: Bool = true, observers: [any CommandObserver] = [], awaitRecovered: Bool = true
    ) async throws(CLIFailure) -> HostSession {
        HostFunctionTable.logSink.withLock { sink in
            sink = { level, message in console.err("cmdbus: plugin \(level.rawValue): \(message)") }
        }
        let journal = journaling && !arguments.has("no-journal")
            ? try openJournal(arguments.value("journal") ?? defaultJournalPath, durability: arguments.value("durability"))
            : nil
        let directories = PluginLoader.directories(
            explicit: arguments.all("plugins"), environment: ProcessInfo.processInfo.environment
        )
        let maxPayload = try BatchCommand.positiveInteger(arguments.value("max-payload"), option: "--max-payload") ?? defaultMaxPayloadBytes
        let bus = CommandBus(configuration: .init(journal: journal, maxPayloadBytes: maxPayload))
        for observer in observers { bus.addObserver(observer) }
        let trust = PluginTrustPolicy(insecure: arguments.has("insecure-plugins"), usesAllowlist: usesAllowlist)
        let loader = try loader(arguments, directories: directories, trust: trust)
        let catalog = loader.load(into: bus)
        if reportSkipped, !arguments.has("quiet") {
            for skipped in catalog.skipped { console.err("cmdbus: warning: skipped \(skipped.path): \(skipped.reason)") }
        }
        let session = HostSession(bus: bus, catalog: catalog, journal: journal, loader: loader)
        if journal != nil { try await session.restore(console: console, awaitRecovered: awaitRecovered) }
        return session
    }

    /// The loader the options ask for: probing new files in a child process unless `--no-probe`.
    static func loader(_ arguments: ArgumentSpec.Parsed, directories: [String], trust: PluginTrustPolicy) throws(CLIFailure) -> PluginLoader {
        let environment = ProcessInfo.processInfo.environment
        let configured = try HostConfiguration.load(HostConfiguration.defaultPath(environment: environment)).isolatedFiles
        // --isolate isolates every plugin; the configuration file, the ones it names.
        let everything = arguments.has("isolate")
        let isolation = everything || !configured.isEmpty ? PluginProbe().executable : nil
        let isolatedFiles = everything ? nil : configured
        guard !arguments.has("no-probe") else {
            return PluginLoader(directories: directories, trust: trust, isolatingWith: isolation, isolatedFiles: isolatedFiles)
        }
        let deadline = try RunCommand.timeout(arguments.value("probe-timeout")) ?? .seconds(10)
        return PluginLoader(
            directories: directories, trust: trust, probe: PluginProbe(deadline: deadline),
            registryPath: PluginRegistry.defaultPath(environment: environment), isolatingWith: isolation, isolatedFiles: isolatedFiles
        )
    }

    static func openJournal(_ path: String, durability: String?, create: Bool = true) throws(CLIFailure) -> SQLiteJournal {
        let mode: SQLiteJournal.Durability
        switch durability {
        case nil, "batched": mode = .batched(maxDelay: .zero)
        case "synced": mode = .synced
        case let other?: throw .usage("--durability takes batched or synced, got '\(other)'")
        }
        do {
            return try SQLiteJournal(path: path, durability: mode, create: create)
        } catch {
            throw .journal(error)
        }
    }

    /// Replays the journal into event-sourced plugins, then runs unfinished commands again.
    private func restore(console: Console, awaitRecovered: Bool) async throws(CLIFailure) {
        guard let journal else { return }
        let replayed = Set(catalog.plugins.flatMap { plugin in plugin.declared.filter(\.replaysOnStart).map(\.name) })
        do {
            if !replayed.isEmpty {
                let report = try await JournalReplayer(bus: bus, journal: journal).replay(commands: replayed)
                for failure in report.failures { console.err("cmdbus: warning: replay: \(failure)") }
            }
            let recovered = try await bus.recover()
            if !recovered.isEmpty {
                console.err("cmdbus: running \(recovered.count) command(s) a previous run left unfinished")
                if awaitRecovered { for ticket in recovered { _ = try? await ticket.result } }
            }
        } catch {
            throw .journal(error)
        }
    }

    /// Waits until everything written to the journal is durable.
    func close() async {
        try? await journal?.flush()
    }

    /// A bus error as a CLI failure, naming the plugin that handles the command where there is one.
    func failure(_ error: CommandBusError, command: String) -> CLIFailure {
        let plugin = catalog.routes.first { $0.command == command }?.plugins.first?.name
        var message = error.message
        if error.code == .noHandler {
            let loaded = catalog.plugins.map(\.name)
            message += loaded.isEmpty
                ? " (no plugins loaded from \(catalog.directories.joined(separator: ", ")))"
                : " (plugins loaded: \(loaded.joined(separator: ", ")))"
        }
        return CLIFailure(message: message, exitCode: ExitCode(error.code), code: error.code.description, command: command, plugin: plugin)
    }
}
