import CommandBus
import CommandBusLoading
import CommandBusSupport
import Synchronization

/// Prints a command's events on stderr while it runs, the same for a local and a `--connect` run:
/// emitted events and logs as lines, the top-level command's progress as a live line when
/// stderr is a terminal.
final class EventPrinter: Sendable {
    private let console: Console
    private let json: Bool
    private let verbose: Bool
    private let showingProgress = Mutex(false)
    private let root = Mutex<String?>(nil)

    /// A printer on `console`'s stderr; with `json`, each event is one NDJSON line (the form every
    /// `BusClient` hands out), for `--json` runs that a program reads; with `verbose`, the
    /// command's id as soon as the bus accepts it.
    init(console: Console, json: Bool = false, verbose: Bool = false) {
        self.console = console
        self.json = json
        self.verbose = verbose
    }

    /// The id of the command the run sent, once an event has named it.
    var commandID: String? { root.withLock { $0 } }

    /// Prints one event, in the JSON form every `BusClient` hands out.
    func print(_ event: [String: JSONValue]) {
        if event["parentId"] == nil, let id = event["commandId"]?.stringValue {
            let first = root.withLock { root -> Bool in
                defer { if root == nil { root = id } }
                return root == nil
            }
            if first && verbose {
                let name = event["command"]?.stringValue ?? "?"
                if json {
                    console.err(JSONValue.object(["accepted": .object(["commandId": .string(id), "command": .string(name)])]).text)
                } else {
                    console.err("cmdbus: \(quotedLine(name)) is command \(id) (cancel it with Ctrl-C, or look it up with 'cmdbus journal show \(id)')")
                }
            }
        }
        if json {
            if ["emitted", "log", "progress"].contains(event["kind"]?.stringValue ?? "") { console.err(JSONValue.object(["event": .object(event)]).text) }
            return
        }
        let name = event["command"]?.stringValue ?? "?"
        showingProgress.withLock { showing in
            switch event["kind"]?.stringValue {
            case "emitted":
                if showing { console.status("") }
                console.err("event \(quotedLine(name)): \(quotedLine(event["name"]?.stringValue ?? "")) \((event["payload"] ?? .null).text)")
            case "log":
                if showing { console.status("") }
                // A plugin's text, escaped: it cannot move the cursor or forge a line of its own.
                console.err("\(quotedLine(event["level"]?.stringValue ?? "info")) \(quotedLine(name)): \(quotedLine(event["message"]?.stringValue ?? ""))")
            case "progress" where console.stderrIsTerminal && event["parentId"] == nil:
                let done = event["completed"]?.intValue ?? 0, total = event["total"]?.intValue ?? 0
                let percent = total > 0 ? " (\(done * 100 / total)%)" : ""
                console.status("\(quotedLine(name)): \(done)/\(total)\(percent)")
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
