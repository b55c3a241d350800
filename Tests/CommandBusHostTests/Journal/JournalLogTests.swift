@testable import CommandBusSQLite
import CommandBus
import Foundation
import Synchronization
import Testing

/// The log in front of a `.deferred` SQLite journal (``JournalLog``): its records, its two files,
/// and what opening a journal makes of what a log left, on real files.
struct JournalLogTests {
    static let owner = "4242:1700000000"

    static func accept(payload: Int = 16, parent: CommandEnvelope? = nil) -> AcceptedCommand {
        let envelope = CommandEnvelope(commandName: parent == nil ? "greet" : "greet.child", parent: parent, metadata: ["who": "test"])
        return AcceptedCommand(envelope, payload: Data(repeating: UInt8(ascii: "x"), count: payload))
    }

    /// Appends `write` to `log` and writes it (and all held before it) to its file; returns the
    /// file the log retired after it, if it switched.
    static func appendWritten(_ write: JournalWrite, to log: JournalLog) throws -> Int? {
        let (position, retired) = try log.append(JournalLogRecord.encode(write, owner: owner))
        try log.write(through: position)
        return retired
    }

    /// Every kind of write comes back from its record as it went in, and an accept with its owner.
    @Test func eachKindOfWriteComesBackFromItsRecord() throws {
        let parent = CommandEnvelope(commandName: "greet")
        let command = AcceptedCommand(parent, payload: Data("{}".utf8)), child = Self.accept(parent: parent)
        var ending = JournalUpdate(id: command.id, state: .failed, attempts: 3, result: Data("{\"a\":1}".utf8), at: Date(timeIntervalSince1970: 1_700_000_000.25))
        ending.errorCode = "handlerFailed"
        ending.errorMessage = "it broke: ünïcode"
        let writes: [JournalWrite] = [
            .accept(command), .accept(child), .update(ending),
            .update(JournalUpdate(id: child.id, state: .running, attempts: 1)),
            .linkUndo(undo: child.id, original: command.id), .exclude(command.id, true),
            .markFailed(child.id, code: "stale", message: "no longer decodes"), .discard(child.id),
        ]
        var bytes: [UInt8] = []
        for write in writes {
            var record = JournalLogRecord.encode(write, owner: Self.owner)
            JournalLogRecord.stamp(&record, generation: 7)
            bytes += record
        }
        let entries = JournalLogRecord.scan(bytes, generation: 7)
        #expect(entries.map { Self.describe($0.write) } == writes.map(Self.describe))
        #expect(entries.map(\.owner) == [Self.owner, Self.owner, "", "", "", "", "", ""])
        #expect(JournalLogRecord.scan(bytes, generation: 8).isEmpty)
    }

    /// A record cut short, or with one byte changed, ends the scan there; the records before it stand.
    @Test(arguments: ["torn", "flipped", "zeros"])
    func aDamagedRecordEndsTheScan(damage: String) {
        var bytes: [UInt8] = []
        for _ in 0..<3 {
            var record = JournalLogRecord.encode(.accept(Self.accept()), owner: Self.owner)
            JournalLogRecord.stamp(&record, generation: 1)
            bytes += record
        }
        let recordSize = bytes.count / 3
        switch damage {
        case "torn": bytes.removeLast(5)
        case "flipped": bytes[2 * recordSize + JournalLogRecord.headerSize + 20] ^= 0x01
        default: bytes += [UInt8](repeating: 0, count: 4_096)
        }
        #expect(JournalLogRecord.scan(bytes, generation: 1).count == (damage == "zeros" ? 3 : 2))
    }

    /// Past its switch size the log syncs its file and turns to the other, in a new generation;
    /// it turns back only once the first is checkpointed, and overwrites it from the start. What
    /// the files hold reads back oldest generation first, without the overwritten records.
    @Test func theTwoFilesTakeTurnsAndReadBackInOrder() throws {
        let directory = try TemporaryDirectory("cmdbus-log")
        defer { directory.remove() }
        let log = try #require(try JournalLog(journal: directory.file("journal.sqlite").path, switchSize: 64 << 10))
        try log.reset()
        var appended: [UUID] = [], retirements: [Int] = [], inFirstFile = 0
        func append() throws {
            let command = Self.accept(payload: 4_000)
            let inFirst = retirements.isEmpty
            appended.append(command.id)
            let retired = try Self.appendWritten(.accept(command), to: log)
            if let retired { retirements.append(retired) }
            if inFirst { inFirstFile = appended.count }
        }
        let perFile = log.switchSize / 4_100 + 1
        for _ in 0..<(perFile * 2) { try append() }
        #expect(retirements == [0], "file 1 filled up, but file 0 is not checkpointed yet")
        log.checkpointed(0)
        try append()
        #expect(retirements == [0, 1])
        try append()
        let ids = log.storedEntries().compactMap { entry -> UUID? in
            if case .accept(let command) = entry.write { return command.id }
            return nil
        }
        // File 1 whole (generation 2), then the one record of generation 3 over file 0's first.
        #expect(ids.count == appended.count - inFirstFile && ids == Array(appended[inFirstFile...]), "\(ids.count) ids, \(inFirstFile) first")
        // Emptied again (files already written through: only their first headers are zeroed), nothing reads back.
        try log.reset()
        #expect(log.storedEntries().isEmpty)
        _ = try Self.appendWritten(.discard(appended[0]), to: log)
        #expect(log.storedEntries().count == 1)
    }

