import Foundation

/// A plugin handler with its command type erased, working on JSON bytes.
struct PluginHandlerBox: Sendable {
    let commandName: String
    let maxConcurrency: Int?
    let canHandle: @Sendable (Data) throws(PluginError) -> Bool
    let handle: @Sendable (Data, PluginContext) async throws -> Data

    init<H: PluginHandler>(_ handler: H) {
        commandName = H.HandledCommand.name
        maxConcurrency = handler.maxConcurrency
        canHandle = { payload throws(PluginError) in
            handler.canHandle(try Self.decode(H.HandledCommand.self, from: payload))
        }
        handle = { payload, context in
            let command = try Self.decode(H.HandledCommand.self, from: payload)
            let result = try await handler.handle(command, context: context)
            return try JSONWire.encoder.encode(result)
        }
    }

    static func decode<C: PluginCommand>(_ type: C.Type, from payload: Data) throws(PluginError) -> C {
        do { return try JSONWire.decoder.decode(C.self, from: payload) } catch {
            throw PluginError(.decodingFailed, describeDecodingFailure(error))
        }
    }
}
