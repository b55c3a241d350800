import CommandBusSupport
import CommandBusLoading
import CommandBusHost
import CommandBus
import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// The server's requests: each line a client writes, read on the request loop's thread, and
// the response lines it gets.
extension CommandServer {
    /// The response to a `send`: its result, or its error.
    /// - Parameter detail: What a failure's message is followed by (what a "no handler" failure adds).
    static func reply(to id: JSONValue?, ticket: UUID, _ outcome: Result<Data, CommandBusError>, detail: String = "") -> [UInt8] {
        switch outcome {
        case .success(let result):
            let value = JSONValue.parse(bytes: result) ?? .string(String(decoding: result, as: UTF8.self))
            return ReplyLine.succeeded(id, commandID: ticket, result: value)
        case .failure(let error):
            return ReplyLine.line(failure(id, code: HostFailure.Code(error).name, error.message + detail, commandID: ticket))
        }
    }

    /// The answer to a send or a post that ended: a "no handler" failure says which plugin
    /// declined the command, or a near name, as the command line says it in-process.
    func reply(to request: ServerRequest, ticket: UUID, _ outcome: Result<Data, CommandBusError>) -> [UInt8] {
        var detail = ""
        if case .failure(let error) = outcome, error.code == .noHandler, let name = request.command {
            detail = catalog.noHandlerDetail(for: name, registered: session.bus.handlerCount(for: name))
        }
        return Self.reply(to: request.id, ticket: ticket, outcome, detail: detail)
    }

    /// Handles one request line of a client, on the request loop's thread.
    func process(_ line: LineSplitter.Line, on connection: ClientConnection, owned: TicketTable) {
        switch line {
        case .tooLong(let length):
            connection.expectAnswer()
            connection.send(Self.failure(nil, code: "payloadTooLarge", "request line of \(length) bytes is longer than the \(Self.maxLineBytes)-byte limit"))
        case .text(let bytes):
            if bytes.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { return }
            // Every other line gets exactly one answer (events aside), which counts it off.
            connection.expectAnswer()
            do throws(ServerRequest.Malformed) {
                handle(try ServerRequest(line: bytes), on: connection, owned: owned)
            } catch {
                connection.send(Self.failure(error.id, code: "usage", error.message))
            }
        }
    }

    /// Answers one request by its op; each op's work is a method of its own below.
    func handle(_ request: ServerRequest, on connection: ClientConnection, owned: TicketTable) {
        switch request.op {
        case "send", "post": start(request, on: connection, owned: owned)
        case "can": answerCan(request, on: connection)
        case "cancel":
            guard let id = request.commandId else {
                return connection.send(Self.failure(request.id, code: "usage", "cancel needs \"commandId\""))
            }
            connection.send(Self.success(request.id, ["cancelled": .bool(cancel(id))]))
        case "status": answerStatus(request, on: connection)
        case "plugins":
            let catalog = watcher?.catalog ?? session.catalog
            connection.send(Self.success(request.id, ["plugins": .array(catalog.plugins.map(PluginCatalog.json)), "catalog": catalog.json]))
        case "forget": loadAgain(request, on: connection)
        case "subscribe": subscribe(request, on: connection)
        default:
            connection.send(Self.failure(request.id, code: "usage", "unknown op \(quoted(request.op)); ops are \(ServerRequest.ops.joined(separator: ", "))"))
        }
    }

    /// A `send` or a `post`: the command starts; a send is answered when it ends, a post once it is taken.
    func start(_ request: ServerRequest, on connection: ClientConnection, owned: TicketTable) {
        let bus = session.bus
        guard !draining.load(ordering: .acquiring) else {
            return connection.send(Self.failure(request.id, code: HostFailure.Code.serverShuttingDown.name, "the server is shutting down and takes no new commands"))
        }
        guard let name = request.command else { return connection.send(Self.failure(request.id, code: "usage", "\(request.op) needs \"command\"")) }
        var metadata = request.metadata ?? [:]
        if let trace = request.traceparent { metadata[TraceContext.key] = trace }
        if let trace = metadata[TraceContext.key], !TraceContext.isValid(trace) {
            return connection.send(Self.failure(request.id, code: "usage", TraceContext.problem(trace)))
        }
        let payload = (request.payload ?? .object([:])).data
        // The request refuses a timeout of 0 or less, and one whose milliseconds would not fit;
        // one under a millisecond is a millisecond, as on the command line.
        let timeout = request.timeout.map { Duration.positive(seconds: $0) }
        // Subscribed before the command starts, so none of its events is missed, and to its own
        // tree's alone: following every event of a busy bus, the follower fell behind, the
        // buffer dropped this command's end, and its reply never came.
        let envelope = request.op == "send" && request.events == true ? CommandEnvelope(commandName: name, metadata: metadata) : nil
        let events = envelope.map { bus.events(matching: .correlation($0.id), bufferingPolicy: .bufferingNewest(10_000)) }
        // A plain send the loop can run itself wakes no other thread (see InlineSends).
        let inline = events == nil && request.op == "send" && inlineSends.admits(name)
        let started = inline ? inlineSends.start() : nil
        if request.op == "send" { inlineSends.count(onLoop: inline) }
        let ticket = bus.post(
            name: name, payload: payload, metadata: metadata, timeout: timeout, envelope: envelope, preferring: inline ? inlineSends.executor : nil
        )
        connection.startedCommand()
        if request.op == "post" {
            running.track(ticket)
            acknowledge(request, ticket: ticket, on: connection)
            return
        }
        running.insert(ticket)
        if request.cancelOnDisconnect == true { owned.insert(ticket) }
        guard let events else {
            // No task waits for the result: the reply is built and written by whoever ends the command.
            return ticket.whenFinished { [self, running, inlineSends, log] outcome in
                if let started, let held = inlineSends.finished(name, started) {
                    log(.warning, "a send of \(quoted(name)) held the request loop (\(held.milliseconds) ms from start to end), so a new thread took the loop over; its sends run on the runners for the next \(InlineSends.probation.milliseconds / 1_000) s")
                }
                owned.remove(ticket.id)
                connection.send(line: reply(to: request, ticket: ticket.id, outcome))
                // After the answer is out: a drain waits for `running` to empty before the server exits.
                running.remove(ticket.id)
            }
        }
        let forwarding = Task {
            await events.follow(ticket.id) { event in connection.sendEvent(.object(["id": request.id ?? .null, "event": event.json])) }
        }
        Task { [self, running] in
            let outcome: Result<Data, CommandBusError>
            do throws(CommandBusError) { outcome = .success(try await ticket.result) } catch { outcome = .failure(error) }
            let reply = reply(to: request, ticket: ticket.id, outcome)
            owned.remove(ticket.id)
            await forwarding.value
            connection.send(line: reply)
            running.remove(ticket.id)
        }
    }

