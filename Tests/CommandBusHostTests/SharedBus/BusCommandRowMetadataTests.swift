@testable import CommandBusPostgres
import Testing

/// A command's metadata as the bus stores it (`jsonb`, read back as its text) becomes the
/// envelope's strings again: none for `{}`, each key's string, escapes and all; and none for
/// text that is not an object of strings, which the bus never writes.
struct BusCommandRowMetadataTests {
    @Test(arguments: [
        ("{}", [:]),
        (#"{"idempotency-key": "order-7"}"#, ["idempotency-key": "order-7"]),
        (#"{"a": "1", "quote": "say \"hi\"\n", "accent": "caf\u00e9"}"#, ["a": "1", "quote": "say \"hi\"\n", "accent": "café"]),
        (#"{"a": "1", "n": 2}"#, [:]),
        (#"["a"]"#, [:]),
        ("not JSON", [:]),
    ] as [(String, [String: String])])
    func metadataTextBecomesTheEnvelopesStrings(text: String, expected: [String: String]) {
        #expect(BusCommandRow.metadata(fromJSON: text) == expected)
    }
}
