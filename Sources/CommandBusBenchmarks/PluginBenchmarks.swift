import CommandBusLoading
import CommandBus
import CommandBusHost
import CommandBusSupport
import Foundation

/// The same work as the Greeter plugin's handler, registered in-process.
struct InProcessGreet: Command {
    typealias Result = InProcessGreeting
    static let name = "greet"
    var name: String
}

struct InProcessGreeting: Codable, Sendable {
    var greeting: String
}

struct InProcessGreetHandler: CommandHandler {
    func canHandle(_ command: InProcessGreet) -> Bool { !command.name.allSatisfy(\.isWhitespace) }
    func handle(_ command: InProcessGreet, context: CommandContext) async throws -> InProcessGreeting {
        InProcessGreeting(greeting: "Hello, \(command.name)!")
    }
}

/// The plugin figures of issue #3.
enum PluginBenchmarks {
    static let productDirectory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()

    static func run(into report: inout BenchmarkReport) async throws {
        let plugins = try Scratch("plugins")
        defer { plugins.remove() }
        try plugins.copy(product: "libGreeter.so", as: "libGreeter.so")
        let viaPlugin = CommandBus()
        let catalog = PluginLoader(directories: [plugins.path]).load(into: viaPlugin)
        guard catalog.plugins.count == 1 else { throw BenchmarkFailure("could not load libGreeter.so: \(catalog.skipped)") }
        let inProcess = CommandBus()
        inProcess.register(InProcessGreetHandler())

        let payload = Data(#"{"name":"Ada"}"#.utf8)
        _ = try await latencies(viaPlugin, payload, count: 2_000)
        _ = try await latencies(inProcess, payload, count: 2_000)
        var pluginP50: [Double] = [], inProcessP50: [Double] = []
        for _ in 0..<CoreBenchmarks.rounds {
            pluginP50.append(try await latencies(viaPlugin, payload, count: CoreBenchmarks.sendsPerRound).percentile(50))
            inProcessP50.append(try await latencies(inProcess, payload, count: CoreBenchmarks.sendsPerRound).percentile(50))
        }
        report.record("plugin_send_p50_ns", median(pluginP50))
        report.record("inprocess_dynamic_send_p50_ns", median(inProcessP50))
        report.record("plugin_vs_inprocess_ratio", median(pluginP50) / median(inProcessP50))

        // The same plugin in a worker process (--isolate), against it loaded in-process.
        let isolated = CommandBus()
        let isolatedCatalog = PluginLoader(
            directories: [plugins.path], isolatingWith: productDirectory.appendingPathComponent("cmdbus").path
        ).load(into: isolated)
        defer { isolatedCatalog.stopWorkers() }
        guard isolatedCatalog.plugins.count == 1 else { throw BenchmarkFailure("could not isolate libGreeter.so: \(isolatedCatalog.skipped)") }
        _ = try await latencies(isolated, payload, count: 2_000)
        var isolatedP50: [Double] = [], sameRunPluginP50: [Double] = []
        for _ in 0..<CoreBenchmarks.rounds {
            isolatedP50.append(try await latencies(isolated, payload, count: CoreBenchmarks.sendsPerRound / 4).percentile(50))
            sameRunPluginP50.append(try await latencies(viaPlugin, payload, count: CoreBenchmarks.sendsPerRound / 4).percentile(50))
        }
        report.record("isolated_send_p50_ns", median(isolatedP50))
        report.record("isolated_vs_inprocess_ratio", median(isolatedP50) / median(sameRunPluginP50))

        try await coldStarts(into: &report)
    }

    static func latencies(_ bus: CommandBus, _ payload: Data, count: Int) async throws -> LatencySampler {
        var sampler = LatencySampler(capacity: count)
        for _ in 0..<count {
            try await sampler.measure { _ = try await bus.send(name: "greet", payload: payload) }
        }
        return sampler
    }

    /// `cmdbus run greet` as a whole process with 1 and 100 plugins, against a Swift hello world.
    ///
    /// Each folder has its own registry. The warm-up runs fill it, so the timed starts are the
    /// ones a user makes every day: each opens only the plugin its command reaches. The first run
    /// in a folder, which opens every file, is timed as well (the registry removed before each).
    static func coldStarts(into report: inout BenchmarkReport) async throws {
        let one = try Scratch("cold-1"), hundred = try Scratch("cold-100"), registries = try Scratch("cold-registries")
        defer { one.remove(); hundred.remove(); registries.remove() }
        try one.copy(product: "libGreeter.so", as: "libGreeter.so")
        for index in 0..<100 { try hundred.copy(product: "libGreeter.so", as: String(format: "libGreeter%03d.so", index)) }
        let cmdbus = productDirectory.appendingPathComponent("cmdbus").path
        let hello = productDirectory.appendingPathComponent("HelloWorld").path
        // Plugin loading, as issue #3 measured it; the journal's and the probe's costs are measured on their own below.
        let arguments = ["run", "greet", #"{"name":"Ada"}"#, "--no-journal", "--no-probe", "--plugins"]
        let oneRegistry = registries.path + "/one.json", hundredRegistry = registries.path + "/hundred.json"
        func start(_ folder: Scratch, _ registry: String) throws -> Double {
            try time(cmdbus, arguments + [folder.path], environment: ["CMDBUS_REGISTRY": registry])
        }

        var helloRuns: [Double] = [], oneRuns: [Double] = [], hundredRuns: [Double] = [], firstRuns: [Double] = []
        for _ in 0..<3 { _ = try time(hello, []); _ = try start(one, oneRegistry); _ = try start(hundred, hundredRegistry) }
        for _ in 0..<15 {
            helloRuns.append(try time(hello, []))
            oneRuns.append(try start(one, oneRegistry))
            hundredRuns.append(try start(hundred, hundredRegistry))
        }
        let firstRegistry = registries.path + "/first.json"
        for _ in 0..<7 {
            try? FileManager.default.removeItem(atPath: firstRegistry)
            firstRuns.append(try start(hundred, firstRegistry))
        }
        report.record("hello_world_process_ms", median(helloRuns))
        report.record("cold_start_1_plugin_ms", median(oneRuns))
        report.record("cold_start_100_plugins_ms", median(hundredRuns))
        report.record("cold_start_1_plugin_ratio", median(oneRuns) / median(helloRuns))
        report.record("cold_start_100_plugins_ratio", median(hundredRuns) / median(helloRuns))
        report.record("cold_start_100_plugins_first_run_ms", median(firstRuns))
        report.record("cold_start_100_plugins_first_run_ratio", median(firstRuns) / median(helloRuns))

        // The default `cmdbus run`: the same, journaled to a file (open, WAL, write-ahead and ending synced).
        let journaled = ["run", "greet", #"{"name":"Ada"}"#, "--no-probe", "--journal", one.path + "/journal.sqlite", "--plugins", one.path]
        var journaledRuns: [Double] = []
        for _ in 0..<15 { journaledRuns.append(try time(cmdbus, journaled, environment: ["CMDBUS_REGISTRY": oneRegistry])) }
        report.record("cold_start_1_plugin_journaled_ms", median(journaledRuns))

        try probeStarts(cmdbus: cmdbus, plugins: hundred, into: &report)
        try await connectedRuns(cmdbus: cmdbus, plugins: hundred, hello: median(helloRuns), into: &report)
    }

    /// What the README advises with many plugins: keep `cmdbus serve` running with the 100 plugins and
    /// make each one-shot call a `cmdbus run --connect` process, which loads no plugin at all.
    static func connectedRuns(cmdbus: String, plugins: Scratch, hello: Double, into report: inout BenchmarkReport) async throws {
        let work = try Scratch("connect")
        defer { work.remove() }
        let socketPath = work.path + "/cmdbus.sock"
        // Not `Process`: while a child started by it runs, every later `Process` waits about 50 ms
        // longer for its exit (measured here: hello world, `cmdbus --version` and the client alike).
        let server = try LaunchedProcess(
            cmdbus, ["serve", "--plugins", plugins.path, "--socket", socketPath, "--no-journal", "--no-probe"],
            environment: ["CMDBUS_REGISTRY": work.path + "/registry.json"], standardOutput: .discard, standardError: .discard
        )
        var runs: [Double] = []
        do {
            _ = try LineClient.whenServing(socketPath)
            let arguments = ["run", "greet", #"{"name":"Ada"}"#, "--connect", socketPath]
            for _ in 0..<3 { _ = try time(cmdbus, arguments) }
            for _ in 0..<15 { runs.append(try time(cmdbus, arguments)) }
        } catch {
            server.send(SIGKILL)
            _ = await server.wait()
            throw error
        }
        server.send(SIGTERM)
        _ = await server.wait()
        report.record("run_connect_100_plugins_ms", median(runs))
        report.record("run_connect_100_plugins_ratio", median(runs) / hello)
    }

    /// Start-up with 100 plugins when each new file is probed in a child process first:
    /// with a warm registry (every file already probed) against probing off, and cold.
    static func probeStarts(cmdbus: String, plugins: Scratch, into report: inout BenchmarkReport) throws {
        let registry = plugins.path + "/registry.json"
        let probing = ["run", "greet", #"{"name":"Ada"}"#, "--no-journal", "--plugins", plugins.path]
        let unprobed = probing + ["--no-probe"]
        let environment = ["CMDBUS_REGISTRY": registry]
        _ = try time(cmdbus, probing, environment: environment)
        var warm: [Double] = [], off: [Double] = [], cold: [Double] = []
        for _ in 0..<11 {
            warm.append(try time(cmdbus, probing, environment: environment))
            off.append(try time(cmdbus, unprobed, environment: environment))
        }
        for _ in 0..<3 {
            try? FileManager.default.removeItem(atPath: registry)
            cold.append(try time(cmdbus, probing, environment: environment))
        }
        report.record("start_100_plugins_probe_warm_ms", median(warm))
        report.record("start_100_plugins_probe_off_ms", median(off))
        report.record("start_100_plugins_probe_warm_ratio", median(warm) / median(off))
        report.record("start_100_plugins_probe_cold_ms", median(cold))
    }

    /// Runs a program to completion and returns its wall time in milliseconds; it must exit 0.
    static func time(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws -> Double {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.currentDirectoryURL = FileManager.default.temporaryDirectory
        let start = ContinuousClock.now
        try process.run()
        process.waitUntilExit()
        let elapsed = seconds(ContinuousClock.now - start) * 1000
        guard process.terminationStatus == 0 else {
            throw BenchmarkFailure("\(executable) \(arguments.joined(separator: " ")) exited \(process.terminationStatus)")
        }
        return elapsed
    }
}

/// A benchmark that could not run, with the reason.
struct BenchmarkFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A scratch directory for one benchmark, next to nothing else.
struct Scratch {
    let url: URL
    var path: String { url.path }

    init(_ label: String) throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("cmdbus-bench-\(label)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func copy(product: String, as name: String) throws {
        try FileManager.default.copyItem(
            at: PluginBenchmarks.productDirectory.appendingPathComponent(product), to: url.appendingPathComponent(name)
        )
    }

    func remove() { try? FileManager.default.removeItem(at: url) }
}
