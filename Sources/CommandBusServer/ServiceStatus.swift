import CommandBusSupport

/// What a server tells the service manager that started it (see ``ServiceNotifier``).
package enum ServiceStatus {
    /// Says `READY=1` with `status()`, then `status()` every five seconds until it gives `nil`
    /// (the server drains). Nothing without a service manager listening.
    package static func ready(_ status: @escaping @Sendable () -> String?) {
        let notifier = ServiceNotifier.shared
        guard notifier.isEnabled, let first = status() else { return }
        notifier.ready(status: first)
        Task {
            while true {
                try? await Task.sleep(for: .seconds(5))
                guard let line = status() else { return }
                notifier.status(line)
            }
        }
    }
}
