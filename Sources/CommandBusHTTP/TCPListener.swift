import Glibc

/// A listening TCP socket on an IPv4 or IPv6 address, non-blocking, for the HTTP server.
package struct TCPListener: Sendable {
    /// The listening descriptor.
    package let descriptor: Int32
    /// The address it listens on, as given (`127.0.0.1`, `::1`, `0.0.0.0`).
    package let host: String
    /// The port, the kernel's choice if `0` was asked for.
    package let port: Int
    /// Whether only this machine can connect (127.0.0.0/8 or ::1).
    package let isLoopback: Bool

    /// Why a listener could not be made, in one line.
    package struct Failure: Error, Sendable {
        package let message: String
    }

    /// Parses `[ADDR:]PORT` (`8080`, `127.0.0.1:8080`, `[::1]:8080`); the address is 127.0.0.1 if left out.
    package static func parse(_ text: String) -> (host: String, port: Int)? {
        var host = "127.0.0.1", portText = Substring(text)
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { return nil }
            host = String(text[text.index(after: text.startIndex)..<close])
            portText = text[text.index(close, offsetBy: 2)...]
        } else if let colon = text.lastIndex(of: ":") {
            host = String(text[..<colon])
            portText = text[text.index(after: colon)...]
            if host == "localhost" { host = "127.0.0.1" }
        }
        guard let port = Int(portText), (0...65535).contains(port), !host.isEmpty else { return nil }
        return (host, port)
    }

    /// Binds and listens on `host`:`port`.
    /// - Throws: a failure naming the address and the cause (in use, not an address of this machine).
    package static func listen(host: String, port: Int) throws(Failure) -> TCPListener {
        var v4 = sockaddr_in(), v6 = sockaddr_in6()
        let family: Int32
        if inet_pton(AF_INET, host, &v4.sin_addr) == 1 {
            family = AF_INET
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = in_port_t(UInt16(port).bigEndian)
        } else if inet_pton(AF_INET6, host, &v6.sin6_addr) == 1 {
            family = AF_INET6
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = in_port_t(UInt16(port).bigEndian)
        } else {
            throw Failure(message: "\(host) is not an IP address; give one such as 127.0.0.1 or [::1]")
        }
        let descriptor = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw Failure(message: "cannot make a socket: \(String(cString: strerror(errno)))") }
        var yes: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        let bound = family == AF_INET
            ? withUnsafePointer(to: &v4) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            : withUnsafePointer(to: &v6) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) } }
        guard bound == 0, Glibc.listen(descriptor, 1024) == 0 else {
            let cause = Self.listenFailure(errno, port: port)
            close(descriptor)
            throw Failure(message: "cannot listen on \(host.contains(":") ? "[\(host)]" : host):\(port): \(cause)")
        }
        var actual = port
        if port == 0 {
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            _ = withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) } }
            actual = withUnsafePointer(to: &storage) { pointer in
                family == AF_INET
                    ? pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
                    : pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) }
            }
        }
        let loopback = family == AF_INET ? host.hasPrefix("127.") : host == "::1"
        return TCPListener(descriptor: descriptor, host: host, port: actual, isLoopback: loopback)
    }

    /// `http://host:port`, with IPv6 hosts in brackets.
    package var url: String {
        host.contains(":") ? "http://[\(host)]:\(port)" : "http://\(host):\(port)"
    }
}

extension TCPListener {
    /// Why `bind` or `listen` failed with `error`, and what to do about it where there is one thing to do.
    package static func listenFailure(_ error: Int32, port: Int) -> String {
        switch error {
        case EADDRINUSE: "the port is in use; stop the other server or pick another port"
        case EADDRNOTAVAIL: "this machine has no such address; give one of its own (ip address lists them), 0.0.0.0 for all of them, or 127.0.0.1"
        case EACCES where port < 1024: "ports below 1024 need root (or CAP_NET_BIND_SERVICE); pick 1024 or above"
        default: String(cString: strerror(error))
        }
    }
}
