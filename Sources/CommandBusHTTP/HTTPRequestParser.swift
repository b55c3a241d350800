/// Reads one HTTP/1.x request from the bytes a connection has received so far.
///
/// Pure: it holds no state and never blocks, so the server calls it again when more bytes
/// arrive, and the tests and the fuzzer call it on any bytes at all.
package struct HTTPRequestParser: Sendable {
    /// What the bytes so far amount to.
    package enum Outcome: Sendable {
        /// Not a whole request yet.
        case needMore
        /// A request, and how many bytes of the buffer it used.
        case request(HTTPRequest, consumed: Int)
        /// A request the server refuses: the status to answer with and why, in one line.
        case refused(status: Int, reason: String)
    }

    package var limits: HTTPLimits

    /// A parser that enforces `limits`.
    package init(limits: HTTPLimits) {
        self.limits = limits
    }

    /// Parses the request at the start of `buffer`. Its head's lines end in CRLF, or in a bare
    /// LF, which RFC 9112 lets a server accept (as `printf 'GET / HTTP/1.1\n\n' | nc` sends).
    package func parse(_ buffer: [UInt8]) -> Outcome {
        // Empty lines before the request line are skipped, as RFC 9112 asks of a server (a client
        // may end a body with a CRLF it does not count).
        if let first = buffer.first, first == 13 || first == 10 {
            let skipped = buffer.prefix { $0 == 13 || $0 == 10 }.count
            guard skipped <= limits.maxHeadBytes else { return .refused(status: 400, reason: "more empty lines before the request line than a head may hold") }
            guard skipped < buffer.count else { return .needMore }
            switch parse(Array(buffer[skipped...])) {
            case .request(let request, let consumed): return .request(request, consumed: skipped + consumed)
            case let other: return other
            }
        }
        guard let (headEnd, bodyStart) = Self.endOfHead(in: buffer, limit: limits.maxHeadBytes + 4) else {
            if buffer.count > limits.maxHeadBytes {
                return .refused(status: 431, reason: "request head is longer than \(limits.maxHeadBytes) bytes")
            }
            return .needMore
        }
        guard let head = String(validating: buffer[..<headEnd], as: UTF8.self) else {
            return .refused(status: 400, reason: "request head is not UTF-8")
        }
        // Split by bytes: "\r\n" is one Character, which a split on "\n" would not see.
        var lines = head.utf8.split(separator: 10, omittingEmptySubsequences: false).map { line in
            Substring(line.last == 13 ? line.dropLast() : line)
        }
        let requestLine = lines.removeFirst()
        let parts = requestLine.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty else {
            return .refused(status: 400, reason: "malformed request line; expected METHOD /path HTTP/1.1")
        }
        let method = String(parts[0]), target = parts[1], version = parts[2]
        guard version == "HTTP/1.1" || version == "HTTP/1.0" else {
            return .refused(status: version.hasPrefix("HTTP/") ? 505 : 400, reason: "unsupported protocol version; use HTTP/1.1")
        }
        guard method.utf8.allSatisfy({ $0 >= 0x41 && $0 <= 0x5A }) else {
            return .refused(status: 400, reason: "malformed method")
        }
        guard ["GET", "HEAD", "POST"].contains(method) else {
            return .refused(status: 405, reason: "method \(method) is not allowed; use GET, HEAD or POST")
        }
        guard target.utf8.count <= limits.maxTargetBytes else {
            return .refused(status: 414, reason: "request target is longer than \(limits.maxTargetBytes) bytes")
        }
        guard lines.count <= limits.maxHeaderFields else {
            return .refused(status: 431, reason: "more than \(limits.maxHeaderFields) header fields")
        }
        var headers: [(name: String, value: String)] = []
        for line in lines {
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex,
                  line.first != " ", line.first != "\t",
                  line[..<colon].utf8.allSatisfy(Self.isTokenByte) else {
                return .refused(status: 400, reason: "malformed header field")
            }
            let value = line[line.index(after: colon)...].trimmingSpaces
            guard value.utf8.allSatisfy({ $0 >= 0x20 && $0 != 0x7F || $0 == 0x09 }) else {
                return .refused(status: 400, reason: "header field value holds a control character")
            }
            headers.append((line[..<colon].lowercased(), String(value)))
        }
        let path: String, query: [(name: String, value: String)]
        switch Self.splitTarget(target) {
        case .success(let split): (path, query) = split
        case .failure(let refusal): return .refused(status: 400, reason: refusal.reason)
        }
        if headers.contains(where: { $0.name == "transfer-encoding" }) {
            return .refused(status: 501, reason: "chunked request bodies are not supported; send Content-Length")
        }
        let lengths = headers.filter { $0.name == "content-length" }.map(\.value)
        var length = 0
        if let text = lengths.first {
            guard lengths.allSatisfy({ $0 == text }), !text.isEmpty, text.utf8.count <= 12,
                  text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let parsed = Int(text) else {
                return .refused(status: 400, reason: "malformed Content-Length")
            }
            length = parsed
        }
        guard length <= limits.maxBodyBytes else {
            return .refused(status: 413, reason: "request body of \(length) bytes is larger than \(limits.maxBodyBytes)")
        }
        guard buffer.count >= bodyStart + length else { return .needMore }
        let connection = headers.first { $0.name == "connection" }?.value.lowercased()
        let keepAlive = version == "HTTP/1.1" ? connection != "close" : connection == "keep-alive"
        let request = HTTPRequest(
            method: method, path: path, query: query, headers: headers,
            body: Array(buffer[bodyStart..<(bodyStart + length)]), keepAlive: keepAlive
        )
        return .request(request, consumed: bodyStart + length)
    }

    /// `tchar` of RFC 9110: the bytes a header name may hold.
    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
             UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
             UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"): true
        default: false
        }
    }

    /// Why a request target is refused, in one line for the 400 response.
    struct TargetRefusal: Error {
        let reason: String
    }

    /// The decoded path and query of an origin-form target, or why it is refused: it is not one,
    /// has a malformed `%` escape or is not UTF-8 once decoded, decodes to a NUL or a backslash,
    /// or names a `.` or `..` segment (in any encoding).
    static func splitTarget(_ target: Substring) -> Result<(path: String, query: [(name: String, value: String)]), TargetRefusal> {
        guard target.first == "/" else { return .failure(.init(reason: "request target must be a path starting with '/'")) }
        let pieces = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        guard let path = percentDecoded(pieces[0]) else {
            return .failure(.init(reason: "request path has a malformed %-escape or is not UTF-8; escape '%' as %25"))
        }
        guard !path.contains("\0"), !path.contains("\\") else {
            return .failure(.init(reason: "request path must not hold a NUL or a backslash"))
        }
        for segment in path.split(separator: "/", omittingEmptySubsequences: false) where segment == "." || segment == ".." {
            return .failure(.init(reason: "request target must be a path without '.' or '..' segments"))
        }
        var query: [(name: String, value: String)] = []
        if pieces.count == 2 {
            for pair in pieces[1].split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard let name = percentDecoded(parts[0], plusIsSpace: true),
                      let value = parts.count == 2 ? percentDecoded(parts[1], plusIsSpace: true) : "" else {
                    return .failure(.init(reason: "request query has a malformed %-escape or is not UTF-8; escape '%' as %25"))
                }
                query.append((name, value))
            }
        }
        return .success((path, query))
    }

    /// `%XX` escapes decoded; `nil` if an escape is malformed or the result is not UTF-8.
    static func percentDecoded(_ text: Substring, plusIsSpace: Bool = false) -> String? {
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%") {
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else { return nil }
                bytes.append(high << 4 | low)
            } else if byte == UInt8(ascii: "+") && plusIsSpace {
                bytes.append(0x20)
            } else {
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: byte - 0x30
        case 0x41...0x46: byte - 0x41 + 10
        case 0x61...0x66: byte - 0x61 + 10
        default: nil
        }
    }

    /// Where the head at the start of `buffer` ends, in its first `limit` bytes: the end of its
    /// last line (before that line's ending) and the start of the body (after the empty line).
    /// Lines end in CRLF or a bare LF.
    static func endOfHead(in buffer: [UInt8], limit: Int) -> (head: Int, body: Int)? {
        let end = min(buffer.count, limit)
        var index = 0
        while let newline = buffer[index..<end].firstIndex(of: 10) {
            let lineEnd = newline > 0 && buffer[newline - 1] == 13 ? newline - 1 : newline
            if newline + 1 < end && buffer[newline + 1] == 10 { return (lineEnd, newline + 2) }
            if newline + 2 < end && buffer[newline + 1] == 13 && buffer[newline + 2] == 10 { return (lineEnd, newline + 3) }
            index = newline + 1
        }
        return nil
    }
}
