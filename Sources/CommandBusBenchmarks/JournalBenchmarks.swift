import CommandBusSQLite
import CSQLite
import CommandBus
import CommandBusHost
import Foundation

/// The journal figures of issue #4: journaled command rates against raw SQLite inserts of the
/// same row size with the same durability settings, and replay speed.
enum JournalBenchmarks {
    static let batchedCommands = 20_000
    static let syncedCommands = 300
    static let replayEntries = 1_000_000

    static func run(into report: inout BenchmarkReport) async throws {
        let scratch = try Scratch("journal")
        defer { scratch.remove() }

        // Both sides warmed up first, each with a tenth of its run: a process's first burst runs
        // well below its later ones (the journal's at about 0.7 of them: the heap and the
        // runners' threads growing), and the journal's was measured cold, raw SQLite's warm.
        _ = try await journaledRate(path: scratch.path + "/warm-up.sqlite", durability: .batched(maxDelay: .zero), count: batchedCommands / 10)
        _ = try rawInsertRate(path: scratch.path + "/warm-up-raw.sqlite", count: batchedCommands / 10, rowsPerTransaction: 1_000)
        let batched = try await journaledRate(path: scratch.path + "/batched.sqlite", durability: .batched(maxDelay: .zero), count: batchedCommands)
        let rawBatched = try rawInsertRate(path: scratch.path + "/raw-batched.sqlite", count: batchedCommands, rowsPerTransaction: 1_000)
        let synced = try await journaledRate(path: scratch.path + "/synced.sqlite", durability: .synced, count: syncedCommands)
        let rawSynced = try rawInsertRate(path: scratch.path + "/raw-synced.sqlite", count: syncedCommands, rowsPerTransaction: 1)
        report.record("journal_batched_per_s", batched)
        report.record("journal_deferred_per_s", try await journaledRate(path: scratch.path + "/deferred.sqlite", durability: .deferred, count: batchedCommands))
        report.record("journal_synced_per_s", synced)
        report.record("sqlite_raw_batched_per_s", rawBatched)
        report.record("sqlite_raw_synced_per_s", rawSynced)
        report.record("journal_vs_raw_ratio", batched / rawBatched)
        report.record("replay_per_s", try await replayRate(path: scratch.path + "/replay.sqlite"))
    }

    /// Commands per second through a bus journaling to SQLite, all posted at once and awaited.
    static func journaledRate(path: String, durability: SQLiteJournal.Durability, count: Int) async throws -> Double {
        let journal = try SQLiteJournal(path: path, durability: durability)
        let bus = CommandBus(configuration: .init(journal: journal))
        bus.register(PingHandler())
        let start = ContinuousClock.now
        let tickets = (0..<count).map { bus.post(Ping(value: $0)) }
        for ticket in tickets { _ = try await ticket.result }
        try await journal.flush()
        return Double(count) / seconds(ContinuousClock.now - start)
    }

    /// Rows per second inserted straight into the journal's table, in WAL mode with synchronous=FULL.
    static func rawInsertRate(path: String, count: Int, rowsPerTransaction: Int) throws -> Double {
        let (total, _) = try rawInserts(path: path, count: count, rowsPerTransaction: rowsPerTransaction)
        return Double(count) / seconds(total)
    }

