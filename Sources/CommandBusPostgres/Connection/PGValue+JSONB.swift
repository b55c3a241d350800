extension PGValue {
    /// JSON text for a `jsonb` parameter, as ``jsonbStorable(_:)`` makes it.
    package static func jsonb(_ json: String) -> PGValue { .text(jsonbStorable(json)) }

    /// `json` with each `\u0000` escape written `\ufffd`, the replacement character. `jsonb`
    /// keeps no NUL character and refuses the escape, and a statement with one in it is refused
    /// whole: an event a plugin emitted with a NUL in its payload held up every ending of its
    /// host's behind it, retried for ever. A `\\u0000` (the text `\u0000`) is left as it is.
    package static func jsonbStorable(_ json: String) -> String {
        // Nearly every text has none: one look for the digits, and no copy.
        guard json.utf8.count >= 6, json.contains("u0000") else { return json }
        var bytes = Array(json.utf8)
        var index = 0
        while index + 5 < bytes.count {
            guard bytes[index] == UInt8(ascii: "\\") else {
                index += 1
                continue
            }
            // An escape: the backslash and what it escapes (a second backslash, for `\\`).
            if bytes[index + 1] == UInt8(ascii: "u"), bytes[(index + 2)..<(index + 6)].allSatisfy({ $0 == UInt8(ascii: "0") }) {
                bytes.replaceSubrange((index + 2)..<(index + 6), with: Array("fffd".utf8))
            }
            index += 2
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
