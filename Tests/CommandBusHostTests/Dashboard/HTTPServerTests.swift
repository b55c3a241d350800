import CommandBusHTTP
import Foundation
import Synchronization
import Testing

/// The dashboard's HTTP server under good and bad input: the parser alone, then a real server
/// on a loopback port driven by Python clients (slow ones, many, hostile).
struct HTTPServerTests {
    private let parser = HTTPRequestParser(limits: HTTPLimits())

    private func parse(_ text: String) -> HTTPRequestParser.Outcome { parser.parse(Array(text.utf8)) }

    private func refusal(_ text: String) -> Int? {
        if case .refused(let status, _) = parse(text) { status } else { nil }
    }

    @Test func parsesARequestWithQueryHeadersAndBody() throws {
        guard case .request(let request, let consumed) = parse("POST /api/x%20y?state=failed&command=a+b HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nCookie: a=1; cmdbus_token=t\r\n\r\nabcGET") else {
            Issue.record("not parsed")
            return
        }
        #expect(request.method == "POST" && request.path == "/api/x y")
        #expect(request.parameter("state") == "failed" && request.parameter("command") == "a b")
        #expect(request.header("HOST") == "h" && request.cookie("cmdbus_token") == "t")
        #expect(request.body == Array("abc".utf8) && request.keepAlive)
        #expect(consumed == "POST /api/x%20y?state=failed&command=a+b HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nCookie: a=1; cmdbus_token=t\r\n\r\nabc".utf8.count)
    }

    /// Found by hand: a request whose lines end in a bare LF (`printf … | nc` sends them so) waited
    /// for a CRLF that never came, and was answered after 10 s that it "took longer than 10 seconds
    /// to arrive". RFC 9112 lets a server take a bare LF as a line's end; CRLF and LF may mix.
    @Test func aHeadWhoseLinesEndInABareLFIsRead() throws {
        for text in ["POST /api/x?a=1 HTTP/1.1\nHost: h\nContent-Length: 3\n\nabcGET", "POST /api/x?a=1 HTTP/1.1\r\nHost: h\nContent-Length: 3\r\n\r\nabcGET",
                     "POST /api/x?a=1 HTTP/1.1\nHost: h\r\nContent-Length: 3\n\r\nabcGET"] {
            guard case .request(let request, let consumed) = parse(text) else {
                Issue.record("not parsed: \(text.debugDescription)")
                continue
            }
            #expect(request.path == "/api/x" && request.parameter("a") == "1" && request.header("host") == "h" && request.header("content-length") == "3")
            #expect(request.body == Array("abc".utf8) && consumed == text.utf8.count - 3, "\(text.debugDescription)")
        }
        guard case .needMore = parse("GET / HTTP/1.1\nHost: h\n") else { Issue.record("a partial head was not needMore"); return }
        guard case .needMore = parse("GET / HTTP/1.1\nHost: h\n\r") else { Issue.record("a head before its last CR's LF was not needMore"); return }
        // A bare CR ends no line: inside a field's value it is a control character.
        #expect(refusal("GET / HTTP/1.1\nX: a\rb\n\n") == 400)
    }

    /// Empty lines before a request line are skipped, as RFC 9112 asks of a server (a client may
    /// end a POST's body with a CRLF it does not count, before its next request on the connection):
    /// the request after them was refused as a malformed request line.
    @Test func emptyLinesBeforeARequestAreSkipped() throws {
        for text in ["\r\nGET /metrics HTTP/1.1\r\nHost: h\r\n\r\n", "\n\r\n\nGET /metrics HTTP/1.1\nHost: h\n\n"] {
            guard case .request(let request, let consumed) = parse(text) else {
                Issue.record("not parsed: \(text.debugDescription)")
                continue
            }
            #expect(request.path == "/metrics" && consumed == text.utf8.count, "\(text.debugDescription)")
        }
        guard case .needMore = parse("\r\n\r\n") else { Issue.record("empty lines alone were not needMore"); return }
        #expect(refusal(String(repeating: "\r\n", count: 9_000) + "GET / HTTP/1.1\r\n\r\n") == 400)
    }

