import CommandBus
import CommandBusSQLite
import Foundation

/// Fixed workloads for the instruction-count mode (`scripts/bench.sh --instructions`).
///
/// Each runs one in-process path a given number of times and measures nothing itself:
/// the script runs it under `valgrind --tool=callgrind` at two counts and divides the difference
/// in instructions by the difference in count, which leaves out start-up and set-up.
/// Instruction counts do not move with the machine's load, so a change can be judged by them.
enum CountedWorkloads {
    /// The workloads by name, in the order the script reports them.
    static let all: [(name: String, run: @Sendable (Int) async throws -> Void)] = [
        ("baseline", baseline),
        ("send", send),
        ("dynamic_send", dynamicSend),
        ("post", post),
        ("journaled_post", journaledPost),
        ("sqlite_raw_insert", sqliteRawInsert),
        ("replay_entry", replayEntry),
    ]

    /// A bare `Task { … }.value` per operation: what `send` is compared with.
    static func baseline(_ count: Int) async {
        var total = 0
        for i in 0..<count { total &+= await Task { await trivialWork(Ping(value: i)) }.value }
        precondition(total != -1)
    }

    /// A typed `send`, awaited one after another.
    static func send(_ count: Int) async throws {
        let bus = CommandBus()
        bus.register(PingHandler())
        for i in 0..<count { _ = try await bus.send(Ping(value: i)) }
    }

    /// A `send` by name with JSON bytes, as the socket and plugins use.
    static func dynamicSend(_ count: Int) async throws {
        let bus = CommandBus()
        bus.register(PingHandler())
        let payload = Data(#"{"value":1}"#.utf8)
        for _ in 0..<count { _ = try await bus.send(name: Ping.name, payload: payload) }
    }

    /// Every command posted first, then every ticket awaited.
    static func post(_ count: Int) async throws {
        let bus = CommandBus()
        bus.register(PingHandler())
        let tickets = (0..<count).map { bus.post(Ping(value: $0)) }
        for ticket in tickets { _ = try await ticket.result }
    }

    /// Posts through a journal in batched mode, flushed at the end.
    static func journaledPost(_ count: Int) async throws {
        let scratch = try Scratch("counted-journal")
        defer { scratch.remove() }
        let journal = try SQLiteJournal(path: scratch.path + "/journal.sqlite", durability: .batched(maxDelay: .zero))
        let bus = CommandBus(configuration: .init(journal: journal))
        bus.register(PingHandler())
        let tickets = (0..<count).map { bus.post(Ping(value: $0)) }
        for ticket in tickets { _ = try await ticket.result }
        try await journal.flush()
    }

    /// One journal of a thousand succeeded entries, written through the journal, replayed
    /// `count / 1000` times (at least once): what `replay_per_s` measures, per entry read and run
    /// again. A thousand entries, so the query's preparation (about 0.3M instructions, for the
    /// view's join) weighs per entry about as little as in a real replay's pages of 10,000.
    static func replayEntry(_ count: Int) async throws {
        let scratch = try Scratch("counted-replay")
        defer { scratch.remove() }
        let journal = try SQLiteJournal(path: scratch.path + "/journal.sqlite")
        let payload = Data(#"{"value":1}"#.utf8)
        for _ in 0..<1_000 {
            let envelope = CommandEnvelope(commandName: Ping.name)
            try await journal.accept(envelope, payload: payload)
            try await journal.update(JournalUpdate(id: envelope.id, state: .succeeded, attempts: 1, result: payload), waitUntilDurable: false)
        }
        try await journal.flush()
        let bus = CommandBus()
        bus.register(PingHandler())
        for _ in 0..<max(1, count / 1_000) {
            let report = try await JournalReplayer(bus: bus, journal: journal).replay()
            guard report.replayed == 1_000 else { throw BenchmarkFailure("replayed \(report.replayed) of 1000") }
        }
    }

    /// Rows of the same shape inserted straight into the journal's table, a thousand per
    /// transaction: what `journaled_post` is compared with (`journal_vs_raw_ratio`, in instructions).
    static func sqliteRawInsert(_ count: Int) async throws {
        let scratch = try Scratch("counted-raw")
        defer { scratch.remove() }
        _ = try JournalBenchmarks.rawInsertRate(path: scratch.path + "/raw.sqlite", count: count, rowsPerTransaction: 1_000)
    }
}
