import Foundation
import Testing

/// A PostgreSQL cluster of one test's own, in a temporary directory, over a Unix socket there
/// (and on TCP where asked): for a test that restarts or stops its database, so the tests that
/// run beside it on the cluster scripts/test.sh starts never lose theirs, or that needs a
/// cluster listening on a network.
struct ThrowawayCluster: Sendable {
    let directory: TemporaryDirectory
    /// The server's binaries (`$CMDBUS_TEST_POSTGRES_BIN`).
    let bin: String
    /// The options it was started with, for a start after a stop.
    let options: String
    /// The port: PostgreSQL's default where it does not listen on TCP (the socket's name has it).
    let port: Int

    /// `initdb` and a start. `listenOn` an address, it listens there on a port of its own too,
    /// and `hba` replaces its `pg_hba.conf`.
    init(listenOn address: String? = nil, hba: String? = nil) async throws {
        bin = try #require(ProcessInfo.processInfo.environment["CMDBUS_TEST_POSTGRES_BIN"], "needs the PostgreSQL that scripts/test.sh finds")
        directory = try TemporaryDirectory("cmdbus-pg-own")
        let port = address == nil ? 5432 : Int.random(in: 20_000..<40_000)
        self.port = port
        let data = directory.file("data").path
        await shell("chmod 755 \(directory.path); chown postgres \(directory.path)")
        let status = await shell("\(Self.asPostgres)\(bin)/initdb -D \(data) -A trust -U postgres --no-sync")
        try #require(status == 0, "initdb failed")
        if let hba {
            try hba.write(toFile: data + "/pg_hba.conf", atomically: true, encoding: .utf8)
            await shell("chown postgres \(data)/pg_hba.conf")
        }
        let listening = address.map { "-p \(port) -c listen_addresses=\($0) -c password_encryption=scram-sha-256" } ?? "-c listen_addresses=''"
        options = "-k \(directory.path) \(listening) -c max_connections=100 -c shared_buffers=32MB -c fsync=off"
        try await pgctl("start")
    }

    /// The cluster over its Unix socket, as the superuser.
    var url: String { "postgresql:///postgres?host=\(directory.path)&port=\(port)&user=postgres" }

    /// `pg_ctl restart`; with `down`, a stop, that long without a database, and a start.
    func restart(down: Duration? = nil) async throws {
        guard let down else { return try await pgctl("restart") }
        try await pgctl("stop")
        try await Task.sleep(for: down)
        try await pgctl("start")
    }

    /// Stops it at once and removes its directory.
    func stop() async {
        await shell("\(Self.asPostgres)\(bin)/pg_ctl -D \(directory.file("data").path) -m immediate stop")
        directory.remove()
    }

    /// `pg_ctl ACTION` (`stop`, `start`, `restart`), waiting for it, as the user the server runs
    /// as. A start is told the options; a restart reuses them itself.
    func pgctl(_ action: String) async throws {
        let data = directory.file("data").path
        let started = action == "start" ? "-o \"\(options)\" " : ""
        let status = await shell("\(Self.asPostgres)\(bin)/pg_ctl -D \(data) -l \(directory.path)/server.log -m fast -w \(started)\(action)")
        try #require(status == 0, "pg_ctl \(action) failed with status \(status)")
    }

    /// initdb refuses root: as root, the server runs as the `postgres` user Debian's package makes.
    private static var asPostgres: String { getuid() == 0 ? "runuser -u postgres -- " : "" }
}
