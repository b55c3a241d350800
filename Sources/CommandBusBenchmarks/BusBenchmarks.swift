import CommandBusHost
import CommandBusPostgres
import Foundation
import Glibc

/// The shared-bus figures of issue #12, against the throwaway PostgreSQL scripts/bench.sh starts
/// (`$CMDBUS_TEST_POSTGRES`), with default durability. Hosts are real `cmdbus serve --bus` processes.
enum BusBenchmarks {
    static func run(into report: inout BenchmarkReport) async throws {
        guard let cluster = ProcessInfo.processInfo.environment["CMDBUS_TEST_POSTGRES"], !cluster.isEmpty else {
            throw BenchmarkFailure("no PostgreSQL: run the benchmarks through scripts/bench.sh, which starts one")
        }
        for hosts in [1, 2, 3] {
            let perSecond = try await drain(hosts: hosts, cluster: cluster)
            report.record(hosts == 3 ? "bus_drain_per_s" : "bus_drain_\(hosts)_host\(hosts == 1 ? "" : "s")_per_s", perSecond)
        }
        let trees = try await trees(cluster: cluster)
        report.record("bus_trees_per_s", trees)
        // Six commands a tree, against what two hosts drain of commands alone.
        report.record("bus_tree_commands_vs_drain_ratio", trees * 6 / report.value("bus_drain_2_hosts_per_s"))
        report.record("bus_submit_per_s", try await submit(cluster: cluster))
        let (wakeup, send, besideScheduled) = try await latencies(cluster: cluster)
        report.record("bus_wakeup_p50_ms", wakeup)
        report.record("bus_send_p50_ms", send)
        report.record("bus_send_beside_scheduled_p50_ms", besideScheduled)
        report.record("bus_send_beside_scheduled_ratio", besideScheduled / send)
    }

    /// A fresh database in the cluster, migrated.
    static func database(_ cluster: String) throws -> (url: String, drop: () -> Void) {
        let name = "bench_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let admin = try PGConnection(url: cluster)
        try admin.execute("CREATE DATABASE \(name)")
        let url = cluster.replacingOccurrences(of: ":///postgres?", with: ":///\(name)?")
        try BusSchema.migrate(try PGConnection(url: url))
        return (url, { _ = try? admin.execute("DROP DATABASE IF EXISTS \(name) WITH (FORCE)") })
    }

    /// Host processes with the C echo plugin (a no-op command: it answers with its payload), or
    /// the plugins named.
    static func startHosts(_ count: Int, url: String, work: Scratch, plugins products: [String] = ["libCEcho.so"]) throws -> [Process] {
        let folder = "plugins-" + products.joined(separator: "-"), plugins = work.path + "/" + folder
        try FileManager.default.createDirectory(atPath: plugins, withIntermediateDirectories: true)
        for product in products where !FileManager.default.fileExists(atPath: plugins + "/" + product) {
            try work.copy(product: product, as: folder + "/" + product)
        }
        return try (0..<count).map { _ in
            let host = Process()
            host.executableURL = PluginBenchmarks.productDirectory.appendingPathComponent("cmdbus")
            host.arguments = ["serve", "--bus", url, "--plugins", plugins, "--capacity", "256", "--drain", "1"]
            host.environment = ProcessInfo.processInfo.environment.merging(["CMDBUS_REGISTRY": work.path + "/registry.json"]) { _, new in new }
            host.standardError = FileHandle.nullDevice
            try host.run()
            return host
        }
    }

    static func stop(_ hosts: [Process]) {
        for host in hosts where host.isRunning { host.terminate() }
        for host in hosts { host.waitUntilExit() }
    }

    /// 50,000 pending no-op commands, inserted beforehand, drained by `hosts` processes: from their start to the last completion.
    static func drain(hosts count: Int, cluster: String) async throws -> Double {
        let (url, drop) = try database(cluster)
        defer { drop() }
        let work = try Scratch("bus-drain")
        defer { work.remove() }
        let total = 50_000
        let connection = try PGConnection(url: url)
        try insertPending(total, named: "c.echo", on: connection)
        let started = ContinuousClock.now
        let hosts = try startHosts(count, url: url, work: work)
        defer { stop(hosts) }
        try await waitForEnds(of: total, on: connection, since: started)
        return Double(total) / seconds(ContinuousClock.now - started)
    }

    /// What the first command of the benchmark that did not succeed says of itself: its name,
    /// id, state, attempt and error, so a failed run can be looked into.
    private static func firstFailure(on connection: PGConnection) throws -> String {
        let rows = try connection.execute("""
            SELECT id::text AS id, name, state, attempt::int8 AS attempt, coalesce(error_code, '') AS code, coalesce(error_message, '') AS message
            FROM cmdbus.commands WHERE finalized_at IS NOT NULL AND state <> 'succeeded' ORDER BY finalized_at LIMIT 1
            """)
        guard rows.count > 0 else { return "a command of the benchmark failed" }
        let row = rows[row: 0]
        return "command \(row.text("name") ?? "?") \(row.text("id") ?? "?") ended \(row.text("state") ?? "?") "
            + "on attempt \(row.integer("attempt") ?? 0): \(row.text("code") ?? "") \(row.text("message") ?? "")"
    }

    /// Inserts `count` root commands of `name`, pending, with `payload`, due `dueIn` seconds from now.
    private static func insertPending(_ count: Int, named name: String, payload: String = "{}", dueIn seconds: Int = 0, on connection: PGConnection) throws {
        try connection.execute("""
            INSERT INTO cmdbus.commands (id, name, payload, correlation_id, state, run_at)
            SELECT u, $2, convert_to($3, 'UTF8'), u, 'pending', now() + $4::int8 * interval '1 second'
            FROM (SELECT gen_random_uuid() AS u FROM generate_series(1, $1::int8)) s
            """, [.integer(Int64(count)), .text(name), .text(payload), .integer(Int64(seconds))])
    }

