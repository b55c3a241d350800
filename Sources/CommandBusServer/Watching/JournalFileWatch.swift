import CommandBusSQLite
import CommandBusSupport
import Synchronization

/// A server's look, every ``interval``, at whether its journal's path still leads to the file
/// it writes (``SQLiteJournal/fileProblem``): a cleanup script or a restore that removes or
/// replaces the file under a running server left it recording, for as long as it ran, into a
/// file gone when it stopped, while `/readyz` said ready. Logged once as an error when it
/// happens (and once when the path leads back to the file), and said by ``problem`` for
/// `/readyz` and `status`.
package final class JournalFileWatch: Sendable {
    /// How often the path is looked at: one `stat`.
    package static let interval: Duration = .seconds(2)

    private let journal: SQLiteJournal
    private let seen = Mutex<String?>(nil)

    package init(journal: SQLiteJournal) {
        self.journal = journal
    }

    /// What is wrong with the journal's file, said whole ("journal PATH was removed …"), or
    /// `nil` if nothing was at the last look.
    package var problem: String? {
        seen.withLock { $0 }.map { "journal \(journal.path) \($0)" }
    }

    /// Looks now, and logs a change since the last look.
    package func look(log: ServerLog) {
        let now = journal.fileProblem
        let before = seen.withLock { seen in
            defer { seen = now }
            return seen
        }
        guard before != now else { return }
        if now != nil, let problem {
            log(.error, problem)
        } else if before != nil {
            log(.info, "journal \(journal.path) leads to the file this server writes again")
        }
    }

    /// Looks every ``interval`` for as long as the process runs.
    package func start(log: ServerLog) {
        Task.detached(priority: .background) { [self] in
            while !Task.isCancelled {
                look(log: log)
                try? await Task.sleep(for: Self.interval)
            }
        }
    }
}
