import CommandBus
import CommandBusLoading

extension HostFailure.Code {
    /// The code of a bus error: the bus's codes share their names with these; a handler
    /// failure caused by its plugin's process dying is `pluginCrashed`.
    package init(_ error: CommandBusError) {
        self = error.cause is PluginCrash ? .pluginCrashed : HostFailure.Code(name: error.code.description) ?? .handlerFailed
    }
}

extension HostFailure {
    /// A bus error, with the code (and so the exit status) its own code maps to.
    package static func bus(_ error: CommandBusError, command: String?, plugin: String? = nil) -> Self {
        .init(Code(error), error.message, command: command, plugin: plugin)
    }
}
