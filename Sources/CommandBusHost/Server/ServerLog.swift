import CommandBus

/// The server's log: one line per event on stderr, `cmdbus: LEVEL: message`, at or above a threshold.
struct ServerLog: Sendable {
    let console: Console
    let threshold: LogLevel

    func callAsFunction(_ level: LogLevel, _ message: String) {
        guard level >= threshold else { return }
        console.err("cmdbus: \(level.rawValue): \(message)")
    }
}
