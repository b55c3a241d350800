import CommandBusSupport
import Foundation
import Testing

extension SharedBusTests {
    /// A host of the shared bus serves its dashboard while it waits for the bus: `/readyz`
    /// answers 503 saying it has not joined, `/healthz` 200; once joined, `/readyz` answers 200.
    @Test(.timeLimit(.minutes(2)))
    func aBusHostsReadinessSaysWhetherItHasJoined() async throws {
        let work = try TemporaryDirectory("cmdbus-bus-health")
        defer { work.remove() }
        let plugins = try work.subdirectory("plugins")
        try plugins.install("libGreeter.so")
        let log = work.file("host.log")
        let waiting = try launchedChild(
            try TestPaths.product("cmdbus").path,
            ["serve", "--bus", "postgres://nobody@127.0.0.1:1/nothing?connect_timeout=1", "--plugins", plugins.path, "--http", "127.0.0.1:0"],
            environment: ["CMDBUS_REGISTRY": work.file("registry.json").path], directory: work.path,
            standardOutput: .discard, standardError: .file(log.path)
        )
        defer { waiting.send(SIGKILL) }
        @Sendable func logged() -> String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }
        #expect(await waitUntil(.seconds(30)) { logged().contains("waiting for the bus") })
        let dashboard = try #require(dashboardURL(in: logged()), "\(logged())")
        #expect(try await Self.get(dashboard + "/readyz") == (503, "not ready: waiting for the bus: this host has not joined it yet\n"))
        #expect(try await Self.get(dashboard + "/healthz") == (200, "ok\n"))
        #expect(try await Self.get(dashboard + "/metrics").status == 200)
        waiting.send(SIGTERM)
        #expect(await waiting.wait() == .exited(0))

        let database = try await SharedBusDatabase()
        defer { Task { await database.drop() } }
        let host = try await BusHostProcess(bus: database.url, plugins: ["libGreeter.so"], extra: ["--http", "127.0.0.1:0"])
        let joined = try #require(dashboardURL(in: host.output), "\(host.output)")
        #expect(try await Self.get(joined + "/readyz") == (200, "ready\n"))
        await host.stop()
    }

    /// A GET from Python's standard library: the status and the body.
    static func get(_ url: String) async throws -> (status: Int, body: String) {
        let script = """
            import sys, urllib.request, urllib.error
            try:
                response = urllib.request.urlopen(sys.argv[1], timeout=30); print(response.status); sys.stdout.write(response.read().decode())
            except urllib.error.HTTPError as error:
                print(error.code); sys.stdout.write(error.read().decode())
            """
        let result = try await runProcess("/usr/bin/env", ["python3", "-c", script, url])
        try #require(result.status == 0, "request failed: \(result.stderr)")
        let lines = result.stdout.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false)
        return (Int(lines[0]) ?? 0, lines.count > 1 ? String(lines[1]) : "")
    }
}
