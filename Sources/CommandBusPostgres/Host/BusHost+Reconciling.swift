import CommandBus
import CommandBusSupport
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// What the bus says this host runs, set against what the host knows it runs.
extension BusHost {
    /// Gives back the commands the bus says this host runs that the host knows nowhere
    /// (``BusSQL/handBackForgotten``): a claim whose answer was lost with its connection after
    /// the claim committed, or an end the bus refused and the finisher dropped. Only a dead
    /// host's commands are taken back otherwise, so such a command stayed `running` for as long
    /// as its host lived.
    ///
    /// Runs on the finisher's thread, between its batches, so no outcome is on its way to the
    /// bus meanwhile; what the host knows (``State/held``, the local subcommands, and the
    /// outcomes waiting in ``State/pending``) is read under one lock, and a claim younger than a
    /// lease is left alone, so one whose answer is still on its way is not taken for forgotten.
    /// A failure is left for the next time: the finisher's own writes say what is wrong.
    func handBackForgotten(on session: PGSession) {
        let known = state.withLock { state -> [UUID] in
            var ids = Set(state.held.keys).union(state.localSubcommands)
            for finish in state.pending {
                switch finish {
                case .complete(let id, _, _, _, _, _, _), .decline(let id, _), .handBack(let id, _): ids.insert(id)
                case .record(let envelope, _): ids.insert(envelope.id)
                }
            }
            return Array(ids)
        }
        let rows: PGRows
        do {
            rows = try session.run { connection throws(PGError) in
                try connection.execute(BusSQL.handBackForgotten, [.uuid(id), .uuidArray(known), .integer(settings.lease.milliseconds)])
            }
        } catch {
            return
        }
        guard rows.count > 0 else { return }
        let named = rows.all.compactMap { row in row.uuid("id").map { "\($0) (\(row.text("name") ?? "?"))" } }
        log(.warning, "gave back to the bus \(counted(rows.count, "command")) it said this host ran, which this host had lost track of "
            + "(a claim whose answer was lost, or an end the bus refused): \(firstFew(named, limit: 5))")
    }
}
