import CommandBus
import CommandBusSupport
import CommandBusHost
import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc

/// The client side of `--connect`: a ``BusClient`` whose bus is a running `cmdbus serve`.
///
/// Output and exit codes are those of a local run: the server answers with the same error
/// codes, and events and catalogs in the same JSON.
package struct SocketBusClient: BusClient {
    /// The server's socket.
    package let socket: String
    /// How long a question that runs nothing (`status`, `plugins`, `can`, `cancel`, a `post`)
    /// waits for its answer: a server that does not answer in this time is stopped or stuck.
    package static let answerTime = Duration.seconds(10)
    /// How much longer than its `--timeout` a `send` waits for the server's answer (which says
    /// that it timed out) before giving up on the server.
    package static let timeoutGrace = Duration.seconds(5)

    /// A client of the server listening on `socket`.
    package init(socket: String) {
        self.socket = socket
    }

    package func send(_ request: CommandRequest, onEvent: (@Sendable ([String: JSONValue]) -> Void)?) async throws(HostFailure) -> Data {
        if let delay = request.delay { try? await Task.sleep(for: delay) }
        var fields = Self.fields(of: request, op: "send")
        fields["events"] = .bool(onEvent != nil)
        // Ctrl-C ends this process, which closes the connection: the server cancels the command then.
        fields["cancelOnDisconnect"] = .bool(true)
        // Without a timeout a command may run for as long as it takes; with one, the server says when it ran out.
        let within = request.timeout.map { $0 + Self.timeoutGrace }
        let response = try await self.request(fields, answerWithin: within) { event in onEvent?(event) }
        guard response["ok"] == .bool(true), let result = response["result"] else { throw Self.failure(response, command: request.name) }
        return result.data
    }

    package func post(_ request: CommandRequest) async throws(HostFailure) -> UUID {
        let response = try await self.request(Self.fields(of: request, op: "post"))
        guard response["ok"] == .bool(true), let id = response["commandId"]?.stringValue.flatMap(UUID.init(uuidString:)) else {
            throw Self.failure(response, command: request.name)
        }
        return id
    }

    /// Requests are pipelined on one connection, at most `concurrency` unanswered.
    package func sendAll(
        concurrency: Int, next: @escaping () -> CommandRequest?, onOutcome: @escaping (CommandOutcome) -> Void
    ) async throws(HostFailure) {
        try await pipeline(op: "send", concurrency: concurrency, next: next, onOutcome: onOutcome)
    }

    /// Posts are pipelined on one connection, at most `concurrency` unacknowledged.
    package func postAll(
        concurrency: Int, next: @escaping () -> CommandRequest?, isNextReady: @escaping () -> Bool,
        onOutcome: @escaping (CommandOutcome) -> Void
    ) async throws(HostFailure) {
        try await pipeline(op: "post", concurrency: concurrency, next: next, onOutcome: onOutcome)
    }

    /// Writes a `send` or `post` request for each of `next`'s requests on one connection, at
    /// most `concurrency` unanswered, and reports each answer as it comes: a send's outcome, or
    /// a post `pending` once the server has it.
    ///
    /// Cancelling the task (Ctrl-C) shuts the connection, which ends the wait; the server then
    /// cancels the sends in flight, as it does a single `send`'s. Posts stay the bus's.
    private func pipeline(
        op: String, concurrency: Int, next: @escaping () -> CommandRequest?, onOutcome: @escaping (CommandOutcome) -> Void
    ) async throws(HostFailure) {
        let connection = try ServerConnection(socket)
        let outcome: Result<Void, HostFailure> = await withTaskCancellationHandler {
            do throws(HostFailure) {
                return .success(try pipeline(op: op, on: connection, concurrency: concurrency, next: next, onOutcome: onOutcome))
            } catch {
                return .failure(error)
            }
        } onCancel: {
            connection.shutDown()
        }
        try outcome.get()
    }

    private func pipeline(
        op: String, on connection: ServerConnection, concurrency: Int, next: () -> CommandRequest?, onOutcome: (CommandOutcome) -> Void
    ) throws(HostFailure) {
        var names: [Int64: String] = [:]
        // The server has answered nothing and taken nothing for answerTime: go on waiting while it
        // answers a status (its commands are long), else give up on it.
        func stalled() throws(HostFailure) {
            guard !ServerConnection.answersStatus(at: socket, within: Self.answerTime) else { return }
            throw HostFailure(
                .serverUnreachable,
                "the server at \(socket) answered none of the \(counted(names.count, "command")) this client waits on within \(Self.answerTime.spoken), nor a 'status' within as long: it is stopped (SIGSTOP?), overloaded or stuck; its log may say why; what it took may still run if it resumes ('cmdbus journal list' tells)"
            )
        }
        func answer() throws(HostFailure) {
            while !connection.hasAnswer(within: Self.answerTime) { try stalled() }
            let response = try connection.receive()
            // A refusal of the connection itself (no descriptor free) answers no request: its id is null.
            if response["id"] == .null, response["ok"] == .bool(false) { throw Self.failure(response, command: nil) }
            guard case .integer(let tag)? = response["id"], let name = names.removeValue(forKey: tag) else { return }
            var outcome = CommandOutcome(tag: Int(tag), command: name, state: op == "post" ? .pending : .succeeded)
            outcome.id = response["commandId"]?.stringValue.flatMap(UUID.init(uuidString:))
            if response["ok"] == .bool(true) {
                if op == "send" { outcome.result = (response["result"] ?? .null).data }
            } else {
                let error = response["error"]?.objectValue ?? [:]
                let code = error["code"]?.stringValue ?? "handlerFailed"
                outcome.error = (code, error["message"]?.stringValue ?? "")
                outcome.state = code == "timedOut" ? .timedOut : code == "cancelled" ? .cancelled : .failed
            }
            onOutcome(outcome)
        }
        while let request = next() {
            while names.count >= concurrency { try answer() }
            var fields = Self.fields(of: request, op: op)
            fields["id"] = .integer(Int64(request.tag))
            if op == "send" { fields["cancelOnDisconnect"] = .bool(true) }
            names[Int64(request.tag)] = request.name
            try connection.send(.object(fields), stalledFor: Self.answerTime, stalled)
        }
        while !names.isEmpty { try answer() }
    }

    package func canHandle(_ name: String, payload: Data) async throws(HostFailure) -> Bool {
        let response = try await request(["op": .string("can"), "command": .string(name), "payload": Self.json(payload)])
        guard response["ok"] == .bool(true) else { throw Self.failure(response, command: name) }
        return response["canHandle"] == .bool(true)
    }

    package func noHandler(_ command: String) -> HostFailure {
        HostFailure(.noHandler, "no handler for command \(quoted(command)) would take it now (server at \(socket))", command: command)
    }

    package func cancel(_ id: UUID) async throws(HostFailure) -> Bool {
        let response = try await request(["op": .string("cancel"), "commandId": .string(id.uuidString)])
        guard response["ok"] == .bool(true) else { throw Self.failure(response, command: nil) }
        return response["cancelled"] == .bool(true)
    }

    package func plugins() async throws(HostFailure) -> JSONValue {
        let response = try await request(["op": .string("plugins")])
        guard response["ok"] == .bool(true), let catalog = response["catalog"] else { throw Self.failure(response, command: nil) }
        return catalog
    }

    package func status() async throws(HostFailure) -> JSONValue {
        let response = try await request(["op": .string("status")])
        guard response["ok"] == .bool(true), let status = response["status"] else { throw Self.failure(response, command: nil) }
        return status
    }

    package func loadPluginAgain(_ path: String) async throws(HostFailure) -> JSONValue {
        // A probe may take its whole timeout (10 s unless `--probe-timeout`), and a load after it.
        let response = try await request(["op": .string("forget"), "path": .string(path)], answerWithin: nil)
        guard response["ok"] == .bool(true), let plugin = response["plugin"] else { throw Self.failure(response, command: nil) }
        return .object(["path": response["path"] ?? .string(path), "plugin": plugin])
    }

    package func close() async {}

    /// Sends one request (an `id` is added) and returns the response's fields; event lines that
    /// carry the request's id go to `onEvent` on the way.
    /// Cancelling the waiting task (Ctrl-C) shuts the connection, which ends the wait; the server
    /// then cancels a `send` that asked for `cancelOnDisconnect`. So does `answerWithin` passing
    /// without an answer (``answerTime`` unless given; `nil` waits as long as it takes).
    private func request(
        _ request: [String: JSONValue], answerWithin: Duration? = Self.answerTime, onEvent: ([String: JSONValue]) -> Void = { _ in }
    ) async throws(HostFailure) -> [String: JSONValue] {
        let connection = try ServerConnection(socket)
        // Ends the wait by shutting the connection; says whether it did.
        let deadline = answerWithin.map { limit in
            Task { () -> Bool in
                do { try await Task.sleep(for: limit) } catch { return false }
                connection.shutDown()
                return true
            }
        }
        let outcome: Result<[String: JSONValue], HostFailure> = await withTaskCancellationHandler {
            do throws(HostFailure) {
                try connection.send(.object(request.merging(["id": .integer(1)]) { _, new in new }))
                while true {
                    let fields = try connection.receive()
                    // A refusal of the connection itself (no descriptor free) answers no request: its id is null.
                    if fields["id"] == .null, fields["ok"] == .bool(false) { return .success(fields) }
                    guard fields["id"] == .integer(1) else { continue }
                    if case .object(let event)? = fields["event"] { onEvent(event); continue }
                    return .success(fields)
                }
            } catch {
                return .failure(error)
            }
        } onCancel: {
            connection.shutDown()
        }
        deadline?.cancel()
        if case .failure = outcome, let limit = answerWithin, await deadline?.value == true {
            let op = request["op"]?.stringValue ?? "the request"
            let command = request["command"]?.stringValue
            let after = command == nil ? "" : "; the command may still run if it resumes ('cmdbus journal list' tells)"
            throw HostFailure(
                .serverUnreachable,
                "the server at \(socket) did not answer '\(op)' within \(limit.spoken): it is stopped (SIGSTOP?), overloaded or stuck; its log may say why\(after)",
                command: command
            )
        }
        return try outcome.get()
    }

    private static func fields(of request: CommandRequest, op: String) -> [String: JSONValue] {
        var fields: [String: JSONValue] = ["op": .string(op), "command": .string(request.name), "payload": json(request.payload)]
        if !request.metadata.isEmpty { fields["metadata"] = .object(request.metadata.mapValues(JSONValue.string)) }
        if let timeout = request.timeout { fields["timeout"] = .number(timeout.seconds) }
        return fields
    }

    private static func json(_ payload: Data) -> JSONValue {
        let text = String(decoding: payload, as: UTF8.self)
        return JSONValue.parse(text) ?? .string(text)
    }

    /// A failure response as the failure a local run would have had (same code, same exit status).
    fileprivate static func failure(_ fields: [String: JSONValue], command: String?) -> HostFailure {
        guard let error = fields["error"]?.objectValue, let code = error["code"]?.stringValue, let message = error["message"]?.stringValue else {
            return HostFailure(.badResponse, "the server answered something unexpected", command: command)
        }
        // The command's id where the server gave it one, as a local run's error carries it.
        return HostFailure(HostFailure.Code(name: code) ?? .handlerFailed, message, command: command, commandID: fields["commandId"]?.stringValue)
    }
}

