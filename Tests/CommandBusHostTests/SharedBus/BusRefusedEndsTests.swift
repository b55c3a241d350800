@testable import CommandBusPostgres
import CommandBus
import CommandBusSupport
import Foundation
import Synchronization
import Testing

/// A host's ends and events in arrays `jsonb` can hold, and a batch the bus refuses for what it
/// holds written one at a time, so one bad end no longer holds up every end behind it.
struct BusRefusedEndsTests {
    /// Arrays keep the items' order, at most `count` items and `bytes` bytes each, and an item
    /// larger than `bytes` alone.
    @Test func itemsGoInArraysOfBoundedCountAndSize() {
        let items = (0..<7).map { JSONValue.string(String(repeating: "x", count: $0 == 4 ? 100 : 8)) }
        let arrays = BusSQL.arrays(of: items, count: 3, bytes: 30)
        #expect(arrays.map { JSONValue.parse($0)?.arrayValue?.count } == [2, 2, 1, 2])
        #expect(arrays.flatMap { JSONValue.parse($0)?.arrayValue ?? [] } == items)
        #expect(arrays.allSatisfy { $0.utf8.count <= 30 || JSONValue.parse($0)?.arrayValue?.count == 1 })
        #expect(BusSQL.arrays(of: items, count: 500).count == 1)
        #expect(BusSQL.arrays(of: [], count: 500).isEmpty)
    }

    /// Found by hand: 23 commands whose results were 12 MiB each ended in one batch, whose array
    /// (256 MiB in base64) PostgreSQL refused ("total size of jsonb array elements exceeds the
    /// maximum"); the finisher sent it again for ever, and nothing of that host ended again.
    /// Now a refused batch goes one at a time: an end the bus refuses ends as a failure that
    /// says why, and the rest are written.
    @Test(.timeLimit(.minutes(2)), .enabled(if: SharedBusDatabase.isAvailable, "needs the PostgreSQL that scripts/test.sh starts"))
    func anEndTheBusRefusesEndsAsAFailureAndTheRestAreWritten() async throws {
        let database = try await SharedBusDatabase()
        defer { Task { await database.drop() } }
        let connection = try database.migratedConnection()
        let logged = Mutex<[String]>([])
        let host = BusHost(
            settings: .init(url: database.url), bus: CommandBus(), offer: .init(commands: ["a"], catalog: .object([:])),
            log: { _, message in logged.withLock { $0.append(message) } }
        )
        try connection.insertHost(host.id, handling: ["a"])
        let good = try connection.insertRunning(on: host.id, askedToStop: false)
        let refused = try connection.insertRunning(on: host.id, askedToStop: false)
        // A retry too far off for a timestamp: the bus refuses it (22008), as it refused the large batch (54000).
        let batch: [BusHost.Finish] = [
            .complete(id: good, attempt: 1, state: .succeeded, result: Data("{\"ok\":true}".utf8), code: nil, message: nil, retryAfter: nil),
            .complete(id: refused, attempt: 1, state: .failed, result: nil, code: "handlerFailed", message: "later", retryAfter: .seconds(10_000_000_000_000)),
        ]
        do {
            try host.write(batch, on: connection)
            Issue.record("the bus took a retry 300,000 years off")
        } catch {
            #expect(error.refusesTheData, "\(error.message)")
        }

        let session = PGSession(url: database.url)
        host.writeApart(batch, events: [.object(["command": .string(good.uuidString), "correlation": .string(good.uuidString), "event": .object([:])])], on: session)
        let rows = try connection.execute("SELECT id, state, error_message FROM cmdbus.commands ORDER BY state DESC")
        let states = Dictionary(uniqueKeysWithValues: rows.all.compactMap { row in row.uuid("id").map { ($0, (row.text("state"), row.text("error_message"))) } })
        #expect(states[good]?.0 == "succeeded")
        #expect(states[refused]?.0 == "failed")
        #expect(states[refused]?.1?.hasPrefix("the shared bus refused its outcome (") == true, "\(String(describing: states[refused]))")
        #expect(try connection.execute("SELECT count(*) AS n FROM cmdbus.events").all.first?.integer("n") == 1, "the event is written")
        #expect(logged.withLock { $0 }.contains { $0.hasPrefix("\(refused) failed: the bus refused its outcome") }, "\(logged.withLock { $0 })")
    }
}
