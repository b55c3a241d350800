import Glibc
import Synchronization

/// The descriptor results go to: the process's stdout, or a private copy of it once
/// ``Console/keepResultsPrivate()`` has pointed descriptor 1 at stderr.
private let resultDescriptor = Atomic<Int32>(STDOUT_FILENO)

/// Where the CLI writes: results to stdout, everything else (errors, events, warnings) to stderr.
package struct Console: Sendable {
    /// Whether stderr is a terminal, so a live progress line makes sense.
    package let stderrIsTerminal = isatty(STDERR_FILENO) != 0

    /// The process's stdout and stderr.
    package init() {}

    package func out(_ text: String) {
        Self.write(text + "\n", to: resultDescriptor.load(ordering: .acquiring))
    }

    /// Keeps stdout for results alone: results go to a private copy of descriptor 1, and
    /// descriptor 1 itself then points at stderr, so whatever a plugin loaded into this process
    /// prints (`printf`, `print`) lands on stderr and never in the middle of a result.
    /// `cmdbus`'s main calls it once, before any plugin loads; child processes do not.
    package static func keepResultsPrivate() {
        let copy = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3)
        guard copy >= 0, dup2(STDERR_FILENO, STDOUT_FILENO) >= 0 else {
            if copy >= 0 { close(copy) }
            return
        }
        resultDescriptor.store(copy, ordering: .releasing)
    }

    package func err(_ text: String) {
        Self.write(text + "\n", to: STDERR_FILENO)
    }

    /// Writes a line already in bytes, its newline included, to stderr.
    package func err(line: [UInt8]) {
        Self.write(line[...], to: STDERR_FILENO)
    }

    /// Overwrites the current stderr line (a progress line on a terminal).
    package func status(_ text: String) {
        Self.write("\r\u{1B}[K" + text, to: STDERR_FILENO)
    }

    /// Writes all of `text`, retrying short writes and interruptions.
    private static func write(_ text: String, to descriptor: Int32) {
        write(Array(text.utf8)[...], to: descriptor)
    }

    /// Writes all of `bytes`, retrying short writes and interruptions.
    private static func write(_ bytes: ArraySlice<UInt8>, to descriptor: Int32) {
        var bytes = bytes
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
