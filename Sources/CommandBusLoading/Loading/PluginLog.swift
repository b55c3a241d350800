import CommandBus
import CommandBusSupport
import Synchronization

/// Where one loader's plugin log lines go when they belong to no command (a log from `init()`,
/// a worker's own lines), and the host's warnings about plugins that break the ABI's rules.
///
/// Each loader has its own, so two sessions in one process never write to each other's log.
package final class PluginLog: Sendable {
    private let sink: Mutex<Callback<(LogLevel, String)>>
    /// The topics ``once(_:_:_:)`` has written a line about.
    private let topicsSaid = Mutex<Set<String>>([])

    /// A log that hands each line to `sink`.
    package init(_ sink: @escaping @Sendable (LogLevel, String) -> Void) {
        self.sink = Mutex(Callback(sink))
    }

    /// A log that writes `cmdbus: plugin LEVEL: message` lines to standard error, `debug` ones left out.
    package static func standardError() -> PluginLog {
        let console = Console()
        return PluginLog { level, message in
            guard level > .debug else { return }
            console.err("cmdbus: plugin \(level.rawValue): \(quotedLine(message))")
        }
    }

    /// Sends later lines to `sink` instead (a server's log, once it has one).
    package func redirect(to sink: @escaping @Sendable (LogLevel, String) -> Void) {
        self.sink.withLock { $0 = Callback(sink) }
    }

    /// Writes one line.
    package func callAsFunction(_ level: LogLevel, _ message: String) {
        sink.withLock { $0 }((level, message))
    }

    /// Writes one line about `topic`, unless this log has written one before: for a condition
    /// that every plugin meets alike.
    package func once(_ topic: String, _ level: LogLevel, _ message: String) {
        guard topicsSaid.withLock({ $0.insert(topic).inserted }) else { return }
        self(level, message)
    }
}
