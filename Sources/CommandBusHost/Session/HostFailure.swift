import CommandBus

/// A failure the host reports to a person: a one-line message, a stable ``Code`` that fixes the
/// exit status, and the command and plugin it concerns.
///
/// The code and the exit status cannot disagree: each ``Code`` carries its own ``ExitCode``.
package struct HostFailure: Error, Sendable {
    /// A stable, machine-readable code, bound to the exit status `cmdbus` leaves with.
    package struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The code's stable name, as `--json` prints it.
        package let name: String
        /// The exit status a failure with this code ends `cmdbus` with.
        package let exitCode: ExitCode

        private init(_ name: String, _ exitCode: ExitCode) {
            self.name = name
            self.exitCode = exitCode
        }

        /// The command line was wrong.
        package static let usage = Code("usage", .usage)
        /// A configuration file is malformed or unreadable.
        package static let badConfiguration = Code("badConfiguration", .usage)
        /// A file or directory named on the command line does not exist or cannot be read.
        package static let noInput = Code("noInput", .noInput)
        /// The payload is not JSON or does not decode into the command.
        package static let decodingFailed = Code("decodingFailed", .malformedPayload)
        /// The payload is larger than the limit.
        package static let payloadTooLarge = Code("payloadTooLarge", .malformedPayload)
        /// No handler would take the command.
        package static let noHandler = Code("noHandler", .noHandler)
        /// The handler failed.
        package static let handlerFailed = Code("handlerFailed", .failure)
        /// A subcommand failed and its parent did not handle it.
        package static let childFailed = Code("childFailed", .failure)
        /// A subcommand would be deeper below its root than the bus allows (a command that sends itself without end?).
        package static let tooDeep = Code("tooDeep", .failure)
        /// A command or result could not be encoded.
        package static let encodingFailed = Code("encodingFailed", .failure)
        /// The command was cancelled.
        package static let cancelled = Code("cancelled", .failure)
        /// The command ran past its deadline.
        package static let timedOut = Code("timedOut", .timedOut)
        /// The journal cannot be opened, read or written.
        package static let journalFailed = Code("journalFailed", .journalFailed)
        /// The journal has no entry with the id given.
        package static let entryNotFound = Code("entryNotFound", .failure)
        /// The journal entry is in a state the operation does not apply to (retry a success, undo twice).
        package static let entryNotApplicable = Code("entryNotApplicable", .failure)
        /// The process running the plugin's handler died (an isolated worker crashed or was killed).
        package static let pluginCrashed = Code("pluginCrashed", .failure)
        /// A file is not a loadable plugin, or a plugin-directory file cannot be written.
        package static let pluginFailed = Code("pluginFailed", .failure)
        /// No server answers on the socket.
        package static let serverUnreachable = Code("serverUnreachable", .failure)
        /// The server is shutting down and takes no new work.
        package static let serverShuttingDown = Code("serverShuttingDown", .failure)
        /// The server answered something this client does not understand.
        package static let badResponse = Code("badResponse", .failure)
        /// Another server already listens on the socket.
        package static let socketInUse = Code("socketInUse", .noHandler)
        /// Ctrl-C (SIGINT or SIGTERM): the commands were cancelled.
        package static let interrupted = Code("interrupted", .interrupted)
        /// Some commands of a batch did not succeed.
        package static let someFailed = Code("someFailed", .failure)
        /// The server could not listen on its socket.
        package static let socketFailed = Code("socketFailed", .failure)
        /// The server has no file descriptor free for another connection.
        package static let serverBusy = Code("serverBusy", .failure)
        /// Results could not be written to stdout (a full disk, an I/O error).
        package static let outputFailed = Code("outputFailed", .failure)

        private static let all: [Code] = [
            .usage, .badConfiguration, .noInput, .decodingFailed, .payloadTooLarge, .noHandler, .handlerFailed, .childFailed, .tooDeep,
            .encodingFailed, .cancelled, .timedOut, .journalFailed, .entryNotFound, .entryNotApplicable, .pluginFailed, .pluginCrashed,
            .serverUnreachable, .serverShuttingDown, .badResponse, .socketInUse, .someFailed, .socketFailed, .interrupted, .outputFailed, .serverBusy,
        ]

        /// Looks a code up by its stable name (a server's answer); `nil` if unknown.
        package init?(name: String) {
            guard let code = Self.all.first(where: { $0.name == name }) else { return nil }
            self = code
        }

        package var description: String { name }
    }

    /// The one-line message: names the thing and the cause, and says what to do next.
    package let message: String
    /// The stable code, and with it the exit status.
    package let code: Code
    /// The command the failure concerns, if any.
    package let command: String?
    /// The plugin the failure concerns, if any.
    package let plugin: String?
    /// The id of the command that failed, where it got one, so it can be found in the journal.
    package var commandID: String?

    /// A failure with `code`.
    package init(_ code: Code, _ message: String, command: String? = nil, plugin: String? = nil, commandID: String? = nil) {
        self.code = code
        self.message = message
        self.command = command
        self.plugin = plugin
        self.commandID = commandID
    }

    /// The exit status this failure ends `cmdbus` with.
    package var exitCode: ExitCode { code.exitCode }

    /// A usage error: the command line was wrong.
    package static func usage(_ message: String) -> Self { .init(.usage, message) }

    /// A journal that cannot be opened, read or written.
    package static func journal(_ error: CommandBusError) -> Self { .init(.journalFailed, error.message) }
}

/// The exit codes `cmdbus` documents (sysexits.h values where one fits).
package enum ExitCode: Int32, Sendable {
    /// It worked.
    case ok = 0
    /// The handler failed (or the command was cancelled).
    case failure = 1
    /// The command line was wrong.
    case usage = 64
    /// The payload is not JSON or does not decode into the command.
    case malformedPayload = 65
    /// A file or directory named on the command line does not exist (EX_NOINPUT).
    case noInput = 66
    /// No handler would take the command.
    case noHandler = 69
    /// The journal could not be opened, read or written (EX_IOERR).
    case journalFailed = 74
    /// The command ran past its deadline.
    case timedOut = 75
    /// Interrupted by SIGINT or SIGTERM (128 + SIGINT, as shells report it).
    case interrupted = 130
}
