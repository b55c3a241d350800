import CommandBusSupport
import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `serve --keep AGE`: a server that prunes its journal (or a host, the shared bus) as
/// `cmdbus journal prune --older-than AGE` does, at start and then every so often, so a
/// long-running host's journal stops growing without anyone running it by hand.
package enum JournalRetention {
    /// How often a server with `keep` prunes: a quarter of it, between a second and an hour.
    package static func interval(keeping keep: Duration) -> Duration {
        min(.seconds(3_600), max(.seconds(1), keep / 4))
    }

    /// Prunes what ended longer ago than `keep` now and every ``interval(keeping:)`` after,
    /// logging what went (nothing when nothing did) and a failure as a warning, and trying again
    /// at the next turn. `prune` removes what ended before the date it is given; it returns
    /// how many entries went.
    package static func start(keeping keep: Duration, log: ServerLog, prune: @escaping @Sendable (Date) async throws -> Int) {
        Task.detached(priority: .background) {
            while !Task.isCancelled {
                let cutoff = Date() - keep.seconds
                do {
                    let removed = try await prune(cutoff)
                    if removed > 0 { log(.info, "pruned \(counted(removed, "journal entry", plural: "journal entries")) that ended before \(cutoff.formatted(.iso8601)) (--keep)") }
                } catch {
                    log(.warning, "could not prune the journal (--keep): \(error); trying again in \(interval(keeping: keep))")
                }
                try? await Task.sleep(for: interval(keeping: keep))
            }
        }
    }
}
