import CommandBusHost
import CommandBusPostgres
import Foundation
import Testing

extension SharedBusTests {
    /// The shared bus keeps a post no host handles, so a client inventing names grew
    /// `bus status`, the dashboard's queue table and `cmdbus_bus_pending` by a line a name
    /// (1,500 names, 1,500 series in every scrape). The deepest queues are shown apart up to
    /// ``CountedName/limit``; the rest come as one `(other)` line that says how many it holds.
    @Test(.timeLimit(.minutes(2)))
    func queuesPastTheLimitOfNamesAreCountedTogether() async throws {
        let database = try await SharedBusDatabase()
        defer { Task { await database.drop() } }
        let connection = try database.migratedConnection()
        func posts(_ name: String, count: Int = 1) -> [BusSubmission] {
            (0..<count).map { _ in
                var submission = BusSubmission(name: name, payload: Data("{}".utf8), metadata: [:])
                submission.failIfUnhandled = false
                return submission
            }
        }
        let invented = (0..<CountedName.limit + 2).flatMap { posts("invented.n\($0)") }
        _ = try BusSubmission.submitPosts(posts("deep.queue", count: 3) + invented, on: connection)

        let status = try BusStatus.read(on: connection)
        guard case .object(let fields) = status, case .array(let rows)? = fields["queues"] else {
            Issue.record("no queues in \(status.text)")
            return
        }
        let queues = rows.compactMap(\.objectValue)
        #expect(queues.count == CountedName.limit + 1, "the limit's names and one for the rest")
        #expect(queues.first { $0["command"] == .string("deep.queue") }?["pending"] == .integer(3), "the deepest queue is kept apart")
        // 1,003 names: the deepest, then the 999 posted first; the last three count together.
        let other = try #require(queues.last)
        #expect(other["command"] == .string(CountedName.other) && other["pending"] == .integer(3) && other["commands"] == .integer(3))
        #expect(queues.dropLast().allSatisfy { $0["commands"] == nil && $0["pending"] != nil })

        let text = try await Self.bus(database.url, "bus", "status")
        #expect(text.status == 0, "\(text.stderr)")
        let lines = text.stdout.split(separator: "\n")
        #expect(lines.count == CountedName.limit + 2, "a heading and a line a queue")
        #expect(lines.last?.hasPrefix("  (other) (3 more command names): 3 pending, oldest ") == true, "\(lines.last ?? "")")
    }

    /// A command due later (`run --delay`, a retry's backoff) was counted as pending and aged
    /// from when it was posted: an hour's delay read `1 pending, oldest 3600 s` an hour later,
    /// and `cmdbus_bus_oldest_pending_seconds` with it, though nothing was late. It is counted
    /// as scheduled, with when the next is due; pending is what is due and waits for a host.
    @Test(.timeLimit(.minutes(2)))
    func commandsDueLaterAreScheduledNotPending() async throws {
        let database = try await SharedBusDatabase()
        defer { Task { await database.drop() } }
        let connection = try database.migratedConnection()
        func post(_ name: String, delay: Duration = .zero) -> BusSubmission {
            var submission = BusSubmission(name: name, payload: Data("{}".utf8), metadata: [:])
            submission.failIfUnhandled = false
            submission.delay = delay
            return submission
        }
        _ = try BusSubmission.submitPosts([
            post("mixed"), post("mixed"), post("mixed", delay: .seconds(600)), post("later", delay: .seconds(7200)), post("later", delay: .seconds(90)),
        ], on: connection)
        // The due ones were posted now: backdate them, as if they had waited ten seconds.
        _ = try connection.execute("UPDATE cmdbus.commands SET run_at = run_at - interval '10 seconds', created_at = created_at - interval '10 seconds' WHERE run_at <= now()")

        let queues = try #require(try BusStatus.read(on: connection).objectValue?["queues"]?.arrayValue?.compactMap(\.objectValue))
        let mixed = try #require(queues.first { $0["command"] == .string("mixed") })
        #expect(mixed["pending"] == .integer(2) && mixed["scheduled"] == .integer(1))
        #expect(mixed["oldestPendingSeconds"]?.doubleValue.map { $0 >= 10 && $0 < 60 } == true, "\(mixed)")
        #expect(mixed["nextDueSeconds"]?.doubleValue.map { $0 > 500 && $0 <= 600 } == true, "\(mixed)")
        let later = try #require(queues.first { $0["command"] == .string("later") })
        #expect(later["pending"] == .integer(0) && later["scheduled"] == .integer(2) && later["oldestPendingSeconds"] == .number(0))
        #expect(later["nextDueSeconds"]?.doubleValue.map { $0 > 60 && $0 <= 90 } == true, "the sooner of the two: \(later)")

        let text = try await Self.bus(database.url, "bus", "status")
        let lines = text.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("  mixed: 2 pending, oldest 1") && $0.contains(" s; 1 scheduled, next due in ") && $0.hasSuffix(" min; no live host handles it") }, "\(text.stdout)")
        #expect(lines.contains { $0 == "  later: 2 scheduled, next due in 1 min; no live host handles it" }, "\(text.stdout)")
        #expect(lines.first?.hasSuffix(", 0 live hosts, 0 running, 2 pending, 3 scheduled") == true, "the totals: \(lines.first ?? "")")
    }
}
