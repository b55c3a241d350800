import CommandBus
import Foundation
import Synchronization
import Testing

/// A posted command's runner hands its ending to the journal and moves on; the journal ends the
/// command once the ending is durable. Nobody may hear of the ending before that, and the
/// command keeps its concurrency slot until then.
struct EndingHandOffTests {
    /// A journal whose endings become "durable" only when the test says so.
    final class HeldJournal: ForwardingJournal, @unchecked Sendable {
        private let held = Mutex<[@Sendable () -> Void]>([])

        var heldCount: Int { held.withLock { $0.count } }

        /// Makes every held ending durable.
        func release() {
            for done in held.withLock({ held -> [@Sendable () -> Void] in defer { held = [] }; return held }) { done() }
        }

        override func update(_ update: JournalUpdate, whenDurable: @escaping @Sendable (Result<Void, CommandBusError>) -> Void) {
            let inner = inner
            held.withLock { $0.append({
                Task {
                    try? await inner.update(update, waitUntilDurable: true)
                    whenDurable(.success(()))
                }
            }) }
        }
    }

    /// What the test watches: handler starts, and tickets that finished.
    final class Seen: Sendable {
        let starts = Atomic<Int>(0)
        let finished = Mutex<[Int]>([])
    }

    static func waitUntil(_ condition: () -> Bool) async throws -> Bool {
        for _ in 0..<2_000 {
            if condition() { return true }
            try await Task.sleep(for: .milliseconds(5))
        }
        return condition()
    }

    @Test(.timeLimit(.minutes(1)))
    func aPostedCommandEndsOnlyOnceItsEndingIsDurableAndKeepsItsSlotUntilThen() async throws {
        let journal = HeldJournal()
        let bus = CommandBus(configuration: .init(journal: journal))
        let seen = Seen()
        bus.register(ClosureHandler<Work>(maxConcurrency: 1) { command, _ in
            seen.starts.add(1, ordering: .relaxed)
            return command.value
        })
        let first = bus.post(Work(value: 1))
        first.whenFinished { result in seen.finished.withLock { $0.append((try? result.get()) ?? -1) } }
        #expect(try await Self.waitUntil { journal.heldCount == 1 })
        let second = bus.post(Work(value: 2))
        second.whenFinished { result in seen.finished.withLock { $0.append((try? result.get()) ?? -1) } }
        try await Task.sleep(for: .milliseconds(200))
        // The handler returned, but its ending is not durable: nobody has heard of it, and the
        // second command still waits for the handler's one slot.
        #expect(seen.finished.withLock { $0 }.isEmpty)
        #expect(seen.starts.load(ordering: .relaxed) == 1)
        journal.release()
        #expect(try await first.result == 1)
        #expect(try await journal.record(first.id)?.state == .succeeded)
        #expect(try await Self.waitUntil { journal.heldCount == 1 })
        #expect(seen.starts.load(ordering: .relaxed) == 2)
        #expect(seen.finished.withLock { $0 } == [1])
        journal.release()
        #expect(try await second.result == 2)
        #expect(try await Self.waitUntil { seen.finished.withLock { $0 } == [1, 2] })
    }
}
