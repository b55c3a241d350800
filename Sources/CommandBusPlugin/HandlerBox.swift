#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import CCommandBusABI
import Synchronization

/// A plugin handler with its command type erased, working on JSON bytes.
struct PluginHandlerBox: Sendable {
    let commandName: String
    let maxConcurrency: Int?
    /// The `CMDBUS_COMMAND_*` flags the descriptor declares for the command.
    let flags: UInt32
    /// The inverse of a payload's command, as `{"command", "payload"}` JSON; `nil` if it has none.
    let invert: @Sendable (Data) throws(PluginError) -> Data?
    let canHandle: @Sendable (Data) throws(PluginError) -> Bool
    let handle: @Sendable (Data, PluginContext) async throws -> Data

    init<H: PluginHandler>(_ handler: H) {
        commandName = H.HandledCommand.name
        maxConcurrency = handler.maxConcurrency
        let reversible = H.HandledCommand.isReversible
        flags = (handler.isJournaled ? 0 : CMDBUS_COMMAND_NOT_JOURNALED)
            | (handler.replaysOnStart ? CMDBUS_COMMAND_REPLAY_ON_START : 0)
            | (reversible ? CMDBUS_COMMAND_REVERSIBLE : 0)
        invert = { payload throws(PluginError) in
            guard let command = try Self.decode(H.HandledCommand.self, from: payload) as? any ReversiblePluginCommand else { return nil }
            do { return try command.encodedInverse() } catch {
                throw PluginError(.failed, "the inverse of '\(H.HandledCommand.name)' does not encode: \(error)")
            }
        }
        canHandle = { payload throws(PluginError) in
            handler.canHandle(try Self.decode(H.HandledCommand.self, from: payload))
        }
        // A host that speaks ABI 1.4 calls handle() alone (CMDBUS_PLUGIN_HANDLE_DECIDES): one decode per command.
        handle = { payload, context in
            let command = try Self.decode(H.HandledCommand.self, from: payload)
            // CMDBUS_PLUGIN_HANDLE_DECIDES: the host may not have asked can_handle first.
            guard handler.canHandle(command) else {
                throw PluginError(.declined, "'\(H.HandledCommand.name)' declined this payload (canHandle said no)")
            }
            let result = try await handler.handle(command, context: context)
            return try JSONWire.encode(result)
        }
    }

    static func decode<C: PluginCommand>(_ type: C.Type, from payload: Data) throws(PluginError) -> C {
        do { return try JSONWire.decode(C.self, from: payload) } catch {
            throw PluginError(.decodingFailed, describeDecodingFailure(error))
        }
    }
}
