import CommandBusSupport

/// Why `name`, given as a command's name (`cmdbus run`, a request on the socket, a batch line,
/// `cmdbus bus pause`, the dashboard's queue buttons), cannot be one, as a clause that begins
/// "it": empty, longer than ``longestCommandName``, or not one printable word. No plugin can
/// declare such a name, so a command of it could only be journaled as failed. `nil` when it can be.
package func commandNameFault(_ name: String) -> String? {
    if name.isEmpty { return "it is empty" }
    let length = name.utf8.count
    if length > longestCommandName { return "it is \(length) bytes long, and a command's name is at most \(longestCommandName)" }
    // Printable ASCII, nearly every name, needs no look at Unicode properties (a send pays this).
    if name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) { return nil }
    if let control = name.unicodeScalars.first(where: \.isUnfitForAName) {
        return "it holds a control character (U+\(String(control.value, radix: 16, uppercase: true))); a command's name is printable"
    }
    if name.contains(where: \.isWhitespace) { return "it holds whitespace; a command's name is one word" }
    return nil
}

/// ``commandNameFault(_:)`` as a sentence that names `name`: `'' is not a command name: it is empty`.
package func commandNameProblem(_ name: String) -> String? {
    // A long name is shown by its start: its length is the fault, and said.
    let shown = name.utf8.count <= longestCommandName ? quoted(name) : quoted(name.prefix(64)) + "…"
    return commandNameFault(name).map { "\(shown) is not a command name: \($0)" }
}
