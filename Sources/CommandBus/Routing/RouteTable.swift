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
/// Routing is one hash lookup, however many names are registered.
struct RouteTable: Sendable {
    private var entries: [String: [RouteEntry]] = [:]

    func handlers(for name: String) -> [RouteEntry] {
        entries[name] ?? []
    }

    mutating func insert(_ entry: RouteEntry, for name: String) {
        var list = entries[name] ?? []
        // Registration ids grow, so inserting after every entry of equal or higher priority keeps ties in order.
        let index = list.firstIndex { $0.priority < entry.priority } ?? list.endIndex
        list.insert(entry, at: index)
        entries[name] = list
    }

    mutating func remove(registrationID: Int, for name: String) {
        guard var list = entries[name] else { return }
        list.removeAll { $0.registrationID == registrationID }
        entries[name] = list.isEmpty ? nil : list
    }

    var commandNames: [String] { Array(entries.keys) }
}
