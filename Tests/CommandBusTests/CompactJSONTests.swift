@testable import CommandBus
import Foundation
import Testing

/// `CompactJSON` writes the bytes `JSONWire.encoder` (Foundation's JSONEncoder) writes, or declines:
/// checked value by value against Foundation on seeded random commands, strings and numbers.
struct CompactJSONTests {
    struct Flat: Codable {
        var int: Int
        var text: String
        var double: Double
        var flag: Bool
        var small: Int8
        var big: UInt64
        var float: Float
        var maybe: String?
        var absent: Int?
    }

    enum Shape: Codable {
        case circle(radius: Double)
        case square(Int, label: String)
        case empty
    }

    enum Color: String, Codable { case red, green }

    struct Nested: Codable {
        var flat: Flat
        var list: [Flat]
        var counts: [String: Int]
        var byNumber: [Int: String]
        var shapes: [Shape]
        var color: Color
        var holes: [Double?]
        var grid: [[Int]]
        var nothing: [String]
    }

    /// A small seeded generator, so a failure names a reproducible case.
    struct SplitMix: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    static let awkward: [Character] = ["\"", "\\", "/", "\u{7F}", "é", "日", "😀", "\u{2028}", "\u{FEFF}", "e\u{301}", " "]
        + (0..<0x20).map { Character(Unicode.Scalar(UInt8($0))) }

    static func string(_ random: inout SplitMix) -> String {
        String((0..<Int.random(in: 0...12, using: &random)).map { _ in
            Bool.random(using: &random) ? awkward.randomElement(using: &random)! : Character(Unicode.Scalar(UInt8.random(in: 0x20...0x7E, using: &random)))
        })
    }

    static func double(_ random: inout SplitMix) -> Double {
        switch Int.random(in: 0..<4, using: &random) {
        case 0:
            while true {
                let value = Double(bitPattern: random.next())
                if value.isFinite { return value }
            }
        case 1: return Double(Int.random(in: -1_000_000...1_000_000, using: &random)) / 1_000
        case 2: return Double(Int64.random(in: Int64.min...Int64.max, using: &random))
        default: return [0, -0.0, 1e-5, 1e-7, 1e16, 1e21, 1e22, .leastNonzeroMagnitude, .ulpOfOne, .greatestFiniteMagnitude, 0.1 + 0.2, 100].randomElement(using: &random)!
        }
    }

    static func flat(_ random: inout SplitMix) -> Flat {
        let float = Float(double(&random))
        return Flat(
            int: Int.random(in: Int.min...Int.max, using: &random), text: string(&random), double: double(&random),
            flag: Bool.random(using: &random), small: Int8.random(in: Int8.min...Int8.max, using: &random),
            big: random.next(), float: float.isFinite ? float : 0.5,
            maybe: Bool.random(using: &random) ? string(&random) : nil, absent: Bool.random(using: &random) ? 7 : nil
        )
    }

    static func nested(_ random: inout SplitMix) -> Nested {
        let keys = (0..<Int.random(in: 0...6, using: &random)).map { _ in
            String((0..<Int.random(in: 1...4, using: &random)).map { _ in Character(Unicode.Scalar(UInt8.random(in: 0x21...0x7E, using: &random))) })
        }
        return Nested(
            flat: flat(&random), list: (0..<Int.random(in: 0...3, using: &random)).map { _ in flat(&random) },
            counts: Dictionary(keys.map { ($0, Int.random(in: -9...9, using: &random)) }, uniquingKeysWith: { first, _ in first }),
            byNumber: [Int.random(in: -20 ... -1, using: &random): string(&random), 10: "ten", 2: "two"],
            shapes: [.circle(radius: double(&random)), .square(Int.random(in: 0...9, using: &random), label: string(&random)), .empty],
            color: Bool.random(using: &random) ? .red : .green, holes: [nil, double(&random)],
            grid: [[1, 2], [], [Int.random(in: 0...99, using: &random)]], nothing: []
        )
    }

    func foundation<T: Encodable>(_ value: T) throws -> Data { try JSONWire.encoder.encode(value) }

    @Test func randomCommandsEncodeToFoundationsBytes() throws {
        var random = SplitMix(state: 20_261_122)
        for index in 0..<2_000 {
            let value = Self.nested(&random)
            let compact = try #require(CompactJSON.encode(value), "case \(index) was declined")
            let expected = try foundation(value)
            #expect(compact == expected, "case \(index): \(String(decoding: compact, as: UTF8.self)) != \(String(decoding: expected, as: UTF8.self))")
            if compact != expected { return }
        }
    }

    @Test func everyScalarAndEveryNumberMatch() throws {
        var random = SplitMix(state: 7)
        let strings = (0..<0x80).map { String(Character(Unicode.Scalar(UInt8($0)))) } + (0..<2_000).map { _ in Self.string(&random) }
        for text in strings { #expect(CompactJSON.encode(text) == (try foundation(text)), "\(Array(text.unicodeScalars))") }
        for _ in 0..<5_000 {
            let double = Self.double(&random), float = Float(Self.double(&random))
            #expect(CompactJSON.encode(double) == (try foundation(double)), "\(double)")
            if float.isFinite { #expect(CompactJSON.encode(float) == (try foundation(float)), "\(float)") }
        }
        for value in [Int.min, Int.max, 0, -1] { #expect(CompactJSON.encode(value) == (try foundation(value))) }
        #expect(CompactJSON.encode(UInt64.max) == (try foundation(UInt64.max)))
        #expect(CompactJSON.encode(true) == (try foundation(true)))
        #expect(CompactJSON.encode(Optional<Int>.none) == (try foundation(Optional<Int>.none)))
    }

    /// A struct that calls `superEncoder`, as a subclass's `encode(to:)` does.
    struct UsesSuper: Encodable {
        enum Keys: CodingKey { case a }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(1, forKey: .a)
            try 2.encode(to: container.superEncoder())
        }
    }

    /// A struct that writes one key twice.
    struct TwiceKeyed: Encodable {
        enum Keys: CodingKey { case a }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(1, forKey: .a)
            try container.encode("one", forKey: .a)
        }
    }

    /// A struct that writes nothing at all.
    struct Silent: Encodable {
        func encode(to encoder: any Encoder) throws {}
    }

    struct Wrapper<T: Encodable>: Encodable { var value: T }

    /// Whatever Foundation treats specially is declined, and `JSONWire.encode` then gives Foundation's bytes (or its error).
    @Test func whatFoundationTreatsSpeciallyIsLeftToFoundation() throws {
        func declined<T: Encodable>(_ value: T) throws {
            #expect(CompactJSON.encode(value) == nil, "\(T.self) should be declined")
            let expected = Result { try foundation(value) }
            let wired = Result { try JSONWire.encode(value) }
            switch (expected, wired) {
            case (.success(let a), .success(let b)): #expect(a == b)
            case (.failure, .failure): break
            default: Issue.record("JSONWire.encode and Foundation disagree on \(T.self)")
            }
        }
        try declined(Data([1, 2, 3]))
        try declined(Wrapper(value: Data([1, 2, 3])))
        try declined(Wrapper(value: URL(string: "https://example.com/a?b=c")!))
        try declined(Wrapper(value: Decimal(string: "12.340")!))
        try declined(Wrapper(value: Double.nan))
        try declined(Wrapper(value: [Float.infinity]))
        try declined(["é": 1, "e": 2])
        try declined(UsesSuper())
        try declined(TwiceKeyed())
        try declined(Silent())
        try declined(Wrapper(value: Silent()))
    }
}
