import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The statements the bus runs, in one place. Every value is a parameter; times are the
/// database's clock (`now()`), never a host's.
enum BusSQL {
    /// $1 command names: wakes the hosts that handle them, to claim at once rather than at their
    /// next poll (names resumed, limits changed, a limited name's command ended).
    static let wakeHosts = "SELECT pg_notify('cmdbus_new', n) FROM unnest($1::text[]) n"

    /// A live host: one whose last heartbeat is within its lease.
    static let liveHost = "h.heartbeat_at > now() - h.lease_ms * interval '1 millisecond'"

    /// A host that may be late rather than gone: its last heartbeat within twice its lease. A
    /// command for a name that only such hosts handle waits for them instead of failing as
    /// unhandled. A heartbeat can come late without the host being gone (its connection killed
    /// and remade on a loaded machine: a CI rehearsal with a 2 s lease saw one of 1,000 sends
    /// fail so), and a host that is gone is rescued after its lease all the same.
    static let lateHost = "h.heartbeat_at > now() - 2 * h.lease_ms * interval '1 millisecond'"

    /// A host that was live shortly before the database last started, while a moment has passed
    /// since: a restart stops every heartbeat, so for a moment afterwards every host looks stale,
    /// and a command submitted then must wait for them rather than fail as unhandled.
    /// - "Shortly before" is the host's lease, or 60 s if that is longer: the database's start
    ///   comes after its shutdown, whose checkpoint can take many seconds, and a CI rehearsal
    ///   under heavy load saw a restart take so long that a 10 s reach missed the host.
    /// - "A moment" is the host's lease, or 10 s if that is longer: the hosts need it to
    ///   reconnect and heartbeat (a CI run saw 22 of 1,000 sends fail as unhandled with a 2 s
    ///   lease and no such moment).
    static let liveWhenDatabaseStarted = """
        (now() < pg_postmaster_start_time() + greatest(h.lease_ms, 10000) * interval '1 millisecond'
            AND h.heartbeat_at > pg_postmaster_start_time() - greatest(h.lease_ms, 60000) * interval '1 millisecond')
        """

    /// The host in parameter $2 is still on the bus: no rescue has removed it. Claims, completions
    /// and declines require it (see ``complete``).
    static let hostStillOnBus = "EXISTS (SELECT 1 FROM cmdbus.hosts h WHERE h.id = $2::uuid)"

    /// Whether a live host, or one that may be late, handles the command name `name` (an SQL
    /// expression): a send of a name none handles fails at once (``submit``, ``submitSubcommands``).
    static func someHostHandles(_ name: String) -> String {
        "EXISTS (SELECT 1 FROM cmdbus.hosts h WHERE (\(lateHost) OR \(liveWhenDatabaseStarted)) AND \(name) = ANY(h.commands))"
    }

    /// The error message of a send of the name `name` (an SQL expression) that no host handles.
    static func noHostHandlesMessage(_ name: String) -> String {
        "'no handler for command ''' || \(name) || ''': no live host on the bus handles it (start a ''cmdbus serve --bus'' whose plugins do)'"
    }

    /// Locks the commands `c` of `rows` (a FROM list and WHERE clause naming them) in id order,
    /// giving their ids: a CTE for a statement that changes many commands, which then changes
    /// only these. Every such statement locks so, and two of them that want some of the same rows
    /// then take them in the same order: one waits for the other. Under `bus cancel --running` a
    /// host's finisher writing a batch of ends and a host's poster cancelling trees each held a
    /// row the other wanted, and PostgreSQL broke the deadlock by failing one (retried; 3 to 8
    /// times in a run of ten such cancels of 3,000 running trees). `FOR NO KEY UPDATE` is the
    /// lock an UPDATE takes.
    ///
    /// The statement then changes each row by its id alone (`FROM held WHERE c.id = held.id`),
    /// with what it needs of the rest (`giving`, columns after `c.id`) taken from here: a row
    /// locked here cannot change before the UPDATE, and with conditions of their own the UPDATE's
    /// joins could be planned as a scan of many rows for each one locked (a batch of 500 ends,
    /// locked so, read 125,000). A host's batch of ends does without (``endsInIDOrder(_:)``).
    static func lockedInIDOrder(_ rows: String, giving columns: String? = nil) -> String {
        "SELECT c.id\(columns.map { ", " + $0 } ?? "") FROM \(rows) ORDER BY c.id FOR NO KEY UPDATE OF c"
    }

