import CommandBusSupport
import CommandBus
import Glibc

/// The server's listening Unix socket: created with mode 0600, replacing a stale one.
package struct UnixSocket {
    package let path: String
    package let descriptor: Int32
    /// The socket file as bound, so a stop removes this server's file and nothing else.
    private let file: FileSystem.Status?

    /// Why a socket could not be served.
    package enum Failure: Error {
        /// A live server already answers on the path.
        case inUse(String)
        case failed(String)
        /// The path cannot be a socket's address at all (empty, or too long).
        case badPath(String)
    }

    /// Binds and listens on `path`. A socket file nobody answers on is a dead server's and is
    /// replaced; anything else at the path (a file, a directory, a link) is left alone and refused.
    package static func listen(at path: String) throws(Failure) -> UnixSocket {
        if let fault = fault(in: path) { throw .badPath("cannot listen on \(fault); give --socket a path of 1 to 99 bytes") }
        if let there = FileSystem.status(of: path, followingLinks: false) {
            guard mode_t(there.mode) & S_IFMT == S_IFSOCK else {
                throw .failed("cannot listen on \(path): it is \(describe(mode_t(there.mode))), not a socket, and is left as it is; give --socket a path that is free (or holds a socket a stopped server left)")
            }
            if let probe = try? connect(to: path) {
                Glibc.close(probe)
                throw .inUse("a cmdbus server is already listening on \(path)")
            }
            unlink(path)
        }
        // Its directory is made if missing, as the journal's is; only the owner may enter it.
        if let failure = FileSystem.makeDirectories(FileSystem.parentDirectory(of: path), mode: 0o700) {
            throw .failed("cannot listen on \(path): \(failure); give --socket a path in a directory this user can write")
        }
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw .failed("cannot create a socket: \(String(cString: strerror(errno)))") }
        var address = Self.address(path)
        // Only the owner may connect: the socket is created 0600.
        let previous = umask(0o177)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        umask(previous)
        guard bound == 0, Glibc.listen(descriptor, 128) == 0 else {
            let reason = String(cString: strerror(errno))
            Glibc.close(descriptor)
            throw .failed("cannot listen on \(path): \(reason); give --socket a path in a directory this user can write")
        }
        return UnixSocket(path: path, descriptor: descriptor, file: FileSystem.status(of: path, followingLinks: false))
    }

    private static func describe(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFREG: "a regular file"
        case S_IFDIR: "a directory"
        case S_IFLNK: "a symbolic link"
        default: "a special file"
        }
    }

    /// Connects to the server at `path`.
    package static func connect(to path: String) throws(Failure) -> Int32 {
        if let fault = fault(in: path) { throw .badPath("cannot connect to \(fault), so no server listens there; give the path the server's --socket names") }
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw .failed("cannot create a socket: \(String(cString: strerror(errno)))") }
        var address = Self.address(path)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else {
            let number = errno
            Glibc.close(descriptor)
            throw .failed("cannot connect to \(path): \(Self.connectFailure(number, path: path))")
        }
        return descriptor
    }

    /// Why a connect to the socket at `path` failed with `error`, and what to do.
    private static func connectFailure(_ error: Int32, path: String) -> String {
        let reason = String(cString: strerror(error))
        guard error == EACCES || error == EPERM else { return "\(reason) (is 'cmdbus serve' running?)" }
        // A server's socket is its user's alone: name that user, who may connect.
        var info = stat()
        let owner = stat(path, &info) == 0 ? getpwuid(info.st_uid).map { String(cString: $0.pointee.pw_name) } ?? "uid \(info.st_uid)" : nil
        return "\(reason); a server's socket takes its own user alone (mode 0600)"
            + (owner.map { ": run this as \($0), whose server it is" } ?? ": run this as the user the server runs as")
    }

    /// Stops accepting and removes the socket file, if it is still this server's (not one that
    /// replaced it since).
    package func close() {
        shutdown(descriptor, Int32(SHUT_RDWR))
        Glibc.close(descriptor)
        guard let file, let now = FileSystem.status(of: path, followingLinks: false), now.device == file.device, now.inode == file.inode else { return }
        unlink(path)
    }

    /// What makes `path` unfit for a socket's address, where it is: empty (which Linux would take
    /// as a nameless abstract socket), or longer than an address holds (which would cut it short).
    private static func fault(in path: String) -> String? {
        if path.isEmpty { return "an empty socket path" }
        if path.utf8.count >= 100 { return "\(path): a socket path is at most 99 bytes, and this one is \(path.utf8.count)" }
        return nil
    }

    private static func address(_ path: String) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8.prefix(raw.count - 1))
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return address
    }
}

