/// Retries a handler that throws a retryable error, with exponential backoff and jitter.
///
/// An error is retryable when it adopts ``RetryableError`` (or is a ``CommandBusError``
/// marked retryable). Other errors, and cancellation, pass straight through.
/// ```swift
/// let bus = CommandBus(configuration: .init(middleware: [RetryMiddleware(maxAttempts: 5)]))
/// ```
public struct RetryMiddleware: CommandMiddleware {
    /// The most calls of the handler per command, the first included.
    public var maxAttempts: Int
    /// The delay before the first retry; each further retry doubles it.
    public var initialDelay: Duration
    /// The longest delay between two attempts.
    public var maxDelay: Duration
    /// The share of each delay that is random, from 0 (none) to 1 (all of it).
    public var jitter: Double

    /// Creates a retry policy.
    public init(
        maxAttempts: Int = 3,
        initialDelay: Duration = .milliseconds(50),
        maxDelay: Duration = .seconds(5),
        jitter: Double = 0.5
    ) {
        precondition(maxAttempts >= 1, "maxAttempts must be at least 1")
        self.maxAttempts = maxAttempts
        self.initialDelay = initialDelay
        self.maxDelay = maxDelay
        self.jitter = min(max(jitter, 0), 1)
    }

    /// Whether `error` is worth another attempt.
    public static func isRetryable(_ error: any Error) -> Bool {
        if let busError = error as? CommandBusError { return busError.isRetryable }
        return (error as? any RetryableError)?.isRetryable ?? false
    }

    /// The delay before retry number `retry` (1 for the first retry), before jitter.
    public func backoff(beforeRetry retry: Int) -> Duration {
        let factor = 1 << min(max(retry - 1, 0), 30)
        let delay = initialDelay * factor
        return delay > maxDelay ? maxDelay : delay
    }

    /// Calls `next`, and again after a backoff while it throws a retryable error and attempts remain.
    public func intercept(
        _ context: CommandContext,
        next: () async throws -> CommandOutput
    ) async throws -> CommandOutput {
        var attempt = 1
        while true {
            do {
                return try await next()
            } catch {
                guard attempt < maxAttempts, Self.isRetryable(error), !context.isCancelled else { throw error }
                let delay = backoff(beforeRetry: attempt)
                let randomShare = Double.random(in: 0...jitter)
                try await Task.sleep(for: delay * (1 - randomShare))
                attempt += 1
            }
        }
    }
}
