import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Replays succeeded journal entries, in order, into a bus whose handlers start from fresh state.
///
/// An entry whose payload no longer decodes (its plugin changed) is marked failed in the
/// journal with the reason, and the replay goes on.
public struct JournalReplayer: Sendable {
    /// What a replay did.
    public struct Report: Sendable, Equatable {
        /// Entries that ran again.
        public var replayed = 0
        /// Entries that failed; stale ones are marked failed in the journal.
        public var failed = 0
        /// The one-line reasons of the failures, with the entries' ids.
        public var failures: [String] = []
    }

    package let bus: CommandBus
    package let journal: any Journal
    /// Entries are read this many at a time.
    package static let pageSize = 10_000

    /// Creates a replayer of `journal` into `bus`.
    public init(bus: CommandBus, journal: any Journal) {
        self.bus = bus
        self.journal = journal
    }

    /// Replays the succeeded entries in the sequence range (and, if given, only these command names).
    /// Entries taken out of replay (`undo --rebuild`) are skipped.
    public func replay(
        commands names: Set<String>? = nil, after: Int64? = nil, through: Int64? = nil,
        createdFrom: Date? = nil, createdUntil: Date? = nil
    ) async throws(CommandBusError) -> Report {
        var report = Report()
        var cursor = after
        while true {
            let page = try await journal.records(JournalQuery(
                states: [.succeeded], afterSequence: cursor, throughSequence: through, limit: Self.pageSize
            ))
            for record in page where !record.excluded && (names?.contains(record.envelope.commandName) ?? true) {
                if let createdFrom, record.envelope.createdAt < createdFrom { continue }
                if let createdUntil, record.envelope.createdAt > createdUntil { continue }
                do {
                    try await bus.replayDiscardingResult(record)
                    report.replayed += 1
                } catch {
                    report.failed += 1
                    report.failures.append("\(record.envelope.id): \(error.message)")
                    if error.code == .decodingFailed {
                        let stale = CommandBusError(code: .decodingFailed, message: "stale payload, found by a replay: \(error.message)")
                        try await journal.markFailed(record.envelope.id, error: stale)
                    }
                }
            }
            guard page.count == Self.pageSize, let last = page.last else { return report }
            cursor = last.sequence
        }
    }
}
