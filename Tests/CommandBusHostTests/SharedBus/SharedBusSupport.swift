import CommandBusPostgres
import CommandBusSupport
import Foundation
import Testing

extension PGConnection {
    /// Puts a live host on the bus by hand (a minute's lease, named `h`), handling `commands`,
    /// for a test that runs the bus's statements itself.
    func insertHost(_ id: UUID, handling commands: [String]) throws {
        try execute("INSERT INTO cmdbus.hosts (id, hostname, pid, commands, lease_ms) VALUES ($1, 'h', 1, $2::text[], 60000)", [.uuid(id), .textArray(commands)])
    }

    /// Puts a command of name `a` on the bus by hand, running on `host` at its first attempt of
    /// `maxAttempts`, asked to stop if `askedToStop`; gives its id.
    @discardableResult
    func insertRunning(_ id: UUID = UUID(), on host: UUID, askedToStop: Bool, maxAttempts: Int = 5) throws -> UUID {
        try execute("""
            INSERT INTO cmdbus.commands (id, name, payload, correlation_id, state, attempt, max_attempts, lease_owner, started_at, cancel_requested)
            VALUES ($1, 'a', '\\x7b7d', $1, 'running', 1, $2::int4, $3, now(), $4::bool)
            """, [.uuid(id), .integer(Int64(maxAttempts)), .uuid(host), .bool(askedToStop)])
        return id
    }
}

/// A database of its own in the throwaway PostgreSQL cluster scripts/test.sh starts
/// (`$CMDBUS_TEST_POSTGRES`), so each test sees an empty bus.
struct SharedBusDatabase {
    /// Whether the cluster is there: scripts/test.sh always starts one.
    static var isAvailable: Bool { ProcessInfo.processInfo.environment["CMDBUS_TEST_POSTGRES"].map { !$0.isEmpty } ?? false }
    static var clusterURL: String { ProcessInfo.processInfo.environment["CMDBUS_TEST_POSTGRES"] ?? "" }

    let name: String
    let url: String

    init() async throws {
        name = "bus_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        try await Self.psql(Self.clusterURL, "CREATE DATABASE \(name)")
        url = Self.clusterURL.replacingOccurrences(of: ":///postgres?", with: ":///\(name)?")
    }

    /// Runs SQL through psql; returns its unaligned, tuples-only output.
    @discardableResult
    static func psql(_ url: String, _ sql: String) async throws -> String {
        let result = try await runProcess("/usr/bin/env", ["psql", url, "-v", "ON_ERROR_STOP=1", "-At", "-c", sql])
        try #require(result.status == 0, "psql failed: \(result.stderr)")
        return result.stdout
    }

    /// A connection to this test's database, with the bus's schema made in it.
    func migratedConnection() throws -> PGConnection {
        let connection = try PGConnection(url: url)
        try BusSchema.migrate(connection)
        return connection
    }

    /// A connection to this test's database that listens on `channel`.
    func listening(on channel: String) throws -> PGConnection {
        let connection = try PGConnection(url: url)
        try connection.execute("LISTEN \(channel)")
        return connection
    }

    /// Runs SQL against this test's database.
    @discardableResult
    func sql(_ sql: String) async throws -> String { try await Self.psql(url, sql) }

    /// Puts `count` root commands of `name` on the bus, pending and due now, each with `payload`
    /// (JSON text without a single quote), in one statement, as a burst of posts lands.
    func insertPending(_ count: Int, named name: String, payload: String) async throws {
        try await sql("""
            INSERT INTO cmdbus.commands (id, name, payload, correlation_id, state)
            SELECT u, '\(name)', convert_to('\(payload)', 'UTF8'), u, 'pending'
            FROM (SELECT gen_random_uuid() AS u FROM generate_series(1, \(count))) s
            """)
    }

    /// Drops the database, best effort: a drop a test left for after its end can meet the next
    /// test restarting the cluster, and must not fail that test (``psql(_:_:)`` records an issue).
    func drop() async {
        _ = try? await runProcess("/usr/bin/env", ["psql", Self.clusterURL, "-At", "-c", "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"])
    }
}

/// A `cmdbus serve --bus` host as a real process, with its own plugin directory.
final class BusHostProcess: @unchecked Sendable {
    let process: LaunchedProcess
    let work: TemporaryDirectory
    let log: URL

    /// Starts a host with the named build products as its plugins, and C fixtures compiled with
    /// their defines (``compileFixture(_:into:as:defines:)``); returns once it has joined the bus.
    init(
        bus: String, plugins: [String], fixtures: [(source: String, defines: [String])] = [], lease: String = "2", drain: String = "10",
        extra: [String] = [], inNamespace namespace: String? = nil, environment: [String: String] = [:]
    ) async throws {
        work = try TemporaryDirectory("cmdbus-bus-host")
        let directory = try work.subdirectory("plugins")
        for plugin in plugins { try directory.install(plugin) }
        for fixture in fixtures { _ = try await compileFixture(fixture.source, into: directory, defines: fixture.defines) }
        log = work.file("host.log")
        let cmdbus = try TestPaths.product("cmdbus").path
        let arguments = ["serve", "--bus", bus, "--plugins", directory.path, "--lease", lease, "--drain", drain] + extra
        // `ip netns exec` execs the host: the process is the host itself.
        let (executable, command) = namespace.map { ("/usr/sbin/ip", ["netns", "exec", $0, cmdbus] + arguments) } ?? (cmdbus, arguments)
        process = try launchedChild(
            executable, command, environment: environment.merging(["CMDBUS_REGISTRY": work.file("registry.json").path]) { mine, _ in mine }, directory: work.path,
            standardOutput: .discard, standardError: .file(log.path)
        )
        Self.started.add(self)
        let joined = await waitUntil(.seconds(60)) { self.output.contains("joined the bus") || !self.process.isRunning }
        try #require(joined && process.isRunning, "the host did not join the bus: \(output)")
    }

