import CommandBusServer
import CommandBusSupport
import Foundation
import Glibc

/// The server figures of issue #6: `cmdbus serve` driven through its socket.
enum ServerBenchmarks {
    static func run(into report: inout BenchmarkReport) async throws {
        try await measure(.batched, into: &report)
        try await measure(.deferred, into: &report)
        try await measure(.none, into: &report)
    }

    /// How the measured server journals.
    enum Journaling {
        /// The default: two durable writes per command, the write-ahead before the handler runs and the ending before the answer.
        case batched
        /// `--durability deferred`: one durable write per command, the ending's, which makes the write-ahead durable too.
        case deferred
        /// `--no-journal`.
        case none

        var suffix: String {
            switch self {
            case .batched: ""
            case .deferred: "_deferred"
            case .none: "_no_journal"
            }
        }

        func arguments(journal: String) -> [String] {
            switch self {
            case .batched: ["--journal", journal]
            case .deferred: ["--journal", journal, "--durability", "deferred"]
            case .none: ["--no-journal"]
            }
        }
    }

    /// The figures for one server. The journaled ones are compared with one `fsync` measured beside them.
    static func measure(_ journaling: Journaling, into report: inout BenchmarkReport) async throws {
        let suffix = journaling.suffix
        let work = try Scratch("serve")
        defer { work.remove() }
        let plugins = work.path + "/plugins"
        try FileManager.default.createDirectory(atPath: plugins, withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            at: PluginBenchmarks.productDirectory.appendingPathComponent("libGreeter.so"), to: URL(fileURLWithPath: plugins + "/libGreeter.so")
        )
        let socketPath = work.path + "/cmdbus.sock"
        let server = Process()
        server.executableURL = PluginBenchmarks.productDirectory.appendingPathComponent("cmdbus")
        server.arguments = ["serve", "--plugins", plugins, "--socket", socketPath] + journaling.arguments(journal: work.path + "/journal.sqlite")
        server.environment = ProcessInfo.processInfo.environment.merging(["CMDBUS_REGISTRY": work.path + "/registry.json"]) { _, new in new }
        server.standardError = FileHandle.nullDevice
        try server.run()
        defer { server.terminate(); server.waitUntilExit() }

        let client = try LineClient.whenServing(socketPath)

        let send = #"{"id":1,"op":"send","command":"greet","payload":{"name":"Ada"},"metadata":{}}"#
        for _ in 0..<200 { _ = client.ask(send) }
        var latencies = LatencySampler(capacity: 2_000)
        for _ in 0..<2_000 { await latencies.measure { _ = client.ask(send) } }
        report.record("socket_send\(suffix)_p50_us", latencies.percentile(50) / 1_000)
        switch journaling {
        case .batched:
            let fsync = try fsyncLatency(directory: work.path)
            let commit = try JournalBenchmarks.sqliteCommitLatency(directory: work.path)
            report.record("fsync_p50_us", fsync)
            report.record("socket_send_journaled_vs_fsync_ratio", latencies.percentile(50) / 1_000 / fsync)
            report.record("sqlite_commit_p50_us", commit)
            report.record("socket_send_journaled_vs_sqlite_commit_ratio", latencies.percentile(50) / 1_000 / commit)
        case .deferred:
            report.record("socket_send_deferred_vs_fsync_ratio", latencies.percentile(50) / 1_000 / (try fsyncLatency(directory: work.path)))
            report.record(
                "socket_send_deferred_vs_sqlite_commit_ratio",
                latencies.percentile(50) / 1_000 / (try JournalBenchmarks.sqliteCommitLatency(directory: work.path))
            )
        case .none:
            let echo = try SocketEcho.latency(directory: work.path, request: send)
            report.record("socket_echo_p50_us", echo)
            report.record("socket_send_no_journal_vs_echo_ratio", latencies.percentile(50) / 1_000 / echo)
            report.record("socket_send_no_journal_over_echo_us", latencies.percentile(50) / 1_000 - echo)
        }
        // The median of five bursts: one burst lasts a fifth of a second, and on this machine
        // bursts of one run ranged from 67k to 122k a second.
        let bursts = try (0..<5).map { _ in try throughput(socketPath) }
        FileHandle.standardError.write(Data("  socket_throughput\(suffix)_per_s bursts: \(bursts.map { String(Int($0)) }.joined(separator: " "))\n".utf8))
        report.record("socket_throughput\(suffix)_per_s", median(bursts))
        if case .batched = journaling { report.record("hot_load_ms", try hotLoad(client: client, plugins: plugins)) }
    }

