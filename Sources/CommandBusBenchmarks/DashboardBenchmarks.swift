import CommandBus
import CommandBusDashboard
import CommandBusHTTP
import CommandBusHost
import CommandBusLoading
import Foundation
import Glibc
import Synchronization

/// The dashboard's figures (issue #13): a scrape of `/metrics` with 1,000 command names, and
/// what ten open event streams cost a socket `send` on the same server.
enum DashboardBenchmarks {
    static func run(into report: inout BenchmarkReport) async throws {
        report.record("http_metrics_scrape_ms", try await scrape())
        report.record("send_with_dashboard_ratio", try await sendWithStreams())
    }

    /// Milliseconds for one `GET /metrics` over TCP, with 1,000 command names counted (median of 20).
    static func scrape() async throws -> Double {
        let metrics = CommandMetrics()
        for name in 0..<1_000 {
            for outcome in [CommandState.succeeded, .succeeded, .failed] {
                let envelope = CommandEnvelope(commandName: "bench.command-\(name)")
                metrics.commandAccepted(envelope)
                metrics.commandFinished(envelope, state: outcome, error: nil, after: .milliseconds(1))
            }
        }
        let catalog = PluginCatalog(directories: [], plugins: [], skipped: [])
        let sources = DashboardSources(bus: CommandBus(), journal: nil, catalog: { catalog }, statistics: BusStatistics(), metrics: metrics)
        let dashboard = Dashboard(sources: sources, access: DashboardAccess(requiredToken: nil))
        let listener = try TCPListener.listen(host: "127.0.0.1", port: 0)
        let server = HTTPServer(listener: listener) { request in await dashboard.handle(request) }
        server.start()
        var runs: [Double] = []
        for round in 0..<22 {
            let start = ContinuousClock.now
            let body = try HTTPClient.get(port: listener.port, path: "/metrics")
            guard body.contains("bench.command-999") else { throw BenchmarkFailure("the scrape missed command names") }
            if round >= 2 { runs.append(seconds(ContinuousClock.now - start) * 1_000) }
        }
        return median(runs)
    }

    /// Socket `send` p50 with ten event streams open, over p50 with none, on one `serve --http`
    /// (blocks alternate, so drift on a noisy machine falls on both sides).
    static func sendWithStreams() async throws -> Double {
        let work = try Scratch("dashboard")
        defer { work.remove() }
        let plugins = work.path + "/plugins"
        try FileManager.default.createDirectory(atPath: plugins, withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            at: PluginBenchmarks.productDirectory.appendingPathComponent("libGreeter.so"), to: URL(fileURLWithPath: plugins + "/libGreeter.so")
        )
        let socketPath = work.path + "/cmdbus.sock", logPath = work.path + "/serve.log"
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let server = Process()
        server.executableURL = PluginBenchmarks.productDirectory.appendingPathComponent("cmdbus")
        server.arguments = ["serve", "--plugins", plugins, "--socket", socketPath, "--no-journal", "--http", "127.0.0.1:0"]
        server.environment = ProcessInfo.processInfo.environment.merging(["CMDBUS_REGISTRY": work.path + "/registry.json"]) { _, new in new }
        server.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        try server.run()
        defer { server.terminate(); server.waitUntilExit() }

        let client = try LineClient.whenServing(socketPath)
        let log = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
        guard let port = log.split(separator: "\n").first(where: { $0.contains("dashboard on ") })?
            .split(separator: ":").last.flatMap({ Int($0.prefix { $0.isNumber }) }) else {
            throw BenchmarkFailure("serve --http did not say where the dashboard is: \(log)")
        }

        let send = #"{"id":1,"op":"send","command":"greet","payload":{"name":"Ada"}}"#
        for _ in 0..<500 { _ = client.ask(send) }
        // Each block follows one second of untimed sends, the "with" block's covering the wait for
        // the streams' first ticks, so both start alike and neither on a machine that has idled.
        // When only the "with" blocks followed an idle wait, the ratio read 1.06–1.30 in six runs
        // of eight; with the same pause before both blocks, 1.00–1.06 in six of six.
        func p50(after ready: () -> Bool = { true }) async -> Double {
            let warm = ContinuousClock.now + .seconds(1), deadline = warm + .seconds(4)
            while ContinuousClock.now < warm || (!ready() && ContinuousClock.now < deadline) { _ = client.ask(send) }
            var latencies = LatencySampler(capacity: 1_000)
            for _ in 0..<1_000 { await latencies.measure { _ = client.ask(send) } }
            return latencies.percentile(50)
        }
        // Pairs of blocks, without and with, so drift on a noisy machine falls on both sides of
        // each ratio; the figure is the median of the pairs' ratios.
        var ratios: [Double] = []
        for _ in 0..<9 {
            let without = await p50()
            let streams = try (0..<10).map { _ in try EventStreamReader(port: port) }
            ratios.append(await p50(after: { streams.allSatisfy(\.hasTicked) }) / without)
            for stream in streams { stream.stop() }
        }
        return median(ratios)
    }
}

/// A blocking HTTP/1.1 GET on loopback, for the benchmarks.
enum HTTPClient {
    static func get(port: Int, path: String) throws -> String {
        let descriptor = try connectLoopback(port)
        defer { close(descriptor) }
        let request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var response: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let got = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if got <= 0 { break }
            response += chunk[..<got]
        }
        return String(decoding: response, as: UTF8.self)
    }

    static func connectLoopback(_ port: Int) throws -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(descriptor)
            throw BenchmarkFailure("cannot connect to 127.0.0.1:\(port)")
        }
        return descriptor
    }
}

/// An open `/api/events` stream, read on a thread of its own, as a browser tab would.
final class EventStreamReader: @unchecked Sendable {
    private let descriptor: Int32
    private let ticked = Atomic<Bool>(false)

    init(port: Int) throws {
        descriptor = try HTTPClient.connectLoopback(port)
        let request = Array("GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        Thread.detachNewThread { [self] in
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let got = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
                if got <= 0 { break }
                if !hasTicked, String(decoding: chunk[..<got], as: UTF8.self).contains("event: tick") {
                    ticked.store(true, ordering: .releasing)
                }
            }
        }
    }

    /// Whether the stream has had its first tick.
    var hasTicked: Bool { ticked.load(ordering: .acquiring) }

    func stop() { shutdown(descriptor, Int32(SHUT_RDWR)) }

    deinit { close(descriptor) }
}
