import CommandBus

/// The name a command is counted under in `status`, the dashboard and `/metrics`.
///
/// Names come from clients, so a flood of invented ones must not grow the counts (and a
/// Prometheus scrape) without bound: a command no handler took is counted under
/// ``noHandler``, and past ``limit`` names a new one is counted under ``other``.
package enum CountedName {
    /// Where commands no handler took are counted.
    package static let noHandler = "(no handler)"
    /// Where names past the limit are counted.
    package static let other = "(other)"
    /// How many names are counted apart.
    package static let limit = 1_000

    /// The name to count a command named `name` under, that ended with `error`, where
    /// `isCounted` says whether a name already has counts and `names` how many do.
    @inline(__always)
    package static func of(_ name: String, error: CommandBusError?, isCounted: (String) -> Bool, names: Int) -> String {
        if error?.code == .noHandler { return noHandler }
        return names < limit || isCounted(name) ? name : other
    }
}
