import CCommandBusABI
import CommandBus
import CommandBusSupport
import Glibc
import Synchronization
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Puts one command of an isolated plugin on the bus: each call crosses to the worker process.
///
/// Routing never waits for the worker: ``canHandle(payload:)`` says yes for the command the
/// worker advertised, and the plugin's own `can_handle()` runs in the worker as the first step of
/// `handle`, in the same round trip. If it says no, `handle` throws ``HandlerDeclined`` and the
/// bus passes the command to the next handler in the chain. ``wouldHandle(payload:)`` asks the
/// worker for real, for `cmdbus can`.
package struct IsolatedCommandHandler: DynamicCommandHandler {
    package let plugin: LoadedPlugin
    package let worker: IsolatedPlugin
    package let command: PluginDescriptor.Command
    /// How long a caller keeps checking for a quick answer before it suspends (see ``CallAnswer``).
    /// How long `can_handle()` may take in the worker when asked on its own.
    package static let canHandleDeadline: Duration = .seconds(5)

    package init(plugin: LoadedPlugin, worker: IsolatedPlugin, command: PluginDescriptor.Command) {
        self.plugin = plugin
        self.worker = worker
        self.command = command
    }

    package var commandName: String { command.name }
    package var maxConcurrency: Int? { command.maxConcurrency }
    package var isJournaled: Bool { command.isJournaled }

    package func canHandle(payload: Data) throws -> Bool { true }

    package func wouldHandle(payload: Data) async throws -> Bool {
        var asksAgain = 0
        while true {
            // A plugin taken off the bus whose worker has stopped would not take it: the rest of
            // the chain is asked, where its replacement stands.
            guard let running = try await runningWorkerUnlessRetired() else { return false }
            let (status, body) = await ask(payload: payload, of: running)
            if status >= 0 { return status != 0 }
            if status == IsolatedPlugin.retiredStatus { return false }
            let message = String(decoding: body, as: UTF8.self)
            // Its worker ended for another call's sake: the next one is asked, as a command would run again.
            if status == IsolatedPlugin.stoppedForAnotherStatus, asksAgain < Self.runsAgainAfterAnotherCallsEnd, !Task.isCancelled {
                asksAgain += 1
                continue
            }
            throw PluginErrors.error(
                plugin: plugin, command: command.name,
                status: status == IsolatedPlugin.crashedStatus || status == IsolatedPlugin.stoppedForAnotherStatus ? status : -status,
                message: message.isEmpty ? "the plugin refused the payload" : message
            )
        }
    }

    /// One `can_handle()` call in the worker, given up on after ``canHandleDeadline``.
    private func ask(payload: Data, of running: IsolatedPlugin.RunningWorker) async -> CallAnswer.Value {
        let answer = CallAnswer()
        let id = worker.call(.canHandle, on: running, index: command.index, payload: payload, context: nil, answer: answer)
        // A timer, not a thread waiting: a can_handle() that hangs is given up on.
        let deadline = Task { [worker] in
            try? await Task.sleep(for: Self.canHandleDeadline)
            worker.abandon(id, reason: "did not answer can_handle() within \(Self.canHandleDeadline.spoken)")
        }
        defer { deadline.cancel() }
        return await worker.answer(to: answer, from: running)
    }

    /// How many times a command runs again here when its worker ended for another call's sake
    /// (another command's code crashed it, or the host stopped it for another command's
    /// cancellation or deadline) before that failure is its own, retryable, answer.
    package static let runsAgainAfterAnotherCallsEnd = 2

    package func handle(payload: Data, context: CommandContext) async throws -> Data {
        var runsAgain = 0
        while true {
            let (status, body) = try await call(payload: payload, context: context)
            // Declined by the plugin, or never made since the plugin was taken off the bus meanwhile:
            // either way the bus asks the chain again (where a replacement may have taken its place).
            if status == Int32(CMDBUS_DECLINED.rawValue) || status == IsolatedPlugin.retiredStatus { throw HandlerDeclined() }
            if status == Int32(CMDBUS_OK.rawValue) { return try PluginErrors.checkedResult(Data(body), plugin: plugin, command: command.name) }
            let message = String(decoding: body, as: UTF8.self)
            // It did nothing to end its worker: it runs again on the next one, as it would have had
            // it come a moment later, unless it was cancelled or ran out of time meanwhile.
            if status == IsolatedPlugin.stoppedForAnotherStatus, runsAgain < Self.runsAgainAfterAnotherCallsEnd, !context.isCancelled, !Task.isCancelled {
                runsAgain += 1
                worker.countRunAgain()
                context.log(.warning, "\(message); running \(command.name) again on a new worker (\(runsAgain) of \(Self.runsAgainAfterAnotherCallsEnd))")
                continue
            }
            throw PluginErrors.error(plugin: plugin, command: command.name, status: status, message: message)
        }
    }

    /// One call of the plugin's handler in its worker: the status and body it answered.
    private func call(payload: Data, context: CommandContext) async throws -> CallAnswer.Value {
        guard let running = try await runningWorkerUnlessRetired() else { return (IsolatedPlugin.retiredStatus, []) }
        let call = Mutex(CallState.notSent)
        let answer = CallAnswer()
        return await withTaskCancellationHandler { () async -> CallAnswer.Value in
            // The call is made under the lock that a cancellation takes too, so a cancellation
            // either finds the call's id or stops it being sent: it is never lost in between.
            let cancelledFirst = call.withLock { state -> Bool in
                guard case .notSent = state else { return true }
                state = .sent(worker.call(.handle, on: running, index: command.index, payload: payload, context: context, answer: answer))
                return false
            }
            if cancelledFirst { return (Int32(CMDBUS_CANCELLED.rawValue), [UInt8]()) }
            return await worker.answer(to: answer, from: running)
        } onCancel: {
            let sent = call.withLock { state -> UInt64? in
                if case .sent(let id) = state { return id }
                state = .cancelledBeforeSending
                return nil
            }
            if let sent { worker.cancel(sent) }
        }
    }

    /// Where a call is, for a cancellation that may come at any moment.
    private enum CallState {
        case notSent
        case cancelledBeforeSending
        case sent(UInt64)
    }

    /// The running worker, or nil if the plugin was taken off the bus and none runs.
    private func runningWorkerUnlessRetired() async throws(CommandBusError) -> IsolatedPlugin.RunningWorker? {
        switch await worker.ensureRunning() {
        case .success(let running): return running
        case .failure where worker.isRetired: return nil
        case .failure(let failure):
            // Quarantined, or its worker would not start: nothing the command did, so it may run
            // again (where another host serves it, or once the file is replaced).
            throw PluginErrors.error(plugin: plugin, command: command.name, status: IsolatedPlugin.stoppedForAnotherStatus, message: failure.reason)
        }
    }
}
