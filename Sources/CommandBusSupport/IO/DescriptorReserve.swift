import Glibc

/// One file descriptor held in reserve (on `/dev/null`), so that a process with no other free
/// can still accept a connection waiting on its listener and refuse it with a reason, instead of
/// leaving it hanging, and its listener, which `epoll` reports ready again and again, with it.
///
/// One thread uses it: the loop's that accepts (the server's request loop, the dashboard's).
package struct DescriptorReserve {
    private var spare: Int32 = Self.openSpare()

    /// A reserve holding one descriptor, if one can be opened now.
    package init() {}

    /// Whether the reserve is used up: its descriptor could not be opened again (another
    /// thread took the number it freed).
    package var isSpent: Bool { spare < 0 }

    /// Gives up the reserve for a moment to accept one connection waiting on `listener`, writes
    /// `line` to it and closes it; `false` if none was waiting or the reserve is spent.
    package mutating func refuseOne(on listener: Int32, saying line: [UInt8]) -> Bool {
        guard spare >= 0 else { return false }
        close(spare)
        let descriptor = accept(listener, nil, nil)
        if descriptor >= 0 {
            Self.tell(descriptor, line)
            close(descriptor)
        }
        spare = Self.openSpare()
        return descriptor >= 0
    }

    /// Opens the reserve again if it is spent (a descriptor was freed since).
    package mutating func replenish() {
        if spare < 0 { spare = Self.openSpare() }
    }

    /// Writes `line` to a connection about to be closed, without waiting for it, and makes sure
    /// the client can read it: what the client sent is read and dropped, and it may send no more,
    /// since Linux resets a Unix socket whose peer closes with data unread (`ECONNRESET`), and
    /// the client would then read nothing of `line`.
    package static func tell(_ descriptor: Int32, _ line: [UInt8]) {
        var sink = [UInt8](repeating: 0, count: 4096)
        func drain() {
            while sink.withUnsafeMutableBytes({ recv(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }) > 0 {}
        }
        drain()
        _ = line.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL)) }
        _ = shutdown(descriptor, Int32(SHUT_RD))
        drain()
    }

    private static func openSpare() -> Int32 {
        open("/dev/null", O_RDONLY | O_CLOEXEC)
    }
}