    /// The step of a walk down trees of work (a recursive CTE's row `t`): the subcommands of
    /// each command walked to, their `columns` as `c`, looked up by `commands_parent` one
    /// command at a time. Joined as a table, the planner took the walk's rows for ten times the
    /// trees it started from and read the whole table for each level instead: a prune's batch
    /// of a thousand trees read a table of 200,000 commands twice (80 of its 90 ms), and
    /// cancelling 500 trees at once did the same.
    static func subcommandsOfEach(_ columns: String) -> String {
        "LATERAL (SELECT \(columns) FROM cmdbus.commands c WHERE c.parent_id = t.id OFFSET 0) c"
    }

    /// The columns a claimed or read command comes back with.
    static let commandColumns = """
        c.id, c.seq, c.name, c.payload, c.metadata::text AS metadata, c.parent_id, c.correlation_id, c.kind, c.state,
        c.attempt::int8 AS attempt, c.max_attempts::int8 AS max_attempts, c.timeout_ms, c.created_at, c.finalized_at,
        c.cancel_requested, c.result, c.error_code, c.error_message, c.lease_owner, c.undo_of, c.undone_by, c.depth::int8 AS depth,
        array_to_string(c.attempted_by, ',') AS attempted_by
        """

    /// How long commands of a name wait to be claimed before a new one of the name is inserted
    /// without a wake-up for the hosts (``submit``): a backlog, which busy hosts work through.
    static let backlogAge = "100 milliseconds"

    /// $1 id, $2 name, $3 payload, $4 metadata, $5 parent, $6 correlation, $7 idempotency key, $8 kind,
    /// $9 priority, $10 delay (ms), $11 timeout (ms), $12 max attempts, $13 fail at once if no live (or late) host handles it,
    /// $14 depth below the root.
    /// Returns the command's id (the first one's, for a key seen before) and whether it is new.
    /// Submitting the same id again (a retry after a lost answer) inserts nothing.
    static let submit = """
        WITH handled AS (
            SELECT NOT $13::bool OR \(someHostHandles("$2")) AS yes
        ), inserted AS (
            INSERT INTO cmdbus.commands AS c (id, name, payload, metadata, parent_id, correlation_id, idempotency_key, kind,
                priority, state, run_at, timeout_ms, max_attempts, finalized_at, error_code, error_message, depth)
            SELECT $1, $2, $3, $4::jsonb, $5, $6, $7, $8, $9::int4,
                CASE WHEN handled.yes THEN 'pending' ELSE 'failed' END,
                now() + $10::int8 * interval '1 millisecond', $11, $12::int4,
                CASE WHEN handled.yes THEN NULL ELSE now() END,
                CASE WHEN handled.yes THEN NULL ELSE 'noHandler' END,
                CASE WHEN handled.yes THEN NULL ELSE \(noHostHandlesMessage("$2")) END,
                $14::int4
            FROM handled
            ON CONFLICT DO NOTHING
            RETURNING c.id, c.name, c.state
        ), notified AS (
            -- NOTIFY serializes commits, so it is sent only when it can matter: unless commands of
            -- this name have waited to be claimed for \(backlogAge) already. Then the hosts that take
            -- them are all busy, and each claims again as it finishes one, so it finds this one. A
            -- command that is merely ready is not enough: its claim may be committing now, and the
            -- host's next claim not see this row, which is not committed yet; the host then slept
            -- until its poll with this command waiting (1 in 50 of a tree's subcommands waited a
            -- second so). Whether they have: whether the first of the name's commands at some
            -- priority was due that long ago, read one priority at a time (as the claim reads
            -- them), not on through every command of the name due later. The statement does not
            -- see the row it inserts.
            SELECT pg_notify('cmdbus_new', i.name) FROM inserted i
            WHERE i.state = 'pending' AND $10::int8 = 0 AND NOT EXISTS (
                \(priorityLevels(of: "$2"))
                SELECT 1 FROM level WHERE level.run_at <= now() - interval '\(backlogAge)'
            )
        )
        SELECT id, true AS created, (SELECT count(*) FROM notified) AS notified FROM inserted
        UNION ALL
        SELECT c.id, false, 0 FROM cmdbus.commands c
        WHERE (c.id = $1 OR ($7::text IS NOT NULL AND c.idempotency_key = $7)) AND NOT EXISTS (SELECT 1 FROM inserted)
        """

