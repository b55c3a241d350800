import CCommandBusABI
import Foundation

/// What a plugin handler gets besides its command: events, logging, cancellation, and subcommands.
///
/// Everything goes through the host's function table, so a subcommand reaches
/// whichever handler the host's bus picks, in any plugin, without linking it.
public struct PluginContext: Sendable {
    let host: HostFunctions
    let call: CallHandle

    /// Whether the host has cancelled this command (or it timed out).
    public var isCancelled: Bool {
        Task.isCancelled || host.isCancelled(call)
    }

    /// Emits an event with a name and a JSON-encodable payload.
    public func emit(_ name: String, _ payload: some Encodable) throws {
        host.emit(call, name, try JSONWire.encoder.encode(payload))
    }

    /// Writes a log line through the host.
    public func log(_ level: PluginLogLevel, _ message: String) {
        host.log(call, level, message)
    }

    /// Sends a subcommand through the host's bus and waits for its result.
    /// - Throws: ``PluginError`` with the status the subcommand ended in.
    public func send<C: PluginCommand>(_ command: C) async throws -> C.Result {
        let payload = try JSONWire.encoder.encode(command)
        let reply = try await send(name: C.name, payload: payload)
        do {
            return try JSONWire.decoder.decode(C.Result.self, from: reply)
        } catch {
            throw PluginError(.decodingFailed, "result of '\(C.name)' does not decode: \(describeDecodingFailure(error))")
        }
    }

    /// Sends a subcommand by name with a JSON payload and returns its JSON result.
    public func send(name: String, payload: Data) async throws -> Data {
        try await host.send(parent: call, name: name, payload: payload)
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
