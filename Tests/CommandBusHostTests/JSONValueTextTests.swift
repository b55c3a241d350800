import CommandBusSupport
import Foundation
import Testing

/// `JSONValue.text` is written by hand for speed; it must stay byte for byte what Foundation's
/// `JSONEncoder` (sorted keys, slashes unescaped) writes, since outputs and tests compare it.
struct JSONValueTextTests {
    private func foundationText(_ value: JSONValue) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try! encoder.encode(value), as: UTF8.self)
    }

    @Test func tricksOfStringsAndNumbersMatchFoundation() {
        let values: [JSONValue] = [
            .null, .bool(true), .bool(false), .integer(0), .integer(.min), .integer(.max),
            .number(0.1), .number(1), .number(-0.0), .number(1e21), .number(1e-7), .number(.pi), .number(.leastNonzeroMagnitude),
            .string(""), .string("a\"b\\c/d\u{1}\u{1f}\n\r\t\u{8}\u{c}é\u{7f}\u{2028}😀"),
            .object(["B": .integer(2), "Z": .null, "_x": .array([]), "a10": .object([:]), "a9": .string("/"), "b": .bool(true), "é": .number(2.5)]),
        ]
        for value in values { #expect(value.text == foundationText(value)) }
    }

    @Test func randomDocumentsMatchFoundation() {
        var generator = SystemRandomNumberGenerator()
        func random(depth: Int) -> JSONValue {
            switch Int.random(in: 0..<(depth > 3 ? 5 : 7), using: &generator) {
            case 0: return .null
            case 1: return .bool(Bool.random(using: &generator))
            case 2: return .integer(Int64.random(in: .min ... .max, using: &generator))
            case 3: return .number(Double.random(in: -1e6...1e6, using: &generator))
            case 4:
                let scalars = (0..<Int.random(in: 0..<12, using: &generator)).compactMap { _ in
                    Unicode.Scalar(UInt32.random(in: 0..<0x2100, using: &generator))
                }
                return .string(String(String.UnicodeScalarView(scalars)))
            case 5: return .array((0..<Int.random(in: 0..<5, using: &generator)).map { _ in random(depth: depth + 1) })
            default:
                return .object(Dictionary((0..<Int.random(in: 0..<5, using: &generator)).map { index in
                    (["id", "Op", "_k", "key\(index)", "ü", "a b"].randomElement(using: &generator)! + "\(index)", random(depth: depth + 1))
                }, uniquingKeysWith: { first, _ in first }))
            }
        }
        for _ in 0..<2_000 {
            let value = random(depth: 0)
            #expect(value.text == foundationText(value))
        }
    }
}
