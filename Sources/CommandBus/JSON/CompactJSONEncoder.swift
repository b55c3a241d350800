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
/// builds a small tree of the values alone and writes it in one pass. It covers what commands and
/// results are made of: structs, enums, arrays, dictionaries, optionals, strings, numbers and
/// Booleans. Whatever JSONEncoder treats specially (`Data`, `URL`, `Decimal`, non-finite numbers,
/// non-ASCII keys, a key written twice, `superEncoder`, a value that writes nothing) makes it give
/// up, so the caller falls back and the output never differs; a differential test holds it to that.
package enum CompactJSON {
    /// The JSON bytes of `value`, or `nil` where only `JSONEncoder` can say what they are.
    package static func encode<T: Encodable>(_ value: T) -> Data? {
        let state = EncodingState()
        guard let node = CompactValueEncoder(state: state).node(for: value), !state.unsupported else { return nil }
        var output: [UInt8] = []
        output.reserveCapacity(64)
        guard write(node, into: &output) else { return nil }
        return Data(output)
    }

    /// Writes `node`; `false` if an object repeats a key.
    private static func write(_ node: CompactNode, into output: inout [UInt8]) -> Bool {
        switch node {
        case .literal(let text):
            output.append(contentsOf: text.utf8)
        case .string(let text):
            writeString(text, into: &output)
        case .array(let array):
            output.append(UInt8(ascii: "["))
            for (index, item) in array.items.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                guard write(item, into: &output) else { return false }
            }
            output.append(UInt8(ascii: "]"))
        case .object(let object):
            output.append(UInt8(ascii: "{"))
            let order = object.sortedOrder()
            for (position, index) in order.enumerated() {
                if position > 0 {
                    // Sorted, so a repeated key sits next to its twin.
                    if object.keys[order[position - 1]] == object.keys[index] { return false }
                    output.append(UInt8(ascii: ","))
                }
                writeString(object.keys[index], into: &output)
                output.append(UInt8(ascii: ":"))
                guard write(object.values[index], into: &output) else { return false }
            }
            output.append(UInt8(ascii: "}"))
        }
        return true
    }

    /// A JSON string literal: quotes, backslashes and control characters escaped, as JSONEncoder does.
    private static func writeString(_ text: String, into output: inout [UInt8]) {
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

/// One value of the tree: JSON text as it is written (numbers, `true`, `null`), a string still to
/// escape, or a container.
enum CompactNode {
    case literal(String)
    case string(String)
    case array(ArrayNode)
    case object(ObjectNode)
}

/// An array's items, shared by every container that writes to it.
final class ArrayNode {
    var items: [CompactNode] = []
}

/// An object's members in the order they were written; sorted only when written out.
final class ObjectNode {
    var keys: [String] = []
    var values: [CompactNode] = []

    /// Member indices in the order of their keys' bytes (JSONEncoder's `.sortedKeys` for ASCII keys).
    func sortedOrder() -> [Int] {
        guard keys.count > 1 else { return Array(keys.indices) }
        return keys.indices.sorted { keys[$0].utf8.lexicographicallyPrecedes(keys[$1].utf8) }
    }

    func append(_ key: String, _ value: CompactNode, state: EncodingState) {
        // Only ASCII keys: the byte order above is then JSONEncoder's order.
        if !key.utf8.allSatisfy({ $0 < 0x80 }) { state.unsupported = true }
        keys.append(key)
        values.append(value)
    }
}

/// What every encoder and container of one `encode` shares: whether anything asked for what only
/// JSONEncoder does.
final class EncodingState {
    var unsupported = false
}

/// The encoder handed to a value's `encode(to:)`: the value writes one container, or one single value.
struct CompactValueEncoder: Encoder {
    let state: EncodingState
    private let slot = Slot()
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(state: EncodingState) { self.state = state }

    /// Where the value an encoder writes ends up.
    final class Slot {
        var node: CompactNode?
    }

    /// The tree of `value`, or `nil` if it wrote nothing or needs JSONEncoder's special handling.
    func node<T: Encodable>(for value: T) -> CompactNode? {
        if T.self == Data.self || T.self == URL.self || T.self == Decimal.self { return nil }
        do { try value.encode(to: self) } catch { return nil }
        return slot.node
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let object: ObjectNode
        if case .object(let existing) = slot.node {
            object = existing
        } else {
            if slot.node != nil { state.unsupported = true }
            object = ObjectNode()
            slot.node = .object(object)
        }
        return KeyedEncodingContainer(CompactKeyedContainer<Key>(object: object, state: state))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let array: ArrayNode
        if case .array(let existing) = slot.node {
            array = existing
        } else {
            if slot.node != nil { state.unsupported = true }
            array = ArrayNode()
            slot.node = .array(array)
        }
        return CompactUnkeyedContainer(array: array, state: state)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        CompactSingleValueContainer(encoder: self)
    }

    fileprivate func set(_ node: CompactNode) {
        if slot.node != nil { state.unsupported = true }
        slot.node = node
    }

    /// The tree of a nested value, marking the encoding unsupported if it has none.
    static func nested<T: Encodable>(_ value: T, state: EncodingState) -> CompactNode {
        if let node = CompactValueEncoder(state: state).node(for: value) { return node }
        state.unsupported = true
        return .literal("null")
    }
}

/// JSON text of the scalars, as JSONEncoder writes them; `nil` for a number JSON cannot hold.
enum CompactScalar {
    static func number<F: BinaryFloatingPoint & LosslessStringConvertible>(_ value: F) -> CompactNode? {
        guard value.isFinite else { return nil }
        var text = value.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        return .literal(text)
    }

    static func integer<I: BinaryInteger>(_ value: I) -> CompactNode { .literal(value.description) }
    static func bool(_ value: Bool) -> CompactNode { .literal(value ? "true" : "false") }
}

/// A keyed container: each member becomes a node of its object, in the order written.
struct CompactKeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let object: ObjectNode
    let state: EncodingState
    var codingPath: [any CodingKey] { [] }

    private func put(_ node: CompactNode?, _ key: Key) {
        guard let node else { state.unsupported = true; return }
        object.append(key.stringValue, node, state: state)
    }

    mutating func encodeNil(forKey key: Key) { put(.literal("null"), key) }
    mutating func encode(_ value: Bool, forKey key: Key) { put(CompactScalar.bool(value), key) }
    mutating func encode(_ value: String, forKey key: Key) { put(.string(value), key) }
    mutating func encode(_ value: Double, forKey key: Key) { put(CompactScalar.number(value), key) }
    mutating func encode(_ value: Float, forKey key: Key) { put(CompactScalar.number(value), key) }
    mutating func encode(_ value: Int, forKey key: Key) { put(CompactScalar.integer(value), key) }
    mutating func encode(_ value: Int8, forKey key: Key) { put(CompactScalar.integer(value), key) }
    mutating func encode(_ value: Int16, forKey key: Key) { put(CompactScalar.integer(value), key) }
    mutating func encode(_ value: Int32, forKey key: Key) { put(CompactScalar.integer(value), key) }
    mutating func encode(_ value: Int64, forKey key: Key) { put(CompactScalar.integer(value), key) }
    mutating func encode(_ value: UInt, forKey key: Key) { put(CompactScalar.integer(value), key) }
    mutating func encode(_ value: UInt8, forKey key: Key) { put(CompactScalar.integer(value), key) }
    mutating func encode(_ value: UInt16, forKey key: Key) { put(CompactScalar.integer(value), key) }
    mutating func encode(_ value: UInt32, forKey key: Key) { put(CompactScalar.integer(value), key) }
    mutating func encode(_ value: UInt64, forKey key: Key) { put(CompactScalar.integer(value), key) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) {
        put(CompactValueEncoder.nested(value, state: state), key)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        let nested = ObjectNode()
        put(.object(nested), key)
        return KeyedEncodingContainer(CompactKeyedContainer<NestedKey>(object: nested, state: state))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let nested = ArrayNode()
        put(.array(nested), key)
        return CompactUnkeyedContainer(array: nested, state: state)
    }

    mutating func superEncoder() -> any Encoder { unsupportedEncoder() }
    mutating func superEncoder(forKey key: Key) -> any Encoder { unsupportedEncoder() }

    private func unsupportedEncoder() -> any Encoder {
        state.unsupported = true
        return CompactValueEncoder(state: state)
    }
}