    /// Records an emptied log left past its first header are never read back as a later
    /// generation's, even when a new record ends exactly where an old one begins: emptied twice
    /// with nothing written between, the log once numbered its next generation as its first.
    @Test func anEmptiedLogNeverReadsBackAnEarlierGenerationsRecords() throws {
        let directory = try TemporaryDirectory("cmdbus-log")
        defer { directory.remove() }
        let log = try #require(try JournalLog(journal: directory.file("journal.sqlite").path))
        func discard(_ id: UUID) throws { _ = try Self.appendWritten(.discard(id), to: log) }
        try log.reset()
        for _ in 0..<3 { try discard(UUID()) }
        try log.reset()
        try log.reset()
        let new = UUID()
        try discard(new)  // the same size as the first old record: the second old one follows it
        let read = log.storedEntries().map { entry -> UUID? in
            if case .discard(let id) = entry.write { return id }
            return nil
        }
        #expect(read == [new])
    }

    /// An appended record is held in memory, not in the file, until a write or a sync through
    /// it; either hands the file every record held before it too, in the order appended.
    @Test func anAppendedWriteReachesTheFileWithTheNextWriteOrSync() async throws {
        let directory = try TemporaryDirectory("cmdbus-log")
        defer { directory.remove() }
        let log = try #require(try JournalLog(journal: directory.file("journal.sqlite").path))
        try log.reset()
        func append(_ write: JournalWrite) throws -> UInt64 {
            try log.append(JournalLogRecord.encode(write, owner: Self.owner)).position
        }
        func stored() -> [String] { log.storedEntries().map { Self.describe($0.write) } }
        let first = Self.accept(), second = Self.accept()
        try log.write(through: try append(.accept(first)))
        #expect(stored() == [Self.describe(.accept(first))])
        let running = JournalWrite.update(JournalUpdate(id: first.id, state: .running, attempts: 1))
        _ = try append(running)
        #expect(stored().count == 1, "held, not yet in the file")
        try log.write(through: try append(.accept(second)))
        #expect(stored() == [.accept(first), running, .accept(second)].map(Self.describe))
        let ending = JournalWrite.update(JournalUpdate(id: second.id, state: .succeeded, attempts: 1))
        let position = try append(ending)
        #expect(stored().count == 3)
        try await log.sync(through: position)
        #expect(stored().last == Self.describe(ending))
    }

    /// Posts' write-aheads and endings from many threads at once: every post hears once that its
    /// write-ahead is written, and it is in the file by then (alone, or with a sync's round);
    /// every ending hears once that it is synced.
    @Test func writesAndSyncsFromManyThreadsEachHearOnceAndAreInTheFile() throws {
        let directory = try TemporaryDirectory("cmdbus-log")
        defer { directory.remove() }
        let path = directory.file("journal.sqlite").path
        let log = try #require(try JournalLog(journal: path))
        try log.reset()
        let rounds = 200
        let heard = Mutex<(written: [UUID], synced: Int, missing: [UUID], failed: Int)>(([], 0, [], 0))
        let group = DispatchGroup()
        DispatchQueue.concurrentPerform(iterations: rounds * 2) { index in
            let id = UUID()
            group.enter()
            do {
                if index.isMultiple(of: 2) {
                    let position = try log.append(JournalLogRecord.encode(.accept(Self.accept()), owner: Self.owner)).position
                    log.sync(through: position) { result in
                        heard.withLock { if case .success = result { $0.synced += 1 } else { $0.failed += 1 } }
                        group.leave()
                    }
                } else {
                    let position = try log.append(JournalLogRecord.encode(.discard(id), owner: Self.owner)).position
                    log.write(through: position) { result in
                        // What the file holds now, as a process started after a `kill -9` would read it.
                        let inFile = log.storedEntries().contains { if case .discard(id) = $0.write { true } else { false } }
                        heard.withLock {
                            if case .success = result { $0.written.append(id) } else { $0.failed += 1 }
                            if !inFile { $0.missing.append(id) }
                        }
                        group.leave()
                    }
                }
            } catch {
                heard.withLock { $0.failed += 1 }
                group.leave()
            }
        }
        #expect(group.wait(timeout: .now() + 60) == .success, "a caller was never told")
        let outcome = heard.withLock { $0 }
        #expect(outcome.failed == 0)
        #expect(outcome.synced == rounds)
        #expect(outcome.written.count == rounds && Set(outcome.written).count == rounds)
        #expect(outcome.missing.count == 0, "\(outcome.missing.count) told written before they were in the file")
    }

