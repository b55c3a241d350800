import Foundation
import Testing

/// `cmdbus plugins --connect` names an isolated plugin's worker process and counts its calls in
/// progress, so an operator can find the process a stuck command runs in.
@Suite struct IsolatedWorkerListingTests {
    @Test func theListingNamesTheWorkerProcessAndItsCallsInProgress() async throws {
        let work = try TemporaryDirectory("cmdbus-serve")
        try await compileFixture("misbehave", into: try work.subdirectory("plugins"))
        let server = try await ServerTests.Server(work: work, arguments: ["--isolate"])
        defer { server.work.remove() }
        @Sendable func client(_ arguments: String...) async throws -> ProcessResult {
            try await cmdbus(arguments + ["--connect", server.socket], directory: server.work.url)
        }
        let posted = try await client("run", "bad.loop", "{}", "--no-wait")
        let id = posted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(posted.status == 0 && UUID(uuidString: id) != nil, "\(posted.stdout)\(posted.stderr)")
        let listed = await naming("the listing to count the looping call") {
            await waitUntil { (try? await client("plugins").stdout.contains(", 1 call in progress\n")) == true }
        }
        #expect(listed)
        let plugin = try #require(try PluginReplacementTests.listed("misbehave", in: try await client("plugins", "--json").stdout))
        let worker = try #require(plugin["isolated"] as? [String: Any], "\(plugin)")
        let pid = try #require(worker["pid"] as? Int, "\(worker)")
        #expect(worker["callsInProgress"] as? Int == 1 && worker["running"] as? Bool == true, "\(worker)")
        // The pid is the worker's: a live process other than the server, which started it.
        let parent = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8).split(separator: " ")[3]
        #expect(pid != server.process.pid && parent == "\(server.process.pid)", "pid \(pid), parent \(parent)")
        #expect(try await client("plugins").stdout.contains("\n    isolated: its worker is running as pid \(pid), 1 call in progress\n"))

        // The looping command cancelled: a plugin without cancel() has its worker killed at once.
        #expect(try await client("cancel", id).status == 0)
        // The server hears its worker end a moment after the process has: the listing is asked until it has.
        let relisted = await naming("the listing to drop the cancelled call and its worker") {
            await waitUntil {
                guard let output = try? await client("plugins", "--json").stdout,
                      let plugin = try? PluginReplacementTests.listed("misbehave", in: output),
                      let worker = plugin["isolated"] as? [String: Any] else { return false }
                return worker["callsInProgress"] as? Int == 0 && worker["pid"] as? Int != pid
            }
        }
        #expect(relisted)
        let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        #expect(stat == nil || stat?.contains(") Z ") == true, "the cancelled command's worker \(pid) still runs: \(stat ?? "")")
        await server.stop()
    }
}
