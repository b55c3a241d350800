import Foundation
import Testing

/// Probe before trust: new plugin files load first in a child `cmdbus`; files that crash,
/// exit or hang it are quarantined until they change.
struct PluginProbeTests {
    @Test(arguments: [
        ("crash_entry", "quarantined: crashed with SIGSEGV while loading"),
        ("exit_entry", "quarantined: ended the probe with exit status 0 while loading"),
        ("hang_entry", "quarantined: hung for more than 3 seconds while loading"),
    ])
    func aFileThatBreaksTheProbeIsQuarantinedAndTheHostCarriesOn(fixture: String, reason: String) async throws {
        let plugins = try examplePluginDirectory()
        let work = try TemporaryDirectory()
        defer { plugins.remove(); work.remove() }
        let bad = try await compileFixture(fixture, into: plugins)
        let registry = ["CMDBUS_REGISTRY": work.file("registry.json").path]
        let run = try await cmdbus(["run", "greet", "-p", "name=Ada", "--no-journal", "--probe-timeout", "3", "--plugins", plugins.path], environment: registry)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout == "{\"greeting\":\"Hello, Ada!\"}\n")
        #expect(run.stderr.contains("skipped \(bad.path): \(reason)"), "\(run.stderr)")

        // Cached: the next start does not probe it again; its verdict keeps the time it was probed.
        let probedAt = try probeTime(of: bad.path, in: work.file("registry.json"))
        let listing = try await cmdbus(["plugins", "--json", "--probe-timeout", "3", "--plugins", plugins.path], environment: registry)
        #expect(try probeTime(of: bad.path, in: work.file("registry.json")) == probedAt)
        let skipped = try #require(try jsonObject(listing.stdout)["skipped"] as? [[String: Any]])
        #expect(skipped.contains { $0["path"] as? String == bad.path && $0["quarantined"] as? Bool == true })

        // Forgotten, it is probed (and quarantined) again.
        let forget = try await cmdbus(["plugins", "forget", bad.path], environment: registry)
        #expect(forget.status == 0 && forget.stdout.contains("forgot"))
        let again = try await cmdbus(["plugins", "forget", bad.path], environment: registry)
        #expect(again.status == 1)
    }

    /// When the registry says `path` was probed.
    private func probeTime(of path: String, in registry: URL) throws -> Double {
        let entries = try #require(try jsonObject(String(contentsOf: registry, encoding: .utf8))["entries"] as? [String: [String: Any]])
        let key = try #require(entries.keys.first { URL(fileURLWithPath: $0).lastPathComponent == URL(fileURLWithPath: path).lastPathComponent })
        return try #require(entries[key]?["probedAt"] as? Double)
    }

    @Test func aQuarantinedFileThatChangesIsProbedAgain() async throws {
        let plugins = try TemporaryDirectory(), work = try TemporaryDirectory()
        defer { plugins.remove(); work.remove() }
        let file = try await compileFixture("crash_entry", into: plugins, as: "libChanging.so")
        let registry = ["CMDBUS_REGISTRY": work.file("registry.json").path]
        let first = try await cmdbus(["plugins", "--json", "--plugins", plugins.path], environment: registry)
        #expect(first.stdout.contains("crashed with SIGSEGV"))
        try FileManager.default.removeItem(at: file)
        try FileManager.default.copyItem(at: try TestPaths.product("libGreeter.so"), to: file)
        let second = try await cmdbus(["run", "greet", "-p", "name=Lin", "--no-journal", "--plugins", plugins.path], environment: registry)
        #expect(second.status == 0 && second.stdout == "{\"greeting\":\"Hello, Lin!\"}\n", "\(second.stderr)")
    }

    @Test func theProbeAnswersForAGoodAndABadFile() async throws {
        let plugins = try examplePluginDirectory()
        defer { plugins.remove() }
        let good = try await cmdbus("--cmdbus-probe", plugins.file("libGreeter.so").path)
        #expect(good.stdout == "{\"ok\":true}\n")
        let (path, _) = try await BadPluginFile.missingName.create(in: plugins)
        let bad = try await cmdbus("--cmdbus-probe", path)
        #expect(bad.stdout == "{\"ok\":false,\"reason\":\"descriptor is missing its name\"}\n")
    }

    /// New files are probed at the same time, one per CPU: each of these two returns from its entry
    /// point only once the other has entered its own, and hangs (so is quarantined) otherwise.
    @Test(.enabled(if: ProcessInfo.processInfo.activeProcessorCount > 1, "one CPU probes one file at a time"))
    func newFilesAreProbedAtTheSameTime() async throws {
        let plugins = try TemporaryDirectory(), work = try TemporaryDirectory(), markers = try TemporaryDirectory()
        defer { plugins.remove(); work.remove(); markers.remove() }
        for side in ["a", "b"] {
            _ = try await compileFixture(
                "rendezvous", into: plugins, as: "meet_\(side).so", defines: [#"PLUGIN_NAME="meet-\#(side)""#, #"COMMAND_NAME="meet.\#(side)""#]
            )
        }
        let environment = ["CMDBUS_REGISTRY": work.file("registry.json").path, "CMDBUS_TEST_RENDEZVOUS": markers.path]
        let listing = try await cmdbus(["plugins", "--json", "--probe-timeout", "10", "--plugins", plugins.path], environment: environment)
        #expect(listing.status == 0, "\(listing.stderr)")
        let catalog = try jsonObject(listing.stdout)
        let loaded = try #require(catalog["plugins"] as? [[String: Any]]).compactMap { $0["name"] as? String }
        #expect(loaded.sorted() == ["meet-a", "meet-b"], "\(listing.stdout)")
        #expect((catalog["skipped"] as? [Any])?.isEmpty == true, "\(listing.stdout)")
        // Both verdicts are cached: the next start probes neither.
        let registry = try #require(try jsonObject(String(contentsOf: work.file("registry.json"), encoding: .utf8))["entries"] as? [String: [String: Any]])
        #expect(registry.values.map { $0["verdict"] as? String } == ["ok", "ok"])
    }
}
