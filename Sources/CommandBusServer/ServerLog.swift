import CommandBusSupport
import CommandBus

/// The server's log: one line per event on stderr, `cmdbus: LEVEL: message`, at or above a threshold.
package struct ServerLog: Sendable {
    package let console: Console
    package let threshold: LogLevel

    /// A log on `console`'s stderr that drops lines below `threshold`.
    package init(console: Console, threshold: LogLevel) {
        self.console = console
        self.threshold = threshold
    }

    package func callAsFunction(_ level: LogLevel, _ message: String) {
        guard level >= threshold else { return }
        console.err("cmdbus: \(level.rawValue): \(message)")
    }
}
