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
/// and the trace id. A command the journal could not take is logged at `warning`: the host, not
/// the command, needs someone (a full disk, say).
///
///     cmdbus: info: fixture.fail 01A2…C257 failed in 0.4 ms: command 'fixture.fail' failed … trace=4bf92f…
final class CommandLogObserver: CommandObserver {
    private let log: ServerLog

    init(log: ServerLog) {
        self.log = log
    }

    func commandFinished(_ envelope: CommandEnvelope, state: CommandState, error: CommandBusError?, after duration: Duration) {
        log(error?.code == .journalFailed ? .warning : .info) { line in Self.compose(envelope, state: state, error: error, after: duration, into: &line) }
    }

    /// The message of a command's line, written straight into `line`: no `String` is made for it
    /// (one line per command is a busy server's most frequent write).
    static func compose(_ envelope: CommandEnvelope, state: CommandState, error: CommandBusError?, after duration: Duration, into line: inout [UInt8]) {
        line.append(contentsOf: quotedLine(envelope.commandName).utf8)
        line.append(UInt8(ascii: " "))
        CommandID.appendText(envelope.id, to: &line)
        line.append(UInt8(ascii: " "))
        line.append(contentsOf: state.rawValue.utf8)
        line.append(contentsOf: " in ".utf8)
        // Milliseconds to a tenth: `0.4`, `12.0`, as the `Double` would print (written from an integer).
        let tenths = (duration.seconds * 10_000).rounded()
        if tenths >= 0, tenths < 1e15 {
            line.append(contentsOf: String(Int(tenths) / 10).utf8)
            line.append(UInt8(ascii: "."))
            line.append(UInt8(ascii: "0") + UInt8(Int(tenths) % 10))
        } else {
            line.append(contentsOf: "\(tenths / 10)".utf8)
        }
        line.append(contentsOf: " ms".utf8)
        if let error {
            line.append(contentsOf: ": ".utf8)
            line.append(contentsOf: quotedLine(error.message).utf8)
        }
        if let trace = TraceContext.traceID(in: envelope.metadata) {
            line.append(contentsOf: " trace=".utf8)
            line.append(contentsOf: trace.utf8)
        }
    }
}
