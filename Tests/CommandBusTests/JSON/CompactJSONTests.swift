@testable import CommandBus
import Foundation
import Testing

/// `CompactJSON` writes the bytes `JSONWire.encoder` (Foundation's JSONEncoder) writes, or declines:
/// checked value by value against Foundation on seeded random commands, strings and numbers.
struct CompactJSONTests {
    func foundation<T: Encodable>(_ value: T) throws -> Data { try JSONWire.encoder.encode(value) }

    @Test func randomCommandsEncodeToFoundationsBytes() throws {
        var random = SplitMix(state: 20_261_122)
        for index in 0..<2_000 {
            let value = random.command(.init(asciiKeys: true))
            let compact = try #require(CompactJSON.encode(value), "case \(index) was declined")
            let expected = try foundation(value)
            #expect(compact == expected, "case \(index): \(String(decoding: compact, as: UTF8.self)) != \(String(decoding: expected, as: UTF8.self))")
            if compact != expected { return }
        }
    }

    @Test func everyScalarAndEveryNumberMatch() throws {
        var random = SplitMix(state: 7)
        let strings = (0..<0x80).map { String(Character(Unicode.Scalar(UInt8($0)))) } + (0..<2_000).map { _ in random.string() }
        for text in strings { #expect(CompactJSON.encode(text) == (try foundation(text)), "\(Array(text.unicodeScalars))") }
        for _ in 0..<5_000 {
            let double = random.double(), float = Float(random.double())
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

    /// Expects `value` declined by `CompactJSON`, and `JSONWire.encode` to give Foundation's bytes (or fail as it does).
    static func expectDeclined<T: Encodable>(_ value: T) {
        #expect(CompactJSON.encode(value) == nil, "\(T.self) should be declined")
        let expected = Result { try JSONWire.encoder.encode(value) }
        let wired = Result { try JSONWire.encode(value) }
        switch (expected, wired) {
        case (.success(let a), .success(let b)): #expect(a == b, "\(String(decoding: a, as: UTF8.self)) != \(String(decoding: b, as: UTF8.self))")
        case (.failure, .failure): break
        default: Issue.record("JSONWire.encode and Foundation disagree on \(T.self)")
        }
    }

    /// Whatever Foundation treats specially is declined, and `JSONWire.encode` then gives Foundation's bytes (or its error).
    @Test func whatFoundationTreatsSpeciallyIsLeftToFoundation() throws {
        func declined<T: Encodable>(_ value: T) throws { Self.expectDeclined(value) }
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