    /// Microseconds (p50) for one synced SQLite transaction that inserts one journal row: what a
    /// durable write costs through SQLite's WAL, beside the bare `fsync` of the server figures.
    static func sqliteCommitLatency(directory: String) throws -> Double {
        let path = directory + "/commit-probe.sqlite"
        defer { for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) } }
        _ = try rawInserts(path: path, count: 30, rowsPerTransaction: 1)
        return try rawInserts(path: path, count: 300, rowsPerTransaction: 1).transactions.percentile(50) / 1_000
    }

    /// Inserts `count` rows straight into the journal's table, `rowsPerTransaction` to a
    /// transaction, in WAL mode with synchronous=FULL. Returns the time the inserts took (opening
    /// and preparing left out) and each transaction's time.
    static func rawInserts(path: String, count: Int, rowsPerTransaction: Int) throws -> (total: Duration, transactions: LatencySampler) {
        // The journal creates the same file layout; close it and write rows of the same size directly.
        _ = try SQLiteJournal(path: path, durability: .synced)
        var database: OpaquePointer?
        guard sqlite3_open_v2(path, &database, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK else { throw BenchmarkFailure("cannot open \(path)") }
        defer { sqlite3_close_v2(database) }
        sqlite3_exec(database, "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL", nil, nil, nil)
        var insert: OpaquePointer?
        sqlite3_prepare_v2(database, """
            INSERT INTO commands (id, name, correlation_id, created_at, payload, state, accepted_at, updated_at, owner)
            VALUES (?1, 'ping', ?1, ?2, ?3, 'pending', ?2, ?2, '1:1')
            """, -1, &insert, nil)
        defer { sqlite3_finalize(insert) }
        let payload = Array(#"{"value":1}"#.utf8)
        var transactions = LatencySampler(capacity: count / rowsPerTransaction + 1)
        let start = ContinuousClock.now
        var transactionStart = start
        for index in 0..<count {
            if index % rowsPerTransaction == 0 {
                transactionStart = ContinuousClock.now
                sqlite3_exec(database, "BEGIN IMMEDIATE", nil, nil, nil)
            }
            let id = CommandID.text(CommandID.make())
            sqlite3_bind_text(insert, 1, id, -1, unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self))
            sqlite3_bind_double(insert, 2, Date().timeIntervalSince1970)
            sqlite3_bind_blob(insert, 3, payload, Int32(payload.count), nil)
            guard sqlite3_step(insert) == SQLITE_DONE else { throw BenchmarkFailure("raw insert failed") }
            sqlite3_reset(insert)
            if (index + 1) % rowsPerTransaction == 0 || index == count - 1 {
                guard sqlite3_exec(database, "COMMIT", nil, nil, nil) == SQLITE_OK else { throw BenchmarkFailure("raw commit failed") }
                transactions.record(ContinuousClock.now - transactionStart)
            }
        }
        return (ContinuousClock.now - start, transactions)
    }

    /// Entries per second replayed from a journal of a million succeeded commands.
    static func replayRate(path: String) async throws -> Double {
        try makeSucceededJournal(path: path, entries: replayEntries)
        let journal = try SQLiteJournal(path: path)
        let bus = CommandBus()
        bus.register(PingHandler())
        let start = ContinuousClock.now
        let replayed = try await JournalReplayer(bus: bus, journal: journal).replay()
        guard replayed.replayed == replayEntries else { throw BenchmarkFailure("replayed \(replayed.replayed) of \(replayEntries)") }
        return Double(replayEntries) / seconds(ContinuousClock.now - start)
    }

    /// Writes a journal of `entries` succeeded pings at `path`, each as the journal writes it:
    /// the accepted command, and its ending beside it.
    static func makeSucceededJournal(path: String, entries: Int) throws {
        _ = try SQLiteJournal(path: path, durability: .synced)
        var database: OpaquePointer?
        sqlite3_open_v2(path, &database, SQLITE_OPEN_READWRITE, nil)
        sqlite3_exec(database, "PRAGMA journal_mode = WAL; PRAGMA synchronous = OFF; BEGIN", nil, nil, nil)
        var insert: OpaquePointer?, ending: OpaquePointer?
        sqlite3_prepare_v2(database, """
            INSERT INTO commands (id, name, correlation_id, created_at, payload, state, accepted_at, updated_at)
            VALUES (?1, 'ping', ?1, ?2, ?3, 'pending', ?2, ?2)
            """, -1, &insert, nil)
        sqlite3_prepare_v2(database, """
            INSERT INTO endings (seq, state, attempts, result, finished_at, updated_at) VALUES (?1, 'succeeded', 1, ?2, ?3, ?3)
            """, -1, &ending, nil)
        let payload = Array(#"{"value":1}"#.utf8)
        let now = Date().timeIntervalSince1970
        for _ in 0..<entries {
            sqlite3_bind_text(insert, 1, CommandID.text(CommandID.make()), -1, unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self))
            sqlite3_bind_double(insert, 2, now)
            sqlite3_bind_blob(insert, 3, payload, Int32(payload.count), nil)
            sqlite3_step(insert)
            sqlite3_reset(insert)
            sqlite3_bind_int64(ending, 1, sqlite3_last_insert_rowid(database))
            sqlite3_bind_blob(ending, 2, payload, Int32(payload.count), nil)
            sqlite3_bind_double(ending, 3, now)
            sqlite3_step(ending)
            sqlite3_reset(ending)
        }
        sqlite3_finalize(insert)
        sqlite3_finalize(ending)
        sqlite3_exec(database, "COMMIT", nil, nil, nil)
        sqlite3_close_v2(database)
    }
}
