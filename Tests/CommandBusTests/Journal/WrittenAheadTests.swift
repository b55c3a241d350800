import CommandBus
import Foundation
import Synchronization
import Testing

/// A posted command's ticket hears that the command is written ahead once the journal has it,
/// before the command runs (``CommandTicket/whenWrittenAhead(_:)``): what a server waits for
/// before it acknowledges a post.
struct WrittenAheadTests {
    /// A journal that queues write-aheads and takes them only when the test says so, or refuses them.
    final class HeldWriteAheads: ForwardingJournal, @unchecked Sendable {
        private let held = Mutex<[@Sendable () -> Void]>([])
        private let refuses: Bool

        init(refuses: Bool = false) { self.refuses = refuses }

        var heldCount: Int { held.withLock { $0.count } }

        /// Takes (or refuses) every held write-ahead.
        func release() {
            for take in held.withLock({ held -> [@Sendable () -> Void] in defer { held = [] }; return held }) { take() }
        }

        override var queuesWriteAheads: Bool { true }

        override func accept(_ envelope: CommandEnvelope, payload: Data, whenDurable: @escaping @Sendable (Result<Void, CommandBusError>) -> Void) {
            let inner = inner, refuses = refuses
            held.withLock { $0.append({
                if refuses { return whenDurable(.failure(.journalFailed("held.journal", "the disk is full"))) }
                inner.accept(envelope, payload: payload, whenDurable: whenDurable)
            }) }
        }
    }

    /// What the ticket told, in order.
    final class Heard: Sendable {
        let outcomes = Mutex<[String]>([])
        func record(_ result: Result<Void, CommandBusError>) {
            outcomes.withLock { outcomes in
                switch result {
                case .success: outcomes.append("written")
                case .failure(let error): outcomes.append(error.code.description)
                }
            }
        }
        var all: [String] { outcomes.withLock { $0 } }
    }

    /// How many times the handler of a bus it made ran.
    final class Runs: Sendable {
        private let runs = Atomic<Int>(0)
        var count: Int { runs.load(ordering: .relaxed) }

        /// A bus journaling to `journal`, whose `Work` handler counts its runs here.
        func bus(journal: some Journal) -> CommandBus {
            let bus = CommandBus(configuration: .init(journal: journal))
            bus.register(ClosureHandler<Work> { [self] command, _ in
                runs.add(1, ordering: .relaxed)
                return command.value
            })
            return bus
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func aPostHearsOnceTheJournalHasItsWriteAheadAndBeforeItRuns() async throws {
        let journal = HeldWriteAheads()
        let runs = Runs()
        let ticket = runs.bus(journal: journal).post(Work(value: 7))
        let heard = Heard(), also = Heard()
        ticket.whenWrittenAhead(heard.record)
        ticket.whenWrittenAhead(also.record)
        try await Task.sleep(for: .milliseconds(100))
        #expect(journal.heldCount == 1)
        #expect(heard.all.isEmpty, "told before the journal had the write-ahead")
        #expect(runs.count == 0)
        journal.release()
        #expect(try await ticket.result == 7)
        #expect(heard.all == ["written"] && also.all == ["written"])
        #expect(try await journal.record(ticket.id) != nil)
        // Asked after: told at once.
        let later = Heard()
        ticket.whenWrittenAhead(later.record)
        #expect(later.all == ["written"])
    }

    @Test func withoutAJournalAPostIsWrittenAheadAtOnce() {
        let bus = CommandBus()
        bus.register(ClosureHandler<Work> { command, _ in command.value })
        let ticket = bus.post(Work(value: 1))
        let heard = Heard()
        ticket.whenWrittenAhead(heard.record)
        #expect(heard.all == ["written"])
    }

    @Test(.timeLimit(.minutes(1)))
    func aWriteAheadTheJournalRefusesIsToldWithItsErrorAndNeverRuns() async throws {
        let journal = HeldWriteAheads(refuses: true)
        let runs = Runs()
        let ticket = runs.bus(journal: journal).post(Work(value: 2))
        let heard = Heard()
        ticket.whenWrittenAhead(heard.record)
        journal.release()
        await #expect(throws: CommandBusError.self) { try await ticket.result }
        #expect(heard.all == [CommandBusError.Code.journalFailed.description])
        #expect(runs.count == 0)
    }

    /// A post no handler takes is told its refusal, not that it is written: a server answers it
    /// with `noHandler` instead of acknowledging it. With a journal, once it is recorded as a
    /// dead letter.
    @Test(.timeLimit(.minutes(1)), arguments: [false, true])
    func aPostNoHandlerTakesIsToldItsRefusal(journaled: Bool) async throws {
        let journal = InMemoryJournal()
        let bus = CommandBus(configuration: .init(journal: journaled ? journal : nil))
        let ticket = bus.post(name: "nobody.takes", payload: Data(#"{"value": 3}"#.utf8))
        let told = await withCheckedContinuation { continuation in
            ticket.whenWrittenAhead { continuation.resume(returning: $0) }
        }
        guard case .failure(let error) = told else {
            Issue.record("told that a post no handler takes is written ahead")
            return
        }
        #expect(error.code == .noHandler)
        if journaled { #expect(try await journal.record(ticket.id)?.state == .failed) }
    }

    /// A post cancelled while its write-ahead waits for the journal is told once, that it was
    /// cancelled; the write-ahead the journal then takes tells nobody again.
    @Test(.timeLimit(.minutes(1)))
    func aPostCancelledBeforeItsWriteAheadIsWrittenIsToldOnce() async throws {
        let journal = HeldWriteAheads()
        let runs = Runs()
        let ticket = runs.bus(journal: journal).post(Work(value: 4))
        let heard = Heard()
        ticket.whenWrittenAhead(heard.record)
        ticket.cancel()
        #expect(heard.all == [CommandBusError.Code.cancelled.description])
        journal.release()
        try await Task.sleep(for: .milliseconds(100))
        #expect(heard.all == [CommandBusError.Code.cancelled.description])
        #expect(runs.count == 0)
    }
}
