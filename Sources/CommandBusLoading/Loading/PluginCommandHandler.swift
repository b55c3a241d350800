import CommandBusSupport
import CCommandBusABI
import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Puts one plugin command on the bus: a `DynamicCommandHandler` that calls across the C ABI.
package struct PluginCommandHandler: DynamicCommandHandler {
    package let plugin: LoadedPlugin
    package let command: PluginDescriptor.Command
    /// Names the plugin and command in the host's last words if the plugin's code crashes it.
    private let crashLabel: PluginCrashLabel

    package init(plugin: LoadedPlugin, command: PluginDescriptor.Command) {
        self.plugin = plugin
        self.command = command
        crashLabel = PluginCrashLabel(plugin: plugin.name, file: plugin.path, command: command.name)
        handleDecides = plugin.descriptor!.handleDecides
    }

    /// Whether the plugin's handle() asks can_handle itself (``PluginDescriptor/handleDecides``).
    private let handleDecides: Bool

    package var commandName: String { command.name }
    package var maxConcurrency: Int? { command.maxConcurrency }
    package var isJournaled: Bool { command.isJournaled }

    package func inverse(of payload: Data) throws -> (name: String, payload: Data)? {
        guard command.isReversible, plugin.descriptor!.hasVersion11Fields, let invert = plugin.descriptor!.raw.pointee.invert else {
            return nil
        }
        let (answer, message) = callSynchronously(invert, payload: payload)
        let body = message ?? Data()
        if answer == 1 { return nil }
        guard answer == 0 else { throw error(status: -answer, message: String(decoding: body, as: UTF8.self)) }
        struct Inverse: Decodable { let command: String; let payload: JSONValue }
        guard let inverse = try? JSONDecoder().decode(Inverse.self, from: body) else {
            throw error(status: Int32(CMDBUS_FAILED.rawValue), message: "invert() answered something other than {\"command\": ..., \"payload\": ...}")
        }
        return (inverse.command, inverse.payload.data)
    }

    /// A plugin whose handle() decides (ABI 1.4, every Swift SDK plugin) is asked once, in
    /// `handle`: routing takes the command as wanted, and a "no" there passes it down the chain.
    package func canHandle(payload: Data) throws -> Bool {
        if handleDecides { return true }
        return try wouldHandleNow(payload: payload)
    }

    package func wouldHandle(payload: Data) async throws -> Bool {
        try wouldHandleNow(payload: payload)
    }

    /// The plugin's own `can_handle()` answer.
    private func wouldHandleNow(payload: Data) throws -> Bool {
        guard let canHandle = plugin.descriptor!.raw.pointee.can_handle else { return true }
        let (answer, message) = callSynchronously(canHandle, payload: payload)
        if answer >= 0 { return answer != 0 }
        throw error(status: -answer, message: message.map { String(decoding: $0, as: UTF8.self) } ?? "the plugin refused the payload")
    }

    /// Calls one of the plugin's synchronous functions (`can_handle`, `invert`) with a call handle
    /// that lives only for the call; returns its answer and whatever it passed to `complete`.
    private func callSynchronously(
        _ function: @convention(c) (UnsafeMutableRawPointer?, UInt32, cmdbus_bytes, OpaquePointer?) -> Int32, payload: Data
    ) -> (answer: Int32, body: Data?) {
        let probe = PluginCall(context: nil, endpoint: plugin.endpoint)
        PluginCallRegistry.register(probe)
        defer { PluginCallRegistry.remove(probe) }
        let answer = payload.withUnsafeBytes { raw in
            crashLabel.around {
                function(plugin.state.pointer, command.index, cmdbus_bytes(data: raw.bindMemory(to: UInt8.self).baseAddress, length: raw.count), probe.handle)
            }
        }
        return (answer, probe.completion?.body)
    }

    package func handle(payload: Data, context: CommandContext) async throws -> Data {
        let handle = plugin.descriptor!.raw.pointee.handle!
        let call = PluginCall(context: context, endpoint: plugin.endpoint)
        PluginCallRegistry.register(call)
        defer { PluginCallRegistry.remove(call) }
        // The payload must stay valid until the plugin completes the call, so the call owns a copy.
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(payload.count, 1), alignment: 1)
        defer { buffer.deallocate() }
        _ = payload.copyBytes(to: buffer.bindMemory(to: UInt8.self))
        let bytes = cmdbus_bytes(data: UnsafePointer(buffer.bindMemory(to: UInt8.self).baseAddress), length: payload.count)
        let state = plugin.state, index = command.index, label = crashLabel
        let cancel = plugin.descriptor!.raw.pointee.cancel
        label.around { handle(state.pointer, index, bytes, call.handle) }
        // A quick plugin has completed already: no continuation, no cancellation handler. Otherwise
        // the handler is installed now, and a cancellation that came meanwhile reaches it at once.
        let (status, body) = if let done = call.completion { done } else {
            await withTaskCancellationHandler {
                await call.wait()
            } onCancel: {
                if PluginCallRegistry.isLive(call) { cancel?(state.pointer, call.handle) }
            }
        }
        if status == Int32(CMDBUS_DECLINED.rawValue) && handleDecides { throw HandlerDeclined() }
        guard status == Int32(CMDBUS_OK.rawValue) else {
            throw error(status: status, message: String(decoding: body, as: UTF8.self))
        }
        return try PluginErrors.checkedResult(body, plugin: plugin, command: command.name)
    }

    private func error(status: Int32, message: String) -> CommandBusError {
        PluginErrors.error(plugin: plugin, command: command.name, status: status, message: message)
    }
}
