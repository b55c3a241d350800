/// An HTTP response: a status, header fields, and a body that is either whole or a stream.
package struct HTTPResponse: Sendable {
    /// What follows the head.
    package enum Body: Sendable {
        /// The whole body, sent with a `Content-Length`.
        case bytes([UInt8])
        /// Chunks sent as they come, until the stream ends; the connection closes after it
        /// (Server-Sent Events). The stream is cancelled when the client goes away.
        case stream(AsyncStream<[UInt8]>)
    }

    package var status: Int
    package var headers: [(name: String, value: String)]
    package var body: Body

    /// A response with `body` and the given fields.
    package init(status: Int, headers: [(name: String, value: String)] = [], body: Body = .bytes([])) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A response with a text body of `contentType`.
    package init(status: Int, contentType: String, text: String, headers: [(name: String, value: String)] = []) {
        self.init(status: status, headers: [("Content-Type", contentType)] + headers, body: .bytes(Array(text.utf8)))
    }

    /// A plain-text error, one line.
    package static func error(_ status: Int, _ message: String) -> HTTPResponse {
        HTTPResponse(status: status, contentType: "text/plain; charset=utf-8", text: message + "\n")
    }

    /// The reason phrase of the statuses the server sends.
    package static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 204: "No Content"
        case 302: "Found"
        case 303: "See Other"
        case 304: "Not Modified"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 409: "Conflict"
        case 411: "Length Required"
        case 413: "Content Too Large"
        case 414: "URI Too Long"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 503: "Service Unavailable"
        case 505: "HTTP Version Not Supported"
        default: "Status"
        }
    }

    /// The status line and header fields, with the framing fields the server owns.
    func head(keepAlive: Bool) -> [UInt8] {
        var text = "HTTP/1.1 \(status) \(Self.reason(status))\r\n"
        for field in headers { text += "\(field.name): \(field.value)\r\n" }
        switch body {
        case .bytes(let bytes):
            text += "Content-Length: \(bytes.count)\r\n"
            text += keepAlive ? "Connection: keep-alive\r\n" : "Connection: close\r\n"
        case .stream:
            text += "Cache-Control: no-cache\r\nConnection: close\r\n"
        }
        return Array((text + "\r\n").utf8)
    }
}
