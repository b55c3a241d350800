import CommandBusSupport
import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The server's log: one line per event on stderr at or above a threshold, as text
/// (`cmdbus: LEVEL: message`) or, for log shippers, as JSON (`{"time", "level", "message"}`).
package struct ServerLog: Sendable {
    /// How each line is written.
    package enum Format: String, Sendable, CaseIterable {
        case text, json
    }

    package let console: Console
    package let threshold: LogLevel
    package let format: Format

    /// A log on `console`'s stderr that drops lines below `threshold`.
    package init(console: Console, threshold: LogLevel, format: Format = .text) {
        self.console = console
        self.threshold = threshold
        self.format = format
    }

    /// Logs a message composed straight into bytes by `compose`: a text line costs no `String`.
    package func callAsFunction(_ level: LogLevel, composing compose: (inout [UInt8]) -> Void) {
        guard level >= threshold else { return }
        var line: [UInt8] = []
        line.reserveCapacity(160)
        switch format {
        case .text:
            line.append(contentsOf: "cmdbus: ".utf8)
            line.append(contentsOf: level.rawValue.utf8)
            line.append(contentsOf: ": ".utf8)
            compose(&line)
            line.append(0x0A)
            console.err(line: line)
        case .json:
            compose(&line)
            self(level, String(decoding: line, as: UTF8.self))
        }
    }

    package func callAsFunction(_ level: LogLevel, _ message: String) {
        guard level >= threshold else { return }
        switch format {
        case .text:
            console.err("cmdbus: \(level.rawValue): \(message)")
        case .json:
            console.err(JSONValue.object([
                "time": .string(Date().timestamp), "level": .string(level.rawValue), "message": .string(message),
            ]).text)
        }
    }
}
