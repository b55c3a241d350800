import CommandBus
import CommandBusSupport
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What a front end (the CLI, later a dashboard) asks of a bus, wherever the bus runs.
///
/// Two implementations: ``LocalBusClient`` runs the bus in this process; the socket client
/// (`CommandBusServer`) asks a running `cmdbus serve`. A subcommand written against this
/// protocol prints the same thing, and exits the same way, in both.
///
/// ```swift
/// let client: any BusClient = try await LocalBusClient.start(plugins: .init(), journal: .init(), console: console)
/// let result = try await client.send(CommandRequest(name: "greet", payload: Data(#"{"name":"Ada"}"#.utf8)), onEvent: nil)
/// ```
package protocol BusClient: Sendable {
    /// Runs one command and returns its JSON result; its events (and its subcommands') go to
    /// `onEvent`, in order, before this returns.
    func send(_ request: CommandRequest, onEvent: (@Sendable ([String: JSONValue]) -> Void)?) async throws(HostFailure) -> Data
    /// Submits one command and returns its id without waiting for it.
    func post(_ request: CommandRequest) async throws(HostFailure) -> UUID
    /// Runs the requests `next` hands out, at most `concurrency` at once, and reports each outcome
    /// as it finishes. `next` returns `nil` at the end.
    func sendAll(
        concurrency: Int, next: @escaping () -> CommandRequest?, onOutcome: @escaping (CommandOutcome) -> Void
    ) async throws(HostFailure)
    /// Posts the requests `next` hands out, at most `concurrency` unacknowledged at once, and
    /// reports each as `pending` once the bus has it, or `failed` with why not. `next` returns
    /// `nil` at the end; `isNextReady` says whether it would return without waiting for input,
    /// so that a client may post what is ready together.
    func postAll(
        concurrency: Int, next: @escaping () -> CommandRequest?, isNextReady: @escaping () -> Bool,
        onOutcome: @escaping (CommandOutcome) -> Void
    ) async throws(HostFailure)
    /// Whether some handler would take the command now; runs nothing.
    func canHandle(_ name: String, payload: Data) async throws(HostFailure) -> Bool
    /// The failure to report when no handler would take `command`, naming what is loaded.
    func noHandler(_ command: String) -> HostFailure
    /// Cancels a command by id; `false` if no such command is running.
    func cancel(_ id: UUID) async throws(HostFailure) -> Bool
    /// The plugin catalog: directories, plugins, routes and skipped files (`PluginCatalog.json`).
    func plugins() async throws(HostFailure) -> JSONValue
    /// Uptime, plugins, work in flight, counts and latencies per command name (`BusStatistics`).
    func status() async throws(HostFailure) -> JSONValue
    /// Of `names`, those no host handles now, whose posts wait (``namesNoHostHandles(_:)``'s default says none).
    func namesNoHostHandles(_ names: Set<String>) async -> [String]
    /// Of `names`, those paused on the shared bus (`cmdbus bus pause`), whose posts wait for a resume (none by default).
    func namesPaused(_ names: Set<String>) async -> [String]
    /// Has the host forget what it concluded about a plugin file and load it again now, changed
    /// or not: a file the probe quarantined is probed again, and an isolated plugin quarantined
    /// for crashing gets a new worker with no crashes counted. Returns `{"path": FILE,
    /// "plugin": {...}}` (``PluginCatalog/json(_:)``), or throws why the file did not load; the
    /// shared bus, whose hosts each have their own files, `{"file", "hosts": [...]}`, each host's
    /// answer.
    func loadPluginAgain(_ path: String) async throws(HostFailure) -> JSONValue
    /// Waits until everything written is durable and lets go of the bus.
    func close() async
}

extension BusClient {
    /// Of `names`, those a post waits for a host to handle: no host on the bus handles them now,
    /// and a post of one stays pending until one that does joins. Only a shared bus keeps such
    /// posts; a bus of one process or server refuses them (`noHandler`), so none here.
    package func namesNoHostHandles(_ names: Set<String>) async -> [String] { [] }

    /// Of `names`, those paused: only the shared bus pauses names, so none here.
    package func namesPaused(_ names: Set<String>) async -> [String] { [] }

    /// Only a running server holds plugins to load again; a bus in this process loads every
    /// file anew each run (`cmdbus plugins forget FILE` drops its cached verdict).
    package func loadPluginAgain(_ path: String) async throws(HostFailure) -> JSONValue {
        throw HostFailure(.usage, "only a running server loads a plugin file again; name it with --connect SOCKET, or leave --connect out to drop the file's cached probe verdict here")
    }
}

/// One command to run: its name, JSON payload, envelope metadata and deadline.
package struct CommandRequest: Sendable {
    /// The command's name.
    package var name: String
    /// The command's JSON payload.
    package var payload: Data
    /// Envelope metadata.
    package var metadata: [String: String]
    /// A deadline, after which the command ends `timedOut`.
    package var timeout: Duration?
    /// How long to wait before the command may start (`run --delay`).
    package var delay: Duration?
    /// The caller's tag for the request, handed back in its ``CommandOutcome`` (a batch's line number).
    package var tag: Int
    /// Where it stands in the shared bus's queue: hosts claim higher priorities first
    /// (``priorities``; 0 unless given). Only the shared bus has a queue to order.
    package var priority = 0

    /// How many times the shared bus runs it at most (after retryable failures, or hosts lost
    /// while it ran); `nil` for the bus's default.
    package var maxAttempts: Int?

    /// The priorities a person may give a command (`--priority`): below a `can`'s probe, which goes first.
    package static let priorities = -1000...1000

    /// A request for `name` with `payload`.
    package init(name: String, payload: Data, metadata: [String: String] = [:], timeout: Duration? = nil, delay: Duration? = nil, tag: Int = 0) {
        self.delay = delay
        self.name = name
        self.payload = payload
        self.metadata = metadata
        self.timeout = timeout
        self.tag = tag
    }
}

/// How one command of ``BusClient/sendAll(concurrency:next:onOutcome:)`` ended.
package struct CommandOutcome: Sendable {
    /// The request's tag.
    package var tag: Int
    /// The command's id, once the bus gave it one.
    package var id: UUID?
    /// The command's name.
    package var command: String
    /// The final state.
    package var state: CommandState
    /// The JSON result, if it succeeded.
    package var result: Data?
    /// The error's code and message, if it did not.
    package var error: (code: String, message: String)?

    /// An outcome of command `command`, tagged `tag`, in `state`.
    package init(tag: Int, id: UUID? = nil, command: String, state: CommandState) {
        self.tag = tag
        self.id = id
        self.command = command
        self.state = state
    }

    /// The outcome as the NDJSON line `cmdbus batch` prints.
    package var json: JSONValue {
        var fields: [String: JSONValue] = ["line": .integer(Int64(tag)), "command": .string(command), "state": .string(state.rawValue)]
        if let id { fields["id"] = .string(id.uuidString) }
        if let result {
            let text = String(decoding: result, as: UTF8.self)
            fields["result"] = JSONValue.parse(text) ?? .string(text)
        }
        if let error { fields["error"] = .object(["code": .string(error.code), "message": .string(error.message)]) }
        return .object(fields)
    }
}

extension Duration {
    /// The duration in seconds, as the socket protocol carries deadlines.
    package var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
