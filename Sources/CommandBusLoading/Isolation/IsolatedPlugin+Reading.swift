import CommandBusSupport
import CCommandBusABI
import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc

/// What a worker says: its answers, subcommands, events and logs, and its end.
extension IsolatedPlugin {
    /// The watcher thread of one worker (see ``WorkerReader``), until the worker ends.
    func watch(_ worker: RunningWorker) {
        worker.reader.watch(callsOut: { state.withLock { !$0.pending.isEmpty } }) { frame in handle(frame, from: worker) }
        workerDied(worker)
    }

    /// One frame from a worker, on whichever thread read it: answers, subcommands, events and logs.
    func handle(_ frame: WorkerFrame, from worker: RunningWorker) {
        let channel = worker.channel
        switch frame.kind {
        case .complete, .canHandleAnswer:
            let (call, retired) = state.withLock { state in (state.pending.removeValue(forKey: frame.id), state.stopsWhenIdle) }
            call?.answer(frame.status, frame.body)
            if retired { stopIfIdle() }
        case .send:
            forward(frame, channel: channel)
        case .envelope:
            let envelope = state.withLock { $0.pending[frame.parent]?.context?.envelope }
            if let envelope, let json = try? JSONEncoder().encode(envelope) {
                channel.send(.reply, id: frame.id, status: Int32(CMDBUS_OK.rawValue), body: json)
            } else {
                channel.send(.reply, id: frame.id, status: Int32(CMDBUS_FAILED.rawValue), body: "envelope: unknown or completed call".utf8)
            }
        case .emit:
            // An event's payload crosses as JSON: one that is not reaches its readers as null.
            if let problem = PluginEndpoint.eventPayloadProblem(frame.body), !warnedAboutEventPayloads.exchange(true, ordering: .relaxed) {
                log(.warning, PluginEndpoint.eventPayloadWarning(
                    plugin: worker.description.name, file: FileSystem.lastComponent(path), event: frame.name, problem: problem
                ))
            }
            state.withLock { $0.pending[frame.id]?.context }?.emit(frame.name, payload: Data(frame.body))
        case .progress:
            let numbers = String(decoding: frame.body, as: UTF8.self).split(separator: " ").compactMap { Int($0) }
            if numbers.count == 2 { state.withLock { $0.pending[frame.id]?.context }?.progress(done: numbers[0], total: numbers[1]) }
        case .log:
            let level = LogLevel.allCases.indices.contains(Int(frame.status)) ? LogLevel.allCases[Int(frame.status)] : .info
            let message = String(decoding: frame.body, as: UTF8.self)
            if let context = state.withLock({ $0.pending[frame.id]?.context }) {
                context.log(level, message)
            } else {
                log(level, message)
            }
        default:
            break
        }
    }

    /// Runs a subcommand the worker sent for call `frame.parent` on the bus, and writes its answer back.
    private func forward(_ frame: WorkerFrame, channel: FrameChannel) {
        guard let context = state.withLock({ $0.pending[frame.parent]?.context }) else {
            channel.send(WorkerFrame(kind: .reply, id: frame.id, status: Int32(CMDBUS_FAILED.rawValue), body: Array("send: unknown parent call".utf8)))
            return
        }
        let name = frame.name, payload = Data(frame.body), id = frame.id
        Task {
            do throws(CommandBusError) {
                let result = try await context.send(name: name, payload: payload)
                channel.send(WorkerFrame(kind: .reply, id: id, status: Int32(CMDBUS_OK.rawValue), body: Array(result)))
            } catch {
                channel.send(WorkerFrame(kind: .reply, id: id, status: ABIStatus.status(for: error), body: Array(error.message.utf8)))
            }
        }
    }

    /// Fails every call in flight with the way the worker ended, and counts the crash. The calls
    /// that did nothing to end it (the host stopped it for another call, or another call's
    /// code crashed it) fail as ones that may run again (``stoppedForAnotherStatus``).
    private func workerDied(_ worker: RunningWorker) {
        let pid = worker.pid
        let how = WorkerLauncher.ending(of: pid)
        let culprit = worker.takeCulprit()
        let now = ContinuousClock.now
        let ((orphans, end, kill), quarantined) = state.withLock { state in
            quarantining(&state) { state -> ([UInt64: Pending], WorkerLifecycle<RunningWorker>.Ending, Kill?) in
                let orphans = state.pending.filter { $0.value.pid == pid }
                for id in orphans.keys { state.pending[id] = nil }
                return (orphans, state.lifecycle.ended(pid: pid, now: now, how: how), state.kills.removeValue(forKey: pid))
            }
        }
        var toRunAgain = 0
        for (id, call) in orphans {
            if !call.reachedWorker {
                toRunAgain += 1
                call.answer(Self.stoppedForAnotherStatus, Array("its worker is gone".utf8))
                continue
            }
            switch end {
            case .killedOnPurpose:
                let reason = kill?.reason ?? "its worker was stopped by the host"
                let runsAgain = kill?.mayRunAgain(id) == true
                if runsAgain { toRunAgain += 1 }
                call.answer(runsAgain ? Self.stoppedForAnotherStatus : Self.crashedStatus, Array(reason.utf8))
            case .crashed:
                if let culprit, culprit != id {
                    toRunAgain += 1
                    call.answer(Self.stoppedForAnotherStatus, Array("its worker \(how) while running another command".utf8))
                } else {
                    call.answer(Self.crashedStatus, Array("its worker \(how)".utf8))
                }
            }
        }
        if case .crashed(let quarantine) = end {
            let again = toRunAgain > 0 ? ", \(toRunAgain) of them as ones to run again" : ""
            log(.warning, "worker \(pid) for \(FileSystem.lastComponent(path)) \(how); \(counted(orphans.count, "call")) in flight failed\(again)")
            if let quarantine { log(.warning, "\(FileSystem.lastComponent(path)) \(quarantine)") }
        }
        quarantined?()
    }
}
