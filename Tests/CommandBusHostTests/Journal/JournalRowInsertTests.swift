import CommandBus
import CommandBusSQLite
import Foundation
import Testing

/// The journal's writing thread inserts a commit's new commands, and its endings, many to a
/// statement; each command's writes still land as if one at a time, in order.
struct JournalRowInsertTests {
    /// A journal file, and a connection of its own that applies batches as the writing thread does.
    final class Batches {
        let work: TemporaryDirectory
        let statements: SQLiteJournalStatements
        private let database: SQLiteDatabase

        init() throws {
            work = try TemporaryDirectory("cmdbus-rows")
            let path = work.file("journal.sqlite").path
            _ = try SQLiteJournal(path: path)
            database = try SQLiteDatabase(path: path, create: false)
            statements = try SQLiteJournalStatements(database)
        }

        /// Applies `writes` in one transaction.
        func apply(_ writes: [JournalWrite]) throws {
            try statements.begin()
            try statements.apply(writes.map { PendingWrite(operation: $0, completion: nil) }, owner: ProcessIdentity.current.text)
            try statements.commit()
        }

        func record(_ id: UUID) throws -> JournalRecord {
            try #require(try statements.record(id))
        }

        deinit {
            database.close()
            work.remove()
        }
    }

    static func accept(_ envelope: CommandEnvelope) -> JournalWrite {
        .accept(AcceptedCommand(envelope, payload: Data(#"{"n":1}"#.utf8)))
    }

    static func succeeded(_ envelope: CommandEnvelope, result: String) -> JournalWrite {
        .update(JournalUpdate(id: envelope.id, state: .succeeded, attempts: 1, result: Data(result.utf8)))
    }

    static func failed(_ envelope: CommandEnvelope) -> JournalWrite {
        .update(JournalUpdate(id: envelope.id, state: .failed, attempts: 1, error: .cancelled(envelope.commandName)))
    }

    @Test func manyNewCommandsInOneBatchGetTheirRowsInOrderWithTheirEndings() throws {
        let batches = try Batches()
        // Twenty accepts (a statement of sixteen, then four), a child among them, and endings
        // for the even ones: those of the last four come while their accepts are still queued.
        var envelopes = (0..<20).map { _ in CommandEnvelope(commandName: "greet") }
        envelopes[7] = CommandEnvelope(commandName: "greet.child", parent: envelopes[3], metadata: ["who": "test"])
        let endings = envelopes.indices.filter { $0 % 2 == 0 }.map { Self.succeeded(envelopes[$0], result: "\($0)") }
        try batches.apply(envelopes.map(Self.accept) + endings)

        for (offset, envelope) in envelopes.enumerated() {
            let record = try batches.record(envelope.id)
            #expect(record.sequence == Int64(offset + 1))
            #expect(record.envelope.commandName == envelope.commandName)
            #expect(record.payload == Data(#"{"n":1}"#.utf8))
            #expect(record.state == (offset % 2 == 0 ? .succeeded : .pending))
            #expect(record.result == (offset % 2 == 0 ? Data("\(offset)".utf8) : nil))
        }
        let child = try batches.record(envelopes[7].id)
        #expect(child.envelope.parentID == envelopes[3].id && child.envelope.correlationID == envelopes[3].id)
        #expect(child.envelope.metadata == ["who": "test"])
    }

    /// An empty payload is kept as empty bytes. It bound NULL, which the column refuses, and
    /// the refusal rolled back the whole commit: every command written with it failed.
    @Test func anEmptyPayloadIsKeptAndFailsNoOtherCommandOfItsCommit() async throws {
        let batches = try Batches()
        let empty = (0..<3).map { _ in CommandEnvelope(commandName: "greet") }
        let other = CommandEnvelope(commandName: "greet")
        try batches.apply([.accept(AcceptedCommand(empty[0], payload: Data())), Self.accept(other), .accept(AcceptedCommand(empty[1], payload: Data()))])
        try batches.apply([.accept(AcceptedCommand(empty[2], payload: Data()))])
        #expect(try empty.map { try batches.record($0.id).payload } == [Data(), Data(), Data()])
        #expect(try batches.record(other.id).payload == Data(#"{"n":1}"#.utf8))

        // Through the journal's own connection, beside a command sent at the same time.
        let journal = try SQLiteJournal(path: batches.work.file("journal.sqlite").path)
        let alone = CommandEnvelope(commandName: "greet"), beside = CommandEnvelope(commandName: "greet")
        async let first: Void = journal.accept(alone, payload: Data())
        async let second: Void = journal.accept(beside, payload: Data("{}".utf8))
        _ = try await (first, second)
        #expect(try await journal.record(alone.id)?.payload == Data())
    }

    @Test func aKnownCommandAmongNewOnesIsAcceptedAgainAndOwnWritesKeepTheirOrder() throws {
        let batches = try Batches()
        let first = (0..<3).map { _ in CommandEnvelope(commandName: "greet") }
        try batches.apply(first.map(Self.accept) + [Self.succeeded(first[0], result: "1")])
        #expect(try batches.record(first[0].id).state == .succeeded)

        // A known command among new ones: the statement for several gives way to one at a
        // time. An ending and the same command accepted again later in the batch: the ending
        // goes first, and the accept takes it back. Two endings of one command: the first stays.
        let second = (0..<3).map { _ in CommandEnvelope(commandName: "greet") }
        try batches.apply([
            Self.accept(second[0]), Self.accept(first[0]), Self.accept(second[1]), Self.accept(second[2]),
            Self.failed(first[1]), Self.accept(first[1]),
            Self.failed(second[1]), Self.succeeded(second[1], result: "2"),
        ])
        let retried = try batches.record(first[0].id)
        #expect(retried.sequence == 1 && retried.state == .pending && retried.result == nil && retried.attempts == 1)
        let reopened = try batches.record(first[1].id)
        #expect(reopened.sequence == 2 && reopened.state == .pending && reopened.errorCode == nil && reopened.attempts == 1)
        #expect(try second.map { try batches.record($0.id).sequence } == [4, 5, 6])
        let twice = try batches.record(second[1].id)
        #expect(twice.state == .failed && twice.result == nil)
        #expect(try batches.record(second[2].id).state == .pending)

        // Every one of several known: each is accepted again.
        try batches.apply([Self.accept(second[1]), Self.accept(first[2])])
        let again = try batches.record(second[1].id)
        #expect(again.sequence == 5 && again.state == .pending && again.errorCode == nil && again.attempts == 1)
        #expect(try batches.record(first[2].id).sequence == 3)
    }
}
