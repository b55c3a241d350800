#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A command's id as the key of the journal's in-flight tables, hashed as two words: `UUID`
/// hashes its sixteen bytes through `Hasher.combine(bytes:)`, which cost the journal's one
/// writing thread about a thousand instructions a command across its lookups.
///
/// A dictionary asks for ``_rawHashValue(seed:)``, which here is one full-width multiply of the
/// two words, each mixed with the dictionary's seed, instead of SipHash over them (about 250
/// instructions a lookup, and a journaled post makes three on the writing thread). The seed is
/// random per dictionary, so ids chosen to collide (an imported journal's) cannot be chosen
/// without it; `hash(into:)` still feeds both words to whoever combines a key into a hasher.
struct CommandKey: Hashable {
    private let high: UInt64
    private let low: UInt64

    init(_ id: UUID) {
        (high, low) = withUnsafeBytes(of: id.uuid) { bytes in
            (bytes.loadUnaligned(fromByteOffset: 0, as: UInt64.self), bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
        }
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(high)
        hasher.combine(low)
    }

    func _rawHashValue(seed: Int) -> Int {
        let seed = UInt64(bitPattern: Int64(seed))
        let product = (high ^ seed ^ 0xA076_1D64_78BD_642F).multipliedFullWidth(by: low ^ seed ^ 0xE703_7ED1_A0B4_28DB)
        return Int(truncatingIfNeeded: product.high ^ product.low)
    }
}
