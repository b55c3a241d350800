#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Any JSON value, for the CLI's own output and for building payloads from `-p key=value`.
///
/// The host keeps to FoundationEssentials (full Foundation costs milliseconds at start-up),
/// so it uses this instead of `JSONSerialization`.
package enum JSONValue: Codable, Sendable, Equatable {
    case null
    case bool(Bool)
    case integer(Int64)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    package init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() { self = .null }
        else if let value = try? container.decode(Bool.self) { self = .bool(value) }
        else if let value = try? container.decode(Int64.self) { self = .integer(value) }
        else if let value = try? container.decode(Double.self) { self = .number(value) }
        else if let value = try? container.decode(String.self) { self = .string(value) }
        else if let value = try? container.decode([JSONValue].self) { self = .array(value) }
        else { self = .object(try container.decode([String: JSONValue].self)) }
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .integer(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// Parses JSON text (any value, not only objects); `nil` if it is not JSON.
    package static func parse(_ text: String) -> JSONValue? {
        var text = text
        return text.withUTF8 { JSONParser.parse($0) }
    }

    /// Parses JSON bytes (any value, not only objects); `nil` if they are not JSON.
    package static func parse(bytes: some ContiguousBytes) -> JSONValue? {
        bytes.withUnsafeBytes { raw in JSONParser.parse(raw.assumingMemoryBound(to: UInt8.self)) }
    }

    /// Why `bytes` are not one JSON value, and where, for an error message: `unexpected 'b' at
    /// line 1, column 2`, `it ends at line 1, column 6 before the value does`, `nested deeper than
    /// 512 levels at …`, `\ud800 at … is half a surrogate pair …`, `the number 1e999 at … is
    /// out of range …`, `byte 0xFF at … is not UTF-8`, `a tab at … is inside a string unescaped; write it
    /// \t` or `\x at … is not an escape JSON has …`; `nil` if they are one.
    package static func syntaxError(in bytes: some ContiguousBytes) -> String? {
        bytes.withUnsafeBytes { raw -> String? in
            let bytes = raw.assumingMemoryBound(to: UInt8.self)
            guard let (offset, problem) = JSONParser.failure(bytes) else { return nil }
            let before = bytes[..<offset]
            let lineStart = before.lastIndex(of: 0x0A).map { $0 + 1 } ?? 0
            let line = before.count { $0 == 0x0A } + 1
            let column = String(decoding: bytes[lineStart..<offset], as: UTF8.self).count + 1
            switch problem {
            case .tooDeep?:
                return "nested deeper than \(JSONParser.maxDepth) levels at line \(line), column \(column)"
            case .loneSurrogate?:
                let escape = String(decoding: bytes[offset..<min(offset + 6, bytes.count)], as: UTF8.self)
                return "\(escape) at line \(line), column \(column) is half a surrogate pair (as in \\uD83D\\uDE00), which encodes no character"
            case .numberOutOfRange(_, let length)?:
                let number = String(decoding: bytes[offset..<(offset + length)].prefix(40), as: UTF8.self) + (length > 40 ? "…" : "")
                return "the number \(number) at line \(line), column \(column) is out of range (a double holds up to about ±1.8e308)"
            case .invalidUTF8?:
                return "byte 0x\(String(bytes[offset], radix: 16, uppercase: true)) at line \(line), column \(column) is not UTF-8"
            case .controlCharacter?:
                let (name, escape) = Self.controlCharacterNames[bytes[offset]]
                    ?? ("U+" + String(bytes[offset], radix: 16, uppercase: true), "\\u00" + (bytes[offset] < 0x10 ? "0" : "") + String(bytes[offset], radix: 16, uppercase: true))
                return "\(name) at line \(line), column \(column) is inside a string unescaped; write it \(escape)"
            case .badEscape?:
                let end = min(offset + (bytes[offset + 1] == UInt8(ascii: "u") ? 6 : 2), bytes.count)
                // A control character in the escape (a backslash before a line break) is named,
                // not shown: the message is one line. (Found by the arguments fuzzer.)
                let control = bytes[offset..<end].firstIndex { $0 < 0x20 }
                var escape = String(decoding: bytes[offset..<(control ?? end)], as: UTF8.self)
                if let control {
                    escape += " before " + (Self.controlCharacterNames[bytes[control]]?.name ?? "U+" + String(bytes[control], radix: 16, uppercase: true))
                }
                return "\(escape) at line \(line), column \(column) is not an escape JSON has (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)"
            case nil:
                break
            }
            guard offset < bytes.count else { return "it ends at line \(line), column \(column) before the value does" }
            // The character there, or the byte where it is not UTF-8.
            let scalar = (1...4).lazy.compactMap { length in
                offset + length <= bytes.count ? String(validating: bytes[offset..<(offset + length)], as: UTF8.self)?.unicodeScalars.first : nil
            }.first
            let shown = scalar.map { (0x21..<0x7F).contains($0.value) ? "'\($0)'" : "U+" + String($0.value, radix: 16, uppercase: true) }
                ?? "byte 0x" + String(bytes[offset], radix: 16, uppercase: true)
            return "unexpected \(shown) at line \(line), column \(column)"
        }
    }

    /// How a syntax error names the control characters people type, and their escapes.
    private static let controlCharacterNames: [UInt8: (name: String, escape: String)] = [
        0x09: ("a tab", "\\t"), 0x0A: ("a line break", "\\n"), 0x0D: ("a carriage return", "\\r"),
        0x08: ("a backspace", "\\b"), 0x0C: ("a form feed", "\\f"),
    ]

    /// The members of the JSON object `bytes` hold, in order (of a repeated key, the first, as
    /// ``parse(bytes:)`` keeps); `nil` if they are not one JSON object.
    package static func members(ofObject bytes: some ContiguousBytes) -> [(key: String, value: JSONValue)]? {
        bytes.withUnsafeBytes { raw in JSONParser.members(raw.assumingMemoryBound(to: UInt8.self)) }
    }

    /// Compact JSON with sorted keys.
    ///
    /// Written directly, byte for byte what `JSONEncoder` with `.sortedKeys` and
    /// `.withoutEscapingSlashes` writes (keys in code-point order, `\u00XX` for control
    /// characters), at a fraction of its cost: every reply the server writes goes through here.
    /// A number that is not finite, which JSON cannot hold, is written `null`.
    package var text: String {
        String(decoding: bytes, as: UTF8.self)
    }

    /// The bytes of ``text``, with no `String` in between.
    package var bytes: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(64)
        write(into: &bytes)
        return bytes
    }

    /// ``bytes`` as `Data`: a payload or result to hand on.
    package var data: Data { Data(bytes) }

    /// Writes Foundation's text for doubles (`1`, `0.1`, `1e+21`, `1e-07`, `-0`), which Swift's own differs from.
    private static let numberEncoder = JSONEncoder()

    /// Appends the value's text (as ``text`` gives it) to `out`.
    package func write(into out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let value): out.append(contentsOf: (value ? "true" : "false").utf8)
        case .integer(let value): out.append(contentsOf: String(value).utf8)
        case .number(let value):
            if let text = try? Self.numberEncoder.encode(value) { out.append(contentsOf: text) } else { out.append(contentsOf: "null".utf8) }
        case .string(let value): CompactJSON.writeString(value, into: &out)
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                element.write(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let fields):
            out.append(UInt8(ascii: "{"))
            // Sorted once as pairs: no second hash lookup per key.
            for (index, field) in fields.sorted(by: { $0.key < $1.key }).enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                CompactJSON.writeString(field.key, into: &out)
                out.append(UInt8(ascii: ":"))
                field.value.write(into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// What kind of value this is, as a message names it: "a string", "a number", "null", ….
    package var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .integer, .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }

    /// The value as an integer, if it is one (or a number without a fraction).
    package var intValue: Int? {
        switch self {
        case .integer(let value): Int(exactly: value)
        case .number(let value): Int(exactly: value)
        default: nil
        }
    }

    /// The value as a 64-bit integer, if it is one (or a number without a fraction in range).
    package var int64Value: Int64? {
        switch self {
        case .integer(let value): value
        case .number(let value): Int64(exactly: value)
        default: nil
        }
    }

    /// The value as an unsigned 64-bit integer: a negative integer is read as the bit pattern
    /// a `UInt64` written as `Int64` left (inode numbers past 2^63).
    package var uint64Value: UInt64? {
        switch self {
        case .integer(let value): UInt64(bitPattern: value)
        case .number(let value): UInt64(exactly: value)
        default: nil
        }
    }

    /// The value as a double, if it is a number.
    package var doubleValue: Double? {
        switch self {
        case .integer(let value): Double(value)
        case .number(let value): value
        default: nil
        }
    }

    /// The Boolean, if this is one.
    package var boolValue: Bool? {
        if case .bool(let value) = self { value } else { nil }
    }

    /// The string, if this is one.
    package var stringValue: String? {
        if case .string(let value) = self { value } else { nil }
    }

    /// The elements, if this is an array.
    package var arrayValue: [JSONValue]? {
        if case .array(let value) = self { value } else { nil }
    }

    /// The fields, if this is an object.
    package var objectValue: [String: JSONValue]? {
        if case .object(let fields) = self { fields } else { nil }
    }

    /// A string, or `null` for `nil`.
    package static func optional(_ string: String?) -> JSONValue { string.map(JSONValue.string) ?? .null }
}
