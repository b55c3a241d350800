import Glibc

/// Tells the service manager that started the process how it is doing, in the `sd_notify`
/// protocol: a datagram of `KEY=value` lines to the Unix socket `$NOTIFY_SOCKET` names, as
/// systemd's `Type=notify` services do. `READY=1` once the server serves (`systemctl start`
/// returns then, and units ordered after it start), `STATUS=` for `systemctl status`, and
/// `STOPPING=1` when it drains. Without `$NOTIFY_SOCKET`, or with an address it cannot use,
/// it does nothing: the server runs the same under any supervisor or none.
///
/// A unit with `WatchdogSec=` sets `$WATCHDOG_USEC` (and `$WATCHDOG_PID`, the process it means):
/// the manager then wants `WATCHDOG=1` at least that often, and restarts a process that falls
/// silent. ``watchdog`` is that interval, for this process; the server says `WATCHDOG=1` (``alive()``)
/// at half of it, each time once it has proved it still serves.
///
/// The address is a path or, starting with `@`, a name in the abstract namespace. A
/// notification is one `sendto` that never blocks the caller and whose failure is ignored, as
/// `sd_notify`'s callers do.
package final class ServiceNotifier: Sendable {
    /// The process's notifier, from its environment.
    package static let shared = ServiceNotifier(
        address: getenv("NOTIFY_SOCKET").map { String(cString: $0) },
        watchdogMicroseconds: getenv("WATCHDOG_USEC").map { String(cString: $0) },
        watchdogPID: getenv("WATCHDOG_PID").map { String(cString: $0) }
    )

    /// How often the service manager wants `WATCHDOG=1`; `nil` if it wants none of this process.
    package let watchdog: Duration?

    /// Why a watchdog the environment asks for is off: `$WATCHDOG_USEC` that is not a positive
    /// whole number of microseconds. `nil` when it is on, or nobody asked for one.
    package let watchdogProblem: String?

    /// The socket's address, `sun_path` bytes (a leading NUL for the abstract namespace); `nil`
    /// if there is nothing to tell.
    private let path: [UInt8]?
    private let descriptor: Int32

    /// A notifier for `address`, `$NOTIFY_SOCKET`'s form; one that does nothing for `nil`, an
    /// empty address, one that is too long for a Unix socket, or another family's (`vsock:`).
    /// `watchdogMicroseconds` and `watchdogPID` are `$WATCHDOG_USEC` and `$WATCHDOG_PID`: a
    /// watchdog meant for another process (a wrapper's), or with no address to tell, is none.
    package init(address: String?, watchdogMicroseconds: String? = nil, watchdogPID: String? = nil) {
        var bytes = Array((address ?? "").utf8)
        if bytes.first == UInt8(ascii: "@") { bytes[0] = 0 }
        let usable = (bytes.first == UInt8(ascii: "/") || bytes.first == 0) && bytes.count > 1
            && bytes.count < MemoryLayout.size(ofValue: sockaddr_un().sun_path)
        path = usable ? bytes : nil
        descriptor = usable ? socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) : -1
        let forThisProcess = watchdogPID.map { Int32($0) == getpid() } ?? true
        guard usable, forThisProcess, let text = watchdogMicroseconds else {
            (watchdog, watchdogProblem) = (nil, nil)
            return
        }
        if let microseconds = Int64(text), microseconds > 0 {
            (watchdog, watchdogProblem) = (.microseconds(microseconds), nil)
        } else {
            (watchdog, watchdogProblem) = (nil, "WATCHDOG_USEC=\(quoted(text)) is not a positive whole number of microseconds, so no watchdog is kept; set WatchdogSec= in the unit to a duration such as 30s")
        }
    }

    deinit { if descriptor >= 0 { close(descriptor) } }

    /// Whether a service manager listens: there is an address and a socket to send from.
    package var isEnabled: Bool { path != nil && descriptor >= 0 }

    /// The server serves: `READY=1`, with `status`.
    package func ready(status: String) { send([("READY", "1"), ("STATUS", status)]) }

    /// The server drains and will exit: `STOPPING=1`, with `status`.
    package func stopping(status: String) { send([("STOPPING", "1"), ("STATUS", status)]) }

    /// The server still serves: `WATCHDOG=1`, which the manager wants every ``watchdog``.
    package func alive() { send([("WATCHDOG", "1")]) }

    /// What the server is doing, one line for `systemctl status`.
    package func status(_ status: String) { send([("STATUS", status)]) }

    /// Sends `fields` as one datagram; a value's line breaks become spaces (each field is one line).
    package func send(_ fields: [(key: String, value: String)]) {
        guard let path, descriptor >= 0 else { return }
        var message = [UInt8]()
        for (key, value) in fields {
            message += key.utf8
            message.append(UInt8(ascii: "="))
            message += value.utf8.map { $0 == 0x0A || $0 == 0x0D ? UInt8(ascii: " ") : $0 }
            message.append(0x0A)
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { sunPath in sunPath.copyBytes(from: path) }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + path.count)
        _ = message.withUnsafeBytes { bytes in
            withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                    sendto(descriptor, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT), socketAddress, length)
                }
            }
        }
    }
}