    /// A `can`: whether some handler would take the command now, asked in full (in a worker, for an isolated plugin).
    func answerCan(_ request: ServerRequest, on connection: ClientConnection) {
        let bus = session.bus
        guard let name = request.command else { return connection.send(Self.failure(request.id, code: "usage", "can needs \"command\"")) }
        let payload = (request.payload ?? .object([:])).data
        Task { [bus] in
            do throws(CommandBusError) {
                // The full answer: an isolated plugin's can_handle() is asked in its worker.
                let answer = try await bus.wouldHandle(name: name, payload: payload)
                connection.send(Self.success(request.id, ["canHandle": .bool(answer)]))
            } catch {
                connection.send(Self.failure(request.id, code: HostFailure.Code(error).name, error.message))
            }
        }
    }

    /// A `status`: uptime, work and latencies, the oldest in flight, bounds, the process, and what is quarantined.
    func answerStatus(_ request: ServerRequest, on connection: ClientConnection) {
        var status = statistics.summary(uptime: .now - started, plugins: plugins.count).objectValue ?? [:]
        status["oldestInFlight"] = Self.oldest(running.all, count: 5)
        let bounds = bounds
        status["maxInFlight"] = .integer(Int64(bounds.maxInFlight))
        status["maxInFlightReached"] = .integer(Int64(bounds.timesHeldBack))
        status["subscriptions"] = .integer(Int64(bounds.subscriptions))
        if let process = ProcessFigures.now() {
            status["residentBytes"] = .integer(Int64(process.residentBytes))
            status["openDescriptors"] = .integer(Int64(process.openDescriptors))
            status["maxDescriptors"] = .integer(Int64(process.maxDescriptors))
            status["threads"] = .integer(Int64(process.threads))
        }
        if let problem = journalFile?.problem { status["journalProblem"] = .string(problem) }
        let quarantined = PluginCatalog.quarantined(plugins)
        if !quarantined.isEmpty { status["quarantined"] = .array(quarantined) }
        connection.send(Self.success(request.id, ["status": .object(status)]))
    }

    /// A `forget`: the plugin file loaded again, lifting its quarantine (``loadPluginAgain(_:)``).
    func loadAgain(_ request: ServerRequest, on connection: ClientConnection) {
        guard let path = request.path, path.hasPrefix("/") || (!path.contains("/") && !path.isEmpty) else {
            return connection.send(Self.failure(request.id, code: "usage", "forget needs \"path\": a plugin file's absolute path, as 'cmdbus plugins' lists it, or its name"))
        }
        Task { [self] in
            switch await loadPluginAgain(path) {
            case .success(let plugin):
                connection.send(Self.success(request.id, ["path": .string(plugin.path), "plugin": PluginCatalog.json(plugin)]))
            case .failure(let skipped):
                connection.send(Self.failure(request.id, code: HostFailure.Code.pluginFailed.name, skipped.message))
            }
        }
    }

