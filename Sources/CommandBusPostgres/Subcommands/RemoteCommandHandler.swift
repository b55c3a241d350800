import CommandBus
import CommandBusSupport
import Synchronization
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A host bus's fallback: a subcommand no plugin here takes goes through the shared bus, with
/// its parent's id and correlation, to a host that handles it; the parent waits for its result.
/// Cancelling the parent cancels it there. The bus is written by a ``SubcommandPoster``, off the
/// thread the handler runs on.
package struct RemoteCommandHandler: DynamicCommandHandler {
    package let commandName = "*"
    private let poster: SubcommandPoster
    private let waiter: ResultWaiter

    package init(poster: SubcommandPoster, waiter: ResultWaiter) {
        self.poster = poster
        self.waiter = waiter
    }

    package func handle(payload: Data, context: CommandContext) async throws -> Data {
        let submission = BusSubmission(child: context.envelope, payload: payload)
        if let reason = submission.unstorableReason {
            throw CommandBusError(code: .handlerFailed, message: "subcommand '\(submission.name)' could not reach the bus: \(reason)")
        }
        let row = try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<BusCommandRow, any Error>) in
                // Watched before it is submitted, so its end is never missed; resumed once, by
                // whichever comes first of its end and a failure to submit it.
                let resumed = Atomic<Bool>(false)
                waiter.watch(submission.id) { row in
                    guard !resumed.exchange(true, ordering: .acquiringAndReleasing) else { return }
                    continuation.resume(returning: row)
                }
                poster.submit(submission) { error in
                    guard let error else { return }
                    waiter.forget(submission.id)
                    guard !resumed.exchange(true, ordering: .acquiringAndReleasing) else { return }
                    continuation.resume(throwing: CommandBusError(
                        code: .handlerFailed, message: "subcommand '\(submission.name)' could not reach the bus: \(error.message)", cause: error
                    ))
                }
            }
        } onCancel: {
            poster.cancel(submission.id)
        }
        return try row.outcome()
    }
}

extension BusCommandRow {
    /// The result, or the bus error a local run would have thrown.
    package func outcome() throws(CommandBusError) -> Data {
        if state == .succeeded { return result ?? Data("null".utf8) }
        let message = errorMessage ?? "command '\(name)' ended \(state.rawValue)"
        let code = errorCode.flatMap(CommandBusError.Code.init(name:)) ?? .handlerFailed
        throw CommandBusError(code: code, message: message)
    }
}

/// A few connections shared by tasks: each use takes one, so no connection is used by two threads at once.
package final class PGConnectionPool: Sendable {
    private let url: String
    private let idle = Mutex<[PGConnection]>([])

    package init(url: String) { self.url = url }

    /// Runs `body` on an idle connection (a new one if none is idle); a broken one is dropped.
    package func with<T>(_ body: (PGConnection) throws(PGError) -> T) throws(PGError) -> T {
        let taken = idle.withLock { $0.popLast() }
        let connection: PGConnection
        if let taken, taken.isStillOpen { connection = taken } else { connection = try PGConnection(url: url) }
        do throws(PGError) {
            let value = try body(connection)
            idle.withLock { $0.append(connection) }
            return value
        } catch {
            if connection.isHealthy { idle.withLock { $0.append(connection) } }
            throw error
        }
    }
}
