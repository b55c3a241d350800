import CommandBus
@testable import CommandBusPostgres
import Foundation
import Testing

extension SharedBusTests {
    /// A bus host whose isolated plugin is quarantined for crashing stops offering that
    /// plugin's commands at once: what is put on the bus for them waits (for another host, or
    /// for the file to be replaced) instead of failing on this host one after another, and a
    /// replaced file is loaded anew and offered again. Before, the host went on claiming them
    /// and failed each with "quarantined" (1,452 of 3,000 in about a second).
    @Test(.timeLimit(.minutes(3)))
    func aQuarantinedPluginsCommandsWaitUntilItsFileIsReplaced() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let host = try await BusHostProcess(bus: database.url, plugins: [], fixtures: [("misbehave", [])], extra: ["--isolate"])
        defer { Task { await host.stop(); await database.drop() } }
        // Three crashes within a minute quarantine the plugin.
        for _ in 0..<3 {
            #expect(try await Self.bus(database.url, "run", "bad.segv", "{}").status != 0)
        }
        #expect(await waitUntil(.seconds(30)) { host.output.contains("no longer offering bad.abort, bad.alloc, bad.exit, bad.loop, bad.print, bad.segv, ok.echo") },
                "\(host.output)")
        #expect(try await database.sql("SELECT state, error_code, count(*) FROM cmdbus.commands GROUP BY 1, 2") == "failed|pluginCrashed|3\n")
        // The bus's listing says on which host, and why.
        let listed = try await Self.bus(database.url, "plugins")
        #expect(listed.stdout.contains(":\(host.pid), quarantined: its worker crashed 3 times within 60.0 seconds (last: crashed with SIGSEGV); replace its file"),
                "\(listed.stdout)")

        try await database.insertPending(20, named: "ok.echo", payload: #"{"x":1}"#)
        try await Task.sleep(for: .seconds(2))
        #expect(try await database.sql("SELECT state, count(*) FROM cmdbus.commands WHERE name = 'ok.echo' GROUP BY 1") == "pending|20\n")

        // The file replaced (a new build, here the same one written anew) is loaded and offered again.
        let plugins = host.work.file("plugins")
        let file = plugins.appendingPathComponent("misbehave.so"), copy = plugins.appendingPathComponent(".misbehave.so.new")
        try FileManager.default.copyItem(at: file, to: copy)
        #expect(rename(copy.path, file.path) == 0)
        #expect(await waitUntil(.seconds(60)) {
            (try? await database.sql("SELECT state, count(*) FROM cmdbus.commands WHERE name = 'ok.echo' GROUP BY 1")) == "succeeded|20\n"
        }, "\(host.output)")
        #expect(!(try await Self.bus(database.url, "plugins").stdout.contains("quarantined")))
    }
}
