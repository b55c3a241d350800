import Dispatch
import Glibc
import Synchronization

/// SIGTERM and SIGINT for a long-running process: the first calls `first` (drain and stop),
/// a second calls `second` (stop now). SIGHUP calls what ``onHangUp(_:)`` set (a server reads
/// its plugin directories again), and never ends the process: a terminal that closes, or a
/// `kill -HUP` meant as a reload, stopped a server at once, without a drain. The sources live
/// as long as this object.
///
/// What they call can change as the process goes on (``handle(first:second:)``): a server
/// listens from its start, while it loads its plugins, and hands the signals to its drain
/// once it serves, with no moment in which a signal is ignored.
package final class ShutdownSignals: @unchecked Sendable {
    // Created and resumed in init, then only held.
    private var sources: [any DispatchSourceSignal] = []
    private let handlers: Handlers

    /// What the signals call, shared with their sources.
    private final class Handlers: Sendable {
        let calls: Mutex<(first: Callback<Void>, second: Callback<Void>)>
        let hangUp = Mutex(Callback<Void> {})
        init(_ first: @escaping @Sendable () -> Void, _ second: @escaping @Sendable () -> Void) { calls = Mutex((Callback(first), Callback(second))) }
    }

    /// Starts listening; keep the object alive for as long as signals should be handled.
    package init(first: @escaping @Sendable () -> Void, second: @escaping @Sendable () -> Void) {
        handlers = Handlers(first, second)
        let count = Mutex(0)
        for number in [SIGTERM, SIGINT] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [handlers] in
                let seen = count.withLock { count -> Int in count += 1; return count }
                let (first, second) = handlers.calls.withLock { $0 }
                if seen == 1 { first() } else { second() }
            }
            source.resume()
            sources.append(source)
        }
        signal(SIGHUP, SIG_IGN)
        let hangUp = DispatchSource.makeSignalSource(signal: SIGHUP, queue: .global())
        hangUp.setEventHandler { [handlers] in handlers.hangUp.withLock { $0 }() }
        hangUp.resume()
        sources.append(hangUp)
    }

    /// What SIGHUP calls from now on (nothing until this is called).
    package func onHangUp(_ body: @escaping @Sendable () -> Void) {
        handlers.hangUp.withLock { $0 = Callback(body) }
    }

    /// What the next signals call: `first` for the first signal, if none has come yet, `second`
    /// for the ones after it.
    package func handle(first: @escaping @Sendable () -> Void, second: @escaping @Sendable () -> Void) {
        handlers.calls.withLock { $0 = (Callback(first), Callback(second)) }
    }
}
