import CommandBusHost
import Glibc

/// Reads a file, or standard input, one line at a time, without loading it whole.
final class LineReader {
    private let file: UnsafeMutablePointer<FILE>
    private let ownsFile: Bool
    private var buffer: UnsafeMutablePointer<CChar>?
    private var capacity = 0

    /// Opens `path`, or standard input for `-`.
    init(path: String) throws(HostFailure) {
        if path == "-" {
            file = fdopen(dup(STDIN_FILENO), "r")!
            ownsFile = true
        } else {
            guard let opened = fopen(path, "r") else {
                throw HostFailure(.noInput, "cannot read '\(path)': \(String(cString: strerror(errno)))")
            }
            file = opened
            ownsFile = true
        }
    }

    deinit {
        free(buffer)
        if ownsFile { fclose(file) }
    }

    /// Whether ``next()`` would return without waiting for input: its buffer holds some, or the
    /// file or pipe has some to read (or is at its end).
    var hasInputReady: Bool {
        // glibc's FILE keeps what it has read but not handed out between these two pointers
        // (public fields of its `struct _IO_FILE`, which gnulib's `freadahead` reads the same way).
        if file.pointee._IO_read_ptr != file.pointee._IO_read_end { return true }
        var descriptor = pollfd(fd: fileno(file), events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, 0) > 0
    }

    /// The next line's bytes without its line break, or `nil` at the end. Bytes, not a `String`:
    /// decoding would repair what is not UTF-8 (each such byte a U+FFFD), and the line would run changed.
    func next() -> [UInt8]? {
        let length = getline(&buffer, &capacity, file)
        guard length >= 0, let buffer else { return nil }
        var count = length
        while count > 0, buffer[count - 1] == 0x0A || buffer[count - 1] == 0x0D { count -= 1 }
        return buffer.withMemoryRebound(to: UInt8.self, capacity: count) { Array(UnsafeBufferPointer(start: $0, count: count)) }
    }
}
