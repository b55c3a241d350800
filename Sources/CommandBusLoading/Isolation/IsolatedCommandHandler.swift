import CCommandBusABI
import CommandBus
import Dispatch
import Synchronization
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Puts one command of an isolated plugin on the bus: each call crosses to the worker process.
package struct IsolatedCommandHandler: DynamicCommandHandler {
    package let plugin: LoadedPlugin
    package let worker: IsolatedPlugin
    package let command: PluginDescriptor.Command
    /// How long `can_handle()` may take in the worker.
    package static let canHandleDeadline: DispatchTimeInterval = .seconds(5)

    package var commandName: String { command.name }
    package var maxConcurrency: Int? { command.maxConcurrency }
    package var isJournaled: Bool { command.isJournaled }

    package func canHandle(payload: Data) throws -> Bool {
        // With no worker running (it crashed and waits out its backoff), say yes and let
        // handle() start one: routing must not wait for a process to start.
        guard worker.isRunning else { return true }
        let answered = DispatchSemaphore(value: 0)
        let answer = Mutex<(Int32, [UInt8])?>(nil)
        _ = worker.call(.canHandle, index: command.index, payload: Array(payload), context: nil) { status, body in
            answer.withLock { $0 = (status, body) }
            answered.signal()
        }
        guard answered.wait(timeout: .now() + Self.canHandleDeadline) == .success, let (status, body) = answer.withLock({ $0 }) else {
            throw PluginErrors.error(plugin: plugin, command: command.name, status: IsolatedPlugin.crashedStatus, message: "did not answer can_handle() within 5 s")
        }
        if status >= 0 { return status != 0 }
        let message = String(decoding: body, as: UTF8.self)
        throw PluginErrors.error(plugin: plugin, command: command.name, status: status == IsolatedPlugin.crashedStatus ? status : -status, message: message.isEmpty ? "the plugin refused the payload" : message)
    }

    package func handle(payload: Data, context: CommandContext) async throws -> Data {
        if let failure = await worker.ensureRunning() {
            throw PluginErrors.error(plugin: plugin, command: command.name, status: IsolatedPlugin.crashedStatus, message: failure.reason)
        }
        let callID = Mutex<UInt64>(0)
        let (status, body) = await withTaskCancellationHandler {
            await withUnsafeContinuation { (continuation: UnsafeContinuation<(Int32, [UInt8]), Never>) in
                let id = worker.call(.handle, index: command.index, payload: Array(payload), context: context) { status, body in
                    continuation.resume(returning: (status, body))
                }
                callID.withLock { $0 = id }
            }
        } onCancel: {
            let id = callID.withLock { $0 }
            if id != 0 { worker.cancel(id) }
        }
        guard status == Int32(CMDBUS_OK.rawValue) else {
            throw PluginErrors.error(plugin: plugin, command: command.name, status: status, message: String(decoding: body, as: UTF8.self))
        }
        return Data(body)
    }
}