    /// Records held in a file the log has switched away from reach that file, not the new one,
    /// with the next write: a switch never leaves a record behind or puts it in the wrong file.
    @Test func heldWritesReachTheFileTheyWereAppendedTo() throws {
        let directory = try TemporaryDirectory("cmdbus-log")
        defer { directory.remove() }
        let log = try #require(try JournalLog(journal: directory.file("journal.sqlite").path, switchSize: 64 << 10))
        try log.reset()
        var held: [UUID] = []
        var position: UInt64 = 0
        var switched = false
        while !switched {
            let id = UUID()
            held.append(id)
            let record = JournalLogRecord.encode(.markFailed(id, code: "x", message: String(repeating: "m", count: 1_000)), owner: Self.owner)
            let appended = try log.append(record)
            position = appended.position
            switched = appended.retired != nil
            try #require(held.count < 1_000, "the log never switched")
        }
        // Two more after the switch, in the new file.
        for _ in 0..<2 {
            let id = UUID()
            held.append(id)
            position = try log.append(JournalLogRecord.encode(.markFailed(id, code: "x", message: "m"), owner: Self.owner)).position
        }
        try log.write(through: position)
        let read = log.storedEntries().compactMap { entry -> UUID? in
            if case .markFailed(let id, _, _) = entry.write { return id }
            return nil
        }
        #expect(read.count == held.count && read == held, "\(read.count) of \(held.count) read back")
    }

    /// A second process, or a second journal in this one, finds the log locked and syncs through SQLite instead.
    @Test func aSecondOpenerOfTheSameJournalFindsTheLogLocked() throws {
        let directory = try TemporaryDirectory("cmdbus-log")
        defer { directory.remove() }
        let path = directory.file("journal.sqlite").path
        let first = try #require(try JournalLog(journal: path))
        #expect(try JournalLog(journal: path) == nil)
        _ = first
    }

    /// A power cut can take what SQLite had not synced, but not what the log had: a journal
    /// restored to before the cut, with the log beside it, gets back every write the log made
    /// durable, and the command still in flight keeps its owner.
    @Test func openingAJournalAppliesWhatItsLogHeld() async throws {
        let directory = try TemporaryDirectory("cmdbus-log")
        defer { directory.remove() }
        let live = try directory.subdirectory("live"), restored = try directory.subdirectory("restored")
        let path = live.file("journal.sqlite").path
        let journal = try SQLiteJournal(path: path, durability: .deferred)
        let before = CommandEnvelope(commandName: "ping")
        try await journal.accept(before, payload: Data("{}".utf8))
        try await journal.update(JournalUpdate(id: before.id, state: .succeeded, attempts: 1, result: Data("1".utf8)), waitUntilDurable: true)
        try await journal.flush()
        let original = try #require(try await journal.record(before.id))
        // What SQLite had synced: the file as it stands (after the flush's synced commit).
        for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: path + suffix) {
            try FileManager.default.copyItem(atPath: path + suffix, toPath: restored.file("journal.sqlite" + suffix).path)
        }
        let ended = CommandEnvelope(commandName: "ping"), running = CommandEnvelope(commandName: "ping")
        try await journal.accept(ended, payload: Data("{\"n\":2}".utf8))
        try await journal.update(JournalUpdate(id: ended.id, state: .running, attempts: 1), waitUntilDurable: false)
        try await journal.update(JournalUpdate(id: ended.id, state: .succeeded, attempts: 1, result: Data("2".utf8)), waitUntilDurable: true)
        try await journal.accept(running, payload: Data("{\"n\":3}".utf8))
        try await journal.update(JournalUpdate(id: running.id, state: .running, attempts: 1), waitUntilDurable: false)
        try await journal.setExcluded(before.id, true)
        for index in 0..<2 {
            try FileManager.default.copyItem(atPath: path + "-log.\(index)", toPath: restored.file("journal.sqlite-log.\(index)").path)
        }