    /// What the host logged so far.
    var output: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }

    var pid: Int32 { process.pid }

    func signal(_ number: Int32) { process.send(number) }

    /// Every host a test started and has not stopped.
    private static let started = StartedProcesses<BusHostProcess>()

    /// Stops every host still running.
    static func stopAll() async {
        for host in started.takeAll() { await host.stop() }
    }

    /// SIGTERM, then waits for it to leave.
    func stop() async {
        process.send(SIGTERM)
        _ = await waitUntil(.seconds(60)) { !self.process.isRunning }
        work.remove()
    }

    /// SIGKILL: the host dies holding whatever it claimed.
    func kill9() async {
        signal(SIGKILL)
        _ = await waitUntil(.seconds(30)) { !self.process.isRunning }
    }
}

/// Runs a shell command line and waits for it, with `system()` (which reaps its own child:
/// Foundation's `Process` was seen to miss the end of commands that start servers).
@discardableResult
func shell(_ line: String) async -> Int32 {
    await Task.detached { system(line + " </dev/null >/dev/null 2>&1") }.value
}

/// A network namespace joined to this one by a veth pair: `hostAddress` here, `namespaceAddress` there.
struct NetworkNamespace {
    let name: String
    let hostSide: String
    let hostAddress: String
    let namespaceAddress: String

    static var isAvailable: Bool { getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/sbin/ip") }

    init() async throws {
        let tag = String(UInt32.random(in: 0..<0xFFFF), radix: 16)
        let subnet = Int.random(in: 1..<250)
        name = "cmdbus-\(tag)"
        hostSide = "vh\(tag)"
        hostAddress = "10.231.\(subnet).1"
        namespaceAddress = "10.231.\(subnet).2"
        let namespaceSide = "vn\(tag)"
        for command in [
            "ip netns add \(name)", "ip link add \(hostSide) type veth peer name \(namespaceSide)",
            "ip link set \(namespaceSide) netns \(name)", "ip addr add \(hostAddress)/24 dev \(hostSide)", "ip link set \(hostSide) up",
            "ip netns exec \(name) ip addr add \(namespaceAddress)/24 dev \(namespaceSide)",
            "ip netns exec \(name) ip link set \(namespaceSide) up", "ip netns exec \(name) ip link set lo up",
        ] {
            let status = await shell(command)
            try #require(status == 0, "'\(command)' failed")
        }
    }

    /// Cuts (or restores) the link.
    func link(up: Bool) async { await shell("ip link set \(hostSide) \(up ? "up" : "down")") }

    func remove() async {
        await shell("ip link del \(hostSide)")
        await shell("ip netns del \(name)")
    }
}

/// A PostgreSQL of its own that listens on TCP at `address` and wants a password (scram-sha-256)
/// from there: for the test that puts a host across a real network.
struct PasswordCluster {
    let directory: TemporaryDirectory
    let port: Int
    let bin: String
    let address: String

    init(listeningOn address: String, role: String, password: String) async throws {
        let environment = ProcessInfo.processInfo.environment
        bin = try #require(environment["CMDBUS_TEST_POSTGRES_BIN"])
        directory = try TemporaryDirectory("cmdbus-pg-tcp")
        self.address = address
        port = Int.random(in: 20_000..<40_000)
        let data = directory.file("data").path, socket = directory.path
        let asPostgres = getuid() == 0 ? "runuser -u postgres -- " : ""
        await shell("chmod 755 \(socket); chown postgres \(socket)")
        var status = await shell("\(asPostgres)\(bin)/initdb -D \(data) -A trust -U postgres --no-sync")
        try #require(status == 0, "initdb failed")
        let hba = "local all all trust\nhost all \(role) \(address.split(separator: ".").prefix(3).joined(separator: ".")).0/24 scram-sha-256\n"
        try hba.write(toFile: data + "/pg_hba.conf", atomically: true, encoding: .utf8)
        await shell("chown postgres \(data)/pg_hba.conf")
        status = await shell("\(asPostgres)\(bin)/pg_ctl -D \(data) -l \(socket)/server.log -w "
            + "-o \"-k \(socket) -p \(port) -c listen_addresses=\(address) -c password_encryption=scram-sha-256\" start")
        try #require(status == 0, "the TCP cluster did not start")
        _ = try await SharedBusDatabase.psql(localURL, "CREATE ROLE \(role) LOGIN SUPERUSER PASSWORD '\(password)'")
    }

    /// The cluster over its Unix socket, as the superuser.
    var localURL: String { "postgresql:///postgres?host=\(directory.path)&port=\(port)&user=postgres" }

    func stop() async {
        let asPostgres = getuid() == 0 ? "runuser -u postgres -- " : ""
        await shell("\(asPostgres)\(bin)/pg_ctl -D \(directory.file("data").path) -m immediate stop")
        directory.remove()
    }
}
