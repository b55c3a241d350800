import CommandBusSupport
import Foundation
import Testing

/// What every suite of shared-bus tests calls through `Self`. The shared-bus tests are two
/// serialized suites, ``SharedBusTests`` (hosts, leases, fences, the database going away) and
/// ``SharedBusQueueTests`` (what waits on the bus and how hosts take it), which run side by
/// side: each test has a database of its own, and a test that restarts PostgreSQL restarts a
/// ``ThrowawayCluster`` of its own, so neither suite disturbs the other.
protocol SharedBusSuite {}

extension SharedBusSuite {
    /// `cmdbus ... --bus URL`.
    static func bus(_ url: String, _ arguments: String...) async throws -> ProcessResult {
        try await cmdbus(arguments + ["--bus", url])
    }

    /// Runs SQL with psql synchronously (for polling in `waitUntil`).
    static func psqlNow(_ url: String, _ sql: String) async -> String? {
        await stdoutOf(URL(fileURLWithPath: "/usr/bin/env"), ["psql", url, "-At", "-c", sql])
    }

    /// The lines of a file, without the empty last one.
    static func lines(_ url: URL) -> [Substring] {
        ((try? String(contentsOf: url, encoding: .utf8)) ?? "").split(separator: "\n")
    }

    /// A GET from Python's standard library: the status and the body.
    static func get(_ url: String) async throws -> (status: Int, body: String) {
        let script = """
            import sys, urllib.request, urllib.error
            try:
                response = urllib.request.urlopen(sys.argv[1], timeout=30); print(response.status); sys.stdout.write(response.read().decode())
            except urllib.error.HTTPError as error:
                print(error.code); sys.stdout.write(error.read().decode())
            """
        let result = try await runProcess("/usr/bin/env", ["python3", "-c", script, url])
        try #require(result.status == 0, "request failed: \(result.stderr)")
        let lines = result.stdout.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false)
        return (Int(lines[0]) ?? 0, lines.count > 1 ? String(lines[1]) : "")
    }
}

/// The shared bus's queues: what waits, and how and when hosts take it (claims, priorities,
/// limits, rates, pauses, periodic entries, cancels of what waits, imports, quarantines), with
/// real `cmdbus serve --bus` processes and a real PostgreSQL. Serialized, beside ``SharedBusTests``.
@Suite(.serialized, .enabled(if: SharedBusDatabase.isAvailable, "needs the PostgreSQL that scripts/test.sh starts"))
struct SharedBusQueueTests: SharedBusSuite {}
