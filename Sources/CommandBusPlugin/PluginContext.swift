import CCommandBusABI
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What a plugin handler gets besides its command: events, logging, cancellation, and subcommands.
///
/// Everything goes through the host's function table, so a subcommand reaches
/// whichever handler the host's bus picks, in any plugin, without linking it.
public struct PluginContext: Sendable {
    /// The host and the call handle; `nil` for a context made by ``detached()``.
    let host: (functions: HostFunctions, call: CallHandle)?

    init(host: HostFunctions, call: CallHandle) {
        self.host = (host, call)
    }

    private init() {
        host = nil
    }

    /// A context with no host behind it, for a plugin's own unit tests: events and logs
    /// go nowhere, and subcommands fail with `noHandler`.
    public static func detached() -> PluginContext {
        PluginContext()
    }

    /// The envelope of the command being handled: its id (the idempotency key; delivery is at
    /// least once), its correlation and parent ids, and its metadata. `nil` from a host older
    /// than ABI 1.2, or in a detached context.
    public func envelope() -> PluginEnvelope? {
        guard let host, let json = host.functions.envelope(host.call) else { return nil }
        return try? JSONWire.decode(PluginEnvelope.self, from: json)
    }

    /// Whether the host has cancelled this command (or it timed out).
    public var isCancelled: Bool {
        Task.isCancelled || (host.map { $0.functions.isCancelled($0.call) } ?? false)
    }

    /// Emits an event with a name and a JSON-encodable payload.
    public func emit(_ name: String, _ payload: some Encodable) throws {
        let data = try JSONWire.encode(payload)
        if let host { host.functions.emit(host.call, name, data) }
    }

    /// Reports how far the command has got: `done` of `total` units. The CLI's progress line and
    /// the dashboard show it; without it, they show how many subcommands have finished.
    /// Ignored by a host older than ABI 1.3, and when `total` is not positive.
    public func progress(done: Int, total: Int) {
        guard total > 0, let host else { return }
        host.functions.progress(host.call, done: min(max(done, 0), total), total: total)
    }

    /// Writes a log line through the host.
    public func log(_ level: PluginLogLevel, _ message: String) {
        if let host { host.functions.log(host.call, level, message) }
    }

    /// Sends a subcommand through the host's bus and waits for its result.
    /// - Throws: ``PluginError`` with the status the subcommand ended in.
    public func send<C: PluginCommand>(_ command: C) async throws -> C.Result {
        let payload = try JSONWire.encode(command)
        let reply = try await send(name: C.name, payload: payload)
        do {
            return try JSONWire.decode(C.Result.self, from: reply)
        } catch {
            throw PluginError(.decodingFailed, "result of '\(C.name)' does not decode: \(describeDecodingFailure(error))")
        }
    }

    /// Sends a subcommand by name with a JSON payload and returns its JSON result.
    public func send(name: String, payload: Data) async throws -> Data {
        guard let host else { throw PluginError(.noHandler, "no host: '\(name)' cannot be sent from a detached context") }
        return try await host.functions.send(parent: host.call, name: name, payload: payload)
    }
}

/// The severity of a plugin's log line.
public enum PluginLogLevel: Int32, Sendable {
    /// Detailed tracing.
    case debug = 0
    /// Normal operation.
    case info = 1
    /// Something unexpected that the command survived.
    case warning = 2
    /// Something failed.
    case error = 3
}

/// A command's envelope as a plugin sees it.
public struct PluginEnvelope: Codable, Sendable, Hashable {
    /// The command's id: the idempotency key.
    public let id: UUID
    /// The command's routing name.
    public let command: String
    /// The id shared by the whole tree of commands.
    public let correlationID: UUID
    /// The parent command's id, for a subcommand.
    public let parentID: UUID?
    /// String metadata.
    public let metadata: [String: String]?

    private enum CodingKeys: String, CodingKey {
        case id, command, correlationID = "correlationId", parentID = "parentId", metadata
    }
}
