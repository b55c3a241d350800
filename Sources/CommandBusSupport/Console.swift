import Glibc

/// Where the CLI writes: results to stdout, everything else (errors, events, warnings) to stderr.
package struct Console: Sendable {
    /// Whether stderr is a terminal, so a live progress line makes sense.
    package let stderrIsTerminal = isatty(STDERR_FILENO) != 0

    /// The process's stdout and stderr.
    package init() {}

    package func out(_ text: String) {
        Self.write(text + "\n", to: STDOUT_FILENO)
    }

    package func err(_ text: String) {
        Self.write(text + "\n", to: STDERR_FILENO)
    }

    /// Overwrites the current stderr line (a progress line on a terminal).
    package func status(_ text: String) {
        Self.write("\r\u{1B}[K" + text, to: STDERR_FILENO)
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

private let systemWrite = Glibc.write