    @Test func waitsForTheRestOfAPartialRequest() {
        guard case .needMore = parse("GET / HTTP/1.1\r\nHost: h\r\n") else { Issue.record("a partial head was not needMore"); return }
        guard case .needMore = parse("POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc") else { Issue.record("a partial body was not needMore"); return }
    }

    @Test func refusesMalformedAndOversizedRequests() {
        #expect(refusal("GARBAGE\r\n\r\n") == 400)
        #expect(refusal("GET /\r\n\r\n") == 400)
        #expect(refusal("GET / HTTP/2.0\r\n\r\n") == 505)
        #expect(refusal("DELETE / HTTP/1.1\r\n\r\n") == 405)
        #expect(refusal("get / HTTP/1.1\r\n\r\n") == 400)
        #expect(refusal("GET http://evil/ HTTP/1.1\r\n\r\n") == 400)
        #expect(refusal("GET / HTTP/1.1\r\nBad Header: x\r\n\r\n") == 400)
        #expect(refusal("GET / HTTP/1.1\r\n folded: x\r\n\r\n") == 400)
        #expect(refusal("GET / HTTP/1.1\r\nX: a\u{01}b\r\n\r\n") == 400)
        #expect(refusal("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n") == 400)
        #expect(refusal("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n") == 400)
        #expect(refusal("POST / HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n") == 413)
        #expect(refusal("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n") == 501)
        #expect(refusal("GET /" + String(repeating: "a", count: 5_000) + " HTTP/1.1\r\n\r\n") == 414)
        #expect(refusal("GET / HTTP/1.1\r\n" + String(repeating: "X-A: b\r\n", count: 65) + "\r\n") == 431)
        #expect(refusal("GET / HTTP/1.1\r\nX-Big: " + String(repeating: "a", count: 17_000)) == 431)
    }

    /// Each refused target says what is wrong with it: a bad escape was once called a climb.
    @Test func aRefusedTargetSaysWhy() {
        let reasons = [
            "/metrics?x=%zz": "request query has a malformed %-escape or is not UTF-8; escape '%' as %25",
            "/a%zz": "request path has a malformed %-escape or is not UTF-8; escape '%' as %25",
            "/a%00b": "request path must not hold a NUL or a backslash",
            "/a/../b": "request target must be a path without '.' or '..' segments",
            "*": "request target must be a path starting with '/'",
        ]
        for (target, reason) in reasons {
            guard case .refused(400, let said) = parse("GET \(target) HTTP/1.1\r\n\r\n") else {
                Issue.record("\(target) was not refused with 400")
                continue
            }
            #expect(said == reason, "\(target)")
        }
    }

    @Test func refusesPathsThatClimbOutOfTheRoot() {
        for path in ["/../etc/passwd", "/a/../../etc/passwd", "/%2e%2e/etc/passwd", "/.%2E/x", "/./x", "/a%00b", "/a\\..\\b", "/%zz"] {
            #expect(refusal("GET \(path) HTTP/1.1\r\n\r\n") == 400, "\(path) was not refused")
        }
    }

    @Test func neverCrashesOnRandomBytes() {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("GET POST / HTTP/1.1\r\n:Content-Length 0123456789%.?&=".utf8) + [0, 0xFF, 0x80]
        for _ in 0..<3_000 {
            let count = Int.random(in: 0...300, using: &generator)
            let bytes = (0..<count).map { _ in alphabet.randomElement(using: &generator)! }
            _ = parser.parse(bytes)
        }
    }

    // MARK: A real server

    /// A server on a loopback port: `/` answers text, `/slow` once `/release` was asked for,
    /// `/stream` an event a tenth of a second.
    private static func startServer(limits: HTTPLimits = HTTPLimits()) throws -> HTTPServer {
        let listener = try TCPListener.listen(host: "127.0.0.1", port: 0)
        let gate = Gate()
        let server = HTTPServer(listener: listener, limits: limits) { request in
            switch request.path {
            case "/stream":
                let stream = AsyncStream<[UInt8]> { continuation in
                    let task = Task {
                        while !Task.isCancelled {
                            continuation.yield(Array("data: tick\n\n".utf8))
                            try? await Task.sleep(for: .milliseconds(100))
                        }
                    }
                    continuation.onTermination = { _ in task.cancel() }
                }
                return HTTPResponse(status: 200, headers: [("Content-Type", "text/event-stream")], body: .stream(stream))
            case "/slow":
                await gate.wait()
                return HTTPResponse(status: 200, contentType: "text/plain", text: "slow")
            case "/release":
                gate.open()
                return HTTPResponse(status: 200, contentType: "text/plain", text: "released")
            default:
                return HTTPResponse(status: 200, contentType: "text/plain", text: "hello \(request.path)")
            }
        }
        server.start()
        return server
    }

