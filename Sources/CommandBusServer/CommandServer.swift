import CommandBusSupport
import CommandBusLoading
import CommandBusHost
import CommandBus
import Dispatch
import Synchronization
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc

/// `cmdbus serve`: a long-running host that takes commands as NDJSON over a Unix socket.
///
/// Each request is one line, `{"id": ..., "op": ..., ...}`; every response and event line
/// carries the request's id. On SIGTERM or SIGINT it stops accepting, waits for commands in
/// flight up to the drain timeout, and exits; what is unfinished stays in the journal and
/// runs again at the next start. A second signal exits at once.
///
/// Its requests are answered in CommandServer+Requests.swift; the state they share with the
/// server's start and shutdown here is the module's, not private, only to live in two files.
package final class CommandServer: Sendable {
    /// Where the server listens unless `--socket PATH`.
    package static let defaultSocketPath = "./.cmdbus/cmdbus.sock"

    package let session: HostSession
    package let socket: UnixSocket
    package let drain: Duration
    package let log: ServerLog
    package let statistics: BusStatistics
    /// The most commands the server holds at once; clients that add more wait (see ``InFlightLimit``).
    package let inFlight: InFlightLimit
    /// Loads plugins dropped into the directories while the server runs; `nil` without inotify.
    package let watcher: PluginWatcher?
    let started = ContinuousClock.now
    let draining = Atomic<Bool>(false)
    /// `subscribe` streams open now, for `status`.
    let subscriptions = Atomic<Int>(0)
    /// The server's SIGTERM and SIGINT handling, kept for as long as it runs.
    private let signals: Mutex<ShutdownSignals?>
    /// Commands sent or posted through the socket and not finished, so `cancel` can find them.
    let running = TicketTable()
    /// The sends the request loop runs itself.
    let inlineSends = InlineSends(executor: LoopExecutor())
    /// Whether the journal's path still leads to the file the server writes.
    let journalFile: JournalFileWatch?
    /// The longest request line; longer ones get an error and are skipped.
    package static let maxLineBytes = 16 << 20

    /// - Parameters:
    ///   - inFlight: The bound on commands held at once. It counts only what it observes, so it
    ///     must observe the session's bus from its start (the commands it recovers count too):
    ///     there is no default, which would be a bound that never holds.
    ///   - signals: The process's signal handling, if it listens already (it did while the
    ///     plugins loaded); the server takes it over when it runs, else makes its own.
    package init(
        session: HostSession, socket: UnixSocket, drain: Duration, log: ServerLog, statistics: BusStatistics,
        inFlight: InFlightLimit, signals: ShutdownSignals? = nil
    ) {
        self.signals = Mutex(signals)
        self.inFlight = inFlight
        self.session = session
        self.socket = socket
        self.drain = drain
        self.log = log
        self.statistics = statistics
        watcher = PluginWatcher(loader: session.loader, bus: session.bus, catalog: session.catalog, log: log, drain: drain)
        journalFile = session.journal.map(JournalFileWatch.init(journal:))
        // What the session runs again after a crash is cancelled as a client's command is.
        for ticket in session.recovered { running.track(ticket) }
    }

    /// Whether the server drains: it stopped accepting and takes no new commands.
    package var isDraining: Bool { draining.load(ordering: .acquiring) }

    /// Why the server is not ready (`/readyz`), if it is not: it drains, or its journal's file
    /// was removed or replaced under it.
    package var notReadyReason: String? {
        isDraining ? "draining: the server takes no new commands" : journalFile?.problem
    }

    /// The catalog now, hot-loaded plugins included.
    package var catalog: PluginCatalog { watcher?.catalog ?? session.catalog }

    /// Socket `send`s so far, by where they ran (the request loop's thread or the bus's
    /// runners), and how often a command held the loop so long that a new thread took it over.
    package var requestLoopCounts: (sendsOnLoop: Int, sendsOnRunners: Int, takeovers: Int) { inlineSends.counts }

    /// The bound on commands held, how often clients were held back at it, and the `subscribe`
    /// streams open now.
    package var bounds: (maxInFlight: Int, timesHeldBack: Int, subscriptions: Int) {
        (inFlight.maximum, inFlight.timesReached, subscriptions.load(ordering: .relaxed))
    }

    /// The plugins loaded now, including those hot-loaded.
    var plugins: [LoadedPlugin] { watcher?.plugins ?? session.catalog.plugins }

    /// Serves until a signal ends the process.
    package func run() async -> Never {
        handleSignals()
        session.bus.addObserver(CommandLogObserver(log: log))
        forwardHandlerLogs()
        watcher?.start()
        journalFile?.start(log: log)
        log(.info, "serving on \(socket.path) (\(counted(session.catalog.plugins.count, "plugin")))")
        tellServiceManager()
        RequestLoop(listener: socket.descriptor, maxLineBytes: Self.maxLineBytes, executor: inlineSends.executor, inFlight: inFlight, onRefused: { [log] count in
            var limit = rlimit()
            getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            log(.warning, "refused \(counted(count, "connection")): no file descriptor free (this process may open \(limit.rlim_cur)); "
                + "raise the limit (ulimit -n, systemd's LimitNOFILE=) or close idle connections")
        }, onOverflow: { [log] peer in
            log(.warning, "dropped a client (\(peer?.description ?? "its process unknown")): \(ClientConnection.maxQueuedBytes >> 20) MiB of answers waited for it unread; "
                + "a client must read its answers as it asks for them")
        }) { [self] line, connection, owned in
            process(line, on: connection, owned: owned)
        }.start()
        await withUnsafeContinuation { (_: UnsafeContinuation<Void, Never>) in }
        _exit(0)
    }

    /// `READY=1` for a service manager that waits for it (systemd's `Type=notify`), then its
    /// work every five seconds until the server drains; and, under a watchdog, `WATCHDOG=1` each
    /// time the request loop has run a job (a loop that turns reads its clients).
    private func tellServiceManager() {
        // A full path: the manager's status is read away from the server's working directory.
        let path = FileSystem.realPath(socket.path) ?? socket.path
        let loop = inlineSends.executor
        ServiceStatus.ready(provingAlive: { await Task(executorPreference: loop) {}.value }, log: { [log] in log(.warning, $0) }) { [self] in
            draining.load(ordering: .acquiring) ? nil
                : "serving on \(path): " + statistics.workSummary(plugins: plugins.count, quarantined: plugins.count { $0.quarantine != nil })
        }
    }

    /// Handlers' `context.log` lines, in the server's log at their own level.
    private func forwardHandlerLogs() {
        // Log lines only: a subscriber to every event would have every command's lifecycle built and queued for it.
        let events = session.bus.events(matching: .logs, bufferingPolicy: .bufferingNewest(10_000))
        Task { [log] in
            for await event in events {
                guard case .log(let level, let message) = event.kind else { continue }
                var line = "\(quotedLine(event.envelope.commandName)) \(event.commandID): \(quotedLine(message))"
                if let trace = TraceContext.traceID(in: event.envelope.metadata) { line += " trace=\(trace)" }
                log(level, line)
            }
        }
    }

    /// What SIGHUP does to a server, local or a bus host: its plugin directories are read again.
    package static func reload(_ watcher: PluginWatcher?, log: ServerLog) -> @Sendable () -> Void {
        { [watcher, log] in
            if let watcher { return watcher.rescanSoon() }
            log(.info, "SIGHUP: the plugin directories are not watched here, so there is nothing to read again")
        }
    }

    private func handleSignals() {
        let first: @Sendable () -> Void = { [self] in shutDown() }
        let second: @Sendable () -> Void = { [self] in
            log(.warning, "second signal: exiting now" + (session.journal == nil ? "; unfinished commands are lost (no journal)" : "; unfinished commands stay in the journal"))
            _exit(1)
        }
        signals.withLock { signals in
            if let signals { signals.handle(first: first, second: second) } else { signals = ShutdownSignals(first: first, second: second) }
            signals?.onHangUp(Self.reload(watcher, log: log))
        }
    }

    /// Stops accepting, waits for the commands in flight up to the drain timeout, then exits.
    private func shutDown() {
        draining.store(true, ordering: .releasing)
        socket.close()
        log(.info, "draining \(counted(statistics.inFlight, "command")) for up to \(drain.spoken)")
        ServiceNotifier.shared.stopping(status: "draining \(counted(statistics.inFlight, "command")) for up to \(drain.spoken)")
        Task { [self] in
            // The last command's end and its answer's write, or the drain deadline, whichever comes
            // first: no polling. (A command's end comes before its answer is written: a server that
            // exited at the end alone closed the connection of a client whose command succeeded.)
            await withTaskGroup(of: Void.self) { group in
                group.addTask { [statistics, running] in
                    await statistics.waitUntilIdle()
                    await running.waitUntilEmpty()
                }
                group.addTask { [drain] in try? await Task.sleep(for: drain) }
                await group.next()
                statistics.releaseIdleWaiters()
                running.releaseEmptyWaiters()
                group.cancelAll()
            }
            await session.close()
            for plugin in plugins { plugin.worker?.stop() }
            let left = statistics.inFlight
            log(.info, session.journal == nil && left > 0 ? "stopped; dropped \(counted(left, "unfinished command")) (no journal)"
                : session.journal == nil ? "stopped" : "stopped; the journal keeps \(counted(left, "unfinished command")) for the next start")
            fflush(nil)
            _exit(0)
        }
    }

    /// Loads a plugin file again, changed or not, lifting its quarantine (``PluginWatcher/loadAgain(_:)``):
    /// a client's `forget`, the dashboard's "Try again".
    package func loadPluginAgain(_ path: String) async -> Result<LoadedPlugin, SkippedPluginFile> {
        await PluginWatcher.loadAgain(path, with: watcher)
    }

    /// Cancels a command a client sent or posted, or one recovered at start, that has not ended;
    /// returns whether there was one.
    package func cancel(_ id: UUID) -> Bool {
        guard let ticket = running.ticket(id) else { return false }
        ticket.cancel()
        return true
    }
}
