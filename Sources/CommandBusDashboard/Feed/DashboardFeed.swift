import CommandBus
import Synchronization
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The dashboard's live updates as Server-Sent Events: once a second, one `tick` message for
/// every open page (counts, in flight, the second's outcomes, the commands that ended).
///
/// The message is built once and handed to every subscriber, so a thousand open pages cost a
/// thousand small writes a second and nothing on the bus's own path.
package final class DashboardFeed: Sendable {
    private let subscribers = Mutex<(next: UInt64, all: [UInt64: AsyncStream<[UInt8]>.Continuation])>((0, [:]))
    private let ticker = Mutex<Task<Void, Never>?>(nil)
    private let message: @Sendable () -> JSONValue

    /// A feed that sends what `message` returns, each second.
    package init(message: @escaping @Sendable () -> JSONValue) {
        self.message = message
    }

    /// Pages subscribed now.
    package var subscriberCount: Int { subscribers.withLock { $0.all.count } }

    /// A new subscriber's stream: a comment line at once (so the page knows it is connected), then ticks.
    package func subscribe() -> AsyncStream<[UInt8]> {
        let (stream, continuation) = AsyncStream<[UInt8]>.makeStream(bufferingPolicy: .bufferingNewest(8))
        let id = subscribers.withLock { subscribers in
            defer { subscribers.next += 1 }
            subscribers.all[subscribers.next] = continuation
            return subscribers.next
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.all.removeValue(forKey: id) }
        }
        continuation.yield(Array(": connected\nretry: 2000\n\n".utf8))
        startTicking()
        return stream
    }

    private func startTicking() {
        ticker.withLock { ticker in
            guard ticker == nil else { return }
            ticker = Task { [weak self] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(1))
                    guard let self else { return }
                    self.broadcast()
                }
            }
        }
    }

    /// Sends one tick to every subscriber now.
    package func broadcast() {
        let targets = subscribers.withLock { Array($0.all.values) }
        guard !targets.isEmpty else { return }
        let bytes = Array(("event: tick\ndata: " + message().text + "\n\n").utf8)
        for continuation in targets { continuation.yield(bytes) }
    }

    /// Stops the ticks and ends every stream.
    package func stop() {
        ticker.withLock { $0?.cancel() }
        for continuation in subscribers.withLock({ Array($0.all.values) }) { continuation.finish() }
    }
}