    /// Microseconds (p50) to append a journal-row-sized record to a file and `fsync` it, in the
    /// directory the server's journal is in: the floor under any one durable write there.
    static func fsyncLatency(directory: String) throws -> Double {
        let path = directory + "/fsync-probe"
        let descriptor = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw BenchmarkFailure("cannot create \(path)") }
        defer { close(descriptor); unlink(path) }
        let record = [UInt8](repeating: 0x2A, count: 512)
        var latencies = LatencySampler(capacity: 300)
        for round in 0..<330 {
            let start = ContinuousClock.now
            let written = record.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            guard written == record.count, fsync(descriptor) == 0 else { throw BenchmarkFailure("cannot write and fsync \(path)") }
            if round >= 30 { latencies.record(ContinuousClock.now - start) }
        }
        return latencies.percentile(50) / 1_000
    }

    /// Posts per second over 10 connections in one burst, each writing 2,000 posts and then reading
    /// the acknowledgements.
    static func throughput(_ socketPath: String) throws -> Double {
        let perConnection = 2_000
        let clients = (0..<10).compactMap { _ in LineClient(path: socketPath) }
        guard clients.count == 10 else { throw BenchmarkFailure("could not open 10 connections") }
        let start = ContinuousClock.now
        // Each connection on a dispatch thread of its own; blocking I/O stays off the cooperative pool.
        let group = DispatchGroup()
        for (index, client) in clients.enumerated() {
            DispatchQueue.global().async(group: group) {
                let lines = (0..<perConnection).map { #"{"id":\#($0),"op":"post","command":"greet","payload":{"name":"c\#(index)"}}"# }
                client.write(lines.joined(separator: "\n") + "\n")
                for _ in 0..<perConnection { _ = client.readLine() }
            }
        }
        group.wait()
        return Double(perConnection * clients.count) / seconds(ContinuousClock.now - start)
    }

    /// Milliseconds from a plugin file appearing (renamed into the directory) to its command being routable.
    static func hotLoad(client: LineClient, plugins: String) throws -> Double {
        var runs: [Double] = []
        for round in 0..<5 {
            let target = plugins + "/libCEcho.so"
            try? FileManager.default.removeItem(atPath: target)
            usleep(100_000)
            let staging = plugins + "/.staging-\(round)"
            try FileManager.default.copyItem(atPath: PluginBenchmarks.productDirectory.appendingPathComponent("libCEcho.so").path, toPath: staging)
            let start = ContinuousClock.now
            rename(staging, target)
            while !client.ask(#"{"id":2,"op":"can","command":"c.echo","payload":{}}"#).contains(#""canHandle":true"#) {
                if ContinuousClock.now - start > .seconds(10) { throw BenchmarkFailure("the hot-loaded plugin never became routable") }
            }
            runs.append(seconds(ContinuousClock.now - start) * 1_000)
        }
        return median(runs)
    }
}

/// A blocking NDJSON client on a Unix socket.
final class LineClient: @unchecked Sendable {
    private let descriptor: Int32
    /// The server's own line splitter: linear in a burst of lines. The client must not be what is
    /// measured; taking lines off an array's front (a copy of the rest each) made reading a burst
    /// of 2,000 acknowledgements quadratic.
    private var lines = LineSplitter(limit: 16 << 20)
    /// Where each `recv` lands: allocated once, not per line.
    private var chunk = [UInt8](repeating: 0, count: 65_536)

    init?(path: String) {
        guard let descriptor = try? UnixSocket.connect(to: path) else { return nil }
        self.descriptor = descriptor
    }

    deinit { close(descriptor) }

    /// A client of the server at `path` once it answers `status`, trying for about five seconds.
    static func whenServing(_ path: String) throws -> LineClient {
        guard let client = connecting(to: path, ready: { $0.ask(#"{"id":0,"op":"status"}"#).contains(#""ok":true"#) }) else {
            throw BenchmarkFailure("cmdbus serve never answered on \(path)")
        }
        return client
    }

    /// A client of whatever listens at `path` once `ready` says so of a connection, trying for
    /// about five seconds; `nil` if it never did.
    static func connecting(to path: String, ready: (LineClient) -> Bool = { _ in true }) -> LineClient? {
        for _ in 0..<500 {
            if let client = LineClient(path: path), ready(client) { return client }
            usleep(10_000)
        }
        return nil
    }

    func ask(_ line: String) -> String {
        write(line + "\n")
        return readLine()
    }

    func write(_ text: String) {
        _ = sendAll(descriptor, Array(text.utf8))
    }

    func readLine() -> String {
        while true {
            switch lines.next() {
            case .text(let line): return String(decoding: line, as: UTF8.self)
            case .tooLong: return ""
            case nil: break
            }
            let got = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if got <= 0 { return "" }
            chunk.withUnsafeBytes { lines.append(UnsafeRawBufferPointer(rebasing: $0[..<got])) }
        }
    }
}
