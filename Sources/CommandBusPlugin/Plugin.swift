import CCommandBusABI
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// A plugin's identity and handlers, exported to the host with one call from the entry point.
///
/// ```swift
/// @_cdecl("cmdbus_plugin_v1")
/// public func cmdbusPluginV1() -> UnsafeRawPointer {
///     Plugin(name: "greeter", version: "1.0.0", handlers: [GreetHandler()]).export()
/// }
/// ```
public struct Plugin: Sendable {
    /// The plugin's name, as `cmdbus plugins` shows it.
    public let name: String
    /// The plugin's version.
    public let version: String
    /// Higher priorities win when two plugins handle one command.
    public let priority: Int32
    /// The handlers, one per command.
    public let handlers: [any PluginHandler]

    /// Describes a plugin.
    public init(name: String, version: String, priority: Int32 = 0, handlers: [any PluginHandler]) {
        self.name = name
        self.version = version
        self.priority = priority
        self.handlers = handlers
    }

    /// The descriptor the entry point returns: built on the first call, then the same pointer every time.
    ///
    /// The version fields are the ABI constants of the `cmdbus.h` this plugin was compiled
    /// against, so the host reads literals compiled into the plugin.
    public func export() -> UnsafeRawPointer {
        exportedDescriptor.withLock { existing in
            if let existing { return existing }
            let descriptor = PluginRuntime.install(self)
            existing = descriptor
            return descriptor
        }
    }
}

/// The version of this SDK, recorded in every descriptor it builds.
public let commandBusPluginSDKVersion = "1.0.0"

private let exportedDescriptor = Mutex<UnsafeRawPointer?>(nil)
