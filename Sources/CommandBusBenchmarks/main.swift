import Foundation

// The benchmark executable: `CommandBusBenchmarks [--json]`. Run it through scripts/bench.sh.
// Every measurement runs in a detached task, off the main actor, whose hops cost tens of microseconds on Linux.

let wantsJSON = CommandLine.arguments.contains("--json")

let report = try await Task.detached { () async throws -> BenchmarkReport in
    var report = BenchmarkReport()
    try await CoreBenchmarks.run(into: &report)
    try await PluginBenchmarks.run(into: &report)
    try await JournalBenchmarks.run(into: &report)
    try await ServerBenchmarks.run(into: &report)
    return report
}.value

print(wantsJSON ? report.json : report.text)
