import CommandBus
import CommandBusHost
import Foundation
import Testing

/// A tree still at work says how long it has run so far, where its line read "running  -", and
/// the dashboard's JSON gives it an `elapsedMs` to draw it to now.
struct CommandTreeTimingTests {
    @Test func aCommandAtWorkSaysHowLongItHasRunSoFar() throws {
        let root = CommandEnvelope(commandName: "import")
        let started = Date.now.addingTimeInterval(-2)
        let records = [
            JournalRecord(sequence: 1, envelope: root, payload: Data("{}".utf8), state: .running, startedAt: started),
            JournalRecord(
                sequence: 2, envelope: CommandEnvelope(commandName: "fetch", parent: root),
                payload: Data("{}".utf8), state: .succeeded, startedAt: started, finishedAt: started.addingTimeInterval(0.25)
            ),
        ]
        let tree = try #require(CommandTree(root: root.id, records: records))
        let lines = tree.text.split(separator: "\n").map(String.init)
        #expect(lines[0].hasPrefix("import  running  2") && lines[0].contains(" ms so far  "), "\(lines[0])")
        #expect(lines[1].hasPrefix("└─ fetch  succeeded  250 ms  at +0 ms"), "\(lines[1])")
        #expect(tree.mermaid.contains("running · 2") && tree.mermaid.contains(" so far"))
        let json: [String: JSONValue] = tree.json().objectValue ?? [:]
        #expect(json["durationMs"] == nil)
        guard case .number(let elapsed)? = json["elapsedMs"] else { Issue.record("no elapsedMs: \(json)"); return }
        #expect(elapsed >= 2_000 && elapsed < 60_000)
    }

    /// Durations to a tenth of a millisecond, a whole number without its ".0": the tree said
    /// "100.0 ms" where the dashboard says "100 ms".
    @Test(arguments: [(0.25, "250 ms"), (0.0025, "2.5 ms"), (0.10004, "100 ms"), (0.00004, "0 ms"), (1.23456, "1234.6 ms")])
    func aDurationIsSaidToATenthWithoutATrailingZero(seconds: Double, said: String) {
        #expect(CommandTree.milliseconds(seconds) == said)
        #expect(CommandTree.milliseconds(nil) == "-")
    }
}
