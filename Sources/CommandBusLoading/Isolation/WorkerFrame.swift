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
        /// host → worker: run commands[status] with the body as payload, as call `id`; `name` is the envelope (JSON).
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
        let nameBytes = Array(name.utf8)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(4 + Self.headerLength + nameBytes.count + body.count)
        func append<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.littleEndian) { bytes += $0 } }
        append(UInt32(Self.headerLength + nameBytes.count + body.count))
        bytes.append(kind.rawValue)
        append(id)
        append(parent)
        append(status)
        append(UInt32(nameBytes.count))
        bytes += nameBytes
        bytes += body
        return bytes
    }

    /// Decodes the part after the length prefix; `nil` if it is malformed.
    package init?(decoding bytes: [UInt8]) {
        guard bytes.count >= Self.headerLength, let kind = Kind(rawValue: bytes[0]) else { return nil }
        func read<T: FixedWidthInteger>(_ offset: Int, as: T.Type) -> T {
            var value: T = 0
            _ = withUnsafeMutableBytes(of: &value) { bytes.copyBytes(to: $0, from: offset..<(offset + MemoryLayout<T>.size)) }
            return T(littleEndian: value)
        }
        let nameLength = Int(read(21, as: UInt32.self))
        guard nameLength <= bytes.count - Self.headerLength else { return nil }
        self.kind = kind
        id = read(1, as: UInt64.self)
        parent = read(9, as: UInt64.self)
        status = read(17, as: Int32.self)
        name = String(decoding: bytes[Self.headerLength..<(Self.headerLength + nameLength)], as: UTF8.self)
        body = Array(bytes[(Self.headerLength + nameLength)...])
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

/// Frames over one socket: whole frames written under a lock, read by one reader.
package final class FrameChannel: Sendable {
    package let descriptor: Int32
    private let writing = Mutex(())

    package init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    /// Writes a frame; `false` if the other side is gone.
    @discardableResult
    package func send(_ frame: WorkerFrame) -> Bool {
        let bytes = frame.encoded
        return writing.withLock { _ in sendAll(descriptor, bytes) }
    }

    /// Blocks for the next frame; `nil` when the other side has closed, or sent something malformed.
    package func receive() -> WorkerFrame? {
        guard let prefix = read(exactly: 4) else { return nil }
        let length = Int(UInt32(prefix[0]) | UInt32(prefix[1]) << 8 | UInt32(prefix[2]) << 16 | UInt32(prefix[3]) << 24)
        guard length <= WorkerFrame.maxLength, let rest = read(exactly: length) else { return nil }
        return WorkerFrame(decoding: rest)
    }

    private func read(exactly count: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let got = bytes.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress! + filled, count - filled, 0) }
            if got < 0 && errno == EINTR { continue }
            if got <= 0 { return nil }
            filled += got
        }
        return bytes
    }

    package func close() { Glibc.close(descriptor) }
}
