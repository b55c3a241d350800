import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Prints a command's events on stderr while it runs: emitted events and logs as lines,
/// subcommand progress as a live line when stderr is a terminal.
struct EventPrinter: Sendable {
    private let task: Task<Void, Never>

    init(console: Console, stream: AsyncStream<CommandEvent>) {
        task = Task {
            var showingProgress = false
            for await event in stream {
                let name = event.envelope.commandName
                switch event.kind {
                case .emitted(let eventName, let payload):
                    if showingProgress { console.status("") }
                    console.err("event \(name): \(eventName) \(String(decoding: payload, as: UTF8.self))")
                case .log(let level, let message):
                    if showingProgress { console.status("") }
                    console.err("\(level.rawValue) \(name): \(message)")
                case .progress(let completed, let total) where console.stderrIsTerminal && event.envelope.parentID == nil:
                    console.status("\(name): \(completed)/\(total) subcommands done")
                    showingProgress = true
                default:
                    break
                }
            }
            if showingProgress { console.status("") }
        }
    }

    /// Prints an event a server forwarded, as a local run prints it (progress lines aside).
    static func printRemote(_ event: [String: JSONValue], console: Console) {
        let name = event["command"]?.stringValue ?? "?"
        switch event["kind"]?.stringValue {
        case "emitted":
            console.err("event \(name): \(event["name"]?.stringValue ?? "") \((event["payload"] ?? .null).text)")
        case "log":
            console.err("\(event["level"]?.stringValue ?? "info") \(name): \(event["message"]?.stringValue ?? "")")
        default:
            break
        }
    }

    /// Waits until every event already published has been printed (call after ending the streams).
    func finish() async {
        await task.value
    }
}
