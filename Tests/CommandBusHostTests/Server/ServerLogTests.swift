import CommandBusSupport
import Foundation
import Testing

/// What `cmdbus serve` logs: a line per command end, handlers' log lines, worker crashes and
/// restarts, as text or JSON.
struct ServerLogTests {
    @Test func theServerLogsEachCommandHandlerLinesAndWorkerCrashesAsJSON() async throws {
        let work = try TemporaryDirectory("cmdbus-serve-log")
        defer { work.remove() }
        let plugins = try work.subdirectory("plugins")
        try plugins.install("libGreeter.so", "libGreetAll.so")
        try await compileFixture("misbehave", into: plugins)
        let log = work.file("serve.log"), socket = work.file("s.sock").path
        let server = try launchedChild(
            try TestPaths.product("cmdbus").path,
            ["serve", "--plugins", plugins.path, "--socket", socket, "--isolate", "--log-format", "json", "--insecure-plugins"],
            environment: ["CMDBUS_REGISTRY": work.file("registry.json").path], directory: work.path,
            standardOutput: .discard, standardError: .file(log.path)
        )
        defer { server.send(SIGTERM) }
        let output: @Sendable () -> String = { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }
        #expect(await waitUntil(.seconds(60)) { output().contains("serving on") })

        let greeted = try await cmdbus(["run", "greet-all", "-p", #"names=["Ada"]"#, "--connect=\(socket)"])
        #expect(greeted.status == 0, "\(greeted.stderr)")
        let crashed = try await cmdbus(["run", "bad.segv", "--connect=\(socket)"])
        #expect(crashed.status != 0)
        #expect(await waitUntil(.seconds(30)) { output().contains("bad.segv") && output().contains("crashed with SIGSEGV") })

        let lines = output().split(separator: "\n").map(String.init)
        let objects = lines.compactMap { try? jsonObject($0) }
        #expect(objects.count == lines.count, "every line is one JSON object: \(lines.filter { (try? jsonObject($0)) == nil })")
        #expect(objects.allSatisfy { $0["time"] is String && $0["level"] is String && $0["message"] is String })
        let messages = objects.compactMap { $0["message"] as? String }
        #expect(messages.contains { $0.hasPrefix("greet-all ") && $0.contains(" succeeded in ") })
        #expect(messages.contains { $0.hasPrefix("greet ") && $0.contains(" succeeded in ") }, "subcommands get a line too")
        #expect(messages.contains { $0.hasPrefix("bad.segv ") && $0.contains(" failed in ") })
        #expect(objects.contains { ($0["message"] as? String)?.contains("greeted 1 person") == true && $0["level"] as? String == "info" })
        #expect(objects.contains {
            ($0["message"] as? String)?.contains("misbehave.so crashed with SIGSEGV") == true && $0["level"] as? String == "warning"
        })
        let bad = try await cmdbus(["serve", "--log-format", "xml", "--socket", work.file("other.sock").path])
        #expect(bad.status == 64 && bad.stderr.contains("--log-format takes text or json"))
    }

    /// Found by hand: `cmdbus serve 2>&1 | head` ended the server by SIGPIPE at its first log
    /// line after `head` left, with the commands it ran. A server outlives its log's reader.
    @Test(.timeLimit(.minutes(2)))
    func theServerOutlivesTheReaderOfItsLog() async throws {
        // The server's standard error goes to a `head` that reads 100 bytes and leaves.
        let server = try await ServerTests.Server(launcher: ["/bin/bash", "-c", #"exec "$@" 2> >(head -c 100 > /dev/null)"#, "bash"])
        defer { server.work.remove() }
        for name in ["Ada", "Grace", "Barbara"] {
            let greeted = try await cmdbus(["run", "greet", "-p", "name=\(name)", "--connect", server.socket])
            #expect(greeted.status == 0 && greeted.stdout.contains("Hello, \(name)!"), "\(greeted.stderr)")
        }
        #expect(server.process.isRunning)
        await server.stop()
        #expect(await server.process.wait() == .exited(0))
    }
}
