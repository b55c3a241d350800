// The SDK keeps private copies of these few lines on purpose: a plugin must share no Swift
// module with the host. SwiftPM links executables with -export-dynamic, so a plugin's
// references to a module the host also links would bind to the host's copy (see README, "The ABI").
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The JSON coders every CommandBus module uses: sorted keys, so that output is stable.
enum JSONWire {
    /// The shared encoder (sorted keys, unescaped slashes).
    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    /// The shared decoder.
    static let decoder = JSONDecoder()
}
