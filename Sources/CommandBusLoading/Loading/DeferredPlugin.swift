import CCommandBusABI
import CommandBus
import CommandBusSupport
import Synchronization
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A plugin whose handlers are on the bus but whose file is not open yet: the loader knew its
/// commands from the registry (``PluginDescriptorSummary``), and the file is opened and
/// initialized the first time a command reaches one of them, once, whoever asks first.
///
/// A one-shot `cmdbus run` in a folder of 100 plugins so opens the one its command needs, where
/// opening all of them costs about a millisecond each in the dynamic loader alone.
package final class DeferredPlugin: Sendable {
    /// The plugin file.
    package let path: String
    /// What its descriptor said when it last loaded.
    package let summary: PluginDescriptorSummary
    /// The directory's `plugins.lock`, if it has one: checked again just before the file is
    /// opened, so the check and the `dlopen` are as close in time as when loading at start.
    private let allowlist: PluginAllowlist?
    private let log: PluginLog
    private let registryPath: String?
    private let state = Mutex<Opened?>(nil)

    /// The outcome of opening the file: the plugin and a handler per declared command, or why not.
    private enum Opened {
        case loaded([PluginCommandHandler])
        case failed
    }

    package init(path: String, summary: PluginDescriptorSummary, allowlist: PluginAllowlist?, log: PluginLog, registryPath: String?) {
        self.path = path
        self.summary = summary
        self.allowlist = allowlist
        self.log = log
        self.registryPath = registryPath
    }

    /// The handler of the command at `index`, opening the file first if no one has; `nil` if the
    /// file could not be opened now (said once, on the log, as loading says a skipped file).
    package func handler(at index: Int) -> PluginCommandHandler? {
        state.withLock { opened in
            if opened == nil { opened = open() }
            guard case .loaded(let handlers) = opened, handlers.indices.contains(index) else { return nil }
            return handlers[index]
        }
    }

    /// Whether the file has been opened (or tried).
    package var isOpened: Bool { state.withLock { $0 != nil } }

    private func open() -> Opened {
        // With a lock, the private copy that is opened is what gets checked (see PluginLoader.load).
        let hash = allowlist?.hash(of: path)
        if allowlist != nil, hash == nil {
            refuse(PluginAllowlist.notListed)
            return .failed
        }
        switch PluginLoader.load(file: path, hostTable: HostFunctionTable.pointer, log: log, hash: hash) {
        case .success(let plugin) where summary.matches(plugin):
            return .loaded(plugin.declared.map { PluginCommandHandler(plugin: plugin, command: $0) })
        case .success:
            refuse("it declares other commands than when it was cached (it changed while this host ran); run the command again")
        case .failure(let failure):
            refuse(failure.reason)
        }
        return .failed
    }

    /// Says why the file is skipped, and drops its summary so the next start loads it at once.
    private func refuse(_ reason: String) {
        log(.warning, "skipped \(path): \(reason)")
        guard let registryPath else { return }
        var registry = PluginRegistry(path: registryPath)
        if registry.forget(path) { registry.save() }
    }
}

/// One command of a ``DeferredPlugin`` on the bus: it opens the plugin's file the first time it
/// is asked anything that needs the plugin's code, then answers as ``PluginCommandHandler``.
///
/// A file that cannot be opened then takes nothing: routing passes the command down the chain,
/// as if the file had been skipped at start.
package struct DeferredPluginCommandHandler: DynamicCommandHandler {
    package let plugin: DeferredPlugin
    package let command: PluginDescriptor.Command

    package var commandName: String { command.name }
    package var maxConcurrency: Int? { command.maxConcurrency }
    package var isJournaled: Bool { command.isJournaled }

    package func canHandle(payload: Data) throws -> Bool {
        guard let handler = plugin.handler(at: Int(command.index)) else { return false }
        return try handler.canHandle(payload: payload)
    }

    package func wouldHandle(payload: Data) async throws -> Bool {
        guard let handler = plugin.handler(at: Int(command.index)) else { return false }
        return try await handler.wouldHandle(payload: payload)
    }

    package func inverse(of payload: Data) throws -> (name: String, payload: Data)? {
        try plugin.handler(at: Int(command.index))?.inverse(of: payload)
    }

    package func handle(payload: Data, context: CommandContext) async throws -> Data {
        // Routing asked canHandle first, which opened the file; if it could not, nothing is taken.
        guard let handler = plugin.handler(at: Int(command.index)) else { throw HandlerDeclined() }
        return try await handler.handle(payload: payload, context: context)
    }
}
