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

    /// A refusal says where the text goes wrong; what parses has no syntax error.
    @Test func aSyntaxErrorSaysWhere() {
        let cases: [(String, String)] = [
            ("", "it ends at line 1, column 1 before the value does"),
            ("{a:1}", "unexpected 'a' at line 1, column 2"),
            ("{\"a\":\n  [1,2}", "unexpected '}' at line 2, column 7"),
            ("[\"é\", tru]", "unexpected 't' at line 1, column 7"),
            ("[1] 2", "unexpected '2' at line 1, column 5"),
            ("\"\u{1}\"", #"U+1 at line 1, column 2 is inside a string unescaped; write it \u0001"#),
            ("[é, 1]", "unexpected U+E9 at line 1, column 2"),
            ("{\"a\": \"b", "it ends at line 1, column 9 before the value does"),
            // Found by hand: these said "unexpected '\"'" and "unexpected '['", where the reason lay elsewhere.
            (#"{"name": "\ud800"}"#, #"\ud800 at line 1, column 11 is half a surrogate pair (as in \uD83D\uDE00), which encodes no character"#),
            (#"["\uDE00x"]"#, #"\uDE00 at line 1, column 3 is half a surrogate pair (as in \uD83D\uDE00), which encodes no character"#),
            (#"["\ud83d\u0041"]"#, #"\ud83d at line 1, column 3 is half a surrogate pair (as in \uD83D\uDE00), which encodes no character"#),
            (String(repeating: "[", count: 600) + String(repeating: "]", count: 600), "nested deeper than 512 levels at line 1, column 513"),
            // Found by hand too: these said "unexpected ','", "unexpected '\"'" (after the escape) and "unexpected U+9".
            (#"{"n": 1e999, "m": 2}"#, "the number 1e999 at line 1, column 7 is out of range (a double holds up to about ±1.8e308)"),
            (#"[-2.5E+400]"#, "the number -2.5E+400 at line 1, column 2 is out of range (a double holds up to about ±1.8e308)"),
            (#"{"name": "a\xb"}"#, #"\x at line 1, column 12 is not an escape JSON has (\" \\ \/ \b \f \n \r \t \uXXXX)"#),
            (#"["é\u00G1"]"#, #"\u00G1 at line 1, column 4 is not an escape JSON has (\" \\ \/ \b \f \n \r \t \uXXXX)"#),
            ("{\"name\": \"a\tb\"}", #"a tab at line 1, column 12 is inside a string unescaped; write it \t"#),
            ("[\"\\n\nx\"]", #"a line break at line 1, column 5 is inside a string unescaped; write it \n"#),
            // Found by the arguments fuzzer: a backslash before a line break put the line break
            // in the message, which must be one line.
            ("{\"t\": \"a\\\nb\"}", #"\ before a line break at line 1, column 9 is not an escape JSON has (\" \\ \/ \b \f \n \r \t \uXXXX)"#),
            ("[\"\\u1\t\"]", #"\u1 before a tab at line 1, column 3 is not an escape JSON has (\" \\ \/ \b \f \n \r \t \uXXXX)"#),
        ]
        for (text, expected) in cases {
            #expect(JSONValue.syntaxError(in: Array(text.utf8)) == expected, "\(text)")
        }
        // A byte that is not UTF-8 is named as a byte: out of a string, and in one (where the
        // parser stops at its end, and said "unexpected" of whatever followed).
        #expect(JSONValue.syntaxError(in: [0x5B, 0xFF, 0x5D]) == "unexpected byte 0xFF at line 1, column 2")
        let name = Array(#"{"name": "ab"#.utf8) + [0xC3, 0xA9, 0xFF, 0x63] + Array(#"", "x": 1}"#.utf8)
        #expect(JSONValue.syntaxError(in: name) == "byte 0xFF at line 1, column 14 is not UTF-8")
        let escaped = Array(#"["\n"#.utf8) + [0xE2, 0x82] + Array(#"\t"]"#.utf8)
        #expect(JSONValue.syntaxError(in: escaped) == "byte 0xE2 at line 1, column 5 is not UTF-8")
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<500 {
            let text = JSONValue.object(["k": randomJSONValue(using: &generator)]).text
            #expect(JSONValue.syntaxError(in: Array(text.utf8)) == nil, "\(text.prefix(60))")
            // Cut short anywhere but whole, a document is refused, and the reason says where.
            let cut = Array(text.utf8.prefix(Int.random(in: 0..<text.utf8.count, using: &generator)))
            if JSONValue.parse(bytes: cut) == nil { #expect(JSONValue.syntaxError(in: cut)?.contains(" at line 1, column ") == true) }
            // With one byte changed to anything, it is refused with a reason, or it parses and has none.
            var changed = Array(text.utf8)
            changed[Int.random(in: 0..<changed.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
            let reason = JSONValue.syntaxError(in: changed)
            #expect((JSONValue.parse(bytes: changed) == nil) == (reason?.contains(" at line ") == true), "\(reason ?? "parses")")
            #expect(reason?.contains("\n") != true, "a reason is one line: \(reason ?? "")")
        }
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

    /// An object's members read in one pass (the server's requests) are the parsed object's, in
    /// order, with the first of a repeated key kept, even a null one; anything but one object is refused.
    @Test func anObjectsMembersAreTheParsedObjects() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<1_000 {
            var fields: [String: JSONValue] = [:]
            for _ in 0..<Int.random(in: 0...24, using: &generator) { fields[String(Int.random(in: 0...40, using: &generator))] = randomJSONValue(using: &generator) }
            let bytes = Array(JSONValue.object(fields).text.utf8)
            guard let members = JSONValue.members(ofObject: bytes) else {
                Issue.record("refused \(JSONValue.object(fields).text.prefix(60))")
                return
            }
            #expect(members.map { $0.key } == fields.keys.sorted())
            #expect(JSONValue.object(Dictionary(uniqueKeysWithValues: members.map { ($0.key, $0.value) })) == JSONValue.parse(bytes: bytes))
        }
        let repeated = #"{"op":null,"b":1,"op":"send","b":2,"c":[1,],}"#
        let members = JSONValue.members(ofObject: Array(repeated.utf8))
        #expect(members?.map { $0.key } == ["op", "b", "c"])
        #expect(members?.first?.value == .null)
        #expect(members?[1].value == .integer(1))
        let many = "{" + (0..<40).map { #""k\#($0 % 20)":\#($0)"# }.joined(separator: ",") + "}"
        let kept = JSONValue.members(ofObject: Array(many.utf8))
        #expect(kept?.map { $0.key } == (0..<20).map { "k\($0)" })
        #expect(kept?.map { $0.value } == (0..<20).map { JSONValue.integer(Int64($0)) })
        for text in ["[1]", "1", #""s""#, "", "{", #"{"a":1} x"#, #"{"a":1}{}"#, "null"] {
            #expect(JSONValue.members(ofObject: Array(text.utf8)) == nil, "accepted \(text)")
        }
        #expect(JSONValue.members(ofObject: Array(" { } ".utf8))?.isEmpty == true)
    }
}
