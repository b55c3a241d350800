import CommandBusSupport
import Glibc
import Synchronization

/// One message between the host and a plugin worker process: the C ABI's calls, as a
/// length-prefixed frame on a socketpair.
///
/// Layout, little-endian: `u32 length` (of the rest), `u8 kind`, `u64 id`, `u64 parent`,
/// `i32 status`, `u32 name length`, the name (UTF-8), then the body to the end.
package struct WorkerFrame: Equatable, Sendable {
    package enum Kind: UInt8, Sendable {
        /// worker → host: the plugin loaded; the body is its description (JSON).
        case ready = 1
        /// worker → host: the plugin did not load; the body is why.
        case loadFailed
        /// host → worker: run commands[status] with the body as payload, as call `id`. The worker asks
        /// the plugin's `can_handle()` first (unless its handle() decides) and completes with
        /// `CMDBUS_DECLINED` if it says no.
        case handle
        /// host → worker: would commands[status] take this payload? Answered by `canHandleAnswer`.
        case canHandle
        /// worker → host: the answer (status 1, 0, or -cmdbus_status) and any message.
        case canHandleAnswer
        /// host → worker: cancel call `id`.
        case cancel
        /// worker → host: call `id` completed with `status` and the body.
        case complete
        /// worker → host: send subcommand `name` (body: payload) as request `id`, child of call `parent`.
        case send
        /// host → worker: the outcome of send request `id`.
        case reply
        /// worker → host: call `id` emitted event `name` (body: payload).
        case emit
        /// worker → host: a log line at level `status` about call `id` (0: none).
        case log
        /// worker → host: call `id` reports progress; the body is "DONE TOTAL".
        case progress
        /// worker → host: the envelope (JSON) of call `parent`, please, as `reply` `id` (asked for
        /// only when the plugin calls `host->envelope`, so a call does not carry it).
        case envelope
    }

    package var kind: Kind
    package var id: UInt64 = 0
    package var parent: UInt64 = 0
    package var status: Int32 = 0
    package var name: String = ""
    package var body: [UInt8] = []

    /// The largest frame either side accepts.
    package static let maxLength = 64 << 20
    package static let headerLength = 1 + 8 + 8 + 4 + 4

    package var encoded: [UInt8] {
        var bytes: [UInt8] = []
        Self.encode(kind, id: id, parent: parent, status: status, name: name.utf8, body: body, into: &bytes)
        return bytes
    }

    /// Appends one frame's bytes, length prefix first, to `bytes`.
    package static func encode(
        _ kind: Kind, id: UInt64, parent: UInt64, status: Int32, name: some Collection<UInt8>, body: some Collection<UInt8>,
        into bytes: inout [UInt8]
    ) {
        bytes.reserveCapacity(bytes.count + 4 + headerLength + name.count + body.count)
        func append<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) } }
        append(UInt32(headerLength + name.count + body.count))
        bytes.append(kind.rawValue)
        append(id)
        append(parent)
        append(status)
        append(UInt32(name.count))
        bytes.append(contentsOf: name)
        bytes.append(contentsOf: body)
    }

    /// Decodes the part after the length prefix; `nil` if it is malformed.
    package init?(decoding bytes: ArraySlice<UInt8>) {
        self.init(decoding: bytes.withUnsafeBytes { $0 })
    }

    /// Decodes the part after the length prefix; `nil` if it is malformed.
    package init?(decoding bytes: UnsafeRawBufferPointer) {
        guard bytes.count >= Self.headerLength, let kind = Kind(rawValue: bytes[0]) else { return nil }
        func read<T: FixedWidthInteger>(_ offset: Int, as: T.Type) -> T {
            T(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: T.self))
        }
        let nameLength = Int(read(21, as: UInt32.self))
        guard nameLength <= bytes.count - Self.headerLength else { return nil }
        self.kind = kind
        id = read(1, as: UInt64.self)
        parent = read(9, as: UInt64.self)
        status = read(17, as: Int32.self)
        name = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[Self.headerLength..<(Self.headerLength + nameLength)]), as: UTF8.self)
        body = Array(UnsafeRawBufferPointer(rebasing: bytes[(Self.headerLength + nameLength)...]))
    }

    package init(kind: Kind, id: UInt64 = 0, parent: UInt64 = 0, status: Int32 = 0, name: String = "", body: [UInt8] = []) {
        self.kind = kind
        self.id = id
        self.parent = parent
        self.status = status
        self.name = name
        self.body = body
    }
}

