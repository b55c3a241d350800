#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The parts of an ELF header the loader checks before `dlopen` touches a file.
///
/// `dlopen` maps each loadable segment by file offset; a segment that runs past the
/// end of a truncated file maps fine and then kills the process with SIGBUS when it
/// is touched. Reading the headers first turns that into a one-line refusal.
package struct ELFImage {
    /// The machine this host runs on, as ELF's `e_machine` names it.
    package static let hostMachine: UInt16 = {
        #if arch(x86_64)
        return 62
        #elseif arch(arm64)
        return 183
        #else
        return 0
        #endif
    }()

    /// Checks the file's ELF header and program headers; throws why it cannot be loaded.
    package static func validate(_ bytes: Data, fileSize: Int) throws(PluginLoadFailure) {
        guard bytes.count >= 64 else { throw .init("truncated ELF header (\(bytes.count) bytes)") }
        guard bytes[4] == 2 else { throw .init("not a 64-bit ELF file") }
        guard bytes[5] == 1 else { throw .init("not a little-endian ELF file") }
        let type: UInt16 = read(bytes, at: 16)
        guard type == 3 else { throw .init("not a shared library (ELF type \(type))") }
        let machine: UInt16 = read(bytes, at: 18)
        if hostMachine != 0, machine != hostMachine {
            throw .init("built for another CPU (ELF machine \(machine), this host is \(hostMachine))")
        }
        // Offsets are clamped into Int and every end is computed without overflow: a crafted
        // header must get a refusal, never a trap.
        let programHeaderOffset = Int(clamping: read(bytes, at: 32) as UInt64)
        let sectionHeaderOffset = Int(clamping: read(bytes, at: 40) as UInt64)
        let programHeaderSize = Int(read(bytes, at: 54) as UInt16)
        let programHeaderCount = Int(read(bytes, at: 56) as UInt16)
        let sectionHeaderSize = Int(read(bytes, at: 58) as UInt16)
        let sectionHeaderCount = Int(read(bytes, at: 60) as UInt16)
        guard programHeaderSize >= 56, programHeaderCount > 0,
            let tableEnd = end(of: programHeaderOffset, length: programHeaderSize * programHeaderCount), tableEnd <= bytes.count
        else {
            throw .init("truncated or corrupt ELF file (program headers past the end)")
        }
        if sectionHeaderCount > 0 {
            let sectionTableEnd = end(of: sectionHeaderOffset, length: sectionHeaderSize * sectionHeaderCount)
            guard let sectionTableEnd, sectionTableEnd <= fileSize else {
                throw .init("truncated ELF file (\(fileSize) bytes; its section table ends at \(describe(sectionTableEnd)))")
            }
        }
        for index in 0..<programHeaderCount {
            let base = programHeaderOffset + index * programHeaderSize
            let segmentType: UInt32 = read(bytes, at: base)
            guard segmentType == 1 else { continue }  // PT_LOAD
            let offset = Int(clamping: read(bytes, at: base + 8) as UInt64)
            let size = Int(clamping: read(bytes, at: base + 32) as UInt64)
            let segmentEnd = end(of: offset, length: size)
            guard let segmentEnd, segmentEnd <= fileSize else {
                throw .init("truncated ELF file (\(fileSize) bytes; a loadable segment ends at \(describe(segmentEnd)))")
            }
        }
    }

    /// `offset + length`, or `nil` if it does not fit in an `Int` (both are non-negative here).
    private static func end(of offset: Int, length: Int) -> Int? {
        let (sum, overflow) = offset.addingReportingOverflow(length)
        return overflow ? nil : sum
    }

    /// An end for a message: the number, or what it is when it does not fit.
    private static func describe(_ end: Int?) -> String {
        end.map(String.init) ?? "past the largest file offset"
    }

    /// How many leading bytes `validate` needs: the header and the program header table.
    package static func headerLength(of prefix: Data) -> Int {
        guard prefix.count >= 64 else { return 64 }
        let offset = Int(clamping: read(prefix, at: 32) as UInt64)
        let size = Int(read(prefix, at: 54) as UInt16) * Int(read(prefix, at: 56) as UInt16)
        return min(end(of: offset, length: size) ?? Int.max, 1 << 20)
    }

    /// The little-endian integer at `offset`, which the caller has checked is inside `bytes`.
    /// One unaligned load: `Data.copyBytes(to:from:)` with a range took a thousand instructions
    /// a field, 6% of a 100-plugin start.
    private static func read<T: FixedWidthInteger>(_ bytes: Data, at offset: Int) -> T {
        T(littleEndian: bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: T.self) })
    }
}
