import CommandBus
import CommandBusDashboard
import Synchronization
import Testing

/// The dashboard reads the shared bus's status once for every page and scrape that asks within
/// a second, one read at a time, and anew after an action.
struct SharedBusStatusTests {
    @Test func pagesAskingTogetherShareOneReadAndAnActionForgetsIt() async {
        let reads = Mutex(0)
        let status = SharedBusStatus {
            let count = reads.withLock { count -> Int in count += 1; return count }
            try? await Task.sleep(for: .milliseconds(200))
            return .integer(Int64(count))
        }
        // Ten pages at once: one read, which all of them are given.
        let answers = await withTaskGroup(of: JSONValue?.self) { group in
            for _ in 0..<10 { group.addTask { await status.current() } }
            return await group.reduce(into: [JSONValue?]()) { $0.append($1) }
        }
        #expect(reads.withLock { $0 } == 1 && answers.allSatisfy { $0 == .integer(1) }, "\(answers)")
        // Within the second: the same read, not another.
        #expect(await status.current() == .integer(1) && reads.withLock { $0 } == 1)
        // After an action: read anew at once.
        status.forget()
        #expect(await status.current() == .integer(2) && reads.withLock { $0 } == 2)
        // A read under way when an action comes is not kept after it.
        status.forget()
        async let before = status.current()
        try? await Task.sleep(for: .milliseconds(50))
        status.forget()
        #expect(await before == .integer(3))
        #expect(await status.current() == .integer(4) && reads.withLock { $0 } == 4)
    }

    @Test func aReadOlderThanASecondIsReadAgain() async throws {
        let reads = Mutex(0)
        let status = SharedBusStatus { .integer(Int64(reads.withLock { count -> Int in count += 1; return count })) }
        #expect(await status.current() == .integer(1))
        try await Task.sleep(for: SharedBusStatus.freshFor + .milliseconds(100))
        #expect(await status.current() == .integer(2))
    }
}