/// Frames over one socket: whole frames written under a lock, read under another.
///
/// Writes reuse one buffer and cost one `send` each; reads fill a buffer with as much as the
/// socket has and take frames from it, so a burst of frames costs one `recv`. A thread may
/// block for the next frame (``receive(spinning:)``), as the worker's threads do, or take
/// every one that has arrived without waiting (``receiveArrived(ifFree:)``), as the host's
/// callers and its watcher do.
package final class FrameChannel: Sendable {
    package let descriptor: Int32
    private let writing = Mutex<(buffer: [UInt8], closed: Bool)>(([], false))
    private let reading = Mutex<ReadBuffer>(ReadBuffer())

    package init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    /// Writes a frame; `false` if the other side is gone.
    @discardableResult
    package func send(_ frame: WorkerFrame) -> Bool {
        send(frame.kind, id: frame.id, parent: frame.parent, status: frame.status, name: frame.name.utf8, body: frame.body)
    }

    /// Writes a frame from its parts, without making a ``WorkerFrame``; `false` if the other side is gone.
    @discardableResult
    package func send(
        _ kind: WorkerFrame.Kind, id: UInt64 = 0, parent: UInt64 = 0, status: Int32 = 0,
        name: some Collection<UInt8> = EmptyCollection(), body: some Collection<UInt8> = EmptyCollection()
    ) -> Bool {
        writing.withLock { state in
            guard !state.closed else { return false }
            state.buffer.removeAll(keepingCapacity: true)
            WorkerFrame.encode(kind, id: id, parent: parent, status: status, name: name, body: body, into: &state.buffer)
            defer { if state.buffer.capacity > 1 << 20 { state.buffer = [] } }
            return sendAll(descriptor, state.buffer)
        }
    }

    /// Blocks for the next frame; `nil` when the other side has closed, or sent something malformed.
    /// - Parameter spin: How long to keep asking before the thread sleeps in `recv`: waking a
    ///   sleeping thread costs tens of microseconds on a virtual machine, more than a whole call.
    package func receive(spinning spin: Duration = .zero) -> WorkerFrame? {
        reading.withLock { buffer in
            let spinUntil = spin > .zero ? ContinuousClock.now + spin : nil
            while true {
                switch buffer.takeFrame() {
                case .frame(let frame): return frame
                case .malformed: return nil
                case .incomplete: break
                }
                let wait = spinUntil.map { ContinuousClock.now >= $0 } ?? true
                guard buffer.fill(from: descriptor, waiting: wait) != .ended else { return nil }
            }
        }
    }

    /// What ``receiveArrived(ifFree:)`` found after the frames it took.
    package enum Ready: Sendable {
        /// No more whole frames have arrived yet.
        case nothingYet
        /// Another thread is reading (only when asked `ifFree`).
        case busy
        /// The other side has closed, or sent something malformed: no frame will come.
        case ended
    }

    /// Every whole frame that has arrived, in order, taken in one hold of the lock: those in the
    /// buffer, or if there are none, those the socket has now, read without waiting. Then
    /// ``Ready/nothingYet`` or ``Ready/ended`` (``Ready/busy``, with no frames, if `ifFree` and
    /// another thread reads).
    ///
    /// The host's callers and its watcher both read this way. A caller that reads the socket for
    /// its own answer so never leaves a whole frame in the buffer when it goes: the watcher
    /// sleeps in `poll()` on the socket, which has nothing more to say of them, and the calls
    /// they answer would wait for ever. (Taking one frame at a time, a caller that found its
    /// answer left the rest there, and a test of 600 isolated echoes hung on one.)
    /// - Parameter ifFree: Answer ``Ready/busy`` at once if another thread is reading, instead of waiting for it.
    package func receiveArrived(ifFree: Bool = false) -> (frames: [WorkerFrame], then: Ready) {
        if ifFree { return reading.withLockIfAvailable { takeArrived(&$0) } ?? ([], .busy) }
        return reading.withLock { takeArrived(&$0) }
    }

    private func takeArrived(_ buffer: inout ReadBuffer) -> (frames: [WorkerFrame], then: Ready) {
        var frames: [WorkerFrame] = []
        while true {
            taking: while true {
                switch buffer.takeFrame() {
                case .frame(let frame): frames.append(frame)
                case .malformed: return (frames, .ended)
                case .incomplete: break taking
                }
            }
            guard frames.isEmpty else { return (frames, .nothingYet) }
            switch buffer.fill(from: descriptor, waiting: false) {
            case .ended: return (frames, .ended)
            case .nothingYet: return (frames, .nothingYet)
            case .read: continue
            }
        }
    }

    /// Closes the socket once no thread is using it, so a late reader or writer never reaches a
    /// descriptor number the process has since reused. (Not while a thread blocks in ``receive(spinning:)``.)
    package func close() {
        writing.withLock { state in
            reading.withLock { buffer in
                guard !state.closed else { return }
                state.closed = true
                buffer.ended = true
                Glibc.close(descriptor)
            }
        }
    }
}

