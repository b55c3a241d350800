import CommandBus
@testable import CommandBusPostgres
import Foundation
import Testing

extension SharedBusTests {
    /// The dead letters, newest first, as the dashboard's page reads them again and again: the
    /// plan PostgreSQL keeps for the statement (a generic one, made for any parameters) reads
    /// the dead letters' index, a few pages, where it read the whole table back to front for
    /// three failed among 20,000 that succeeded.
    @Test(.timeLimit(.minutes(2)))
    func theDeadLettersAreReadFromTheirIndex() async throws {
        let database = try await SharedBusDatabase()
        defer { Task { await database.drop() } }
        let connection = try database.migratedConnection()
        try connection.execute("""
            INSERT INTO cmdbus.commands (id, name, payload, correlation_id, state, finalized_at, error_code)
            SELECT gen_random_uuid(), 'a', '\\x7b7d', gen_random_uuid(),
                CASE WHEN g IN (10, 20, 30) THEN 'failed' WHEN g = 40 THEN 'timedOut' ELSE 'succeeded' END, now(),
                CASE WHEN g IN (10, 20, 30, 40) THEN 'x' END
            FROM generate_series(1, 20000) g
            """)
        try connection.execute("VACUUM ANALYZE cmdbus.commands")
        let query = JournalQuery(states: [.failed, .cancelled, .timedOut], limit: 50, newestFirst: true)
        let (sql, _) = BusJournal.statement(reading: query)
        try connection.execute("SET plan_cache_mode = force_generic_plan")
        try connection.execute("PREPARE dead_letters AS " + sql)
        let plan = try connection.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE dead_letters(NULL, NULL, NULL, 50, NULL, NULL)")
        let top = try #require(JSONValue.parse(plan[row: 0].text("QUERY PLAN") ?? "")?.arrayValue?.first?.objectValue?["Plan"])
        func indexes(_ node: JSONValue) -> [String] {
            let object = node.objectValue ?? [:]
            return (object["Index Name"]?.stringValue.map { [$0] } ?? []) + (object["Plans"]?.arrayValue ?? []).flatMap(indexes)
        }
        let pages = (top.objectValue?["Shared Hit Blocks"]?.intValue ?? 0) + (top.objectValue?["Shared Read Blocks"]?.intValue ?? 0)
        #expect(indexes(top) == ["commands_dead_letters"], "\(indexes(top))")
        #expect(top.objectValue?["Actual Rows"]?.intValue == 4)
        #expect(pages < 20, "the dead letters' read took \(pages) pages")

        // What rows(_:) returns with that statement: the four, newest first; and with a name.
        let journal = try BusJournal(url: database.url)
        #expect(try journal.rows(query).map(\.state) == [.timedOut, .failed, .failed, .failed])
        var named = query
        named.commandName = "b"
        #expect(try journal.rows(named).isEmpty)
        #expect(try journal.rows(JournalQuery(states: [.succeeded], limit: 2)).count == 2)
    }
}
