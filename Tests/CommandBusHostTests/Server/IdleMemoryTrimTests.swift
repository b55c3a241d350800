import CommandBusSupport
import Glibc
import Testing

/// What a burst of work allocated and freed goes back to the system when the server trims.
struct IdleMemoryTrimTests {
    @Test func aTrimGivesBackWhatABurstFreed() {
        // 400 MB in blocks of 2 KB, each written (so resident), then all but one in a hundred freed:
        // glibc keeps the free blocks between the kept ones for itself.
        var blocks: [UnsafeMutableRawPointer] = []
        for _ in 0..<200_000 {
            let block = malloc(2_048)!
            memset(block, 1, 2_048)
            blocks.append(block)
        }
        for (index, block) in blocks.enumerated() where index % 100 != 0 { free(block) }
        let (before, after) = IdleMemoryTrim.trim()
        for (index, block) in blocks.enumerated() where index % 100 == 0 { free(block) }
        #expect(before > 0 && after > 0, "resident memory is read from /proc/self/statm")
        #expect(before - after > 200 << 20, "gave back \((before - after) >> 20) MB of about 400 (\(before >> 20) MB before, \(after >> 20) after)")
    }
}
