import CommandBusSupport

/// What a server tells the service manager that started it (see ``ServiceNotifier``).
package enum ServiceStatus {
    /// Says `READY=1` with `status()`, then `status()` every five seconds until it gives `nil`
    /// (the server drains). Nothing without a service manager listening.
    ///
    /// With a watchdog (`WatchdogSec=`), it then says `WATCHDOG=1` at half its interval, each
    /// time `provingAlive` has returned, to the process's end (a drain included): a server whose
    /// proof never returns (its request loop wedged, its tasks starved) falls silent, and the
    /// manager restarts it. A watchdog the environment asks for wrongly is logged through `log`.
    package static func ready(
        provingAlive: @escaping @Sendable () async -> Void = {}, log: (String) -> Void = { _ in },
        _ status: @escaping @Sendable () -> String?
    ) {
        let notifier = ServiceNotifier.shared
        guard notifier.isEnabled, let first = status() else { return }
        if let problem = notifier.watchdogProblem { log(problem) }
        notifier.ready(status: first)
        Task {
            while true {
                try? await Task.sleep(for: .seconds(5))
                guard let line = status() else { return }
                notifier.status(line)
            }
        }
        guard let interval = notifier.watchdog else { return }
        Task {
            while true {
                try? await Task.sleep(for: interval / 2)
                await provingAlive()
                notifier.alive()
            }
        }
    }
}
