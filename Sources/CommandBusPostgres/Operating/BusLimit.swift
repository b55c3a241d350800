import CommandBus
import CommandBusSupport

/// Limiting how many commands of a name run at once across the whole bus (`cmdbus bus limit`):
/// a host claims one only while fewer than the limit run, on every host together. For a
/// service that takes so many calls at once, or work that must run one at a time (a limit of
/// 1), whichever host claims it. A handler's own `maxConcurrency` limits it on each host; this
/// limits the bus.
///
/// A host that handles a limited name takes a lock for it (an advisory lock per name) around
/// its claim, so two hosts claiming at once cannot both see room for the last one. A host
/// learns of limits from the `cmdbus_limit` notification (and reads them again every few
/// seconds); one that has not yet heard of a limit claims nothing of that name, since its claim
/// counts only the names it took the lock for.
///
/// A name may also have a rate (``Rate``, `bus limit --rate 10/s`): no more than so many start
/// in any period. Its latest starts are kept in its row, stamped by the claim that takes them
/// under the same lock (``BusSQL/claimLimited``); a host that found a period full claims again
/// when it has room (``millisecondsUntilRateRoom``). A name has a limit at once, a rate or both.
package enum BusLimit {
    /// The schema version that brought limits: a host whose catalog names an older one (or none)
    /// claims a limited name as many at once as it likes.
    static let schemaVersion = 4

    /// The schema version that brought rates (`bus limit --rate`): a host from before it claims a
    /// name with a rate as fast as it likes.
    static let rateSchemaVersion = 6

    /// No more than `starts` commands of a name start in any `milliseconds` (a sliding window,
    /// not a calendar one): `10/s` lets ten start in any one second, on every host together. A
    /// retry is a start; a `can` probe is not.
    package struct Rate: Sendable, Equatable {
        /// How many may start in the period (1 to ``mostStarts``).
        package var starts: Int
        /// The period, in milliseconds (1 ms to a week).
        package var milliseconds: Int64

        /// The most starts a rate may allow in its period: the bus keeps that many start times.
        package static let mostStarts = 10_000

        /// A rate; `nil` if either number is out of its range.
        package init?(starts: Int, milliseconds: Int64) {
            guard (1...Self.mostStarts).contains(starts), (1...604_800_000).contains(milliseconds) else { return nil }
            self.starts = starts
            self.milliseconds = milliseconds
        }

        /// The rate as JSON: `{"starts": 10, "periodSeconds": 1}`.
        package var json: JSONValue {
            .object(["starts": .integer(Int64(starts)), "periodSeconds": .number(Double(milliseconds) / 1000)])
        }
    }

    /// What to do to one of a name's two limits: leave it, set it, or remove it.
    package enum Setting<Value: Sendable & Equatable>: Sendable, Equatable {
        /// Leave it as it is.
        case keep
        /// Set it to this.
        case set(Value)
        /// Remove it.
        case remove
    }

    /// What setting or removing a limit did to one name.
    package struct Change: Sendable, Equatable {
        /// The command name.
        package var name: String
        /// How many may run at once, before and now (`nil`: no such limit).
        package var before: Int?, after: Int?
        /// How many may start in a period, before and now (`nil`: no rate).
        package var rateBefore: Rate?, rateAfter: Rate?
        /// Its commands pending on the bus (due now or later), and running.
        package var pending: Int, running: Int

        /// What the change did, as JSON (`bus limit --json`).
        package var json: JSONValue {
            .object([
                "command": .string(name), "before": before.map { .integer(Int64($0)) } ?? .null,
                "limit": after.map { .integer(Int64($0)) } ?? .null, "rateBefore": rateBefore?.json ?? .null,
                "rate": rateAfter?.json ?? .null, "pending": .integer(Int64(pending)), "running": .integer(Int64(running)),
            ])
        }
    }

    /// Sets, keeps or removes how many of `names` may run at once (`atOnce`, at least 1) and how
    /// many may start in a period (`rate`); a name with neither left is no longer limited. `by`
    /// says who, in `bus status`. Wakes the hosts: they read the limits again and claim at once.
    package static func set(
        _ names: [String], atOnce: Setting<Int>, rate: Setting<Rate>, by: String, on connection: PGConnection
    ) throws(PGError) -> [Change] {
        var newAtOnce: Int?, newRate: Rate?
        if case .set(let value) = atOnce { newAtOnce = value }
        if case .set(let value) = rate { newRate = value }
        // A value kept is the row's as the upsert finds it, so two operators setting the two
        // limits of one name at once each keep the other's.
        let rows = try connection.execute("""
            WITH wanted AS (SELECT DISTINCT unnest($1::text[]) AS name),
            before AS (
                SELECT l.name, l.max_running, l.rate_count, l.rate_period_ms FROM cmdbus.limits l JOIN wanted w ON w.name = l.name
            ),
            after AS (
                SELECT w.name, CASE WHEN $2::bool THEN $3::int4 ELSE b.max_running END AS max_running,
                    CASE WHEN $4::bool THEN $5::int4 ELSE b.rate_count END AS rate_count,
                    CASE WHEN $4::bool THEN $6::int8 ELSE b.rate_period_ms END AS rate_period_ms
                FROM wanted w LEFT JOIN before b ON b.name = w.name
            ),
            removed AS (
                DELETE FROM cmdbus.limits l USING after a
                WHERE l.name = a.name AND a.max_running IS NULL AND a.rate_count IS NULL RETURNING l.name
            ),
            written AS (
                INSERT INTO cmdbus.limits AS l (name, max_running, rate_count, rate_period_ms, set_by)
                SELECT name, max_running, rate_count, rate_period_ms, $7 FROM after WHERE max_running IS NOT NULL OR rate_count IS NOT NULL
                ON CONFLICT (name) DO UPDATE SET
                    max_running = CASE WHEN $2::bool THEN excluded.max_running ELSE l.max_running END,
                    rate_count = CASE WHEN $4::bool THEN excluded.rate_count ELSE l.rate_count END,
                    rate_period_ms = CASE WHEN $4::bool THEN excluded.rate_period_ms ELSE l.rate_period_ms END,
                    set_at = now(), set_by = excluded.set_by
                RETURNING name
            )
            SELECT w.name, b.max_running::int8 AS before, b.rate_count::int8 AS rate_before, b.rate_period_ms AS period_before,
                a.max_running::int8 AS after, a.rate_count::int8 AS rate_after, a.rate_period_ms AS period_after,
                (SELECT count(*) FROM removed) + (SELECT count(*) FROM written) AS touched,
                (SELECT count(*) FROM cmdbus.commands c WHERE c.state = 'pending' AND c.name = w.name AND c.kind = 'command')::int8 AS pending,
                (SELECT count(*) FROM cmdbus.commands c WHERE c.state = 'running' AND c.name = w.name AND c.kind = 'command')::int8 AS running
            FROM wanted w JOIN after a ON a.name = w.name LEFT JOIN before b ON b.name = w.name ORDER BY w.name
            """, [
                .textArray(names), .bool(atOnce != .keep), newAtOnce.map { .integer($0) },
                .bool(rate != .keep), newRate.map { .integer($0.starts) }, newRate.map { .integer(Int($0.milliseconds)) }, .text(by),
            ])
        try connection.execute("SELECT pg_notify('cmdbus_limit', '')")
        try connection.execute(BusSQL.wakeHosts, [.textArray(names)])
        return rows.all.map { row in
            Change(
                name: row.text("name") ?? "?", before: row.integer("before").map(Int.init), after: row.integer("after").map(Int.init),
                rateBefore: storedRate(row, count: "rate_before", period: "period_before"), rateAfter: storedRate(row, count: "rate_after", period: "period_after"),
                pending: Int(row.integer("pending") ?? 0), running: Int(row.integer("running") ?? 0)
            )
        }
    }

    /// The rate in a row's two columns, if it has one.
    private static func storedRate(_ row: PGRow, count: String, period: String) -> Rate? {
        guard let starts = row.integer(count), let milliseconds = row.integer(period) else { return nil }
        return Rate(starts: Int(starts), milliseconds: milliseconds)
    }

    /// The live hosts that handle one of `names` and run a `cmdbus` from before limits (or, with
    /// `rates`, before rates): they claim a limited name all the same. As `hostname:pid` with the name, for a warning.
    package static func unawareHosts(handling names: [String], rates: Bool = false, on connection: PGConnection) throws(PGError) -> [(host: String, command: String)] {
        try BusSchema.hosts(before: rates ? rateSchemaVersion : schemaVersion, handling: names, on: connection)
    }

    /// The limited names, by name, as `bus status` shows them: with a rate, how many started in
    /// the period just ended (`recentStarts`).
    package static func limits(on connection: PGConnection) throws(PGError) -> JSONValue {
        let rows = try connection.execute("""
            SELECT name, max_running::int8 AS max_running, rate_count::int8 AS rate_count, rate_period_ms, set_by,
                EXTRACT(EPOCH FROM now() - set_at)::float8 AS seconds,
                (SELECT count(*) FROM unnest(recent_starts) s WHERE s > statement_timestamp() - rate_period_ms * interval '1 millisecond')::int8 AS recent
            FROM cmdbus.limits ORDER BY name
            """)
        return .array(rows.all.map { row in
            var limit: [String: JSONValue] = [
                "command": .string(row.text("name") ?? "?"), "limit": row.integer("max_running").map { .integer($0) } ?? .null,
                "setBy": .string(row.text("set_by") ?? ""), "setSeconds": .number(row.double("seconds") ?? 0),
            ]
            if let rate = storedRate(row, count: "rate_count", period: "rate_period_ms") {
                limit["rate"] = rate.json
                limit["recentStarts"] = .integer(row.integer("recent") ?? 0)
            }
            return .object(limit)
        })
    }

    /// The names limited now, for a host's claimer, and of those the ones with a rate.
    static func limitedNames(on connection: PGConnection) throws(PGError) -> (limited: Set<String>, rated: Set<String>) {
        let rows = try connection.execute("SELECT name, rate_count IS NOT NULL AS rated FROM cmdbus.limits").all
        return (Set(rows.compactMap { $0.text("name") }), Set(rows.filter { $0.bool("rated") == true }.compactMap { $0.text("name") }))
    }

    /// $1 names with a rate: how many milliseconds until the first of them whose period is full
    /// (as many started in it as its rate allows) has room again; NULL if none is full. A host
    /// that claimed none of such a name for want of room looks again then: nothing else tells it.
    static let millisecondsUntilRateRoom = """
        SELECT greatest(1, ceil(EXTRACT(EPOCH FROM
            min(recent_starts[rate_count] + rate_period_ms * interval '1 millisecond') - clock_timestamp()) * 1000))::int8 AS ms
        FROM cmdbus.limits
        WHERE name = ANY($1::text[]) AND rate_count IS NOT NULL AND cardinality(recent_starts) >= rate_count
            AND recent_starts[rate_count] > clock_timestamp() - rate_period_ms * interval '1 millisecond'
        """

    /// Takes the locks of `names` for the rest of the transaction, in one order, so claims of
    /// limited names on different hosts take turns (and never wait for each other in a circle).
    static let lock = """
        SELECT count(pg_advisory_xact_lock(k)) AS locked
        FROM (SELECT DISTINCT hashtext('cmdbus.limit:' || n) AS k FROM unnest($1::text[]) n ORDER BY 1) locks
        """
}