    private static func python(_ script: String, _ port: Int) async throws -> String {
        let prelude = """
            import socket, sys, time, resource
            PORT = int(sys.argv[1])
            def conn():
                # Patient: in a full parallel run the machine's load can hold a reply up for many seconds.
                return socket.create_connection(("127.0.0.1", PORT), timeout=90)
            def reply(s):
                data = b""
                while b"\\r\\n\\r\\n" not in data:
                    chunk = s.recv(65536)
                    if not chunk: break
                    data += chunk
                return data.decode("latin-1")
            def nothing_yet(s):
                s.setblocking(False)
                try:
                    s.recv(1)
                    return False
                except BlockingIOError:
                    return True
                finally:
                    s.settimeout(90)
            def whole(s):
                data = b""
                while True:
                    chunk = s.recv(65536)
                    if not chunk: return data.decode("latin-1")
                    data += chunk

            """
        let result = try await runProcess("/usr/bin/env", ["python3", "-c", prelude + script, String(port)], timeout: .seconds(240))
        try #require(result.status == 0, "client failed: \(result.stderr)")
        return result.stdout
    }

    @Test func keepsAConnectionAliveAcrossRequestsAndAnswersPipelinedOnesInOrder() async throws {
        let server = try Self.startServer()
        let output = try await Self.python("""
            s = conn()
            s.sendall(b"GET /one HTTP/1.1\\r\\nHost: x\\r\\n\\r\\nGET /two HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
            data = b""
            while data.count(b"hello") < 2:
                chunk = s.recv(65536)
                if not chunk: break  # the server went away: fail below rather than spin
                data += chunk
            text = data.decode()
            print(text.index("hello /one") < text.index("hello /two"), text.count("HTTP/1.1 200"))
            s.sendall(b"HEAD /three HTTP/1.1\\r\\nConnection: close\\r\\n\\r\\n")
            rest = b""
            while True:
                chunk = s.recv(65536)
                if not chunk: break
                rest += chunk
            print(b"Content-Length: 12" in rest, b"hello" not in rest)
            """, server.listener.port)
        #expect(output == "True 2\nTrue True\n")
    }

    /// A client that shuts its side after its request (`nc -N`, a health check) is answered, even
    /// by a slow handler, and pipelined requests before the end are too; then the connection
    /// closes. One that ends mid-request is closed without an answer. It was closed as soon as
    /// the end was read, with the request unanswered.
    @Test func aClientThatShutsItsSideAfterItsRequestIsAnswered() async throws {
        let server = try Self.startServer()
        let output = try await Self.python("""
            def ask(data, then=None):
                s = conn()
                s.sendall(data)
                s.shutdown(socket.SHUT_WR)
                if then: then()
                return whole(s)
            print(ask(b"GET /one HTTP/1.0\\r\\n\\r\\n").count("hello /one"))
            print(ask(b"GET /a HTTP/1.1\\r\\nHost: x\\r\\n\\r\\nGET /b HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n").count("HTTP/1.1 200"))
            def release():
                time.sleep(0.5)
                r = conn(); r.sendall(b"GET /release HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n"); reply(r)
            print("slow" in ask(b"GET /slow HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n", release))
            print(repr(ask(b"GET /half HTTP/1.1\\r\\nHo")))
            """, server.listener.port)
        #expect(output == "1\n2\nTrue\n''\n")
    }

