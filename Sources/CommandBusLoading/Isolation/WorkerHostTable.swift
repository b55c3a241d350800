import CCommandBusABI
import Synchronization
import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc

/// A payload the worker received, kept at one address until every call that reads it is done
/// (the ABI promises a plugin its payload stays valid until it completes the call).
package final class WorkerPayload: @unchecked Sendable {
    // Written once in init, only read after.
    private let buffer: UnsafeMutableBufferPointer<UInt8>
    private let count: Int

    package init(_ bytes: [UInt8]) {
        buffer = .allocate(capacity: max(bytes.count, 1))
        _ = buffer.initialize(from: bytes)
        count = bytes.count
    }

    deinit { buffer.deallocate() }

    /// The bytes as the plugin sees them.
    package var bytes: cmdbus_bytes { cmdbus_bytes(data: UnsafePointer(buffer.baseAddress), length: count) }
}

/// One call the worker made into its plugin. Its handle is an id the worker never reuses, not
/// an address, so a handle kept after `complete()` cannot reach a later call.
package final class WorkerCall: Sendable {
    /// The host's id for the call (0 for a `can_handle()` probe).
    package let id: UInt64
    /// The payload, kept alive until the call completes.
    package let payload: WorkerPayload
    package let cancelled = Atomic<Bool>(false)
    private let probeMessage = Mutex<[UInt8]>([])
    /// The handle the plugin sees.
    package let handleID: UInt64

    package init(id: UInt64, payload: WorkerPayload) {
        self.id = id
        self.payload = payload
        handleID = WorkerSession.nextHandleID()
    }

    package var handle: OpaquePointer { OpaquePointer(bitPattern: UInt(handleID))! }
    package var payloadBytes: cmdbus_bytes { payload.bytes }
    package var message: [UInt8] { probeMessage.withLock { $0 } }

    package func keepMessage(_ bytes: [UInt8]) { probeMessage.withLock { $0 = bytes } }
}

/// The worker's state: its channel to the host, its live calls, the threads plugin code runs on,
/// and the requests (subcommands, envelopes) awaiting the host's reply.
package enum WorkerSession {
    package static let channel = Mutex<FrameChannel?>(nil)
    /// The worker's threads, told when plugin code is about to wait for the host.
    static let threads = Mutex<WorkerThreads?>(nil)
    private static let calls = Mutex<[UInt64: WorkerCall]>([:])
    private static let replies = Mutex<(next: UInt64, waiting: [UInt64: @Sendable (Int32, [UInt8]) -> Void])>((1, [:]))
    private static let handles = Atomic<UInt64>(0)
    private static let warnedAboutHandles = Atomic<Bool>(false)
    /// The plugin this worker serves, as messages name it: `'name' (file)`.
    package static let pluginLabel = Mutex("the plugin")

    /// A handle id never used before in this worker.
    package static func nextHandleID() -> UInt64 { handles.wrappingAdd(1, ordering: .relaxed).newValue }
    package static func register(_ call: WorkerCall) { calls.withLock { $0[call.handleID] = call } }
    package static func remove(_ call: WorkerCall) { calls.withLock { _ = $0.removeValue(forKey: call.handleID) } }

    /// The live call behind `handle`; `nil` (after a warning to the host, once) if it is finished or unknown.
    package static func call(_ handle: OpaquePointer?, for function: String) -> WorkerCall? {
        let id = UInt64(UInt(bitPattern: handle.map { Int(bitPattern: UnsafeRawPointer($0)) } ?? 0))
        if let call = calls.withLock({ $0[id] }) { return call }
        if !warnedAboutHandles.exchange(true, ordering: .relaxed) {
            let message = "plugin \(pluginLabel.withLock { $0 }) called \(function) with a call handle that is finished or unknown; ignored "
                + "(this is reported once per plugin; the plugin keeps a handle after complete())"
            send(WorkerFrame(kind: .log, id: 0, status: Int32(CMDBUS_LOG_WARNING.rawValue), body: Array(message.utf8)))
        }
        return nil
    }
    package static func call(withID id: UInt64) -> WorkerCall? { calls.withLock { $0.values.first { $0.id == id } } }

    package static func send(_ frame: WorkerFrame) {
        channel.withLock { $0 }?.send(frame)
    }

    /// Sends a frame from its parts.
    package static func send(
        _ kind: WorkerFrame.Kind, id: UInt64 = 0, parent: UInt64 = 0, status: Int32 = 0,
        name: some Collection<UInt8> = EmptyCollection(), body: some Collection<UInt8> = EmptyCollection()
    ) {
        channel.withLock { $0 }?.send(kind, id: id, parent: parent, status: status, name: name, body: body)
    }

    /// Registers what to do with the host's reply; returns the request id to send.
    package static func expectReply(_ reply: @escaping @Sendable (Int32, [UInt8]) -> Void) -> UInt64 {
        replies.withLock { state in
            let id = state.next
            state.next += 1
            state.waiting[id] = reply
            return id
        }
    }

    package static func takeReply(_ id: UInt64) -> (@Sendable (Int32, [UInt8]) -> Void)? {
        replies.withLock { $0.waiting.removeValue(forKey: id) }
    }
}

