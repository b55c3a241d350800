#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Decodes a command or a result from JSON bytes to the value `JSONDecoder` would give, at a fraction of the
/// cost, or says it cannot and leaves the bytes to `JSONDecoder` (which also words every error).
///
/// It reads the bytes once with the strict parser beside it (`JSONParser.swift`; the SDK compiles
/// both through symlinks), then hands the tree to the command's `init(from:)`. It only answers where the answer is
/// certain to be Foundation's: integers from integer literals in range, a `Double` from any
/// number but zero, Booleans, strings, null, arrays and objects. `Float`, `Data`, `Date`,
/// `URL`, `Decimal` and `superDecoder` are left to Foundation, as is every failure; a
/// differential test and the `sdk-decoder` and `dynamic-path` fuzz targets hold it to Foundation's answers.
enum CompactJSONDecoding {
    /// The decoded value, or `nil` where only `JSONDecoder` can say (including every error).
    static func decode<T: Decodable>(_ type: T.Type, from data: Data) -> T? {
        try? decoded(T.self, from: data)
    }

    /// The decoded value; throws where only `JSONDecoder` can say (including every error).
    ///
    /// The form the bus calls: it holds no `T?`, whose metadata a caller that is not specialized
    /// for `T` (a registered handler's box) would look up in the runtime on every command.
    static func decoded<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        guard !CompactValueDecoder.leftToFoundation(T.self), let tree = JSONValue.parse(bytes: data) else { throw LeftToFoundation() }
        return try T(from: CompactValueDecoder(tree, codingPath: []))
    }
}

/// Thrown wherever Foundation must decide; `CompactJSONDecoding` turns it into `nil`, so no caller sees it.
struct LeftToFoundation: Error {}

/// The decoder handed to a value's `init(from:)`, over one node of the parsed tree.
struct CompactValueDecoder: Decoder {
    let value: JSONValue
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(_ value: JSONValue, codingPath: [any CodingKey]) {
        self.value = value
        self.codingPath = codingPath
    }

    /// Types `JSONDecoder` decodes its own way (or, for `Float`, rounds its own way).
    static func leftToFoundation<T>(_ type: T.Type) -> Bool {
        T.self == Float.self || T.self == Data.self || T.self == Date.self || T.self == URL.self || T.self == Decimal.self
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let members) = value, !Self.foldsIntegerKeys(members) else { throw LeftToFoundation() }
        return KeyedDecodingContainer(CompactKeyedDecodingContainer<Key>(members: members, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let items) = value else { throw LeftToFoundation() }
        return CompactUnkeyedDecodingContainer(items: items, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        CompactSingleValueDecodingContainer(value: value, codingPath: codingPath)
    }

    /// Whether two of an object's keys are one integer to an integer key type (`"02"` or `"+2"`
    /// beside `"2"`): a dictionary keyed by `Int` keeps whichever comes last in `allKeys`, and
    /// Foundation lists keys in its hash order, which changes from run to run. Left to it.
    static func foldsIntegerKeys(_ members: [String: JSONValue]) -> Bool {
        var integers: Set<Int> = []
        for key in members.keys {
            guard let first = key.utf8.first, first == UInt8(ascii: "-") || first == UInt8(ascii: "+") || (first >= UInt8(ascii: "0") && first <= UInt8(ascii: "9")),
                  let number = Int(key) else { continue }
            if !integers.insert(number).inserted { return true }
        }
        return false
    }

    /// `value` as a `T`, by the rules above.
    static func unbox<T: Decodable>(_ value: JSONValue, as type: T.Type, codingPath: [any CodingKey]) throws -> T {
        switch value {
        case .string(let text) where T.self == String.self: return text as! T
        case .bool(let flag) where T.self == Bool.self: return flag as! T
        case .integer(let integer) where T.self == Int.self: return try exactly(integer, as: Int.self) as! T
        case .integer where T.self == Double.self, .number where T.self == Double.self: return try double(value) as! T
        default:
            guard !leftToFoundation(T.self) else { throw LeftToFoundation() }
            return try T(from: CompactValueDecoder(value, codingPath: codingPath))
        }
    }

    static func integer<I: FixedWidthInteger>(_ value: JSONValue, as type: I.Type) throws -> I {
        guard case .integer(let integer) = value else { throw LeftToFoundation() }
        return try exactly(integer, as: I.self)
    }

    static func exactly<I: FixedWidthInteger>(_ integer: Int64, as type: I.Type) throws -> I {
        guard let exact = I(exactly: integer) else { throw LeftToFoundation() }
        return exact
    }

    /// A `Double`, except zero: Foundation reads `-0` as -0.0 where the parser has the integer 0,
    /// and refuses some spellings of zero (`0e1`, `0.000e5`, an underflow such as `1e-400`)
    /// while it takes others (`0.0e1`, `0e0`). Every zero is Foundation's to read.
    static func double(_ value: JSONValue) throws -> Double {
        switch value {
        case .integer(let integer) where integer != 0: return Double(integer)
        case .number(let number) where number != 0: return number
        default: throw LeftToFoundation()
        }
    }

    static func string(_ value: JSONValue) throws -> String {
        guard case .string(let text) = value else { throw LeftToFoundation() }
        return text
    }

    static func bool(_ value: JSONValue) throws -> Bool {
        guard case .bool(let flag) = value else { throw LeftToFoundation() }
        return flag
    }
}

/// A coding key for an array's position, as `JSONDecoder` puts in coding paths.
struct CompactIndexKey: CodingKey {
    let intValue: Int?
    var stringValue: String { "Index \(intValue ?? 0)" }
    init(index: Int) { intValue = index }
    init?(stringValue: String) { nil }
    init?(intValue: Int) { self.intValue = intValue }
}

struct CompactKeyedDecodingContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let members: [String: JSONValue]
    let codingPath: [any CodingKey]

