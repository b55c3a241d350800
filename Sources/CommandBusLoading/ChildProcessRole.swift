import CommandBusSupport
import Glibc

/// The two jobs a `cmdbus` child process does for its host: load a new plugin file to see
/// whether it is safe (the probe), or serve one isolated plugin's calls (the worker).
///
/// `cmdbus`'s `main` checks for them before the command line is parsed, so loading never
/// goes through the CLI: the host starts `cmdbus --cmdbus-probe FILE` or
/// `cmdbus --cmdbus-worker FILE [SHA256]`.
package enum ChildProcessRole {
    /// The probe: loads the file here and prints its verdict as one JSON line.
    case probe(file: String)
    /// The worker: loads the file and serves the host's calls on descriptor 3; `hash` is the
    /// SHA-256 `plugins.lock` lists for it, which the worker checks on the copy it opens.
    case worker(file: String, hash: String? = nil)

    private static let probeFlag = "--cmdbus-probe"
    private static let workerFlag = "--cmdbus-worker"

    /// The role `arguments` (without the program name) ask for, or `nil` for the command line.
    package init?(arguments: [String]) {
        switch (arguments.first, arguments.count) {
        case (Self.probeFlag, 2): self = .probe(file: arguments[1])
        case (Self.workerFlag, 2): self = .worker(file: arguments[1])
        case (Self.workerFlag, 3): self = .worker(file: arguments[1], hash: arguments[2])
        default: return nil
        }
    }

    /// The arguments that start this role in a child.
    package var arguments: [String] {
        switch self {
        case .probe(let file): [Self.probeFlag, file]
        case .worker(let file, let hash): [Self.workerFlag, file] + (hash.map { [$0] } ?? [])
        }
    }

    /// No probe outlives its host: a thread waits for the host's end of the probe's stdout (a
    /// pipe) to close (the host exited, or was killed) and ends the probe, even while the plugin
    /// it loads spins in its entry point, which the host would have killed at its deadline.
    private static func exitWhenTheHostStopsReading() {
        DetachedThread.start {
            // A pipe's writing end reports POLLERR once no one can read it; no event need be asked for.
            var watch = pollfd(fd: STDOUT_FILENO, events: 0, revents: 0)
            while true {
                let ready = poll(&watch, 1, -1)
                if ready < 0 && errno == EINTR { continue }
                if ready < 0 || watch.revents & Int16(POLLERR | POLLHUP | POLLNVAL) != 0 { _exit(0) }
            }
        }
    }

    /// Does the job and ends the process.
    package func run() -> Never {
        switch self {
        case .probe(let file):
            Self.exitWhenTheHostStopsReading()
            Console().out(PluginProbe.answer(for: file))
            fflush(nil)
            _exit(0)
        case .worker(let file, let hash):
            PluginWorker.run(file: file, hash: hash)
        }
    }
}
