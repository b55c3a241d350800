import CommandBusSupport
import CommandBusHost
import CommandBus
import Synchronization
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One server log line per command that ends, at `info`: name, id, state, duration, the error
/// and the trace id.
///
///     cmdbus: info: fixture.fail 01A2…C257 failed in 0.4 ms: command 'fixture.fail' failed … trace=4bf92f…
final class CommandLogObserver: CommandObserver {
    private let log: ServerLog

    init(log: ServerLog) {
        self.log = log
    }

    func commandFinished(_ envelope: CommandEnvelope, state: CommandState, error: CommandBusError?, after duration: Duration) {
        let level = LogLevel.info
        guard level >= log.threshold else { return }
        let milliseconds = (duration.seconds * 10_000).rounded() / 10
        var line = "\(quotedLine(envelope.commandName)) \(CommandID.text(envelope.id)) \(state.rawValue) in \(milliseconds) ms"
        if let error { line += ": \(quotedLine(error.message))" }
        if let trace = TraceContext.traceID(in: envelope.metadata) { line += " trace=\(trace)" }
        log(level, line)
    }
}
