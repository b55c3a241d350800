import CommandBusSupport

/// Why `name`, typed by a person as a command name (`cmdbus bus pause`, the dashboard's queue
/// buttons), cannot be one: it is empty or holds a control character. `nil` when it can be.
package func commandNameProblem(_ name: String) -> String? {
    guard name.isEmpty || name.unicodeScalars.contains(where: { $0.value < 0x20 }) else { return nil }
    return "\(quoted(name)) is not a command name: it is empty or holds a control character"
}
