import Foundation
import Testing

/// A server whose journal is removed, renamed or replaced under it says so: it went on
/// recording into a file no other process could read (gone, if removed, when it stopped)
/// while `/readyz` said ready and nothing was logged.
struct JournalFileWatchTests {
    @Test(.timeLimit(.minutes(3)))
    func aServerSaysWhenItsJournalIsRemovedOrReplacedUnderIt() async throws {
        let server = try await ServerTests.Server(arguments: ["--http", "127.0.0.1:0"])
        defer { server.work.remove() }
        let log: @Sendable () -> String = { [path = server.log] in (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }
        var dashboard: String?
        _ = await waitUntil(.seconds(30)) { dashboardURL(in: log()) != nil }
        dashboard = dashboardURL(in: log())
        let readyz = try #require(dashboard, "\(log())") + "/readyz"
        let sent = try await cmdbus(["run", "greet", "-p", "name=Ada", "--connect=\(server.socket)"])
        #expect(sent.status == 0, "\(sent.stderr)")
        #expect(try await SharedBusTests.get(readyz) == (200, "ready\n"))
        let readiness: @Sendable () async throws -> (status: Int, body: String) = { try await SharedBusTests.get(readyz) }

        // Renamed away: not ready, logged once as an error, and `status` warns.
        let journal = server.journal, moved = server.journal + ".moved"
        try FileManager.default.moveItem(atPath: journal, toPath: moved)
        // Named as the server was given it: the default, relative to its working directory.
        let removed = "journal ./.cmdbus/journal.sqlite was removed or renamed while this process writes to it"
        #expect(await waitUntil(.seconds(30), every: .milliseconds(200)) { (try? await readiness())?.status == 503 })
        let answer = try await readiness()
        #expect(answer.body.hasPrefix("not ready: \(removed)") && answer.body.contains("rename the file back"), "\(answer.body)")
        let status = try await cmdbus(["status", "--connect=\(server.socket)"])
        #expect(status.stdout.contains("warning: \(removed)"), "\(status.stdout)")
        let json = try jsonObject(try await cmdbus(["status", "--json", "--connect=\(server.socket)"]).stdout)
        #expect((json["journalProblem"] as? String)?.hasPrefix(removed) == true, "\(json)")
        #expect(log().contains("cmdbus: error: \(removed)"), "\(log())")

        // Renamed back: the path leads to the file the server writes, and it is ready again.
        try FileManager.default.moveItem(atPath: moved, toPath: journal)
        #expect(await waitUntil(.seconds(30), every: .milliseconds(200)) { (try? await readiness())?.status == 200 })
        #expect(log().contains("journal ./.cmdbus/journal.sqlite leads to the file this server writes again"), "\(log())")

        // Replaced by a copy (a restore under a running server): another file at the path.
        let copy = server.work.file("copy.sqlite").path
        try FileManager.default.copyItem(atPath: journal, toPath: copy)
        try FileManager.default.removeItem(atPath: journal)
        try FileManager.default.moveItem(atPath: copy, toPath: journal)
        #expect(await waitUntil(.seconds(30), every: .milliseconds(200)) { (try? await readiness())?.body.contains("was replaced by another file") == true })
        #expect(log().components(separatedBy: "cmdbus: error: journal").count == 3, "one error a change: \(log())")
        await server.stop()
    }
}
