import CommandBusLoading
import CommandBusSupport
import Foundation
import Glibc
import Synchronization
import Testing

/// How the host reads a worker's frames: a caller reading for its own answer and the watcher
/// thread share one socket and one buffer, and no frame may fall between them.
struct WorkerReaderTests {
    /// Frames a caller's read brought in but did not take stay in the buffer, where the watcher,
    /// asleep in `poll()` on the now empty socket, never looks: the calls they answer wait for
    /// ever. A caller takes every frame that has arrived, so none is left there.
    @Test(.timeLimit(.minutes(1)))
    func framesACallerReadsAreNeverLeftForAWatcherThatSleeps() async throws {
        var ends: [Int32] = [0, 0]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0)
        let (host, worker) = (ends[0], ends[1])
        let reader = try #require(WorkerReader(channel: FrameChannel(descriptor: host)))
        let handled = Mutex<[UInt64]>([])
        async let watcherEnded: Void = DetachedThread.value {
            reader.watch(callsOut: { true }) { frame in handled.withLock { $0.append(frame.id) } }
        }
        // Three answers in one write, while the watcher sleeps on the worker's hang-up alone
        // (no caller has asked it to read yet).
        var burst: [UInt8] = []
        for id: UInt64 in 1...3 {
            WorkerFrame.encode(.complete, id: id, parent: 0, status: 0, name: EmptyCollection(), body: Array("{}".utf8), into: &burst)
        }
        #expect(sendAll(worker, burst))
        // A caller reads for its answer (frame 1) and goes; then another caller, whose answer
        // did not come while it looked, asks the watcher to read.
        let (frames, _) = reader.channel.receiveArrived(ifFree: true)
        handled.withLock { $0.append(contentsOf: frames.map(\.id)) }
        reader.needWatcher()
        let allHandled = await waitUntil(.seconds(2)) { handled.withLock { Set($0) } == [1, 2, 3] }
        #expect(allHandled, "handled: \(handled.withLock { $0 })")
        close(worker)
        await watcherEnded
    }
}
