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
        let connection = try PGConnection(url: database.url)
        try BusSchema.migrate(connection)
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
}
