import CLinux
import Synchronization
import Glibc

/// How the host reads one worker's frames without waking a thread for every answer.
///
/// A caller waiting for its answer reads the socket itself for a moment (``IsolatedPlugin``
/// does that with ``FrameChannel/receiveArrived(ifFree:)``, which leaves no whole frame
/// behind): a quick plugin's answer is then taken on the caller's own thread, and no thread is
/// woken on either side of the handoff. A watcher thread reads whenever nobody else does: it
/// sleeps in `poll()` on the worker's hangup only, until a caller that gives up waiting asks
/// for it (``needWatcher()``); then it reads every frame until no call is out, and sleeps
/// again. Either way it sees the worker's end at once.
package final class WorkerReader: Sendable {
    package let channel: FrameChannel
    /// A pipe that wakes the watcher out of `poll()`.
    private let wakeRead: Int32
    private let wakeWrite: Int32
    /// Whether a caller asked the watcher to read.
    private let needed = Atomic<Bool>(false)

    package init?(channel: FrameChannel) {
        var ends: [Int32] = [0, 0]
        // Close-on-exec from the start: a probe or worker that another thread spawns meanwhile must not inherit it.
        guard pipe2(&ends, O_CLOEXEC | O_NONBLOCK) == 0 else { return nil }
        self.channel = channel
        wakeRead = ends[0]
        wakeWrite = ends[1]
    }

    /// Makes the watcher read frames until no call is out. A caller that stops reading before
    /// its answer came calls this after its call is registered, so the answer is never left unread.
    package func needWatcher() {
        guard !needed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    /// The watcher's loop: hands each frame to `handle` and returns when the worker's end of the
    /// socket is gone (it exited or died), after the last frame it sent. Then closes everything.
    /// - Parameter callsOut: Whether any call waits for an answer now.
    package func watch(callsOut: () -> Bool, handle: (WorkerFrame) -> Void) {
        // POLLRDHUP (Linux): Glibc's module map leaves it out without _GNU_SOURCE.
        let peerClosed: Int16 = 0x2000
        var watching = [pollfd(fd: channel.descriptor, events: peerClosed, revents: 0), pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
        defer {
            channel.close()
            close(wakeRead)
            close(wakeWrite)
        }
        while true {
            var reading = needed.load(ordering: .acquiring)
            if reading && !callsOut() {
                // Every call is answered: stop reading. A call made since is seen on the second look
                // (its caller asks again only if it saw the flag cleared).
                needed.store(false, ordering: .releasing)
                reading = callsOut()
                if reading { needed.store(true, ordering: .releasing) }
            }
            watching[0].events = reading ? (peerClosed | Int16(POLLIN)) : peerClosed
            watching[0].revents = 0
            watching[1].revents = 0
            if poll(&watching, 2, -1) < 0 {
                if errno == EINTR { continue }
                return
            }
            if watching[1].revents != 0 {
                var drain = [UInt8](repeating: 0, count: 64)
                _ = read(wakeRead, &drain, drain.count)
            }
            guard watching[0].revents != 0 else { continue }
            while true {
                let (frames, then) = channel.receiveArrived()
                for frame in frames { handle(frame) }
                if case .ended = then { return }
                if frames.isEmpty { break }
            }
        }
    }
}
