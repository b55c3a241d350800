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

    /// A bus host has no socket: its dashboard's "Try again" (`POST /api/plugins/forget`) loads
    /// a quarantined file again, unchanged, and the host offers its commands again, so what
    /// waited for them runs. `cmdbus plugins forget --bus` says where to do it instead.
    @Test(.timeLimit(.minutes(3)))
    func aBusHostsDashboardTriesAQuarantinedPluginAgain() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let host = try await BusHostProcess(bus: database.url, plugins: [], fixtures: [("misbehave", [])], extra: ["--isolate", "--http", "127.0.0.1:0"])
        defer { Task { await host.stop(); await database.drop() } }
        for _ in 0..<3 {
            #expect(try await Self.bus(database.url, "run", "bad.segv", "{}").status != 0)
        }
        #expect(await waitUntil(.seconds(30)) { host.output.contains("no longer offering bad.abort") }, "\(host.output)")
        try await database.insertPending(5, named: "ok.echo", payload: #"{"x":1}"#)
        let file = host.work.file("plugins").appendingPathComponent("misbehave.so").path
        let refused = try await Self.bus(database.url, "plugins", "forget", file)
        #expect(refused.status == 64 && refused.stderr.contains("each host of the shared bus loads and quarantines its own plugin files: on the host, touch"), "\(refused.stderr)")

        let line = try #require(host.output.split(separator: "\n").first { $0.contains("dashboard on ") })
        let url = String(line.split(separator: " ").first { $0.hasPrefix("http://") }!.dropLast())
        let token = try #require(try await DashboardTests.http("GET", url + "/").body.split(separator: "\"").first { $0.count == 64 && $0.allSatisfy(\.isHexDigit) }.map(String.init))
        let tried = try await DashboardTests.http("POST", url + "/api/plugins/forget?path=" + file, headers: ["X-Cmdbus-Token": token])
        #expect(tried.status == 200 && tried.body.contains(#""name":"misbehave""#), "\(tried.body)")
        #expect(await waitUntil(.seconds(60)) {
            (try? await database.sql("SELECT state, count(*) FROM cmdbus.commands WHERE name = 'ok.echo' GROUP BY 1")) == "succeeded|5\n"
        }, "\(host.output)")
        #expect(!(try await Self.bus(database.url, "plugins").stdout.contains("quarantined")))
    }
}
