/// One registered handler in the route table.
final class RouteEntry: Sendable {
    let registrationID: Int
    let priority: Int
    let box: any HandlerBox
    let limiter: ConcurrencyLimiter?

    init(registrationID: Int, priority: Int, box: any HandlerBox, limiter: ConcurrencyLimiter?) {
        self.registrationID = registrationID
        self.priority = priority
        self.box = box
        self.limiter = limiter
    }
}

/// Handlers by command name, each list kept in chain-of-responsibility order:
/// higher priority first, then earlier registration first.
///
/// Routing is one hash lookup, however many names are registered, and none when the name is
/// the one looked up last: a bus mostly sees runs of one command, and comparing two names
/// (equal short names are equal words) costs a few instructions where hashing one costs about 140.
struct RouteTable: Sendable {
    private var entries: [String: [RouteEntry]] = [:]
    /// The name looked up last and its handlers; cleared when a handler comes or goes.
    private var lastLookup: (name: String, handlers: [RouteEntry])?

    mutating func handlers(for name: String) -> [RouteEntry] {
        if let lastLookup, lastLookup.name == name { return lastLookup.handlers }
        let handlers = entries[name] ?? []
        lastLookup = (name, handlers)
        return handlers
    }

    mutating func insert(_ entry: RouteEntry, for name: String) {
        lastLookup = nil
        var list = entries[name] ?? []
        // Registration ids grow, so inserting after every entry of equal or higher priority keeps ties in order.
        let index = list.firstIndex { $0.priority < entry.priority } ?? list.endIndex
        list.insert(entry, at: index)
        entries[name] = list
    }

    mutating func remove(registrationID: Int, for name: String) {
        lastLookup = nil
        guard var list = entries[name] else { return }
        list.removeAll { $0.registrationID == registrationID }
        entries[name] = list.isEmpty ? nil : list
    }

    var commandNames: [String] { Array(entries.keys) }
}
