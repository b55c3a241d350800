#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A command's id as the key of the journal's in-flight tables, hashed as two words: `UUID`
/// hashes its sixteen bytes through `Hasher.combine(bytes:)`, which cost the journal's one
/// writing thread about a thousand instructions a command across its lookups.
struct CommandKey: Hashable {
    private let high: UInt64
    private let low: UInt64

    init(_ id: UUID) {
        (high, low) = withUnsafeBytes(of: id.uuid) { bytes in
            (bytes.loadUnaligned(fromByteOffset: 0, as: UInt64.self), bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
        }
    }
}
