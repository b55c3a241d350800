import CommandBusSupport
import Foundation
import Testing

/// `cmdbus serve --http` end to end: the built binary, a real browser (headless Chromium through
/// scripts/lib/browser.py), promtool on a scrape taken under load, and hostile clients.
@Suite(.serialized)
struct DashboardTests {
    /// A `cmdbus serve --http 127.0.0.1:0` in a scratch directory, with the example and fixture
    /// plugins, and the C fixtures named in `fixtures` (Tests/Fixtures/BadPlugins) compiled.
    final class DashboardServer: @unchecked Sendable {
        let work: TemporaryDirectory
        let process: LaunchedProcess
        let log: URL
        private(set) var url = ""
        var socket: String { work.file("cmdbus.sock").path }

        init(extra: [String] = [], fixtures: [String] = []) async throws {
            work = try TemporaryDirectory("cmdbus-dashboard")
            let plugins = try work.subdirectory("plugins")
            try plugins.install("libGreeter.so", "libGreetAll.so", "libFixturePlugin.so")
            for fixture in fixtures { _ = try await compileFixture(fixture, into: plugins) }
            log = work.file("serve.log")
            process = try launchedChild(
                try TestPaths.product("cmdbus").path,
                ["serve", "--plugins", plugins.path, "--socket", work.file("cmdbus.sock").path, "--http", "127.0.0.1:0"] + extra,
                environment: ["CMDBUS_REGISTRY": work.file("registry.json").path], directory: work.path,
                standardOutput: .discard, standardError: .file(log.path)
            )
            Self.started.add(self)
            let ready = await waitUntil(.seconds(60)) { self.output.contains("serving on") || !self.process.isRunning }
            try #require(ready && process.isRunning, "the server did not start: \(output)")
            url = try #require(dashboardURL(in: output))
        }

        var output: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }

        /// Runs `cmdbus run` against the server.
        @discardableResult
        func run(_ arguments: String...) async throws -> ProcessResult {
            try await cmdbus(["run"] + arguments + ["--connect=\(socket)"])
        }

        /// An HTTP request to this server (``DashboardTests/http(_:_:headers:)``).
        func http(_ method: String = "GET", _ path: String, headers: [String: String] = [:]) async throws -> (status: Int, body: String) {
            try await DashboardTests.http(method, url + path, headers: headers)
        }

        /// Every server a test started and has not stopped.
        private static let started = StartedProcesses<DashboardServer>()

        /// Stops every server still running.
        static func stopAll() async {
            for server in started.takeAll() { await server.stop() }
        }

