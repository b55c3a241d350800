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

    /// The verdict on one file: nil if it may load; otherwise the reason, whether it is
    /// quarantined, and whether it is the file's own (`lasting`), where a refusal that depends on
    /// this machine or this moment (a library not installed, a mount that runs no code, a probe
    /// that could not start) is not: the registry keeps only a lasting one, so that a file is not
    /// refused for good for what was mended around it.
    package func verdict(for path: String) -> PluginLoader.ProbeVerdict {
        // Swift's crash backtracer would spend the deadline symbolicating the crash we only need to see.
        guard let (ending, output) = ChildProcess.run(
            executable, ChildProcessRole.probe(file: path).arguments, extraEnvironment: ["SWIFT_BACKTRACE=enable=no"], deadline: deadline
        ) else {
            return ("could not start the probe (\(executable))", false, false)
        }
        switch ending {
        case .killedAtDeadline:
            return ("quarantined: hung for more than \(deadline.spoken) while loading (in the probe)" + Self.whatEndsAQuarantine, true, true)
        case .signaled(let signal):
            return ("quarantined: crashed with \(ChildProcess.signalName(signal)) while loading (in the probe)" + Self.whatEndsAQuarantine, true, true)
        case .exited(let status):
            let text = String(decoding: output, as: UTF8.self).split(whereSeparator: \.isNewline).last.map(String.init) ?? ""
            guard status == 0, case .object(let fields)? = JSONValue.parse(text), case .bool(let ok)? = fields["ok"] else {
                return ("quarantined: ended the probe with exit status \(status) while loading, without an answer" + Self.whatEndsAQuarantine, true, true)
            }
            if ok { return nil }
            let lasting = fields["dependsOnThisMachine"] != .bool(true)
            if case .string(let reason)? = fields["reason"] { return (reason, false, lasting) }
            return ("the probe refused it", false, lasting)
        }
    }

    /// The probe's own side: load `path` here and print the verdict as one JSON line.
    public static func answer(for path: String) -> String {
        switch PluginLoader.load(file: path) {
        case .success: return JSONValue.object(["ok": .bool(true)]).text
        case .failure(let error):
            var fields: [String: JSONValue] = ["ok": .bool(false), "reason": .string(error.reason)]
            // Said only when so: a refusal is the file's own unless the answer says otherwise.
            if error.dependsOnThisMachine { fields["dependsOnThisMachine"] = .bool(true) }
            return JSONValue.object(fields).text
        }
    }
}
