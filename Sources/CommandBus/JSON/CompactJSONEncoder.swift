#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Encodes a value to the bytes `JSONWire.encoder` would give (sorted keys, unescaped slashes), at a
/// fraction of the cost, or says it cannot and leaves the value to `JSONEncoder`.
///
/// Foundation's encoder builds a tree of references with coding paths and strategies, then writes
/// it: about 11,000 instructions for a one-field command, a tenth of a journaled `post`. This one
/// writes straight into one buffer (``CompactJSONBuffer``), kept by the thread between encodes. It covers
/// what commands and results are made of: structs, enums, arrays, dictionaries, optionals,
/// strings, numbers and Booleans. Whatever JSONEncoder treats specially (`Data`, `URL`, `Decimal`,
/// non-finite numbers, non-ASCII keys, a key written twice, `superEncoder`, a value that writes
/// nothing) makes it give up, so the caller falls back and the output never differs; a
/// differential test holds it to that.
package enum CompactJSON {
    /// The JSON bytes of `value`, or `nil` where only `JSONEncoder` can say what they are.
    package static func encode<T: Encodable>(_ value: T) -> Data? {
        let state = CompactJSONBuffer.take()
        defer { state.putBack() }
        guard state.encodeValue(value), !state.gaveUp else { return nil }
        return Data(state.bytes)
    }

    /// A JSON string literal: quotes, backslashes and control characters escaped, as JSONEncoder does.
    static func writeString(_ text: String, into output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { bytes in
            var start = 0
            for (index, byte) in bytes.enumerated() where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                output.append(contentsOf: bytes[start..<index])
                start = index + 1
                output.append(UInt8(ascii: "\\"))
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): output.append(byte)
                case 0x08: output.append(UInt8(ascii: "b"))
                case 0x0C: output.append(UInt8(ascii: "f"))
                case 0x0A: output.append(UInt8(ascii: "n"))
                case 0x0D: output.append(UInt8(ascii: "r"))
                case 0x09: output.append(UInt8(ascii: "t"))
                default:
                    let hex = Array("0123456789abcdef".utf8)
                    output.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
                }
            }
            output.append(contentsOf: bytes[start...])
        }
        output.append(UInt8(ascii: "\""))
    }
}

/// A scalar's JSON text: a literal or a number's text, written as they are, a string still to
/// escape, or an integer's digits.
enum ScalarText {
    case literal(StaticString)
    case raw(String)
    case string(String)
    case integer(UInt64, negative: Bool)

    /// A number as JSONEncoder writes it (no `.0` on a whole one); `nil` for one JSON cannot hold.
    static func number<F: BinaryFloatingPoint & LosslessStringConvertible>(_ value: F) -> ScalarText? {
        guard value.isFinite else { return nil }
        var text = value.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        return .raw(text)
    }

    /// An integer of any width up to 64 bits.
    static func integer<I: BinaryInteger>(_ value: I) -> ScalarText {
        .integer(UInt64(truncatingIfNeeded: value.magnitude), negative: value < 0)
    }

    /// `true` or `false`.
    static func bool(_ value: Bool) -> ScalarText { .literal(value ? "true" : "false") }
}

/// The encoder handed to a value's `encode(to:)`: one per value, naming its level in the state.
struct CompactEncoder: Encoder {
    let state: CompactJSONBuffer
    let level: Int
    let id: Int
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(CompactKeyedContainer<Key>(state: state, frame: state.frame(forLevel: level, id: id, object: true)))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        CompactUnkeyedContainer(state: state, frame: state.frame(forLevel: level, id: id, object: false))
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        CompactSingleValueContainer(state: state, level: level, id: id)
    }
}

