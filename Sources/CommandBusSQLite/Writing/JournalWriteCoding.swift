import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A write read back from the log, and the process that made it (for an accept, the entry's owner).
struct JournalLogEntry {
    let write: JournalWrite
    /// ``ProcessIdentity/text`` of the process that wrote it; empty for any write but an accept.
    let owner: String
}

/// A journal write as bytes, for the log (``JournalLogRecord``): a tag, then the write's fields,
/// numbers little-endian, optional values behind a length of `UInt32.max` for none. An accept
/// ends with its owner, so that a command recovered from the log still belongs to the process
/// that accepted it (recovery runs only a dead process's commands).
enum JournalWriteCoding {
    private enum Tag: UInt8 {
        case accept = 1, update, linkUndo, exclude, markFailed, discard
    }

    /// Appends `write`'s bytes to `bytes`; an accept's with `owner`.
    static func encode(_ write: JournalWrite, owner: String, into bytes: inout [UInt8]) {
        var writer = ByteWriter(bytes: bytes)
        defer { bytes = writer.bytes }
        switch write {
        case .accept(let command):
            writer.append(Tag.accept.rawValue)
            writer.append(command.id)
            writer.append(command.createdAt.bitPattern)
            writer.append(bytes: command.values)
            for part in [command.idText, command.name, command.parentText, command.correlationText, command.metadataText, command.payload] {
                writer.append(UInt32(truncatingIfNeeded: part?.start ?? Int(UInt32.max)))
                writer.append(UInt32(truncatingIfNeeded: part?.count ?? 0))
            }
            writer.append(optional: Array(owner.utf8))
        case .update(let update):
            writer.append(Tag.update.rawValue)
            writer.append(update.id)
            writer.append(UInt8(CommandState.allCases.firstIndex(of: update.state)!))
            writer.append(UInt64(truncatingIfNeeded: update.attempts))
            writer.append(update.at.timeIntervalSince1970.bitPattern)
            writer.append(optional: update.result.map { [UInt8]($0) })
            writer.append(optional: update.errorCode.map { Array($0.utf8) })
            writer.append(optional: update.errorMessage.map { Array($0.utf8) })
        case .linkUndo(let undo, let original):
            writer.append(Tag.linkUndo.rawValue)
            writer.append(undo)
            writer.append(original)
        case .exclude(let id, let excluded):
            writer.append(Tag.exclude.rawValue)
            writer.append(id)
            writer.append(UInt8(excluded ? 1 : 0))
        case .markFailed(let id, let code, let message):
            writer.append(Tag.markFailed.rawValue)
            writer.append(id)
            writer.append(optional: Array(code.utf8))
            writer.append(optional: Array(message.utf8))
        case .discard(let id):
            writer.append(Tag.discard.rawValue)
            writer.append(id)
        }
    }

    /// The write `bytes` hold, or `nil` if they are not one whole write.
    static func decode(_ bytes: ArraySlice<UInt8>) -> JournalLogEntry? {
        var reader = ByteReader(bytes: bytes)
        guard let tag = reader.byte().flatMap(Tag.init(rawValue:)) else { return nil }
        let write: JournalWrite?
        var owner = ""
        switch tag {
        case .accept:
            guard let command = decodeAccept(&reader), let ownerBytes = reader.optional() ?? nil else { return nil }
            write = .accept(command)
            owner = String(decoding: ownerBytes, as: UTF8.self)
        case .update:
            guard let id = reader.uuid(), let stateIndex = reader.byte(), Int(stateIndex) < CommandState.allCases.count,
                  let attempts = reader.uint64(), let at = reader.uint64(),
                  let result = reader.optional(), let code = reader.optional(), let message = reader.optional() else { return nil }
            var update = JournalUpdate(
                id: id, state: CommandState.allCases[Int(stateIndex)], attempts: Int(truncatingIfNeeded: attempts),
                result: result.map { Data($0) }, at: Date(timeIntervalSince1970: Double(bitPattern: at))
            )
            update.errorCode = code.map { String(decoding: $0, as: UTF8.self) }
            update.errorMessage = message.map { String(decoding: $0, as: UTF8.self) }
            write = .update(update)
        case .linkUndo:
            guard let undo = reader.uuid(), let original = reader.uuid() else { return nil }
            write = .linkUndo(undo: undo, original: original)
        case .exclude:
            guard let id = reader.uuid(), let flag = reader.byte() else { return nil }
            write = .exclude(id, flag != 0)
        case .markFailed:
            guard let id = reader.uuid(), let code = reader.optional() ?? nil, let message = reader.optional() ?? nil else { return nil }
            write = .markFailed(id, code: String(decoding: code, as: UTF8.self), message: String(decoding: message, as: UTF8.self))
        case .discard:
            write = reader.uuid().map(JournalWrite.discard)
        }
        guard reader.isAtEnd, let write else { return nil }
        return JournalLogEntry(write: write, owner: owner)
    }

    private static func decodeAccept(_ reader: inout ByteReader) -> AcceptedCommand? {
        guard let id = reader.uuid(), let createdAt = reader.uint64(), let values = reader.optional() ?? nil else { return nil }
        var parts: [AcceptedCommand.Part?] = []
        for _ in 0..<6 {
            guard let start = reader.uint32(), let count = reader.uint32() else { return nil }
            if start == UInt32.max { parts.append(nil); continue }
            guard Int(start) + Int(count) <= values.count else { return nil }
            parts.append(AcceptedCommand.Part(start: Int(start), count: Int(count)))
        }
        guard let idText = parts[0], let name = parts[1], let correlation = parts[3], let payload = parts[5] else { return nil }
        return AcceptedCommand(
            id: id, createdAt: Double(bitPattern: createdAt), values: values,
            idText: idText, name: name, parentText: parts[2], correlationText: correlation, metadataText: parts[4], payload: payload
        )
    }
}

/// Appends little-endian fields to a byte array.
private struct ByteWriter {
    var bytes: [UInt8]

    mutating func append(_ byte: UInt8) { bytes.append(byte) }

    mutating func append(_ value: UInt32) {
        for index in 0..<4 { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * index))) }
    }

    mutating func append(_ value: UInt64) {
        for index in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * index))) }
    }

    mutating func append(_ id: UUID) {
        withUnsafeBytes(of: id.uuid) { bytes.append(contentsOf: $0) }
    }

    /// A length and the bytes.
    mutating func append(bytes value: UnsafeRawBufferPointer) {
        append(UInt32(value.count))
        bytes.append(contentsOf: value)
    }

    /// A length and the bytes, or `UInt32.max` for none.
    mutating func append(optional value: [UInt8]?) {
        guard let value else { return append(UInt32.max) }
        append(UInt32(value.count))
        bytes.append(contentsOf: value)
    }
}

