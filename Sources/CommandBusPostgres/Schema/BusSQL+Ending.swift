import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// Ending: a host's batch of ends and its declines, and the events of what it runs.
extension BusSQL {
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

    /// `items` as the texts of JSON arrays, in order, each of at most `count` items and, unless
    /// one item alone is larger, `bytes` bytes: a batch of ends whose results are large (23 of
    /// 12 MiB each, 16 MiB in base64) made one array past what a `jsonb` value may hold (256 MiB),
    /// refused however often it was sent.
    static func arrays(of items: [JSONValue], count: Int, bytes: Int = 32 << 20) -> [String] {
        var arrays: [String] = []
        var current = "", held = 0
        for item in items {
            let text = item.text
            if held > 0 && (held == count || current.utf8.count + text.utf8.count + 2 > bytes) {
                arrays.append(current + "]")
                current = ""
                held = 0
            }
            current += (held == 0 ? "[" : ",") + text
            held += 1
        }
        if held > 0 { arrays.append(current + "]") }
        return arrays
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
            SELECT \(pendingOrEndedNotice) FROM done
        )
        SELECT id, name, (SELECT count(*) FROM notified) AS notified FROM done
        """

    /// $1 id, $2 host, $3 attempt, $4 host label. Hands a claimed command back because every handler
    /// here declined; it ends `noHandler` if no other live host that handles its name is left to ask,
    /// and `cancelled` if it was asked to stop. A command declined did not start: the start its claim stamped under its name's rate
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
                state = CASE WHEN c.cancel_requested THEN 'cancelled' WHEN t.others THEN 'pending' ELSE 'failed' END,
                finalized_at = CASE WHEN t.others AND NOT c.cancel_requested THEN NULL ELSE now() END,
                error_code = CASE WHEN c.cancel_requested THEN 'cancelled' WHEN t.others THEN NULL ELSE 'noHandler' END,
                error_message = CASE WHEN c.cancel_requested THEN 'command ''' || c.name || ''' was cancelled: asked to stop, it was declined'
                    WHEN t.others THEN NULL
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
            SELECT \(pendingOrEndedNotice) FROM changed
        )
        SELECT id, state, (SELECT count(*) FROM notified) AS notified FROM changed
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
}
