/// A strict JSON (RFC 8259) parser straight to ``JSONValue``.
///
/// `JSONDecoder` reaches a `JSONValue` by trying each type in turn and throwing on every miss,
/// which made parsing the server's requests most of its request loop's time. This reads the
/// bytes once. It reads what `JSONDecoder` reads, including its leniencies (a comma before a
/// closing bracket or brace; of a repeated key, the first), and refuses what it refuses:
/// trailing bytes, control characters in strings, bad escapes and lone surrogates, invalid
/// UTF-8, and nesting deeper than ``maxDepth`` (so hostile input cannot exhaust the stack).
struct JSONParser {
    /// The deepest nesting of arrays and objects accepted.
    static let maxDepth = 512

    private let bytes: UnsafeBufferPointer<UInt8>
    private var position = 0
    /// What went wrong, where "unexpected" at the byte the parser stopped would mislead.
    private var problem: Problem?

    /// A failure a syntax error names by what it is, not by the byte it stopped at.
    enum Problem: Equatable {
        /// Nested deeper than ``maxDepth``.
        case tooDeep
        /// A `\u` escape of half a surrogate pair, at this offset.
        case loneSurrogate(at: Int)
        /// A number past what a `Double` holds (as `1e999`), from this offset for this many bytes.
        case numberOutOfRange(at: Int, length: Int)
        /// Bytes in a string that are not UTF-8, the first at this offset.
        case invalidUTF8(at: Int)
        /// A control character (below U+0020) in a string, unescaped, at this offset.
        case controlCharacter(at: Int)
        /// A backslash at this offset that starts no escape JSON has (as `\x`, or `\u` without four hex digits).
        case badEscape(at: Int)

        /// Where the failure lies, where that is not the byte the parser stopped at.
        var offset: Int? {
            switch self {
            case .tooDeep: nil
            case .loneSurrogate(let offset), .numberOutOfRange(let offset, _), .invalidUTF8(let offset),
                .controlCharacter(let offset), .badEscape(let offset):
                offset
            }
        }
    }

    private init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    /// The one JSON value `bytes` hold, or `nil` if they are not exactly one.
    static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> JSONValue? {
        var parser = JSONParser(bytes)
        guard let value = parser.value(depth: 0) else { return nil }
        parser.skipWhitespace()
        return parser.position == bytes.count ? value : nil
    }

    /// Where the one JSON value `bytes` should hold goes wrong: the offset of the byte the
    /// parser stopped at (`bytes.count` where they end too soon), with what went wrong where the
    /// byte alone would mislead; or `nil` if they hold exactly one.
    static func failure(_ bytes: UnsafeBufferPointer<UInt8>) -> (offset: Int, problem: Problem?)? {
        var parser = JSONParser(bytes)
        if parser.value(depth: 0) != nil {
            parser.skipWhitespace()
            if parser.position == bytes.count { return nil }
        }
        if let offset = parser.problem?.offset { return (offset, parser.problem) }
        return (min(parser.position, bytes.count), parser.problem)
    }

    /// Refuses an array or object nested past ``maxDepth``, saying so.
    private mutating func tooDeep() -> JSONValue? {
        problem = .tooDeep
        return nil
    }

    private var current: UInt8? { position < bytes.count ? bytes[position] : nil }

    private mutating func skipWhitespace() {
        while let byte = current, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { position += 1 }
    }

