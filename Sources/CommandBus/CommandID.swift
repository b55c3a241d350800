#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// Makes command ids: RFC 9562 version-7 UUIDs, time-ordered, without a system call per id.
///
/// Foundation's `UUID()` asks the kernel for randomness on every call (microseconds
/// on Linux). These ids take a millisecond timestamp for their first 48 bits, so
/// journal rows sort by creation time, and 74 bits from a SplitMix64 stream seeded
/// once from the system generator. They are unique, not secret.
public enum CommandID {
    private static let state = Atomic<UInt64>(SystemRandomNumberGenerator().nextSeed())

    /// A new version-7 UUID.
    public static func make(now: Date = Date()) -> UUID {
        let millis = UInt64(max(0, now.timeIntervalSince1970 * 1000))
        let high = mix(state.wrappingAdd(0x9E37_79B9_7F4A_7C15, ordering: .relaxed).newValue)
        let low = mix(state.wrappingAdd(0x9E37_79B9_7F4A_7C15, ordering: .relaxed).newValue)
        let timeAndVersion = (millis << 16) | 0x7000 | (high & 0x0FFF)
        let variantAndRandom = (low & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000
        let a = timeAndVersion.bigEndian, b = variantAndRandom.bigEndian
        return withUnsafeBytes(of: (a, b)) { raw in
            UUID(uuid: raw.load(as: uuid_t.self))
        }
    }

    /// The SplitMix64 output function.
    private static func mix(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension SystemRandomNumberGenerator {
    fileprivate func nextSeed() -> UInt64 {
        var generator = self
        return generator.next()
    }
}
