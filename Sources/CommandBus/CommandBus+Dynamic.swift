#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension CommandBus {
    /// Sends a command by name with a JSON payload, and returns the JSON result.
    ///
    /// This path reaches the same handlers as the typed one: a typed handler's command
    /// is decoded from the payload, and its result encoded.
    /// - Throws: ``CommandBusError``: `decodingFailed` (naming the field) if the payload does not decode, `noHandler`, …
    public nonisolated(nonsending) func send(
        name: String, payload: Data, metadata: [String: String] = [:], timeout: Duration? = nil
    ) async throws(CommandBusError) -> Data {
        try await sendOnCallersTask(.json(payload), name: name, metadata: metadata, timeout: timeout).jsonData(commandName: name)
    }

    /// Posts a command by name with a JSON payload; the ticket's result is JSON bytes.
    public func post(
        name: String, payload: Data, metadata: [String: String] = [:], timeout: Duration? = nil
    ) -> CommandTicket<Data> {
        CommandTicket(json: post(.json(payload), name: name, parent: nil, metadata: metadata, timeout: timeout))
    }

    /// Posts a command by name, to run in a task of its own that prefers `executor` (see
    /// ``post(_:name:parent:metadata:timeout:envelope:preferring:)``); `nil` runs it on the runners as usual.
    /// - Parameter envelope: The command's envelope, made by the caller (who then knows its id
    ///   before it starts, to subscribe to its events alone); it carries the metadata.
    package func post(
        name: String, payload: Data, metadata: [String: String] = [:], timeout: Duration? = nil, envelope: CommandEnvelope? = nil,
        preferring executor: (any TaskExecutor)?
    ) -> CommandTicket<Data> {
        CommandTicket(json: post(.json(payload), name: name, parent: nil, metadata: metadata, timeout: timeout, envelope: envelope, preferring: executor))
    }

    /// Whether some handler would take the named command with this payload now. Nothing runs.
    /// - Throws: ``CommandBusError`` with code `decodingFailed` if the payload does not decode.
    public func canHandle(name: String, payload: Data) throws(CommandBusError) -> Bool {
        do {
            _ = try route(.json(payload), name: name)
            return true
        } catch where error.code == .noHandler {
            return false
        }
    }

    /// Whether some handler would take the named command with this payload, asking each handler
    /// for its full answer: a handler that decides in `handle` (a plugin in a worker process) is
    /// asked for real, where ``canHandle(name:payload:)`` takes its quick yes. Nothing runs.
    /// - Throws: ``CommandBusError`` with code `decodingFailed` if the payload does not decode.
    public func wouldHandle(name: String, payload: Data) async throws(CommandBusError) -> Bool {
        try await wouldHandle(name: name, payload: payload, useFallback: true)
    }

    /// Whether a handler registered on this bus (not the fallback) would take the command, each asked for its full answer.
    package func wouldHandleLocally(name: String, payload: Data) async throws(CommandBusError) -> Bool {
        try await wouldHandle(name: name, payload: payload, useFallback: false)
    }

    private func wouldHandle(name: String, payload: Data, useFallback: Bool) async throws(CommandBusError) -> Bool {
        try checkSize(of: .json(payload), name: name)
        var entries = routes.withLock { $0.handlers(for: name) }
        if useFallback, let fallbackEntry { entries.append(fallbackEntry) }
        for entry in entries {
            let prepared = try entry.box.prepare(.json(payload), commandName: name)
            if try await entry.box.wouldHandle(prepared, commandName: name) { return true }
        }
        return false
    }

    /// Whether a handler registered on this bus (not the fallback) would take the command now.
    package func canHandleLocally(name: String, payload: Data) throws(CommandBusError) -> Bool {
        do {
            _ = try route(.json(payload), name: name, useFallback: false)
            return true
        } catch where error.code == .noHandler {
            return false
        }
    }
}
