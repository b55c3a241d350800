import CommandBusSupport
import Foundation
import Testing

/// The Grafana dashboard in docs/grafana: whole, and every query on it asked of a real
/// Prometheus that scrapes a real local server and a real host of the shared bus, as an
/// operator's would (that test is the shared bus suite's, which runs one at a time).
struct GrafanaDashboardTests {
    static let file = TestPaths.packageRoot.appendingPathComponent("docs/grafana/cmdbus-dashboard.json")

    /// The queries of the dashboard's panels: (panel title, PromQL as Grafana stores it).
    static func queries() throws -> [(panel: String, expr: String)] {
        let dashboard = try jsonObject(try String(contentsOf: file, encoding: .utf8))
        let panels = try #require(dashboard["panels"] as? [[String: Any]])
        return panels.flatMap { panel in
            ((panel["targets"] as? [[String: Any]]) ?? []).compactMap { target in
                (target["expr"] as? String).map { (panel["title"] as? String ?? "?", $0) }
            }
        }
    }

    /// A query as Grafana sends it with every host and command chosen, over a short range.
    static func asSent(_ expr: String) -> String {
        expr.replacingOccurrences(of: "$__rate_interval", with: "15s")
            .replacingOccurrences(of: "$instance", with: ".*")
            .replacingOccurrences(of: "$command", with: ".*")
    }

    /// The answers of the Prometheus on `port` to `queries`, each at this moment; an answer
    /// with `status` "error" says why one was refused.
    static func ask(port: Int, _ queries: [String]) async throws -> [[String: Any]] {
        let answer = try await runProcess("/usr/bin/env", ["python3", "-c", """
            import json, sys, urllib.error, urllib.parse, urllib.request
            answers = []
            for query in json.loads(sys.argv[2]):
                url = sys.argv[1] + '/api/v1/query?' + urllib.parse.urlencode({'query': query})
                try:
                    answers.append(json.loads(urllib.request.urlopen(url, timeout=10).read()))
                except urllib.error.HTTPError as error:
                    answers.append(json.loads(error.read()))
                except Exception as error:
                    answers.append({'status': 'error', 'error': str(error)})
            print(json.dumps(answers))
            """, "http://127.0.0.1:\(port)", String(decoding: try JSONSerialization.data(withJSONObject: queries), as: UTF8.self)])
        return try #require(try JSONSerialization.jsonObject(with: Data(answer.stdout.utf8)) as? [[String: Any]], "\(answer.stderr)")
    }

