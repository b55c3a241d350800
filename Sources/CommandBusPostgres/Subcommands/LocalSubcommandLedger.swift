import CommandBus
import Synchronization
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A host bus's journal: it records on the shared bus the subcommands a plugin sends that run on
/// this same host, as rows of their own (parent id, correlation, state, result), so they are
/// recorded the same way as the ones that cross to another host. Everything else the bus journals
/// (the claimed commands themselves, already rows, subcommands of another host's tree among them)
/// it leaves alone.
package final class LocalSubcommandLedger: Journal {
    private struct State {
        weak var host: BusHost?
        var bus: CommandBus?
    }
    private let state = Mutex(State())

    package init() {}

    /// Starts recording for `host`, whose commands run on `bus`.
    package func attach(_ host: BusHost, bus: CommandBus) {
        state.withLock { $0.host = host; $0.bus = bus }
    }

    package func accept(_ envelope: CommandEnvelope, payload: Data) async throws(CommandBusError) {
        guard envelope.parentID != nil else { return }
        let (host, bus) = state.withLock { ($0.host, $0.bus) }
        guard let host, let bus, host.isLocalSubcommand(envelope),
              (try? bus.canHandleLocally(name: envelope.commandName, payload: payload)) == true else { return }
        host.recordLocalSubcommand(envelope, payload: payload)
    }

    package func update(_ update: JournalUpdate, waitUntilDurable: Bool) async throws(CommandBusError) {
        // The host knows which commands it recorded (``BusHost/State/localSubcommands``).
        guard update.state.isTerminal else { return }
        state.withLock { $0.host }?.finishLocalSubcommand(update)
    }

    package func record(_ id: UUID) async throws(CommandBusError) -> JournalRecord? { nil }
    package func records(_ query: JournalQuery) async throws(CommandBusError) -> [JournalRecord] { [] }
    package func unfinished() async throws(CommandBusError) -> [JournalRecord] { [] }
    package func markFailed(_ id: UUID, error: CommandBusError) async throws(CommandBusError) {}
    package func linkUndo(_ undo: UUID, of original: UUID) async throws(CommandBusError) {}
    package func setExcluded(_ id: UUID, _ excluded: Bool) async throws(CommandBusError) {}
}