    /// A `subscribe`: the state of a command or tree once subscribed, then its events as they come.
    func subscribe(_ request: ServerRequest, on connection: ClientConnection) {
        let bus = session.bus
        let filter: EventFilter
        if let id = request.commandId { filter = .command(id) }
        else if let id = request.correlationId { filter = .correlation(id) }
        else { return connection.send(Self.failure(request.id, code: "usage", "subscribe needs \"commandId\" or \"correlationId\"")) }
        let events = bus.events(matching: filter, bufferingPolicy: .bufferingNewest(10_000))
        connection.expectEvents()
        subscriptions.add(1, ordering: .relaxed)
        let subscription = Task { [self, running, log, journal = session.journal as (any Journal)?] in
            defer { subscriptions.subtract(1, ordering: .relaxed) }
            // The state once subscribed: a command that has ended sends no event again, and a
            // subscriber told nothing else waited for one for ever.
            var answer: [String: JSONValue] = ["subscribed": .bool(true)]
            // A tree's correlation id is its root's id: the root's state says whether the tree ended.
            var state: CommandState?
            if let id = request.commandId ?? request.correlationId {
                state = await Self.state(of: id, running: running, journal: journal, log: log)
            }
            if let state { answer["state"] = .string(state.rawValue) }
            connection.send(Self.success(request.id, answer))
            // A command the answer says has ended sends nothing after it: its ending, which can
            // reach the stream while the state is read, would tell the client twice (2 to 16 of
            // 300 subscriptions made as their posts were answered did so).
            if request.commandId != nil, state?.isTerminal == true { return }
            for await event in events {
                guard !connection.isClosed else { break }
                connection.sendEvent(.object(["id": request.id ?? .null, "event": event.json]))
            }
        }
        // A client that goes away ends its streams: each held a subscriber of the bus (and
        // 7 KB) until an event of its command came, for ever for a command that had ended.
        connection.onClose { subscription.cancel() }
    }

    /// The `count` commands in flight here the longest, oldest first, for `status`: what an
    /// operator would look at, or cancel, first. One pass over the table, however large.
    static func oldest(_ tickets: [CommandTicket<Data>], count: Int) -> JSONValue {
        var oldest: [CommandTicket<Data>] = []
        for ticket in tickets where !ticket.state.isTerminal {
            guard oldest.count < count || ticket.envelope.createdAt < oldest[count - 1].envelope.createdAt else { continue }
            oldest.insert(ticket, at: oldest.firstIndex { ticket.envelope.createdAt < $0.envelope.createdAt } ?? oldest.endIndex)
            if oldest.count > count { oldest.removeLast() }
        }
        let now = Date.now
        return .array(oldest.map { ticket in
            .object([
                "commandId": .string(ticket.id.uuidString), "command": .string(ticket.envelope.commandName),
                "state": .string(ticket.state.rawValue), "ageSeconds": .number(max(0, now.timeIntervalSince(ticket.envelope.createdAt))),
            ])
        })
    }

    /// A command's state as this server knows it: a client's command in flight here, or the
    /// journal's entry; `nil` for one it has no word of.
    static func state(of id: UUID, running: TicketTable, journal: (any Journal)?, log: ServerLog) async -> CommandState? {
        if let ticket = running.ticket(id) { return ticket.state }
        guard let journal else { return nil }
        // A read that fails must not answer as if the server had no word of the command: it is
        // tried again, then said in the log.
        for attempt in 1...3 {
            do throws(CommandBusError) {
                return try await journal.record(id)?.state
            } catch {
                guard attempt < 3 else {
                    log(.warning, "subscribe: could not read the state of \(id) from the journal (\(error.message)); answered without one")
                    return nil
                }
                try? await Task.sleep(for: .milliseconds(10 * attempt))
            }
        }
        return nil
    }

    /// Acknowledges a post once the journal has its write-ahead (at once without a journal), so
    /// a server that dies after an acknowledgement runs the command on recovery; or, if the
    /// client asked for `"ack": "received"`, at once, without that promise. A post no handler
    /// takes is refused either way, once the journal has it as a dead letter.
    func acknowledge(_ request: ServerRequest, ticket: CommandTicket<Data>, on connection: ClientConnection) {
        if request.acknowledge == .received && ticket.isRouted {
            return connection.send(line: ReplyLine.accepted(request.id, commandID: ticket.id))
        }
        // A commit acknowledges many posts at once: they leave together (`sendSoon`).
        ticket.whenWrittenAhead { written in
            switch written {
            case .success: connection.sendSoon(line: ReplyLine.accepted(request.id, commandID: ticket.id))
            case .failure(let error): connection.sendSoon(line: self.reply(to: request, ticket: ticket.id, .failure(error)))
            }
        }
    }

    /// A response line's fields for a request that succeeded: `fields`, with its `id` and `"ok": true`.
    package static func success(_ id: JSONValue?, _ fields: [String: JSONValue]) -> JSONValue {
        .object(fields.merging(["id": id ?? .null, "ok": .bool(true)]) { _, new in new })
    }

    /// A response line for a request that failed: its `id`, `"ok": false`, and the error's code
    /// and message (with the command's id, if it has one).
    package static func failure(_ id: JSONValue?, code: String, _ message: String, commandID: UUID? = nil) -> JSONValue {
        var fields: [String: JSONValue] = ["id": id ?? .null, "ok": .bool(false), "error": .object(["code": .string(code), "message": .string(message)])]
        if let commandID { fields["commandId"] = .string(commandID.uuidString) }
        return .object(fields)
    }
}
