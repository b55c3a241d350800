import CommandBus
@testable import CommandBusPostgres
import Foundation
import Testing

extension SharedBusTests {
    /// A host's claim is planned once for its connection (``PGConnection/Planning/once``): left
    /// to PostgreSQL, it was planned anew at every claim, which took longer than the claim ran
    /// (0.3 to 0.45 ms of planning, 0.1 to 0.2 of running, every command), as the one plan's
    /// estimate looked dearer than the plans made for the names given. Each connection claims
    /// eight times; the server's count of its plans says how each was planned. The first half
    /// shows why the setting is needed: should a PostgreSQL choose one plan by itself, it fails,
    /// and the setting may go.
    ///
    /// The one plan, made here on a table of sixteen commands, finds the commands it claims by
    /// an index, as on a table of millions: made once, a plan outlives the table's size when it
    /// was made, and this one read the whole table to join the commands it picked (4 ms a
    /// claim once the table had 8,000).
    @Test(.timeLimit(.minutes(2)))
    func aHostsClaimIsPlannedOnceForItsConnection() async throws {
        let database = try await SharedBusDatabase()
        defer { Task { await database.drop() } }
        let host = UUID()
        try database.migratedConnection().insertHost(host, handling: ["a"])
        try await database.insertPending(16, named: "a", payload: "{}")

        func plans(_ planning: PGConnection.Planning) throws -> (custom: Int64, generic: Int64) {
            let connection = try PGConnection(url: database.url, planning: planning)
            for _ in 0..<8 {
                let claimed = try connection.execute(BusSQL.claim, [.textArray(["a"]), .uuid(host), .integer(1), .text("test"), .integerArray([1])])
                #expect(claimed.count == 1, "each claim takes one of the pending commands")
            }
            let counts = try connection.execute(
                "SELECT name, custom_plans, generic_plans FROM pg_prepared_statements WHERE statement = $1", [.text(BusSQL.claim)]
            )
            try #require(counts.count == 1, "the claim is a prepared statement of its connection")
            if planning == .once, let name = counts[row: 0].text("name") {
                let plan = try connection.execute("EXPLAIN EXECUTE \(name)('{a}', '\(host)', 1, 'test', '{1}')").all.compactMap { $0.text("QUERY PLAN") }
                #expect(!plan.isEmpty && !plan.contains { $0.contains("Seq Scan on commands") }, "the claim's one plan reads no whole table:\n\(plan.joined(separator: "\n"))")
            }
            return (counts[row: 0].integer("custom_plans") ?? -1, counts[row: 0].integer("generic_plans") ?? -1)
        }
        let chosenByPostgreSQL = try plans(.forEachRun)
        #expect(chosenByPostgreSQL.custom == 8, "left to PostgreSQL, the claim is planned for each run: \(chosenByPostgreSQL)")
        let once = try plans(.once)
        #expect(once.custom == 0 && once.generic == 8, "planned once, every claim runs the one plan: \(once)")
    }
}
