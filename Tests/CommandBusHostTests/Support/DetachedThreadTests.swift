import CommandBusSupport
import Foundation
import Synchronization
import Testing

/// A thread of our own carries its name where the system shows threads, so an operator's
/// `top -H` or `perf` tells the claimer from the finisher from Swift's pool.
struct DetachedThreadTests {
    @Test func aThreadIsNamedAsTheSystemShowsIt() async throws {
        let seen = Mutex<[String]>([])
        for name in ["bus-claim", "a-name-longer-than-fifteen-bytes", "café-thread-nämé"] {
            DetachedThread.start(named: name) {
                let comm = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "unreadable"
                seen.withLock { $0.append(comm.trimmingCharacters(in: .newlines)) }
            }
        }
        #expect(await waitUntil(.seconds(10)) { seen.withLock { $0.count } == 3 })
        #expect(Set(seen.withLock { $0 }) == ["bus-claim", "a-name-longer-t", "café-thread-n"], "\(seen.withLock { $0 })")
        #expect(DetachedThread.threadName("café-thread-nämé").utf8.count <= 15)
    }
}
