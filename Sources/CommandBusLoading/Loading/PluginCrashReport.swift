import CCrashReport
import Glibc

/// The host's last words when a plugin loaded into its process crashes it or calls `exit()`:
/// one line naming the plugin, its file, the command and the signal, and what to do next
/// (run it isolated). The handlers are in C (`CCrashReport`), as a signal handler must be.
package enum PluginCrashReport {
    /// Installs the signal handlers (chained to those before them) and the `exit()` hook.
    /// The host calls it once at start; probe and worker children do not.
    package static func install() {
        cmdbus_crash_report_install()
    }
}

/// A plugin command's names as C strings for the crash report: made once, never freed
/// (plugins are never unloaded, and a signal handler may read them at any time).
package final class PluginCrashLabel: @unchecked Sendable {
    private let plugin: UnsafeMutablePointer<CChar>
    private let file: UnsafeMutablePointer<CChar>
    private let command: UnsafeMutablePointer<CChar>

    package init(plugin: String, file: String, command: String) {
        self.plugin = strdup(plugin)
        self.file = strdup(file)
        self.command = strdup(command)
    }

    /// Runs `body`, a call into the plugin's code, marked as such on this thread.
    @inline(__always)
    package func around<T>(_ body: () -> T) -> T {
        cmdbus_crash_report_enter(plugin, file, command)
        defer { cmdbus_crash_report_leave() }
        return body()
    }
}
