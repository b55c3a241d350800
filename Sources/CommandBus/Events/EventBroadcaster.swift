import Synchronization

/// Fans events out to subscribers' async streams.
///
/// Publishing costs one atomic load when nobody listens, so lifecycle events
/// are free on the hot path of an unobserved bus.
final class EventBroadcaster: Sendable {
    private struct Subscriber: Sendable {
        let id: Int
        let filter: EventFilter
        let continuation: AsyncStream<CommandEvent>.Continuation
    }

    /// An array, not a dictionary by id: ``publish(_:)`` takes it as it is (one retain), where it
    /// copied a dictionary's values into a new array for every event.
    private let subscribers = Mutex<[Subscriber]>([])
    private let nextID = Atomic<Int>(0)
    private let count = Atomic<Int>(0)
    /// How many subscribers take more than log lines.
    private let broadCount = Atomic<Int>(0)

    /// Whether anyone is listening; check before building an event.
    var hasSubscribers: Bool { count.load(ordering: .relaxed) > 0 }
    /// Whether anyone listens for more than log lines; check before building any other event.
    var hasBroadSubscribers: Bool { broadCount.load(ordering: .relaxed) > 0 }

    func subscribe(
        _ filter: EventFilter,
        bufferingPolicy: AsyncStream<CommandEvent>.Continuation.BufferingPolicy
    ) -> AsyncStream<CommandEvent> {
        let (stream, continuation) = AsyncStream<CommandEvent>.makeStream(bufferingPolicy: bufferingPolicy)
        let id = nextID.add(1, ordering: .relaxed).newValue
        subscribers.withLock { $0.append(Subscriber(id: id, filter: filter, continuation: continuation)) }
        count.add(1, ordering: .relaxed)
        let broad = filter != .logs
        if broad { broadCount.add(1, ordering: .relaxed) }
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            let removed = self.subscribers.withLock { subscribers -> Bool in
                guard let index = subscribers.firstIndex(where: { $0.id == id }) else { return false }
                subscribers.remove(at: index)
                return true
            }
            guard removed else { return }
            self.count.subtract(1, ordering: .relaxed)
            if broad { self.broadCount.subtract(1, ordering: .relaxed) }
        }
        return stream
    }

    func publish(_ event: CommandEvent) {
        let targets = subscribers.withLock { $0 }
        for subscriber in targets where subscriber.filter.matches(event) {
            subscriber.continuation.yield(event)
        }
    }

    /// Ends every subscriber's stream.
    func finishAll() {
        let targets = subscribers.withLock { all in
            defer { all.removeAll() }
            return all
        }
        count.store(0, ordering: .relaxed)
        broadCount.store(0, ordering: .relaxed)
        for subscriber in targets { subscriber.continuation.finish() }
    }
}
