@testable import CommandBusSQLite
import CommandBus
import Foundation
import Testing

/// The journal's in-flight tables key commands by ``CommandKey``, hashed with a multiply of its
/// two words and the dictionary's seed instead of SipHash.
struct CommandKeyTests {
    @Test func equalIDsHashAlikeAndAThousandIDsSpreadOverTheTable() {
        let ids = (0..<1_000).map { _ in CommandID.make() }
        for id in ids.prefix(10) {
            #expect(CommandKey(id) == CommandKey(id))
            #expect(CommandKey(id)._rawHashValue(seed: 42) == CommandKey(id)._rawHashValue(seed: 42))
            #expect(CommandKey(id).hashValue == CommandKey(UUID(uuid: id.uuid)).hashValue)
        }
        // Ids made in the same millisecond share their first six bytes: their buckets (the low
        // bits a table of 1,024 uses) must still spread, not pile up.
        let buckets = Set(ids.map { CommandKey($0)._rawHashValue(seed: 7) & 1_023 })
        #expect(buckets.count > 500, "\(buckets.count) buckets of 1,024 for 1,000 ids")
        var table: [CommandKey: Int] = [:]
        for (index, id) in ids.enumerated() { table[CommandKey(id)] = index }
        for (index, id) in ids.enumerated() { #expect(table[CommandKey(id)] == index) }
    }

    /// Ids that differ in one word only, or whose words are chosen to cancel a constant, still
    /// hash apart: neither word alone decides the hash.
    @Test func eachWordCountsAndTheSeedChangesTheHash() {
        func key(_ high: UInt64, _ low: UInt64) -> CommandKey {
            let id = withUnsafeBytes(of: (high, low)) { UUID(uuid: $0.load(as: uuid_t.self)) }
            return CommandKey(id)
        }
        let seed = 12_345
        let byLow = Set((0..<256).map { key(1, UInt64($0))._rawHashValue(seed: seed) })
        let byHigh = Set((0..<256).map { key(UInt64($0), 1)._rawHashValue(seed: seed) })
        #expect(byLow.count == 256 && byHigh.count == 256)
        // The constant that would zero the low word's factor without the seed.
        let zeroing = Set((0..<256).map { key(UInt64($0), 0xE703_7ED1_A0B4_28DB)._rawHashValue(seed: seed) })
        #expect(zeroing.count == 256)
        #expect(key(3, 4)._rawHashValue(seed: 1) != key(3, 4)._rawHashValue(seed: 2))
    }
}
