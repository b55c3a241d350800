import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// One host→plugin request (a `handle()` or a `can_handle()`), behind a `cmdbus_call` handle.
///
/// The handle the plugin sees is the call's id, which is never reused (``PluginEndpoint``),
/// not an address. The registry keeps the call until it ends, and every host function looks
/// the handle up there first, so a stale or forged handle is refused, never followed, and can
/// never reach another call.
package final class PluginCall: Sendable {
    package typealias Completion = (status: Int32, body: Data)

    /// The command the call is about; `nil` for a `can_handle()` probe.
    package let context: CommandContext?
    /// The plugin that was called.
    package let endpoint: PluginEndpoint
    /// The call's id: the handle the plugin sees.
    package let id: UInt64
    private let state = Mutex<State>(State())

    private struct State {
        package var continuation: UnsafeContinuation<Completion, Never>?
        package var completion: Completion?
    }

    package init(context: CommandContext?, endpoint: PluginEndpoint) {
        self.context = context
        self.endpoint = endpoint
        id = endpoint.nextCallID()
    }

    /// The handle the plugin sees: the id, never an address.
    package var handle: OpaquePointer { OpaquePointer(bitPattern: UInt(id))! }

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

    /// Waits for the plugin to complete the call (made already).
    package func wait() async -> Completion {
        await withUnsafeContinuation { continuation in
            let early = state.withLock { state -> Completion? in
                if let completion = state.completion { return completion }
                state.continuation = continuation
                return nil
            }
            if let early { continuation.resume(returning: early) }
        }
    }
}

/// The calls the host has handed to plugins and that are not finished yet, by id.
package enum PluginCallRegistry {
    private static let live = Mutex<[UInt64: PluginCall]>([:])

    /// The id a handle carries.
    package static func id(_ handle: OpaquePointer?) -> UInt64 {
        UInt64(UInt(bitPattern: handle.map { Int(bitPattern: UnsafeRawPointer($0)) } ?? 0))
    }

    package static func register(_ call: PluginCall) {
        live.withLock { $0[call.id] = call }
    }

    /// The live call behind `handle`; `nil` (after a warning, once per plugin) if it is finished or unknown.
    package static func lookup(_ handle: OpaquePointer?, for function: String) -> PluginCall? {
        let id = id(handle)
        if let call = live.withLock({ $0[id] }) { return call }
        if let owner = PluginEndpoint.owner(ofCall: id) {
            owner.warnAboutHandle(function)
        } else {
            PluginEndpoint.warnAboutForeignHandle(function)
        }
        return nil
    }

    /// Whether the call behind `handle` is still live (no warning).
    package static func isLive(_ call: PluginCall) -> Bool {
        live.withLock { $0[call.id] != nil }
    }

    /// Takes the call out of the registry; later uses of its handle are refused.
    package static func remove(_ call: PluginCall) {
        live.withLock { _ = $0.removeValue(forKey: call.id) }
    }
}
