import Foundation

/// Where the CLI writes: results to stdout, everything else (errors, events, warnings) to stderr.
struct Console: Sendable {
    /// Whether stderr is a terminal, so a live progress line makes sense.
    let stderrIsTerminal = isatty(FileHandle.standardError.fileDescriptor) != 0

    func out(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    func err(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }

    /// Overwrites the current stderr line (a progress line on a terminal).
    func status(_ text: String) {
        FileHandle.standardError.write(Data(("\r\u{1B}[K" + text).utf8))
    }

    /// Reports a failure on one stderr line, as text or (with `json`) as a JSON object.
    func report(_ failure: CLIFailure, json: Bool) {
        guard json else {
            err("cmdbus: error: \(failure.message)")
            return
        }
        var fields: [String: Any] = ["code": failure.code, "message": failure.message, "exitCode": failure.exitCode.rawValue]
        if let command = failure.command { fields["command"] = command }
        if let plugin = failure.plugin { fields["plugin"] = plugin }
        err(Self.json(["error": fields]))
    }

    /// Compact JSON with sorted keys.
    static func json(_ object: Any) -> String {
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else {
            return "{}"
        }
        return String(decoding: data, as: UTF8.self)
    }
}
