import Foundation
import Testing

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

    /// Runs SQL against this test's database.
    @discardableResult
    func sql(_ sql: String) async throws -> String { try await Self.psql(url, sql) }

    func drop() async {
        _ = try? await Self.psql(Self.clusterURL, "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
    }
}

/// A `cmdbus serve --bus` host as a real process, with its own plugin directory.
final class BusHostProcess: @unchecked Sendable {
    let process = Process()
    let work: TemporaryDirectory
    let log: URL

    /// Starts a host with the named build products as its plugins; returns once it has joined the bus.
    init(bus: String, plugins: [String], lease: String = "2", drain: String = "10", extra: [String] = []) async throws {
        work = try TemporaryDirectory("cmdbus-bus-host")
        let directory = try work.subdirectory("plugins")
        for plugin in plugins { try directory.install(plugin) }
        log = work.file("host.log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        process.executableURL = try TestPaths.product("cmdbus")
        process.arguments = ["serve", "--bus", bus, "--plugins", directory.path, "--lease", lease, "--drain", drain] + extra
        process.currentDirectoryURL = work.url
        process.environment = ProcessInfo.processInfo.environment.merging(["CMDBUS_REGISTRY": work.file("registry.json").path]) { _, new in new }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = try FileHandle(forWritingTo: log)
        try process.run()
        let joined = await waitUntil(.seconds(60)) { self.output.contains("joined the bus") || !self.process.isRunning }
        try #require(joined && process.isRunning, "the host did not join the bus: \(output)")
    }

    /// What the host logged so far.
    var output: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }

    var pid: Int32 { process.processIdentifier }

    func signal(_ number: Int32) { kill(pid, number) }

    /// SIGTERM, then waits for it to leave.
    func stop() async {
        if process.isRunning { process.terminate() }
        _ = await waitUntil(.seconds(60)) { !self.process.isRunning }
        work.remove()
    }

    /// SIGKILL: the host dies holding whatever it claimed.
    func kill9() async {
        signal(SIGKILL)
        _ = await waitUntil(.seconds(30)) { !self.process.isRunning }
    }
}
