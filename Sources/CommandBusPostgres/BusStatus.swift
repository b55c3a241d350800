import CommandBus

/// What `cmdbus bus status` shows: the schema version, the live hosts, queue depth per command
/// name and the age of the oldest pending command.
package enum BusStatus {
    /// Reads the status as JSON.
    package static func read(on connection: PGConnection) throws(PGError) -> JSONValue {
        let version = try connection.execute("SELECT max(version)::int8 AS version FROM cmdbus.schema_version")
        let hosts = try connection.execute("""
            SELECT h.id, h.hostname, h.pid::int8 AS pid, array_to_string(h.commands, ',') AS commands,
                EXTRACT(EPOCH FROM now() - h.heartbeat_at)::float8 AS silent,
                (SELECT count(*) FROM cmdbus.commands c WHERE c.state = 'running' AND c.lease_owner = h.id)::int8 AS running,
                \(BusSQL.liveHost) AS live
            FROM cmdbus.hosts h ORDER BY h.started_at
            """)
        let queues = try connection.execute("""
            SELECT name, count(*)::int8 AS pending, EXTRACT(EPOCH FROM now() - min(created_at))::float8 AS oldest
            FROM cmdbus.commands WHERE state = 'pending' GROUP BY name ORDER BY name
            """)
        let running = try connection.execute("SELECT count(*)::int8 AS running FROM cmdbus.commands WHERE state = 'running'")
        return .object([
            "schemaVersion": .integer(version.count > 0 ? version[row: 0].integer("version") ?? 0 : 0),
            "hosts": .array(hosts.all.map { row in
                .object([
                    "id": .string(row.uuid("id")?.uuidString ?? "?"), "hostname": .string(row.text("hostname") ?? "?"),
                    "pid": .integer(row.integer("pid") ?? 0), "live": .bool(row.bool("live") ?? false),
                    "commands": .array((row.text("commands") ?? "").split(separator: ",").map { .string(String($0)) }),
                    "secondsSinceHeartbeat": .number(row.double("silent") ?? 0), "running": .integer(row.integer("running") ?? 0),
                ])
            }),
            "queues": .array(queues.all.map { row in
                .object([
                    "command": .string(row.text("name") ?? "?"), "pending": .integer(row.integer("pending") ?? 0),
                    "oldestPendingSeconds": .number(row.double("oldest") ?? 0),
                ])
            }),
            "running": .integer(running.count > 0 ? running[row: 0].integer("running") ?? 0 : 0),
        ])
    }
}
