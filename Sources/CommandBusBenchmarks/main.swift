import Foundation

// The benchmark executable: `CommandBusBenchmarks [--json]`. Run it through scripts/bench.sh.
// Every measurement runs in a detached task, off the main actor, whose hops cost tens of microseconds on Linux.

let wantsJSON = CommandLine.arguments.contains("--json")

// `$CMDBUS_BENCH_ONLY` (comma-separated: core, plugin, journal, server, bus, dashboard) runs some groups only.
let only = Set((ProcessInfo.processInfo.environment["CMDBUS_BENCH_ONLY"] ?? "").split(separator: ",").map(String.init))
func wanted(_ group: String) -> Bool { only.isEmpty || only.contains(group) }

let report = try await Task.detached { () async throws -> BenchmarkReport in
    var report = BenchmarkReport()
    if wanted("core") { try await CoreBenchmarks.run(into: &report) }
    if wanted("plugin") { try await PluginBenchmarks.run(into: &report) }
    if wanted("journal") { try await JournalBenchmarks.run(into: &report) }
    if wanted("server") { try await ServerBenchmarks.run(into: &report) }
    if wanted("bus") { try await BusBenchmarks.run(into: &report) }
    if wanted("dashboard") { try await DashboardBenchmarks.run(into: &report) }
    return report
}.value

print(wantsJSON ? report.json : report.text)
