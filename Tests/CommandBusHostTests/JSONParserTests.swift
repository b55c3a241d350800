import CommandBusSupport
import Foundation
import Testing

/// `JSONValue.parse` reads bytes with a parser of our own (the server's requests go through it);
/// it must accept and refuse what `JSONDecoder` does, and read the same values.
struct JSONParserTests {
    private func foundation(_ bytes: [UInt8]) -> JSONValue? {
        try? JSONDecoder().decode(JSONValue.self, from: Data(bytes))
    }

    @Test func readsWhatFoundationReads() {
        let documents = [
            #"{"id":1,"op":"send","command":"greet","payload":{"name":"Ada"},"metadata":{}}"#,
            #" [ 1 , -0 , 0.5 , -12.5e-3 , 1E+2 , 9223372036854775807 , 9223372036854775808 , -9223372036854775808 ] "#,
            #"{"s":"a\"b\\c\/d\u0001\u001f\n\r\t\b\fé\u00e9\ud83d\ude00 ","t":true,"f":false,"n":null,"e":{},"a":[]}"#,
            #""just a string""#, "42", "null", #"{"dup":1,"dup":2}"#, "[1,]", #"{"a":[1,],}"#,
        ]
        for document in documents {
            let parsed = JSONValue.parse(document)
            #expect(parsed != nil, "refused \(document)")
            #expect(parsed?.text == foundation(Array(document.utf8))?.text, "\(document)")
        }
    }

    @Test func refusesWhatFoundationRefuses() {
        let deep = String(repeating: "[", count: 600) + String(repeating: "]", count: 600)
        let texts = [
            "", " ", "{", "}", "[,]", "{,}", "[1,,]", #"{"a" 1}"#, #"{a:1}"#, "01", "1.", ".5", "-", "1e", "+1", "1e400",
            #""\x""#, "\"\u{1}\"", #""\ud800""#, #""\ud800\u0041""#, #""\udc00""#, "nul", "true false", "[1] 2", "NaN", deep,
            #""unterminated"#, #"{"a":[1,2}"#,
        ]
        for text in texts {
            #expect(JSONValue.parse(text) == nil, "accepted \(text.prefix(40))")
            #expect(foundation(Array(text.utf8)) == nil, "Foundation accepted \(text.prefix(40))")
        }
        let invalidUTF8: [UInt8] = [0x22, 0xFF, 0xFE, 0x22]
        #expect(JSONValue.parse(bytes: invalidUTF8) == nil)
        #expect(foundation(invalidUTF8) == nil)
        let nul: [UInt8] = [0x00, 0xFF, 0x20, 0x01]
        #expect(JSONValue.parse(bytes: nul) == nil)
    }

    /// Random documents, written by Foundation, read back by both.
    @Test func randomDocumentsReadTheSame() {
        var generator = SystemRandomNumberGenerator()
        func random(depth: Int) -> JSONValue {
            switch Int.random(in: 0..<(depth > 3 ? 5 : 7), using: &generator) {
            case 0: return .null
            case 1: return .bool(Bool.random(using: &generator))
            case 2: return .integer(Int64.random(in: .min ... .max, using: &generator))
            case 3: return .number(Double.random(in: -1e9...1e9, using: &generator))
            case 4:
                let scalars = (0..<Int.random(in: 0..<12, using: &generator)).compactMap { _ in
                    Unicode.Scalar(UInt32.random(in: 0..<0x1F700, using: &generator))
                }
                return .string(String(String.UnicodeScalarView(scalars)))
            case 5: return .array((0..<Int.random(in: 0..<5, using: &generator)).map { _ in random(depth: depth + 1) })
            default:
                return .object(Dictionary((0..<Int.random(in: 0..<5, using: &generator)).map { index in
                    ("k\(index)" + ["", "é", "\n", "\""].randomElement(using: &generator)!, random(depth: depth + 1))
                }, uniquingKeysWith: { first, _ in first }))
            }
        }
        let encoder = JSONEncoder()
        for _ in 0..<2_000 {
            let bytes = [UInt8](try! encoder.encode(random(depth: 0)))
            let ours = JSONValue.parse(bytes: bytes)
            #expect(ours != nil)
            #expect(ours?.text == foundation(bytes)?.text)
        }
    }
}