    var allKeys: [Key] { members.keys.compactMap { Key(stringValue: $0) } }
    func contains(_ key: Key) -> Bool { members[key.stringValue] != nil }

    private func member(_ key: Key) throws -> JSONValue {
        guard let value = members[key.stringValue] else { throw LeftToFoundation() }
        return value
    }

    func decodeNil(forKey key: Key) throws -> Bool { try member(key) == .null }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try CompactValueDecoder.bool(member(key)) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try CompactValueDecoder.string(member(key)) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try CompactValueDecoder.double(member(key)) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { throw LeftToFoundation() }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try CompactValueDecoder.integer(member(key), as: Int.self) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try CompactValueDecoder.integer(member(key), as: Int8.self) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try CompactValueDecoder.integer(member(key), as: Int16.self) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try CompactValueDecoder.integer(member(key), as: Int32.self) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try CompactValueDecoder.integer(member(key), as: Int64.self) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try CompactValueDecoder.integer(member(key), as: UInt.self) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try CompactValueDecoder.integer(member(key), as: UInt8.self) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try CompactValueDecoder.integer(member(key), as: UInt16.self) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try CompactValueDecoder.integer(member(key), as: UInt32.self) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try CompactValueDecoder.integer(member(key), as: UInt64.self) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try CompactValueDecoder.unbox(member(key), as: T.self, codingPath: codingPath + [key])
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try CompactValueDecoder(member(key), codingPath: codingPath + [key]).container(keyedBy: NestedKey.self)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try CompactValueDecoder(member(key), codingPath: codingPath + [key]).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder { throw LeftToFoundation() }
    func superDecoder(forKey key: Key) throws -> any Decoder { throw LeftToFoundation() }
}

struct CompactUnkeyedDecodingContainer: UnkeyedDecodingContainer {
    let items: [JSONValue]
    let codingPath: [any CodingKey]
    private(set) var currentIndex = 0

    init(items: [JSONValue], codingPath: [any CodingKey]) {
        self.items = items
        self.codingPath = codingPath
    }

    var count: Int? { items.count }
    var isAtEnd: Bool { currentIndex >= items.count }

