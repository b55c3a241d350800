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

// The heartbeat: renews this host's lease, takes back the commands of dead hosts, and fences
// this host when its own lease runs out.
extension BusHost {
    func heartbeatLoop() {
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
                    if version != published { log(.info, offer.commands.isEmpty
                        ? "the bus has this host's new commands: none (it claims nothing until a plugin handles one)"
                        : "the bus has this host's new commands: \(offer.commands.joined(separator: ", "))") }
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
                    fence("could not renew the lease for over \(settings.lease.spoken)", handingBack: true)
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
    func fence(_ reason: String, handingBack: Bool = false) {
        let tickets = state.withLock { state -> [CommandTicket<Data>]? in
            let first = !state.fenced
            state.fenced = true
            if !handingBack { state.declaredDead += 1 } else if first { state.leaseLapses += 1 }
            guard first else { return nil }
            // What is still deciding must not start once decided: handed back or ended as the
            // running ones are (see ``run(_:)``).
            if handingBack { state.handingBack.formUnion(state.running.claims + state.deciding) }
            state.cancelledWhileDeciding.formUnion(state.deciding)
            return state.running.values
        }
        // Already fenced, a host that stays cut off says nothing more at each failed heartbeat;
        // the bus declaring it dead is news.
        if tickets == nil, handingBack { return }
        log(.warning, "fenced: \(reason); stopped claiming and cancelled \(counted(tickets?.count ?? 0, "command")) running here")
        for ticket in tickets ?? [] { ticket.cancel() }
    }
}
