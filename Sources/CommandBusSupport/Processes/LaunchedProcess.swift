import CLinux
import Glibc
import Synchronization

/// A child process started with `posix_spawn` that runs alongside its parent: for the end-to-end
/// tests, which start `cmdbus` hosts and clients, signal them and wait for them.
///
/// Foundation's `Process.run()` on Linux (Swift 6.3.1) reads 256 bytes past a `dirent` while it
/// counts `/proc/self/fd`, and crashes when that record ends glibc's buffer and the next page is
/// unmapped (swift-corelibs-foundation#5472). A test process with many descriptors open meets it
/// now and then; the benchmarks, with a few, do not, and keep `Process`.
/// This type starts children without it. A thread of its own reaps the child, so an exit is
/// seen at once, without polling and without holding a thread of the cooperative pool.
package final class LaunchedProcess: Sendable {
    /// Where a child's standard output or standard error goes.
    package enum Output: Sendable {
        /// The parent's own descriptor.
        case inherit
        /// `/dev/null`.
        case discard
        /// A file, created or truncated.
        case file(String)
    }

    /// The child's process id.
    package let pid: pid_t
    private let state = Mutex<State>(State())

    private struct State {
        var ending: ChildProcess.Ending?
        var waiters: [CheckedContinuation<ChildProcess.Ending, Never>] = []
    }

    /// Starts `executable` with `arguments`, the parent's environment with `environment` laid over
    /// it, in `directory` (the parent's if `nil`), and standard input from `/dev/null`.
    /// - Throws: `LaunchFailure` naming the program and the `errno` text if it cannot start.
    package init(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:], directory: String? = nil,
        standardOutput: Output = .inherit, standardError: Output = .inherit
    ) throws(LaunchFailure) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0)
        for (output, descriptor) in [(standardOutput, STDOUT_FILENO), (standardError, STDERR_FILENO)] {
            switch output {
            case .inherit: break
            case .discard: posix_spawn_file_actions_addopen(&actions, descriptor, "/dev/null", O_WRONLY, 0)
            case .file(let path): posix_spawn_file_actions_addopen(&actions, descriptor, path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            }
        }
        if let directory { posix_spawn_file_actions_addchdir_np(&actions, directory) }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let envp = Self.environment(overlaying: environment).map { strdup($0) } + [nil]
        defer { for pointer in envp { free(pointer) } }
        var spawnedPid: pid_t = 0
        let spawned = posix_spawn(&spawnedPid, executable, &actions, nil, argv, envp)
        guard spawned == 0 else { throw LaunchFailure(executable: executable, code: spawned) }
        let pid = spawnedPid
        self.pid = pid
        DetachedThread.start { [self] in
            // Wait for the exit without reaping, then reap under the lock: `send` never signals
            // a pid that the kernel has freed for reuse.
            var exited = siginfo_t()
            while waitid(P_PID, id_t(pid), &exited, WEXITED | WNOWAIT) < 0 && errno == EINTR {}
            let (ending, waiters) = state.withLock { state in
                var status: Int32 = 0
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                // WIFEXITED / WTERMSIG, spelled out: the C macros do not import.
                let signal = status & 0x7F
                let ending: ChildProcess.Ending = signal == 0 ? .exited((status >> 8) & 0xFF) : .signaled(signal)
                state.ending = ending
                defer { state.waiters = [] }
                return (ending, state.waiters)
            }
            for waiter in waiters { waiter.resume(returning: ending) }
        }
    }

    /// How the child ended, or `nil` while it runs.
    package var ending: ChildProcess.Ending? { state.withLock { $0.ending } }

    /// Whether the child has not yet been seen to end.
    package var isRunning: Bool { ending == nil }

    /// Waits for the child to end and says how it did.
    package func wait() async -> ChildProcess.Ending {
        await withCheckedContinuation { continuation in
            let ended = state.withLock { state -> ChildProcess.Ending? in
                if let ending = state.ending { return ending }
                state.waiters.append(continuation)
                return nil
            }
            if let ended { continuation.resume(returning: ended) }
        }
    }

    /// Sends `signal` to the child unless it has been reaped (its pid may then be another's).
    package func send(_ signal: Int32) {
        state.withLock { state in
            if state.ending == nil { _ = kill(pid, signal) }
        }
    }

    private static func environment(overlaying extra: [String: String]) -> [String] {
        var variables: [String] = []
        var entry = environ
        while let variable = entry.pointee {
            let text = String(cString: variable)
            let name = text.prefix { $0 != "=" }
            if extra[String(name)] == nil { variables.append(text) }
            entry += 1
        }
        return variables + extra.map { "\($0.key)=\($0.value)" }
    }
}

/// A child process that could not be started.
package struct LaunchFailure: Error, CustomStringConvertible {
    /// The program that was to run.
    package let executable: String
    /// The `errno` value `posix_spawn` returned.
    package let code: Int32

    /// One line naming the program and the cause.
    package var description: String { "cannot start \(executable): \(String(cString: strerror(code)))" }
}
