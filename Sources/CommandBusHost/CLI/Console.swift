#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where the CLI writes: results to stdout, everything else (errors, events, warnings) to stderr.
struct Console: Sendable {
    /// Whether stderr is a terminal, so a live progress line makes sense.
    let stderrIsTerminal = isatty(STDERR_FILENO) != 0

    func out(_ text: String) {
        Self.write(text + "\n", to: STDOUT_FILENO)
    }

    func err(_ text: String) {
        Self.write(text + "\n", to: STDERR_FILENO)
    }

    /// Overwrites the current stderr line (a progress line on a terminal).
    func status(_ text: String) {
        Self.write("\r\u{1B}[K" + text, to: STDERR_FILENO)
    }

    /// Reports a failure on one stderr line, as text or (with `json`) as a JSON object.
    func report(_ failure: CLIFailure, json: Bool) {
        guard json else {
            // A backstop: whatever a message quotes, it stays on one line.
            let oneLine = failure.message.split(whereSeparator: \.isNewline).joined(separator: " ")
            err("cmdbus: error: \(oneLine)")
            return
        }
        var fields: [String: JSONValue] = [
            "code": .string(failure.code), "message": .string(failure.message), "exitCode": .integer(Int64(failure.exitCode.rawValue)),
        ]
        if let command = failure.command { fields["command"] = .string(command) }
        if let plugin = failure.plugin { fields["plugin"] = .string(plugin) }
        err(JSONValue.object(["error": .object(fields)]).text)
    }

    /// Writes all of `text`, retrying short writes and interruptions.
    private static func write(_ text: String, to descriptor: Int32) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { systemWrite(descriptor, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                return
            }
            bytes = bytes.dropFirst(written)
        }
    }
}

#if canImport(Glibc)
private let systemWrite = Glibc.write
#elseif canImport(Darwin)
private let systemWrite = Darwin.write
#endif
