import CommandBusSupport
import CommandBusLoading
import CommandBusHost
import CommandBusServer
import CommandBus
import CommandBusPostgres
import CommandBusDashboard
import Glibc
import Synchronization

/// `cmdbus serve`: the long-running host, taking commands as NDJSON over a Unix socket.
enum ServeCommand {
    static let spec = ArgumentSpec(command: "serve", options: [
        .init(name: "socket", short: nil, value: "PATH", help: "Socket path (default \(CommandServer.defaultSocketPath))."),
        .init(name: "drain", short: nil, value: "SECONDS", help: "Seconds to wait for commands in flight at shutdown (default 10)."),
        .init(name: "log-level", short: nil, value: "LEVEL", choices: ["debug", "info", "warning", "error"], help: "debug, info (default), warning or error."),
        .init(name: "log-format", short: nil, value: "FORMAT", choices: ["text", "json"], help: "text (default) or json: one JSON object per line, for log shippers."),
        .bus,
        .init(name: "lease", short: nil, value: "SECONDS", help: "With --bus: seconds a silent host keeps its commands (default 15)."),
        .init(name: "capacity", short: nil, value: "N", help: "With --bus: commands this host runs at once (default 64)."),
        .init(name: "keep", short: nil, value: "AGE", help: "Prune what ended longer ago than AGE (30d), now and every so often."),
        .init(name: "max-in-flight", short: nil, value: "N", help: "Commands held at once before clients that add more wait (default \(InFlightLimit.defaultMaximum))."),
        .help,
    ] + DashboardOptions.options + PluginOptions.options + JournalOptions.options)

    static let help = """
        Usage: cmdbus serve [--plugins DIR ...] [--socket PATH] [--journal PATH] [--drain SECONDS]

        Runs a long-lived host: it loads the plugins and journal once, runs again what a
        previous run left unfinished, and takes requests on a Unix socket (mode 0600),
        one JSON object per line, answering with lines that carry the request's id:
          {"id": 1, "op": "send", "command": "greet", "payload": {"name": "Ada"}}
          {"id": 1, "ok": true, "commandId": "...", "result": {"greeting": "Hello, Ada!"}}
        Ops: send, post, can, cancel (commandId), status, plugins, forget (path: load a
        plugin file again), subscribe (commandId or correlationId). SIGTERM or SIGINT
        drains and stops; a second signal stops at once.
        Exits 69 if another server already listens on the socket.

        With --http [ADDR:]PORT it also serves a web dashboard (overview, commands and their
        trees, dead letters with retry and discard, plugins, hosts and queues), its JSON API
        under /api/, and Prometheus metrics at /metrics. It listens on 127.0.0.1 unless told
        otherwise; any other address needs --http-token-file.

        With --bus URL (or $CMDBUS_BUS) it joins the shared bus in PostgreSQL instead: it
        claims the commands its plugins handle, runs them under a lease it renews, and a
        subcommand no plugin here takes goes to a host that has it. SIGTERM stops claiming,
        waits up to --drain for what runs, and hands back the rest at once. It has no socket
        and no journal file (--socket and --journal are refused): the bus is both.

        Options:
        \(spec.optionsHelp)
        """

