import CommandBusPlugin
import Synchronization

/// An event-sourced example: the counters exist only in the journal.
///
/// `counter.add {"counter": "a", "by": 1}` changes a counter; its inverse adds `-by`, so
/// `cmdbus journal undo` can take it back. The host replays every succeeded `counter.add`
/// from the journal when it starts (`replaysOnStart`), which rebuilds the totals in memory;
/// `counter.get {"counter": "a"}` reads them and is not itself journaled.
struct Add: ReversiblePluginCommand {
    typealias Result = Total
    static let name = "counter.add"
    var counter: String
    var by: Int

    func inverse() -> Add { Add(counter: counter, by: -by) }
}

struct Get: PluginCommand {
    typealias Result = Total
    static let name = "counter.get"
    var counter: String
}

struct Total: Codable, Sendable {
    var counter: String
    var value: Int
}

/// The in-memory projection of the log: every counter's total.
final class Counters: Sendable {
    private let totals = Mutex<[String: Int]>([:])

    func add(_ amount: Int, to counter: String) -> Int {
        totals.withLock { totals in
            totals[counter, default: 0] += amount
            return totals[counter]!
        }
    }

    func value(of counter: String) -> Int { totals.withLock { $0[counter] ?? 0 } }
}

struct AddHandler: PluginHandler {
    let counters: Counters
    var replaysOnStart: Bool { true }

    func canHandle(_ command: Add) -> Bool { !command.counter.isEmpty }

    func handle(_ command: Add, context: PluginContext) async throws -> Total {
        Total(counter: command.counter, value: counters.add(command.by, to: command.counter))
    }
}

struct GetHandler: PluginHandler {
    let counters: Counters
    var isJournaled: Bool { false }

    func handle(_ command: Get, context: PluginContext) async throws -> Total {
        Total(counter: command.counter, value: counters.value(of: command.counter))
    }
}

/// The plugin's entry point.
@_cdecl("cmdbus_plugin_v1")
public func cmdbusPluginV1() -> UnsafeRawPointer {
    let counters = Counters()
    return Plugin(name: "counter", version: "1.0.0", handlers: [AddHandler(counters: counters), GetHandler(counters: counters)]).export()
}
