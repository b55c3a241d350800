import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One journal write as the log (``JournalLog``) stores it: a 16-byte header and the write's bytes.
///
/// The header holds the body's length, the log generation the record was written in (stamped as
/// it is appended: ``stamp(_:generation:)``), and a CRC-32 of the length and the body. A record
/// torn by a power cut, or left from an earlier generation in a file the log has since reused,
/// fails one of those checks, and a scan stops there: records are only ever appended, so nothing
/// valid follows one that is not.
enum JournalLogRecord {
    /// Header bytes before the body: length, generation, checksum, and four reserved (zero).
    static let headerSize = 16
    /// The largest body a record may have: a command's payload and result are far smaller.
    static let maximumBody = 1 << 30

    /// The record for `write`, by the process `owner`, without its generation (``stamp(_:generation:)``).
    static func encode(_ write: JournalWrite, owner: String) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: headerSize)
        bytes.reserveCapacity(headerSize + 128)
        JournalWriteCoding.encode(write, owner: owner, into: &bytes)
        let bodyCount = UInt32(bytes.count - headerSize)
        bytes.store(bodyCount, at: 0)
        bytes.store(checksum(of: bytes), at: 8)
        return bytes
    }

    /// Writes the generation a record is appended in into its header.
    static func stamp(_ record: inout [UInt8], generation: UInt32) {
        record.store(generation, at: 4)
    }

    /// The CRC-32 of the length and the body.
    static func checksum(of record: [UInt8]) -> UInt32 {
        record.withUnsafeBytes { bytes in
            var crc = CRC32()
            crc.update(UnsafeRawBufferPointer(rebasing: bytes[0..<4]))
            crc.update(UnsafeRawBufferPointer(rebasing: bytes[headerSize...]))
            return crc.value
        }
    }

    /// The valid records of `generation` at the start of `bytes`, in order; the scan stops at the
    /// first record that is torn, damaged or of another generation.
    static func scan(_ bytes: [UInt8], generation: UInt32) -> [JournalLogEntry] {
        var writes: [JournalLogEntry] = []
        var offset = 0
        while offset + headerSize <= bytes.count {
            let length = Int(bytes.load(UInt32.self, at: offset))
            guard length <= maximumBody, offset + headerSize + length <= bytes.count,
                  bytes.load(UInt32.self, at: offset + 4) == generation else { break }
            let record = Array(bytes[offset..<(offset + headerSize + length)])
            guard record.load(UInt32.self, at: 8) == checksum(of: record),
                  let write = JournalWriteCoding.decode(record[headerSize...]) else { break }
            writes.append(write)
            offset += headerSize + length
        }
        return writes
    }

    /// The valid records at the start of `bytes` in the generation of the first, and that
    /// generation; `nil` if no record starts there whole and intact.
    static func scanFirstGeneration(_ bytes: [UInt8]) -> (generation: UInt32, entries: [JournalLogEntry])? {
        guard bytes.count >= headerSize else { return nil }
        let generation = bytes.load(UInt32.self, at: 4)
        let entries = scan(bytes, generation: generation)
        return entries.isEmpty ? nil : (generation, entries)
    }
}

/// CRC-32 (IEEE 802.3, reflected, as zlib computes it).
struct CRC32 {
    /// The checksum of the bytes so far.
    private(set) var value: UInt32 = 0

    private static let table: [UInt32] = (0..<256).map { index in
        var entry = UInt32(index)
        for _ in 0..<8 { entry = entry & 1 == 1 ? 0xEDB8_8320 ^ (entry >> 1) : entry >> 1 }
        return entry
    }

    /// Takes in `bytes`, after those before.
    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        var crc = ~value
        Self.table.withUnsafeBufferPointer { table in
            for byte in bytes { crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
        }
        value = ~crc
    }
}

extension [UInt8] {
    /// Writes `value` little-endian at `offset`, which must already be within the array.
    mutating func store(_ value: UInt32, at offset: Int) {
        for index in 0..<4 { self[offset + index] = UInt8(truncatingIfNeeded: value >> (8 * index)) }
    }

    /// The little-endian `UInt32` at `offset`, which must be within the array.
    func load(_: UInt32.Type, at offset: Int) -> UInt32 {
        (0..<4).reduce(UInt32(0)) { value, index in value | UInt32(self[offset + index]) << (8 * index) }
    }
}