    static func run(_ arguments: ArgumentSpec.Parsed, console: Console) async throws(HostFailure) {
        guard arguments.positionals.isEmpty else { throw .usage("'cmdbus serve' takes no operands") }
        let drain = try arguments.seconds("drain") ?? .seconds(10)
        let log = ServerLog(
            console: console, threshold: arguments.choice("log-level", or: LogLevel.info), format: arguments.choice("log-format", or: ServerLog.Format.text)
        )
        let dashboard = try DashboardOptions.listen(arguments)
        let keep = try arguments.duration("keep")
        if keep != nil, try !JournalOptions(arguments).enabled, try ConnectionOptions(arguments).bus == nil {
            throw .usage("--keep prunes the journal, and --no-journal keeps none; leave one of them out")
        }
        // Heard from the start: a stop while the plugins load (probes can take seconds) ends the
        // process cleanly, its socket removed, rather than by the signal.
        let listening = Mutex<UnixSocket?>(nil)
        let signals = ShutdownSignals(first: {
            listening.withLock { $0?.close() }
            log(.info, "stopped while starting; nothing was taken yet")
            fflush(nil)
            _exit(0)
        }, second: { _exit(1) })
        if let bus = try ConnectionOptions(arguments).bus {
            // A local server listens there; a host of the shared bus would ignore it.
            if arguments.value("socket") != nil {
                throw .usage("--socket is for a server on this machine, which this host of the shared bus (--bus or $CMDBUS_BUS) is not: "
                    + "it takes its commands from the bus, not a socket (clients send with 'cmdbus run --bus URL'); leave it out")
            }
            if arguments.value("max-in-flight") != nil {
                throw .usage("--max-in-flight bounds what a server on this machine holds, which this host of the shared bus (--bus or $CMDBUS_BUS) is not: "
                    + "it claims at most --capacity commands at once; leave it out")
            }
            try await serveBus(bus, arguments: arguments, console: console, log: log, drain: drain, dashboard: dashboard, signals: signals, keep: keep)
        }
        // A host of the shared bus reads these; a local server would ignore them.
        for option in ["lease", "capacity"] where arguments.value(option) != nil {
            throw .usage("--\(option) is for a host of the shared bus (serve --bus URL or $CMDBUS_BUS), which this server is not; leave it out")
        }
        let path = arguments.value("socket") ?? CommandServer.defaultSocketPath
        let socket: UnixSocket
        do {
            socket = try UnixSocket.listen(at: path)
        } catch {
            switch error {
            case .inUse(let message): throw HostFailure(.socketInUse, message)
            case .failed(let message): throw HostFailure(.socketFailed, message)
            case .badPath(let message): throw .usage(message)
            }
        }
        listening.withLock { $0 = socket }
        let statistics = BusStatistics()
        let metrics = CommandMetrics()
        let inFlight = InFlightLimit(maximum: try arguments.positiveInteger("max-in-flight") ?? InFlightLimit.defaultMaximum)
        let session: HostSession
        do {
            session = try await HostSession.start(
                plugins: try PluginOptions(arguments).loadingPrivateCopies, journal: try JournalOptions(arguments), console: console, reportSkipped: true,
                observers: [statistics, metrics, inFlight], recovery: .run(await: false),
                pluginLog: { level, message in log(level, "plugin: \(quotedLine(message))") }
            )
        } catch {
            socket.close()
            throw error
        }
        for warning in session.debugBuildWarnings { log(.warning, warning) }
        let server = CommandServer(session: session, socket: socket, drain: drain, log: log, statistics: statistics, inFlight: inFlight, signals: signals)
        if let keep, let journal = session.journal {
            JournalRetention.start(keeping: keep, log: log) { cutoff in try await journal.prune(endedBefore: cutoff) }
        }
        if let dashboard {
            var sources = DashboardSources(
                bus: session.bus, journal: session.journal, catalog: { server.catalog }, statistics: statistics, metrics: metrics
            )
            sources.requestLoop = { server.requestLoopCounts }
            sources.socketServer = { server.bounds }
            sources.cancel = { id in server.cancel(id) }
            sources.loadPluginAgain = { path in await server.loadPluginAgain(path) }
            sources.notReadyReason = { server.notReadyReason }
            if let journal = session.journal {
                sources.discard = { id throws(CommandBusError) in try await journal.discard(id) }
                journal.observeCommits { commit in metrics.journalCommitted(commit.duration, writes: commit.writes, synced: commit.synced) }
            }
            dashboard.start(sources, log: log)
        }
        trimMemoryWhenIdle(statistics, log: log)
        await server.run()
    }

    /// Gives the memory a burst of work left free back to the system once nothing runs (see
    /// ``IdleMemoryTrim``), saying so in the debug log.
    private static func trimMemoryWhenIdle(_ statistics: BusStatistics, log: ServerLog) {
        IdleMemoryTrim.start(work: {
            let counts = statistics.counts
            return (statistics.inFlight, counts.completed + counts.failed)
        }) { before, after in
            guard before - after >= 1 << 20 else { return }
            log(.debug, "idle: gave \((before - after) >> 20) MB of freed memory back to the system (resident \(before >> 20) MB, now \(after >> 20) MB)")
        }
    }

