import CommandBusSupport
import CCommandBusABI
import CommandBus

/// The bus errors for a plugin's failures, naming the command, the plugin and its file.
package enum PluginErrors {
    /// The error for a call that ended with ABI `status` (or, isolated, with its worker dead).
    package static func error(plugin: LoadedPlugin, command: String, status: Int32, message: String) -> CommandBusError {
        let origin = "plugin '\(plugin.name)' (\(FileSystem.lastComponent(plugin.path)))"
        switch status {
        case IsolatedPlugin.crashedStatus:
            let text = "command '\(command)' failed: \(origin): \(message)"
            return CommandBusError(code: .handlerFailed, message: text, cause: PluginCrash(message: text))
        case Int32(CMDBUS_DECODING_FAILED.rawValue):
            return CommandBusError(code: .decodingFailed, message: "payload for '\(command)' does not decode in \(origin): \(message)")
        case Int32(CMDBUS_CANCELLED.rawValue):
            return .cancelled(command)
        default:
            let retryable = status == Int32(CMDBUS_FAILED_RETRYABLE.rawValue)
            // A handler that fails with its own subcommand's failure (the same command, as one that
            // sends itself does) is named once, not once a level: 100 levels made a 7 KB message.
            let prefix = "command '\(command)' failed in \(origin): "
            return CommandBusError(code: .handlerFailed, message: message.hasPrefix(prefix) ? message : prefix + message, isRetryable: retryable)
        }
    }
}

/// The cause of a `handlerFailed` error whose plugin's process died (an isolated worker that
/// crashed, exited or was killed at a deadline): the host reports it as `pluginCrashed`.
package struct PluginCrash: Error, Sendable, CustomStringConvertible {
    /// What happened, naming the command, the plugin and its file.
    package let message: String
    package var description: String { message }
}
