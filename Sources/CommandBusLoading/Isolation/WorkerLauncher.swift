import CommandBusSupport
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc
import CLinux

/// Starts one worker process for an ``IsolatedPlugin``: `cmdbus plugins worker FILE` with a
/// socket to it on descriptor 3 and a pipe on which it names the call that crashed it, and
/// waits for it to say what it loaded.
struct WorkerLauncher {
    /// The `cmdbus` binary that runs `plugins worker FILE`.
    let executable: String
    /// The plugin file the worker loads.
    let file: String
    /// The SHA-256 `plugins.lock` lists for the file, which the worker checks on its copy.
    let hash: String?

    /// Spawns a worker and waits (at most ``IsolatedPlugin/startDeadline``) for it to say what it loaded.
    func launch() -> Result<(pid_t, IsolatedPlugin.RunningWorker), PluginLoadFailure> {
        var sockets: [Int32] = [0, 0]
        // Close-on-exec, so other children never inherit a worker's socket (its EOF must mean it died);
        // the dup2 onto descriptor 3 in the worker's own spawn clears the flag on its end there.
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &sockets) == 0 else {
            return .failure(.init("cannot make a socketpair for its worker"))
        }
        // Where a crashing worker names the call that crashed it, close-on-exec for the same
        // reason, and never blocking: a child the plugin started may hold the worker's end.
        var culprit: [Int32] = [0, 0]
        guard pipe2(&culprit, O_CLOEXEC | O_NONBLOCK) == 0 else {
            close(sockets[0]); close(sockets[1])
            return .failure(.init("cannot make a pipe for its worker"))
        }
        guard let pid = ChildProcess.spawn(
            executable, ChildProcessRole.worker(file: file, hash: hash).arguments,
            passing: [(sockets[1], PluginWorker.channelDescriptor), (culprit[1], PluginWorker.culpritDescriptor)],
            closing: [sockets[0], culprit[0]], extraEnvironment: ["SWIFT_BACKTRACE=enable=no"]
        ) else {
            for descriptor in sockets + culprit { close(descriptor) }
            return .failure(.init("cannot start a worker (\(executable))"))
        }
        close(sockets[1])
        close(culprit[1])
        var timeout = timeval(tv_sec: Int(IsolatedPlugin.startDeadline.components.seconds), tv_usec: 0)
        setsockopt(sockets[0], SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let channel = FrameChannel(descriptor: sockets[0])
        let first = channel.receive()
        var none = timeval(tv_sec: 0, tv_usec: 0)
        setsockopt(sockets[0], SOL_SOCKET, SO_RCVTIMEO, &none, socklen_t(MemoryLayout<timeval>.size))
        guard let first, first.kind == .ready,
              let description = try? JSONDecoder().decode(PluginDescription.self, from: Data(first.body)) else {
            let reason: String
            if let first, first.kind == .loadFailed {
                reason = String(decoding: first.body, as: UTF8.self)
                _ = Self.ending(of: pid)
            } else {
                // It answered nothing useful within the deadline: make sure it is gone before reaping it.
                kill(pid, SIGKILL)
                reason = "its worker \(Self.ending(of: pid)) while loading"
            }
            channel.close()
            close(culprit[0])
            return .failure(.init(reason))
        }
        guard let reader = WorkerReader(channel: channel) else {
            kill(pid, SIGKILL)
            _ = Self.ending(of: pid)
            channel.close()
            close(culprit[0])
            return .failure(.init("cannot make a pipe to watch its worker"))
        }
        return .success((pid, IsolatedPlugin.RunningWorker(pid: pid, reader: reader, description: description, culprit: culprit[0])))
    }

    /// How a worker process ended, for messages: "crashed with SIGSEGV", "exited with status 1".
    static func ending(of pid: pid_t) -> String {
        var status: Int32 = 0
        guard waitpid(pid, &status, 0) == pid else { return "ended" }
        let signal = status & 0x7F
        return signal == 0 ? "exited with status \((status >> 8) & 0xFF)" : "crashed with \(ChildProcess.signalName(signal))"
    }
}

extension IsolatedPlugin.RunningWorker {
    /// The call whose plugin code crashed this worker, which has died, if it named one; closes
    /// the pipe it would have named it on, so this is asked once.
    func takeCulprit() -> UInt64? {
        defer { close(culprit) }
        var id: UInt64 = 0
        // The worker has been reaped, so what it wrote is there; the pipe does not block.
        let got = read(culprit, &id, MemoryLayout<UInt64>.size)
        return got == MemoryLayout<UInt64>.size && id != 0 ? id : nil
    }
}