        let recovered = try SQLiteJournal(path: restored.file("journal.sqlite").path)
        let endedRecord = try #require(try await recovered.record(ended.id))
        #expect(endedRecord.state == .succeeded && endedRecord.result == Data("2".utf8) && endedRecord.payload == Data("{\"n\":2}".utf8))
        #expect(try await recovered.record(running.id)?.state == .running)
        #expect(try await recovered.record(before.id)?.excluded == true)
        // The restored file's own entry is not accepted again (which would reopen it: a new
        // acceptance time, its attempts counted again), though the log holds its accept.
        var expected = original
        expected.excluded = true
        #expect(try await recovered.record(before.id) == expected)
        let database = try SQLiteDatabase(path: restored.file("journal.sqlite").path, create: false, readOnly: true)
        let owner = try database.prepare("SELECT owner FROM commands WHERE id = '\(running.id.uuidString)'")
        #expect(try owner.step() && owner.string(0) == ProcessIdentity.current.text)
        database.close()
        // A journal that keeps no log removes the files once it has applied them.
        #expect(!FileManager.default.fileExists(atPath: restored.file("journal.sqlite-log.0").path))
    }

    /// What sits where the log goes is never trusted: random bytes apply nothing and are
    /// emptied; a directory is refused in one line that says what to do.
    @Test func aLogOfRandomBytesAppliesNothingAndADirectoryIsRefused() async throws {
        let directory = try TemporaryDirectory("cmdbus-log")
        defer { directory.remove() }
        let path = directory.file("journal.sqlite").path
        var generator = SystemRandomNumberGenerator()
        try Data((0..<5_000).map { _ in UInt8.random(in: 0...255, using: &generator) }).write(to: URL(fileURLWithPath: path + "-log.0"))
        let journal = try SQLiteJournal(path: path, durability: .deferred)
        #expect(try await journal.records(JournalQuery()).isEmpty)
        #expect(try #require(try JournalLog(journal: directory.file("other.sqlite").path)).storedEntries().isEmpty)

        let blocked = directory.file("blocked.sqlite").path
        try FileManager.default.createDirectory(atPath: blocked + "-log.0", withIntermediateDirectories: false)
        #expect(throws: CommandBusError.journalFailed(blocked, "cannot open its log \(blocked)-log.0: it is a directory; move it away, the journal keeps its log there")) {
            _ = try SQLiteJournal(path: blocked, durability: .deferred)
        }
    }

    /// A `.deferred` journal syncs its log, not SQLite: no commit of a command's writes syncs,
    /// and a read in the same process sees every write its caller has heard of.
    @Test func aDeferredJournalsCommitsDoNotSync() async throws {
        let recorded = try JournalCommitTests.Recorded(.deferred)
        defer { recorded.directory.remove() }
        let command = JournalCommitTests.envelope()
        try await recorded.accept(command)
        try await recorded.start(command)
        try await recorded.end(command)
        #expect(try await recorded.journal.record(command.id)?.state == .succeeded)
        #expect(!recorded.commits.isEmpty && recorded.commits.allSatisfy { !$0.synced })
        #expect(FileManager.default.fileExists(atPath: recorded.journal.path + "-log.0"))
        let reader = try SQLiteJournal(path: recorded.journal.path, create: false, readOnly: true)
        #expect(try await reader.record(command.id)?.state == .succeeded)
    }

    static func describe(_ write: JournalWrite) -> String {
        switch write {
        case .accept(let command):
            let values = Array(command.values)
            func text(_ part: AcceptedCommand.Part?) -> String {
                part.map { String(decoding: values[$0.start..<($0.start + $0.count)], as: UTF8.self) } ?? "-"
            }
            return "accept \(command.id) \(command.createdAt) \(text(command.idText)) \(text(command.name)) \(text(command.parentText)) "
                + "\(text(command.correlationText)) \(text(command.metadataText)) \(text(command.payload))"
        case .update(let update):
            return "update \(update)"
        case .linkUndo(let undo, let original):
            return "link \(undo) \(original)"
        case .exclude(let id, let excluded):
            return "exclude \(id) \(excluded)"
        case .markFailed(let id, let code, let message):
            return "failed \(id) \(code) \(message)"
        case .discard(let id):
            return "discard \(id)"
        }
    }
}