    /// Puts many subcommands on the bus in one statement, as ``submit`` puts one: $1 ids, $2 names,
    /// $3 every payload end to end, $4 metadata (JSON text), $5 parents, $6 correlations, $7 depths,
    /// $8 timeouts (ms, NULL for none), $9 max attempts, $10 each payload's offset in $3, $11 its
    /// length, $12 whether each fails at once (`noHandler`) if no live or late host handles its
    /// name. None has a key or a delay. The hosts of a name are woken once, unless its commands
    /// wait as a backlog (see ``submit``). An id already on the bus is left as it is. Gives how
    /// many were inserted. A host's poster runs it for what its handlers send, where it ran
    /// ``submit`` once per subcommand, and that one statement each was the busiest backend of a
    /// bus running trees of work (30% of a core at 530 trees a second).
    static let submitSubcommands = """
        WITH input AS (
            SELECT * FROM unnest($1::uuid[], $2::text[], $4::text[], $5::uuid[], $6::uuid[], $7::int4[], $8::int8[], $9::int4[],
                $10::int8[], $11::int8[], $12::bool[])
                WITH ORDINALITY AS t(id, name, metadata, parent_id, correlation_id, depth, timeout_ms, max_attempts,
                    payload_at, payload_length, fail_if_unhandled, n)
        ), named AS (
            SELECT n.name, \(someHostHandles("n.name")) AS handled,
                NOT EXISTS (
                    \(priorityLevels(of: "n.name"))
                    SELECT 1 FROM level WHERE level.run_at <= now() - interval '\(backlogAge)'
                ) AS wakes
            FROM (SELECT DISTINCT name FROM input) n
        ), inserted AS (
            INSERT INTO cmdbus.commands AS c (id, name, payload, metadata, parent_id, correlation_id, kind, state, run_at,
                timeout_ms, max_attempts, finalized_at, error_code, error_message, depth)
            SELECT i.id, i.name, substring($3::bytea FROM (i.payload_at + 1)::int4 FOR i.payload_length::int4), i.metadata::jsonb,
                i.parent_id, i.correlation_id, 'command',
                CASE WHEN m.handled OR NOT i.fail_if_unhandled THEN 'pending' ELSE 'failed' END, now(), i.timeout_ms, i.max_attempts,
                CASE WHEN m.handled OR NOT i.fail_if_unhandled THEN NULL ELSE now() END,
                CASE WHEN m.handled OR NOT i.fail_if_unhandled THEN NULL ELSE 'noHandler' END,
                CASE WHEN m.handled OR NOT i.fail_if_unhandled THEN NULL ELSE \(noHostHandlesMessage("i.name")) END,
                i.depth
            FROM input i JOIN named m ON m.name = i.name ORDER BY i.n
            ON CONFLICT DO NOTHING
            RETURNING c.name, c.state
        ), notified AS (
            SELECT pg_notify('cmdbus_new', m.name) FROM named m
            WHERE m.wakes AND EXISTS (SELECT 1 FROM inserted i WHERE i.name = m.name AND i.state = 'pending')
        )
        SELECT (SELECT count(*) FROM inserted)::int8 AS inserted, (SELECT count(*) FROM notified)::int8 AS notified
        """

