import CommandBus
import CommandBusHost

/// What `cmdbus bus status` shows: the schema version, the live hosts, queue depth per command
/// name (the deepest ``CountedName/limit`` apart), how long its oldest due command has waited,
/// the commands scheduled for later, and how many of each name run now.
package enum BusStatus {
    /// Reads the status as JSON.
    package static func read(on connection: PGConnection) throws(PGError) -> JSONValue {
        let version = try connection.execute("SELECT max(version)::int8 AS version FROM cmdbus.schema_version")
        let hosts = try connection.execute("""
            SELECT h.id, h.hostname, h.pid::int8 AS pid, array_to_string(h.commands, ',') AS commands, h.catalog::text AS catalog,
                EXTRACT(EPOCH FROM now() - h.heartbeat_at)::float8 AS silent,
                (SELECT count(*) FROM cmdbus.commands c WHERE c.state = 'running' AND c.lease_owner = h.id)::int8 AS running,
                \(BusSQL.liveHost) AS live, h.draining
            FROM cmdbus.hosts h ORDER BY h.started_at
            """)
        // Names come from clients, and the bus keeps a post no host handles: past
        // `CountedName.limit` names, the shallower queues are counted together under
        // `CountedName.other`, so a flood of invented names cannot grow a scrape without bound.
        // A command due now is pending: it waits for a host, and has waited since it became due
        // (posted, retried after its backoff, or handed back). One due later (`--delay`, a
        // retry's backoff) is scheduled: counted apart, so it neither swells the queue nor
        // ages it while nothing is late.
        let queues = try connection.execute("""
            WITH queue AS (
                SELECT name, count(*) FILTER (WHERE run_at <= now()) AS pending, count(*) FILTER (WHERE run_at > now()) AS scheduled,
                    min(run_at) FILTER (WHERE run_at <= now()) AS oldest, min(run_at) FILTER (WHERE run_at > now()) AS next
                FROM cmdbus.commands WHERE state = 'pending' GROUP BY name
            ), ranked AS (
                SELECT name, pending, scheduled, oldest, next,
                    row_number() OVER (ORDER BY pending DESC, oldest, scheduled DESC, name) AS rank
                FROM queue
            )
            SELECT CASE WHEN rank <= $1 THEN name ELSE $2 END AS name, sum(pending)::int8 AS pending, sum(scheduled)::int8 AS scheduled,
                coalesce(EXTRACT(EPOCH FROM now() - min(oldest)), 0)::float8 AS oldest, EXTRACT(EPOCH FROM min(next) - now())::float8 AS next,
                count(*)::int8 AS names
            FROM ranked GROUP BY 1 ORDER BY bool_or(rank > $1), 1
            """, [.integer(Int64(CountedName.limit)), .text(CountedName.other)])
        // What runs, by name: few rows (no more than the hosts' capacities), of names hosts handle.
        let runningByName = try connection.execute("SELECT name, count(*)::int8 AS running FROM cmdbus.commands WHERE state = 'running' GROUP BY name")
        var running: [String: Int64] = [:]
        for row in runningByName.all { if let name = row.text("name") { running[name] = row.integer("running") ?? 0 } }
        let paused = try BusPause.paused(on: connection)
        let limits = try BusLimit.limits(on: connection)
        var limitOf: [String: [String: JSONValue]] = [:]
        for case .object(let limit) in limits.arrayValue ?? [] { if let name = limit["command"]?.stringValue { limitOf[name] = limit } }
        let pausedNames = Set(paused.arrayValue?.compactMap { $0.objectValue?["command"]?.stringValue } ?? [])
        let waiting = Set(queues.all.compactMap { $0.text("name") })
        // The live hosts that handle a name no more, its plugin quarantined there: the others
        // that have it take it, and where none does, it waits ("no live host").
        var quarantinedOn: [String: [String]] = [:]
        for host in hosts.all where host.bool("live") == true {
            let catalog = BusCatalog.Host(row: host)
            for name in catalog.quarantinedCommands { quarantinedOn[name, default: []].append(catalog.label) }
        }
        func queue(_ name: String, pending: Int64, oldest: Double, scheduled: Int64, nextDue: Double? = nil, names: Int64? = nil) -> JSONValue {
            var queue: [String: JSONValue] = [
                "command": .string(name), "pending": .integer(pending), "oldestPendingSeconds": .number(oldest),
                "scheduled": .integer(scheduled), "running": .integer(running[name] ?? 0),
            ]
            if let nextDue { queue["nextDueSeconds"] = .number(nextDue) }
            if pausedNames.contains(name) { queue["paused"] = .bool(true) }
            if case .integer(let most)? = limitOf[name]?["limit"] { queue["limit"] = .integer(most) }
            if let rate = limitOf[name]?["rate"] { queue["rate"] = rate }
            if name == CountedName.other { queue["commands"] = .integer(names ?? 0) }
            if let labels = quarantinedOn[name] { queue["quarantinedOn"] = .array(labels.map(JSONValue.string)) }
            return .object(queue)
        }
        return .object([
            "schemaVersion": .integer(version.count > 0 ? version[row: 0].integer("version") ?? 0 : 0),
            "hosts": .array(hosts.all.map { row in
                var host: [String: JSONValue] = [
                    "id": .string(row.uuid("id")?.uuidString ?? "?"), "hostname": .string(row.text("hostname") ?? "?"),
                    "pid": .integer(row.integer("pid") ?? 0), "live": .bool(row.bool("live") ?? false), "draining": .bool(row.bool("draining") ?? false),
                    "commands": .array((row.text("commands") ?? "").split(separator: ",").map { .string(String($0)) }),
                    "secondsSinceHeartbeat": .number(row.double("silent") ?? 0), "running": .integer(row.integer("running") ?? 0),
                ]
                // What this host does not serve, and why: its commands wait for another host.
                let quarantined = BusCatalog.Host(row: row).quarantined
                if !quarantined.isEmpty { host["quarantined"] = .array(quarantined) }
                return .object(host)
            }),
            // Each name with work waiting, scheduled or running, and how many of it run now.
            "queues": .array(queues.all.map { row in
                queue(row.text("name") ?? "?", pending: row.integer("pending") ?? 0, oldest: row.double("oldest") ?? 0,
                      scheduled: row.integer("scheduled") ?? 0, nextDue: row.double("next"), names: row.integer("names"))
            } + running.keys.sorted().filter { !waiting.contains($0) }.map { queue($0, pending: 0, oldest: 0, scheduled: 0) }),
            "running": .integer(running.values.reduce(0, +)),
            // Names no host claims until `bus resume` (``BusPause``), with how long and by whom.
            "paused": paused,
            // Names no more of which run at once across the bus than their limit (``BusLimit``).
            "limits": limits,
            // Commands the hosts post on a schedule (``BusPeriodic``), with when each is next due.
            "periodic": try BusPeriodic.entries(on: connection),
            // Plugins the live hosts load different builds of (``BusCatalog``): a command's answer depends on which host claims it.
            "differences": BusCatalog.merge(hosts.all.filter { $0.bool("live") == true }.map(BusCatalog.Host.init(row:))).objectValue?["differences"] ?? .array([]),
        ])
    }
}
