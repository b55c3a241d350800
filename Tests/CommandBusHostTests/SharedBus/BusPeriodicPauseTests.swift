import CommandBusPostgres
import Foundation
import Testing

extension SharedBusTests {
    /// `bus periodic --pause NAME`: the entry keeps its schedule and posts nothing, setting it
    /// again leaves it paused, and `--run-now` posts its command at once, paused or not;
    /// `--resume` goes on from its next slot, on the interval's grid, the slots it was paused for
    /// neither posted nor counted as skipped. The dashboard's Pause button and API do as much.
    @Test(.timeLimit(.minutes(4)))
    func aPausedPeriodicCommandPostsNothingUntilResumed() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let host = try await BusHostProcess(bus: database.url, plugins: ["libFixturePlugin.so"], extra: ["--http", "127.0.0.1:0"])
        defer { Task { await host.stop(); await database.drop() } }
        /// The slots of what `tick` posted on its schedule (milliseconds since 1970), in order.
        @Sendable func slots() async throws -> [Int64] {
            try await database.sql("""
                SELECT split_part(idempotency_key, ':', 3) FROM cmdbus.commands
                WHERE metadata->>'cmdbus.periodic' = 'tick' AND idempotency_key IS NOT NULL ORDER BY 1
                """).split(separator: "\n").compactMap { Int64($0.trimmingCharacters(in: .whitespaces)) }
        }
        @Sendable func skipped() async throws -> String { try await database.sql("SELECT skipped FROM cmdbus.periodic WHERE name = 'tick'") }