    /// The dashboard is one Grafana imports (the Prometheus it reads, a host and a command name
    /// chosen at its top, with nothing to fill in at import), each panel says what it shows and
    /// what to do, and names only metrics /metrics serves, as the README's table lists them.
    @Test func theDashboardIsWholeAndNamesOnlyServedMetrics() throws {
        let dashboard = try jsonObject(try String(contentsOf: Self.file, encoding: .utf8))
        #expect(dashboard["uid"] as? String == "cmdbus-overview" && dashboard["title"] as? String == "cmdbus")
        let variables = ((dashboard["templating"] as? [String: Any])?["list"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
        #expect(variables == ["datasource", "instance", "command"])
        #expect(dashboard["__inputs"] == nil, "every datasource is the variable's, so an import asks for none")
        let panels = try #require(dashboard["panels"] as? [[String: Any]])
        let charts = panels.filter { $0["type"] as? String != "row" }
        #expect(charts.count >= 20)
        for chart in charts {
            let title = chart["title"] as? String ?? "?"
            #expect((chart["description"] as? String)?.count ?? 0 > 20, "\(title) says what it shows")
            #expect((chart["datasource"] as? [String: Any])?["uid"] as? String == "${datasource}", "\(title) asks the chosen Prometheus")
            #expect((chart["targets"] as? [Any])?.isEmpty == false, "\(title) has a query")
        }
        let titles = charts.compactMap { $0["title"] as? String }
        #expect(Set(titles).count == titles.count, "titles are unique: \(titles)")
        // Laid out as drawn: within Grafana's 24 columns, and no panel over another.
        var taken: [String: String] = [:]
        for panel in panels {
            let title = panel["title"] as? String ?? "?", grid = panel["gridPos"] as? [String: Int] ?? [:]
            let (x, y, width, height) = (grid["x"] ?? -1, grid["y"] ?? -1, grid["w"] ?? 0, grid["h"] ?? 0)
            #expect(x >= 0 && y >= 0 && width > 0 && height > 0 && x + width <= 24, "\(title) is placed: \(grid)")
            for column in max(x, 0)..<max(x + width, 0) {
                for row in max(y, 0)..<max(y + height, 0) {
                    if let other = taken.updateValue(title, forKey: "\(column),\(row)") { Issue.record("\(title) covers \(other)") }
                }
            }
        }

        let readme = try String(contentsOf: TestPaths.packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let metricsTable = try #require(readme.components(separatedBy: "### Metrics").dropFirst().first?.components(separatedBy: "\n\n").prefix(3).joined())
        let named = Set(try Self.queries().flatMap { query in
            query.expr.split(whereSeparator: { !($0.isLetter || $0.isNumber || $0 == "_") })
                .filter { $0.hasPrefix("cmdbus_") || $0.hasPrefix("process_") }
                .map { String($0.hasSuffix("_bucket") ? $0.dropLast(7) : $0) }
        })
        #expect(named.count >= 20, "\(named.sorted())")
        for name in named.sorted() { #expect(metricsTable.contains("`\(name)`"), "\(name) is not in the README's metrics table") }
    }
}

extension SharedBusTests {
    /// Each panel's queries, asked of a Prometheus scraping a local server (isolated plugins, a
    /// journal, a command that fails) and a host of the shared bus (a periodic entry, a limit),
    /// are accepted and answer with data: a query that a Prometheus refuses, or that names a
    /// label or metric no host serves, shows an empty panel, and fails here.
    @Test(.timeLimit(.minutes(3)))
    func everyPanelAnswersWithDataFromRealHosts() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/prometheus"), "this test needs prometheus: scripts/test.sh installs Debian's")
        await BusHostProcess.stopAll()
        let local = try await ServerTests.Server(arguments: ["--isolate", "--http", "127.0.0.1:0"])
        defer { local.work.remove() }
        let localURL = try #require(dashboardURL(in: try String(contentsOf: local.work.file("server.log"), encoding: .utf8)))
        let database = try await SharedBusDatabase()
        let host = try await BusHostProcess(bus: database.url, plugins: ["libGreeter.so", "libFixturePlugin.so"], extra: ["--http", "127.0.0.1:0"])
        let hostURL = try #require(dashboardURL(in: host.output))
        #expect(try await SharedBusTests.bus(database.url, "bus", "periodic", "greet", #"{"name":"Ada"}"#, "--every", "1h").status == 0)
        #expect(try await SharedBusTests.bus(database.url, "bus", "limit", "fixture.sleep", "4").status == 0)

        let work = try TemporaryDirectory("cmdbus-prometheus")
        defer { work.remove() }
        let targets = [localURL, hostURL].map { "\"\($0.replacingOccurrences(of: "http://", with: ""))\"" }.joined(separator: ", ")
        try """
            global: {scrape_interval: 1s, evaluation_interval: 1s}
            scrape_configs:
              - job_name: cmdbus
                static_configs: [{targets: [\(targets)]}]
            """.write(to: work.file("prometheus.yml"), atomically: true, encoding: .utf8)
        let port = try #require(Int(try await runProcess("/usr/bin/env", ["python3", "-c", "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
        let prometheus = try launchedChild(
            "/usr/bin/prometheus",
            ["--config.file=\(work.file("prometheus.yml").path)", "--storage.tsdb.path=\(work.file("data").path)", "--web.listen-address=127.0.0.1:\(port)"],
            directory: work.path, standardOutput: .discard, standardError: .file(work.file("prometheus.log").path)
        )
        defer { prometheus.send(SIGKILL) }

        // Work for every panel: commands that succeed and fail on both, one that runs on the bus.
        for index in 0..<5 {
            #expect(try await cmdbus(["run", "greet", "-p", "name=Ada\(index)", "--connect", local.socket]).status == 0)
            #expect(try await cmdbus(["run", "fixture.fail", "-p", "message=m\(index)", "--connect", local.socket]).status != 0)
            #expect(try await SharedBusTests.bus(database.url, "run", "greet", "-p", "name=Bo\(index)").status == 0)
        }
        #expect(try await SharedBusTests.bus(database.url, "run", "fixture.sleep", "-p", "milliseconds=20000", "--no-wait").status == 0)

        // Two scrapes of each host at least, and work ended since, so each rate has two samples.
        let scraped = await waitUntil(.seconds(60)) {
            let answer = try? await GrafanaDashboardTests.ask(port: port, ["count_over_time(cmdbus_uptime_seconds[15s]) >= 4"])
            return ((answer?.first?["data"] as? [String: Any])?["result"] as? [Any])?.count == 2
        }
        try #require(scraped, "prometheus did not scrape both hosts: \(String(decoding: (try? Data(contentsOf: work.file("prometheus.log"))) ?? Data(), as: UTF8.self).suffix(2_000))")
        for index in 0..<3 { #expect(try await cmdbus(["run", "fixture.fail", "-p", "message=n\(index)", "--connect", local.socket]).status != 0) }
        try await Task.sleep(for: .seconds(3))

        let queries = try GrafanaDashboardTests.queries()
        let answers = try await GrafanaDashboardTests.ask(port: port, queries.map { GrafanaDashboardTests.asSent($0.expr) })
        #expect(answers.count == queries.count)
        for (query, answer) in zip(queries, answers) {
            let result = (answer["data"] as? [String: Any])?["result"] as? [Any]
            #expect(answer["status"] as? String == "success", "\(query.panel): \(query.expr): \(answer)")
            #expect(result?.isEmpty == false, "\(query.panel) shows no data: \(query.expr)")
        }
        await host.stop()
        await local.stop()
        await database.drop()
    }
}
