/// A count with its noun in the right number, for messages: `counted(1, "plugin")` is
/// `1 plugin`, `counted(3, "entry", plural: "entries")` is `3 entries`.
package func counted(_ count: Int, _ noun: String, plural: String? = nil) -> String {
    "\(count) \(count == 1 ? noun : plural ?? noun + "s")"
}

/// `items` for a line: the first `limit` of them, then how many more (`a, b, c and 2 more`).
package func firstFew(_ items: [String], limit: Int) -> String {
    let shown = items.prefix(limit).joined(separator: ", ")
    return items.count > limit ? "\(shown) and \(items.count - limit) more" : shown
}
