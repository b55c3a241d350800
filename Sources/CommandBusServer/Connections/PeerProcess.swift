import CommandBusSupport
import Glibc

/// The process at the other end of a Unix socket, as the kernel knows it (`SO_PEERCRED`): for a
/// log line that says which client the server dropped, where a file descriptor says nothing.
package struct PeerProcess: Sendable, Equatable, CustomStringConvertible {
    /// Its process id, as it was when it connected.
    package let pid: Int32
    /// Its name (`/proc/PID/comm`), if it still runs.
    package let name: String?

    /// The process connected at `socket`'s other end; `nil` if the socket does not say.
    package init?(ofSocket socket: Int32) {
        // struct ucred { pid_t pid; uid_t uid; gid_t gid; }, which Swift's Glibc does not import.
        var credentials: (pid: Int32, uid: UInt32, gid: UInt32) = (0, 0, 0)
        var length = socklen_t(MemoryLayout.size(ofValue: credentials))
        guard getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0, credentials.pid > 0 else { return nil }
        pid = credentials.pid
        name = Self.name(of: pid)
    }

    private static func name(of pid: Int32) -> String? {
        guard let bytes = FileSystem.readPrefix(of: "/proc/\(pid)/comm", count: 64), !bytes.isEmpty else { return nil }
        return String(decoding: bytes.last == 0x0A ? bytes.dropLast() : bytes[...], as: UTF8.self)
    }

    /// `pid 1234 (python3)`, or `pid 1234` once it has gone.
    package var description: String {
        "pid \(pid)" + (name.map { " (\($0))" } ?? "")
    }
}
