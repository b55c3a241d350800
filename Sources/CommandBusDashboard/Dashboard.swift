import CommandBusSupport
import CommandBusLoading
import CommandBusHost
import CommandBusHTTP
import CommandBus
import Synchronization
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What the dashboard's buttons on a periodic command do.
package enum PeriodicOperation: String, Sendable {
    /// Post nothing until resumed.
    case pause
    /// Go on from the next slot.
    case resume
    /// Post its command now, once.
    case run
    /// Take it off the bus: its schedule goes; what it posted stays.
    case remove
}

/// Why an action's values were refused, in one line, for a 400.
package struct Refusal: Error, Sendable {
    /// What is wrong and what to give instead.
    package var message: String

    /// A refusal saying `message`.
    package init(_ message: String) { self.message = message }
}

/// What the dashboard reads from: the running host's bus, plugins, journal and counters.
package struct DashboardSources: Sendable {
    package var bus: CommandBus
    /// The journal the command pages read, if the host keeps one (the shared bus's, with `--bus`).
    package var journal: (any Journal)?
    /// Takes a dead letter out of the list; `nil` where the journal cannot (the shared bus).
    package var discard: (@Sendable (UUID) async throws(CommandBusError) -> Void)?
    /// Cancels a command in flight, returning whether one was; `nil` where the host cannot.
    package var cancel: (@Sendable (UUID) async throws(CommandBusError) -> Bool)?
    /// Loads a plugin file again, changed or not, lifting its quarantine (the plugins page's "Try
    /// again"); `nil` where the host cannot.
    package var loadPluginAgain: (@Sendable (String) async -> Result<LoadedPlugin, SkippedPluginFile>)?
    /// Has every live host of the shared bus with a plugin file of this name load it again (as
    /// `plugins forget NAME.so --bus`), returning the hosts' answers, or `nil` if none has such a
    /// file; `nil` off the shared bus.
    package var loadPluginAgainOnBus: (@Sendable (String) async throws(CommandBusError) -> JSONValue?)?
    /// The plugins loaded now (a server's hot loading changes them).
    package var catalog: @Sendable () -> PluginCatalog
    package var statistics: BusStatistics
    package var metrics: CommandMetrics
    /// Pauses (`true`) or resumes a command name on the shared bus, returning whether that
    /// changed it; `nil` off the shared bus.
    package var setPaused: (@Sendable (String, Bool) async throws(CommandBusError) -> Bool)?
    /// Cancels the commands of a name that wait on the shared bus (`bus cancel`), returning how
    /// many; `nil` off the shared bus.
    package var cancelWaiting: (@Sendable (String) async throws(CommandBusError) -> Int)?
    /// Sets, keeps (`nil`) or removes (`"none"`) how many commands of a name run at once across
    /// the shared bus (`"2"`) and how many start in a period (`"10/s"`), as `bus limit` does,
    /// returning the limits now as JSON, or why the values are refused; `nil` off the shared bus.
    package var setLimit: (@Sendable (_ name: String, _ atOnce: String?, _ rate: String?) async throws(CommandBusError) -> Result<JSONValue, Refusal>)?
    /// Pauses, resumes or runs now a periodic command of the shared bus (`bus periodic
    /// --pause`, `--resume`, `--run-now`), returning what it did as JSON, or `nil` if there is no
    /// entry of that name; `nil` off the shared bus.
    package var periodic: (@Sendable (String, PeriodicOperation) async throws(CommandBusError) -> JSONValue?)?
    /// The shared bus's hosts and queues (`bus status`), if the host is on one.
    package var sharedBus: (@Sendable () async -> JSONValue?)?
    /// The socket server's request loop: `send`s that ran on its thread and on the bus's
    /// runners, and its takeovers (`cmdbus serve` without `--bus`).
    package var requestLoop: (@Sendable () -> (sendsOnLoop: Int, sendsOnRunners: Int, takeovers: Int))?
    /// The socket server's bound on commands held (`--max-in-flight`), how often clients were
    /// held back at it, and its `subscribe` streams open (`cmdbus serve` without `--bus`).
    package var socketServer: (@Sendable () -> (maxInFlight: Int, timesHeldBack: Int, subscriptions: Int))?
    /// This host's lease on the shared bus: how often it fenced itself because the lease ran out
    /// without a renewal, how often the bus declared it dead, and whether it claims now.
    package var busHost: (@Sendable () -> (leaseLapses: Int, declaredDead: Int, claiming: Bool))?
    /// Why the host takes no new commands now (it drains, it waits for the shared bus), for
    /// `/readyz`; `nil` when it does.
    package var notReadyReason: @Sendable () -> String? = { nil }

    /// Sources for a host; the optional parts are left out.
    package init(
        bus: CommandBus, journal: (any Journal)?, catalog: @escaping @Sendable () -> PluginCatalog,
        statistics: BusStatistics, metrics: CommandMetrics
    ) {
        self.bus = bus
        self.journal = journal
        self.catalog = catalog
        self.statistics = statistics
        self.metrics = metrics
    }
}