    /// Posts many root commands in one statement (one commit, one notification per name):
    /// $1 ids, $2 names, $3 every payload end to end, $4 metadata (JSON text), $5 idempotency keys
    /// ('' for none), $6 delays (ms), $7 timeouts (ms, NULL for none), $8 priorities, $9 max
    /// attempts, $10 each payload's offset in $3, $11 its length. Posts wait for a host, so no
    /// host check is made. Returns, for each input in order (`n`), the id it runs under (the
    /// first one's, for a key seen before or earlier in the batch) and whether it is new.
    static let submitPosts = """
        WITH input AS (
            SELECT * FROM unnest($1::uuid[], $2::text[], $4::text[], $5::text[], $6::int8[], $7::int8[], $8::int4[], $9::int4[],
                $10::int8[], $11::int8[])
                WITH ORDINALITY AS t(id, name, metadata, idempotency_key, delay_ms, timeout_ms, priority, max_attempts,
                    payload_at, payload_length, n)
        ), inserted AS (
            INSERT INTO cmdbus.commands AS c (id, name, payload, metadata, correlation_id, idempotency_key, kind, priority,
                state, run_at, timeout_ms, max_attempts)
            SELECT i.id, i.name, substring($3::bytea FROM (i.payload_at + 1)::int4 FOR i.payload_length::int4), i.metadata::jsonb,
                i.id, NULLIF(i.idempotency_key, ''), 'command', i.priority, 'pending',
                now() + i.delay_ms * interval '1 millisecond', i.timeout_ms, i.max_attempts
            FROM input i ORDER BY i.n
            ON CONFLICT DO NOTHING
            RETURNING c.id, c.name, c.idempotency_key, c.run_at
        ), notified AS (
            SELECT pg_notify('cmdbus_new', ready.name) FROM (SELECT DISTINCT name FROM inserted WHERE run_at <= now()) ready
        )
        SELECT i.n, COALESCE(mine.id, earlier.id, existing.id) AS id, mine.id IS NOT NULL AS created,
            (SELECT count(*) FROM notified) AS notified
        FROM input i
        LEFT JOIN inserted mine ON mine.id = i.id
        LEFT JOIN LATERAL (
            SELECT e.id FROM inserted e
            WHERE mine.id IS NULL AND i.idempotency_key <> '' AND e.idempotency_key = i.idempotency_key LIMIT 1
        ) earlier ON true
        LEFT JOIN LATERAL (
            SELECT c.id FROM cmdbus.commands c
            WHERE mine.id IS NULL AND (c.id = i.id OR (i.idempotency_key <> '' AND c.idempotency_key = i.idempotency_key)) LIMIT 1
        ) existing ON true
        ORDER BY i.n
        """