/// The `cmdbus_host_api` a worker gives its plugin: every function becomes a frame to the host.
package enum WorkerHostTable {
    // Written once, then only read, for the life of the process.
    package nonisolated(unsafe) static let pointer: UnsafePointer<cmdbus_host_api> = {
        let table = UnsafeMutablePointer<cmdbus_host_api>.allocate(capacity: 1)
        table.initialize(to: cmdbus_host_api(
            struct_size: UInt32(MemoryLayout<cmdbus_host_api>.size),
            abi_major: UInt32(CMDBUS_ABI_VERSION_MAJOR), abi_minor: UInt32(CMDBUS_ABI_VERSION_MINOR),
            complete: workerComplete, send: workerSend, emit: workerEmit, log: workerLog, is_cancelled: workerIsCancelled,
            envelope: workerEnvelope, progress: workerProgress
        ))
        return UnsafePointer(table)
    }()
}

/// The bytes a plugin passed, borrowed for the length of the host function.
private func borrowed(_ bytes: cmdbus_bytes) -> UnsafeBufferPointer<UInt8> {
    UnsafeBufferPointer(start: bytes.data, count: bytes.data == nil ? 0 : bytes.length)
}

private func bytes(_ borrowed: cmdbus_bytes) -> [UInt8] {
    Array(Data(borrowing: borrowed))
}

private let workerComplete: @convention(c) (OpaquePointer?, Int32, cmdbus_bytes) -> Void = { handle, status, body in
    guard let call = WorkerSession.call(handle, for: "complete()") else { return }
    if call.id == 0 {
        call.keepMessage(bytes(body))
        return
    }
    WorkerSession.remove(call)
    WorkerSession.send(.complete, id: call.id, status: status, body: borrowed(body))
}

private let workerSend: @convention(c) (OpaquePointer?, UnsafePointer<CChar>?, cmdbus_bytes, cmdbus_reply_fn?, UnsafeMutableRawPointer?) -> Void = {
    handle, name, payload, onReply, userData in
    guard let onReply else { return }
    let reply = ReplyCallback(function: onReply, userData: userData)
    guard let call = WorkerSession.call(handle, for: "send()"), let name else {
        reply.deliver(status: Int32(CMDBUS_FAILED.rawValue), body: Array("send: unknown or completed parent call".utf8))
        return
    }
    // The reply runs the plugin's on_reply as a job: never on the thread reading frames.
    let id = WorkerSession.expectReply { status, body in reply.deliver(status: status, body: body) }
    // The plugin may now wait for the reply: somebody must read it.
    WorkerSession.threads.withLock { $0 }?.ensureReader()
    WorkerSession.send(.send, id: id, parent: call.id, name: UnsafeBufferPointer(start: UnsafeRawPointer(name).assumingMemoryBound(to: UInt8.self), count: strlen(name)), body: borrowed(payload))
}

private let workerEmit: @convention(c) (OpaquePointer?, UnsafePointer<CChar>?, cmdbus_bytes) -> Void = { handle, name, payload in
    guard let call = WorkerSession.call(handle, for: "emit()"), let name else { return }
    WorkerSession.send(WorkerFrame(kind: .emit, id: call.id, name: String(cString: name), body: bytes(payload)))
}

private let workerLog: @convention(c) (OpaquePointer?, Int32, UnsafePointer<CChar>?) -> Void = { handle, level, message in
    guard let message else { return }
    let id = handle == nil ? 0 : WorkerSession.call(handle, for: "log()")?.id ?? 0
    WorkerSession.send(WorkerFrame(kind: .log, id: id, status: level, body: Array(String(cString: message).utf8)))
}

private let workerProgress: @convention(c) (OpaquePointer?, Int64, Int64) -> Void = { handle, done, total in
    guard let call = WorkerSession.call(handle, for: "progress()") else { return }
    WorkerSession.send(WorkerFrame(kind: .progress, id: call.id, body: Array("\(done) \(total)".utf8)))
}

private let workerIsCancelled: @convention(c) (OpaquePointer?) -> Int32 = { handle in
    guard let call = WorkerSession.call(handle, for: "is_cancelled()") else { return 1 }
    return call.cancelled.load(ordering: .acquiring) ? 1 : 0
}

private let workerEnvelope: @convention(c) (OpaquePointer?, cmdbus_reply_fn?, UnsafeMutableRawPointer?) -> Void = { handle, onReply, userData in
    guard let onReply else { return }
    let reply = ReplyCallback(function: onReply, userData: userData)
    guard let call = WorkerSession.call(handle, for: "envelope()"), call.id != 0 else {
        reply.deliver(status: Int32(CMDBUS_FAILED.rawValue), body: Array("envelope: unknown or completed call".utf8))
        return
    }
    // Asked of the host only now, so calls do not carry it; this thread waits (never the reader).
    let answered = DispatchSemaphore(value: 0)
    let answer = Mutex<(Int32, [UInt8])>((Int32(CMDBUS_FAILED.rawValue), Array("envelope: the host is gone".utf8)))
    let id = WorkerSession.expectReply { status, body in
        answer.withLock { $0 = (status, body) }
        answered.signal()
    }
    WorkerSession.send(.envelope, id: id, parent: call.id)
    WorkerSession.threads.withLock { $0 }?.ensureReader()
    answered.wait()
    let (status, body) = answer.withLock { $0 }
    reply.deliver(status: status, body: body)
}
