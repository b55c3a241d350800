#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The handler chosen for a command, with the payload in the form that handler takes.
struct HandlerAssignment: Sendable {
    let entry: RouteEntry
    let prepared: CommandPayload
}

extension CommandContext {
    /// The body of a command's task: wait for slots, run the handler through the middleware, wait for children.
    func run() async -> Outcome {
        guard let assignment else { return await outcome(markingObserved: false) }
        let entry = assignment.entry
        let busSlot = parent == nil ? bus.busLimiter : nil
        var held: [ConcurrencyLimiter] = []
        defer { for limiter in held { limiter.release() } }
        do {
            if let busSlot {
                try await busSlot.acquire()
                held.append(busSlot)
            }
            if let handlerSlot = entry.limiter {
                try await handlerSlot.acquire()
                held.append(handlerSlot)
            }
            try Task.checkCancellation()
            let middleware = bus.configuration.middleware
            guard markRunning(countingAttempt: middleware.isEmpty) else { return await outcome(markingObserved: false) }
            let output = if middleware.isEmpty {
                try await entry.box.handle(assignment.prepared, context: self)
            } else {
                try await MiddlewarePipeline(middleware: middleware, box: entry.box, prepared: assignment.prepared).run(self)
            }
            try await awaitChildren()
            return finish(.success(output), as: .succeeded)
        } catch {
            let name = envelope.commandName
            if isCancelRequested || error is CancellationError {
                return finish(.failure(.cancelled(name)), as: .cancelled)
            } else if let busError = error as? CommandBusError {
                return finish(.failure(busError), as: .failed)
            } else {
                return finish(.failure(.handlerFailed(name, cause: error)), as: .failed)
            }
        }
    }
}
