import CommandBus
import CommandBusHost
import CommandBusSupport
import Glibc
import Synchronization
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A `cmdbus serve --bus` host: claims, from the shared bus, the commands its plugins handle,
/// runs them on its own bus, and finishes them under its lease.
///
/// Three threads, each with its own connection:
/// - the **claimer** listens for `cmdbus_new` (and `cmdbus_cancel`), claims up to its free
///   capacity per round trip, and polls once a second besides, so a lost notification only delays;
/// - the **finisher** writes completions, declines and events in batches: each completion is
///   fenced on this host's lease and the attempt, so a late result from a host that lost its
///   lease is discarded, never recorded;
/// - the **heartbeat** renews the lease every third of it and takes back the commands of hosts
///   whose lease ran out. A host that cannot renew its lease stops claiming at once, and once
///   a lease's length has passed without a renewal it fences itself (``fence(_:handingBack:)``).
///
/// Each connection ends within about a lease when its TCP link goes silent
/// (``PGConnection/init(url:linkTimeout:)``), so a host cut off from the database notices, stops
/// claiming and reconnects, instead of waiting minutes on a statement that will never be answered.
package final class BusHost: Sendable {
    /// How a host behaves.
    package struct Settings: Sendable {
        /// The bus.
        package var url: String
        /// How long a silent host keeps its commands before another takes them.
        package var lease: Duration = .seconds(15)
        /// Commands running here at once.
        package var capacity = 64
        /// How often the claimer looks for work without a notification.
        package var pollInterval: Duration = .seconds(1)

        package init(url: String) { self.url = url }
    }

    private struct State {
        var running: [UUID: CommandTicket<Data>] = [:]
        /// Claimed commands not finished here yet (running or being checked).
        var inFlight = 0
        /// ``inFlight`` by command name, for the names whose handlers limit how many run at once.
        var inFlightOfLimited: [String: Int] = [:]
        /// The names limited across the bus (``BusLimit``), as the claimer last read them (again on
        /// `cmdbus_limit` and every few seconds): it claims them under their locks, and the
        /// finisher wakes the hosts when one of them ends.
        var limitedOnBus: Set<String> = []
        /// Of ``limitedOnBus``, the names with a rate (`bus limit --rate`).
        var ratedOnBus: Set<String> = []
        /// A command finished since the claimer last looked: it may claim again at once.
        var freed = false
        var correlations: [UUID: Int] = [:]
        var pending: [Finish] = []
        var events: [JSONValue] = []
        /// Batches of `pending` and `events` the finisher has taken, and has written (or given
        /// up on); ``flushFinishes()`` waits for the batch that holds what is queued now.
        var finishBatchesTaken = 0, finishBatchesWritten = 0
        /// ``flushFinishes()`` callers, each with the batch it waits for.
        var flushWaiters: [(batch: Int, continuation: UnsafeContinuation<Void, Never>)] = []
        /// The lease was lost: what ran here was cancelled; no claiming until it is renewed.
        var fenced = false
        /// A heartbeat failed: no claiming until one succeeds.
        var paused = false
        var draining = false
        var stopped = false
        /// Registered on the bus: ``start()`` has joined.
        var joined = false
        var drained: [UnsafeContinuation<Void, Never>] = []
        /// Commands started here whose results are not in yet: the event forwarder notes their end.
        var started: Set<UUID> = []
        /// Commands started here whose end the event forwarder has seen, before their result's
        /// task finished them.
        var endSeen: Set<UUID> = []
        /// Finished commands waiting for the event forwarder to see their end (see ``finishAfterItsEvents``).
        var waitingForEvents: [UUID: (row: BusCommandRow, outcome: Finish)] = [:]
        /// Commands cancelled because this host could not renew its lease: handed back when they
        /// end, not completed, since the cancellation was this host's, not the sender's.
        var handingBack: Set<UUID> = []
        /// Times this host fenced itself because its lease ran out without a renewal.
        var leaseLapses = 0
        /// Times the bus declared this host dead and it joined again.
        var declaredDead = 0
        /// The command names this host's plugins handle, and its catalog: changed by hot loading.
        var offer: Offer
        /// Counts changes to `offer`, so the heartbeat knows whether the bus has the latest.
        var offerVersion = 0
    }

    /// What a host offers the bus: the command names it claims, and its catalog as `bus status`
    /// and the dashboard show it; and how many of a name its handlers run at once, where they
    /// limit it (``PluginCatalog/concurrencyLimits``).
    private struct Offer {
        var commands: [String]
        var catalog: JSONValue
        var limits: [String: Int]

        /// The catalog as the bus stores it: with the schema version this host's `cmdbus` reads
        /// (`busSchemaVersion`), so a client can tell which hosts know a newer version's rules
        /// (version 3's paused names, version 4's limits).
        init(commands: [String], catalog: JSONValue, limits: [String: Int]) {
            self.commands = commands
            self.limits = limits
            guard case .object(var fields) = catalog else {
                self.catalog = catalog
                return
            }
            fields["busSchemaVersion"] = .integer(Int64(BusSchema.version))
            self.catalog = .object(fields)
        }
    }

    /// What the finisher writes.
    private enum Finish {
        case complete(id: UUID, attempt: Int, state: CommandState, result: Data?, code: String?, message: String?, retryAfter: Duration?)
        case decline(id: UUID, attempt: Int)
        /// Back to pending, the attempt not counted, if this host still holds the command.
        case handBack(id: UUID, attempt: Int)
        /// A subcommand that runs here: recorded as a row this host holds, finished like any other.
        case record(envelope: CommandEnvelope, payload: Data)
    }

    /// This host's id (its lease owner). A host the bus declared dead joins again under a new
    /// one, so nothing it held under the old id can be finished by it.
    package var id: UUID { hostID.withLock { $0 } }
    private let hostID = Mutex(UUID())
    private let settings: Settings
    private let bus: CommandBus
    private let log: @Sendable (LogLevel, String) -> Void
    private let state: Mutex<State>
    private let claimWake = WakeSignal()
    private let finishWake = WakeSignal()
    private let heartbeatWake = WakeSignal()
    /// Set by ``stopWaiting()``.
    private let waitAbandoned = Atomic<Bool>(false)
    private let label: String

    /// A host that runs, on `bus`, the `commands` its plugins handle, claiming no more of a
    /// name at once than `limits` gives for it.
    package init(
        settings: Settings, bus: CommandBus, commands: [String], catalog: JSONValue, limits: [String: Int] = [:],
        log: @escaping @Sendable (LogLevel, String) -> Void
    ) {
        self.settings = settings
        self.bus = bus
        state = Mutex(State(offer: Offer(commands: commands, catalog: catalog, limits: limits)))
        self.log = log
        label = Self.label(hostname: Self.hostname(), pid: Int64(getpid()))
    }

    /// Registers the host and starts its threads, waiting for the bus while it is away.
    /// - Returns: `false` if ``stopWaiting()`` ended the wait first: the host never joined.
    /// - Throws: ``PGError`` if the bus refuses this host or its schema cannot be used.
    package func start() async throws(PGError) -> Bool {
        guard let connection = try await join() else { return false }
        state.withLock { $0.joined = true }
        forwardEvents()
        DetachedThread.start(named: "bus-claim") { [self] in claimLoop() }
        DetachedThread.start(named: "bus-finish") { [self] in finishLoop() }
        DetachedThread.start(named: "bus-heartbeat") { [self] in heartbeatLoop() }
        log(.info, "joined the bus at \(connection.redactedURL) as host \(id) (\(label)); handles \(commands.isEmpty ? "no command yet (no plugin loaded)" : commands.joined(separator: ", "))")
        return true
    }

    /// Ends a wait for the bus (the host was told to stop before it answered): ``start()``
    /// returns `false` within a tenth of a second, or once an attempt under way ends, having
    /// joined nothing. Once the host has joined it changes nothing.
    package func stopWaiting() {
        waitAbandoned.store(true, ordering: .relaxed)
    }

    /// The command names this host claims now.
    private var commands: [String] { state.withLock { $0.offer.commands } }

    /// Offers the bus a new set of commands (plugins were loaded, replaced or removed while the
    /// host runs): claimed from now on, and on the bus within a moment, with the heartbeat.
    package func offer(commands: [String], catalog: JSONValue, limits: [String: Int] = [:]) {
        let offer = Offer(commands: commands, catalog: catalog, limits: limits)
        let changed = state.withLock { state -> Bool in
            guard state.offer.commands != offer.commands || state.offer.catalog != offer.catalog || state.offer.limits != offer.limits else {
                return false
            }
            state.offer = offer
            state.offerVersion += 1
            state.freed = true  // the claimer looks again at once
            return true
        }
        guard changed else { return }
        heartbeatWake.signal()
        claimWake.signal()
    }

    /// Connects, makes sure of the schema and registers this host, waiting as long as it takes
    /// while the server is away (``PGError/isServerAway``: a host started before its database,
    /// or during a restart), as a worker of a job queue does; says so at once, then every 30 s.
    /// A refused login, a missing database and the like fail at once.
    /// - Returns: `nil` if ``stopWaiting()`` ended the wait.
    private func join() async throws(PGError) -> PGConnection? {
        var delay: Duration = .milliseconds(100)
        var lastSaid: ContinuousClock.Instant?
        while !waitAbandoned.load(ordering: .relaxed) {
            do {
                let connection = try PGConnection(url: settings.url, linkTimeout: settings.lease)
                try BusSchema.migrate(connection)
                try register(on: connection)
                return connection
            } catch where error.isServerAway {
                if lastSaid.map({ ContinuousClock.now - $0 >= .seconds(30) }) ?? true {
                    log(.warning, "waiting for the bus: \(error.message); trying again until it answers (stop with SIGTERM)")
                    lastSaid = .now
                }
                let retry = ContinuousClock.now + delay
                while ContinuousClock.now < retry, !waitAbandoned.load(ordering: .relaxed) {
                    try? await Task.sleep(for: min(.milliseconds(100), retry - .now))
                }
                delay = min(delay * 2, .seconds(5))
            }
        }
        return nil
    }

    private func register(on connection: PGConnection) throws(PGError) {
        let offer = state.withLock { $0.offer }
        try connection.execute(BusSQL.registerHost, [
            .uuid(id), .text(Self.hostname()), .integer(Int(getpid())), .textArray(offer.commands), .text(offer.catalog.text),
            .integer(settings.lease.milliseconds),
        ])
    }

    /// How a host is named to people: `hostname:pid`, in its log, the `cmdbus.host` metadata,
    /// `attempted_by`, and what `plugins --bus` and `bus pause` say of it.
    static func label(hostname: String, pid: Int64) -> String { "\(hostname):\(pid)" }

    /// This machine's name.
    static func hostname() -> String {
        var name = [CChar](repeating: 0, count: 256)
        gethostname(&name, name.count)
        return String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Commands claimed here and not finished.
    package var inFlight: Int { state.withLock { $0.inFlight } }

    /// For the dashboard's metrics: how often this host fenced itself because its lease ran out
    /// without a renewal, how often the bus declared it dead, and whether it claims commands
    /// now (not while a heartbeat fails, while it is fenced, or while it drains).
    package var leaseCounts: (leaseLapses: Int, declaredDead: Int, claiming: Bool) {
        state.withLock { ($0.leaseLapses, $0.declaredDead, !($0.fenced || $0.paused || $0.draining || $0.stopped)) }
    }

    /// Why this host takes no work now, for a readiness check; `nil` when it claims.
    package var notReadyReason: String? {
        state.withLock { state in
            if state.stopped || state.draining { return "draining: this host takes no new commands" }
            if !state.joined { return "waiting for the bus: this host has not joined it yet" }
            if state.fenced { return "fenced: this host's lease ran out, and it claims nothing until it is renewed" }
            if state.paused { return "the bus does not answer this host's heartbeat; it claims nothing until it does" }
            return nil
        }
    }

    /// Stops claiming, waits up to `drain` for the commands running here, hands back the rest, and leaves the bus.
    package func drain(for drain: Duration) async {
        state.withLock { $0.draining = true }
        claimWake.signal()
        heartbeatWake.signal()  // the bus hears of it at once: `bus status` says the host drains
        log(.info, "draining \(counted(inFlight, "command")) for up to \(drain)")
        await withTaskGroup(of: Void.self) { group in
            group.addTask { [self] in
                await withUnsafeContinuation { continuation in
                    let done = state.withLock { state -> Bool in
                        if state.inFlight == 0 { return true }
                        state.drained.append(continuation)
                        return false
                    }
                    if done { continuation.resume() }
                }
            }
            group.addTask { try? await Task.sleep(for: drain) }
            await group.next()
            // Wake the drain waiter if it is still parked (the drain ran out), so the group can
            // end: a group waits for every child, and a continuation does not hear cancellation.
            // Woken only after the group, it never was, and a host whose commands outlived the
            // drain (a parent waiting for a subcommand no live host runs) never left the bus.
            for waiter in state.withLock({ state -> [UnsafeContinuation<Void, Never>] in defer { state.drained = [] }; return state.drained }) {
                waiter.resume()
            }
            group.cancelAll()
        }
        await flushFinishes()
        state.withLock { $0.stopped = true }
        claimWake.signal()
        finishWake.signal()
        heartbeatWake.signal()
        do {
            let connection = try PGConnection(url: settings.url, linkTimeout: settings.lease)
            let back = try connection.execute(BusSQL.handBack, [.uuid(id)])
            try connection.execute("DELETE FROM cmdbus.hosts WHERE id = $1", [.uuid(id)])
            let count = back.count > 0 ? back[row: 0].integer("back") ?? 0 : 0
            log(.info, "left the bus; handed back \(counted(Int(count), "unfinished command"))")
        } catch {
            log(.warning, "could not hand back this host's commands (\(error.message)); other hosts take them when its lease runs out")
        }
    }

    // MARK: Claiming

    private func claimLoop() {
        let session = PGSession(
            url: settings.url, listening: ["cmdbus_new", "cmdbus_cancel", "cmdbus_limit", "cmdbus_periodic"], linkTimeout: settings.lease
        )
        var dirty = true
        var lastClaim = ContinuousClock.now
        // When the claimer last read the bus's limits (`State.limitedOnBus`) and when its next
        // periodic command is due; `nil` after `cmdbus_limit` or `cmdbus_periodic`. When a name
        // whose rate left no room has room again.
        var settingsRead: ContinuousClock.Instant?
        var periodicDue: ContinuousClock.Instant?
        var rateRoom: ContinuousClock.Instant?
        while true {
            let (stopped, blocked, capacity, rooms) = state.withLock { state -> (Bool, Bool, Int, [Room]) in
                (state.stopped, state.fenced || state.paused || state.draining, settings.capacity - state.inFlight, self.rooms(state))
            }
            if stopped { return }
            do {
                if !blocked, settingsRead.map({ ContinuousClock.now - $0 >= Self.settingsRereadInterval }) ?? true {
                    let (limited, due) = try session.run { connection throws(PGError) in
                        (try BusLimit.limitedNames(on: connection), try BusPeriodic.millisecondsUntilDue(on: connection))
                    }
                    settingsRead = .now
                    periodicDue = due.map { ContinuousClock.now + .milliseconds($0) }
                    state.withLock { state in (state.limitedOnBus, state.ratedOnBus) = limited }
                }
                if !blocked, let due = periodicDue, ContinuousClock.now >= due {
                    periodicDue = try firePeriodic(session)
                }
                if let room = rateRoom, ContinuousClock.now >= room { dirty = true }
                if !blocked, dirty || ContinuousClock.now - lastClaim >= settings.pollInterval {
                    lastClaim = .now
                    // A host with no room left still answers probes: they ask, and take no slot.
                    let limit = capacity > 0 ? capacity : Self.probesWhenFull
                    let (limited, rated) = state.withLock { ($0.limitedOnBus, $0.ratedOnBus) }
                    let locked = rooms.filter { $0.room > 0 && limited.contains($0.name) }.map(\Room.name)
                    let (claimed, untilRoom) = try session.run { connection throws(PGError) in
                        try claim(on: connection, rooms: rooms, limit: limit, locking: locked, rated: locked.filter(rated.contains))
                    }
                    rateRoom = untilRoom.map { ContinuousClock.now + .milliseconds($0) }
                    let rows = claimed.all.compactMap(BusCommandRow.init)
                    let wanted = min(capacity, rooms.reduce(0) { $0 + $1.room })
                    dirty = wanted > 0 && rows.count >= wanted
                    for row in rows { start(row) }
                }
                var wait: Duration = dirty && !blocked ? .zero : settings.pollInterval
                if !blocked, let due = periodicDue { wait = max(.zero, min(wait, due - .now)) }
                if !blocked, let room = rateRoom { wait = max(.zero, min(wait, room - .now)) }
                let notifications = try session.notifications(waitingUpTo: wait, wake: claimWake)
                if state.withLock({ state -> Bool in defer { state.freed = false }; return state.freed }) { dirty = true }
                for notification in notifications {
                    switch notification.channel {
                    case "cmdbus_new": if commands.contains(notification.payload) { dirty = true }
                    case "cmdbus_cancel": if let id = UUID(uuidString: notification.payload) { cancelLocally(id) }
                    case "cmdbus_limit", "cmdbus_periodic": settingsRead = nil
                    default: break
                    }
                }
            } catch {
                log(.warning, "claiming: \(error.message); reconnecting")
                session.backOff(wake: claimWake)
                dirty = true
            }
        }
    }

    /// How many probes a host with no free capacity claims at once.
    static let probesWhenFull = 16

    /// How often a claimer reads the bus's limits and periodic commands without being told they
    /// changed: a lost `cmdbus_limit` notification leaves it claiming nothing of a newly limited
    /// name for so long, and a lost `cmdbus_periodic` one lets a new entry's first slot be late by as much.
    static let settingsRereadInterval: Duration = .seconds(5)

    /// Posts the periodic commands due now (``BusPeriodic``), unless another host is at it, and
    /// returns when the next is due, as the bus says.
    private func firePeriodic(_ session: PGSession) throws(PGError) -> ContinuousClock.Instant? {
        let (firings, due) = try session.run { connection throws(PGError) in
            (try BusPeriodic.fireDue(host: label, on: connection), try BusPeriodic.millisecondsUntilDue(on: connection))
        }
        for firing in firings {
            let entry = "periodic \(quoted(firing.name))"
            if let id = firing.posted { log(.debug, "\(entry) posted \(quoted(firing.command)) as \(id)") }
            if firing.posted == nil {
                log(.info, "\(entry) skipped a slot: the \(quoted(firing.command)) it posted before is still pending or running (no overlap)")
            } else if firing.missed > 0 {
                log(.warning, "\(entry) posted \(quoted(firing.command)) for its latest slot and skipped \(counted(Int(firing.missed), "earlier slot")) that passed with no host to post them")
            }
        }
        // Due already: another host holds it and is posting it now; look again in a moment.
        guard let due else { return nil }
        return .now + .milliseconds(max(due, 100))
    }

    /// Each name this host claims, with how many more of it may start here now: its free
    /// capacity, or less where its handlers limit how many run at once (none once they all run).
    private typealias Room = (name: String, room: Int)

    private func rooms(_ state: State) -> [Room] {
        let capacity = max(0, settings.capacity - state.inFlight)
        return state.offer.commands.map { name in
            guard let limit = state.offer.limits[name] else { return (name, capacity) }
            return (name, max(0, min(capacity, limit - state.inFlightOfLimited[name, default: 0])))
        }
    }

    /// Claims up to `limit` commands, no more of a name than its room; first takes the locks of
    /// the `locking` names, limited across the bus, in a transaction with the claim, whose
    /// snapshot is then taken after them: it sees every claim that held them before. Of the
    /// `rated` names among them, says in how many milliseconds the first whose rate left no room
    /// has room again.
    private func claim(
        on connection: PGConnection, rooms: [Room], limit: Int, locking locked: [String], rated: [String]
    ) throws(PGError) -> (PGRows, untilRateRoom: Int64?) {
        let parameters: [PGValue?] = [
            .textArray(rooms.map(\Room.name)), .uuid(id), .integer(limit), .text(label), .integerArray(rooms.map { Optional($0.room) }),
        ]
        guard !locked.isEmpty else { return (try connection.execute(BusSQL.claim, parameters), nil) }
        return try connection.transaction { () throws(PGError) -> (PGRows, untilRateRoom: Int64?) in
            try connection.execute(BusLimit.lock, [.textArray(locked)])
            let rows = try connection.execute(BusSQL.claimLimited, parameters + [.textArray(locked)])
            guard !rated.isEmpty else { return (rows, nil) }
            let room = try connection.execute(BusLimit.millisecondsUntilRateRoom, [.textArray(rated)])
            return (rows, room.count > 0 ? room[row: 0].integer("ms") : nil)
        }
    }

    /// Runs one claimed command here: declines it if no handler here would take it now.
    private func start(_ row: BusCommandRow) {
        state.withLock { state in
            state.inFlight += 1
            if state.offer.limits[row.name] != nil { state.inFlightOfLimited[row.name, default: 0] += 1 }
            state.correlations[row.correlationID, default: 0] += 1
        }
        if row.cancelRequested {
            return finish(row, .complete(id: row.id, attempt: row.attempt, state: .cancelled, result: nil, code: "cancelled",
                                         message: "command '\(row.name)' was cancelled", retryAfter: nil))
        }
        Task { [self] in
            // The full answer: a plugin whose handle() decides, or an isolated one, is asked for real.
            let takes: Bool
            do throws(CommandBusError) {
                takes = try await bus.wouldHandleLocally(name: row.name, payload: row.payload)
            } catch {
                return finish(row, .complete(id: row.id, attempt: row.attempt, state: .failed, result: nil,
                                             code: HostFailure.Code(error).name, message: error.message, retryAfter: nil))
            }
            guard takes else { return finish(row, .decline(id: row.id, attempt: row.attempt)) }
            run(row)
        }
    }

    /// Runs a claimed command that a handler here takes, and reports how it ended.
    private func run(_ row: BusCommandRow) {
        if row.isProbe {
            return finish(row, .complete(id: row.id, attempt: row.attempt, state: .succeeded, result: Data(#"{"canHandle":true}"#.utf8),
                                         code: nil, message: nil, retryAfter: nil))
        }
        // The handler may see which attempt this is, and where it runs.
        var record = row.record
        record.envelope.metadata["cmdbus.attempt"] = String(row.attempt)
        record.envelope.metadata["cmdbus.host"] = label
        state.withLock { _ = $0.started.insert(row.id) }
        let ticket = bus.resubmit(record, timeout: row.timeout)
        state.withLock { $0.running[row.id] = ticket }
        Task { [self] in
            var outcome: Finish
            do throws(CommandBusError) {
                let result = try await ticket.result
                outcome = .complete(id: row.id, attempt: row.attempt, state: .succeeded, result: result, code: nil, message: nil, retryAfter: nil)
            } catch {
                let retry: Duration? = error.isRetryable && row.attempt < row.maxAttempts ? Self.backoff(attempt: row.attempt) : nil
                let ended = ticket.state.isTerminal ? ticket.state : .failed
                outcome = .complete(id: row.id, attempt: row.attempt, state: ended, result: nil,
                                    code: HostFailure.Code(error).name, message: error.message, retryAfter: retry)
            }
            if state.withLock({ $0.handingBack.remove(row.id) != nil }) { outcome = .handBack(id: row.id, attempt: row.attempt) }
            finishAfterItsEvents(row, outcome)
        }
    }

    /// Finishes a command once the event forwarder has seen it end, so that the events it emitted
    /// are queued before its completion: the forwarder drops the events of a correlation no longer
    /// running here, and a client hears the completion's events only if they were written with
    /// or before it. A command whose end the forwarder has not seen within a second (an event
    /// stream far behind) is finished anyway.
    private func finishAfterItsEvents(_ row: BusCommandRow, _ outcome: Finish) {
        let now = state.withLock { state -> Bool in
            _ = state.running.removeValue(forKey: row.id)
            state.started.remove(row.id)
            if state.endSeen.remove(row.id) != nil { return true }
            state.waitingForEvents[row.id] = (row, outcome)
            return false
        }
        if now { return finish(row, outcome) }
        Task { [self] in
            try? await Task.sleep(for: .seconds(1))
            if let late = state.withLock({ $0.waitingForEvents.removeValue(forKey: row.id) }) { finish(late.row, late.outcome) }
        }
    }

    /// The event forwarder saw command `id` end: finishes it if its result is in, or notes it.
    private func sawEnd(of id: UUID) {
        let waiting = state.withLock { state -> (row: BusCommandRow, outcome: Finish)? in
            if let waiting = state.waitingForEvents.removeValue(forKey: id) { return waiting }
            if state.started.contains(id) { state.endSeen.insert(id) }
            return nil
        }
        if let waiting { finish(waiting.row, waiting.outcome) }
    }

    /// Exponential backoff with jitter for a retryable failure: 100 ms doubling, at most 30 s.
    static func backoff(attempt: Int) -> Duration {
        let base = min(100.0 * pow(2.0, Double(max(0, attempt - 1))), 30_000)
        return .milliseconds(Int64(base * Double.random(in: 0.5...1.0)))
    }

    private func finish(_ row: BusCommandRow, _ outcome: Finish) {
        let drained = state.withLock { state -> [UnsafeContinuation<Void, Never>] in
            state.pending.append(outcome)
            state.inFlight -= 1
            if let count = state.inFlightOfLimited[row.name] { state.inFlightOfLimited[row.name] = count > 1 ? count - 1 : nil }
            state.freed = true
            if let count = state.correlations[row.correlationID] {
                state.correlations[row.correlationID] = count > 1 ? count - 1 : nil
            }
            guard state.inFlight == 0 else { return [] }
            defer { state.drained = [] }
            return state.drained
        }
        finishWake.signal()
        claimWake.signal()
        for waiter in drained { waiter.resume() }
    }

    /// Whether a command the bus journals here is a local subcommand: sent by a command that runs
    /// here (its tree runs here) and not itself claimed from the bus, whose claim finishes it
    /// with its attempt, retry or hand-back (a subcommand another host sent, claimed here, has a
    /// parent and a tree here too).
    package func isLocalSubcommand(_ envelope: CommandEnvelope) -> Bool {
        state.withLock { $0.correlations[envelope.correlationID] != nil && !$0.started.contains(envelope.id) }
    }

    /// Records a subcommand that runs here (``LocalSubcommandLedger``).
    package func recordLocalSubcommand(_ envelope: CommandEnvelope, payload: Data) {
        state.withLock { $0.pending.append(.record(envelope: envelope, payload: payload)) }
        finishWake.signal()
    }

    /// Finishes a recorded local subcommand, fenced like any other command.
    package func finishLocalSubcommand(_ update: JournalUpdate) {
        let outcome = Finish.complete(
            id: update.id, attempt: 1, state: update.state, result: update.result, code: update.errorCode, message: update.errorMessage,
            retryAfter: nil
        )
        state.withLock { $0.pending.append(outcome) }
        finishWake.signal()
    }

    private func cancelLocally(_ id: UUID) {
        state.withLock { $0.running[id] }?.cancel()
    }

    // MARK: Finishing

    /// Sends the events of commands running here (and their local subcommands) to the bus.
    private func forwardEvents() {
        let stream = bus.events(bufferingPolicy: .unbounded)
        Task { [self] in
            for await event in stream {
                switch event.kind {
                case .emitted, .log, .progress: break
                case .stateChanged(_, let to) where to.isTerminal:
                    sawEnd(of: event.commandID)
                    continue
                default: continue
                }
                let queued = state.withLock { state -> Bool in
                    guard state.correlations[event.correlationID] != nil else { return false }
                    state.events.append(.object([
                        "command": .string(event.commandID.uuidString), "correlation": .string(event.correlationID.uuidString),
                        "event": event.json,
                    ]))
                    return true
                }
                if queued { finishWake.signal() }
            }
        }
    }

    private func finishLoop() {
        let session = PGSession(url: settings.url, linkTimeout: settings.lease)
        while true {
            let (work, events, stopped, batch) = state.withLock { state -> ([Finish], [JSONValue], Bool, Int) in
                defer { state.pending = []; state.events = [] }
                if !state.pending.isEmpty || !state.events.isEmpty { state.finishBatchesTaken += 1 }
                return (state.pending, state.events, state.stopped, state.finishBatchesTaken)
            }
            if work.isEmpty && events.isEmpty {
                if stopped { return }
                finishWake.wait(upTo: .seconds(1))
                continue
            }
            var unwritten = work
            var unsentEvents = events
            while !unwritten.isEmpty || !unsentEvents.isEmpty {
                do {
                    try session.run { connection throws(PGError) in
                        if !unsentEvents.isEmpty {
                            try connection.execute(BusSQL.appendEvents, [.text(JSONValue.array(unsentEvents).text)])
                            unsentEvents = []
                        }
                        try write(unwritten, on: connection)
                        unwritten = []
                    }
                } catch {
                    // What was left to write: a batch of events alone finished no command.
                    let left = [
                        unwritten.isEmpty ? nil : "finishing \(counted(unwritten.count, "command"))",
                        unsentEvents.isEmpty ? nil : "sending \(counted(unsentEvents.count, "event"))",
                    ].compactMap { $0 }.joined(separator: " and ")
                    log(.warning, "\(left): \(error.message); retrying")
                    session.backOff()
                    if state.withLock({ $0.stopped }) && !error.isConnectionProblem { break }
                }
            }
            finishedBatch(batch)
        }
    }

    private func write(_ work: [Finish], on connection: PGConnection) throws(PGError) {
        var ends: [(id: UUID, fields: [String: JSONValue])] = []
        var expected: Set<UUID> = []
        // Rows of local subcommands first: a subcommand's completion may be in the same batch.
        for case .record(let envelope, let payload) in work {
            try connection.execute("""
                INSERT INTO cmdbus.commands (id, name, payload, metadata, parent_id, correlation_id, state, attempt, lease_owner,
                    started_at, attempted_by, depth)
                VALUES ($1, $2, $3, $4::jsonb, $5, $6, 'running', 1, $7, now(), ARRAY[$8::text], $9::int4)
                ON CONFLICT DO NOTHING
                """, [
                    .uuid(envelope.id), .text(envelope.commandName), .bytes(payload), .metadata(envelope.metadata),
                    envelope.parentID.map(PGValue.uuid), .uuid(envelope.correlationID), .uuid(id), .text(label), .integer(Int64(envelope.depth)),
                ])
        }
        for item in work {
            switch item {
            case .record:
                continue
            case .complete(let id, let attempt, let state, let result, let code, let message, let retryAfter):
                var fields: [String: JSONValue] = ["attempt": .integer(Int64(attempt)), "state": .string(state.rawValue)]
                if let result { fields["result"] = .string(result.base64EncodedString()) }
                if let code { fields["code"] = .string(code) }
                if let message { fields["message"] = .string(message) }
                if let retryAfter { fields["retryAfterMs"] = .integer(retryAfter.milliseconds) }
                ends.append((id, fields))
                expected.insert(id)
            case .decline(let id, let attempt):
                try connection.execute(BusSQL.decline, [.uuid(id), .uuid(self.id), .integer(attempt), .text(label)])
            case .handBack(let id, let attempt):
                try connection.execute(BusSQL.handBackOne, [.uuid(id), .uuid(self.id), .integer(attempt)])
            }
        }
        var ended: Set<String> = []
        let completions = BusSQL.endsInIDOrder(ends)
        for chunk in stride(from: 0, to: completions.count, by: 500) {
            let slice = Array(completions[chunk..<min(chunk + 500, completions.count)])
            let done = try connection.execute(BusSQL.complete, [.text(JSONValue.array(slice).text), .uuid(id)])
            for row in done.all {
                if let id = row.uuid("id") { expected.remove(id) }
                if let name = row.text("name") { ended.insert(name) }
            }
        }
        // A command of a name limited across the bus that ends makes room for the next, on any
        // host: wake those that handle it (this one too), now that the end is on the bus, where
        // their claims count what runs. Without it, one ended while the claim that followed it
        // still counted it, and the next waited for a poll: a second between commands of a name
        // limited to 1.
        let limitedEnded = ended.intersection(state.withLock { $0.limitedOnBus })
        if !limitedEnded.isEmpty {
            // Best effort: the ends are written, and a retry of this batch would find them written already.
            _ = try? connection.execute(BusSQL.wakeHosts, [.textArray(limitedEnded.sorted())])
        }
        for lost in expected {
            log(.warning, "discarded the result of \(lost): this host no longer holds its lease (another host runs it, or ran it)")
        }
    }

    /// The finisher wrote batch `batch`: wakes the ``flushFinishes()`` callers waiting for it.
    private func finishedBatch(_ batch: Int) {
        let waiters = state.withLock { state -> [UnsafeContinuation<Void, Never>] in
            state.finishBatchesWritten = batch
            let done = state.flushWaiters.filter { $0.batch <= batch }.map(\.continuation)
            state.flushWaiters.removeAll { $0.batch <= batch }
            return done
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Waits until the finisher has written what is queued now: the results the drain waits
    /// for must be on the bus before it hands back what this host still holds, or the hand-back
    /// takes a finished command back to pending and the late result is refused by the fence
    /// (it was: a result the finisher had taken but not yet written counted as written).
    private func flushFinishes() async {
        await withUnsafeContinuation { continuation in
            let written = state.withLock { state -> Bool in
                // What is queued goes in the next batch; what the finisher holds, in the one it writes.
                let queued = !state.pending.isEmpty || !state.events.isEmpty
                let batch = queued ? state.finishBatchesTaken + 1 : state.finishBatchesTaken
                if batch <= state.finishBatchesWritten { return true }
                state.flushWaiters.append((batch, continuation))
                return false
            }
            if written { continuation.resume() } else { finishWake.signal() }
        }
    }

    // MARK: Heartbeat

    private func heartbeatLoop() {
        let session = PGSession(url: settings.url, linkTimeout: settings.lease)
        let interval = settings.lease / 3
        var beats = 0
        // When the database last renewed the lease, as this host saw it: no later than it was.
        var renewed = ContinuousClock.now
        // The offer the bus has (joining registered the first).
        var published = 0
        while !state.withLock({ $0.stopped }) {
            do {
                let (offer, version, draining) = state.withLock { ($0.offer, $0.offerVersion, $0.draining) }
                let alive = try session.run { connection throws(PGError) -> Bool in
                    guard version != published else { return try connection.execute(BusSQL.heartbeat, [.uuid(id), .bool(draining)]).count > 0 }
                    return try connection.execute(
                        BusSQL.heartbeatWithOffer, [.uuid(id), .bool(draining), .textArray(offer.commands), .text(offer.catalog.text)]
                    ).count > 0
                }
                if alive {
                    if version != published { log(.info, "the bus has this host's new commands: \(offer.commands.joined(separator: ", "))") }
                    published = version
                    renewed = .now
                    let wasFenced = state.withLock { state -> Bool in
                        defer { state.fenced = false; state.paused = false }
                        return state.fenced || state.paused
                    }
                    if wasFenced { log(.info, "renewed the lease; claiming again"); claimWake.signal() }
                } else {
                    fence("the bus declared this host dead (its lease ran out)")
                    hostID.withLock { $0 = UUID() }
                    try session.run { connection throws(PGError) in try register(on: connection) }
                    renewed = .now
                    state.withLock { $0.fenced = false; $0.paused = false }
                    log(.info, "joined the bus again as host \(id)")
                    claimWake.signal()
                }
                beats += 1
                if beats % 2 == 0 {
                    let rescued = try session.run { connection throws(PGError) in try connection.execute(BusSQL.rescue) }
                    if rescued.count > 0, let count = rescued[row: 0].integer("rescued"), count > 0 {
                        log(.warning, "took back \(counted(Int(count), "command")) from hosts whose lease ran out")
                    }
                }
            } catch {
                // Not claiming until a heartbeat succeeds. What runs here goes on for as long as
                // the lease may still hold: if it is lost meanwhile, the fence discards the results.
                state.withLock { $0.paused = true }
                log(.warning, "heartbeat failed (\(error.message)); not claiming until it succeeds")
                // Past the lease, another host may take what runs here: it stops, and goes back
                // to the bus if this host still holds it when the database is back.
                if ContinuousClock.now - renewed > settings.lease {
                    fence("could not renew the lease for over \(settings.lease)", handingBack: true)
                }
                // Back within a third of the lease once the database is: just after a restart
                // every host looks stale, and commands sent then count on the hosts that were live
                // when it started (BusSQL.liveWhenDatabaseStarted) only for a while.
                session.backOff(limit: min(.seconds(2), interval))
                continue
            }
            heartbeatWake.wait(upTo: interval)
        }
    }

    /// Stops claiming and cancels what runs here. When the bus declared this host dead, the
    /// results would be discarded by the fence anyway. When this host could not renew its lease
    /// (`handingBack`), another host may already run them, and if none does they go back to the
    /// bus once this host reaches it again, rather than ending as cancelled.
    private func fence(_ reason: String, handingBack: Bool = false) {
        let tickets = state.withLock { state -> [CommandTicket<Data>]? in
            let first = !state.fenced
            state.fenced = true
            if !handingBack { state.declaredDead += 1 } else if first { state.leaseLapses += 1 }
            guard first else { return nil }
            if handingBack { state.handingBack.formUnion(state.running.keys) }
            return Array(state.running.values)
        }
        // Already fenced, a host that stays cut off says nothing more at each failed heartbeat;
        // the bus declaring it dead is news.
        if tickets == nil, handingBack { return }
        log(.warning, "fenced: \(reason); stopped claiming and cancelled \(counted(tickets?.count ?? 0, "command")) running here")
        for ticket in tickets ?? [] { ticket.cancel() }
    }
}