    /// Waits until `total` commands (of `name`, or of any) have ended, all succeeded, or 600 s
    /// have passed since `started`.
    private static func waitForEnds(of total: Int, named name: String? = nil, on connection: PGConnection, since started: ContinuousClock.Instant) async throws {
        while true {
            let done = try connection.execute("""
                SELECT count(*)::int8 AS done, count(*) FILTER (WHERE state <> 'succeeded')::int8 AS failed
                FROM cmdbus.commands WHERE finalized_at IS NOT NULL AND ($1::text IS NULL OR name = $1)
                """, [name.map(PGValue.text)])
            if (done[row: 0].integer("failed") ?? 0) > 0 { throw BenchmarkFailure(try firstFailure(on: connection)) }
            if (done[row: 0].integer("done") ?? 0) >= total { return }
            try await Task.sleep(for: .milliseconds(5))
            if ContinuousClock.now - started > .seconds(600) { throw BenchmarkFailure("\(total) commands did not end within 600 s") }
        }
    }

    /// 2,000 trees of work, inserted beforehand: a `greet-all` of five names on one host, whose
    /// five `greet`s run one after another on a second host (each through PostgreSQL and back),
    /// from the `greet-all` host's start to the last tree's end, in trees a second.
    static func trees(cluster: String) async throws -> Double {
        let (url, drop) = try database(cluster)
        defer { drop() }
        let work = try Scratch("bus-trees")
        defer { work.remove() }
        let total = 2_000
        let connection = try PGConnection(url: url)
        try insertPending(total, named: "greet-all", payload: #"{"names":["a","b","c","d","e"]}"#, on: connection)
        // The `greet` host first, and on the bus before the `greet-all` host starts: a subcommand
        // that no host handles yet fails at once as `noHandler`, and so would its tree, as one
        // run saw when the `greet-all` host came up first on a loaded machine.
        let greeter = try startHosts(1, url: url, work: work, plugins: ["libGreeter.so"])
        defer { stop(greeter) }
        await (try await waitUntilHandled("greet", payload: #"{"name":"a"}"#, url: url)).close()
        let started = ContinuousClock.now
        let hosts = try startHosts(1, url: url, work: work, plugins: ["libGreetAll.so"])
        defer { stop(hosts) }
        try await waitForEnds(of: total, named: "greet-all", on: connection, since: started)
        return Double(total) / seconds(ContinuousClock.now - started)
    }

    /// Waits until a host on the bus handles `name` with `payload` (asked every 20 ms, for up to
    /// 10 s), and gives the client that asked.
    private static func waitUntilHandled(_ name: String, payload: String = "{}", url: String) async throws -> PostgresBusClient {
        let client = try PostgresBusClient(url: url)
        for _ in 0..<500 {
            if (try? await client.canHandle(name, payload: Data(payload.utf8))) == true { return client }
            try await Task.sleep(for: .milliseconds(20))
        }
        await client.close()
        throw BenchmarkFailure("no bus host took \(name) within 10 s")
    }

    /// 10 concurrent clients, each submitting one command per transaction, for 2 seconds.
    static func submit(cluster: String) async throws -> Double {
        let (url, drop) = try database(cluster)
        defer { drop() }
        let clients = 10
        let deadline = ContinuousClock.now + .seconds(2)
        let counts = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<clients {
                group.addTask {
                    try await Task.detached {
                        let connection = try PGConnection(url: url)
                        var submitted = 0
                        while ContinuousClock.now < deadline {
                            var submission = BusSubmission(name: "c.echo", payload: Data("{}".utf8))
                            submission.failIfUnhandled = false
                            try submission.submit(on: connection)
                            submitted += 1
                        }
                        return submitted
                    }.value
                }
            }
            return try await group.reduce(0, +)
        }
        return Double(counts) / 2
    }

    /// Submit to handler start on an idle host (the database's clock at both ends), and a whole
    /// `send` round trip through PostgreSQL, p50 of 200 each, in milliseconds; then the `send`
    /// again with 100,000 commands of its name posted for an hour on (`--delay`), which a claim
    /// must not read.
    static func latencies(cluster: String) async throws -> (wakeup: Double, send: Double, besideScheduled: Double) {
        let (url, drop) = try database(cluster)
        defer { drop() }
        let work = try Scratch("bus-latency")
        defer { work.remove() }
        let hosts = try startHosts(1, url: url, work: work)
        defer { stop(hosts) }
        let client = try await waitUntilHandled("c.echo", url: url)
        func sendP50() async throws -> Double {
            var sends = LatencySampler(capacity: 200)
            for _ in 0..<200 {
                try await sends.measure { _ = try await client.send(CommandRequest(name: "c.echo", payload: Data("{}".utf8)), onEvent: nil) }
                try await Task.sleep(for: .milliseconds(5))
            }
            return sends.percentile(50) / 1_000_000
        }
        let send = try await sendP50()
        let connection = try PGConnection(url: url)
        let wakeups = try connection.execute("""
            SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY EXTRACT(EPOCH FROM started_at - created_at))::float8 * 1000 AS p50
            FROM cmdbus.commands WHERE kind = 'command'
            """)
        try insertPending(100_000, named: "c.echo", dueIn: 3_600, on: connection)
        try connection.execute("ANALYZE cmdbus.commands")
        let besideScheduled = try await sendP50()
        await client.close()
        return (wakeups[row: 0].double("p50") ?? .nan, send, besideScheduled)
    }
}