        func stop() async {
            process.send(SIGTERM)
            _ = await waitUntil(.seconds(30)) { !self.process.isRunning }
            work.remove()
        }
    }

    /// Screenshots go here, for a person to look at after a run.
    static let artifacts: URL = {
        let directory = TestPaths.packageRoot.appendingPathComponent(".build/test-artifacts/dashboard")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }()

    /// What the browser saw: the `--eval` results, any dialog a script opened, any uncaught exception.
    struct BrowserReport {
        var results: [Any]
        var dialogs: [String]
        var exceptions: [String]
        var waited: Bool
    }

    /// An HTTP request from Python's standard library: status, then the body, on stdout.
    static func http(_ method: String = "GET", _ url: String, headers: [String: String] = [:]) async throws -> (status: Int, body: String) {
        let script = """
            import json, sys, urllib.request, urllib.error
            request = urllib.request.Request(sys.argv[1], method=sys.argv[2], headers=json.loads(sys.argv[3]), data=b"" if sys.argv[2] == "POST" else None)
            try:
                response = urllib.request.urlopen(request, timeout=30)
                print(response.status); sys.stdout.write(response.read().decode())
            except urllib.error.HTTPError as error:
                print(error.code); sys.stdout.write(error.read().decode())
            """
        let headerText = String(decoding: try JSONSerialization.data(withJSONObject: headers), as: UTF8.self)
        let result = try await runProcess("/usr/bin/env", ["python3", "-c", script, url, method, headerText])
        try #require(result.status == 0, "request failed: \(result.stderr)")
        let lines = result.stdout.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false)
        return (Int(lines[0]) ?? 0, lines.count > 1 ? String(lines[1]) : "")
    }

    /// Opens `url` in headless Chromium, waits for `waitFor`, screenshots it as `shot`, evaluates `evals`.
    static func browse(_ url: String, waitFor: String, shot: String, evals: [String] = [], timeout: Int = 30) async throws -> BrowserReport {
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium"), "the dashboard tests need Chromium: scripts/test.sh installs Debian's chromium")
        let driver = TestPaths.packageRoot.appendingPathComponent("scripts/lib/browser.py").path
        var arguments = [driver, url, "--wait-for", waitFor, "--screenshot", artifacts.appendingPathComponent(shot).path, "--timeout", String(timeout)]
        for expression in evals { arguments += ["--eval", expression] }
        let result = try await runProcess("/usr/bin/env", ["python3"] + arguments, timeout: .seconds(Int64(timeout + 60)))
        let report = try jsonObject(result.stdout)
        return BrowserReport(
            results: report["results"] as? [Any] ?? [], dialogs: report["dialogs"] as? [String] ?? [],
            exceptions: report["exceptions"] as? [String] ?? [], waited: report["waited"] as? Bool ?? false
        )
    }

    @Test func everyPageRendersAndTheTreeShowsItsChildren() async throws {
        await DashboardServer.stopAll()
        let server = try await DashboardServer()
        try await server.run("greet-all", "-p", #"names=["Ada","Grace"]"#)
        try await server.run("fixture.fail", "-p", "message=disk full")
        let list = try await server.http("GET", "/api/commands?command=greet-all")
        let root = try #require(((try jsonObject(list.body))["commands"] as? [[String: Any]])?.first?["id"] as? String)

        let pages: [(hash: String, shot: String, ready: String)] = [
            ("#/", "overview.png", "document.querySelector('.cards')"),
            ("#/commands", "commands.png", "document.querySelector('main table')"),
            ("#/command/\(root)", "command.png", "document.querySelector('.waterfall')"),
            ("#/dead", "dead-letters.png", "document.querySelector('main table')"),
            ("#/plugins", "plugins.png", "document.querySelectorAll('main table').length >= 2"),
            ("#/hosts", "hosts.png", "document.querySelector('.empty')"),
        ]
        for page in pages {
            let report = try await Self.browse(server.url + "/" + page.hash, waitFor: page.ready, shot: page.shot)
            #expect(report.waited, "\(page.hash) never rendered")
            #expect(report.exceptions.isEmpty, "\(page.hash): \(report.exceptions)")
        }
        let tree = try await Self.browse(
            server.url + "/#/command/\(root)", waitFor: "document.querySelector('.waterfall')", shot: "tree.png",
            evals: [
                "[...document.querySelectorAll('.waterfall a text')].map(t => t.textContent).join('|')",
                "[...document.querySelectorAll('.timeline li')[0].children].slice(1).map(c => c.textContent).join('|')",
                "(li => li.children[2].textContent + '|' + li.querySelectorAll('wbr').length)([...document.querySelectorAll('.timeline li')].find(li => li.children[1].textContent === 'emitted'))",
            ]
        )
        #expect(tree.results.first as? String == "greet-all|└ greet|└ greet")
        // Its acceptance says what it left the command as, where it said "accepted" twice.
        #expect(tree.results.dropFirst().first as? String == "accepted|pending", "\(tree.results)")
        // An emitted payload may wrap between its members (a <wbr> after each comma), and reads as its JSON.
        #expect(tree.results.dropFirst(2).first as? String == #"greeted {"done":1,"name":"Ada","total":2}|2"#, "\(tree.results)")
        let dead = try await Self.browse(
            server.url + "/#/dead", waitFor: "document.querySelector('main table')", shot: "dead-letters.png",
            evals: ["document.querySelector('main table tbody').textContent"]
        )
        #expect((dead.results.first as? String)?.contains("disk full") == true)
        await DashboardServer.stopAll()
    }

    /// A page opened after commands ran lists them as just ended, newest first, where it said
    /// it was waiting for commands until the next one ended.
    /// An isolated plugin quarantined for crashing counts as quarantined, not loaded, on the
    /// overview and in `/metrics` (an alert on `cmdbus_plugins{state="quarantined"}` missed it,
    /// as it counted only what the probe refused), and the plugins page lists it with why.
    @Test func aPluginQuarantinedForCrashingIsCountedAndListedWithWhy() async throws {
        await DashboardServer.stopAll()
        let server = try await DashboardServer(extra: ["--isolate"], fixtures: ["misbehave"])
        for _ in 0..<3 { #expect(try await server.run("bad.segv").status != 0) }
        let overview = try jsonObject(try await server.http("GET", "/api/overview").body)
        #expect(overview["plugins"] as? [String: Int] == ["loaded": 3, "quarantined": 1, "skipped": 0], "\(overview)")
        let metrics = try await server.http("GET", "/metrics").body
        #expect(metrics.contains("cmdbus_plugins{state=\"quarantined\"} 1\n") && metrics.contains("cmdbus_plugins{state=\"loaded\"} 3\n"), "\(metrics)")
        #expect(metrics.contains("cmdbus_worker_restarts_total{plugin=\"misbehave\"} 2\n") && metrics.contains("cmdbus_worker_runs_again_total{plugin=\"misbehave\"} 0\n"))

        // The overview's Quarantined card leads to the plugins page, which lists it with why.
        let card = "document.querySelector('[data-card=\"Quarantined\"]').closest('a').getAttribute('href')"
        let overviewPage = try await Self.browse(server.url + "/#/", waitFor: "document.querySelector('.cards')", shot: "overview-quarantined.png", evals: [card])
        #expect(overviewPage.results.first as? String == "#/plugins", "\(overviewPage.results)")
        let panel = "[...document.querySelectorAll('.panel')].find(p => p.textContent.startsWith('Quarantined and skipped')).textContent"
        let report = try await Self.browse(
            server.url + "/#/plugins", waitFor: "document.querySelectorAll('main table').length >= 2", shot: "plugins-quarantined.png",
            evals: [panel, "[...document.querySelectorAll('main table')[2].rows].filter(r => r.textContent.includes('quarantined')).map(r => r.cells[0].textContent).sort().join(' ')"]
        )
        #expect(report.exceptions.isEmpty, "\(report.exceptions)")
        let listed = report.results.first as? String ?? ""
        #expect(listed.contains("misbehave.so") && listed.contains("its worker crashed 3 times") && listed.contains("cmdbus plugins forget FILE --connect"), "\(listed)")
        // Who handles what marks the quarantined plugin's commands, and only those.
        #expect(report.results.last as? String == "bad.abort bad.alloc bad.exit bad.loop bad.print bad.segv ok.echo", "\(report.results)")

        // "Try again" loads the file anew, unchanged, through the page's own POST (and its token).
        let tryAgain = """
            (async () => {
              [...document.querySelectorAll('button')].find(b => b.textContent === 'Try again').click();
              for (let i = 0; i < 300; i++) {
                await new Promise(r => setTimeout(r, 100));
                const toast = document.getElementById('toast');
                if (!toast.hidden) return toast.className + ': ' + toast.textContent;
              }
              return 'no toast';
            })()
            """
        let clicked = try await Self.browse(server.url + "/#/plugins", waitFor: "document.querySelector('main button')", shot: "plugins-tried-again.png", evals: [tryAgain])
        #expect(clicked.results.first as? String == "toast: Loaded misbehave 1 again", "\(clicked.results) \(clicked.exceptions)")
        let after = try jsonObject(try await server.http("GET", "/api/overview").body)
        #expect(after["plugins"] as? [String: Int] == ["loaded": 4, "quarantined": 0, "skipped": 0], "\(after)")
        #expect(try await server.run("ok.echo").status == 0)
        // Its new worker's row names the process and its calls.
        let workers = try jsonObject(try await server.http("GET", "/api/plugins").body)["workers"] as? [[String: Any]] ?? []
        let worker = try #require(workers.first { $0["name"] as? String == "misbehave" }, "\(workers)")
        let pid = try #require(worker["pid"] as? Int, "\(worker)")
        let row = "[...document.querySelectorAll('main table')[0].rows].find(r => r.textContent.includes('misbehave.so')).cells[6].innerText"
        let rowPage = try await Self.browse(server.url + "/#/plugins", waitFor: "document.querySelectorAll('main table').length >= 2", shot: "plugins-worker.png", evals: [row])
        #expect(rowPage.results.first as? String == "worker running\npid \(pid)\n0 calls in progress\n0 restarts", "\(rowPage.results)")
        #expect(try await server.http("POST", "/api/plugins/forget?path=/etc/hostname").status == 403, "a POST without the page's token is refused")
        let page = try await server.http("GET", "/")
        let token = try #require(page.body.split(separator: "\"").first { $0.count == 64 && $0.allSatisfy(\.isHexDigit) }.map(String.init))
        let stranger = try await server.http("POST", "/api/plugins/forget?path=/etc/hostname", headers: ["X-Cmdbus-Token": token])
        #expect(stranger.status == 422 && stranger.body.contains("/etc/hostname: it is not a plugin file (.so) in this host's plugin directories"), "\(stranger.body)")
        await server.stop()
    }

    @Test func theOverviewShowsWhatEndedBeforeItOpened() async throws {
        await DashboardServer.stopAll()
        let server = try await DashboardServer()
        try await server.run("greet", "-p", "name=Ada")
        try await server.run("fixture.fail", "-p", "message=disk full")
        let overview = try jsonObject(try await server.http("GET", "/api/overview").body)
        let ended = try #require(overview["lastEnded"] as? [[String: Any]])
        #expect(ended.map { $0["command"] as? String } == ["greet", "fixture.fail"])
        #expect(ended.map { $0["state"] as? String } == ["succeeded", "failed"])
        #expect(ended.allSatisfy { abs(($0["endedAt"] as? Double ?? 0) - Date().timeIntervalSince1970) < 600 })
        let report = try await Self.browse(
            // Past the first ticks of the live stream, which bring the same two again: each is listed once.
            server.url + "/#/", waitFor: "document.querySelectorAll('.feed li:not(.muted)').length >= 2 && performance.now() > 4000", shot: "overview-feed.png",
            evals: ["[...document.querySelectorAll('.feed li .name')].map(a => a.textContent).join('|')"]
        )
        #expect(report.waited, "the feed never listed the commands")
        #expect(report.results.first as? String == "fixture.fail|greet")
        await DashboardServer.stopAll()
    }

    /// `/healthz` answers while the process does; `/readyz` answers 200 while the server takes
    /// commands and 503, saying why, once it drains.
    @Test func theHealthChecksSayWhetherTheServerTakesCommands() async throws {
        await DashboardServer.stopAll()
        let server = try await DashboardServer(extra: ["--drain", "30"])
        #expect(try await server.http("GET", "/healthz") == (200, "ok\n"))
        #expect(try await server.http("GET", "/readyz") == (200, "ready\n"))
        let sleeping = Task { try await server.run("fixture.sleep", "-p", "milliseconds=60000") }
        var running = false
        for _ in 0..<300 where !running {
            running = (try? jsonObject(try await server.http("GET", "/api/overview").body))?["inFlight"] as? Int == 1
            if !running { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(running, "the command never started")
        server.process.send(SIGTERM)
        #expect(await waitUntil(.seconds(30)) { server.output.contains("draining 1 command ") })
        #expect(try await server.http("GET", "/readyz") == (503, "not ready: draining: the server takes no new commands\n"))
        #expect(try await server.http("GET", "/healthz") == (200, "ok\n"))
        server.process.send(SIGKILL)
        sleeping.cancel()
        await DashboardServer.stopAll()
    }

    @Test func theLiveCountMovesWhenCommandsRun() async throws {
        await DashboardServer.stopAll()
        let server = try await DashboardServer()
        try await server.run("greet", "-p", "name=Ada")
        let sender = Task {
            try await Task.sleep(for: .seconds(2))
            for index in 0..<5 { try await server.run("greet", "-p", "name=Ada\(index)") }
        }
        // The page reads the count once; only the event stream can move it to 6.
        let report = try await Self.browse(
            server.url + "/#/", waitFor: "Number(document.querySelector('[data-card=Succeeded]')?.textContent) >= 6",
            shot: "overview-live.png", evals: ["document.querySelector('#live-text').textContent"], timeout: 60
        )
        try await sender.value
        #expect(report.waited, "the succeeded count never reached 6 on the page")
        #expect(report.results.first as? String == "live")
        await DashboardServer.stopAll()
    }

    @Test func aHostilePayloadShowsAsTextAndRunsNothing() async throws {
        await DashboardServer.stopAll()
        let server = try await DashboardServer()
        let hostile = #"<img src=x onerror=alert(1)><script>alert(2)</script>"#
        try await server.run("greet-all", "-p", "names=[\"\(hostile.replacingOccurrences(of: "\"", with: "\\\""))\"]")
        try await server.run("fixture.fail", "-p", "message=\(hostile)")
        let list = try await server.http("GET", "/api/commands?command=greet-all")
        let root = try #require(((try jsonObject(list.body))["commands"] as? [[String: Any]])?.first?["id"] as? String)
        for (hash, shot) in [("#/command/\(root)", "hostile-command.png"), ("#/dead", "hostile-dead-letters.png"), ("#/", "hostile-overview.png")] {
            let report = try await Self.browse(
                server.url + "/" + hash, waitFor: "document.querySelector('main h1') && document.querySelector('main h1').textContent !== ''",
                shot: shot, evals: ["document.body.innerText", "document.querySelectorAll('main img, main script').length"]
            )
            #expect(report.dialogs.isEmpty, "a script ran on \(hash): \(report.dialogs)")
            #expect(report.results.last as? Int == 0, "\(hash) holds an element made from the payload")
            if hash.hasPrefix("#/command") { #expect((report.results.first as? String)?.contains("<script>alert(2)</script>") == true) }
        }
        let page = try await server.http("GET", "/")
        #expect(page.status == 200 && !page.body.contains("<script>alert"))
        await DashboardServer.stopAll()
    }

    @Test func traceContextIsKeptOnSubcommandsShownAndLogged() async throws {
        await DashboardServer.stopAll()
        let server = try await DashboardServer(extra: ["--log-level", "debug"])
        let trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        let sent = try await server.run("greet-all", "-p", #"names=["Ada"]"#, "-m", "traceparent=\(trace)")
        #expect(sent.status == 0, "\(sent.stderr)")
        let bad = try await server.run("greet", "-p", "name=Ada", "-m", "traceparent=00-xyz")
        #expect(bad.status == 64 && bad.stderr.contains("is not a W3C trace context"))
        let list = try jsonObject(try await server.http("GET", "/api/commands?command=greet").body)
        let child = try #require((list["commands"] as? [[String: Any]])?.first?["id"] as? String)
        let detail = try jsonObject(try await server.http("GET", "/api/commands/\(child)").body)
        #expect(detail["traceparent"] as? String == trace, "the subcommand keeps its parent's trace context")
        let page = try await Self.browse(
            server.url + "/#/command/\(child)", waitFor: "document.querySelector('dl')", shot: "trace.png",
            evals: ["document.querySelector('dl').textContent"]
        )
        #expect((page.results.first as? String)?.contains(trace) == true)
        #expect(await waitUntil { server.output.contains("greet \(child) succeeded in") && server.output.contains("trace=4bf92f3577b34da6a3ce929d0e0e4736") })
        await DashboardServer.stopAll()
    }

    /// A command's page lists what the bus told of it while it ran, in order, each with its time.
    @Test func aCommandsPageListsItsEventsInOrder() async throws {
        await DashboardServer.stopAll()
        let server = try await DashboardServer()
        let sent = try await server.run("greet-all", "-p", #"names=["Ada"]"#)
        #expect(sent.status == 0, "\(sent.stderr)")
        let list = try jsonObject(try await server.http("GET", "/api/commands?command=greet-all").body)
        let id = try #require((list["commands"] as? [[String: Any]])?.first?["id"] as? String)
        var events: [[String: Any]] = []
        // The log takes the bus's events from a stream of its own: the last may come a moment after the reply.
        for attempt in 0..<100 where !events.contains(where: { $0["to"] as? String == "succeeded" }) {
            if attempt > 0 { try await Task.sleep(for: .milliseconds(50)) }
            events = try jsonObject(try await server.http("GET", "/api/commands/\(id)").body)["events"] as? [[String: Any]] ?? []
        }
        let told = events.map { event -> String in
            let kind = event["kind"] as? String ?? "?"
            switch kind {
            case "state": return "state:\(event["to"] as? String ?? "?")"
            case "log": return "log:\(event["level"] as? String ?? "?"):\(event["message"] as? String ?? "?")"
            default: return kind
            }
        }
        #expect(told.first == "accepted" && told.last == "state:succeeded", "\(told)")
        #expect(told.contains("state:running") && told.contains("log:info:greeted 1 person"), "\(told)")
        let times = events.compactMap { $0["time"] as? Double }
        #expect(times.count == events.count && times == times.sorted(), "every event has its time, in order: \(times)")
        #expect(events.allSatisfy { $0["commandId"] as? String == id && $0["command"] as? String == "greet-all" })
        await DashboardServer.stopAll()
    }

    /// The example alerting rules (docs/prometheus) pass promtool's check and their own unit
    /// tests (each alert fires when it should, and not before), and name only metrics that
    /// /metrics serves, as the README's table lists them.
    @Test func theExampleAlertingRulesHoldAndNameOnlyServedMetrics() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/promtool"), "this test needs promtool: scripts/test.sh installs Debian's prometheus")
        let directory = TestPaths.packageRoot.appendingPathComponent("docs/prometheus")
        let check = try await runProcess("/usr/bin/promtool", ["check", "rules", "cmdbus-alerts.yml"], directory: directory)
        #expect(check.status == 0 && check.stdout.contains("SUCCESS: 10 rules found"), "\(check.stdout)\(check.stderr)")
        let unit = try await runProcess("/usr/bin/promtool", ["test", "rules", "cmdbus-alerts.test.yml"], directory: directory)
        #expect(unit.status == 0 && unit.stdout.contains("SUCCESS"), "\(unit.stdout)\(unit.stderr)")

        let rules = try String(contentsOf: directory.appendingPathComponent("cmdbus-alerts.yml"), encoding: .utf8)
        let readme = try String(contentsOf: TestPaths.packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let metricsTable = try #require(readme.components(separatedBy: "### Metrics").dropFirst().first?.components(separatedBy: "\n\n").prefix(3).joined())
        let named = Set(rules.split(whereSeparator: { !($0.isLetter || $0.isNumber || $0 == "_") })
            .filter { ($0.hasPrefix("cmdbus_") || $0.hasPrefix("process_")) && !$0.hasSuffix("_") }  // not the comments' "cmdbus_bus_*"
            .map { String($0.hasSuffix("_bucket") ? $0.dropLast(7) : $0) })
        #expect(named.count >= 12, "\(named.sorted())")
        for name in named.sorted() { #expect(metricsTable.contains("`\(name)`"), "\(name) is not in the README's metrics table") }
    }

    @Test func metricsPassPromtoolUnderLoad() async throws {
        await DashboardServer.stopAll()
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/promtool"), "this test needs promtool: scripts/test.sh installs Debian's prometheus")
        let server = try await DashboardServer()
        try await server.run("greet", "-p", "name=Ada")
        let load = Task {
            for index in 0..<20 {
                try await server.run("greet-all", "-p", #"names=["A","B","C"]"#)
                try await server.run("fixture.fail", "-p", "message=m\(index)")
            }
        }
        // A plain send through the socket runs on the request loop's thread (cmdbus run streams events, so it does not).
        let plain = try await runProcess("/usr/bin/env", ["python3", "-c", """
            import json, socket, sys
            s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile('rw')
            f.write(json.dumps({"id": 1, "op": "send", "command": "greet", "payload": {"name": "Loop"}}) + '\\n'); f.flush()
            print(json.loads(f.readline())["ok"])
            """, server.socket])
        #expect(plain.stdout == "True\n", "\(plain.stderr)")
        try await Task.sleep(for: .seconds(1))
        let scrape = try await server.http("GET", "/metrics")
        try await load.value
        #expect(scrape.status == 200)
        #expect(scrape.body.contains(#"cmdbus_socket_sends_total{runs_on="request_loop"} 1"# + "\n"))
        #expect(scrape.body.contains(#"cmdbus_socket_sends_total{runs_on="runners"} "#))
        // Counted, not zero: on a loaded machine even a quick command can be descheduled for 10 ms.
        #expect(scrape.body.contains("cmdbus_request_loop_takeovers_total "))
        #expect(scrape.body.contains(#"cmdbus_commands_total{command="greet",outcome="succeeded"} "#))
        #expect(scrape.body.contains(#"cmdbus_command_duration_seconds_bucket{command="greet",le="+Inf"} "#))
        #expect(scrape.body.contains("cmdbus_journal_commit_duration_seconds_count "))
        // The process's own figures, under the names Prometheus's client libraries give them.
        func sample(_ name: String) -> Double? {
            scrape.body.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ")[1]) }
        }
        let now = Date().timeIntervalSince1970
        #expect((1 << 20...10 << 30).contains(Int(sample("process_resident_memory_bytes") ?? 0)), "\(String(describing: sample("process_resident_memory_bytes")))")
        #expect(sample("process_virtual_memory_bytes") ?? 0 > sample("process_resident_memory_bytes") ?? .infinity)
        #expect(sample("process_cpu_seconds_total") ?? 0 > 0 && sample("process_threads") ?? 0 >= 2)
        #expect((now - 600...now + 1).contains(sample("process_start_time_seconds") ?? 0), "started within the test: \(String(describing: sample("process_start_time_seconds")))")
        #expect(sample("process_open_fds") ?? 0 >= 4 && sample("process_open_fds") ?? .infinity < sample("process_max_fds") ?? 0)
        #expect(sample("cmdbus_max_in_flight") == 16_384 && sample("cmdbus_held_back_total") == 0 && sample("cmdbus_subscriptions") == 0)
        let file = server.work.file("scrape.txt")
        try scrape.body.write(to: file, atomically: true, encoding: .utf8)
        let check = try await runProcess("/bin/sh", ["-c", "promtool check metrics < \(file.path)"])
        #expect(check.status == 0, "promtool: \(check.stdout) \(check.stderr)")
        await DashboardServer.stopAll()
    }

    /// The dead letters page's Retry all runs every dead letter it lists again, each under its
    /// id, as its own Retry button does one.
    @Test func retryAllRunsEveryDeadLetterListedAgain() async throws {
        await DashboardServer.stopAll()
        let server = try await DashboardServer()
        for message in ["one", "two", "three"] { try await server.run("fixture.fail", "-p", "message=\(message)") }
        let report = try await Self.browse(
            server.url + "/#/dead", waitFor: "[...document.querySelectorAll('main button')].some(b => b.textContent === 'Retry all 3')", shot: "dead-letters-retry-all.png",
            evals: ["""
                [...document.querySelectorAll('main button')].find(b => b.textContent === 'Retry all 3').click(),
                new Promise(done => setTimeout(() => done(document.querySelector('.toast') ? document.querySelector('.toast').textContent : ''), 2500))
                """]
        )
        #expect(report.waited && report.exceptions.isEmpty, "\(report.exceptions)")
        #expect(report.dialogs == ["Run the 3 dead letters listed again, each under its id?"], "\(report.dialogs)")
        #expect((report.results.first as? String)?.hasPrefix("Retried 3") == true, "\(report.results)")
        let dead = try jsonObject(try await server.http("GET", "/api/dead-letters").body)["deadLetters"] as? [[String: Any]] ?? []
        #expect(dead.count == 3 && dead.allSatisfy { $0["attempts"] as? Int == 2 }, "each ran again and failed again: \(dead)")
        await DashboardServer.stopAll()
    }

    @Test func retryAndDiscardNeedTheTokenAndTheSameOrigin() async throws {
        await DashboardServer.stopAll()
        let server = try await DashboardServer()
        try await server.run("fixture.fail", "-p", "message=once")
        let dead = try await server.http("GET", "/api/dead-letters")
        let id = try #require(((try jsonObject(dead.body))["deadLetters"] as? [[String: Any]])?.first?["id"] as? String)
        let page = try await server.http("GET", "/")
        let token = try #require(page.body.split(separator: "\"").first { $0.count == 64 && $0.allSatisfy(\.isHexDigit) }.map(String.init))
        let host = String(server.url.dropFirst("http://".count))

        #expect(try await server.http("POST", "/api/commands/\(id)/retry").status == 403)
        #expect(try await server.http("POST", "/api/commands/\(id)/retry", headers: ["X-Cmdbus-Token": "wrong"]).status == 403)
        #expect(try await server.http("POST", "/api/commands/\(id)/retry", headers: ["X-Cmdbus-Token": token, "Origin": "http://evil.example"]).status == 403)
        #expect(try await server.http("POST", "/api/commands/\(id)/retry", headers: ["X-Cmdbus-Token": token, "Sec-Fetch-Site": "cross-site"]).status == 403)
        let retried = try await server.http("POST", "/api/commands/\(id)/retry", headers: ["X-Cmdbus-Token": token, "Origin": "http://\(host)"])
        #expect(retried.status == 202)
        // Discarding needs it to have failed again.
        for _ in 0..<200 {
            let state = try await server.http("GET", "/api/commands?id=\(id)")
            if state.body.contains("\"state\":\"failed\"") { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        let discarded = try await server.http("POST", "/api/commands/\(id)/discard", headers: ["X-Cmdbus-Token": token, "Origin": "http://\(host)"])
        #expect(discarded.status == 200, "\(discarded)")
        let after = try await server.http("GET", "/api/dead-letters")
        #expect(!after.body.contains(id))
        let succeeded = try await server.run("greet", "-p", "name=Ada")
        #expect(succeeded.status == 0)
        let list = try await server.http("GET", "/api/commands?command=greet")
        let greetID = try #require(((try jsonObject(list.body))["commands"] as? [[String: Any]])?.first?["id"] as? String)
        #expect(try await server.http("POST", "/api/commands/\(greetID)/retry", headers: ["X-Cmdbus-Token": token]).status == 409)
        // Found by hand: a limit of Int.min overflowed (four times it is read past discarded
        // entries) and stopped the server; a negative one asked SQLite for every row.
        for limit in ["-9223372036854775808", "-1", "0", "99999999999999999999"] {
            for path in ["/api/dead-letters", "/api/commands"] {
                let page = try await server.http("GET", "\(path)?limit=\(limit)")
                #expect(page.status == 200, "\(path)?limit=\(limit): \(page)")
            }
        }
        let one = try jsonObject(try await server.http("GET", "/api/commands?limit=-1").body)["commands"] as? [[String: Any]]
        #expect(one?.count == 1, "a negative limit gave \(one?.count ?? -1) commands")
        // Found by hand: a limit that is no number was taken for none, so a typo looked like an answer.
        for limit in ["abc", "5x", "-", "1.5", "%20"] {
            let page = try await server.http("GET", "/api/dead-letters?limit=\(limit)")
            #expect(page.status == 400 && page.body.contains("limit takes a whole number"), "limit=\(limit): \(page)")
        }
        await DashboardServer.stopAll()
    }

    /// A command in flight has a Cancel button on its page, which cancels it (the dashboard could
    /// retry and discard what had ended, and stop nothing that ran); the API refuses what is not
    /// in flight, and offers no button for it. The page draws the running command to now.
    @Test func aCommandInFlightIsCancelledFromItsPage() async throws {
        await DashboardServer.stopAll()
        let server = try await DashboardServer()
        let posted = try await server.run("fixture.sleep", "-p", "milliseconds=60000", "--no-wait")
        let id = posted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(posted.status == 0 && UUID(uuidString: id) != nil, "\(posted.stderr)")
        // The overview's In flight card leads to them; the list says how long each has run so far.
        let list = try await Self.browse(
            server.url + "/#/", waitFor: "document.querySelector('a.card-link')", shot: "in-flight.png",
            evals: [
                "document.querySelector('a.card-link').getAttribute('href')",
                // Polled, not waited a fixed time: a loaded machine renders late.
                """
                new Promise(done => {
                  location.hash = document.querySelector('a.card-link').getAttribute('href');
                  const started = Date.now();
                  (function poll() {
                    const cell = document.querySelector('main tbody tr td:nth-child(6)');
                    if (cell && cell.textContent.endsWith(' so far') || Date.now() - started > 30000) {
                      return done([document.querySelector('select[name=state] option:checked')?.textContent, cell && getComputedStyle(cell).whiteSpace, cell?.textContent]);
                    }
                    setTimeout(poll, 100);
                  })();
                })
                """,
            ]
        )
        #expect(list.results.first as? String == "#/commands?state=pending,running", "\(list.results)")
        let listed = list.results.last as? [String]
        #expect(listed?.first == "in flight" && listed?.last?.hasSuffix(" so far") == true, "\(list.results)")
        // "4.86 s so far" stays on one line, where it broke after the number.
        #expect(listed?.dropFirst().first == "nowrap", "\(list.results)")
        let report = try await Self.browse(
            server.url + "/#/command/\(id)", waitFor: "[...document.querySelectorAll('.actions button')].some(b => b.textContent === 'Cancel')",
            shot: "cancel.png", evals: [
                "[...document.querySelectorAll('.waterfall text.meta')].pop().textContent",
                "document.querySelector('.actions button.danger').click() || 'clicked'",
                """
                new Promise(done => {
                  const started = Date.now();
                  (function poll() {
                    const toast = document.getElementById('toast');
                    if (!toast.hidden && toast.textContent || Date.now() - started > 30000) return done(toast.textContent);
                    setTimeout(poll, 100);
                  })();
                })
                """,
            ]
        )
        #expect(report.waited && report.exceptions.isEmpty, "\(report.exceptions)")
        #expect((report.results.last as? String)?.hasPrefix("Cancelling ") == true, "\(report.results)")
        // A command at work is drawn to now: its bar said "–" on a scale of 0.00 ms.
        #expect((report.results.first as? String)?.hasPrefix("running ") == true, "\(report.results)")
        var state = ""
        for _ in 0..<200 where state != "cancelled" {
            state = ((try? jsonObject(try await server.http("GET", "/api/commands/\(id)").body))?["record"] as? [String: Any])?["state"] as? String ?? ""
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(state == "cancelled")
        let page = try await server.http("GET", "/")
        let token = try #require(page.body.split(separator: "\"").first { $0.count == 64 && $0.allSatisfy(\.isHexDigit) }.map(String.init))
        let again = try await server.http("POST", "/api/commands/\(id)/cancel", headers: ["X-Cmdbus-Token": token])
        #expect(again.status == 409 && again.body.contains("is not in flight here"), "\(again)")
        #expect(try await server.http("POST", "/api/commands/nope/cancel", headers: ["X-Cmdbus-Token": token]).status == 400)
        let ended = try jsonObject(try await server.http("GET", "/api/commands/\(id)").body)
        #expect(ended["canCancel"] as? Bool == false)
        await DashboardServer.stopAll()
    }

    /// The dead letters page fills up to its limit however many newer ones were discarded; it read
    /// four times the limit and kept what was left, so five discarded left a page of one empty.
    @Test func deadLettersPageBackPastDiscardedOnes() async throws {
        await DashboardServer.stopAll()
        let server = try await DashboardServer()
        for index in 0..<6 { try await server.run("fixture.fail", "-p", "message=m\(index)") }
        let page = try await server.http("GET", "/")
        let token = try #require(page.body.split(separator: "\"").first { $0.count == 64 && $0.allSatisfy(\.isHexDigit) }.map(String.init))
        let host = String(server.url.dropFirst("http://".count))
        func deadIDs(_ query: String) async throws -> [String] {
            let dead = try await server.http("GET", "/api/dead-letters\(query)")
            return ((try jsonObject(dead.body))["deadLetters"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
        }
        let all = try await deadIDs("")
        #expect(all.count == 6)
        for id in all.prefix(5) {
            let discarded = try await server.http("POST", "/api/commands/\(id)/discard", headers: ["X-Cmdbus-Token": token, "Origin": "http://\(host)"])
            #expect(discarded.status == 200, "\(discarded)")
        }
        #expect(try await deadIDs("?limit=1") == [all[5]])
        #expect(try await deadIDs("") == [all[5]])
        await DashboardServer.stopAll()
    }

    /// A dashboard out of file descriptors answers a new connection 503, saying why, and serves
    /// again once connections close, where its loop spun on the ready listener and the client hung.
    @Test func aDashboardOutOfDescriptorsAnswers503AndRecovers() async throws {
        let work = try TemporaryDirectory("cmdbus-dashboard")
        defer { work.remove() }
        let output = try await runProcess("/usr/bin/env", ["python3", "-c", """
            import re, resource, socket, subprocess, sys, time, urllib.request, urllib.error
            cmdbus, work = sys.argv[1:3]
            limit = lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
            log = work + "/server.log"
            server = subprocess.Popen([cmdbus, "serve", "--no-journal", "--plugins", work, "--socket", work + "/s.sock", "--http", "0"],
                stderr=open(log, "w"), stdout=subprocess.DEVNULL, preexec_fn=limit, cwd=work)
            port = None
            for _ in range(600):
                found = re.search(r"dashboard on http://127.0.0.1:(\\d+)/", open(log).read())
                if found: port = int(found.group(1)); break
                time.sleep(0.05)
            def get():
                try:
                    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as answer: return str(answer.status)
                except urllib.error.HTTPError as error: return "%d %s" % (error.code, error.read().decode()[:200])
                except Exception as error: return "failed: " + repr(error)[:80]
            print(get().split(" ")[0])
            held = []
            for _ in range(100):
                client = socket.create_connection(("127.0.0.1", port)); held.append(client)
            time.sleep(0.5)
            print(get())
            for client in held: client.close()
            time.sleep(0.5)
            print(get().split(" ")[0])
            server.terminate(); server.wait(30)
            """, try TestPaths.product("cmdbus").path, work.path], environment: ["CMDBUS_REGISTRY": work.file("registry.json").path], timeout: .seconds(120))
        #expect(output.status == 0, "\(output.stderr)")
        let lines = output.stdout.split(separator: "\n")
        #expect(lines.count == 3 && lines[0] == "200" && lines[2] == "200", "\(output.stdout)")
        #expect(lines.dropFirst().first?.hasPrefix("503 ") == true && lines.dropFirst().first?.contains("no file descriptor free") == true, "\(output.stdout)")
    }

    @Test func unknownPathsAreNotFoundAndResponsesForbidInlineScript() async throws {
        await DashboardServer.stopAll()
        let server = try await DashboardServer()
        #expect(try await server.http("GET", "/etc/passwd").status == 404)
        #expect(try await server.http("GET", "/api/nothing").status == 404)
        #expect(try await server.http("GET", "/api/commands/not-a-uuid").status == 400)
        #expect(try await server.http("GET", "/api/commands?state=bogus").status == 400)
        let raw = try await runProcess("/usr/bin/env", ["python3", "-c", """
            import socket, sys
            host, port = sys.argv[1].rsplit(":", 1)
            s = socket.create_connection((host[7:], int(port)))
            s.sendall(b"GET /../../etc/passwd HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
            print(s.recv(4096).decode().split("\\r\\n")[0])
            s = socket.create_connection((host[7:], int(port)))
            s.sendall(b"GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
            head = s.recv(65536).decode()
            print("script-src 'self'" in head and "Content-Security-Policy" in head)
            """, server.url])
        #expect(raw.stdout == "HTTP/1.1 400 Bad Request\nTrue\n")
        await DashboardServer.stopAll()
    }

    @Test func listeningBeyondLoopbackNeedsATokenThatEveryRequestThenCarries() async throws {
        await DashboardServer.stopAll()
        let work = try TemporaryDirectory("cmdbus-dashboard-token")
        defer { work.remove() }
        let refused = try await cmdbus("serve", "--no-journal", "--http", "0.0.0.0:0", "--socket", work.file("s.sock").path)
        #expect(refused.status == 64 && refused.stderr.contains("--http-token-file"))
        let weak = work.file("weak")
        try "short".write(to: weak, atomically: true, encoding: .utf8)
        let rejected = try await cmdbus("serve", "--no-journal", "--http", "0.0.0.0:0", "--http-token-file", weak.path, "--socket", work.file("s.sock").path)
        #expect(rejected.status != 0 && rejected.stderr.contains("at least 16"))

        let tokenFile = work.file("token")
        try "0123456789abcdef0123456789abcdef\n".write(to: tokenFile, atomically: true, encoding: .utf8)
        // Written as most files are, readable by every user: the log says so, as ssh does of a key.
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: tokenFile.path)
        let server = try await DashboardServer(extra: ["--http-token-file", tokenFile.path])
        #expect(await waitUntil(.seconds(10)) { server.output.contains("can be read or changed by other users of this machine (mode 0644)") }, "\(server.output)")
        #expect(try await server.http("GET", "/").status == 401)
        #expect(try await server.http("GET", "/metrics").status == 401)
        #expect(try await server.http("GET", "/metrics", headers: ["Authorization": "Bearer 0123456789abcdef0123456789abcdef"]).status == 200)
        #expect(try await server.http("GET", "/api/overview", headers: ["Cookie": "cmdbus_token=0123456789abcdef0123456789abcdef"]).status == 200)
        // A probe seldom carries a token, and the health checks tell it nothing the token guards.
        #expect(try await server.http("GET", "/healthz") == (200, "ok\n"))
        #expect(try await server.http("GET", "/readyz") == (200, "ready\n"))
        // The browser's way in: ?token= once sets the cookie, and the page then loads with it.
        let report = try await Self.browse(
            server.url + "/?token=0123456789abcdef0123456789abcdef#/", waitFor: "document.querySelector('.cards')", shot: "token-overview.png"
        )
        #expect(report.waited)
        await DashboardServer.stopAll()
    }
}
