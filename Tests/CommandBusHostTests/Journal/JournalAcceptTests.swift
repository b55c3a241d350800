import CommandBus
import CommandBusSQLite
import Foundation
import Testing

/// A command's write-ahead is bound from one buffer its caller fills, without SQLite copying the
/// values: every field must come back from the file as it went in, whatever the envelope's shape.
struct JournalAcceptTests {
    /// Envelopes of every shape a row can take: a root or a child, its own tree or another's,
    /// with metadata or without, short and long names, odd payload and result bytes.
    static func envelopes() -> [(envelope: CommandEnvelope, payload: Data, result: Data?)] {
        let root = CommandEnvelope(commandName: "a")
        let child = CommandEnvelope(commandName: "order.place", parent: root, metadata: ["tenant": "ünïcode ✓", "trace": ""])
        var foreign = CommandEnvelope(commandName: String(repeating: "long.name.", count: 30))
        foreign.correlationID = UUID()
        return [
            (root, Data(#"{}"#.utf8), Data("1".utf8)),
            (child, Data(#"{"text":"nul\u0000inside","n":[1,2,3]}"#.utf8), nil),
            (foreign, Data(repeating: 0x7B, count: 70_000), Data([0x00, 0xFF, 0x22])),
            (CommandEnvelope(commandName: "ç"), Data([0x00]), Data()),
        ]
    }

    @Test func everyFieldOfTheWriteAheadComesBackAsItWentIn() async throws {
        let work = try TemporaryDirectory("cmdbus-accept")
        defer { work.remove() }
        let journal = try SQLiteJournal(path: work.file("journal.sqlite").path)
        let cases = Self.envelopes()
        for (index, (envelope, payload, result)) in cases.enumerated() {
            try await journal.accept(envelope, payload: payload)
            // Every other command ends; the rest stay pending, read from the accept alone.
            if index.isMultiple(of: 2) {
                try await journal.update(JournalUpdate(id: envelope.id, state: .succeeded, attempts: 1, result: result), waitUntilDurable: true)
            }
        }
        // Read back through a second connection, so nothing comes from the writer's memory.
        let reader = try SQLiteJournal(path: work.file("journal.sqlite").path, readOnly: true)
        for (index, (envelope, payload, result)) in cases.enumerated() {
            let record = try #require(try await reader.record(envelope.id))
            #expect(record.envelope.commandName == envelope.commandName)
            #expect(record.envelope.parentID == envelope.parentID)
            #expect(record.envelope.correlationID == envelope.correlationID)
            #expect(record.envelope.metadata == envelope.metadata)
            #expect(record.payload == payload)
            #expect(record.state == (index.isMultiple(of: 2) ? .succeeded : .pending))
            if index.isMultiple(of: 2) { #expect(record.result == result) }
        }
    }
}
