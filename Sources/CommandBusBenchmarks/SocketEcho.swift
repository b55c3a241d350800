import CommandBusServer
import CommandBusSupport
import Foundation
import Glibc

/// The floor under a round trip through a Unix socket between two processes on this machine,
/// measured in the same run as the server: a process (this executable with `--echo PATH`) that
/// writes back whatever it reads, asked by the same ``LineClient`` the server's figures use.
/// It reads through the server's own ``LineSocketReader``, which asks without sleeping for as
/// long as the server's request loop does (``LineSocketReader/spin``) before it sleeps, so the
/// two wake the same way.
///
/// The server's unjournaled `send` is compared with it (`socket_send_no_journal_vs_echo_ratio`,
/// `socket_send_no_journal_over_echo_us`). On a virtual machine most of a round trip is the
/// kernel waking the client, and that costs several times more when the two sides run on
/// different CPUs than on one (here about 25 µs against 4 µs a wake). The scheduler decides that
/// anew for the echo and for the server, so the echo shows what the floor was in the run, beside
/// the server's figure; it is not a correction that takes the swing out.
enum SocketEcho {
    /// Microseconds (p50) of `request`'s round trip through an echo process listening in `directory`.
    static func latency(directory: String, request: String) throws -> Double {
        let path = directory + "/echo.sock"
        let echo = Process()
        echo.executableURL = PluginBenchmarks.productDirectory.appendingPathComponent("CommandBusBenchmarks")
        echo.arguments = ["--echo", path]
        try echo.run()
        defer { echo.terminate(); echo.waitUntilExit() }
        guard let client = LineClient.connecting(to: path) else { throw BenchmarkFailure("the echo never listened on \(path)") }
        for _ in 0..<200 { _ = client.ask(request) }
        var latencies = LatencySampler(capacity: 2_000)
        for _ in 0..<2_000 {
            let start = ContinuousClock.now
            guard client.ask(request) == request else { throw BenchmarkFailure("the echo at \(path) answered something else") }
            latencies.record(ContinuousClock.now - start)
        }
        return latencies.percentile(50) / 1_000
    }

    /// The echo process's work: listens at `path`, takes one connection and writes back each line
    /// it reads until the client closes, then returns.
    static func serve(at path: String) throws {
        let listener: UnixSocket
        do { listener = try UnixSocket.listen(at: path) } catch { throw BenchmarkFailure("cannot listen for the echo: \(error)") }
        defer { listener.close() }
        let connection = accept(listener.descriptor, nil, nil)
        guard connection >= 0 else { throw BenchmarkFailure("the echo at \(path) could not accept its client") }
        defer { close(connection) }
        // The server's own reader, which spins before it sleeps, and its own writer.
        let reader = LineSocketReader(descriptor: connection, limit: 1 << 20)
        while case .text(let line)? = reader.next() {
            guard sendAll(connection, line + [0x0A]) else { return }
        }
    }
}
