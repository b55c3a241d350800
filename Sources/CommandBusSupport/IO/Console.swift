import Glibc
import Synchronization

/// The descriptor results go to: the process's stdout, or a private copy of it once
/// ``Console/keepResultsPrivate()`` has pointed descriptor 1 at stderr.
private let resultDescriptor = Atomic<Int32>(STDOUT_FILENO)
/// The `errno` of the first write of a result that failed (0: none did).
private let resultWriteErrno = Atomic<Int32>(0)

/// Where the CLI writes: results to stdout, everything else (errors, events, warnings) to stderr.
package struct Console: Sendable {
    /// Whether stderr is a terminal, so a live progress line makes sense.
    package let stderrIsTerminal = isatty(STDERR_FILENO) != 0

    /// The process's stdout and stderr.
    package init() {}

    /// Writes a result line (`text` and a newline) to stdout.
    package func out(_ text: String) {
        out(bytes: Array((text + "\n").utf8))
    }

    /// Writes result bytes to stdout as they are: part of a line, or several lines at once.
    package func out(bytes: [UInt8]) {
        let descriptor = resultDescriptor.load(ordering: .acquiring)
        if let failure = Self.write(bytes[...], to: descriptor) {
            _ = resultWriteErrno.compareExchange(expected: 0, desired: failure, ordering: .relaxed)
        }
    }

    /// Why a result could not be written, if one could not (a full disk, an I/O error): a
    /// command whose output was lost must not end as if it had been read. A reader that went
    /// away (`EPIPE`, as `| head` does) is not counted: it chose to stop reading.
    package var resultWriteFailure: String? {
        let failure = resultWriteErrno.load(ordering: .relaxed)
        return failure == 0 || failure == EPIPE ? nil : String(cString: strerror(failure))
    }

    /// Whether the reader of the results went away (`EPIPE`: `| head` has read what it wanted).
    package var readerWentAway: Bool { resultWriteErrno.load(ordering: .relaxed) == EPIPE }

    /// Lets a write to a reader that went away fail with `EPIPE` (``readerWentAway``) instead
    /// of ending the process at once, for a command that must first end what it started.
    package static func outliveTheReader() {
        signal(SIGPIPE, SIG_IGN)
    }

    /// Ends the process as one whose reader went away ends by default: by `SIGPIPE`, which a
    /// shell reports as 141 and `set -o pipefail` passes over as a pipe's reader stopping.
    package static func endForTheReaderWentAway() -> Never {
        signal(SIGPIPE, SIG_DFL)
        raise(SIGPIPE)
        exit(128 + SIGPIPE)
    }

    /// Keeps stdout for results alone: results go to a private copy of descriptor 1, and
    /// descriptor 1 itself then points at stderr, so whatever a plugin loaded into this process
    /// prints (`printf`, `print`) lands on stderr and never in the middle of a result.
    /// `cmdbus`'s main calls it once, before any plugin loads; child processes do not.
    package static func keepResultsPrivate() {
        // A standard descriptor the caller closed (`>&-`) gets /dev/null, so the next file this
        // process opens cannot take its number and receive results or log lines meant for it.
        for standard in [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO] where fcntl(standard, F_GETFD) < 0 && errno == EBADF {
            let null = open("/dev/null", O_RDWR)
            if null >= 0, null != standard { dup2(null, standard); close(null) }
        }
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

    /// Writes all of `bytes`, retrying short writes and interruptions; `nil`, or the `errno` of
    /// the write that failed.
    @discardableResult
    private static func write(_ bytes: ArraySlice<UInt8>, to descriptor: Int32) -> Int32? {
        var bytes = bytes
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { systemWrite(descriptor, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                return errno
            }
            bytes = bytes.dropFirst(written)
        }
        return nil
    }
}

private let systemWrite = Glibc.write
