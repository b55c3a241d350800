import CLibPQ
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One statement parameter: its bytes, its type and whether they are binary.
package struct PGValue: Sendable {
    package let bytes: [UInt8]
    package let type: Oid
    package let isBinary: Bool

    /// Text, sent as `text` (a NUL in it is refused by PostgreSQL; use ``bytes(_:)`` for arbitrary bytes).
    package static func text(_ value: String) -> PGValue { PGValue(bytes: Array(value.utf8), type: 25, isBinary: false) }
    /// Raw bytes, sent binary as `bytea`: any byte, NULs included, goes in and comes out unchanged.
    package static func bytes(_ value: Data) -> PGValue { PGValue(bytes: Array(value), type: 17, isBinary: true) }
    /// A 64-bit integer.
    package static func integer(_ value: Int64) -> PGValue { PGValue(bytes: Array(String(value).utf8), type: 20, isBinary: false) }
    /// A 64-bit integer.
    package static func integer(_ value: Int) -> PGValue { .integer(Int64(value)) }
    /// A UUID.
    package static func uuid(_ value: UUID) -> PGValue { PGValue(bytes: Array(value.uuidString.utf8), type: 2950, isBinary: false) }
    /// A boolean.
    package static func bool(_ value: Bool) -> PGValue { PGValue(bytes: Array((value ? "t" : "f").utf8), type: 16, isBinary: false) }
    /// String metadata as JSON text, for a `jsonb` column.
    package static func metadata(_ metadata: [String: String]) -> PGValue {
        .text(metadataText(metadata))
    }
    /// String metadata as JSON text.
    package static func metadataText(_ metadata: [String: String]) -> String {
        metadata.isEmpty ? "{}" : jsonbStorable(String(decoding: (try? JSONEncoder().encode(metadata)) ?? Data("{}".utf8), as: UTF8.self))
    }
    /// An `int8[]` array (`int4[]` with `type` 1007); a `nil` element is NULL.
    package static func integerArray<I: BinaryInteger>(_ values: [I?], type: Oid = 1016) -> PGValue {
        array(values.map { $0.map { String($0) } }, type: type)
    }
    /// A `float8[]` array, each number written exactly; a `nil` element is NULL.
    package static func doubleArray(_ values: [Double?]) -> PGValue {
        array(values.map { $0.map { "\($0)" } }, type: 1022)
    }
    /// A `text[]` array; a `nil` element is NULL.
    package static func textArray(_ values: [String?]) -> PGValue {
        array(values.map { value in
            value.map { value in
                var escaped = "\""
                for character in value {
                    if character == "\\" || character == "\"" { escaped.append("\\") }
                    escaped.append(character)
                }
                return escaped + "\""
            }
        }, type: 1009)
    }
    /// A `bool[]` array.
    package static func boolArray(_ values: [Bool]) -> PGValue {
        array(values.map { $0 ? "t" : "f" }, type: 1000)
    }
    /// A `uuid[]` array; a `nil` element is NULL.
    package static func uuidArray(_ values: [UUID?]) -> PGValue {
        array(values.map { $0?.uuidString }, type: 2951)
    }

    /// An array literal of elements already in its text form (quoted where they need it).
    private static func array(_ elements: [String?], type: Oid) -> PGValue {
        PGValue(bytes: Array("{\(elements.map { $0 ?? "NULL" }.joined(separator: ","))}".utf8), type: type, isBinary: false)
    }
}

/// The rows of a result, read as they came: every column in binary form.
package struct PGRows: Sendable {
    /// Each row's columns; `nil` is SQL NULL.
    package let rows: [[Data?]]
    /// The column names.
    package let columns: [String]
    /// Each column's index by name, built once for every row to share.
    private let index: [String: Int]

    init(_ result: OpaquePointer, _ pq: LibPQ) {
        let rowCount = Int(pq.ntuples(result)), columnCount = Int(pq.nfields(result))
        columns = (0..<columnCount).map { pq.fname(result, Int32($0)).map { String(cString: $0) } ?? "" }
        index = Dictionary(columns.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
        rows = (0..<rowCount).map { row in
            (0..<columnCount).map { column -> Data? in
                if pq.getisnull(result, Int32(row), Int32(column)) == 1 { return nil }
                let length = Int(pq.getlength(result, Int32(row), Int32(column)))
                guard let value = pq.getvalue(result, Int32(row), Int32(column)) else { return Data() }
                return Data(bytes: value, count: length)
            }
        }
    }

    /// The number of rows.
    package var count: Int { rows.count }

    /// One row, read by column name.
    package subscript(row row: Int) -> PGRow { PGRow(values: rows[row], index: index) }

    /// Every row.
    package var all: [PGRow] { rows.map { PGRow(values: $0, index: index) } }
}

/// One row of binary column values, decoded by type on request.
package struct PGRow: Sendable {
    let values: [Data?]
    let index: [String: Int]

    private func raw(_ name: String) -> Data? {
        guard let position = index[name] else { return nil }
        return values[position]
    }

    /// A `bytea` column's bytes.
    package func bytes(_ name: String) -> Data? { raw(name) }

    /// A `text` column.
    package func text(_ name: String) -> String? { raw(name).map { String(decoding: $0, as: UTF8.self) } }

    /// An `int2`, `int4` or `int8` column (binary, big-endian).
    package func integer(_ name: String) -> Int64? {
        guard let data = raw(name) else { return nil }
        var value: Int64 = 0
        for byte in data { value = value << 8 | Int64(byte) }
        switch data.count {
        case 2: return Int64(Int16(truncatingIfNeeded: value))
        case 4: return Int64(Int32(truncatingIfNeeded: value))
        default: return value
        }
    }

    /// A `bool` column.
    package func bool(_ name: String) -> Bool? { raw(name).map { $0.first == 1 } }

    /// A `uuid` column (16 binary bytes).
    package func uuid(_ name: String) -> UUID? {
        guard let data = raw(name), data.count == 16 else { return nil }
        let b = Array(data)
        return UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]))
    }

    /// A `timestamptz` column (binary: microseconds since 2000-01-01 UTC).
    package func date(_ name: String) -> Date? {
        integer(name).map { Date(timeIntervalSince1970: 946_684_800 + Double($0) / 1_000_000) }
    }

    /// A `float8` column.
    package func double(_ name: String) -> Double? {
        guard let data = raw(name), data.count == 8 else { return nil }
        var bits: UInt64 = 0
        for byte in data { bits = bits << 8 | UInt64(byte) }
        return Double(bitPattern: bits)
    }
}
