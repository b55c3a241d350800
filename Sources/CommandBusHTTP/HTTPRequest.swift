/// One HTTP/1.x request, as the parser read it off a connection.
package struct HTTPRequest: Sendable {
    /// `GET`, `HEAD` or `POST`: the only methods the server takes.
    package var method: String
    /// The path, percent-decoded, always starting with `/` and free of `.` and `..` segments.
    package var path: String
    /// The query's `name=value` pairs, percent-decoded, in order.
    package var query: [(name: String, value: String)]
    /// The header fields, names lowercased, in order.
    package var headers: [(name: String, value: String)]
    /// The body (`Content-Length` bytes; empty without one).
    package var body: [UInt8]
    /// Whether the client keeps the connection open after the response.
    package var keepAlive: Bool

    /// The first value of header `name` (any case).
    package func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.first { $0.name == lowered }?.value
    }

    /// The first value of query parameter `name`.
    package func parameter(_ name: String) -> String? {
        query.first { $0.name == name }?.value
    }

    /// The value of cookie `name`, if the request sent it.
    package func cookie(_ name: String) -> String? {
        for field in headers where field.name == "cookie" {
            for pair in field.value.split(separator: ";") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                if parts.count == 2, parts[0].trimmingSpaces == name { return String(parts[1].trimmingSpaces) }
            }
        }
        return nil
    }
}

extension Substring {
    /// The text without spaces and tabs at either end.
    package var trimmingSpaces: Substring {
        var text = self
        while text.first == " " || text.first == "\t" { text.removeFirst() }
        while text.last == " " || text.last == "\t" { text.removeLast() }
        return text
    }
}
