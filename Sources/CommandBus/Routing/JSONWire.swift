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

    /// The shared decoder.
    package static let decoder = JSONDecoder()
}
