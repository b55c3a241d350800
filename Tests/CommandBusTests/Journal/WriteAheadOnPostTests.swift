import CommandBus
import Foundation
import Synchronization
import Testing

/// With a journal that queues write-aheads (``Journal/queuesWriteAheads``), a posted command is
/// written ahead as it is posted and queued for a runner only once that is durable: its handler
/// never runs before, and a write-ahead the journal could not take ends it `failed` unrun.
struct WriteAheadOnPostTests {
    /// A journal that queues write-aheads and makes them "durable" (or fails them) when the test says so.
    final class QueuingJournal: ForwardingJournal, @unchecked Sendable {
        private let held = Mutex<[(envelope: CommandEnvelope, payload: Data, whenDurable: @Sendable (Result<Void, CommandBusError>) -> Void)]>([])
        /// Write-aheads made through ``accept(_:payload:)``, which this journal's posts must not use.
        let awaitedAccepts = Atomic<Int>(0)

        override var queuesWriteAheads: Bool { true }
        var heldCount: Int { held.withLock { $0.count } }

        override func accept(_ envelope: CommandEnvelope, payload: Data, whenDurable: @escaping @Sendable (Result<Void, CommandBusError>) -> Void) {
            held.withLock { $0.append((envelope, payload, whenDurable)) }
        }

        override func accept(_ envelope: CommandEnvelope, payload: Data) async throws(CommandBusError) {
            awaitedAccepts.add(1, ordering: .relaxed)
            try await inner.accept(envelope, payload: payload)
        }

        /// Stores every held write-ahead and says it is durable, or fails them all with `error`.
        func release(failing error: CommandBusError? = nil) async throws {
            for write in held.withLock({ held in defer { held = [] }; return held }) {
                if let error {
                    write.whenDurable(.failure(error))
                } else {
                    try await inner.accept(write.envelope, payload: write.payload)
                    write.whenDurable(.success(()))
                }
            }
        }
    }

    /// A bus on a ``QueuingJournal`` whose handler doubles `Work`'s value and counts its runs.
    final class Setup: Sendable {
        let journal = QueuingJournal()
        let bus: CommandBus
        private let runs = InFlightGauge()

        init() {
            bus = CommandBus(configuration: .init(journal: journal))
            bus.register(ClosureHandler<Work> { [runs] command, _ in
                runs.enter()
                return command.value * 2
            })
        }

        /// How many times the handler ran (it never leaves the gauge).
        var runCount: Int { runs.peak }
    }

    @Test(.timeLimit(.minutes(1)))
    func aPostedCommandRunsOnlyOnceItsWriteAheadIsDurable() async throws {
        let setup = Setup()
        let (journal, bus) = (setup.journal, setup.bus)
        let tickets = (0..<3).map { bus.post(Work(value: $0)) }
        #expect(journal.heldCount == 3)
        // Long enough for an idle runner to have taken a command queued without its write-ahead.
        try await Task.sleep(for: .milliseconds(50))
        #expect(setup.runCount == 0)
        #expect(tickets.allSatisfy { $0.state == .pending })

        try await journal.release()
        for (index, ticket) in tickets.enumerated() { #expect(try await ticket.result == index * 2) }
        #expect(setup.runCount == 3)
        #expect(journal.awaitedAccepts.load(ordering: .relaxed) == 0)
        for ticket in tickets { #expect(await journalComesToHold(journal, ticket.id, in: .succeeded)) }
    }

    @Test(.timeLimit(.minutes(1)))
    func aWriteAheadTheJournalCannotTakeEndsTheCommandFailedWithoutRunningIt() async throws {
        let setup = Setup()
        let (journal, bus) = (setup.journal, setup.bus)
        let ticket = bus.post(Work(value: 7))
        try await journal.release(failing: .journalFailed("test.sqlite", "disk full"))
        await #expect(throws: CommandBusError.self) { try await ticket.result }
        #expect(ticket.state == .failed)
        do {
            _ = try await ticket.result
        } catch {
            #expect(error.code == .journalFailed)
            #expect(error.message.contains("disk full"))
        }
        #expect(setup.runCount == 0)
    }

    /// A command cancelled while its write-ahead waits is not run once the write-ahead is
    /// durable, and the journal records it `cancelled`.
    @Test(.timeLimit(.minutes(1)))
    func aCommandCancelledBeforeItsWriteAheadIsDurableNeverRuns() async throws {
        let setup = Setup()
        let (journal, bus) = (setup.journal, setup.bus)
        let ticket = bus.post(Work(value: 1))
        ticket.cancel()
        try await journal.release()
        await #expect(throws: CommandBusError.self) { try await ticket.result }
        #expect(ticket.state == .cancelled)
        #expect(await journalComesToHold(journal, ticket.id, in: .cancelled))
        #expect(setup.runCount == 0)
    }
}

/// Whether `journal` comes to hold `id` in `state` within a few seconds.
private func journalComesToHold(_ journal: WriteAheadOnPostTests.QueuingJournal, _ id: UUID, in state: CommandState) async -> Bool {
    for _ in 0..<2_500 {
        if (try? await journal.inner.record(id))?.state == state { return true }
        try? await Task.sleep(for: .milliseconds(2))
    }
    return false
}
