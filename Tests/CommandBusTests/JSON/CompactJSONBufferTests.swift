@testable import CommandBus
import Foundation
import Testing

/// `CompactJSON` writes straight into one buffer and sorts each object's members when it closes:
/// keys that escape, sort past each other or are prefixes of each other, and containers left
/// open, give the bytes Foundation's JSONEncoder writes; what it cannot write is left to Foundation.
struct CompactJSONBufferTests {
    func foundation<T: Encodable>(_ value: T) throws -> Data { try JSONWire.encoder.encode(value) }

    func text(_ data: Data?) -> String { data.map { String(decoding: $0, as: UTF8.self) } ?? "nil" }

    /// Keys that sort past each other, prefixes of each other, and by case; members that are
    /// objects and arrays themselves.
    struct Unsorted: Encodable {
        enum Keys: String, CodingKey { case b, ab, a, B, _z = "_", nested, list, abc }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(1, forKey: .b)
            try container.encode(["y": 1, "x": 2, "xx": 3], forKey: .nested)
            try container.encode("two", forKey: .ab)
            try container.encode([3, 2, 1], forKey: .list)
            try container.encode(true, forKey: .a)
            try container.encodeNil(forKey: .B)
            try container.encode(-0.5, forKey: ._z)
            try container.encode(Int64.min, forKey: .abc)
        }
    }

    enum Shape: Encodable {
        case circle(radius: Double)
        case square(Int, label: String)
        case empty
    }

    @Test func membersAreSortedAndNestedContainersClosed() throws {
        let unsorted = try #require(CompactJSON.encode(Unsorted()))
        #expect(unsorted == (try foundation(Unsorted())), "\(text(unsorted))")
        let shapes: [Shape] = [.circle(radius: 2.5), .square(4, label: "a\"b\n"), .empty, .square(-1, label: "")]
        let written = try #require(CompactJSON.encode(shapes))
        #expect(written == (try foundation(shapes)), "\(text(written))")
        let nested: [String: [String: [Int]]] = ["b": ["d": [1], "c": []], "a": [:]]
        #expect(CompactJSON.encode(nested) == (try foundation(nested)))
    }

    /// Escaped keys sort by their bytes before escaping: `"` (0x22) sorts before `#` and `\` after
    /// it, though both escape to text starting with a backslash (0x5C).
    @Test func escapedKeysSortAsTheKeysThemselves() throws {
        let keys = ["a\"b", "a\\b", "a\nb", "a\u{1}b", "a", "a!", "a#", "a\u{1F}", "a\tb", "\"", "\\"]
        for count in [2, 5, keys.count] {
            let value = Dictionary(uniqueKeysWithValues: keys.prefix(count).enumerated().map { ($1, $0) })
            let written = try #require(CompactJSON.encode(value))
            #expect(written == (try foundation(value)), "\(text(written))")
        }
    }

    /// Writes to a nested container after its parent wrote again, which closed it.
    struct ReopensClosedContainer: Encodable {
        enum Keys: CodingKey { case inner, after, late }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            var inner = container.nestedContainer(keyedBy: Keys.self, forKey: .inner)
            try container.encode(1, forKey: .after)
            try inner.encode(2, forKey: .late)
        }
    }

    /// Keeps its encoder and writes through it from a sibling's `encode(to:)`, after its own value was done.
    final class KeptEncoder: @unchecked Sendable {
        var encoder: (any Encoder)?
    }

    struct Keeps: Encodable {
        let box: KeptEncoder
        func encode(to encoder: any Encoder) throws {
            box.encoder = encoder
            var container = encoder.singleValueContainer()
            try container.encode(1)
        }
    }

    struct UsesKept: Encodable {
        let box: KeptEncoder
        func encode(to encoder: any Encoder) throws {
            var late = box.encoder!.singleValueContainer()
            try late.encode(2)
            var container = encoder.singleValueContainer()
            try container.encode(3)
        }
    }

    struct Pair: Encodable {
        let first: Keeps
        let second: UsesKept
    }

    /// Writes an unkeyed container's count as its last item.
    struct Counts: Encodable {
        func encode(to encoder: any Encoder) throws {
            var container = encoder.unkeyedContainer()
            try container.encode("a")
            try container.encode([1])
            try container.encode(container.count)
        }
    }

    @Test func whatItCannotWriteIsLeftToFoundation() throws {
        func leftToFoundation<T: Encodable>(_ value: T) throws { CompactJSONTests.expectDeclined(value) }
        try leftToFoundation(ReopensClosedContainer())
        try leftToFoundation(CompactJSONTests.TwiceKeyed())
        try leftToFoundation(CompactJSONTests.UsesSuper())
        try leftToFoundation(CompactJSONTests.Silent())
        try leftToFoundation(Data([1]))
        try leftToFoundation(CompactJSONTests.Wrapper(value: Double.infinity))
        // An encoder kept past its value and used from a sibling's encode: it gives up, without a
        // crash (Foundation's encoder stops the process on it, so it is not asked).
        let box = KeptEncoder()
        #expect(CompactJSON.encode(Pair(first: Keeps(box: box), second: UsesKept(box: box))) == nil)
        let counts = try #require(CompactJSON.encode(Counts()))
        #expect(counts == (try foundation(Counts())), "\(text(counts))")
    }
}