/// The bytes read from a socket and not yet taken as frames.
private struct ReadBuffer {
    var bytes = [UInt8](repeating: 0, count: 64 << 10)
    /// The unread bytes are `bytes[start..<end]`.
    var start = 0
    var end = 0
    /// Whether the stream has ended (or the channel closed): nothing more is read.
    var ended = false

    enum Taken {
        case frame(WorkerFrame)
        case incomplete
        case malformed
    }

    enum Filled {
        case read
        case nothingYet
        case ended
    }

    /// The next whole frame in the buffer, if there is one.
    mutating func takeFrame() -> Taken {
        let unread = end - start
        guard unread >= 4 else { return .incomplete }
        let length = bytes.withUnsafeBytes { Int(UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: start, as: UInt32.self))) }
        guard length <= WorkerFrame.maxLength else { return .malformed }
        guard unread >= 4 + length else {
            makeRoom(for: 4 + length)
            return .incomplete
        }
        let frame = bytes.withUnsafeBytes { WorkerFrame(decoding: UnsafeRawBufferPointer(rebasing: $0[(start + 4)..<(start + 4 + length)])) }
        start += 4 + length
        if start == end { start = 0; end = 0 }
        return frame.map(Taken.frame) ?? .malformed
    }

    /// Makes sure a frame of `count` bytes (with its prefix) fits after the unread bytes move to the front.
    private mutating func makeRoom(for count: Int) {
        if start > 0 {
            let unread = end - start
            bytes.withUnsafeMutableBytes { raw in
                raw.baseAddress!.copyMemory(from: raw.baseAddress! + start, byteCount: unread)
            }
            start = 0
            end = unread
        }
        if bytes.count < count { bytes += [UInt8](repeating: 0, count: count - bytes.count) }
    }

    /// Reads what the socket has, waiting for something if `waiting`.
    mutating func fill(from descriptor: Int32, waiting: Bool) -> Filled {
        guard !ended else { return .ended }
        if end == bytes.count { makeRoom(for: end - start + 1) }
        while true {
            let offset = end
            let got = bytes.withUnsafeMutableBytes {
                recv(descriptor, $0.baseAddress! + offset, $0.count - offset, waiting ? 0 : Int32(MSG_DONTWAIT))
            }
            if got > 0 {
                end += got
                return .read
            }
            if got < 0 && errno == EINTR { continue }
            if got < 0 && errno == EAGAIN && !waiting { return .nothingYet }
            // The end of the stream, an error, or (at start-up) the receive timeout.
            if got == 0 || errno != EAGAIN { ended = true }
            return .ended
        }
    }
}
