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

// The claimer: claims the due commands this host handles, starts them, and fires periodic
// commands when due.
extension BusHost {
    func claimLoop() {
        let session = PGSession(
            url: settings.url, listening: ["cmdbus_new", "cmdbus_cancel", "cmdbus_limit", "cmdbus_periodic", Self.loadAgainChannel], linkTimeout: settings.lease,
            planning: .once
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
                    case Self.loadAgainChannel: loadAgain(notification.payload)
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
    func firePeriodic(_ session: PGSession) throws(PGError) -> ContinuousClock.Instant? {
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
    typealias Room = (name: String, room: Int)

    func rooms(_ state: State) -> [Room] {
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
    func claim(
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
    func start(_ row: BusCommandRow) {
        state.withLock { state in
            state.inFlight += 1
            state.held[row.id, default: 0] += 1
            state.deciding.insert(row.claim)
            if state.offer.limits[row.name] != nil { state.inFlightOfLimited[row.name, default: 0] += 1 }
            state.correlations[row.correlationID, default: 0] += 1
        }
        if row.cancelRequested { return finish(row, Self.cancelled(row)) }
        Task { [self] in
            // The full answer: a plugin whose handle() decides, or an isolated one, is asked for real.
            let takes: Bool
            do throws(CommandBusError) {
                takes = try await bus.wouldHandleLocally(name: row.name, payload: row.payload)
            } catch {
                // Asking failed: a retryable failure (an isolated plugin quarantined here, whose
                // commands this host stops offering) goes back to the bus as one from running would.
                return finish(row, .complete(id: row.id, attempt: row.attempt, state: .failed, result: nil,
                                             code: HostFailure.Code(error).name, message: error.message, retryAfter: retry(after: error, of: row)))
            }
            guard takes else { return finish(row, .decline(id: row.id, attempt: row.attempt)) }
            run(row)
        }
    }

    /// Runs a claimed command that a handler here takes, and reports how it ended.
    func run(_ row: BusCommandRow) {
        if row.isProbe {
            return finish(row, .complete(id: row.id, attempt: row.attempt, state: .succeeded, result: Data(#"{"canHandle":true}"#.utf8),
                                         code: nil, message: nil, retryAfter: nil))
        }
        // The handler may see which attempt this is, and where it runs.
        var record = row.record
        record.envelope.metadata["cmdbus.attempt"] = String(row.attempt)
        record.envelope.metadata["cmdbus.host"] = label
        // A cancel that came while this host decided whether to take the command ends it now,
        // before it starts, and a fence hands it back (see ``fence(_:handingBack:)``); one that
        // comes from here on is kept until the ticket is registered, below, or finds it.
        let stoppedWhileDeciding = state.withLock { state -> Finish? in
            if state.handingBack.remove(row.claim) != nil { return .handBack(id: row.id, attempt: row.attempt) }
            if state.cancelledWhileDeciding.contains(row.claim) { return Self.cancelled(row) }
            state.started[row.id, default: 0] += 1
            return nil
        }
        if let stoppedWhileDeciding { return finish(row, stoppedWhileDeciding) }
        let ticket = bus.resubmit(record, timeout: row.timeout)
        let cancelledMeanwhile = state.withLock { state -> Bool in
            state.running[row.claim] = ticket
            state.deciding.remove(row.claim)
            return state.cancelledWhileDeciding.remove(row.claim) != nil
        }
        if cancelledMeanwhile { ticket.cancel() }
        Task { [self] in
            var outcome: Finish
            do throws(CommandBusError) {
                let result = try await ticket.result
                outcome = .complete(id: row.id, attempt: row.attempt, state: .succeeded, result: result, code: nil, message: nil, retryAfter: nil)
            } catch {
                let retry = retry(after: error, of: row)
                let ended = ticket.state.isTerminal ? ticket.state : .failed
                outcome = .complete(id: row.id, attempt: row.attempt, state: ended, result: nil,
                                    code: HostFailure.Code(error).name, message: error.message, retryAfter: retry)
            }
            if state.withLock({ $0.handingBack.remove(row.claim) != nil }) { outcome = .handBack(id: row.id, attempt: row.attempt) }
            finishAfterItsEvents(row, outcome)
        }
    }

    /// Finishes a command once the event forwarder has seen it end, so that the events it emitted
    /// are queued before its completion: the forwarder drops the events of a correlation no longer
    /// running here, and a client hears the completion's events only if they were written with
    /// or before it. A command whose end the forwarder has not seen within a second (an event
    /// stream far behind) is finished anyway.
    func finishAfterItsEvents(_ row: BusCommandRow, _ outcome: Finish) {
        let now = state.withLock { state -> Bool in
            state.running.remove(row.claim)
            state.started.countDown(row.id)
            if state.endSeen.countDown(row.id) { return true }
            state.waitingForEvents[row.claim] = (row, outcome)
            return false
        }
        if now { return finish(row, outcome) }
        Task { [self] in
            try? await Task.sleep(for: .seconds(1))
            if let late = state.withLock({ $0.waitingForEvents.remove(row.claim) }) { finish(late.row, late.outcome) }
        }
    }

    /// The event forwarder saw command `id` end: finishes it if its result is in, or notes it.
    func sawEnd(of id: UUID) {
        let waiting = state.withLock { state -> (row: BusCommandRow, outcome: Finish)? in
            if let waiting = state.waitingForEvents.removeAny(of: id) { return waiting }
            if state.started[id] != nil { state.endSeen[id, default: 0] += 1 }
            return nil
        }
        if let waiting { finish(waiting.row, waiting.outcome) }
    }

    /// How long before command `row` runs again after `error`: the backoff of its attempt if the
    /// failure is retryable and attempts are left, else nil (it ends).
    func retry(after error: CommandBusError, of row: BusCommandRow) -> Duration? {
        error.isRetryable && row.attempt < row.maxAttempts ? Self.backoff(attempt: row.attempt) : nil
    }

    /// Exponential backoff with jitter for a retryable failure: 100 ms doubling, at most 30 s.
    static func backoff(attempt: Int) -> Duration {
        let base = min(100.0 * pow(2.0, Double(max(0, attempt - 1))), 30_000)
        return .milliseconds(Int64(base * Double.random(in: 0.5...1.0)))
    }

    /// How a command its sender asked to stop before it started here ends.
    static func cancelled(_ row: BusCommandRow) -> Finish {
        .complete(id: row.id, attempt: row.attempt, state: .cancelled, result: nil, code: "cancelled",
                  message: "command '\(row.name)' was cancelled", retryAfter: nil)
    }

    func finish(_ row: BusCommandRow, _ outcome: Finish) {
        let drained = state.withLock { state -> [UnsafeContinuation<Void, Never>] in
            state.pending.append(outcome)
            _ = state.held.countDown(row.id)
            state.inFlight -= 1
            state.deciding.remove(row.claim)
            state.cancelledWhileDeciding.remove(row.claim)
            state.handingBack.remove(row.claim)  // one fenced while deciding, then declined
            state.inFlightOfLimited.countDown(row.name)
            state.freed = true
            state.correlations.countDown(row.correlationID)
            return state.inFlight == 0 ? state.drained.takeAll() : []
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
        state.withLock { $0.correlations[envelope.correlationID] != nil && $0.started[envelope.id] == nil }
    }

    /// Records a subcommand that runs here (``LocalSubcommandLedger``).
    package func recordLocalSubcommand(_ envelope: CommandEnvelope, payload: Data) {
        state.withLock { state in
            state.pending.append(.record(envelope: envelope, payload: payload))
            state.localSubcommands.insert(envelope.id)
        }
        finishWake.signal()
    }

    /// Finishes a recorded local subcommand, fenced like any other command; an update of any
    /// other command changes nothing.
    package func finishLocalSubcommand(_ update: JournalUpdate) {
        let recorded = state.withLock { state -> Bool in
            guard state.localSubcommands.remove(update.id) != nil else { return false }
            state.pending.append(.complete(
                id: update.id, attempt: 1, state: update.state, result: update.result, code: update.errorCode, message: update.errorMessage,
                retryAfter: nil
            ))
            return true
        }
        if recorded { finishWake.signal() }
    }

    /// Stops command `id` where it runs here, and where this host is still deciding whether to
    /// take it, ends it cancelled once it has decided: every claim of it here (one made before
    /// the bus declared this host dead may still be ending). A cancel that found no ticket was
    /// lost: the command then ran to its end, though its sender had been told it was asked to stop.
    func cancelLocally(_ id: UUID) {
        let tickets = state.withLock { state -> [CommandTicket<Data>] in
            state.cancelledWhileDeciding.formUnion(state.deciding.filter { $0.id == id })
            return state.running.values(of: id)
        }
        for ticket in tickets { ticket.cancel() }
    }
}

extension BusCommandRow {
    /// This claim of the command: its id and the attempt the claim made.
    var claim: BusHost.Claim { BusHost.Claim(id: id, attempt: attempt) }
}

extension Dictionary where Value == Int {
    /// Counts `key` down by one, removing it at zero: the host's counts by name, correlation and
    /// command hold only what is in flight. Returns whether `key` was counted.
    @discardableResult
    fileprivate mutating func countDown(_ key: Key) -> Bool {
        guard let count = self[key] else { return false }
        self[key] = count > 1 ? count - 1 : nil
        return true
    }
}
