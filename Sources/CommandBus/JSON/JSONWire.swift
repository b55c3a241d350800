// This file and the others in this folder are compiled into the plugin SDK as well, through
// symlinks in Sources/CommandBusPlugin/Support: one source, compiled into each module on its own,
// so the SDK's symbols carry its module's name and never the host's. A plugin must share no Swift
// module with the host: SwiftPM links executables with -export-dynamic, so a plugin's references
// to a module the host also links would bind to the host's copy (see README, "The ABI").
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The JSON coders every CommandBus module uses: sorted keys, so that output is stable.
package enum JSONWire {
    /// The shared encoder (sorted keys, unescaped slashes).
    package static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    /// `value` as JSON bytes, exactly as `encoder` writes them: through `CompactJSON` where it
    /// can, through `encoder` where only Foundation knows the answer (and for its errors).
    package static func encode<T: Encodable>(_ value: T) throws -> Data {
        if let data = CompactJSON.encode(value) { return data }
        return try encoder.encode(value)
    }

    /// The shared decoder.
    package static let decoder = JSONDecoder()

    /// `type` decoded from `data`, exactly as `decoder` decodes it: through `CompactJSONDecoding`
    /// where it can, through `decoder` where only Foundation knows the answer (and for its errors).
    package static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        do { return try CompactJSONDecoding.decoded(T.self, from: data) } catch {
            return try decoder.decode(T.self, from: data)
        }
    }
}
