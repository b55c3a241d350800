import CCommandBusABI
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A plugin the host has loaded and initialized.
public struct LoadedPlugin: Sendable {
    /// The file it was loaded from.
    public let path: String
    /// The plugin's name and version.
    public let name: String
    /// The plugin's own version.
    public let version: String
    /// The plugin ABI it speaks, as `1.0`.
    public let abi: String
    /// The SDK version it was built with, or `nil` for a plugin written without the SDK.
    public let sdkVersion: String?
    /// The Swift compiler version it was built with, or `nil` for C.
    public let swiftVersion: String?
    /// Its declared priority.
    public let priority: Int
    /// The names of the commands it handles.
    public let commands: [String]
    /// When it was loaded.
    public let loadedAt: Date
    /// How long loading and initializing it took, in milliseconds.
    public let loadMilliseconds: Double
    /// Whether it was built without optimization (it says so from ABI 1.3): it may run ten times slower.
    public let isDebugBuild: Bool

    /// The commands it declares, with their flags.
    package let declared: [PluginDescriptor.Command]
    /// The descriptor, for a plugin loaded into this process; `nil` for an isolated one.
    package let descriptor: PluginDescriptor?
    package let state: PluginState
    /// The worker that runs it, for an isolated plugin.
    package let worker: IsolatedPlugin?

    /// Why it is quarantined, if it is an isolated plugin whose worker crashed too often: loaded,
    /// but serving nothing until its file is loaded anew.
    package var quarantine: String? { worker?.quarantine }
    /// Its call ids, log and warnings.
    package let endpoint: PluginEndpoint
    /// For a plugin not opened yet: what opens it when a command first reaches it.
    package var deferred: DeferredPlugin? = nil

    /// Whether its file is not open yet: the host knows its commands from the registry and opens
    /// the file when a command first reaches one of them (one-shot commands; see ``PluginLoader/defersLoading``).
    public var isDeferred: Bool { deferred.map { !$0.isOpened } ?? false }
}

extension LoadedPlugin {
    /// A plugin known from its description (by its worker, or by the registry for one not opened
    /// yet) rather than from a descriptor in this process.
    init(
        path: String, description: PluginDescription, loadMilliseconds: Double, worker: IsolatedPlugin? = nil,
        endpoint: PluginEndpoint, deferred: DeferredPlugin? = nil
    ) {
        self.init(
            path: path, name: description.name, version: description.version, abi: description.abi,
            sdkVersion: description.sdkVersion, swiftVersion: description.swiftVersion, priority: description.priority,
            commands: description.commands.map(\.name), loadedAt: Date(), loadMilliseconds: loadMilliseconds,
            isDebugBuild: description.isDebugBuild ?? false, declared: description.declared, descriptor: nil,
            state: PluginState(pointer: nil), worker: worker, endpoint: endpoint, deferred: deferred
        )
    }
}

/// Why a file in a plugin directory was not loaded.
public struct SkippedPluginFile: Error, Sendable, Hashable {
    /// The file.
    public let path: String
    /// A one-line reason.
    public let reason: String
    /// Whether the file crashed or hung the probe and is not tried again until it changes.
    public let isQuarantined: Bool

    /// The file and why, as a log line or an error names them: "PATH: REASON".
    public var message: String { "\(path): \(reason)" }

    /// Records that `path` was skipped for `reason`.
    public init(path: String, reason: String, isQuarantined: Bool = false) {
        self.path = path
        self.reason = reason
        self.isQuarantined = isQuarantined
    }
}

/// The `plugin_state` pointer a plugin's `init()` returned.
package struct PluginState: @unchecked Sendable {
    // Owned by the plugin, valid for the life of the process.
    package let pointer: UnsafeMutableRawPointer?
}
