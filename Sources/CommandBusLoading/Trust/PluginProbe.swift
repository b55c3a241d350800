import CommandBus
import CommandBusSupport
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Loads a plugin file in a child `cmdbus` before the host trusts it with its own process:
/// a file that crashes or hangs while loading harms only the child, and is quarantined.
public struct PluginProbe: Sendable {
    /// The `cmdbus` executable that runs `plugins probe FILE`.
    public let executable: String
    /// How long loading may take before the file counts as hung.
    public let deadline: Duration

    /// A probe that runs `executable` (this process's own binary by default).
    public init(executable: String? = nil, deadline: Duration = .seconds(10)) {
        self.executable = executable ?? FileSystem.realPath("/proc/self/exe") ?? "/proc/self/exe"
        self.deadline = deadline
    }

    /// What a quarantine's reason ends with: how to lift it.
    static let whatEndsAQuarantine = "; replace the file with a fixed build, or run 'cmdbus plugins forget FILE' to probe the same one again "
        + "(with --connect, a running server loads it at once)"

    /// The verdict on one file: nil if it may load; otherwise the reason, and whether it is quarantined.
    package func verdict(for path: String) -> (reason: String, quarantined: Bool)? {
        // Swift's crash backtracer would spend the deadline symbolicating the crash we only need to see.
        guard let (ending, output) = ChildProcess.run(
            executable, ChildProcessRole.probe(file: path).arguments, extraEnvironment: ["SWIFT_BACKTRACE=enable=no"], deadline: deadline
        ) else {
            return ("could not start the probe (\(executable))", false)
        }
        switch ending {
        case .killedAtDeadline:
            return ("quarantined: hung for more than \(deadline.spoken) while loading (in the probe)" + Self.whatEndsAQuarantine, true)
        case .signaled(let signal):
            return ("quarantined: crashed with \(ChildProcess.signalName(signal)) while loading (in the probe)" + Self.whatEndsAQuarantine, true)
        case .exited(let status):
            let text = String(decoding: output, as: UTF8.self).split(whereSeparator: \.isNewline).last.map(String.init) ?? ""
            guard status == 0, case .object(let fields)? = JSONValue.parse(text), case .bool(let ok)? = fields["ok"] else {
                return ("quarantined: ended the probe with exit status \(status) while loading, without an answer" + Self.whatEndsAQuarantine, true)
            }
            if ok { return nil }
            if case .string(let reason)? = fields["reason"] { return (reason, false) }
            return ("the probe refused it", false)
        }
    }

    /// The probe's own side: load `path` here and print the verdict as one JSON line.
    public static func answer(for path: String) -> String {
        switch PluginLoader.load(file: path) {
        case .success: JSONValue.object(["ok": .bool(true)]).text
        case .failure(let error): JSONValue.object(["ok": .bool(false), "reason": .string(error.reason)]).text
        }
    }
}