    /// The next item, consumed only if `read` succeeds.
    private mutating func next<T>(_ read: (JSONValue) throws -> T) throws -> T {
        guard !isAtEnd else { throw LeftToFoundation() }
        let value = try read(items[currentIndex])
        currentIndex += 1
        return value
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd else { throw LeftToFoundation() }
        if items[currentIndex] == .null { currentIndex += 1; return true }
        return false
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try next(CompactValueDecoder.bool) }
    mutating func decode(_ type: String.Type) throws -> String { try next(CompactValueDecoder.string) }
    mutating func decode(_ type: Double.Type) throws -> Double { try next(CompactValueDecoder.double) }
    mutating func decode(_ type: Float.Type) throws -> Float { throw LeftToFoundation() }
    mutating func decode(_ type: Int.Type) throws -> Int { try next { try CompactValueDecoder.integer($0, as: Int.self) } }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try next { try CompactValueDecoder.integer($0, as: Int8.self) } }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try next { try CompactValueDecoder.integer($0, as: Int16.self) } }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try next { try CompactValueDecoder.integer($0, as: Int32.self) } }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try next { try CompactValueDecoder.integer($0, as: Int64.self) } }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try next { try CompactValueDecoder.integer($0, as: UInt.self) } }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next { try CompactValueDecoder.integer($0, as: UInt8.self) } }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next { try CompactValueDecoder.integer($0, as: UInt16.self) } }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next { try CompactValueDecoder.integer($0, as: UInt32.self) } }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next { try CompactValueDecoder.integer($0, as: UInt64.self) } }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let path = codingPath + [CompactIndexKey(index: currentIndex)]
        return try next { try CompactValueDecoder.unbox($0, as: T.self, codingPath: path) }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        let path = codingPath + [CompactIndexKey(index: currentIndex)]
        return try next { try CompactValueDecoder($0, codingPath: path).container(keyedBy: NestedKey.self) }
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let path = codingPath + [CompactIndexKey(index: currentIndex)]
        return try next { try CompactValueDecoder($0, codingPath: path).unkeyedContainer() }
    }

    mutating func superDecoder() throws -> any Decoder { throw LeftToFoundation() }
}

struct CompactSingleValueDecodingContainer: SingleValueDecodingContainer {
    let value: JSONValue
    let codingPath: [any CodingKey]

    func decodeNil() -> Bool { value == .null }
    func decode(_ type: Bool.Type) throws -> Bool { try CompactValueDecoder.bool(value) }
    func decode(_ type: String.Type) throws -> String { try CompactValueDecoder.string(value) }
    func decode(_ type: Double.Type) throws -> Double { try CompactValueDecoder.double(value) }
    func decode(_ type: Float.Type) throws -> Float { throw LeftToFoundation() }
    func decode(_ type: Int.Type) throws -> Int { try CompactValueDecoder.integer(value, as: Int.self) }
    func decode(_ type: Int8.Type) throws -> Int8 { try CompactValueDecoder.integer(value, as: Int8.self) }
    func decode(_ type: Int16.Type) throws -> Int16 { try CompactValueDecoder.integer(value, as: Int16.self) }
    func decode(_ type: Int32.Type) throws -> Int32 { try CompactValueDecoder.integer(value, as: Int32.self) }
    func decode(_ type: Int64.Type) throws -> Int64 { try CompactValueDecoder.integer(value, as: Int64.self) }
    func decode(_ type: UInt.Type) throws -> UInt { try CompactValueDecoder.integer(value, as: UInt.self) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try CompactValueDecoder.integer(value, as: UInt8.self) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try CompactValueDecoder.integer(value, as: UInt16.self) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try CompactValueDecoder.integer(value, as: UInt32.self) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try CompactValueDecoder.integer(value, as: UInt64.self) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        guard !CompactValueDecoder.leftToFoundation(T.self) else { throw LeftToFoundation() }
        return try T(from: CompactValueDecoder(value, codingPath: codingPath))
    }
}
