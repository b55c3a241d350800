import CommandBus
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
        for _ in 0..<2_000 {
            let value = randomJSONValue(using: &generator)
            #expect(value.text == foundationText(value))
        }
    }
}
