import CommandBusSupport
import Synchronization

/// Prints a command's events on stderr while it runs, the same for a local and a `--connect` run:
/// emitted events and logs as lines, the top-level command's progress as a live line when
/// stderr is a terminal.
final class EventPrinter: Sendable {
    private let console: Console
    private let showingProgress = Mutex(false)

    init(console: Console) {
        self.console = console
    }

    /// Prints one event, in the JSON form every `BusClient` hands out.
    func print(_ event: [String: JSONValue]) {
        let name = event["command"]?.stringValue ?? "?"
        showingProgress.withLock { showing in
            switch event["kind"]?.stringValue {
            case "emitted":
                if showing { console.status("") }
                console.err("event \(name): \(event["name"]?.stringValue ?? "") \((event["payload"] ?? .null).text)")
            case "log":
                if showing { console.status("") }
                console.err("\(event["level"]?.stringValue ?? "info") \(name): \(event["message"]?.stringValue ?? "")")
            case "progress" where console.stderrIsTerminal && event["parentId"] == nil:
                console.status("\(name): \(event["completed"]?.text ?? "?")/\(event["total"]?.text ?? "?") subcommands done")
                showing = true
            default:
                break
            }
        }
    }

    /// Clears a progress line left on the terminal.
    func finish() {
        showingProgress.withLock { showing in
            if showing { console.status("") }
            showing = false
        }
    }
}
