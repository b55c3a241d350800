import CommandBusLoading
import Foundation
import Testing

/// The ELF checks run on every candidate file before `dlopen`, so a crafted header must get a
/// one-line refusal, never a trap: offsets near 2^64 and ends that overflow included.
struct ELFImageTests {
    /// A minimal 64-bit little-endian shared library header for this machine: one PT_LOAD
    /// segment covering the first 120 bytes of a 4,096-byte file, no section table.
    static func header() -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 120)
        bytes[0...3] = [0x7F, 0x45, 0x4C, 0x46]
        bytes[4] = 2  // 64-bit
        bytes[5] = 1  // little-endian
        put(UInt16(3), at: 16, in: &bytes)  // ET_DYN
        put(ELFImage.hostMachine, at: 18, in: &bytes)
        put(UInt64(64), at: 32, in: &bytes)  // program headers right after the ELF header
        put(UInt16(56), at: 54, in: &bytes)
        put(UInt16(1), at: 56, in: &bytes)
        put(UInt32(1), at: 64, in: &bytes)  // PT_LOAD
        put(UInt64(0), at: 64 + 8, in: &bytes)
        put(UInt64(120), at: 64 + 32, in: &bytes)
        return bytes
    }

    static func put<T: FixedWidthInteger>(_ value: T, at offset: Int, in bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { bytes.replaceSubrange(offset..<offset + $0.count, with: $0) }
    }

    static func refusal(_ bytes: [UInt8], fileSize: Int = 4_096) -> String? {
        do throws(PluginLoadFailure) {
            try ELFImage.validate(Data(bytes), fileSize: fileSize)
            return nil
        } catch {
            return error.reason
        }
    }

    @Test func aWellFormedHeaderPasses() {
        #expect(Self.refusal(Self.header()) == nil)
        #expect(ELFImage.headerLength(of: Data(Self.header())) == 120)
    }

    @Test func aProgramHeaderTableAtTheEndOfTheAddressSpaceIsRefused() {
        var bytes = Self.header()
        Self.put(UInt64.max - 8, at: 32, in: &bytes)
        #expect(Self.refusal(bytes) == "truncated or corrupt ELF file (program headers past the end)")
        #expect(ELFImage.headerLength(of: Data(bytes)) == 1 << 20)
    }

    @Test func aSectionTableWhoseEndOverflowsIsRefused() {
        var bytes = Self.header()
        Self.put(UInt64.max, at: 40, in: &bytes)
        Self.put(UInt16(64), at: 58, in: &bytes)
        Self.put(UInt16(3), at: 60, in: &bytes)
        #expect(Self.refusal(bytes) == "truncated ELF file (4096 bytes; its section table ends at past the largest file offset)")
    }

    @Test func aSegmentWhoseEndOverflowsIsRefused() {
        var bytes = Self.header()
        Self.put(UInt64(Int.max), at: 64 + 8, in: &bytes)
        Self.put(UInt64(16), at: 64 + 32, in: &bytes)
        #expect(Self.refusal(bytes) == "truncated ELF file (4096 bytes; a loadable segment ends at past the largest file offset)")
    }

    @Test func aSegmentPastTheEndOfTheFileIsRefused() {
        #expect(Self.refusal(Self.header(), fileSize: 100) == "truncated ELF file (100 bytes; a loadable segment ends at 120)")
    }

    /// 5,000 headers with random bytes written over random fields: each passes or is refused.
    @Test func randomlyCorruptedHeadersNeverTrap() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<5_000 {
            var bytes = Self.header()
            for _ in 0..<Int.random(in: 1...6, using: &generator) {
                let offset = Int.random(in: 16..<bytes.count - 8, using: &generator)
                Self.put(UInt64.random(in: 0...UInt64.max, using: &generator), at: offset, in: &bytes)
            }
            _ = Self.refusal(bytes, fileSize: Int.random(in: 0...1 << 40, using: &generator))
            _ = ELFImage.headerLength(of: Data(bytes))
        }
    }
}
