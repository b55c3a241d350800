import CommandBus
@testable import CommandBusPostgres
import Foundation
import Testing

extension SharedBusTests {
    /// The claim, run as a host runs it, against rows set up by hand: across the host's names,
    /// the highest priority first (a probe before any command), then the oldest due; nothing due
    /// later, declined by this host or of a paused name (but a paused name's probe); at most as
    /// many as asked, and of each name as many as its room (a name with none: its probes). It
    /// reads each name down the claim index and merges them, where it used to sort every pending row.
    @Test(.timeLimit(.minutes(2)))
    func aClaimTakesTheHighestPriorityThenTheOldestAcrossNames() async throws {
        let database = try await SharedBusDatabase()
        defer { Task { await database.drop() } }
        let connection = try database.migratedConnection()
        let host = UUID(), other = UUID()
        try connection.insertHost(host, handling: ["a", "b", "c"])
        let probe = BusSubmission.probePriority
        // (label, name, priority, seconds ago it was due, kind, declined by this host)
        let rows: [(String, String, Int, Int, String, Bool)] = [
            ("a-old", "a", 0, 30, "command", false), ("a-new", "a", 0, 10, "command", false), ("a-urgent", "a", 5, 1, "command", false),
            ("b-older", "b", 0, 40, "command", false), ("b-urgent", "b", 5, 2, "command", false), ("b-later", "b", 9, -60, "command", false),
            ("b-declined", "b", 9, 50, "command", true), ("c-paused", "c", 9, 50, "command", false), ("c-probe", "c", probe, 50, "probe", false),
            ("d-elsewhere", "d", 9, 50, "command", false), ("a-probe", "a", probe, 5, "probe", false),
        ]
        for (label, name, priority, ago, kind, declined) in rows {
            let id = UUID()
            try connection.execute("""
                INSERT INTO cmdbus.commands (id, name, payload, correlation_id, state, priority, run_at, kind, declined_by, metadata)
                VALUES ($1, $2, '\\x7b7d', $1, 'pending', $3::int4, now() - $4::int8 * interval '1 second', $5, $6::uuid[], $7::jsonb)
                """, [.uuid(id), .text(name), .integer(priority), .integer(ago), .text(kind), .text(declined ? "{\(host)}" : "{\(other)}"), .text(#"{"label":"\#(label)"}"#)])
        }
        try connection.execute("INSERT INTO cmdbus.paused (name) VALUES ('c')")
        // Which rows, not in which order: the host starts them all at once.
        func claim(_ count: Int, rooms: [Int] = [10, 10, 10], locked: [String] = []) throws -> Set<String> {
            var parameters: [PGValue?] = [
                .textArray(["a", "b", "c"]), .uuid(host), .integer(count), .text("h:1"), .integerArray(rooms.map(Optional.some)),
            ]
            if !locked.isEmpty { parameters.append(.textArray(locked)) }
            let claimed = try connection.execute(locked.isEmpty ? BusSQL.claim : BusSQL.claimLimited, parameters)
            return Set(claimed.all.compactMap { $0.text("metadata").flatMap { JSONValue.parse($0)?.objectValue?["label"]?.stringValue } })
        }
        // The probes first (a's though a has no room), then priority 5; a's commands wait.
        #expect(try claim(3, rooms: [0, 10, 10]) == ["a-probe", "c-probe", "b-urgent"])
        #expect(try claim(10, rooms: [1, 10, 10]) == ["a-urgent", "b-older"], "one of a, and what is left of b that is due and not declined")
        #expect(try claim(10) == ["a-old", "a-new"])
        #expect(try claim(10).isEmpty)

        // Limited to 4 across the bus, with 3 of a running: none for a host that has not taken
        // the name's lock (it has not heard of the limit), and then one.
        try connection.execute("INSERT INTO cmdbus.limits (name, max_running) VALUES ('a', 4)")
        for label in ["a-limited-1", "a-limited-2"] {
            try connection.execute("""
                INSERT INTO cmdbus.commands (id, name, payload, correlation_id, state, metadata)
                VALUES ($1, 'a', '\\x7b7d', $1, 'pending', $2::jsonb)
                """, [.uuid(UUID()), .text(#"{"label":"\#(label)"}"#)])
        }
        #expect(try claim(10).isEmpty)
        #expect(try claim(10, locked: ["a"]) == ["a-limited-1"])
        #expect(try claim(10, locked: ["a"]).isEmpty, "four run")
        #expect(try connection.execute("SELECT count(*)::int8 AS n FROM cmdbus.commands WHERE state = 'pending'")[row: 0].integer("n") == 5, "b-later, b-declined, c-paused, d-elsewhere, a-limited-2")
    }

    /// A claim reads a name's due commands and stops at the first due later: with 30,000 of a
    /// name posted for tomorrow (at two priorities) beside its three due, a claim reads as many
    /// pages as one of a name with only three due, where reading down the name across its
    /// priorities read on through the 30,000 (200 pages more) on each claim. Pages, not time:
    /// the machine's speed does not change them.
    @Test(.timeLimit(.minutes(2)))
    func aClaimReadsNoCommandDueLater() async throws {
        let database = try await SharedBusDatabase()
        defer { Task { await database.drop() } }
        let connection = try database.migratedConnection()
        let host = UUID()
        try connection.insertHost(host, handling: ["a", "b"])
        try connection.execute("""
            INSERT INTO cmdbus.commands (id, name, payload, correlation_id, state, priority, run_at)
            SELECT gen_random_uuid(), 'a', '\\x7b7d', gen_random_uuid(), 'pending', g % 2, now() + interval '1 day' + g * interval '1 second'
            FROM generate_series(1, 30000) g
            """)
        try connection.execute("""
            INSERT INTO cmdbus.commands (id, name, payload, correlation_id, state, priority, run_at)
            SELECT gen_random_uuid(), name, '\\x7b7d', gen_random_uuid(), 'pending', 0, now() - g * interval '1 second'
            FROM generate_series(1, 3) g, unnest(ARRAY['a', 'b']) name
            """)
        try connection.execute("VACUUM ANALYZE cmdbus.commands")
        func pagesToClaim(_ name: String) throws -> Int {
            let plan = try connection.execute(
                "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + BusSQL.claim,
                [.textArray([name]), .uuid(host), .integer(64), .text("h:1"), .integerArray([64])]
            )
            let top = try #require(JSONValue.parse(plan[row: 0].text("QUERY PLAN") ?? "")?.arrayValue?.first?.objectValue?["Plan"]?.objectValue)
            #expect(top["Actual Rows"]?.intValue == 3, "\(name)'s three due")
            return (top["Shared Hit Blocks"]?.intValue ?? 0) + (top["Shared Read Blocks"]?.intValue ?? 0)
        }
        let alone = try pagesToClaim("b"), besideLater = try pagesToClaim("a")
        #expect(besideLater - alone < 15, "a claim read \(besideLater) pages beside 30,000 due later, \(alone) with none: it read on past the due")
    }

    /// Every connection of the bus's has JIT compilation off: on a table of millions the
    /// planner's estimate of a claim crosses `jit_above_cost`, and compiling it cost most of
    /// the claim (35 of 46 ms).
    @Test(.timeLimit(.minutes(1)))
    func aBusConnectionCompilesNoStatement() async throws {
        let database = try await SharedBusDatabase()
        defer { Task { await database.drop() } }
        let connection = try PGConnection(url: database.url)
        #expect(try connection.execute("SHOW jit")[row: 0].text("jit") == "off")
    }
}
