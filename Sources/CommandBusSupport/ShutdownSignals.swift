import Dispatch
import Glibc
import Synchronization

/// SIGTERM and SIGINT for a long-running process: the first calls `first` (drain and stop),
/// a second calls `second` (stop now). The sources live as long as this object.
package final class ShutdownSignals: @unchecked Sendable {
    // Created and resumed in init, then only held.
    private var sources: [any DispatchSourceSignal] = []

    /// Starts listening; keep the object alive for as long as signals should be handled.
    package init(first: @escaping @Sendable () -> Void, second: @escaping @Sendable () -> Void) {
        let count = Mutex(0)
        for number in [SIGTERM, SIGINT] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                let seen = count.withLock { count -> Int in count += 1; return count }
                if seen == 1 { first() } else { second() }
            }
            source.resume()
            sources.append(source)
        }
    }
}
