import Foundation
import Testing

extension SharedBusTests {
    /// `cmdbus plugins --bus`, `bus status` and the dashboard against real hosts: two that load the same
    /// greeter and two builds of one C plugin (same name and version, another answer), and a
    /// third whose second plugin directory is missing on its machine. Before, the listing named
    /// the greeter twice, said nothing of the two builds, and exited 66 telling the client to
    /// create a directory that is the host's.
    @Test(.timeLimit(.minutes(3)))
    func theBusListsEachBuildOnceWithItsHostsAndWarnsWhereHostsDiffer() async throws {
        await BusHostProcess.stopAll()
        let database = try await SharedBusDatabase()
        let first = try await BusHostProcess(bus: database.url, plugins: ["libGreeter.so"], fixtures: [("shadowing_greeter", ["GREETING=\"Salut!\""])], extra: ["--http", "127.0.0.1:0"])
        let second = try await BusHostProcess(bus: database.url, plugins: ["libGreeter.so"], fixtures: [("shadowing_greeter", [])])
        let third = try await BusHostProcess(bus: database.url, plugins: [], extra: ["--plugins", "/nonexistent/cmdbus-plugins"])
        defer { Task { await first.stop(); await second.stop(); await third.stop(); await database.drop() } }
        #expect(third.output.contains("handles no command yet (no plugin loaded)"), "\(third.output)")

        let listing = try await Self.bus(database.url, "plugins")
        #expect(listing.status == 0, "a host's missing directory is not the client's: \(listing.stderr)")
        let lines = listing.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "Hosts (3):")
        let greeter = try #require(lines.firstIndex { $0.hasPrefix("  greeter 1.0.0 ") })
        // Each host has its own directory: the second's file is named where it differs from the first's.
        #expect(lines[greeter + 1] == "    on 2 hosts: \(Self.label(first)), \(Self.label(second)) (\(second.work.path)/plugins/libGreeter.so)", "\(lines[greeter + 1])")
        #expect(lines.filter { $0.hasPrefix("  greeter ") }.count == 1, "one build, listed once")
        #expect(lines.filter { $0.hasPrefix("  bonjour 1 ") }.count == 2, "two builds of one version")
        #expect(lines.contains("  /nonexistent/cmdbus-plugins: plugin directory does not exist (on \(Self.label(third)))"), "\(listing.stdout)")
        #expect(listing.stderr.contains("cmdbus: warning: plugin 'bonjour' differs between hosts: version 1 (file "), "\(listing.stderr)")

        let json = try jsonObject(try await Self.bus(database.url, "plugins", "--json").stdout)
        let plugins = try #require(json["plugins"] as? [[String: Any]])
        #expect(plugins.filter { $0["name"] as? String == "greeter" }.count == 1 && plugins.allSatisfy { ($0["sha256"] as? String)?.count == 64 })

        let status = try await Self.bus(database.url, "bus", "status")
        #expect(status.status == 0 && status.stderr.contains("cmdbus: warning: plugin 'bonjour' differs between hosts"), "\(status.stderr)")
        let differences = try #require(try jsonObject(try await Self.bus(database.url, "bus", "status", "--json").stdout)["differences"] as? [[String: Any]])
        #expect(differences.count == 1 && differences.first?["plugin"] as? String == "bonjour")

        // The dashboard's hosts page says so above its tables.
        let url = try #require(dashboardURL(in: first.output))
        let page = try await DashboardTests.browse(
            url + "/#/hosts", waitFor: "(document.querySelector('.alert') || {}).textContent?.includes(\"plugin 'bonjour' differs\")", shot: "bus-hosts-differ.png"
        )
        #expect(page.waited)
    }

    /// A host's label, as the bus names it: `hostname:pid`.
    private static func label(_ host: BusHostProcess) -> String {
        var name = [CChar](repeating: 0, count: 256)
        gethostname(&name, name.count)
        return "\(String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)):\(host.pid)"
    }
}
