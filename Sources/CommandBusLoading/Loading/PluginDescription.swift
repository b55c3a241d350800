#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What a loaded plugin's descriptor says, as plain values: what an isolated worker tells the
/// host about the plugin it loaded, and what the registry keeps for opening a file on first use.
package struct PluginDescription: Codable, Sendable, Equatable {
    /// One declared command, in the descriptor's order.
    package struct Command: Codable, Sendable, Equatable {
        package let name: String
        package let maxConcurrency: Int?
        package let flags: UInt32
    }
    package let name: String
    package let version: String
    package let abi: String
    package let sdkVersion: String?
    package let swiftVersion: String?
    package let priority: Int
    package let commands: [Command]
    /// Whether the plugin has a `cancel()`.
    package let cancellable: Bool
    /// Whether it was built without optimization.
    package let isDebugBuild: Bool?
}

extension PluginDescription {
    /// What `plugin`'s descriptor says.
    package init(_ plugin: LoadedPlugin) {
        name = plugin.name
        version = plugin.version
        abi = plugin.abi
        sdkVersion = plugin.sdkVersion
        swiftVersion = plugin.swiftVersion
        priority = plugin.priority
        commands = plugin.declared.map { Command(name: $0.name, maxConcurrency: $0.maxConcurrency, flags: $0.flags) }
        cancellable = plugin.descriptor?.raw.pointee.cancel != nil
        isDebugBuild = plugin.isDebugBuild
    }

    /// The commands as the loader declares them.
    package var declared: [PluginDescriptor.Command] {
        commands.enumerated().map { index, command in
            PluginDescriptor.Command(index: UInt32(index), name: command.name, maxConcurrency: command.maxConcurrency, flags: command.flags)
        }
    }

    /// The description as one line of JSON.
    package var json: String {
        (try? JSONEncoder().encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}
