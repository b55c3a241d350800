import CommandBusSupport
import CommandBusLoading
import CommandBusHost
import CommandBusHTTP
import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The JSON API under `/api/`, which the page itself uses (README: "Dashboard API").
extension Dashboard {
    func api(_ request: HTTPRequest, _ parts: [String]) async -> HTTPResponse {
        let response = await route(api: request, parts)
        // An action changes what the hosts page shows: the next look reads the bus anew.
        if request.method == "POST" { sharedBusStatus?.forget() }
        return response
    }

    private func route(api request: HTTPRequest, _ parts: [String]) async -> HTTPResponse {
        switch (request.method, parts.first, parts.count) {
        case ("GET", "overview", 1): return Self.ok(overview())
        case ("GET", "commands", 1): return await commands(request)
        case ("GET", "commands", 2): return await command(parts[1])
        case ("POST", "commands", 3) where parts[2] == "retry": return await retry(parts[1])
        case ("POST", "commands", 3) where parts[2] == "discard": return await discard(parts[1])
        case ("POST", "commands", 3) where parts[2] == "cancel": return await cancel(parts[1])
        case ("POST", "queues", 3) where parts[2] == "pause" || parts[2] == "resume": return await setPaused(parts[1], parts[2] == "pause")
        case ("POST", "queues", 3) where parts[2] == "cancel": return await cancelWaiting(parts[1])
        case ("POST", "queues", 3) where parts[2] == "limit": return await setLimit(parts[1], request)
        case ("POST", "periodic", 3): return await periodic(parts[1], parts[2])
        case ("GET", "dead-letters", 1): return await deadLetters(request)
        case ("GET", "plugins", 1): return Self.ok(plugins())
        case ("POST", "plugins", 2) where parts[1] == "forget": return await loadPluginAgain(request)
        case ("POST", "hosts", 2) where parts[1] == "forget": return await loadPluginAgainOnBus(request)
        case ("GET", "hosts", 1): return Self.ok(await sharedBusStatus?.current() ?? .object(["shared": .bool(false)]))
        case ("GET", "events", 1):
            return HTTPResponse(status: 200, headers: [("Content-Type", "text/event-stream")], body: .stream(feed.subscribe()))
        case (let method, _, _) where method != "GET" && method != "POST":
            return Self.problem(405, "\(method) is not supported on /api/; use GET, or POST for retry, discard, cancel, pause, resume, limit, run and forget")
        default:
            return Self.problem(404, "no API at \(request.path); see the README's Dashboard API")
        }
    }

    // MARK: Reading

    /// How many ended commands the overview's feed shows.
    static let feedLength = 40

    func overview() -> JSONValue {
        let catalog = sources.catalog()
        let summary = sources.statistics.summary(uptime: .zero, plugins: catalog.plugins.count)
        var latencies: [String: JSONValue] = [:]
        if case .object(let fields) = summary, case .object(let commands)? = fields["commands"] { latencies = commands }
        let names: [JSONValue] = sources.metrics.names.map { name, counts in
            var fields: [String: JSONValue] = ["command": .string(name), "count": .integer(Int64(counts.histogram.count))]
            for state in [CommandState.succeeded, .failed, .cancelled, .timedOut] {
                fields[state.rawValue] = .integer(Int64(counts.outcomes[state] ?? 0))
            }
            if case .object(let latency)? = latencies[name] {
                fields["p50Ms"] = latency["p50Ms"] ?? .null
                fields["p99Ms"] = latency["p99Ms"] ?? .null
            }
            return .object(fields)
        }
        let files = PluginFileCounts(catalog)
        return .object([
            "uptimeSeconds": .number(roundedSeconds(uptime)), "inFlight": .integer(Int64(sources.metrics.inFlight)),
            "totals": Self.totals(sources.statistics),
            "plugins": .object([
                "loaded": .integer(Int64(files.loaded)), "quarantined": .integer(Int64(files.quarantined)),
                "skipped": .integer(Int64(files.skipped)),
            ]),
            "commands": .array(names),
            "lastEnded": .array(sources.metrics.lastEnded(Self.feedLength).map(Self.json)),
            "history": .array(sources.metrics.history(seconds: 300).map(Self.json)),
            "journal": .bool(sources.journal != nil), "shared": .bool(sources.sharedBus != nil),
            "streams": .integer(Int64(feed.subscriberCount)),
        ])
    }

