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
        /// Subcommands not run on their own because their parent ran again and sent them anew.
        public var sentByParents = 0
    }

    package let bus: CommandBus
    package let journal: any Journal
    /// Entries are read this many at a time.
    package let pageSize: Int
    /// The page size a replayer has unless a test asks for another.
    package static let defaultPageSize = 10_000

    /// Creates a replayer of `journal` into `bus`.
    public init(bus: CommandBus, journal: any Journal) {
        self.init(bus: bus, journal: journal, pageSize: Self.defaultPageSize)
    }

    /// Creates a replayer that reads `pageSize` entries at a time (tests use small pages).
    package init(bus: CommandBus, journal: any Journal, pageSize: Int) {
        self.bus = bus
        self.journal = journal
        self.pageSize = max(1, pageSize)
    }

    /// Replays the succeeded entries in the sequence range, created from `createdFrom` and before
    /// `createdBefore` (and, if given, only these command names).
    /// Entries taken out of replay (`undo --rebuild`) are skipped with their subcommands, and
    /// subcommands whose parent runs again are left to it: it sends them anew (see ``ReplayAncestry``).
    ///
    /// The next page is read while this one runs: the journal reads on its own thread, so the
    /// reading and the running overlap instead of taking turns.
    public func replay(
        commands names: Set<String>? = nil, after: Int64? = nil, through: Int64? = nil,
        createdFrom: Date? = nil, createdBefore: Date? = nil
    ) async throws(CommandBusError) -> Report {
        var report = Report()
        report.sentByParents = try await forEachEntryToRun(
            commands: names, after: after, through: through, createdFrom: createdFrom, createdBefore: createdBefore
        ) { record throws(CommandBusError) in
            try await replay(record, into: &report)
        }
        return report
    }

    /// Calls `body`, in journal order, with each succeeded entry a replay of this range runs: in
    /// range, of these names, not taken out of replay, and not sent again by an ancestor that runs.
    /// Returns how many entries were left to their ancestors.
    @inline(__always)  // into `replay`, whose per-entry closure then costs nothing (2% of an entry)
    package func forEachEntryToRun(
        commands names: Set<String>? = nil, after: Int64? = nil, through: Int64? = nil,
        createdFrom: Date? = nil, createdBefore: Date? = nil,
        _ body: (JournalRecord) async throws(CommandBusError) -> Void
    ) async throws(CommandBusError) -> Int {
        var ancestry = ReplayAncestry(journal: journal) { record in
            record.state == .succeeded && !record.excluded
                && (names?.contains(record.envelope.commandName) ?? true)
                && after.map { record.sequence > $0 } ?? true && through.map { record.sequence <= $0 } ?? true
                && createdFrom.map { record.envelope.createdAt >= $0 } ?? true
                && createdBefore.map { record.envelope.createdAt < $0 } ?? true
        }
        var sentByParents = 0
        var page = try await self.page(after: after, through: through).get()
        while true {
            let cursor = page.count == pageSize ? page.last?.sequence : nil
            async let following = cursor == nil ? .success([]) : self.page(after: cursor, through: through)
            ancestry.begin(page)
            for record in page {
                let fate = ancestry.isPlainRoot(record) ? .theirOwn : try await ancestry.fate(of: record)
                guard ancestry.runs(record) else { continue }
                switch fate {
                case .theirOwn: try await body(record)
                case .sentAgain: sentByParents += 1
                case .dropped: continue
                }
            }
            guard cursor != nil else { return sentByParents }
            page = try await following.get()
        }
    }

    /// Up to ``pageSize`` succeeded entries after `cursor`.
    private func page(after cursor: Int64?, through: Int64?) async -> Result<[JournalRecord], CommandBusError> {
        do throws(CommandBusError) {
            return .success(try await journal.records(JournalQuery(
                states: [.succeeded], afterSequence: cursor, throughSequence: through, limit: pageSize
            )))
        } catch {
            return .failure(error)
        }
    }

    /// Runs `record` again; a failure is counted, and a payload that no longer decodes is marked failed.
    private func replay(_ record: JournalRecord, into report: inout Report) async throws(CommandBusError) {
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
}
