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

    /// One claim of a command by this host: the command and the attempt the claim made. A host
    /// the bus declared dead joins again, and can claim a command once more while its earlier
    /// claim of it still decides or ends; keyed by the command alone, the earlier claim's end
    /// unmarked the later one, whose cancel or fence was then lost.
    struct Claim: Hashable {
        var id: UUID
        var attempt: Int
    }

    struct State {
        /// The claims running here, with their tickets.
        var running = ClaimTable<CommandTicket<Data>>()
        /// Claims not running yet: the host is still asking whether a handler here takes their
        /// command (an isolated plugin's `canHandle` runs in its worker).
        var deciding: Set<Claim> = []
        /// Claims of ``deciding`` whose sender asked them to stop meanwhile: they end cancelled
        /// instead of starting. The cancel's notification comes once, so it is kept until then.
        var cancelledWhileDeciding: Set<Claim> = []
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
        /// A drain waiting for the commands running here to end; given up when the drain runs out.
        var drained = ConditionWaiters()
        /// Commands started here whose results are not in yet: the event forwarder notes their end.
        /// How many claims of each, counted: two claims of one command can overlap (``Claim``).
        var started: [UUID: Int] = [:]
        /// Commands started here whose end the event forwarder has seen, before their result's
        /// task finished them: counted, as ``started`` is, since each claim's run ends once.
        var endSeen: [UUID: Int] = [:]
        /// Finished commands waiting for the event forwarder to see their end (see ``finishAfterItsEvents``).
        var waitingForEvents = ClaimTable<(row: BusCommandRow, outcome: Finish)>()
        /// The commands this host has claimed and not yet queued an outcome for (from
        /// ``start(_:)`` to ``finish(_:_:)``), counted per claim, and the local subcommands it
        /// recorded that have not ended: with what waits in ``pending``, every command the bus
        /// may say this host runs that the host knows of (``handBackForgotten(on:)``). The local
        /// subcommands are known here alone: ``finishLocalSubcommand(_:)`` ends only those.
        var held: [UUID: Int] = [:]
        var localSubcommands: Set<UUID> = []
        /// Claims cancelled because this host could not renew its lease: handed back when they
        /// end, not completed, since the cancellation was this host's, not the sender's.
        var handingBack: Set<Claim> = []
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
    package struct Offer: Equatable, Sendable {
        /// The command names it claims.
        package var commands: [String]
        /// Its catalog, as ``init(commands:catalog:limits:)`` stores it.
        package var catalog: JSONValue
        /// How many of each name its handlers run at once, where they limit it.
        package var limits: [String: Int]

        /// The catalog as the bus stores it: with the schema version this host's `cmdbus` reads
        /// (`busSchemaVersion`), so a client can tell which hosts know a newer version's rules
        /// (version 3's paused names, version 4's limits).
        package init(commands: [String], catalog: JSONValue, limits: [String: Int] = [:]) {
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
    enum Finish {
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
    let hostID = Mutex(UUID())
    let settings: Settings
    let bus: CommandBus
    let log: @Sendable (LogLevel, String) -> Void
    let state: Mutex<State>
    let claimWake = WakeSignal()
    let finishWake = WakeSignal()
    let heartbeatWake = WakeSignal()
    /// Set by ``stopWaiting()``.
    let waitAbandoned = Atomic<Bool>(false)
    /// Loads a plugin file of this host's again at a client's request (``whenAskedToLoadAgain(_:)``).
    let loadAgainHandler = Mutex<LoadAgainHandler?>(nil)
    let label: String

    /// A host that runs, on `bus`, the `commands` its plugins handle, claiming no more of a
    /// name at once than `limits` gives for it.
    package init(settings: Settings, bus: CommandBus, offer: Offer, log: @escaping @Sendable (LogLevel, String) -> Void) {
        self.settings = settings
        self.bus = bus
        state = Mutex(State(offer: offer))
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
    var commands: [String] { state.withLock { $0.offer.commands } }

    /// Offers the bus a new set of commands (plugins were loaded, replaced or removed while the
    /// host runs): claimed from now on, and on the bus within a moment, with the heartbeat.
    package func offer(_ offer: Offer) {
        let changed = state.withLock { state -> Bool in
            guard state.offer != offer else { return false }
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
    func join() async throws(PGError) -> PGConnection? {
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

    func register(on connection: PGConnection) throws(PGError) {
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
        log(.info, "draining \(counted(inFlight, "command")) for up to \(drain.spoken)")
        await withTaskGroup(of: Void.self) { group in
            group.addTask { [self] in await state.wait(on: \.drained) { $0.inFlight == 0 } }
            group.addTask { try? await Task.sleep(for: drain) }
            await group.next()
            // Release the drain waiter if it is still parked (the drain ran out), so the group can
            // end: a group waits for every child, and a continuation does not hear cancellation.
            // Released only after the group, it never was, and a host whose commands outlived the
            // drain (a parent waiting for a subcommand no live host runs) never left the bus. The
            // release holds for a waiter that had not parked yet (a short drain's sleep can end
            // before the other child starts): it returns at once where it would wait for ever.
            for waiter in state.withLock({ $0.drained.giveUp() }) { waiter.resume() }
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
            let cancelled = back.count > 0 ? back[row: 0].integer("cancelled") ?? 0 : 0
            let ended = cancelled > 0 ? " (and ended \(counted(Int(cancelled), "command")) asked to stop as cancelled)" : ""
            log(.info, "left the bus; handed back \(counted(Int(count), "unfinished command"))\(ended)")
        } catch {
            log(.warning, "could not hand back this host's commands (\(error.message)); other hosts take them when its lease runs out")
        }
    }
}
