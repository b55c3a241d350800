import CommandBus
import CommandBusSupport
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// What the finisher does with a batch the bus refused for what it holds (a value past what
// `jsonb` may hold, text it cannot store): sent again whole, it was refused again, for ever,
// and every end of the host's after it waited behind it.
extension BusHost {
    /// Writes `work` and `events` one at a time. An event the bus refuses is dropped (events
    /// are told as they can be); an end it refuses is written as a failure that says why, so
    /// its command ends and its sender hears; what is refused even so is dropped, and its
    /// command, still running on the bus, is given back to the bus within a lease
    /// (``handBackForgotten(on:)``). A lost connection is waited out for each, as for a batch.
    func writeApart(_ work: [Finish], events: [JSONValue], on session: PGSession) {
        for event in events {
            if let refusal = writeRetrying({ connection throws(PGError) in try append([event], on: connection) }, on: session) {
                let command = event.objectValue?["command"]?.stringValue ?? "?"
                log(.warning, "dropped an event of command \(command) the bus refused: \(refusal.message)")
            }
        }
        // Local subcommands' rows first, as ``write(_:on:)`` has them: a completion may be of one.
        let ordered = work.filter { if case .record = $0 { true } else { false } } + work.filter { if case .record = $0 { false } else { true } }
        for item in ordered {
            guard let refusal = writeRetrying({ connection throws(PGError) in try write([item], on: connection) }, on: session) else { continue }
            guard case .complete(let id, let attempt, _, _, _, _, _) = item else {
                log(.warning, "dropped a write the bus refused (\(refusal.message))")
                continue
            }
            let failure = Finish.complete(
                id: id, attempt: attempt, state: .failed, result: nil, code: "handlerFailed",
                message: "the shared bus refused its outcome (\(refusal.message)); a result must fit in a PostgreSQL jsonb value, 256 MiB as base64",
                retryAfter: nil
            )
            if let again = writeRetrying({ connection throws(PGError) in try write([failure], on: connection) }, on: session) {
                log(.warning, "dropped the end of \(id) the bus refused (\(again.message)); it goes back to the bus within a lease")
            } else {
                log(.warning, "\(id) failed: the bus refused its outcome (\(refusal.message))")
            }
        }
    }

    /// Runs `body` on `session` until it is written, waiting out a lost connection while this
    /// host runs; the refusal if the bus refuses it (or the host stopped while it could not).
    private func writeRetrying(_ body: (PGConnection) throws(PGError) -> Void, on session: PGSession) -> PGError? {
        while true {
            do throws(PGError) {
                try session.run(body)
                return nil
            } catch where !error.refusesTheData && !state.withLock({ $0.stopped }) {
                log(.warning, "writing an end or event: \(error.message); retrying")
                session.backOff()
            } catch {
                return error
            }
        }
    }
}
