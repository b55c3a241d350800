import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// One host→plugin request (a `handle()` or a `can_handle()`), behind a `cmdbus_call` handle.
///
/// Its address is the handle the plugin sees. The registry keeps it alive until
/// the plugin completes it, and every host function looks the handle up there
/// first, so a stale or forged handle from a buggy plugin is refused, not followed.
package final class PluginCall: Sendable {
    package typealias Completion = (status: Int32, body: Data)

    /// The command the call is about; `nil` for a `can_handle()` probe.
    package let context: CommandContext?
    /// The plugin that was called, for messages.
    package let pluginName: String
    private let state = Mutex<State>(State())

    private struct State {
        package var continuation: UnsafeContinuation<Completion, Never>?
        package var completion: Completion?
    }

    package init(context: CommandContext?, pluginName: String) {
        self.context = context
        self.pluginName = pluginName
    }

    /// The handle the plugin sees.
    package var handle: OpaquePointer { OpaquePointer(Unmanaged.passUnretained(self).toOpaque()) }

    /// Records the plugin's answer and wakes whoever waits for it. Returns `false` if it had already answered.
    package func complete(status: Int32, body: Data) -> Bool {
        let (accepted, continuation) = state.withLock { state -> (Bool, UnsafeContinuation<Completion, Never>?) in
            guard state.completion == nil else { return (false, nil) }
            state.completion = (status, body)
            defer { state.continuation = nil }
            return (true, state.continuation)
        }
        continuation?.resume(returning: (status, body))
        return accepted
    }

    /// The answer given during a synchronous call such as `can_handle()`, if any.
    package var completion: Completion? { state.withLock { $0.completion } }

    /// Waits for the plugin to complete the call; `start` makes the plugin call.
    package func wait(start: () -> Void) async -> Completion {
        await withUnsafeContinuation { continuation in
            let early = state.withLock { state -> Completion? in
                if let completion = state.completion { return completion }
                state.continuation = continuation
                return nil
            }
            if let early { continuation.resume(returning: early) }
            start()
        }
    }
}

/// The calls the host has handed to plugins and that are not completed yet.
package enum PluginCallRegistry {
    private static let live = Mutex<[UInt: PluginCall]>([:])

    package static func key(_ handle: OpaquePointer?) -> UInt {
        UInt(bitPattern: Int(bitPattern: handle.map { UnsafeRawPointer($0) }))
    }

    package static func register(_ call: PluginCall) {
        live.withLock { $0[key(call.handle)] = call }
    }

    /// The live call behind `handle`, or `nil` if it is unknown or already completed.
    package static func lookup(_ handle: OpaquePointer?) -> PluginCall? {
        guard handle != nil else { return nil }
        return live.withLock { $0[key(handle)] }
    }

    /// Takes the call out of the registry; later uses of its handle are refused.
    package static func remove(_ call: PluginCall) {
        live.withLock { _ = $0.removeValue(forKey: key(call.handle)) }
    }
}
