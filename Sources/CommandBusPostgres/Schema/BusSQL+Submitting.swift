import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// Putting commands on the bus: a send, a host's subcommands, a batch of posts, an imported history.
extension BusSQL {
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
}
