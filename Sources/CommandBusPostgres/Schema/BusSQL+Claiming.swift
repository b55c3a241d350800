import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// Claiming: a host takes the due commands of the names it handles, highest priority first.
extension BusSQL {
    /// $1 names, $2 host, $3 how many, $4 host label, $5 how many of each name (its room on this
    /// host). Claims pending commands this host handles and has not declined, highest priority
    /// first, then oldest, and no more of a name than its room; none of a paused name, and none of
    /// a name limited across the bus (``claimLimited`` claims those, under their locks). A `can`'s
    /// probe only asks, so it is taken whatever the name's room, paused or limited: it comes first
    /// in the claim index (``BusSubmission/probePriority``), so a name with no room, paused or
    /// limited reads only the index's first rows for its probes, however many commands wait behind
    /// them. Nothing once another host's rescue has removed this one (it would only run them to
    /// have its results refused).
    ///
    /// Each name is read on its own, down the claim index in its order, and the names' first rows
    /// merged: `name = ANY($1)` over the index cannot give rows in priority order (before
    /// PostgreSQL 17), so it sorted every pending row of the names on each claim (50,000 pending:
    /// 25 ms a claim, where this takes 0.1 to 0.6). Rows a name locked that the merge leaves out
    /// are let go as the statement ends; another host's claim meanwhile skips them.
    ///
    /// A name is read one priority at a time, highest first: within a priority the index runs by
    /// `run_at`, so the read stops at the first command due later. Read across priorities at
    /// once, it went on through every command of the name due later: 100,000 posted with
    /// `--delay` cost each claim of their name 11 ms, and as much more every 100,000, while none
    /// was due (0.2 ms now). Each priority's first command is found by one step down the index
    /// (`level`), and the read of that priority starts at it: the index entries before it are of
    /// commands claimed since the table's last vacuum, hundreds of pages on a busy bus, read
    /// once a claim, not twice.
    static let claim = claimStatement(
        room: "n.room", probesOnly: "EXISTS (SELECT 1 FROM cmdbus.limits l WHERE l.name = n.name) OR n.room <= 0"
    )

    /// ``claim`` for a host that holds the locks of the limited names in $6 (``BusLimit``): of
    /// those, it claims no more than the limits leave room for, beside what runs on every host
    /// and what started there in the rate's period; of a limited name whose lock it does not
    /// hold (it has not heard of the limit yet), none. The commands it claims of a name with a
    /// rate are added to the name's recent starts, in the statement that claims them. Apart so
    /// the common claim is planned without the limits' count (planning it took twice as long:
    /// 0.26 against 0.57 ms a claim).
    ///
    /// Times are the statement's (`statement_timestamp()`), not the transaction's: it began
    /// before the host waited for the locks, and a start stamped then would leave the period
    /// early. Claims of a name take turns under its lock, so each stamps times no earlier than
    /// the last: the starts stay newest first, new ones go in front and the oldest past the
    /// rate fall off the end, with no sort. A name's room under its rate is then read from the
    /// few starts at the end that the claim could take the place of: with room for `m` here (no
    /// more than the rate), the rate leaves `m` less those of the last `m` places still in the
    /// period. (A 10,000
    /// a second rate took 7 ms a claim to sort its starts and 3 to count them; 0.2 ms each now.)
    static let claimLimited = claimStatement(
        room: "m.room", probesOnly: "m.room <= 0",
        joins: """
            LEFT JOIN cmdbus.limits l ON l.name = n.name
            CROSS JOIN LATERAL (
                SELECT CASE
                    WHEN l.name IS NULL THEN n.room
                    WHEN NOT (n.name = ANY($6::text[])) THEN 0
                    ELSE least(n.room,
                        CASE WHEN l.max_running IS NOT NULL THEN l.max_running - (
                            SELECT count(*) FROM cmdbus.commands r WHERE r.state = 'running' AND r.name = n.name AND r.kind = 'command')
                        END,
                        CASE WHEN l.rate_count IS NOT NULL THEN least(n.room, l.rate_count) - (
                            SELECT count(*) FROM unnest(l.recent_starts[l.rate_count - least(n.room, l.rate_count)::int4 + 1:l.rate_count]) s
                            WHERE s > statement_timestamp() - l.rate_period_ms * interval '1 millisecond')
                        END)
                END AS room
            ) m
            """,
        afterClaim: """
            stamped AS (
                UPDATE cmdbus.limits l
                SET recent_starts = (array_fill(statement_timestamp(), ARRAY[k.started]) || l.recent_starts)[1:l.rate_count]
                FROM (SELECT name, count(*)::int4 AS started FROM claimed WHERE kind = 'command' GROUP BY name) k
                WHERE l.name = k.name AND l.rate_count IS NOT NULL
            )
            """
    )

