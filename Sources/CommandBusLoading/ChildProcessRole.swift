import CommandBusSupport
import Glibc

/// The two jobs a `cmdbus` child process does for its host: load a new plugin file to see
/// whether it is safe (the probe), or serve one isolated plugin's calls (the worker).
///
/// `cmdbus`'s `main` checks for them before the command line is parsed, so loading never
/// goes through the CLI: the host starts `cmdbus --cmdbus-probe FILE` or `cmdbus --cmdbus-worker FILE`.
package enum ChildProcessRole {
    /// The probe: loads the file here and prints its verdict as one JSON line.
    case probe(file: String)
    /// The worker: loads the file and serves the host's calls on descriptor 3.
    case worker(file: String)

    private static let probeFlag = "--cmdbus-probe"
    private static let workerFlag = "--cmdbus-worker"

    /// The role `arguments` (without the program name) ask for, or `nil` for the command line.
    package init?(arguments: [String]) {
        guard arguments.count == 2 else { return nil }
        switch arguments[0] {
        case Self.probeFlag: self = .probe(file: arguments[1])
        case Self.workerFlag: self = .worker(file: arguments[1])
        default: return nil
        }
    }

    /// The arguments that start this role in a child.
    package var arguments: [String] {
        switch self {
        case .probe(let file): [Self.probeFlag, file]
        case .worker(let file): [Self.workerFlag, file]
        }
    }

    /// Does the job and ends the process.
    package func run() -> Never {
        switch self {
        case .probe(let file):
            Console().out(PluginProbe.answer(for: file))
            fflush(nil)
            _exit(0)
        case .worker(let file):
            PluginWorker.run(file: file)
        }
    }
}