/// Cuts a stream of bytes into newline-delimited lines, refusing (and skipping) lines over a limit.
///
/// Bytes are searched once, and taken lines are dropped in bulk, so a burst of many short
/// lines costs linear time.
package struct LineSplitter {
    package enum Line {
        case text([UInt8])
        case tooLong(Int)
    }

    private let limit: Int
    private var buffer: [UInt8] = []
    /// Where the next line starts; the bytes before it were taken.
    private var start = 0
    /// How far past `start` has been searched for a newline.
    private var scanned = 0
    /// Bytes of an over-long line already thrown away.
    private var discarding = 0

    package init(limit: Int) {
        self.limit = limit
    }

    /// Adds bytes read from the stream.
    package mutating func append(_ bytes: UnsafeRawBufferPointer) {
        if start > 0 && start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
            scanned = 0
        } else if start >= 65_536 && start * 2 >= buffer.count {
            buffer.removeFirst(start)
            start = 0
            scanned = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next whole line, or `nil` until more bytes come.
    package mutating func next() -> Line? {
        if let newline = buffer[(start + scanned)...].firstIndex(of: 0x0A) {
            let length = newline - start
            defer { start = newline + 1; scanned = 0; discarding = 0 }
            if discarding > 0 || length > limit { return .tooLong(discarding + length) }
            return .text(Array(buffer[start..<newline]))
        }
        scanned = buffer.count - start
        if scanned > limit {
            discarding += scanned
            buffer.removeAll(keepingCapacity: true)
            start = 0
            scanned = 0
        }
        return nil
    }

    /// What is left once the stream has ended: a last line that had no newline, or `nil`.
    package mutating func finish() -> Line? {
        let length = buffer.count - start
        defer {
            buffer.removeAll(keepingCapacity: true)
            start = 0
            scanned = 0
            discarding = 0
        }
        if discarding > 0 || length > limit { return .tooLong(discarding + length) }
        return length > 0 ? .text(Array(buffer[start...])) : nil
    }
}

/// Reads newline-delimited lines from a blocking socket, refusing (and skipping) lines over a limit.
package final class LineSocketReader {
    package typealias Line = LineSplitter.Line

    private let descriptor: Int32
    private var lines: LineSplitter
    /// How long a reader keeps asking before it sleeps: at most this much CPU per request.
    package static let spin = SpinBudget.duration(default: .microseconds(100))
    /// Where each `recv` lands: allocated once, not per line.
    private var chunk = [UInt8](repeating: 0, count: 65_536)

    package init(descriptor: Int32, limit: Int) {
        self.descriptor = descriptor
        lines = LineSplitter(limit: limit)
    }

    /// A line ``hasInput(within:)`` took out of the splitter to see whether there was one.
    private var waiting: Line?

    /// The next line, or `nil` when the peer has closed.
    package func next() -> Line? {
        if let line = waiting {
            waiting = nil
            return line
        }
        while true {
            if let line = lines.next() { return line }
            let got = receive(thenWaiting: true)
            if got < 0 && errno == EINTR { continue }
            if got <= 0 { return nil }
        }
    }

    /// Whether ``next()`` would return without waiting, within `limit`: a line is here, or
    /// bytes or the peer's close arrive in that time.
    package func hasInput(within limit: Duration) -> Bool {
        if waiting == nil { waiting = lines.next() }
        guard waiting == nil else { return true }
        // Bytes, the peer's close or a failure: next() has something to say at once.
        if receive(thenWaiting: false) >= 0 || errno != EAGAIN { return true }
        var ready = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        let deadline = ContinuousClock.now + limit
        while true {
            let left = max(0, (deadline - ContinuousClock.now).milliseconds)
            let polled = poll(&ready, 1, Int32(clamping: left))
            if polled < 0 && errno == EINTR { continue }
            return polled != 0
        }
    }

    /// Reads what has come into the line splitter: asks without waiting for up to ``spin``, then,
    /// if `thenWaiting`, sleeps in `recv`. A client's next request often follows its answer within
    /// the spin, and waking a sleeping thread costs tens of microseconds on a virtual machine (a
    /// third of a round trip). Returns what `recv` returned, `errno` as it left it.
    @inline(__always)
    private func receive(thenWaiting: Bool) -> Int {
        var got = 0
        let spinUntil = ContinuousClock.now + Self.spin
        repeat {
            got = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        } while got < 0 && errno == EAGAIN && ContinuousClock.now < spinUntil
        if thenWaiting && got < 0 && errno == EAGAIN { got = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) } }
        if got > 0 { chunk.withUnsafeBytes { lines.append(UnsafeRawBufferPointer(rebasing: $0[..<got])) } }
        return got
    }
}