    /// `level`: the first pending command of each priority of the name `name` (an SQL
    /// expression), from the highest down to `lowest` if given, each found by one step down the
    /// claim index (`commands_claim`). The claim and a post's check for a due command read a
    /// name through it one priority at a time: within a priority the index runs by `run_at`, so
    /// a read from its first command stops at the first due later. Evaluated as far as it is read.
    static func priorityLevels(of name: String, atLeast lowest: String? = nil) -> String {
        let bound = lowest.map { " AND priority >= \($0)" } ?? ""
        return """
            WITH RECURSIVE level(priority, run_at, seq) AS (
                (SELECT priority, run_at, seq FROM cmdbus.commands WHERE state = 'pending' AND name = \(name)\(bound)
                 ORDER BY priority DESC, run_at, seq LIMIT 1)
                UNION ALL
                SELECT next.* FROM level CROSS JOIN LATERAL (
                    SELECT priority, run_at, seq FROM cmdbus.commands
                    WHERE state = 'pending' AND name = \(name)\(bound) AND priority < level.priority
                    ORDER BY priority DESC, run_at, seq LIMIT 1
                ) next
            )
            """
    }

    /// The claim, with each name's room (`room`), when a name takes only probes besides a pause
    /// (`probesOnly`), what computes them (`joins`), and what else the statement changes once it
    /// has claimed (`afterClaim`: a query named in a `WITH`, reading the claimed rows as `claimed`).
    private static func claimStatement(room: String, probesOnly: String, joins: String = "", afterClaim: String? = nil) -> String {
        let update = """
            UPDATE cmdbus.commands c
            SET state = 'running', attempt = c.attempt + 1, lease_owner = $2, started_at = statement_timestamp(),
                attempted_by = array_append(c.attempted_by, $4)
            FROM picked WHERE c.id = picked.id
            RETURNING \(commandColumns)
            """
        let claim = afterClaim.map { "claimed AS (\n\(update)\n), \($0)\nSELECT * FROM claimed" } ?? update
        return """
        WITH picked AS MATERIALIZED (
            SELECT c.id FROM unnest($1::text[], $5::int8[]) AS n(name, room)
            \(joins)
            CROSS JOIN LATERAL (
                -- OFFSET 0 keeps this a subquery of its own, worked out once a name: pulled up into
                -- the query, its EXISTS checks were copied to each of the five places that read
                -- `probes_only`, and planned in each (planning the claim took 0.37 ms, 0.29 now).
                SELECT EXISTS (SELECT 1 FROM cmdbus.paused p WHERE p.name = n.name) OR \(probesOnly) AS probes_only OFFSET 0
            ) z
            CROSS JOIN LATERAL (
                SELECT CASE WHEN z.probes_only THEN \(BusSubmission.probePriority) ELSE -2147483648 END AS lowest,
                    CASE WHEN z.probes_only THEN $3::int8 ELSE least(\(room), $3::int8) END AS most
            ) w
            CROSS JOIN LATERAL (
                \(priorityLevels(of: "n.name", atLeast: "w.lowest"))
                SELECT due.* FROM level CROSS JOIN LATERAL (
                    SELECT id, priority, run_at, seq FROM cmdbus.commands
                    WHERE state = 'pending' AND name = n.name AND priority = level.priority AND (run_at, seq) >= (level.run_at, level.seq)
                        AND (NOT z.probes_only OR kind = 'probe')
                        AND run_at <= now() AND NOT ($2::uuid = ANY(declined_by)) AND \(hostStillOnBus)
                    ORDER BY run_at, seq
                    LIMIT w.most
                    FOR UPDATE SKIP LOCKED
                ) due
                LIMIT w.most
            ) c
            ORDER BY c.priority DESC, c.run_at, c.seq
            LIMIT $3::int8
        )\(afterClaim == nil ? "" : ",")
        \(claim)
        """
    }
}
