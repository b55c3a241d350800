import Glibc

/// Runs a program to completion with a deadline, capturing its standard output.
///
/// The host keeps to FoundationEssentials, which has no `Process`; this is `posix_spawn`
/// and `waitpid`, with the child killed if it outlives its deadline.
package struct ChildProcess {
    /// How a child ended.
    package enum Ending: Equatable {
        case exited(Int32)
        case signaled(Int32)
        case killedAtDeadline
    }

    /// Runs `executable` with `arguments` and this process's environment plus `extraEnvironment`;
    /// returns how it ended and what it printed on stdout.
    package static func run(
        _ executable: String, _ arguments: [String], extraEnvironment: [String] = [], deadline: Duration
    ) -> (ending: Ending, output: [UInt8])? {
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else { return nil }
        // Close-on-exec, so no other child inherits the pipe (its EOF must mean this child is done).
        for end in pipeEnds { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], STDOUT_FILENO)
        posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addclose(&actions, pipeEnds[0])
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let envp = (currentEnvironment() + extraEnvironment).map { strdup($0) } + [nil]
        defer { for pointer in envp { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, envp)
        close(pipeEnds[1])
        guard spawned == 0 else {
            close(pipeEnds[0])
            return nil
        }
        _ = fcntl(pipeEnds[0], F_SETFL, fcntl(pipeEnds[0], F_GETFL) | O_NONBLOCK)
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        let end = ContinuousClock.now + deadline
        var status: Int32 = 0
        var ending: Ending?
        var watch = pollfd(fd: pipeEnds[0], events: Int16(POLLIN), revents: 0)
        var open = true
        // Waits on the child's stdout until it closes (the child is done), or the deadline.
        while ending == nil {
            let remaining = end - ContinuousClock.now
            if remaining <= .zero {
                kill(pid, SIGKILL)
                waitpid(pid, &status, 0)
                ending = .killedAtDeadline
                break
            }
            if open {
                let milliseconds = Int32(clamping: remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000 + 1)
                if poll(&watch, 1, milliseconds) < 0 && errno != EINTR { open = false }
                let got = buffer.withUnsafeMutableBytes { read(pipeEnds[0], $0.baseAddress, $0.count) }
                if got > 0 { if output.count < 1 << 20 { output += buffer[..<got] }; continue }
                if got == 0 { open = false }
                if got < 0 && errno == EAGAIN { continue }
            }
            if waitpid(pid, &status, WNOHANG) == pid {
                ending = Self.ending(status)
            } else if !open {
                // Its stdout closed, so it is exiting; only a child that closed stdout and lives
                // on waits here longer than a moment (still bounded by the deadline).
                var pause = timespec(tv_sec: 0, tv_nsec: 5_000_000)
                nanosleep(&pause, nil)
            }
        }
        while true {
            let got = buffer.withUnsafeMutableBytes { read(pipeEnds[0], $0.baseAddress, $0.count) }
            guard got > 0, output.count < 1 << 20 else { break }
            output += buffer[..<got]
        }
        close(pipeEnds[0])
        return (ending!, output)
    }

    /// Starts `executable` with `passing` open as descriptor `target` (and `closing` closed in
    /// the child), stdin from /dev/null; returns its pid without waiting for it.
    package static func spawn(
        _ executable: String, _ arguments: [String], passing: Int32, as target: Int32, closing: Int32,
        extraEnvironment: [String] = []
    ) -> pid_t? {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, passing, target)
        posix_spawn_file_actions_addclose(&actions, closing)
        posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let envp = (currentEnvironment() + extraEnvironment).map { strdup($0) } + [nil]
        defer { for pointer in envp { free(pointer) } }
        var pid: pid_t = 0
        return posix_spawn(&pid, executable, &actions, nil, argv, envp) == 0 ? pid : nil
    }

    private static func currentEnvironment() -> [String] {
        var variables: [String] = []
        var entry = environ
        while let variable = entry.pointee {
            variables.append(String(cString: variable))
            entry += 1
        }
        return variables
    }

    private static func ending(_ status: Int32) -> Ending {
        // WIFEXITED / WTERMSIG, spelled out: the C macros do not import.
        let signal = status & 0x7F
        return signal == 0 ? .exited((status >> 8) & 0xFF) : .signaled(signal)
    }

    /// The conventional name of a signal, such as `SIGSEGV`.
    package static func signalName(_ signal: Int32) -> String {
        switch signal {
        case SIGSEGV: "SIGSEGV"
        case SIGABRT: "SIGABRT"
        case SIGBUS: "SIGBUS"
        case SIGILL: "SIGILL"
        case SIGFPE: "SIGFPE"
        case SIGKILL: "SIGKILL"
        case SIGTRAP: "SIGTRAP"
        default: "signal \(signal)"
        }
    }
}