/// The unkeyed and single-value containers: each scalar becomes a node, handed to `put`.
protocol CompactScalarSink {
    var state: EncodingState { get }
    func put(_ node: CompactNode?)
}

extension CompactScalarSink {
    mutating func encodeNil() { put(.literal("null")) }
    mutating func encode(_ value: Bool) { put(CompactScalar.bool(value)) }
    mutating func encode(_ value: String) { put(.string(value)) }
    mutating func encode(_ value: Double) { put(CompactScalar.number(value)) }
    mutating func encode(_ value: Float) { put(CompactScalar.number(value)) }
    mutating func encode(_ value: Int) { put(CompactScalar.integer(value)) }
    mutating func encode(_ value: Int8) { put(CompactScalar.integer(value)) }
    mutating func encode(_ value: Int16) { put(CompactScalar.integer(value)) }
    mutating func encode(_ value: Int32) { put(CompactScalar.integer(value)) }
    mutating func encode(_ value: Int64) { put(CompactScalar.integer(value)) }
    mutating func encode(_ value: UInt) { put(CompactScalar.integer(value)) }
    mutating func encode(_ value: UInt8) { put(CompactScalar.integer(value)) }
    mutating func encode(_ value: UInt16) { put(CompactScalar.integer(value)) }
    mutating func encode(_ value: UInt32) { put(CompactScalar.integer(value)) }
    mutating func encode(_ value: UInt64) { put(CompactScalar.integer(value)) }
    mutating func encode<T: Encodable>(_ value: T) { put(CompactValueEncoder.nested(value, state: state)) }
}

/// An unkeyed container: each item is appended to its array.
struct CompactUnkeyedContainer: UnkeyedEncodingContainer, CompactScalarSink {
    let array: ArrayNode
    let state: EncodingState
    var codingPath: [any CodingKey] { [] }
    var count: Int { array.items.count }

    func put(_ node: CompactNode?) {
        guard let node else { state.unsupported = true; return }
        array.items.append(node)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let nested = ObjectNode()
        put(.object(nested))
        return KeyedEncodingContainer(CompactKeyedContainer<NestedKey>(object: nested, state: state))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let nested = ArrayNode()
        put(.array(nested))
        return CompactUnkeyedContainer(array: nested, state: state)
    }

    mutating func superEncoder() -> any Encoder {
        state.unsupported = true
        return CompactValueEncoder(state: state)
    }
}

/// A single-value container: its one value becomes the encoder's node.
struct CompactSingleValueContainer: SingleValueEncodingContainer, CompactScalarSink {
    let encoder: CompactValueEncoder
    var codingPath: [any CodingKey] { [] }
    var state: EncodingState { encoder.state }

    func put(_ node: CompactNode?) {
        guard let node else { encoder.state.unsupported = true; return }
        encoder.set(node)
    }
}
