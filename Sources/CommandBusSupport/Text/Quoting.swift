/// A user's text for a one-line message: in quotes, with control characters escaped.
package func quoted(_ text: some StringProtocol) -> String {
    if isPrintableASCII(text) { return "'" + text + "'" }
    var out = "'"
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        case _ where scalar.properties.generalCategory == .control || scalar.properties.generalCategory == .lineSeparator
            || scalar.properties.generalCategory == .paragraphSeparator:
            out += "\\u{\(String(scalar.value, radix: 16))}"
        default: out.unicodeScalars.append(scalar)
        }
    }
    return out + "'"
}

/// A plugin's or user's text for one log line: control characters escaped, so it cannot move the cursor
/// or start a new line in a terminal.
package func quotedLine(_ text: String) -> String {
    if isPrintableASCII(text) { return text }
    let quotedText = quoted(text)
    return String(quotedText.dropFirst().dropLast())
}

/// Printable ASCII (most names and messages) needs no escaping, and no look at Unicode properties.
package func isPrintableASCII(_ text: some StringProtocol) -> Bool {
    text.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F }
}

/// Replaces ASCII characters with the strings a format asks for: the one loop behind every
/// escaping for a format (HTML, DOT, Mermaid, Prometheus labels). Make one per format, once.
///
/// It works on UTF-8 bytes, not on `Character`s. A grapheme cluster can start with a character a
/// format reserves: `"` followed by a combining accent, or `\r\n`, is one `Character` equal to
/// neither `"` nor `\n`, yet its bytes still end an attribute or a line. Bytes below 0x80 never
/// occur inside a multi-byte sequence, so replacing them one by one keeps the rest of the text
/// whole. Text that needs no replacement is returned as it is, without a copy.
package struct ASCIIEscaping: Sendable {
    /// The replacement for each ASCII byte, or `nil` to keep it.
    private let replacements: [[UInt8]?]

    /// An escaping that replaces each key with its value; every key must be ASCII.
    package init(_ replacements: [Unicode.Scalar: String]) {
        var table = [[UInt8]?](repeating: nil, count: 128)
        for (scalar, replacement) in replacements {
            precondition(scalar.isASCII, "ASCIIEscaping replaces ASCII characters only, not \(scalar.escaped(asASCII: true))")
            table[Int(scalar.value)] = Array(replacement.utf8)
        }
        self.replacements = table
    }

    /// `text` with each replaced character replaced.
    package func callAsFunction(_ text: String) -> String {
        var text = text
        return text.withUTF8 { bytes in
            guard let first = bytes.firstIndex(where: { $0 < 0x80 && replacements[Int($0)] != nil }) else { return nil }
            var out: [UInt8] = []
            out.reserveCapacity(bytes.count + 16)
            out.append(contentsOf: bytes[..<first])
            for byte in bytes[first...] {
                if byte < 0x80, let replacement = replacements[Int(byte)] { out.append(contentsOf: replacement) } else { out.append(byte) }
            }
            return String(decoding: out, as: UTF8.self)
        } ?? text
    }
}

extension Unicode.Scalar {
    /// Whether the scalar is one a name may not hold: a control character, or an invisible one
    /// (a format character, a line or paragraph separator). Plugin, command and version names
    /// are refused with one, as a plugin declares them and as a client gives them.
    package var isUnfitForAName: Bool {
        switch properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator: true
        default: false
        }
    }
}
