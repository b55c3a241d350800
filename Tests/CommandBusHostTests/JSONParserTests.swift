import CommandBus
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
            #"{"":"","ké":"vé","plain":"ascii"}"#,
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
        let encoder = JSONEncoder()
        for _ in 0..<2_000 {
            let bytes = [UInt8](try! encoder.encode(randomJSONValue(using: &generator)))
            let ours = JSONValue.parse(bytes: bytes)
            #expect(ours != nil)
            #expect(ours?.text == foundation(bytes)?.text)
        }
    }
}