/// Reads little-endian fields from bytes; each read is `nil` past the end.
private struct ByteReader {
    let bytes: ArraySlice<UInt8>
    private var offset: Int

    init(bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
        offset = bytes.startIndex
    }

    var isAtEnd: Bool { offset == bytes.endIndex }

    private mutating func take(_ count: Int) -> ArraySlice<UInt8>? {
        guard count >= 0, bytes.endIndex - offset >= count else { return nil }
        defer { offset += count }
        return bytes[offset..<(offset + count)]
    }

    mutating func byte() -> UInt8? { take(1)?.first }

    mutating func uint32() -> UInt32? {
        take(4).map { $0.reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) } }
    }

    mutating func uint64() -> UInt64? {
        take(8).map { $0.reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
    }

    mutating func uuid() -> UUID? {
        guard let raw = take(16) else { return nil }
        var value = UUID().uuid
        withUnsafeMutableBytes(of: &value) { $0.copyBytes(from: raw) }
        return UUID(uuid: value)
    }

    /// `nil` past the end; `.some(nil)` for a value written as none.
    mutating func optional() -> [UInt8]?? {
        guard let count = uint32() else { return nil }
        if count == UInt32.max { return .some(nil) }
        guard let value = take(Int(count)) else { return nil }
        return .some(Array(value))
    }
}
