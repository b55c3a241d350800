import Foundation

// The benchmark executable, run through scripts/bench.sh:
//   CommandBusBenchmarks [--json]                      every timed figure
//   CommandBusBenchmarks --workload NAME --count N     one fixed workload for the instruction-count mode
//   CommandBusBenchmarks --list-workloads              their names, one a line
//   CommandBusBenchmarks --echo PATH                   the socket echo the server's figures are compared with
// Every measurement runs in a detached task, off the main actor, whose hops cost tens of microseconds on Linux.
// The main thread waits on a semaphore rather than in `dispatch_main`, which valgrind cannot follow.

let arguments = CommandLine.arguments
let wantsJSON = arguments.contains("--json")

/// The value after `flag` on the command line, if any.
func argument(after flag: String) -> String? {
    guard let index = arguments.firstIndex(of: flag), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}

/// Ends the process with `message` on standard error and status 2: a command line it can't run.
func refuse(_ message: String) -> Never {
    FileHandle.standardError.write(Data("CommandBusBenchmarks: \(message)\n".utf8))
    exit(2)
}

let usage = """
    usage: CommandBusBenchmarks [--json]
           CommandBusBenchmarks --workload NAME --count N
           CommandBusBenchmarks --list-workloads
           CommandBusBenchmarks --echo PATH
    $CMDBUS_BENCH_ONLY=core,plugin,journal,server,bus,dashboard runs those groups only.
    """
if arguments.contains("--help") || arguments.contains("-h") {
    print(usage)
    exit(0)
}
// A flag this program does not know would otherwise start a full run of several minutes.
let flagsWithValues: Set = ["--workload", "--count", "--echo"]
var position = 1
while position < arguments.count {
    let flag = arguments[position]
    if flagsWithValues.contains(flag) {
        guard position + 1 < arguments.count else { refuse("\(flag) needs a value; see --help") }
        position += 2
    } else if flag == "--json" || flag == "--list-workloads" {
        position += 1
    } else {
        refuse("unknown argument '\(flag)'; see --help")
    }
}

// `$CMDBUS_BENCH_ONLY` (comma-separated: core, plugin, journal, server, bus, dashboard) runs some groups only.
let groups: Set = ["core", "plugin", "journal", "server", "bus", "dashboard"]
let only = Set((ProcessInfo.processInfo.environment["CMDBUS_BENCH_ONLY"] ?? "").split(separator: ",").map(String.init))
if let unknown = only.subtracting(groups).sorted().first {
    refuse("CMDBUS_BENCH_ONLY names no group '\(unknown)'; use some of \(groups.sorted().joined(separator: ", "))")
}
func wanted(_ group: String) -> Bool { only.isEmpty || only.contains(group) }

/// Runs `body` in a detached task and blocks the main thread until it ends; a thrown error ends the process.
func runBlocking(_ body: @escaping @Sendable () async throws -> Void) {
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        do { try await body() } catch {
            FileHandle.standardError.write(Data("CommandBusBenchmarks: \(error)\n".utf8))
            exit(1)
        }
        done.signal()
    }
    done.wait()
}

if let path = argument(after: "--echo") {
    do { try SocketEcho.serve(at: path) } catch { refuse("\(error)") }
} else if arguments.contains("--list-workloads") {
    print(CountedWorkloads.all.map(\.name).joined(separator: "\n"))
} else if let name = argument(after: "--workload") {
    guard let workload = CountedWorkloads.all.first(where: { $0.name == name }) else {
        refuse("no workload named '\(name)'; use one of \(CountedWorkloads.all.map(\.name).joined(separator: ", "))")
    }
    guard let count = argument(after: "--count").flatMap(Int.init), count > 0 else {
        refuse("--workload needs --count N with N a positive whole number")
    }
    runBlocking { try await workload.run(count) }
} else {
    runBlocking {
        var report = BenchmarkReport()
        if wanted("core") { try await CoreBenchmarks.run(into: &report) }
        if wanted("plugin") { try await PluginBenchmarks.run(into: &report) }
        if wanted("journal") { try await JournalBenchmarks.run(into: &report) }
        if wanted("server") { try await ServerBenchmarks.run(into: &report) }
        if wanted("bus") { try await BusBenchmarks.run(into: &report) }
        if wanted("dashboard") { try await DashboardBenchmarks.run(into: &report) }
        print(wantsJSON ? report.json : report.text)
    }
}
