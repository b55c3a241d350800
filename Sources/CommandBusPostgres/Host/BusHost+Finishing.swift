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

// The finisher: writes the ends, declines and events of what ran here, in batches, fenced
// on this host's lease.
extension BusHost {
    /// Sends the events of commands running here (and their local subcommands) to the bus.
    func forwardEvents() {
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

    func finishLoop() {
        let session = PGSession(url: settings.url, linkTimeout: settings.lease, planning: .once)
        var lastReconciled = ContinuousClock.now
        while true {
            // Between batches, once a lease: nothing of this host's is on its way to the bus.
            if ContinuousClock.now - lastReconciled >= settings.lease, state.withLock({ $0.joined && !$0.stopped && !$0.fenced }) {
                handBackForgotten(on: session)
                lastReconciled = .now
            }
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
                            try append(unsentEvents, on: connection)
                            unsentEvents = []
                        }
                        try write(unwritten, on: connection)
                        unwritten = []
                    }
                } catch where error.refusesTheData {
                    // Sent again, the batch is refused again: each goes on its own, so what
                    // the bus refuses is only what it cannot hold (``writeApart(_:events:on:)``).
                    log(.warning, "the bus refused a batch of ends or events (\(error.message)); writing each on its own")
                    writeApart(unwritten, events: unsentEvents, on: session)
                    unwritten = []
                    unsentEvents = []
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

    func write(_ work: [Finish], on connection: PGConnection) throws(PGError) {
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
        for chunk in BusSQL.arrays(of: BusSQL.endsInIDOrder(ends), count: 500) {
            let done = try connection.execute(BusSQL.complete, [.jsonb(chunk), .uuid(id)])
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

    /// Sends `events` to the bus, in arrays that a `jsonb` value holds.
    func append(_ events: [JSONValue], on connection: PGConnection) throws(PGError) {
        for chunk in BusSQL.arrays(of: events, count: 1_000) {
            try connection.execute(BusSQL.appendEvents, [.jsonb(chunk)])
        }
    }

    /// The finisher wrote batch `batch`: wakes the ``flushFinishes()`` callers waiting for it.
    func finishedBatch(_ batch: Int) {
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
    func flushFinishes() async {
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
}
