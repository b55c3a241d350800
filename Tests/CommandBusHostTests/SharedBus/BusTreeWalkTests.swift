import CommandBus
@testable import CommandBusPostgres
import Foundation
import Testing

extension SharedBusTests {
    /// Cancelling trees and pruning them walk down `parent_id` by its index, whatever plan
    /// PostgreSQL makes: joined as a table, the walk was planned as a read of the whole table
    /// for each level once the trees were many (cancelling 500 took 189 ms on 200,000
    /// commands, where 56 do), and a prune's batch read it twice. Each statement runs here on
    /// 24,000 commands, with the plan made for its parameters and with the one made for any,
    /// and must read no command it does not need by a scan of the table.
    @Test(.timeLimit(.minutes(2)))
    func walkingDownTreesReadsTheirCommandsByIndex() async throws {
        let database = try await SharedBusDatabase()
        defer { Task { await database.drop() } }
        let connection = try database.migratedConnection()
        // 6,000 trees of a root and three subcommands: the first 1,000 waiting, the rest ended two days ago.
        try connection.execute("""
            INSERT INTO cmdbus.commands (id, name, payload, correlation_id, state, finalized_at)
            SELECT gen_random_uuid(), 'a', '\\x7b7d', gen_random_uuid(), CASE WHEN g <= 1000 THEN 'pending' ELSE 'succeeded' END,
                CASE WHEN g > 1000 THEN now() - interval '2 days' END
            FROM generate_series(1, 6000) g
            """)
        try connection.execute("UPDATE cmdbus.commands SET correlation_id = id")
        try connection.execute("""
            INSERT INTO cmdbus.commands (id, name, payload, correlation_id, parent_id, state, finalized_at)
            SELECT gen_random_uuid(), 'b', '\\x7b7d', r.id, r.id, r.state, r.finalized_at FROM cmdbus.commands r, generate_series(1, 3)
            """)
        try connection.execute("VACUUM ANALYZE cmdbus.commands")
        let waiting = try connection.execute("SELECT id FROM cmdbus.commands WHERE parent_id IS NULL AND state = 'pending' LIMIT 500")
            .all.compactMap { $0.uuid("id") }
        let dayAgo = Date().timeIntervalSince1970 - 86_400

        for mode in ["force_custom_plan", "force_generic_plan"] {
            try connection.execute("SET plan_cache_mode = \(mode)")
            for (name, statement, parameters) in [
                ("cancel", BusSQL.cancel, "('{\(waiting.map(\.uuidString).joined(separator: ","))}')"),
                ("prune", BusSQL.prune(counting: false), "(\(dayAgo), '{succeeded}', 0, 1000, false)"),
            ] {
                try connection.execute("BEGIN")
                try connection.execute("PREPARE walk AS " + statement)
                let plan = try connection.execute("EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE walk\(parameters)")
                try connection.execute("ROLLBACK")
                try connection.execute("DEALLOCATE walk")
                let top = try #require(JSONValue.parse(plan[row: 0].text("QUERY PLAN") ?? "")?.arrayValue?.first?.objectValue?["Plan"])
                /// Each scan of a whole table in the plan: the table, the rows it gave and its filter.
                func scans(_ node: JSONValue) -> [String] {
                    let object = node.objectValue ?? [:]
                    let here = object["Node Type"]?.stringValue != "Seq Scan" ? [] : [
                        "\(object["Relation Name"]?.stringValue ?? "?"): \(object["Actual Rows"]?.intValue ?? -1) rows \(object["Filter"]?.stringValue ?? "")",
                    ]
                    return here + (object["Plans"]?.arrayValue ?? []).flatMap(scans)
                }
                #expect(!scans(top).contains { $0.hasPrefix("commands:") }, "\(name) (\(mode)) reads the whole table: \(scans(top))")
                #expect(top.objectValue?["Actual Rows"]?.intValue == 1, "\(name) (\(mode))")
            }
        }
        // What they did, for real: 500 trees cancelled, 1,000 trees pruned.
        #expect(try connection.execute(BusSQL.cancel, [.uuidArray(waiting)])[row: 0].integer("flagged") == 2_000)
        let pruned = try connection.execute(BusSQL.prune(counting: false), [
            .text(String(dayAgo)), .textArray(["succeeded"]), .integer(0), .integer(1_000), .bool(false),
        ])
        #expect(pruned[row: 0].integer("removed") == 4_000)
    }
}
