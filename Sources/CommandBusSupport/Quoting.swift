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

/// `text` with each character that `replacements` names replaced by its replacement: the one
/// loop behind every escaping for a format (HTML, DOT, Mermaid, Prometheus labels).
package func escaping(_ text: String, _ replacements: [Character: String]) -> String {
    var out = ""
    out.reserveCapacity(text.utf8.count)
    for character in text {
        if let replacement = replacements[character] { out += replacement } else { out.append(character) }
    }
    return out
}
