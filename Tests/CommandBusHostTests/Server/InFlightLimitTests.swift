import CommandBus
@testable import CommandBusServer
import Synchronization
import Testing

/// The bound on the commands a server holds: whoever waits for room is called once, when a
/// quarter of them have ended, and not before.
struct InFlightLimitTests {
    @Test func aWaiterIsCalledOnceWhenAQuarterHaveEnded() {
        let limit = InFlightLimit(maximum: 8)
        #expect(limit.resumeAt == 6)
        let envelope = CommandEnvelope(commandName: "c")
        let calls = Mutex(0)
        for _ in 0..<7 { limit.commandAccepted(envelope) }
        #expect(!limit.isReached { calls.withLock { $0 += 1 } }, "7 of 8: room left")
        limit.commandAccepted(envelope)
        #expect(limit.isReached { calls.withLock { $0 += 1 } })
        #expect(limit.isReached { calls.withLock { $0 += 1 } })
        limit.commandFinished(envelope, state: .succeeded, error: nil)
        #expect(calls.withLock { $0 } == 0, "7 in flight: not yet")
        limit.commandFinished(envelope, state: .succeeded, error: nil)
        #expect(calls.withLock { $0 } == 2, "6 in flight: both waiters, once each")
        for _ in 0..<6 { limit.commandFinished(envelope, state: .failed, error: nil) }
        #expect(calls.withLock { $0 } == 2 && limit.inFlight == 0 && limit.timesReached == 2)
    }

    @Test func aBoundBelowOneIsOneAndItsWaiterIsCalledWhenItEnds() {
        let limit = InFlightLimit(maximum: 0)
        #expect(limit.maximum == 1 && limit.resumeAt == 0)
        let envelope = CommandEnvelope(commandName: "c")
        let called = Mutex(false)
        limit.commandAccepted(envelope)
        #expect(limit.isReached { called.withLock { $0 = true } })
        limit.commandFinished(envelope, state: .succeeded, error: nil)
        #expect(called.withLock { $0 })
    }
}
