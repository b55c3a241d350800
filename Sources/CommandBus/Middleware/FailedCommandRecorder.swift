#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// A command that failed for good: its envelope, its error and how many attempts it took.
public struct FailedCommand: Sendable {
    /// The failed command's envelope.
    public let envelope: CommandEnvelope
    /// Why it failed.
    public let error: CommandBusError
    /// How many times its handler was called.
    public let attempts: Int
    /// When it failed.
    public let failedAt: Date
}

/// A dead-letter list: records every command whose handler failed, after any retries.
///
/// Put it first in the middleware list so that it sees the final error and the attempt count.
/// It keeps the most recent `capacity` failures.
/// ```swift
/// let deadLetters = FailedCommandRecorder()
/// let bus = CommandBus(configuration: .init(middleware: [deadLetters, RetryMiddleware()]))
/// // later: deadLetters.failures
/// ```
public final class FailedCommandRecorder: CommandMiddleware {
    /// The most failures kept; older ones are dropped first.
    public let capacity: Int
    private let recorded = Mutex<[FailedCommand]>([])

    /// Creates an empty recorder that keeps up to `capacity` failures.
    public init(capacity: Int = 10_000) {
        precondition(capacity > 0, "capacity must be at least 1")
        self.capacity = capacity
    }

    /// The failures recorded so far, oldest first.
    public var failures: [FailedCommand] { recorded.withLock { $0 } }

    /// Forgets every recorded failure.
    public func removeAll() { recorded.withLock { $0.removeAll() } }

    /// Passes the command on and records it if it fails (cancellation is not a failure).
    public func intercept(
        _ context: CommandContext,
        next: () async throws -> CommandOutput
    ) async throws -> CommandOutput {
        do {
            return try await next()
        } catch {
            if !(error is CancellationError), !context.isCancelled {
                let busError = error as? CommandBusError
                    ?? .handlerFailed(context.envelope.commandName, cause: error)
                let failure = FailedCommand(
                    envelope: context.envelope, error: busError, attempts: context.attempts, failedAt: Date()
                )
                recorded.withLock { list in
                    list.append(failure)
                    if list.count > capacity { list.removeFirst(list.count - capacity) }
                }
            }
            throw error
        }
    }
}