    private func commands(_ request: HTTPRequest) async -> HTTPResponse {
        guard let journal = sources.journal else { return Self.noJournal }
        var query = JournalQuery(newestFirst: true)
        for name in (request.parameter("state") ?? "").split(separator: ",") {
            guard let state = CommandState(rawValue: String(name)) else {
                return Self.problem(400, "state \(quoted(name)) is not one of \(CommandState.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            query.states.insert(state)
        }
        if let name = request.parameter("command"), !name.isEmpty { query.commandName = name }
        if let before = request.parameter("before"), !before.isEmpty {
            guard let sequence = Int64(before), sequence > 0 else { return Self.problem(400, "before takes an entry number") }
            query.throughSequence = sequence - 1
        }
        if let since = request.parameter("since"), !since.isEmpty {
            guard let seconds = Double(since), seconds >= 0, seconds.isFinite else { return Self.problem(400, "since takes seconds since 1970") }
            query.createdSince = Date(timeIntervalSince1970: seconds)
        }
        guard let limit = Self.limit(request, default: 50) else { return Self.badLimit }
        query.limit = limit
        if let search = request.parameter("id"), !search.isEmpty {
            guard let id = UUID(uuidString: String(Substring(search).trimmingSpaces)) else {
                return Self.problem(400, "\(quoted(search)) is not a command id (a UUID)")
            }
            do throws(CommandBusError) {
                let record = try await journal.record(id)
                return Self.ok(.object(["commands": .array(record.map { [Self.row($0)] } ?? [])]))
            } catch {
                return Self.problem(500, error.message)
            }
        }
        do throws(CommandBusError) {
            let records = try await journal.records(query)
            return Self.ok(.object(["commands": .array(records.map(Self.row))]))
        } catch {
            return Self.problem(500, error.message)
        }
    }

    /// One line of a command list: no payload or result, which can be large.
    static func row(_ record: JournalRecord) -> JSONValue {
        var fields: [String: JSONValue] = [
            "sequence": .integer(record.sequence), "id": .string(record.envelope.id.uuidString),
            "command": .string(record.envelope.commandName), "state": .string(record.state.rawValue),
            "attempts": .integer(Int64(record.attempts)), "createdAt": .number(record.envelope.createdAt.timeIntervalSince1970),
            "updatedAt": .number(record.updatedAt.timeIntervalSince1970), "parentId": .optional(record.envelope.parentID?.uuidString),
            "error": .optional(record.errorMessage), "errorCode": .optional(record.errorCode),
            "discarded": .bool(record.discardedAt != nil),
        ]
        if let started = record.startedAt, let finished = record.finishedAt {
            fields["durationMs"] = .number(roundedMilliseconds(finished.timeIntervalSince(started)))
        } else if let started = record.startedAt, record.state == .running {
            // How long it has run so far, by this host's clock (the browser's may differ).
            fields["elapsedMs"] = .number(roundedMilliseconds(max(0, Date.now.timeIntervalSince(started))))
        }
        return .object(fields)
    }

    private func command(_ text: String) async -> HTTPResponse {
        guard let journal = sources.journal else { return Self.noJournal }
        guard let id = UUID(uuidString: text) else { return Self.problem(400, "\(quoted(text)) is not a command id (a UUID)") }
        do throws(CommandBusError) {
            guard let record = try await journal.record(id) else {
                return Self.problem(404, "the journal has no command \(id)")
            }
            let family = try await journal.records(JournalQuery(correlationID: record.envelope.correlationID))
            let routes = sources.catalog().routes
            let tree = CommandTree(root: id, records: family)?.json { name in routes.first { $0.command == name }?.plugins.first?.name }
            var fields: [String: JSONValue] = [
                "record": record.json, "tree": tree ?? .null, "events": .array(events.events(of: id)),
                "rootId": .string(record.envelope.correlationID.uuidString),
                "traceparent": .optional(record.envelope.metadata["traceparent"]),
                // A tree of work is cancelled from its root, which cancels its subcommands.
                "canCancel": .bool(sources.cancel != nil && !record.state.isTerminal && record.envelope.parentID == nil),
            ]
            if let route = routes.first(where: { $0.command == record.envelope.commandName })?.plugins.first {
                fields["plugin"] = .object(["name": .string(route.name), "path": .string(route.path)])
            }
            return Self.ok(.object(fields))
        } catch {
            return Self.problem(500, error.message)
        }
    }

    private func deadLetters(_ request: HTTPRequest) async -> HTTPResponse {
        guard let journal = sources.journal else { return Self.noJournal }
        guard let limit = Self.limit(request, default: 100) else { return Self.badLimit }
        do throws(CommandBusError) {
            // Page back past discarded ones until the page is full or the journal runs out.
            var query = JournalQuery(states: [.failed, .cancelled, .timedOut], limit: limit * 4, newestFirst: true)
            var live: [JournalRecord] = []
            while live.count < limit {
                let records = try await journal.records(query)
                live += records.lazy.filter { $0.discardedAt == nil }.prefix(limit - live.count)
                guard records.count == query.limit, let oldest = records.last else { break }
                query.throughSequence = oldest.sequence - 1
            }
            return Self.ok(.object(["deadLetters": .array(live.map(Self.row)), "canDiscard": .bool(sources.discard != nil)]))
        } catch {
            return Self.problem(500, error.message)
        }
    }

    func plugins() -> JSONValue {
        let catalog = sources.catalog()
        let workers: [JSONValue] = catalog.plugins.compactMap { plugin in
            guard let worker = plugin.worker, case .object(var fields) = PluginCatalog.worker(worker) else { return nil }
            fields["name"] = .string(plugin.name)
            fields["path"] = .string(plugin.path)
            return .object(fields)
        }
        return .object(["catalog": catalog.json, "workers": .array(workers), "loadsAgain": .bool(sources.loadPluginAgain != nil)])
    }

    // MARK: Changing

    /// `POST /api/plugins/forget?path=FILE`: the file loaded again, as `cmdbus plugins forget FILE --connect` has it.
    private func loadPluginAgain(_ request: HTTPRequest) async -> HTTPResponse {
        guard let loadPluginAgain = sources.loadPluginAgain else { return Self.problem(409, "this host does not load plugin files again") }
        guard let path = request.parameter("path"), !path.isEmpty else {
            return Self.problem(400, "name the plugin file by its path, as the plugins page lists it: ?path=plugins/libx.so")
        }
        switch await loadPluginAgain(path) {
        case .success(let plugin): return Self.ok(.object(["path": .string(plugin.path), "plugin": PluginCatalog.json(plugin)]))
        case .failure(let skipped): return Self.problem(422, skipped.message)
        }
    }

    /// `POST /api/hosts/forget?file=NAME`: every live host of the shared bus with a plugin file
    /// of that name loads it again, as `cmdbus plugins forget NAME --bus` has it.
    private func loadPluginAgainOnBus(_ request: HTTPRequest) async -> HTTPResponse {
        guard let loadPluginAgainOnBus = sources.loadPluginAgainOnBus else { return Self.problem(409, "only a host of the shared bus asks the bus's hosts") }
        guard let file = request.parameter("file"), !file.isEmpty, !file.contains("/") else {
            return Self.problem(400, "name the plugin file by its name, as the hosts page lists it: ?file=libx.so")
        }
        do throws(CommandBusError) {
            guard let answers = try await loadPluginAgainOnBus(file) else {
                return Self.problem(404, "no live host of the bus has a plugin file named \(quoted(file))")
            }
            return Self.ok(answers)
        } catch {
            return Self.problem(500, error.message)
        }
    }

    private func retry(_ text: String) async -> HTTPResponse {
        guard let journal = sources.journal else { return Self.noJournal }
        guard let id = UUID(uuidString: text) else { return Self.problem(400, "\(quoted(text)) is not a command id (a UUID)") }
        do throws(CommandBusError) {
            guard let record = try await journal.record(id) else { return Self.problem(404, "the journal has no command \(id)") }
            guard record.state.isDeadLetter else {
                return Self.problem(409, "command \(id) is \(record.state.rawValue); only failed, cancelled or timed-out commands are retried")
            }
            let ticket = sources.bus.resubmit(record)
            return HTTPResponse(status: 202, contentType: "application/json", text: JSONValue.object(["commandId": .string(ticket.id.uuidString)]).text)
        } catch {
            return Self.problem(500, error.message)
        }
    }

    private func discard(_ text: String) async -> HTTPResponse {
        guard let journal = sources.journal else { return Self.noJournal }
        guard let discard = sources.discard else { return Self.problem(409, "this journal cannot discard; dead letters on the shared bus stay listed") }
        guard let id = UUID(uuidString: text) else { return Self.problem(400, "\(quoted(text)) is not a command id (a UUID)") }
        do throws(CommandBusError) {
            guard let record = try await journal.record(id) else { return Self.problem(404, "the journal has no command \(id)") }
            guard record.state.isDeadLetter else {
                return Self.problem(409, "command \(id) is \(record.state.rawValue); only failed, cancelled or timed-out commands are discarded")
            }
            try await discard(id)
            return Self.ok(.object(["discarded": .string(id.uuidString)]))
        } catch {
            return Self.problem(500, error.message)
        }
    }

    private func cancel(_ text: String) async -> HTTPResponse {
        guard let cancel = sources.cancel else { return Self.problem(409, "this host cannot cancel commands") }
        guard let id = UUID(uuidString: text) else { return Self.problem(400, "\(quoted(text)) is not a command id (a UUID)") }
        do throws(CommandBusError) {
            guard try await cancel(id) else {
                return Self.problem(409, "command \(id) is not in flight here: it has ended, or it is a subcommand (cancel its root)")
            }
            return Self.ok(.object(["cancelled": .string(id.uuidString)]))
        } catch {
            return Self.problem(500, error.message)
        }
    }

    private func setPaused(_ name: String, _ paused: Bool) async -> HTTPResponse {
        guard let setPaused = sources.setPaused else { return Self.problem(409, "only a host of the shared bus pauses command names") }
        if let problem = commandNameProblem(name) { return Self.problem(400, problem) }
        do throws(CommandBusError) {
            let changed = try await setPaused(name, paused)
            return Self.ok(.object(["command": .string(name), "paused": .bool(paused), "changed": .bool(changed)]))
        } catch {
            return Self.problem(500, error.message)
        }
    }

    private func cancelWaiting(_ name: String) async -> HTTPResponse {
        guard let cancelWaiting = sources.cancelWaiting else { return Self.problem(409, "only a host of the shared bus cancels a queue") }
        if let problem = commandNameProblem(name) { return Self.problem(400, problem) }
        do throws(CommandBusError) {
            return Self.ok(.object(["command": .string(name), "cancelled": .integer(Int64(try await cancelWaiting(name)))]))
        } catch {
            return Self.problem(500, error.message)
        }
    }

    private func setLimit(_ name: String, _ request: HTTPRequest) async -> HTTPResponse {
        guard let setLimit = sources.setLimit else { return Self.problem(409, "only a host of the shared bus limits command names") }
        if let problem = commandNameProblem(name) { return Self.problem(400, problem) }
        let atOnce = request.parameter("atOnce"), rate = request.parameter("rate")
        guard atOnce != nil || rate != nil else {
            return Self.problem(400, "give atOnce=N (or none) or rate=N/PERIOD (or none), or both: POST /api/queues/\(name)/limit?rate=10/s")
        }
        do throws(CommandBusError) {
            switch try await setLimit(name, atOnce, rate) {
            case .success(let limits): return Self.ok(limits)
            case .failure(let refusal): return Self.problem(400, refusal.message)
            }
        } catch {
            return Self.problem(500, error.message)
        }
    }

    private func periodic(_ name: String, _ operation: String) async -> HTTPResponse {
        guard let periodic = sources.periodic else { return Self.problem(409, "only a host of the shared bus has periodic commands") }
        guard let operation = PeriodicOperation(rawValue: operation) else {
            return Self.problem(404, "no API at /api/periodic/\(name)/\(operation); use pause, resume, run or remove")
        }
        do throws(CommandBusError) {
            guard let done = try await periodic(name, operation) else {
                return Self.problem(404, "there is no periodic \(quoted(name)) ('cmdbus bus periodic' lists them)")
            }
            return Self.ok(done)
        } catch {
            return Self.problem(500, error.message)
        }
    }

    // MARK: Responses

    static func ok(_ value: JSONValue) -> HTTPResponse {
        HTTPResponse(status: 200, contentType: "application/json", text: value.text)
    }

    /// The page size a request asks for (`limit`), kept to 1...500; `fallback` without one; nil
    /// when it is not a whole number, since a typo answered with a default page looks like an answer.
    /// A negative limit would have asked SQLite for every row, and `Int.min` overflowed.
    static func limit(_ request: HTTPRequest, default fallback: Int) -> Int? {
        guard let text = request.parameter("limit"), !text.isEmpty else { return fallback }
        let digits = text.hasPrefix("-") ? text.dropFirst() : Substring(text)
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        guard let limit = Int(text) else { return text.hasPrefix("-") ? 1 : 500 }
        return max(1, min(limit, 500))
    }

    /// The answer to a `limit` that ``limit(_:default:)`` refused.
    static var badLimit: HTTPResponse { problem(400, "limit takes a whole number (1 to 500); ask for a page with e.g. ?limit=50") }

    /// An API error: `{"error": {"status": N, "message": "..."}}`.
    static func problem(_ status: Int, _ message: String) -> HTTPResponse {
        HTTPResponse(status: status, contentType: "application/json", text: JSONValue.object([
            "error": .object(["status": .integer(Int64(status)), "message": .string(message)]),
        ]).text)
    }

    static var noJournal: HTTPResponse {
        problem(409, "this host keeps no journal (it was started with --no-journal); commands are not listed")
    }
}