    /// Another journal's finished entries, as history: $1 ids, $2 names, $3 metadata, $4 parents,
    /// $5 correlation ids, $6 depths, $7 states, $8 attempts, $9 created, $10 started and $11
    /// finished (seconds since 1970), $12 error codes, $13 error messages, $14 undo-of and $15
    /// undone-by links; $16 the payloads end to end, $17 where each starts and $18 its length;
    /// $19 to $21 the results so (NULL where none). An id the bus has is left as it is.
    static let importHistory = """
        INSERT INTO cmdbus.commands (id, name, metadata, parent_id, correlation_id, depth, state, attempt, created_at, run_at,
            started_at, finalized_at, error_code, error_message, undo_of, undone_by, payload, result)
        SELECT i.id, i.name, i.metadata::jsonb, i.parent_id, i.correlation_id, i.depth, i.state, i.attempt,
            to_timestamp(i.created_at), to_timestamp(i.created_at), to_timestamp(i.started_at), to_timestamp(i.finished_at),
            i.error_code, i.error_message, i.undo_of, i.undone_by,
            substring($16::bytea FROM (i.payload_at + 1)::int4 FOR i.payload_length::int4),
            CASE WHEN i.result_at IS NOT NULL THEN substring($19::bytea FROM (i.result_at + 1)::int4 FOR i.result_length::int4) END
        FROM unnest($1::uuid[], $2::text[], $3::text[], $4::uuid[], $5::uuid[], $6::int4[], $7::text[], $8::int4[],
            $9::float8[], $10::float8[], $11::float8[], $12::text[], $13::text[], $14::uuid[], $15::uuid[],
            $17::int8[], $18::int8[], $20::int8[], $21::int8[])
            WITH ORDINALITY AS i(id, name, metadata, parent_id, correlation_id, depth, state, attempt, created_at, started_at,
                finished_at, error_code, error_message, undo_of, undone_by, payload_at, payload_length, result_at, result_length, n)
        ORDER BY i.n
        ON CONFLICT DO NOTHING
        RETURNING id
        """

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
    private static func priorityLevels(of name: String, atLeast lowest: String? = nil) -> String {
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

    /// A batch of ends for ``complete``, its `id` added to each one's fields, in id order. The
    /// statement changes its rows in the batch's order in the plans PostgreSQL picks for it (the
    /// batch read in its order, each row found by id or by a hash of the host's running rows),
    /// and so takes them in id order, as the statements that lock first do
    /// (``lockedInIDOrder(_:giving:)``), without a lock of its own: that lock is a write to
    /// each row before its UPDATE, and it cost the drain of 50,000 commands 13 to 17% of its
    /// rate. Unlike theirs, the order is PostgreSQL's choice to keep; a deadlock it let through
    /// would fail the batch, which the finisher writes again.
    static func endsInIDOrder(_ ends: [(id: UUID, fields: [String: JSONValue])]) -> [JSONValue] {
        ends.sorted { $0.id < $1.id }.map { end in
            var fields = end.fields
            fields["id"] = .string(end.id.uuidString)
            return .object(fields)
        }
    }

    /// $1 a JSON array of {id, attempt, state, result (base64), code, message, retryAfterMs}.
    /// Finalizes each command whose lease this host ($2) still holds at that attempt (the fence),
    /// or sends a retryable failure back to pending; returns the ids it changed. The host must
    /// still be on the bus: once another host's rescue has removed it (its lease ran out), what it
    /// still holds is only waiting to be taken back. A rescue skips commands locked at that moment
    /// (a claim of the dead host's, caught by a pause before it committed), and without this a
    /// paused host resuming would record the cancellations its own fence makes on them.
    /// A command asked to stop (`cancel_requested`) that ends with a cancellation ends
    /// `cancelled`, whatever state its host gave: a parent whose subcommands were cancelled with
    /// it failed for their cancellation when it heard of theirs before its own. One asked to
    /// stop that fails in a way worth retrying is not retried, as the local bus does not retry
    /// a cancelled command: it ends `cancelled`, its failure in the message.
    static let complete = """
        WITH input AS (
            SELECT x.*, x."retryAfterMs" IS NOT NULL AS retryable FROM jsonb_to_recordset($1::jsonb)
                AS x(id uuid, attempt int, state text, result text, code text, message text, "retryAfterMs" int8)
        ), done AS (
            UPDATE cmdbus.commands c SET
                state = CASE WHEN c.cancel_requested AND (i.code = 'cancelled' OR i.retryable) THEN 'cancelled'
                    WHEN i.retryable AND c.attempt < c.max_attempts THEN 'pending' ELSE i.state END,
                run_at = CASE WHEN i.retryable THEN now() + i."retryAfterMs" * interval '1 millisecond' ELSE c.run_at END,
                finalized_at = CASE WHEN i.retryable AND c.attempt < c.max_attempts AND NOT c.cancel_requested THEN NULL ELSE now() END,
                result = decode(i.result, 'base64'),
                error_code = CASE WHEN c.cancel_requested AND i.retryable THEN 'cancelled' ELSE i.code END,
                error_message = CASE WHEN c.cancel_requested AND i.retryable
                    THEN 'command ''' || c.name || ''' was cancelled: asked to stop, it failed and was not retried (' || coalesce(i.message, i.code, 'no message') || ')'
                    ELSE i.message END,
                lease_owner = NULL
            FROM input i
            WHERE c.id = i.id AND c.state = 'running' AND c.lease_owner = $2 AND c.attempt = i.attempt
                AND \(hostStillOnBus)
            RETURNING c.id, c.state, c.name
        ), notified AS (
            SELECT pg_notify(CASE WHEN state = 'pending' THEN 'cmdbus_new' ELSE 'cmdbus_done' END,
                             CASE WHEN state = 'pending' THEN name ELSE id::text END) FROM done
        )
        SELECT id, name, (SELECT count(*) FROM notified) AS notified FROM done
        """

    /// $1 id, $2 host, $3 attempt, $4 host label. Hands a claimed command back because every handler
    /// here declined; it ends `noHandler` if no other live host that handles its name is left to ask.
    /// A command declined did not start: the start its claim stamped under its name's rate
    /// (``claimLimited``, at the claim's time, its `started_at`) is taken off again, one of the
    /// stamps of that time, so that declines do not use up a rate no command ran under.
    static let decline = """
        WITH target AS (
            SELECT c.id, c.name, c.kind, c.started_at, EXISTS (
                SELECT 1 FROM cmdbus.hosts h
                WHERE \(liveHost) AND c.name = ANY(h.commands) AND h.id <> $2 AND NOT (h.id = ANY(c.declined_by))
            ) AS others
            FROM cmdbus.commands c
            WHERE c.id = $1 AND c.state = 'running' AND c.lease_owner = $2 AND c.attempt = $3::int4
                AND \(hostStillOnBus)
        ), changed AS (
            UPDATE cmdbus.commands c SET
                declined_by = array_append(c.declined_by, $2), lease_owner = NULL, started_at = NULL,
                attempt = c.attempt - 1,
                state = CASE WHEN t.others THEN 'pending' ELSE 'failed' END,
                finalized_at = CASE WHEN t.others THEN NULL ELSE now() END,
                error_code = CASE WHEN t.others THEN NULL ELSE 'noHandler' END,
                error_message = CASE WHEN t.others THEN NULL
                    ELSE 'no handler for command ''' || c.name || ''' would take it now (every live host that handles it declined)' END
            FROM target t WHERE c.id = t.id
            RETURNING c.id, c.state, c.name
        ), unstamped AS (
            UPDATE cmdbus.limits l
            SET recent_starts = l.recent_starts[:array_position(l.recent_starts, t.started_at) - 1]
                || l.recent_starts[array_position(l.recent_starts, t.started_at) + 1:]
            FROM target t
            WHERE l.name = t.name AND t.kind = 'command' AND array_position(l.recent_starts, t.started_at) IS NOT NULL
        ), notified AS (
            SELECT pg_notify(CASE WHEN state = 'pending' THEN 'cmdbus_new' ELSE 'cmdbus_done' END,
                             CASE WHEN state = 'pending' THEN name ELSE id::text END) FROM changed
        )
        SELECT id, state, (SELECT count(*) FROM notified) AS notified FROM changed
        """

    /// $1 host, $2 hostname, $3 pid, $4 commands, $5 catalog, $6 lease (ms).
    static let registerHost = """
        INSERT INTO cmdbus.hosts (id, hostname, pid, commands, catalog, lease_ms)
        VALUES ($1, $2, $3::int4, $4::text[], $5::jsonb, $6::int8)
        ON CONFLICT (id) DO UPDATE SET heartbeat_at = now(), commands = EXCLUDED.commands, catalog = EXCLUDED.catalog
        """

    /// $1 host, $2 whether it drains (so `bus status` can say so). Returns a row if the host is
    /// still registered (not declared dead).
    static let heartbeat = "UPDATE cmdbus.hosts SET heartbeat_at = now(), draining = $2::bool WHERE id = $1 RETURNING id"

    /// $1 host, $2 whether it drains, $3 the command names it handles now, $4 its catalog: a
    /// heartbeat that also publishes what hot loading changed. Returns a row if the host is still registered.
    static let heartbeatWithOffer = """
        UPDATE cmdbus.hosts SET heartbeat_at = now(), draining = $2::bool, commands = $3::text[], catalog = $4::jsonb WHERE id = $1 RETURNING id
        """

    /// Takes back the running commands of hosts whose lease ran out: pending again, the attempt
    /// counted, or failed (a dead letter) once the attempts are spent. One asked to stop ends
    /// `cancelled` instead of running again. Any host may run it.
    static let rescue = """
        WITH dead AS (
            DELETE FROM cmdbus.hosts h WHERE NOT (\(liveHost)) RETURNING h.id
        ), orphaned AS (
            SELECT c.id FROM cmdbus.commands c
            WHERE c.state = 'running' AND (c.lease_owner IN (SELECT id FROM dead)
                OR NOT EXISTS (SELECT 1 FROM cmdbus.hosts h WHERE h.id = c.lease_owner AND \(liveHost)))
            FOR UPDATE SKIP LOCKED
        ), rescued AS (
            UPDATE cmdbus.commands c SET
                lease_owner = NULL, started_at = NULL,
                state = CASE WHEN c.cancel_requested THEN 'cancelled' WHEN c.attempt >= c.max_attempts THEN 'failed' ELSE 'pending' END,
                finalized_at = CASE WHEN c.cancel_requested OR c.attempt >= c.max_attempts THEN now() ELSE NULL END,
                error_code = CASE WHEN c.cancel_requested THEN 'cancelled' WHEN c.attempt >= c.max_attempts THEN 'handlerFailed' ELSE c.error_code END,
                error_message = CASE WHEN c.cancel_requested
                    THEN 'command ''' || c.name || ''' was cancelled: asked to stop, its host died or lost its lease before it ended'
                    WHEN c.attempt >= c.max_attempts
                    THEN 'command ''' || c.name || ''' failed: its host died or lost its lease on each of ' || c.attempt || ' attempts'
                    ELSE c.error_message END,
                run_at = now()
            FROM orphaned o WHERE c.id = o.id
            RETURNING c.id, c.state, c.name
        ), notified AS (
            SELECT pg_notify(CASE WHEN state = 'pending' THEN 'cmdbus_new' ELSE 'cmdbus_done' END,
                             CASE WHEN state = 'pending' THEN name ELSE id::text END) FROM rescued
        )
        SELECT (SELECT count(*) FROM rescued) AS rescued, (SELECT count(*) FROM notified) AS notified
        """

    /// $1 host. Hands back everything this host holds (draining): pending again, the attempt not counted.
    static let handBack = """
        WITH held AS (
            \(lockedInIDOrder("cmdbus.commands c WHERE c.state = 'running' AND c.lease_owner = $1"))
        ), back AS (
            UPDATE cmdbus.commands c SET state = 'pending', lease_owner = NULL, started_at = NULL, attempt = c.attempt - 1,
                run_at = now()
            FROM held WHERE c.id = held.id
            RETURNING c.name
        ), notified AS (SELECT pg_notify('cmdbus_new', name) FROM back)
        SELECT (SELECT count(*) FROM back) AS back, (SELECT count(*) FROM notified) AS notified
        """

    /// $1 command, $2 host, $3 attempt: one command this host still holds goes back to pending,
    /// its attempt not counted (a host that could not renew its lease stopped it).
    static let handBackOne = """
        WITH back AS (
            UPDATE cmdbus.commands c SET state = 'pending', lease_owner = NULL, started_at = NULL, attempt = c.attempt - 1,
                run_at = now()
            WHERE c.id = $1 AND c.state = 'running' AND c.lease_owner = $2 AND c.attempt = $3::int4
            RETURNING c.name
        )
        SELECT pg_notify('cmdbus_new', name) FROM back
        """

    /// $1 a JSON array of {command, correlation, event}: events from running commands.
    static let appendEvents = """
        WITH input AS (
            SELECT x.command, x.correlation, x.event, n FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS e(value, n),
                jsonb_to_record(e.value) AS x(command uuid, correlation uuid, event jsonb)
        ), inserted AS (
            INSERT INTO cmdbus.events (command_id, correlation_id, event)
            SELECT command, correlation, event FROM input ORDER BY n
            RETURNING correlation_id
        ), notified AS (
            SELECT pg_notify('cmdbus_events', correlation_id::text) FROM (SELECT DISTINCT correlation_id FROM inserted) d
        )
        SELECT (SELECT count(*) FROM notified) AS notified
        """

    /// $1 ids. Asks for commands and every command below them to stop: pending ones end
    /// `cancelled` at once; running ones are flagged, and their hosts are told. Cancels made
    /// together go in one statement, whose rows are locked in id order (``lockedInIDOrder(_:giving:)``):
    /// a host's subcommand poster cancelling one tree after another in a transaction held the
    /// rows of the first while it waited for those of the next.
    static let cancel = """
        WITH RECURSIVE tree AS (
            SELECT id FROM cmdbus.commands WHERE id = ANY($1::uuid[])
            UNION ALL
            SELECT c.id FROM tree t, \(subcommandsOfEach("c.id"))
        ), held AS (
            \(lockedInIDOrder("cmdbus.commands c WHERE c.id = ANY(ARRAY(SELECT id FROM tree)) AND c.finalized_at IS NULL"))
        ), flagged AS (
            UPDATE cmdbus.commands c SET
                cancel_requested = true,
                state = CASE WHEN c.state = 'pending' THEN 'cancelled' ELSE c.state END,
                finalized_at = CASE WHEN c.state = 'pending' THEN now() ELSE c.finalized_at END,
                error_code = CASE WHEN c.state = 'pending' THEN 'cancelled' ELSE c.error_code END,
                error_message = CASE WHEN c.state = 'pending' THEN 'command ''' || c.name || ''' was cancelled' ELSE c.error_message END
            FROM held WHERE c.id = held.id
            RETURNING c.id, c.state
        ), notified AS (
            SELECT pg_notify(CASE WHEN state = 'cancelled' THEN 'cmdbus_done' ELSE 'cmdbus_cancel' END, id::text) FROM flagged
        )
        SELECT (SELECT count(*) FROM flagged) AS flagged, (SELECT count(*) FROM notified) AS notified
        """

    /// $1 names; returns those no live or late host handles, in order.
    static let namesNoHostHandles = """
        SELECT n.name FROM unnest($1::text[]) AS n(name)
        WHERE NOT \(someHostHandles("n.name"))
        ORDER BY n.name
        """

    /// $1 id.
    static let read = "SELECT \(commandColumns) FROM cmdbus.commands c WHERE c.id = $1"

    /// Removes up to $4 trees of work past root number $3 whose root ended (before $1, seconds
    /// since 1970) in one of the states $2, and whose every subcommand ended before $1 too, with
    /// their events. The trees are walked down `parent_id` (indexed), from roots read in `seq`
    /// order. Gives how many commands went, and the last root looked at (NULL: none was left).
    /// With $5 true (a host's `--keep`), it does nothing while another statement of it runs:
    /// the hosts of a bus take turns rather than deleting the same rows at once. With `counting`,
    /// the rows that would go are counted and nothing is deleted (`journal prune --dry-run`).
    /// What goes is locked first, in id order as every statement that changes many commands
    /// locks (``lockedInIDOrder(_:giving:)``): deleting in the order its plan found them, a prune
    /// could hold one row of a tree that `bus retry` wanted while it waited for another the
    /// retry held. A command changed while the prune waits for it is checked again, and a tree
    /// goes whole or not at all: one whose root `bus retry` put back to pending is kept, with
    /// its subcommands and events (the root was deleted, and a retried dead letter lost, when
    /// the check was its id alone).
    static func prune(counting: Bool) -> String {
        let removal = counting ? "gone AS (SELECT 1 FROM doomed)" : """
            locked AS (
                -- The ids listed, so that the rows are found by the primary key: joined alone, the
                -- planner read the whole table to find a batch's few thousand.
                SELECT c.id, d.root FROM cmdbus.commands c JOIN doomed d ON c.id = d.id
                WHERE c.id = ANY(ARRAY(SELECT id FROM doomed)) AND c.finalized_at < to_timestamp($1::float8)
                ORDER BY c.id FOR UPDATE OF c
            ), intact AS (
                SELECT d.root FROM doomed d LEFT JOIN locked l ON l.id = d.id
                GROUP BY d.root HAVING count(l.id) = count(*)
            ), gone_events AS (
                DELETE FROM cmdbus.events WHERE correlation_id IN (SELECT root FROM intact)
            ), gone AS (
                DELETE FROM cmdbus.commands
                WHERE id IN (SELECT l.id FROM locked l JOIN intact i ON l.root = i.root)
                RETURNING 1
            )
            """
        return """
            WITH RECURSIVE turn AS (
                SELECT NOT $5::bool OR pg_try_advisory_xact_lock(hashtext('cmdbus.prune')) AS mine
            ), roots AS (
                SELECT id, seq, finalized_at FROM cmdbus.commands
                WHERE kind = 'command' AND parent_id IS NULL AND seq > $3 AND state = ANY($2::text[])
                    AND finalized_at < to_timestamp($1::float8) AND (SELECT mine FROM turn)
                ORDER BY seq LIMIT $4
            ), tree AS (
                SELECT id, id AS root, finalized_at FROM roots
                UNION ALL
                SELECT c.id, t.root, c.finalized_at FROM tree t, \(subcommandsOfEach("c.id, c.finalized_at"))
            ), kept AS (
                SELECT DISTINCT root FROM tree WHERE finalized_at IS NULL OR finalized_at >= to_timestamp($1::float8)
            ), doomed AS (
                SELECT id, root FROM tree WHERE root NOT IN (SELECT root FROM kept)
            ), \(removal)
            SELECT (SELECT count(*) FROM gone)::int8 AS removed, (SELECT max(seq) FROM roots)::int8 AS last_root
            """
    }

    /// $1 ids. The ones of them that are final.
    static let finished = "SELECT \(commandColumns) FROM cmdbus.commands c WHERE c.id = ANY($1::uuid[]) AND c.finalized_at IS NOT NULL"

    /// $1 correlation, $2 after this event seq.
    static let events = """
        SELECT seq, event::text AS event FROM cmdbus.events WHERE correlation_id = $1 AND seq > $2::int8 ORDER BY seq
        """
}
