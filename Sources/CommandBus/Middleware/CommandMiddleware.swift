/// Wraps every dispatch: sees the envelope, may short-circuit, and sees the result or error and the duration.
///
/// Middleware runs in the command's task, outermost first, around each call of the handler.
/// ```swift
/// struct Timing: CommandMiddleware {
///     func intercept(_ context: CommandContext, next: () async throws -> CommandOutput) async throws -> CommandOutput {
///         let start = ContinuousClock.now
///         defer { print(context.envelope.commandName, ContinuousClock.now - start) }
///         return try await next()
///     }
/// }
/// ```
public protocol CommandMiddleware: Sendable {
    /// Handles one dispatch: call `next` to go on to the handler, or return an output without calling it.
    /// - Parameters:
    ///   - context: The command's context; `context.envelope` says which command this is.
    ///   - next: The rest of the pipeline. It may be called more than once (a retry).
    /// - Returns: The command's output.
    func intercept(
        _ context: CommandContext,
        next: () async throws -> CommandOutput
    ) async throws -> CommandOutput
}

/// The middleware list around one handler call.
struct MiddlewarePipeline: Sendable {
    let middleware: [any CommandMiddleware]
    let assignment: HandlerAssignment

    func run(_ context: CommandContext, from index: Int = 0) async throws -> CommandOutput {
        guard index < middleware.count else {
            context.recordAttempt()
            return try await context.handleInChain(assignment)
        }
        return try await middleware[index].intercept(context) {
            try await run(context, from: index + 1)
        }
    }
}
