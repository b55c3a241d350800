import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// The hosts: joining, heartbeats, the rescue of a dead host's commands, a drain's hand-back.
extension BusSQL {
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
            SELECT \(pendingOrEndedNotice) FROM rescued
        )
        SELECT (SELECT count(*) FROM rescued) AS rescued, (SELECT count(*) FROM notified) AS notified
        """

    /// The changes that give a command this host holds back to the bus: pending again, its
    /// attempt not counted, unless it was asked to stop: then it ends `cancelled` (`why` says
    /// how it came to end there), as a host's end of one and the rescue do.
    private static func givenBack(_ why: String) -> String {
        """
        lease_owner = NULL, run_at = now(),
                state = CASE WHEN c.cancel_requested THEN 'cancelled' ELSE 'pending' END,
                started_at = CASE WHEN c.cancel_requested THEN c.started_at END,
                attempt = CASE WHEN c.cancel_requested THEN c.attempt ELSE c.attempt - 1 END,
                finalized_at = CASE WHEN c.cancel_requested THEN now() END,
                error_code = CASE WHEN c.cancel_requested THEN 'cancelled' ELSE c.error_code END,
                error_message = CASE WHEN c.cancel_requested
                    THEN 'command ''' || c.name || ''' was cancelled: asked to stop, \(why)' ELSE c.error_message END
        """
    }

    /// $1 host. Hands back everything this host holds (draining): pending again, the attempt not
    /// counted, or `cancelled` if asked to stop. Gives how many went back and how many ended.
    static let handBack = """
        WITH held AS (
            \(lockedInIDOrder("cmdbus.commands c WHERE c.state = 'running' AND c.lease_owner = $1"))
        ), back AS (
            UPDATE cmdbus.commands c SET \(givenBack("its host left the bus before it ended"))
            FROM held WHERE c.id = held.id
            RETURNING c.id, c.name, c.state
        ), notified AS (SELECT \(pendingOrEndedNotice) FROM back)
        SELECT (SELECT count(*) FROM back WHERE state = 'pending') AS back, (SELECT count(*) FROM back WHERE state = 'cancelled') AS cancelled,
            (SELECT count(*) FROM notified) AS notified
        """

    /// $1 host, $2 the commands it knows it holds, $3 a lease in milliseconds: gives back the
    /// commands the bus says this host runs, claimed more than a lease ago, that it does not
    /// know of (a claim whose answer was lost after it committed, an end the bus refused and the
    /// host dropped): pending again, the attempt not counted, or `cancelled` if asked to stop.
    /// Only a dead host's commands are taken back otherwise, so these stayed `running` for as
    /// long as their host lived. Gives each one's id and name.
    static let handBackForgotten = """
        WITH held AS (
            \(lockedInIDOrder("""
                cmdbus.commands c WHERE c.state = 'running' AND c.lease_owner = $1
                    AND c.started_at < now() - $3::int8 * interval '1 millisecond' AND NOT (c.id = ANY($2::uuid[]))
                """))
        ), back AS (
            UPDATE cmdbus.commands c SET \(givenBack("its host had lost track of it"))
            FROM held WHERE c.id = held.id
            RETURNING c.id, c.name, c.state
        ), notified AS (SELECT \(pendingOrEndedNotice) FROM back)
        SELECT b.id, b.name, (SELECT count(*) FROM notified) AS notified FROM back b
        """

    /// $1 command, $2 host, $3 attempt: one command this host still holds goes back to pending,
    /// its attempt not counted, or ends `cancelled` if asked to stop (a host that could not
    /// renew its lease stopped it).
    static let handBackOne = """
        WITH back AS (
            UPDATE cmdbus.commands c SET \(givenBack("its host could not renew its lease before it ended"))
            WHERE c.id = $1 AND c.state = 'running' AND c.lease_owner = $2 AND c.attempt = $3::int4
            RETURNING c.id, c.name, c.state
        )
        SELECT \(pendingOrEndedNotice) FROM back
        """
}
