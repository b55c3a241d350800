import Foundation

// Seeded random values for the JSON differential tests. The plugin SDK's tests use this file
// too, through a symlink: test targets share no module, and the SDK's tests must not import the core.

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

    /// Characters JSON must escape or carry as they are: quotes, backslashes, control characters,
    /// a slash, non-ASCII letters, an emoji, a line separator, a byte-order mark, a combining accent.
    static let awkward: [Character] = ["\"", "\\", "/", "\u{7F}", "é", "日", "😀", "\u{2028}", "\u{FEFF}", "e\u{301}", " "]
        + (0..<0x20).map { Character(Unicode.Scalar(UInt8($0))) }

    /// A string of up to 12 characters, about half of them awkward.
    mutating func string() -> String {
        String((0..<Int.random(in: 0...12, using: &self)).map { _ in
            Bool.random(using: &self) ? Self.awkward.randomElement(using: &self)! : Character(Unicode.Scalar(UInt8.random(in: 0x20...0x7E, using: &self)))
        })
    }

    /// A finite double: any bit pattern, a short decimal, a large integer, or an edge case.
    mutating func double() -> Double {
        switch Int.random(in: 0..<4, using: &self) {
        case 0:
            while true {
                let value = Double(bitPattern: next())
                if value.isFinite { return value }
            }
        case 1: return Double(Int.random(in: -1_000_000...1_000_000, using: &self)) / 1_000
        case 2: return Double(Int64.random(in: Int64.min...Int64.max, using: &self))
        default: return [0, -0.0, 1e-5, 1e-7, 1e16, 1e21, 1e22, .leastNonzeroMagnitude, .ulpOfOne, .greatestFiniteMagnitude, 0.1 + 0.2, 100].randomElement(using: &self)!
        }
    }
}

/// A command's worth of the shapes JSON coders meet: scalars of each kind, optionals present and
/// absent, nested arrays and objects, dictionaries keyed by strings and by integers, enums with
/// and without associated values, and an id.
struct SampleCommand: Codable, Equatable {
    struct Flat: Codable, Equatable {
        var int: Int
        var text: String
        var double: Double
        var flag: Bool
        var small: Int8
        var big: UInt64
        var maybe: String?
        var absent: Int?
    }

    enum Shape: Codable, Equatable {
        case circle(radius: Double)
        case square(Int, label: String)
        case empty
    }

    enum Color: String, Codable, Equatable { case red, green }

    var flat: Flat
    var list: [Flat]
    var counts: [String: Int]
    var byNumber: [Int: String]
    var shapes: [Shape]
    var color: Color
    var holes: [Double?]
    var grid: [[Int]]
    var nothing: [String]
    var id: UUID
}

extension SplitMix {
    /// What a random command may hold: the encoder takes ASCII keys only, the decoder's parser
    /// integers up to `Int64.max` only, and it leaves every zero `Double` to Foundation.
    struct Limits {
        var asciiKeys = false
        var bigUnsigned = true
        var zeros = true
    }

    mutating func command(_ limits: Limits) -> SampleCommand {
        let keys = (0..<Int.random(in: 0...6, using: &self)).map { _ in
            limits.asciiKeys
                ? String((0..<Int.random(in: 1...4, using: &self)).map { _ in Character(Unicode.Scalar(UInt8.random(in: 0x21...0x7E, using: &self))) })
                : string()
        }
        return SampleCommand(
            flat: flat(limits), list: (0..<Int.random(in: 0...3, using: &self)).map { _ in flat(limits) },
            counts: Dictionary(keys.map { ($0, Int.random(in: -9...9, using: &self)) }, uniquingKeysWith: { first, _ in first }),
            byNumber: [Int.random(in: -20 ... -1, using: &self): string(), 10: "ten", 2: "two"],
            shapes: [.circle(radius: double(limits)), .square(Int.random(in: 0...9, using: &self), label: string()), .empty],
            color: Bool.random(using: &self) ? .red : .green, holes: [nil, double(limits)],
            grid: [[1, 2], [], [Int.random(in: 0...99, using: &self)]], nothing: [],
            id: UUID(uuid: withUnsafeBytes(of: (next(), next())) { $0.load(as: uuid_t.self) })
        )
    }

    private mutating func flat(_ limits: Limits) -> SampleCommand.Flat {
        SampleCommand.Flat(
            int: Int.random(in: Int.min...Int.max, using: &self), text: string(), double: double(limits),
            flag: Bool.random(using: &self), small: Int8.random(in: Int8.min...Int8.max, using: &self),
            big: limits.bigUnsigned ? next() : next() >> 1,
            maybe: Bool.random(using: &self) ? string() : nil, absent: Bool.random(using: &self) ? 7 : nil
        )
    }

    private mutating func double(_ limits: Limits) -> Double {
        let value = double()
        return value == 0 && !limits.zeros ? 1 : value
    }
}
