import CommandBus
import Foundation
import Testing

struct Add: Command, Reversible {
    typealias Result = Int
    static let name = "add"
    var by: Int
    func inverse() -> Add { Add(by: -by) }
}

struct JournalTests {
    @Test func aCommandIsJournaledBeforeItRunsAndItsEndingIsRecorded() async throws {
        let journal = InMemoryJournal()
        let bus = CommandBus(configuration: .init(journal: journal))
        bus.register(ClosureHandler<Work> { command, context in
            // Written ahead: the journal holds the command before its handler runs.
            let record = try await journal.record(context.envelope.id)
            #expect(record?.state == .pending || record?.state == .running)
            return command.value * 2
        })
        let ticket = bus.post(Work(value: 21))
        #expect(try await ticket.result == 42)
        let record = try #require(try await journal.record(ticket.id))
        #expect(record.state == .succeeded)
        #expect(record.result == Data("42".utf8))
        #expect(record.attempts == 1)
        #expect(record.payload == Data(#"{"value":21}"#.utf8))
    }

    @Test func failuresAndTimeoutsPersistWithTheirErrors() async throws {
        let journal = InMemoryJournal()
        let bus = CommandBus(configuration: .init(journal: journal))
        bus.register(ClosureHandler<Work> { command, _ in
            if command.value < 0 { throw Failure(description: "negative") }
            try await Task.sleep(for: .seconds(60))
            return 0
        })
        let failed = bus.post(Work(value: -1))
        _ = try? await failed.result
        let slow = bus.post(Work(value: 1), timeout: .milliseconds(50))
        _ = try? await slow.result
        #expect(try await journal.record(failed.id)?.errorMessage == "command 'work' failed: negative")
        var state: CommandState?
        for _ in 0..<5_000 where state != .timedOut {
            state = try await journal.record(slow.id)?.state
            try await Task.sleep(for: .milliseconds(2))
        }
        #expect(state == .timedOut)
    }

    @Test func queriesAreNotJournaled() async throws {
        struct Query: CommandHandler {
            var isJournaled: Bool { false }
            func handle(_ command: Work, context: CommandContext) async throws -> Int { command.value }
        }
        let journal = InMemoryJournal()
        let bus = CommandBus(configuration: .init(journal: journal))
        bus.register(Query())
        _ = try await bus.send(Work(value: 1))
        #expect(try await journal.records(JournalQuery()).isEmpty)
    }

    @Test func recoveryRunsUnfinishedCommandsAgainUnderTheirIDs() async throws {
        let journal = InMemoryJournal()
        let envelope = CommandEnvelope(commandName: Work.name)
        try await journal.accept(envelope, payload: Data(#"{"value":5}"#.utf8))
        let child = CommandEnvelope(commandName: Work.name, parent: envelope)
        try await journal.accept(child, payload: Data(#"{"value":6}"#.utf8))

        let bus = CommandBus(configuration: .init(journal: journal))
        bus.register(ClosureHandler<Work> { command, _ in command.value + 1 })
        let tickets = try await bus.recover()
        #expect(tickets.map(\.id) == [envelope.id])
        #expect(try await tickets[0].result == Data("6".utf8))
        #expect(try await journal.record(envelope.id)?.state == .succeeded)
        #expect(try await journal.record(child.id)?.state == .cancelled)
    }

    @Test func replayRunsARecordAgainWithoutJournalingIt() async throws {
        let journal = InMemoryJournal()
        let bus = CommandBus(configuration: .init(journal: journal))
        bus.register(ClosureHandler<Work> { command, _ in command.value })
        let original = bus.post(Work(value: 3))
        _ = try await original.result
        let record = try #require(try await journal.record(original.id))
        #expect(try await bus.replay(record) == Data("3".utf8))
        #expect(try await journal.records(JournalQuery()).count == 1)
    }

    @Test func reversibleCommandsNameTheirInverse() async throws {
        let journal = InMemoryJournal()
        let bus = CommandBus(configuration: .init(journal: journal))
        bus.register(ClosureHandler<Add> { command, _ in command.by })
        bus.register(ClosureHandler<Work> { command, _ in command.value })
        let added = bus.post(Add(by: 4))
        let worked = bus.post(Work(value: 1))
        _ = try await (added.result, worked.result)
        let addRecord = try #require(try await journal.record(added.id))
        let inverse = try #require(try bus.inverse(of: addRecord))
        #expect(inverse.name == "add" && inverse.payload == Data(#"{"by":-4}"#.utf8))
        #expect(try bus.inverse(of: try #require(try await journal.record(worked.id))) == nil)
    }
}