    private mutating func value(depth: Int) -> JSONValue? {
        skipWhitespace()
        guard let byte = current else { return nil }
        switch byte {
        case UInt8(ascii: "{"): return depth < Self.maxDepth ? object(depth: depth + 1) : tooDeep()
        case UInt8(ascii: "["): return depth < Self.maxDepth ? array(depth: depth + 1) : tooDeep()
        case UInt8(ascii: "\""): return string().map(JSONValue.string)
        case UInt8(ascii: "t"): return literal("true", .bool(true))
        case UInt8(ascii: "f"): return literal("false", .bool(false))
        case UInt8(ascii: "n"): return literal("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return number()
        default: return nil
        }
    }

    private mutating func literal(_ word: StaticString, _ value: JSONValue) -> JSONValue? {
        let count = word.utf8CodeUnitCount
        guard position + count <= bytes.count else { return nil }
        for index in 0..<count where bytes[position + index] != word.utf8Start[index] { return nil }
        position += count
        return value
    }

    /// The members of the one JSON object `bytes` hold, in order, or `nil` if they are not exactly
    /// one object; of a repeated key, the first, as in a parsed object. For a caller that reads
    /// known fields in one pass (the server's requests): no dictionary is built for the object.
    static func members(_ bytes: UnsafeBufferPointer<UInt8>) -> [(key: String, value: JSONValue)]? {
        var parser = JSONParser(bytes)
        parser.skipWhitespace()
        guard parser.current == UInt8(ascii: "{") else { return nil }
        var members = MemberList()
        guard parser.members(depth: 1, into: &members) else { return nil }
        parser.skipWhitespace()
        return parser.position == bytes.count ? members.members : nil
    }

    private mutating func object(depth: Int) -> JSONValue? {
        var fields = FieldTable()
        guard members(depth: depth, into: &fields) else { return nil }
        return .object(fields.fields)
    }

    /// Reads an object from its opening brace into `sink`, member by member in order; `false` if
    /// it is not one. Generic, not a closure, so that each sink's loop is compiled on its own.
    private mutating func members<Sink: MemberSink>(depth: Int, into sink: inout Sink) -> Bool {
        position += 1
        skipWhitespace()
        if current == UInt8(ascii: "}") {
            position += 1
            return true
        }
        var count = 0
        while true {
            skipWhitespace()
            if current == UInt8(ascii: "}") && count > 0 {
                position += 1
                return true
            }
            guard current == UInt8(ascii: "\""), let key = string() else { return false }
            skipWhitespace()
            guard current == UInt8(ascii: ":") else { return false }
            position += 1
            guard let value = value(depth: depth) else { return false }
            sink.add(key, value)
            count += 1
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","): position += 1
            case UInt8(ascii: "}"): position += 1; return true
            default: return false
            }
        }
    }

    private mutating func array(depth: Int) -> JSONValue? {
        position += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if current == UInt8(ascii: "]") {
            position += 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            if current == UInt8(ascii: "]") && !elements.isEmpty {
                position += 1
                return .array(elements)
            }
            guard let element = value(depth: depth) else { return nil }
            elements.append(element)
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","): position += 1
            case UInt8(ascii: "]"): position += 1; return .array(elements)
            default: return nil
            }
        }
    }

    private mutating func number() -> JSONValue? {
        let start = position
        if current == UInt8(ascii: "-") { position += 1 }
        guard let first = current, first >= UInt8(ascii: "0") && first <= UInt8(ascii: "9") else { return nil }
        position += 1
        if first != UInt8(ascii: "0") { skipDigits() }
        var integral = true
        if current == UInt8(ascii: ".") {
            integral = false
            position += 1
            guard skipDigits() > 0 else { return nil }
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            integral = false
            position += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { position += 1 }
            guard skipDigits() > 0 else { return nil }
        }
        if integral, let integer = Self.integer(UnsafeBufferPointer(rebasing: bytes[start..<position])) { return .integer(integer) }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self)
        guard let double = Double(text), double.isFinite else {
            problem = .numberOutOfRange(at: start, length: position - start)
            return nil
        }
        return .number(double)
    }

    /// The value of an optional minus and digits, read without making a `String` first; `nil`
    /// past `Int64`'s range (the caller then reads it as a double, as `Int64(String)` failing did).
    private static func integer(_ text: UnsafeBufferPointer<UInt8>) -> Int64? {
        let negative = text.first == UInt8(ascii: "-")
        var value: Int64 = 0
        for byte in text.dropFirst(negative ? 1 : 0) {
            let digit = Int64(byte &- UInt8(ascii: "0"))
            let (shifted, overflowed) = value.multipliedReportingOverflow(by: 10)
            // Built negative, so Int64.min (one more than Int64.max in magnitude) fits.
            let (next, underflowed) = shifted.subtractingReportingOverflow(digit)
            guard !overflowed, !underflowed else { return nil }
            value = next
        }
        if negative { return value }
        return value == .min ? nil : -value
    }

    @discardableResult
    private mutating func skipDigits() -> Int {
        let start = position
        while let byte = current, byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") { position += 1 }
        return position - start
    }

    /// A string's contents, the opening quote at `position`.
    private mutating func string() -> String? {
        position += 1
        let start = position
        // The common case: no escapes, so the bytes between the quotes are the string.
        var anyNonASCII: UInt8 = 0
        while let byte = current, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\") {
            guard byte >= 0x20 else {
                problem = .controlCharacter(at: position)
                return nil
            }
            anyNonASCII |= byte
            position += 1
        }
        guard let stop = current else { return nil }
        guard stop == UInt8(ascii: "\\") else {
            position += 1
            let text = UnsafeBufferPointer(rebasing: bytes[start..<position - 1])
            // ASCII is valid UTF-8 as it stands: copied in by a call that is not generic (validating
            // a buffer looks up the buffer type's metadata in the runtime, for every key and value).
            if anyNonASCII < 0x80 {
                guard let source = text.baseAddress, !text.isEmpty else { return "" }
                return String(unsafeUninitializedCapacity: text.count) { buffer in
                    buffer.baseAddress!.update(from: source, count: text.count)
                    return text.count
                }
            }
            // Invalid UTF-8 is refused, as JSONDecoder refuses it, rather than repaired.
            return String(validating: text, as: UTF8.self) ?? invalidUTF8(from: start)
        }
        var raw = Array(UnsafeBufferPointer(rebasing: bytes[start..<position]))
        guard escapedRest(into: &raw) else { return nil }
        return String(validating: raw, as: UTF8.self) ?? invalidUTF8(from: start)
    }

    /// Refuses the string from `start` to its closing quote, just read, naming its first byte
    /// that is not UTF-8. Escapes are ASCII, so the bytes as written hold the fault.
    private mutating func invalidUTF8(from start: Int) -> String? {
        let string = UnsafeBufferPointer(rebasing: bytes[start..<(position - 1)])
        problem = .invalidUTF8(at: start + (Unicode.UTF8.firstInvalidOffset(in: string) ?? string.count))
        return nil
    }

    /// The rest of a string that has escapes, from the first backslash through the closing quote.
    private mutating func escapedRest(into raw: inout [UInt8]) -> Bool {
        while let byte = current {
            position += 1
            switch byte {
            case UInt8(ascii: "\""):
                return true
            case UInt8(ascii: "\\"):
                guard let escape = current else { return false }
                position += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): raw.append(escape)
                case UInt8(ascii: "b"): raw.append(0x08)
                case UInt8(ascii: "f"): raw.append(0x0C)
                case UInt8(ascii: "n"): raw.append(0x0A)
                case UInt8(ascii: "r"): raw.append(0x0D)
                case UInt8(ascii: "t"): raw.append(0x09)
                case UInt8(ascii: "u"):
                    guard let scalar = unicodeEscape() else { return false }
                    raw.append(contentsOf: String(Character(scalar)).utf8)
                default:
                    problem = .badEscape(at: position - 2)
                    return false
                }
            case 0..<0x20:
                problem = .controlCharacter(at: position - 1)
                return false
            default:
                raw.append(byte)
            }
        }
        return false
    }

    /// The scalar of a `\u` escape (the `\u` already read), joining a surrogate pair.
    private mutating func unicodeEscape() -> Unicode.Scalar? {
        let start = position - 2
        guard let high = hex4() else {
            problem = .badEscape(at: start)
            return nil
        }
        if (0xD800..<0xDC00).contains(high) {
            guard current == UInt8(ascii: "\\"), position + 1 < bytes.count, bytes[position + 1] == UInt8(ascii: "u") else {
                problem = .loneSurrogate(at: start)
                return nil
            }
            position += 2
            guard let low = hex4(), (0xDC00..<0xE000).contains(low) else {
                problem = .loneSurrogate(at: start)
                return nil
            }
            return Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
        }
        guard let scalar = Unicode.Scalar(high) else {
            problem = .loneSurrogate(at: start)
            return nil
        }
        return scalar
    }

    private mutating func hex4() -> UInt32? {
        guard position + 4 <= bytes.count else { return nil }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[position]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            value = value << 4 | UInt32(digit)
            position += 1
        }
        return value
    }
}