        #expect(try await Self.bus(database.url, "bus", "periodic", "fixture.whoami", "--every", "1s", "--as", "tick").status == 0)
        #expect(await waitUntil(.seconds(30)) { ((try? await slots()) ?? []).count >= 2 })
        let pause = try await Self.bus(database.url, "bus", "periodic", "--pause", "tick")
        #expect(pause.status == 0 && pause.stdout == "paused periodic 'tick': it posts nothing until 'cmdbus bus periodic --resume tick'\n",
                "\(pause.stdout)\(pause.stderr)")
        let before = try await slots()
        let skippedBefore = try await skipped()
        try await Task.sleep(for: .seconds(3))
        #expect(try await slots() == before, "paused: nothing posted")
        let listed = try await Self.bus(database.url, "bus", "periodic").stdout
        #expect(listed.hasPrefix("tick: posts fixture.whoami every 1s, paused ") && !listed.contains("next in"), "\(listed)")
        let url = try #require(dashboardURL(in: host.output))
        let metrics = try await DashboardTests.http("GET", url + "/metrics").body
        #expect(metrics.contains(#"cmdbus_bus_periodic_paused{periodic="tick"} 1"#), "\(metrics)")
        #expect(!metrics.contains(#"cmdbus_bus_periodic_next_due_seconds{periodic="tick"}"#), "a paused entry is not overdue")

        // Set again (as at each deploy): it stays paused. Paused twice: said so.
        let again = try await Self.bus(database.url, "bus", "periodic", "fixture.whoami", "--every", "1s", "--as", "tick")
        #expect(again.stdout.contains("once resumed (it stays paused: 'cmdbus bus periodic --resume tick')"), "\(again.stdout)")
        #expect(try await Self.bus(database.url, "bus", "periodic", "--pause", "tick").stdout == "periodic 'tick' was paused already\n")

        // Run now: one command, at once, and the entry stays paused.
        let now = try await Self.bus(database.url, "bus", "periodic", "--run-now", "tick")
        let id = try #require(now.stdout.split(separator: " ").first { $0.count == 37 && $0.hasSuffix(";") }.map { String($0.dropLast()) }, "\(now.stdout)")
        #expect(now.stdout == "periodic 'tick' posted its command now, as \(id); it stays paused\n", "\(now.stdout)")
        #expect(await waitUntil(.seconds(20)) { (try? await database.sql("SELECT state FROM cmdbus.commands WHERE id = '\(id)'")) == "succeeded\n" })
        #expect(try await database.sql("SELECT metadata->>'cmdbus.periodic' FROM cmdbus.commands WHERE id = '\(id)'") == "tick\n")
        #expect(try await slots() == before)

        // Resumed: from the next slot on the grid, none of the paused ones, none counted as skipped.
        let resume = try await Self.bus(database.url, "bus", "periodic", "--resume", "tick")
        #expect(resume.stdout.hasPrefix("resumed periodic 'tick': the next is due in "), "\(resume.stdout)")
        #expect(await waitUntil(.seconds(30)) { ((try? await slots()) ?? []).count >= before.count + 2 })
        let after = try await slots()
        let resumedAt = try #require(after.dropFirst(before.count).first)
        #expect((resumedAt - before.last!) % 1000 == 0 && resumedAt - before.last! >= 3000, "\(before) then \(after)")
        #expect(try await skipped() == skippedBefore)
        #expect(try await Self.bus(database.url, "bus", "periodic", "--resume", "tick").stdout.hasPrefix("periodic 'tick' was not paused; the next is due in "))

        // The dashboard: the Periodic table's Pause button, and the API.
        let page = try await DashboardTests.browse(
            url + "/#/hosts", waitFor: "[...document.querySelectorAll('tr')].some(r => r.cells[0] && r.cells[0].textContent === 'tick')",
            shot: "bus-periodic-pause.png",
            evals: [
                // How its row's buttons look: Pause is a quiet one (the primary colour is kept for
                // Resume), Remove is drawn in the failure colour, not as a plain link.
                """
                (() => { const row = [...document.querySelectorAll('tr')].find(r => r.cells[0] && r.cells[0].textContent === 'tick');
                  const look = text => getComputedStyle([...row.querySelectorAll('button')].find(b => b.textContent === text));
                  const failed = getComputedStyle(document.documentElement).getPropertyValue('--failed').trim();
                  const probe = document.createElement('i'); probe.style.color = failed; document.body.append(probe);
                  const failedColour = getComputedStyle(probe).color; probe.remove();
                  return [look('Pause').backgroundColor, look('Remove').color === failedColour]; })()
                """,
                "[...document.querySelectorAll('tr')].find(r => r.cells[0] && r.cells[0].textContent === 'tick').querySelector('button').click(), 'clicked'",
            ]
        )
        #expect(page.waited && page.exceptions.isEmpty, "\(page.exceptions)")
        let looks = try #require(page.results.first as? [Any], "\(page.results)")
        #expect(looks.first as? String == "rgb(255, 255, 255)" && looks.last as? Bool == true, "the Periodic row's Pause and Remove buttons look like \(looks)")
        #expect(await waitUntil(.seconds(10)) {
            (try? await database.sql("SELECT paused_by LIKE '%(dashboard)' FROM cmdbus.periodic WHERE name = 'tick'")) == "t\n"
        })
        let token = try #require(try await DashboardTests.http("GET", url + "/").body.split(separator: "\"").first { $0.count == 64 && $0.allSatisfy(\.isHexDigit) }.map(String.init))
        let resumed = try await DashboardTests.http("POST", url + "/api/periodic/tick/resume", headers: ["X-Cmdbus-Token": token])
        #expect(resumed.status == 200 && resumed.body.contains(#""paused":false"#) && resumed.body.contains(#""wasPaused":true"#), "\(resumed.body)")
        let missing = try await DashboardTests.http("POST", url + "/api/periodic/nothing/run", headers: ["X-Cmdbus-Token": token])
        #expect(missing.status == 404 && missing.body.contains("there is no periodic 'nothing'"), "\(missing.body)")
        let unknown = try await DashboardTests.http("POST", url + "/api/periodic/tick/explode", headers: ["X-Cmdbus-Token": token])
        #expect(unknown.status == 404 && unknown.body.contains("use pause, resume, run or remove"), "\(unknown.body)")

        for (arguments, message) in [
            (["--pause"], "'cmdbus bus periodic --pause' needs the names of the periodic commands; 'cmdbus bus periodic' lists them"),
            (["--pause", "--resume", "tick"], "--pause and --resume are two things to do; give one"),
            (["--run-now", "tick", "--every", "1h"], "--run-now takes names only, not --every; set the entry again to change it"),
            (["--remove", "tick", "--no-overlap"], "--remove takes names only, not --no-overlap; set the entry again to change it"),
        ] {
            let refused = try await cmdbus(["bus", "periodic"] + arguments + ["--bus", database.url])
            #expect(refused.status == 64 && refused.stderr == "cmdbus: error: \(message)\n", "\(refused.stderr)")
        }
        #expect(try await Self.bus(database.url, "bus", "periodic", "--run-now", "nothing").stdout == "there is no periodic 'nothing' ('cmdbus bus periodic' lists them)\n")
        // A host whose cmdbus predates periodic pauses (schema version 5) posts a paused entry: it is warned of.
        try await database.sql("UPDATE cmdbus.hosts SET catalog = jsonb_set(catalog, '{busSchemaVersion}', '5')")
        let warned = try await Self.bus(database.url, "bus", "periodic", "--pause", "tick")
        #expect(warned.stderr.contains("runs a cmdbus from before periodic pauses and posts a paused entry all the same; upgrade it"), "\(warned.stderr)")

        // The dashboard's Remove asks first, and takes the entry off the bus; what it posted stays.
        let posted = try await database.sql("SELECT count(*) FROM cmdbus.commands WHERE name = 'fixture.whoami'")
        let removing = try await DashboardTests.browse(
            url + "/#/hosts", waitFor: "[...document.querySelectorAll('tr')].some(r => r.cells[0] && r.cells[0].textContent === 'tick')",
            shot: "bus-periodic-remove.png",
            evals: ["[...document.querySelectorAll('tr')].find(r => r.cells[0] && r.cells[0].textContent === 'tick').querySelector('button.danger').click(), 'clicked'"]
        )
        #expect(removing.waited && removing.exceptions.isEmpty, "\(removing.exceptions)")
        #expect(removing.dialogs.contains { $0.contains("Remove periodic tick?") }, "\(removing.dialogs)")
        #expect(await waitUntil(.seconds(10)) { (try? await database.sql("SELECT count(*) FROM cmdbus.periodic")) == "0\n" })
        #expect(try await database.sql("SELECT count(*) FROM cmdbus.commands WHERE name = 'fixture.whoami'") == posted)
        let gone = try await DashboardTests.http("POST", url + "/api/periodic/tick/remove", headers: ["X-Cmdbus-Token": token])
        #expect(gone.status == 404 && gone.body.contains("there is no periodic 'tick'"), "\(gone.body)")
    }
}
