import Synchronization

/// A handler's place on the bus; ``cancel()`` takes the handler off so nothing new routes to it.
///
/// Commands already running in the handler finish normally.
public final class HandlerRegistration: Sendable {
    /// The routing name the handler was registered for.
    public let commandName: String
    /// The priority it was registered with.
    public let priority: Int
    /// In a struct: a closure held as a `Mutex`'s value itself comes back from each access
    /// wrapped in reabstraction thunks, written over the one held (swiftlang/swift#91348).
    private let remove: Mutex<Removal?>

    private struct Removal: Sendable {
        let run: @Sendable () -> Void
    }

    init(commandName: String, priority: Int, remove: @escaping @Sendable () -> Void) {
        self.commandName = commandName
        self.priority = priority
        self.remove = Mutex(Removal(run: remove))
    }

    /// Whether the handler is still registered.
    public var isActive: Bool { remove.withLock { $0 != nil } }

    /// Removes the handler from the bus. Calling it again does nothing.
    public func cancel() {
        let removal = remove.withLock { current -> Removal? in
            defer { current = nil }
            return current
        }
        removal?.run()
    }
}
