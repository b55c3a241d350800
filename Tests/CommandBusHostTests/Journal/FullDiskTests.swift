import Foundation
import Testing

/// A journal whose disk fills up while the server runs: commands are refused with the reason and
/// what to do, none is lost, and the server serves again once there is room.
struct FullDiskTests {
    @Test func aFullDiskRefusesCommandsWithTheReasonAndTheServerRecoversWhenThereIsRoom() async throws {
        let work = try TemporaryDirectory("cmdbus-full-disk")
        defer { work.remove() }
        let disk = try work.subdirectory("disk")
        // A small file system of the server's own: a tmpfs mounted in a mount namespace that only
        // the server's process sees (nothing to unmount if the test dies). The test reaches it
        // through the server's `/proc/PID/root`.
        let mountAndRun = #"mount -t tmpfs -o size=4m tmpfs "$0" && exec "$@""#
        let server = try await ServerTests.Server(
            work: work, arguments: ["--journal", disk.file("journal.sqlite").path],
            launcher: ["/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", mountAndRun, disk.path]
        )
        defer { server.process.send(SIGKILL) }
        let filler = "/proc/\(server.process.pid)/root\(disk.path)/filler"
        #expect(FileManager.default.fileExists(atPath: "/proc/\(server.process.pid)/root\(disk.path)/journal.sqlite"))
        #expect(!FileManager.default.fileExists(atPath: disk.file("journal.sqlite").path), "the journal is on the server's own file system")

        func greet(_ name: String) async throws -> ProcessResult {
            try await cmdbus(["run", "greet", "-p", "name=\(name)", "--json", "--connect", server.socket], directory: work.url)
        }
        #expect(try await greet("before").stdout.contains("Hello, before!"))

        let fill = try await runProcess("/bin/dd", ["if=/dev/zero", "of=\(filler)", "bs=64k"])
        #expect(fill.stderr.contains("No space left on device"), "dd: \(fill.stderr)")
        var refused = 0
        for attempt in 0..<20 {
            let result = try await greet("full\(attempt)")
            guard result.status != 0 else { continue }
            refused += 1
            #expect(ServerTests.errorCode(result.stderr) == "journalFailed", "\(result.stderr)")
            #expect(result.stderr.contains("the disk holding it is full"), "\(result.stderr)")
            #expect(result.stderr.contains("free space on it, then try again"), "\(result.stderr)")
        }
        #expect(refused > 0, "a full disk refused no command")
        let log = try String(contentsOfFile: server.log, encoding: .utf8)
        #expect(log.contains("cmdbus: warning: greet "), "a refused command is a warning: \(log)")

        try FileManager.default.removeItem(atPath: filler)
        let after = try await greet("after")
        #expect(after.status == 0 && after.stdout.contains("Hello, after!"), "\(after.stderr)")
        #expect(try await server.client("""
            s, f = connect()
            print(ask(f, {"id": 1, "op": "status"})["ok"])
            """) == "True\n")
        // Every command that was answered is in the journal, as succeeded.
        // Read in the server's mount namespace (SQLite resolves `/proc/PID/root` to this one's `/`).
        let listing = try await runProcess(
            "/usr/bin/nsenter",
            ["--target", "\(server.process.pid)", "--mount", "--", try TestPaths.product("cmdbus").path, "journal", "list", "--json", "--journal", disk.file("journal.sqlite").path]
        )
        try #require(listing.status == 0, "\(listing.stderr)")
        let entries = try #require(try JSONSerialization.jsonObject(with: Data(listing.stdout.utf8)) as? [[String: Any]])
        #expect(entries.filter { $0["state"] as? String == "succeeded" }.count == 2 + 20 - refused)
    }
}
