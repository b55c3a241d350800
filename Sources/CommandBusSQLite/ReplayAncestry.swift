import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Which entries of a replay are sent again by an ancestor that runs again, or dropped with one.
///
/// A parent that runs again sends its subcommands anew, as it did the first time; running its
/// journaled subcommands as well would do their work twice. So a replay runs an entry only if no
/// ancestor of it runs: a subcommand whose parent failed or lies outside the range runs on its
/// own, since nothing else will send it. A parent taken out of replay (`undo --rebuild`) takes its
/// subcommands with it: they were part of what it did.
///
/// Only entries with a parent cost anything: a root is decided without a lookup. A parent is
/// looked up once (in the page being replayed, else in the journal) and remembered, in a memo
/// that is emptied when it grows past ``memoLimit``, so a long replay's memory stays bounded.
struct ReplayAncestry {
    /// What becomes of an entry's subcommands in a replay.
    enum Fate: Sendable {
        /// Nothing above them runs: they run on their own if they qualify.
        case theirOwn
        /// An ancestor runs again and sends them anew.
        case sentAgain
        /// An ancestor was taken out of replay, and they go with it.
        case dropped
    }

    /// Whether an entry runs again if nothing above it does: its state, range and filters.
    let runs: @Sendable (JournalRecord) -> Bool
    let journal: any Journal
    /// The fate of each remembered id's subcommands.
    private var fates: [UUID: Fate] = [:]
    /// The ids of this page's entries that are parents of other entries of the page.
    private var parentsInPage: Set<UUID> = []
    /// The most ids the memo holds before it starts again.
    static let memoLimit = 100_000

    init(journal: any Journal, runs: @escaping @Sendable (JournalRecord) -> Bool) {
        self.journal = journal
        self.runs = runs
    }

    /// Notes which entries of `page` are parents of others in it, so those are remembered as they
    /// go by instead of read back from the journal.
    mutating func begin(_ page: [JournalRecord]) {
        parentsInPage = Set(page.lazy.compactMap(\.envelope.parentID))
        if fates.count > Self.memoLimit { fates.removeAll(keepingCapacity: true) }
    }

    /// Whether `record` can be decided without a look at its ancestors: a root that is no one's
    /// parent in this page (most entries of most journals), whose fate is ``Fate/theirOwn``.
    func isPlainRoot(_ record: JournalRecord) -> Bool {
        record.envelope.parentID == nil && parentsInPage.isEmpty
    }

    /// What `record`'s ancestors make of it. Call it for each entry of a page, in order.
    mutating func fate(of record: JournalRecord) async throws(CommandBusError) -> Fate {
        let fromAbove = try await fateFromAncestors(record)
        if !parentsInPage.isEmpty, parentsInPage.contains(record.envelope.id) {
            fates[record.envelope.id] = passedDown(fromAbove, by: record)
        }
        return fromAbove
    }

    /// The fate an entry hands its subcommands, given its own from above.
    private func passedDown(_ fromAbove: Fate, by record: JournalRecord) -> Fate {
        if fromAbove != .theirOwn { return fromAbove }
        if record.state == .succeeded && record.excluded { return .dropped }
        return runs(record) ? .sentAgain : .theirOwn
    }

    private mutating func fateFromAncestors(_ record: JournalRecord) async throws(CommandBusError) -> Fate {
        guard let parentID = record.envelope.parentID else { return .theirOwn }
        if let known = fates[parentID] { return known }
        // The parent lies in an earlier page (or outside the range): read it, and its line up.
        var line: [JournalRecord] = []
        var next: UUID? = parentID
        var fate = Fate.theirOwn
        while let id = next {
            if let known = fates[id] { fate = known; break }
            guard let ancestor = try await journal.record(id) else { break }
            line.append(ancestor)
            next = ancestor.envelope.parentID
        }
        for ancestor in line.reversed() {
            fate = passedDown(fate, by: ancestor)
            fates[ancestor.envelope.id] = fate
        }
        return fate
    }
}
