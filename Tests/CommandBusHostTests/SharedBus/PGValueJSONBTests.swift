import CommandBusPostgres
import Testing

/// JSON text made fit for `jsonb`, which keeps no NUL character.
struct PGValueJSONBTests {
    @Test(arguments: [
        (#"{"t":"a\u0000b"}"#, #"{"t":"a\ufffdb"}"#),
        (#"["\u0000\u0000"]"#, #"["\ufffd\ufffd"]"#),
        // The text `\u0000` (an escaped backslash, then u0000) is not a NUL, and stays.
        (#"{"t":"\\u0000"}"#, #"{"t":"\\u0000"}"#),
        (#"{"t":"\\\u0000"}"#, #"{"t":"\\\ufffd"}"#),
        (#"{"u0000":"\u00001"}"#, #"{"u0000":"\ufffd1"}"#),
        (#"{"t":"\u00e9"}"#, #"{"t":"\u00e9"}"#),
        (#"{}"#, #"{}"#),
    ])
    func eachNulEscapeBecomesTheReplacementCharacter(json: String, storable: String) {
        #expect(PGValue.jsonbStorable(json) == storable)
    }
}