    @Test func aSlowClientHoldsUpNobodyAndIsTimedOut() async throws {
        // Long enough that the slow client is still mid-request whatever the machine's load.
        var patientLimits = HTTPLimits()
        patientLimits.requestTimeout = .seconds(300)
        let patient = try Self.startServer(limits: patientLimits)
        let waiting = try await Self.python("""
            slow = conn()
            slow.sendall(b"GET / HT")        # and no more
            fast = conn()
            fast.sendall(b"GET /fast HTTP/1.1\\r\\nConnection: close\\r\\n\\r\\n")
            print("hello /fast" in whole(fast), nothing_yet(slow))
            """, patient.listener.port)
        #expect(waiting == "True True\n", "a fast request waited behind a slow one")

        var limits = HTTPLimits()
        limits.requestTimeout = .seconds(1)
        let server = try Self.startServer(limits: limits)
        let output = try await Self.python("""
            slow = conn()
            slow.sendall(b"GET / HT")        # and then one byte a while
            fast = conn()
            fast.sendall(b"GET /fast HTTP/1.1\\r\\nConnection: close\\r\\n\\r\\n")
            print("hello /fast" in whole(fast), True)
            for byte in b"TP/1.1\\r\\n":
                try:
                    slow.sendall(bytes([byte]))
                except OSError:
                    break
                time.sleep(0.3)
            answer = reply(slow)
            print(answer.split("\\r\\n")[0])
            print(answer.split("\\r\\n\\r\\n", 1)[-1].strip())
            silent = conn()                   # connects and sends nothing: closed once its time is up
            silent.settimeout(15)
            print(silent.recv(100) == b"" or "408" in silent.recv(100).decode())
            """, server.listener.port)
        let lines = output.split(separator: "\n")
        #expect(lines.count == 4)
        #expect(lines.first == "True True")
        #expect(lines.dropFirst().first == "HTTP/1.1 408 Request Timeout")
        #expect(lines.dropFirst(2).first == "request took longer than 1 second to arrive")
    }

    @Test func aThousandConnectionsAndEventStreamsDoNotStopTheServer() async throws {
        let server = try Self.startServer()
        let output = try await Self.python("""
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
            idle = [conn() for _ in range(500)]
            streams = []
            for _ in range(500):
                s = conn()
                s.sendall(b"GET /stream HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
                streams.append(s)
            heads = [reply(s).split("\\r\\n")[0] for s in streams[:20]]
            print(all(h == "HTTP/1.1 200 OK" for h in heads))
            fresh = conn()
            fresh.sendall(b"GET /still-here HTTP/1.1\\r\\nConnection: close\\r\\n\\r\\n")
            print("hello /still-here" in whole(fresh), True)
            # A stream keeps flowing while the others sit unread.
            before = len(streams[0].recv(65536))
            time.sleep(0.3)
            print(len(streams[-1].recv(65536)) > 0)
            sys.stdout.flush()
            for s in idle + streams: s.close()
            """, server.listener.port)
        #expect(output == "True\nTrue True\nTrue\n")
        // Every one of them is closed again once the clients went away.
        #expect(await waitUntil(.seconds(30)) { server.openConnections == 0 })
    }

    @Test func aSlowHandlerOrAClientThatStopsReadingHoldsUpNobody() async throws {
        var limits = HTTPLimits()
        limits.maxQueuedBytes = 64 * 1024
        let server = try Self.startServer(limits: limits)
        let output = try await Self.python("""
            stuck = conn()
            stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            stuck.sendall(b"GET /stream HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")   # and never reads
            waiting = conn()
            waiting.sendall(b"GET /slow HTTP/1.1\\r\\nConnection: close\\r\\n\\r\\n")
            other = conn()
            other.sendall(b"GET /quick HTTP/1.1\\r\\nConnection: close\\r\\n\\r\\n")
            print("hello /quick" in whole(other), nothing_yet(waiting))
            release = conn()
            release.sendall(b"GET /release HTTP/1.1\\r\\nConnection: close\\r\\n\\r\\n")
            whole(release)
            print("slow" in whole(waiting))
            """, server.listener.port)
        #expect(output == "True True\nTrue\n")
    }

    @Test func parsesListenAddresses() {
        #expect(TCPListener.parse("8080")! == ("127.0.0.1", 8080))
        #expect(TCPListener.parse("0.0.0.0:80")! == ("0.0.0.0", 80))
        #expect(TCPListener.parse("[::1]:9000")! == ("::1", 9000))
        #expect(TCPListener.parse("localhost:1")! == ("127.0.0.1", 1))
        #expect(TCPListener.parse("70000") == nil && TCPListener.parse("a:b") == nil && TCPListener.parse(":") == nil)
    }
}
