import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// Many commands at once: the order their rows are locked in, and walking down trees of work
// to cancel or prune them.
extension BusSQL {
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
}