/// A keyed container: each member is written where it comes, and sorted when its object closes.
struct CompactKeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let state: CompactJSONBuffer
    let frame: Int
    var codingPath: [any CodingKey] { [] }

    private func put(_ text: ScalarText?, _ key: Key) {
        guard state.beginMember(of: frame, key: key.stringValue) else { return }
        state.write(text)
    }

    mutating func encodeNil(forKey key: Key) { put(.literal("null"), key) }
    mutating func encode(_ value: Bool, forKey key: Key) { put(ScalarText.bool(value), key) }
    mutating func encode(_ value: String, forKey key: Key) { put(.string(value), key) }
    mutating func encode(_ value: Double, forKey key: Key) { put(ScalarText.number(value), key) }
    mutating func encode(_ value: Float, forKey key: Key) { put(ScalarText.number(value), key) }
    mutating func encode(_ value: Int, forKey key: Key) { put(ScalarText.integer(value), key) }
    mutating func encode(_ value: Int8, forKey key: Key) { put(ScalarText.integer(value), key) }
    mutating func encode(_ value: Int16, forKey key: Key) { put(ScalarText.integer(value), key) }
    mutating func encode(_ value: Int32, forKey key: Key) { put(ScalarText.integer(value), key) }
    mutating func encode(_ value: Int64, forKey key: Key) { put(ScalarText.integer(value), key) }
    mutating func encode(_ value: UInt, forKey key: Key) { put(ScalarText.integer(value), key) }
    mutating func encode(_ value: UInt8, forKey key: Key) { put(ScalarText.integer(value), key) }
    mutating func encode(_ value: UInt16, forKey key: Key) { put(ScalarText.integer(value), key) }
    mutating func encode(_ value: UInt32, forKey key: Key) { put(ScalarText.integer(value), key) }
    mutating func encode(_ value: UInt64, forKey key: Key) { put(ScalarText.integer(value), key) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) {
        guard state.beginMember(of: frame, key: key.stringValue) else { return }
        _ = state.encodeValue(value)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        let nested = state.beginMember(of: frame, key: key.stringValue) ? state.open(object: true) : -1
        return KeyedEncodingContainer(CompactKeyedContainer<NestedKey>(state: state, frame: nested))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let nested = state.beginMember(of: frame, key: key.stringValue) ? state.open(object: false) : -1
        return CompactUnkeyedContainer(state: state, frame: nested)
    }

    mutating func superEncoder() -> any Encoder { unsupportedEncoder() }
    mutating func superEncoder(forKey key: Key) -> any Encoder { unsupportedEncoder() }

    private func unsupportedEncoder() -> any Encoder {
        state.giveUp()
        return CompactEncoder(state: state, level: -1, id: -1)
    }
}

/// The unkeyed and single-value containers: each scalar or value goes through `put`.
protocol CompactScalarSink {
    func put(_ text: ScalarText?)
    func put<T: Encodable>(value: T)
}

extension CompactScalarSink {
    mutating func encodeNil() { put(.literal("null")) }
    mutating func encode(_ value: Bool) { put(ScalarText.bool(value)) }
    mutating func encode(_ value: String) { put(.string(value)) }
    mutating func encode(_ value: Double) { put(ScalarText.number(value)) }
    mutating func encode(_ value: Float) { put(ScalarText.number(value)) }
    mutating func encode(_ value: Int) { put(ScalarText.integer(value)) }
    mutating func encode(_ value: Int8) { put(ScalarText.integer(value)) }
    mutating func encode(_ value: Int16) { put(ScalarText.integer(value)) }
    mutating func encode(_ value: Int32) { put(ScalarText.integer(value)) }
    mutating func encode(_ value: Int64) { put(ScalarText.integer(value)) }
    mutating func encode(_ value: UInt) { put(ScalarText.integer(value)) }
    mutating func encode(_ value: UInt8) { put(ScalarText.integer(value)) }
    mutating func encode(_ value: UInt16) { put(ScalarText.integer(value)) }
    mutating func encode(_ value: UInt32) { put(ScalarText.integer(value)) }
    mutating func encode(_ value: UInt64) { put(ScalarText.integer(value)) }
    mutating func encode<T: Encodable>(_ value: T) { put(value: value) }
}

/// An unkeyed container: items are written where they come, comma-separated.
struct CompactUnkeyedContainer: UnkeyedEncodingContainer, CompactScalarSink {
    let state: CompactJSONBuffer
    let frame: Int
    var codingPath: [any CodingKey] { [] }
    var count: Int { state.count(of: frame) }

    func put(_ text: ScalarText?) {
        guard state.beginItem(of: frame) else { return }
        state.write(text)
    }

    func put<T: Encodable>(value: T) {
        guard state.beginItem(of: frame) else { return }
        _ = state.encodeValue(value)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let nested = state.beginItem(of: frame) ? state.open(object: true) : -1
        return KeyedEncodingContainer(CompactKeyedContainer<NestedKey>(state: state, frame: nested))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let nested = state.beginItem(of: frame) ? state.open(object: false) : -1
        return CompactUnkeyedContainer(state: state, frame: nested)
    }

    mutating func superEncoder() -> any Encoder {
        state.giveUp()
        return CompactEncoder(state: state, level: -1, id: -1)
    }
}

/// A single-value container: its one value is the level's.
struct CompactSingleValueContainer: SingleValueEncodingContainer, CompactScalarSink {
    let state: CompactJSONBuffer
    let level: Int
    let id: Int
    var codingPath: [any CodingKey] { [] }

    func put(_ text: ScalarText?) {
        guard state.beginSingle(level: level, id: id) else { return }
        state.write(text)
    }

    func put<T: Encodable>(value: T) {
        guard state.beginSingle(level: level, id: id) else { return }
        _ = state.encodeValue(value)
    }
}