    /// `serve --bus`: a host of the shared bus. The bus is the journal; nothing is kept locally.
    private static func serveBus(
        _ url: String, arguments: ArgumentSpec.Parsed, console: Console, log: ServerLog, drain: Duration, dashboard: DashboardOptions?,
        signals: ShutdownSignals, keep: Duration?
    ) async throws(HostFailure) -> Never {
        // Checked before the plugins load, so a mistyped value is the one line said.
        let lease = try arguments.seconds("lease"), capacity = try arguments.positiveInteger("capacity")
        // Renewed every third of it: under a second, a round trip to a busy bus outlasts a renewal's slack.
        if let lease, lease < .seconds(1) {
            throw .usage("--lease takes at least 1s, got \(quoted(arguments.value("lease") ?? "")): a host renews its lease every third of it, and a shorter one has the bus declare a live host dead")
        }
        let remote = RemoteCommandHandler(poster: SubcommandPoster(url: url), waiter: ResultWaiter(url: url))
        var journal = try JournalOptions(arguments)
        journal.enabled = false
        let ledger = LocalSubcommandLedger()
        let statistics = BusStatistics()
        let metrics = CommandMetrics()
        let session = try await HostSession.start(
            plugins: try PluginOptions(arguments).loadingPrivateCopies, journal: journal, console: console, reportSkipped: true,
            observers: [statistics, metrics], fallback: remote, busJournal: ledger,
            pluginLog: { level, message in log(level, "plugin: \(quotedLine(message))") }
        )
        for warning in session.debugBuildWarnings { log(.warning, warning) }
        var settings = BusHost.Settings(url: url)
        settings.lease = lease ?? settings.lease
        settings.capacity = capacity ?? settings.capacity
        let host = BusHost(settings: settings, bus: session.bus, offer: BusHost.Offer(session.catalog), log: { level, message in log(level, message) })
        let offer: @Sendable (PluginCatalog) -> Void = { catalog in host.offer(BusHost.Offer(catalog)) }
        ledger.attach(host, bus: session.bus)
        // Listening from before the wait for the bus, so a stop while it is away ends the wait.
        let stop = AsyncStream<Void>.makeStream()
        signals.handle(first: { host.stopWaiting(); stop.continuation.yield() }, second: {
            log(.warning, "second signal: leaving now; the bus gives this host's commands to another when its lease runs out")
            fflush(nil)
            _exit(1)
        })
        // The dashboard, /metrics and /readyz answer while the host waits for the bus (not
        // ready, saying why), so a probe can tell waiting from dead.
        // The catalog now: the one loaded at start until the watcher (started once joined) has its own.
        let watching = Mutex<PluginWatcher?>(nil)
        let currentCatalog: @Sendable () -> PluginCatalog = { watching.withLock { $0 }?.catalog ?? session.catalog }
        // A plugin quarantined for crashing is no longer offered, from that moment.
        let offerWhenQuarantined: @Sendable (PluginCatalog) -> Void = { catalog in
            catalog.whenAnyQuarantined {
                let now = currentCatalog()
                let withdrawn = Set(now.routes.map(\.command)).subtracting(now.servingRoutes.map(\.command)).sorted()
                if !withdrawn.isEmpty {
                    log(.warning, "no longer offering \(withdrawn.joined(separator: ", ")) to the bus: a plugin that handles them is quarantined; "
                        + "their commands wait for another host, or for its file to be replaced or touched, which loads it anew")
                }
                offer(now)
            }
        }
        offerWhenQuarantined(session.catalog)
        // What the dashboard reads and --keep prunes: one pool, connecting when first used.
        let busJournal = BusJournal(connectingWhenReadTo: url)
        if let dashboard {
            var sources = DashboardSources(
                bus: session.bus, journal: busJournal, catalog: currentCatalog, statistics: statistics, metrics: metrics
            )
            sources.busHost = { host.leaseCounts }
            sources.loadPluginAgain = { path in await PluginWatcher.loadAgain(path, with: watching.withLock { $0 }) }
            sources.loadPluginAgainOnBus = { file throws(CommandBusError) in
                switch await BusPluginReload.ask(url: url, file: file) {
                case .success(let answers): return answers
                case .failure(let error): throw .journalFailed(PGURL.redacted(url), error.message)
                }
            }
            sources.cancel = { id throws(CommandBusError) in
                do throws(PGError) { return try busJournal.cancel(id) } catch { throw .journalFailed(PGURL.redacted(url), error.message) }
            }
            sources.setPaused = { name, paused throws(CommandBusError) in
                do throws(PGError) { return try busJournal.setPaused(name, paused) } catch { throw .journalFailed(PGURL.redacted(url), error.message) }
            }
            sources.cancelWaiting = { name throws(CommandBusError) in
                do throws(PGError) { return try busJournal.cancelWaiting(name) } catch { throw .journalFailed(PGURL.redacted(url), error.message) }
            }
            sources.setLimit = { name, atOnce, rate throws(CommandBusError) in
                let atOnceSetting: BusLimit.Setting<Int>, rateSetting: BusLimit.Setting<BusLimit.Rate>
                do throws(HostFailure) {
                    atOnceSetting = try BusCommand.atOnceSetting(atOnce, option: "atOnce")
                    rateSetting = try BusCommand.rateSetting(rate, option: "rate")
                } catch {
                    return .failure(Refusal(error.message))
                }
                do throws(PGError) {
                    return .success(try busJournal.setLimit(name, atOnce: atOnceSetting, rate: rateSetting).json)
                } catch {
                    throw .journalFailed(PGURL.redacted(url), error.message)
                }
            }
            sources.periodic = { name, operation throws(CommandBusError) in
                do throws(PGError) {
                    switch operation {
                    case .pause, .resume: return try busJournal.setPeriodicPaused(name, operation == .pause)?.json
                    case .run: return try busJournal.runPeriodicNow(name)?.json
                    case .remove: return try busJournal.removePeriodic(name) ? .object(["name": .string(name), "removed": .bool(true)]) : nil
                    }
                } catch {
                    throw .journalFailed(PGURL.redacted(url), error.message)
                }
            }
            sources.notReadyReason = { host.notReadyReason }
            // On a thread of its own: a read of the status waits for PostgreSQL (0.3 s with
            // 600,000 pending), which no thread of Swift's pool, running handlers, should.
            sources.sharedBus = {
                await DetachedThread.value {
                    guard case .object(var fields)? = try? busJournal.status() else { return nil }
                    fields["shared"] = .bool(true)
                    return .object(fields)
                }
            }
            dashboard.start(sources, log: log)
        }
        trimMemoryWhenIdle(statistics, log: log)
        let joined: Bool
        ServiceNotifier.shared.status("joining the bus at \(PGURL.redacted(url))")
        do {
            joined = try await host.start()
        } catch {
            throw PostgresBusClient.failure(error)
        }
        guard joined else {
            log(.info, "stopped while waiting for the bus; this host never joined, so it held nothing")
            session.catalog.stopWorkers()
            fflush(nil)
            _exit(0)
        }
        // Hot loading, as a local server has it: what is loaded, replaced or removed is offered to the bus.
        let watcher = PluginWatcher(loader: session.loader, bus: session.bus, catalog: session.catalog, log: log, drain: drain) { catalog in
            offerWhenQuarantined(catalog)
            offer(catalog)
        }
        watcher?.start()
        watching.withLock { $0 = watcher }
        // `cmdbus plugins forget FILE --bus URL`: each host with a file of that name loads it again.
        host.whenAskedToLoadAgain { name in
            // A host without a file of that name says nothing; one with it loads the first of that
            // name in its directories' order, as a local `forget NAME --connect` does.
            let catalog = currentCatalog()
            guard (catalog.plugins.map(\.path) + catalog.skipped.map(\.path)).contains(where: { FileSystem.lastComponent($0) == name }) else {
                return nil
            }
            switch await PluginWatcher.loadAgain(name, with: watcher) {
            case .success(let plugin): return .object(["ok": .bool(true), "plugin": PluginCatalog.json(plugin)])
            case .failure(let skipped): return .object(["ok": .bool(false), "message": .string(skipped.message)])
            }
        }
        signals.onHangUp(CommandServer.reload(watcher, log: log))
        if let keep {
            JournalRetention.start(keeping: keep, log: log) { cutoff in try busJournal.prune(endedBefore: cutoff, takingTurns: true) }
        }
        let leaving = Atomic<Bool>(false)
        // Under a watchdog, the ping's own task running proves the host's tasks run; the database
        // being down is no reason for a restart (the host waits for it, fenced if need be).
        ServiceStatus.ready(log: { log(.warning, $0) }) {
            guard !leaving.load(ordering: .acquiring) else { return nil }
            let plugins = currentCatalog().plugins
            return "host \(host.id) of the bus at \(PGURL.redacted(url)): "
                + statistics.workSummary(plugins: plugins.count, quarantined: plugins.count { $0.quarantine != nil })
        }
        for await _ in stop.stream { break }
        leaving.store(true, ordering: .releasing)
        ServiceNotifier.shared.stopping(status: "draining \(counted(statistics.inFlight, "command")) for up to \(drain.spoken), then leaving the bus")
        await host.drain(for: drain)
        currentCatalog().stopWorkers()
        fflush(nil)
        _exit(0)
    }
}

extension BusHost.Offer {
    /// What a host with `catalog` offers the bus: the commands its plugins can serve now (not a
    /// quarantined one's), its catalog with each file's hash, and its handlers' limits.
    init(_ catalog: PluginCatalog) {
        self.init(commands: catalog.servingRoutes.map(\.command), catalog: catalog.jsonWithFileHashes, limits: catalog.concurrencyLimits)
    }
}
