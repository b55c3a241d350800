import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The statements the bus runs. Every value is a parameter; times are the database's clock
/// (`now()`), never a host's. Here are the fragments they share and the reads; the rest are
/// in the files named for what they do: `BusSQL+Submitting`, `+Claiming`, `+Ending`,
/// `+Hosts` and `+Trees`.
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

    /// The columns a claimed or read command comes back with.
    static let commandColumns = """
        c.id, c.seq, c.name, c.payload, c.metadata::text AS metadata, c.parent_id, c.correlation_id, c.kind, c.state,
        c.attempt::int8 AS attempt, c.max_attempts::int8 AS max_attempts, c.timeout_ms, c.created_at, c.finalized_at,
        c.cancel_requested, c.result, c.error_code, c.error_message, c.lease_owner, c.undo_of, c.undone_by, c.depth::int8 AS depth,
        array_to_string(c.attempted_by, ',') AS attempted_by
        """

    /// $1 names; returns those no live or late host handles, in order.
    static let namesNoHostHandles = """
        SELECT n.name FROM unnest($1::text[]) AS n(name)
        WHERE NOT \(someHostHandles("n.name"))
        ORDER BY n.name
        """

    /// For a row `state`, `name`, `id` a statement changed: tells the hosts of its name of a
    /// command pending again (`cmdbus_new`), or the clients waiting for one that ended
    /// (`cmdbus_done`). A host's ends, declines and hand-backs and a rescue notify so.
    static let pendingOrEndedNotice = """
        pg_notify(CASE WHEN state = 'pending' THEN 'cmdbus_new' ELSE 'cmdbus_done' END, CASE WHEN state = 'pending' THEN name ELSE id::text END)
        """

    /// $1 id.
    static let read = "SELECT \(commandColumns) FROM cmdbus.commands c WHERE c.id = $1"

    /// $1 ids. The ones of them that are final.
    static let finished = "SELECT \(commandColumns) FROM cmdbus.commands c WHERE c.id = ANY($1::uuid[]) AND c.finalized_at IS NOT NULL"

    /// $1 correlation, $2 after this event seq.
    static let events = """
        SELECT seq, event::text AS event FROM cmdbus.events WHERE correlation_id = $1 AND seq > $2::int8 ORDER BY seq
        """
}
