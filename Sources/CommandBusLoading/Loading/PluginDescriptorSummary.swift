import CCommandBusABI
import CommandBusSupport

/// What a plugin's descriptor said when its file last loaded, kept in the ``PluginRegistry`` so
/// that a later one-shot command can put the plugin's handlers on the bus without opening the
/// file, and open it only when a command reaches one of them (``DeferredPlugin``).
///
/// It is trusted only for the same file (size, modification time and inode) and the same host
/// (plugin ABI and Swift compiler); anything else loads the file as before.
package struct PluginDescriptorSummary: Sendable, Equatable {
    /// The file's size, modification time (ns) and inode when it loaded.
    package var size: Int
    package var modified: Int64
    package var inode: UInt64
    /// The plugin ABI and Swift compiler of the host that loaded it (``currentHost``).
    package var host: String
    /// What the descriptor said.
    package var plugin: PluginDescription

    /// This host's plugin ABI and Swift compiler: a summary another host wrote is not used.
    package static let currentHost = "abi \(CMDBUS_ABI_VERSION_MAJOR).\(CMDBUS_ABI_VERSION_MINOR), swift \(hostSwiftCompilerVersion)"
}

extension PluginDescriptorSummary {
    /// The summary of `plugin`, loaded from a file with `status`.
    package init(_ plugin: LoadedPlugin, status: FileSystem.Status) {
        size = status.size
        modified = status.modified
        inode = status.inode
        host = Self.currentHost
        self.plugin = PluginDescription(plugin)
    }

    /// Whether it was taken from the file that now has `status`.
    package func describes(_ status: FileSystem.Status) -> Bool {
        size == status.size && modified == status.modified && inode == status.inode
    }

    /// Whether `loaded`, opened now, declares what this summary says (a file replaced under the
    /// same size, time and inode would not): the same name, priority and commands.
    package func matches(_ loaded: LoadedPlugin) -> Bool {
        let now = PluginDescription(loaded)
        return now.name == plugin.name && now.priority == plugin.priority && now.commands == plugin.commands
    }
}
