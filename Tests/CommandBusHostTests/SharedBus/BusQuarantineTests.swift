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
        #expect(listed.stdout.contains(":\(host.pid), quarantined: its worker crashed 3 times within 60 seconds (last: crashed with SIGSEGV); replace its file"),
                "\(listed.stdout)")
        // So does its status, under the host.
        let status = try await Self.bus(database.url, "bus", "status")
        #expect(status.stdout.contains("\n    quarantined: plugin 'misbehave' (\(host.work.file("plugins").path)/misbehave.so): its worker crashed 3 times within 60 seconds")
                && status.stdout.contains("'cmdbus plugins forget FILE.so --bus URL' loads a quarantined file again"), "\(status.stdout)")

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

    /// A bus host's dashboard says on its hosts page what is quarantined on which host, and
    /// its "Try again on every host" (`POST /api/hosts/forget`) has each host with that file
    /// load it again; its plugins page's "Try again" (`POST /api/plugins/forget`) does so on
    /// this host (which has no socket). Each time, the host offers the plugin's commands
    /// again, and what waited for them runs.
    @Test(.timeLimit(.minutes(3)))
    func aBusHostsDashboardTriesAQuarantinedPluginAgain() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let host = try await BusHostProcess(bus: database.url, plugins: [], fixtures: [("misbehave", [])], extra: ["--isolate", "--http", "127.0.0.1:0"])
        defer { Task { await host.stop(); await database.drop() } }
        let url = try #require(dashboardURL(in: host.output))
        func quarantineAndQueue(_ count: Int) async throws {
            for _ in 0..<3 {
                #expect(try await Self.bus(database.url, "run", "bad.segv", "{}").status != 0)
            }
            #expect(await waitUntil(.seconds(30)) { !(host.output.components(separatedBy: "no longer offering bad.abort").count - 1 < count) }, "\(host.output)")
            try await database.insertPending(5, named: "ok.echo", payload: #"{"x":1}"#)
        }
        func echoesRun(_ count: Int) async -> Bool {
            await waitUntil(.seconds(60)) {
                (try? await database.sql("SELECT state, count(*) FROM cmdbus.commands WHERE name = 'ok.echo' GROUP BY 1")) == "succeeded|\(count)\n"
            }
        }

        // The hosts page says what is quarantined on which host, and tries it again on each.
        try await quarantineAndQueue(1)
        let tryOnEveryHost = """
            (async () => {
              const listed = document.querySelector('main table').textContent;
              [...document.querySelectorAll('main button')].find(b => b.textContent === 'Try again on every host').click();
              for (let i = 0; i < 300; i++) {
                await new Promise(r => setTimeout(r, 100));
                const toast = document.getElementById('toast');
                if (!toast.hidden) return listed + '|' + toast.className + ': ' + toast.textContent;
              }
              return listed + '|no toast';
            })()
            """
        let page = try await DashboardTests.browse(
            url + "/#/hosts", waitFor: "document.querySelector('main table button')", shot: "bus-host-quarantined.png", evals: [tryOnEveryHost]
        )
        let shown = (page.results.first as? String ?? "").components(separatedBy: "|")
        #expect(shown.first?.contains("quarantined misbehave: its worker crashed 3 times") == true, "\(page.results)")
        #expect(shown.last == "toast: Loaded misbehave.so again on 1 of 1 host", "\(page.results) \(page.exceptions)")
        #expect(await echoesRun(5), "\(host.output)")

        // The plugins page's Try again, through its API, on this host.
        try await quarantineAndQueue(2)
        let token = try #require(try await DashboardTests.http("GET", url + "/").body.split(separator: "\"").first { $0.count == 64 && $0.allSatisfy(\.isHexDigit) }.map(String.init))
        let file = host.work.file("plugins").appendingPathComponent("misbehave.so").path
        let tried = try await DashboardTests.http("POST", url + "/api/plugins/forget?path=" + file, headers: ["X-Cmdbus-Token": token])
        #expect(tried.status == 200 && tried.body.contains(#""name":"misbehave""#), "\(tried.body)")
        #expect(await echoesRun(10), "\(host.output)")
        #expect(!(try await Self.bus(database.url, "plugins").stdout.contains("quarantined")))
        let nowhere = try await DashboardTests.http("POST", url + "/api/hosts/forget?file=nothing.so", headers: ["X-Cmdbus-Token": token])
        #expect(nowhere.status == 404 && nowhere.body.contains("no live host of the bus has a plugin file named 'nothing.so'"), "\(nowhere.body)")
    }

    /// A name whose plugin is quarantined on some hosts only is marked in the bus's queues,
    /// with where. The hosts that still have it take what waits, so nothing said why its queue
    /// drained slower; only a name no live host handles was marked ("no live host").
    @Test(.timeLimit(.minutes(3)))
    func aNameQuarantinedOnSomeHostsIsMarkedInTheQueues() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let first = try await BusHostProcess(bus: database.url, plugins: [], fixtures: [("misbehave", [])], extra: ["--isolate", "--http", "127.0.0.1:0"])
        let second = try await BusHostProcess(bus: database.url, plugins: [], fixtures: [("misbehave", [])], extra: ["--isolate"])
        defer { Task { await first.stop(); await second.stop(); await database.drop() } }
        // Three crashes within a minute quarantine the plugin on a host, which then claims no
        // more of them: of five, one host has three, the other two at most.
        for _ in 0..<5 {
            #expect(try await Self.bus(database.url, "run", "bad.segv", "{}").status != 0)
        }
        #expect(await waitUntil(.seconds(30)) { [first, second].contains { $0.output.contains("no longer offering bad.abort") } })
        let quarantined = first.output.contains("no longer offering bad.abort") ? first : second
        let serving = quarantined === first ? second : first
        #expect(!serving.output.contains("no longer offering"), "\(serving.output)")
        // Paused, so what waits stays to be seen.
        #expect(try await Self.bus(database.url, "bus", "pause", "ok.echo").status == 0)
        try await database.insertPending(3, named: "ok.echo", payload: #"{"x":1}"#)

        let status = try await Self.bus(database.url, "bus", "status")
        let line = status.stdout.split(separator: "\n").first { $0.hasPrefix("  ok.echo") }.map(String.init) ?? ""
        #expect(line.contains("3 pending") && line.contains("; quarantined on ") && line.hasSuffix(":\(quarantined.pid)"), "\(status.stdout)")
        #expect(!line.contains("no live host"), "\(line)")
        // The dashboard's queues read the same status: the host's label, not the other's.
        let hosts = try await Self.get(try #require(dashboardURL(in: first.output)) + "/api/hosts")
        let queues = try jsonObject(hosts.body)["queues"] as? [[String: Any]] ?? []
        let marked = queues.first { $0["command"] as? String == "ok.echo" }?["quarantinedOn"] as? [String]
        #expect(marked?.count == 1 && marked?.first?.hasSuffix(":\(quarantined.pid)") == true, "\(hosts.body)")
        #expect(queues.first { $0["command"] as? String == "bad.segv" } == nil)
        // And the hosts page marks the queue so, beside its pause.
        let badges = "[...document.querySelectorAll('main .badge')].filter(b => b.textContent.startsWith('quarantined on'))"
        let page = try await DashboardTests.browse(
            try #require(dashboardURL(in: first.output)) + "/#/hosts", waitFor: "\(badges).length > 0", shot: "bus-queue-quarantined.png",
            evals: ["\(badges).map(b => b.textContent + '|' + b.title).join('\\n')"]
        )
        let badge = page.results.first as? String ?? ""
        #expect(badge.hasPrefix("quarantined on ") && badge.contains(":\(quarantined.pid)|its plugin is quarantined on ")
                && badge.hasSuffix("the other hosts that have it take it (the Hosts page says why, and tries it again)"), "\(page.results) \(page.exceptions)")
        #expect(page.exceptions.isEmpty, "\(page.exceptions)")
    }

    /// `cmdbus plugins forget FILE --bus URL` has every live host with a file of that name load
    /// it again, and prints each one's answer: the quarantined host serves again, a host without
    /// the file says nothing, a name no host has is refused, and a host whose file does not load
    /// says why, and the command fails.
    @Test(.timeLimit(.minutes(3)))
    func forgetOnTheBusLoadsTheFileAgainOnEachHostThatHasIt() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let quarantined = try await BusHostProcess(bus: database.url, plugins: [], fixtures: [("misbehave", [])], extra: ["--isolate"])
        let other = try await BusHostProcess(bus: database.url, plugins: ["libGreeter.so"])
        defer { Task { await quarantined.stop(); await other.stop(); await database.drop() } }
        for _ in 0..<3 {
            #expect(try await Self.bus(database.url, "run", "bad.segv", "{}").status != 0)
        }
        #expect(await waitUntil(.seconds(30)) { quarantined.output.contains("no longer offering bad.abort") }, "\(quarantined.output)")
        try await database.insertPending(5, named: "ok.echo", payload: #"{"x":1}"#)

        let forgot = try await Self.bus(database.url, "plugins", "forget", "misbehave.so")
        #expect(forgot.status == 0, "\(forgot.stderr)")
        let lines = forgot.stdout.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].contains(":\(quarantined.pid): misbehave 1 (") && lines[0].hasPrefix("loaded again on "), "\(forgot.stdout)")
        #expect(await waitUntil(.seconds(60)) {
            (try? await database.sql("SELECT state, count(*) FROM cmdbus.commands WHERE name = 'ok.echo' GROUP BY 1")) == "succeeded|5\n"
        }, "\(quarantined.output)")

        let nowhere = try await Self.bus(database.url, "plugins", "forget", "nothing.so")
        #expect(nowhere.status == 1 && nowhere.stderr.contains("no live host of the bus has a plugin file named 'nothing.so'"), "\(nowhere.stderr)")

        // A file that no longer loads: the host keeps what it had, and says why it did not load it again.
        let path = quarantined.work.file("plugins").appendingPathComponent("misbehave.so").path
        try Data("not a shared library\n".utf8).write(to: URL(fileURLWithPath: path + ".new"))
        #expect(rename(path + ".new", path) == 0)
        #expect(await waitUntil(.seconds(30)) { quarantined.output.contains("skipped the replacement of \(path)") }, "\(quarantined.output)")
        let broken = try await Self.bus(database.url, "plugins", "forget", path, "--json")
        #expect(broken.status == 1, "\(broken.stderr)")
        let hosts = try jsonObject(broken.stdout)["hosts"] as? [[String: Any]]
        #expect(hosts?.count == 1 && hosts?.first?["ok"] as? Bool == false && (hosts?.first?["message"] as? String)?.hasPrefix("\(path): ") == true, "\(broken.stdout)")
        #expect(broken.stderr.contains("1 of 1 host with a file named 'misbehave.so' did not load it again"), "\(broken.stderr)")
    }

    /// A host that stops answering while a forget on the bus waits for it (frozen here, as a
    /// hung or killed host is: no answer, no heartbeat) is waited for no longer than its lease:
    /// the forget ends saying the host left the bus before it answered, where it waited 30 s
    /// and said the host had not answered in time.
    @Test(.timeLimit(.minutes(2)))
    func aForgetOnTheBusWaitsNoLongerForAHostThatLeftIt() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let host = try await BusHostProcess(bus: database.url, plugins: ["libGreeter.so"])
        defer { Task { host.signal(SIGCONT); await host.stop(); await database.drop() } }
        host.signal(SIGSTOP)
        let forgot = try await Self.bus(database.url, "plugins", "forget", "libGreeter.so", "--json")
        #expect(forgot.status == 1, "\(forgot.stderr)")
        let hosts = try jsonObject(forgot.stdout)["hosts"] as? [[String: Any]]
        #expect(hosts?.count == 1 && hosts?.first?["ok"] as? Bool == false, "\(forgot.stdout)")
        #expect((hosts?.first?["message"] as? String)?.hasPrefix("left the bus before it answered") == true, "\(forgot.stdout)")
    }
}
