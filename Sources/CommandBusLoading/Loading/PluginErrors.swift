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
            return CommandBusError(code: .pluginCrashed, message: "command '\(command)' failed: \(origin): \(message)")
        case Int32(CMDBUS_DECODING_FAILED.rawValue):
            return CommandBusError(code: .decodingFailed, message: "payload for '\(command)' does not decode in \(origin): \(message)")
        case Int32(CMDBUS_CANCELLED.rawValue):
            return .cancelled(command)
        default:
            let retryable = status == Int32(CMDBUS_FAILED_RETRYABLE.rawValue)
            return CommandBusError(
                code: .handlerFailed, message: "command '\(command)' failed in \(origin): \(message)", isRetryable: retryable
            )
        }
    }
}
