import CommandBus

/// A failure the CLI reports: a one-line message, its exit code, and what it concerns.
struct CLIFailure: Error, Sendable {
    let message: String
    let exitCode: ExitCode
    let code: String
    let command: String?
    let plugin: String?

    static func usage(_ message: String) -> Self {
        .init(message: message, exitCode: .usage, code: "usage", command: nil, plugin: nil)
    }

    /// A journal that cannot be opened, read or written.
    static func journal(_ error: CommandBusError) -> Self {
        .init(message: error.message, exitCode: .journalFailed, code: error.code.description, command: nil, plugin: nil)
    }

    /// A bus error, with the exit code its code maps to.
    static func bus(_ error: CommandBusError, command: String) -> Self {
        .init(message: error.message, exitCode: ExitCode(error.code), code: error.code.description, command: command, plugin: nil)
    }
}

/// The exit codes `cmdbus` documents (sysexits.h values where one fits).
enum ExitCode: Int32, Sendable {
    /// It worked.
    case ok = 0
    /// The handler failed (or the command was cancelled).
    case failure = 1
    /// The command line was wrong.
    case usage = 64
    /// The payload is not JSON or does not decode into the command.
    case malformedPayload = 65
    /// No handler would take the command.
    case noHandler = 69
    /// The journal could not be opened, read or written (EX_IOERR).
    case journalFailed = 74
    /// The command ran past its deadline.
    case timedOut = 75

    init(_ code: CommandBusError.Code) {
        switch code {
        case .noHandler: self = .noHandler
        case .decodingFailed, .payloadTooLarge: self = .malformedPayload
        case .timedOut: self = .timedOut
        case .usage: self = .usage
        case .journalFailed: self = .journalFailed
        default: self = .failure
        }
    }
}
