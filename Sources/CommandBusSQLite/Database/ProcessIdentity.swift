import CommandBusSupport
import Glibc

/// Who owns a journaled command while it runs: a process id plus that process's start time,
/// so a recycled pid is not mistaken for the owner.
package struct ProcessIdentity: Hashable, Sendable {
    package let pid: Int32
    package let startTime: UInt64

    /// This process.
    package static let current = ProcessIdentity(pid: getpid(), startTime: startTime(of: getpid()) ?? 0)

    /// `"pid:start"`, as the journal stores it.
    package var text: String { "\(pid):\(startTime)" }

    package init(pid: Int32, startTime: UInt64) {
        self.pid = pid
        self.startTime = startTime
    }

    package init?(text: String) {
        let parts = text.split(separator: ":")
        guard parts.count == 2, let pid = Int32(parts[0]), let start = UInt64(parts[1]) else { return nil }
        self.init(pid: pid, startTime: start)
    }

    /// Whether this process is still running.
    /// A killed process its parent has not reaped yet (a zombie) is not running: its work is over.
    package var isAlive: Bool {
        guard kill(pid, 0) == 0 || errno == EPERM else { return false }
        guard let stat = Self.stat(of: pid) else { return startTime == 0 }
        return stat.startTime == startTime && stat.state != "Z" && stat.state != "X"
    }

    /// Fields 3 (the state: R, S, Z, …) and 22 (the start time in clock ticks since boot) of /proc/PID/stat.
    private static func stat(of pid: Int32) -> (state: Character, startTime: UInt64)? {
        guard let bytes = FileSystem.readPrefix(of: "/proc/\(pid)/stat", count: 1024), !bytes.isEmpty else { return nil }
        let text = String(decoding: bytes, as: UTF8.self)
        // The command name (field 2) may hold spaces; fields after it start past the last ')'.
        guard let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 19, let state = fields[0].first, let start = UInt64(fields[19]) else { return nil }
        return (state, start)
    }

    private static func startTime(of pid: Int32) -> UInt64? { stat(of: pid)?.startTime }
}