/// `cmdbus serve --http`: the web dashboard, its JSON API under `/api/`, and `/metrics`.
///
/// Pages are one small HTML shell with a script and a style sheet, all from this binary; the
/// script renders from the API and keeps itself current through `/api/events`.
package final class Dashboard: Sendable {
    package let sources: DashboardSources
    package let access: DashboardAccess
    package let feed: DashboardFeed
    package let events: CommandEventLog
    /// The shared bus's status, read at most once a second for every page and scrape (`--bus` only).
    package let sharedBusStatus: SharedBusStatus?
    private let started = ContinuousClock.now
    /// The HTTP server's open connections, for `/metrics`; set once the server exists.
    package let connectionCount: @Sendable () -> Int

    /// A dashboard over `sources`; `connections` reports the HTTP server's open connections.
    package init(sources: DashboardSources, access: DashboardAccess, connections: @escaping @Sendable () -> Int = { 0 }) {
        self.sources = sources
        self.access = access
        self.connectionCount = connections
        events = CommandEventLog(following: sources.bus)
        sharedBusStatus = sources.sharedBus.map(SharedBusStatus.init(read:))
        let metrics = sources.metrics, statistics = sources.statistics
        let cursor = FeedCursor()
        feed = DashboardFeed {
            let ended = cursor.position.withLock { position in
                let (ended, next) = metrics.ended(since: position)
                position = next
                return ended
            }
            let second = metrics.history(seconds: 2).first
            return .object([
                "time": .number(Date().timeIntervalSince1970), "inFlight": .integer(Int64(metrics.inFlight)),
                "totals": Dashboard.totals(statistics),
                "second": second.map(Dashboard.json) ?? .null,
                "ended": .array(ended.suffix(50).map(Dashboard.json)), "endedCount": .integer(Int64(ended.count)),
            ])
        }
    }

    /// Answers one request: the health checks, which need no token; access; then the route.
    package func handle(_ request: HTTPRequest) async -> HTTPResponse {
        var response: HTTPResponse
        if let health = health(request) {
            response = health
        } else {
            response = await checkedRoute(request)
        }
        response.headers += DashboardAccess.securityHeaders
        return response
    }

    /// `/healthz` (the process answers: 200) and `/readyz` (200 while the host takes commands,
    /// else 503 with why), for a load balancer or an orchestrator's probes. They say nothing a
    /// token protects, so they need none: a probe seldom carries one.
    private func health(_ request: HTTPRequest) -> HTTPResponse? {
        guard request.method == "GET" || request.method == "HEAD" else { return nil }
        switch request.path {
        case "/healthz":
            return HTTPResponse(status: 200, contentType: "text/plain; charset=utf-8", text: "ok\n", headers: [("Cache-Control", "no-store")])
        case "/readyz":
            let reason = sources.notReadyReason()
            return HTTPResponse(
                status: reason == nil ? 200 : 503, contentType: "text/plain; charset=utf-8",
                text: reason.map { "not ready: \($0)\n" } ?? "ready\n", headers: [("Cache-Control", "no-store")]
            )
        default:
            return nil
        }
    }

    /// Access, then the route.
    private func checkedRoute(_ request: HTTPRequest) async -> HTTPResponse {
        var response: HTTPResponse
        switch access.check(request) {
        case .deny(let denied):
            response = denied
        case .setCookie(let path):
            response = HTTPResponse(status: 303, headers: [
                ("Location", path),
                ("Set-Cookie", "\(DashboardAccess.cookieName)=\(access.actionToken); Path=/; HttpOnly; SameSite=Strict"),
            ])
        case .allow:
            response = await route(request)
        }
        return response
    }

    private func route(_ request: HTTPRequest) async -> HTTPResponse {
        let parts = request.path.split(separator: "/").map(String.init)
        switch (request.method, parts.first, parts.count) {
        case ("GET", nil, 0), ("HEAD", nil, 0):
            return HTTPResponse(status: 200, contentType: "text/html; charset=utf-8", text: DashboardAssets.page(actionToken: access.actionToken))
        case ("GET", "app.js", 1), ("HEAD", "app.js", 1):
            return HTTPResponse(status: 200, contentType: "text/javascript; charset=utf-8", text: DashboardAssets.script, headers: [("Cache-Control", "no-cache")])
        case ("GET", "app.css", 1), ("HEAD", "app.css", 1):
            return HTTPResponse(status: 200, contentType: "text/css; charset=utf-8", text: DashboardAssets.style, headers: [("Cache-Control", "no-cache")])
        case ("GET", "favicon.svg", 1), ("HEAD", "favicon.svg", 1):
            return HTTPResponse(status: 200, contentType: "image/svg+xml", text: DashboardAssets.icon)
        case ("GET", "metrics", 1), ("HEAD", "metrics", 1):
            return HTTPResponse(status: 200, contentType: PrometheusText.contentType, text: await scrape())
        case (_, "api", _):
            return await api(request, Array(parts.dropFirst()))
        default:
            return .error(404, "no page at \(request.path); the dashboard is at /")
        }
    }

    // MARK: Shared JSON

    static func totals(_ statistics: BusStatistics) -> JSONValue {
        let counts = statistics.counts
        return .object(["completed": .integer(Int64(counts.completed)), "failed": .integer(Int64(counts.failed))])
    }

    static func json(_ second: CommandMetrics.Second) -> JSONValue {
        var fields: [String: JSONValue] = ["time": .integer(second.time)]
        for state in [CommandState.succeeded, .failed, .cancelled, .timedOut] {
            fields[state.rawValue] = .integer(Int64(second.outcomes[state] ?? 0))
        }
        return .object(fields)
    }

    static func json(_ ended: CommandMetrics.Ended) -> JSONValue {
        .object([
            "id": .string(ended.id.uuidString), "command": .string(ended.command), "state": .string(ended.state.rawValue),
            "durationMs": .number(roundedMilliseconds(ended.seconds)), "traceparent": .optional(ended.traceparent), "endedAt": .number(ended.endedAt),
        ])
    }

    /// Seconds since the dashboard started.
    var uptime: Double { (ContinuousClock.now - started).seconds }
}

/// The feed's place in the metrics' list of ended commands.
private final class FeedCursor: Sendable {
    let position = Mutex(0)
}