/// A connection to a running server for many requests: write some, read their answers as they come.
/// (Unchecked `Sendable`: one task uses it; another may only `shutDown()` it.)
package final class ServerConnection: @unchecked Sendable {
    private let descriptor: Int32
    private let reader: LineSocketReader
    package let socket: String

    package init(_ socket: String) throws(HostFailure) {
        do {
            descriptor = try UnixSocket.connect(to: socket)
        } catch {
            switch error {
            case .failed(let text): throw HostFailure(.serverUnreachable, text)
            case .badPath(let text): throw HostFailure(.serverUnreachable, text)
            case .inUse: throw HostFailure(.serverUnreachable, "cannot connect to \(socket) (is 'cmdbus serve' running?)")
            }
        }
        reader = LineSocketReader(descriptor: descriptor, limit: 1 << 30)
        self.socket = socket
    }

    deinit { close(descriptor) }

    /// Ends the connection both ways from any thread, waking a blocked read (unlike `close`,
    /// which must wait for the reader to be done with the descriptor).
    package func shutDown() { _ = Glibc.shutdown(descriptor, Int32(SHUT_RDWR)) }

    package func send(_ request: JSONValue) throws(HostFailure) {
        try send(request, stalledFor: nil) {}
    }

    /// Writes `request`; each time the server takes none of it for `limit` (it reads nothing),
    /// calls `stalled`, which throws to give up or returns to wait again.
    package func send(_ request: JSONValue, stalledFor limit: Duration?, _ stalled: () throws(HostFailure) -> Void) throws(HostFailure) {
        let bytes = ReplyLine.line(request)
        var offset = 0, written = true
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | (limit == nil ? 0 : Int32(MSG_DONTWAIT)))
            }
            if sent > 0 {
                offset += sent
                continue
            }
            if sent < 0 && errno == EINTR { continue }
            if sent < 0 && errno == EAGAIN, let limit {
                var room = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
                if poll(&room, 1, Int32(clamping: limit.milliseconds)) == 0 { try stalled() }
                continue
            }
            written = false
            break
        }
        guard written else {
            // A server may say why before it closes (it had no descriptor free): its line is still there to read.
            if let fields = try? receive(), fields["ok"] == .bool(false) { throw SocketBusClient.failure(fields, command: nil) }
            throw HostFailure(.serverUnreachable, "the server at \(socket) closed the connection\(Self.afterClosing)")
        }
    }

    /// Whether a response line is here or arrives within `limit`.
    package func hasAnswer(within limit: Duration) -> Bool { reader.hasInput(within: limit) }

    /// Whether the server at `socket` answers a `status` within `limit`: a client whose answers are
    /// slow in coming asks, to tell a server busy with long commands from one stopped or stuck.
    package static func answersStatus(at socket: String, within limit: Duration) -> Bool {
        let giveUp = { () throws(HostFailure) in throw HostFailure(.serverUnreachable, "the server takes no request") }
        guard let connection = try? ServerConnection(socket),
              (try? connection.send(.object(["id": .integer(1), "op": .string("status")]), stalledFor: limit, giveUp)) != nil,
              connection.hasAnswer(within: limit)
        else { return false }
        return (try? connection.receive())?["ok"] == .bool(true)
    }

    /// The next response line's fields.
    /// - Throws: `badResponse` for a line that is not a JSON object: what answers is not a
    ///   `cmdbus serve` (a socket of another program), and reading on would only wait.
    package func receive() throws(HostFailure) -> [String: JSONValue] {
        while let next = reader.next() {
            guard case .text(let bytes) = next else { continue }
            // Every line a server writes is an answer (with "ok") or an event of one (with "event").
            guard case .object(let fields)? = JSONValue.parse(bytes: bytes), fields["ok"] != nil || fields["event"] != nil else {
                let text = String(decoding: bytes.prefix(40), as: UTF8.self)
                throw HostFailure(.badResponse, "what answers at \(socket) does not speak cmdbus's protocol (it sent \(quoted(text))); point --connect at a 'cmdbus serve' socket")
            }
            return fields
        }
        throw HostFailure(.serverUnreachable, "the server at \(socket) closed the connection before answering\(Self.afterClosing)")
    }

    /// What a client told that the server closed the connection can do next.
    static let afterClosing = ": it stopped or crashed (its log says which); what it took may still run when it starts again with its journal ('cmdbus journal list' tells)"
}