/// Where ``JSONParser`` puts an object's members as it reads them.
private protocol MemberSink {
    mutating func add(_ key: String, _ value: JSONValue)
}

/// An object's fields; of a repeated key, the first.
private struct FieldTable: MemberSink {
    var fields: [String: JSONValue] = [:]

    mutating func add(_ key: String, _ value: JSONValue) {
        if fields[key] == nil { fields[key] = value }
    }
}

/// An object's members in order; of a repeated key, the first. A request has a handful of
/// members: a look along them beats hashing, up to a point.
private struct MemberList: MemberSink {
    var members: [(key: String, value: JSONValue)] = []
    var keys: Set<String>?

    init() {
        members.reserveCapacity(8)
    }

    mutating func add(_ key: String, _ value: JSONValue) {
        if members.count < 16 {
            guard !members.contains(where: { $0.key == key }) else { return }
        } else {
            if keys == nil { keys = Set(members.map(\.key)) }
            guard keys!.insert(key).inserted else { return }
        }
        members.append((key, value))
    }
}

extension Unicode.UTF8 {
    /// Where in `bytes`, from 0, the first byte that is not part of whole UTF-8 lies; `nil` if
    /// every byte is: for an error that names the byte (a JSON string's, a command-line argument's).
    package static func firstInvalidOffset(in bytes: some Sequence<UInt8>) -> Int? {
        var parser = ForwardParser()
        var iterator = bytes.makeIterator()
        var offset = 0
        while true {
            switch parser.parseScalar(from: &iterator) {
            case .valid(let scalar): offset += scalar.count
            case .emptyInput: return nil
            case .error: return offset
            }
        }
    }
}
