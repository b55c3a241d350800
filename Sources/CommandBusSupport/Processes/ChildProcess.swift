import CLinux
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
        // Close-on-exec from the start, so no other child inherits the pipe (its EOF must mean this
        // child is done), even one that another thread spawns at this moment: probes run in parallel.
        guard pipe2(&pipeEnds, O_CLOEXEC) == 0 else { return nil }
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
        defer { close(pipeEnds[0]) }
        var output: [UInt8] = []
        let ending = wait(for: pid, reading: pipeEnds[0], into: &output, deadline: ContinuousClock.now + deadline)
        // What it wrote just before it ended.
        _ = fcntl(pipeEnds[0], F_SETFL, fcntl(pipeEnds[0], F_GETFL) | O_NONBLOCK)
        while readSome(pipeEnds[0], into: &output) {}
        return (ending, output)
    }

    /// Waits for `pid` to end, or kills it at `deadline`, without polling: one `poll()` on its
    /// stdout and its pidfd. Its stdout is read as it comes (a full pipe would stop it) into `collected`.
    private static func wait(for pid: pid_t, reading stdout: Int32, into output: inout [UInt8], deadline: ContinuousClock.Instant) -> Ending {
        let process = pidfd_open(pid, 0)
        defer { if process >= 0 { close(process) } }
        var watching = [pollfd(fd: stdout, events: Int16(POLLIN), revents: 0), pollfd(fd: process, events: Int16(POLLIN), revents: 0)]
        var status: Int32 = 0
        while true {
            let remaining = deadline - ContinuousClock.now
            if remaining <= .zero { break }
            let milliseconds = Int32(clamping: remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000 + 1)
            // Without a pidfd (a kernel before 5.3) the wait ends when stdout closes, as the child exits.
            if process < 0 && watching[0].fd < 0 { break }
            if poll(&watching, 2, milliseconds) < 0 {
                if errno == EINTR { continue }
                break
            }
            if watching[0].revents != 0 && !readSome(stdout, into: &output) { watching[0].fd = -1 }
            if watching[1].revents != 0 {
                waitpid(pid, &status, 0)
                return ending(status)
            }
        }
        if process < 0 && watching[0].fd < 0 {
            waitpid(pid, &status, 0)
            return ending(status)
        }
        kill(pid, SIGKILL)
        waitpid(pid, &status, 0)
        return .killedAtDeadline
    }

    /// Reads what the pipe has now into `output` (which keeps at most 1 MiB); `false` at its end.
    private static func readSome(_ descriptor: Int32, into output: inout [UInt8]) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let got = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        if got > 0 && output.count < 1 << 20 { output += buffer[..<got] }
        return got > 0 || (got < 0 && errno == EINTR)
    }

    /// Starts `executable` with each of `passing` open as its descriptor `as` (and `closing`
    /// closed in the child), stdin from /dev/null; returns its pid without waiting for it.
    package static func spawn(
        _ executable: String, _ arguments: [String], passing: [(descriptor: Int32, as: Int32)], closing: [Int32],
        extraEnvironment: [String] = []
    ) -> pid_t? {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (descriptor, target) in passing { posix_spawn_file_actions_adddup2(&actions, descriptor, target) }
        for descriptor in closing { posix_spawn_file_actions_addclose(&actions, descriptor) }
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
