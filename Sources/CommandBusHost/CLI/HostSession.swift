import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A bus with the plugins from the chosen directories loaded: what `run`, `can` and `plugins` start from.
struct HostSession: Sendable {
    let bus: CommandBus
    let catalog: PluginCatalog

    /// Loads plugins from `--plugins` (else `$CMDBUS_PLUGINS`, else `./plugins`) and reports skipped files unless quiet.
    static func start(_ arguments: ArgumentSpec.Parsed, console: Console, reportSkipped: Bool) -> HostSession {
        HostFunctionTable.logSink.withLock { sink in
            sink = { level, message in console.err("cmdbus: plugin \(level.rawValue): \(message)") }
        }
        let directories = PluginLoader.directories(
            explicit: arguments.all("plugins"), environment: ProcessInfo.processInfo.environment
        )
        let bus = CommandBus()
        let catalog = PluginLoader(directories: directories).load(into: bus)
        if reportSkipped, !arguments.has("quiet") {
            for skipped in catalog.skipped { console.err("cmdbus: warning: skipped \(skipped.path): \(skipped.reason)") }
        }
        return HostSession(bus: bus, catalog: catalog)
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
