import CommandBusSupport
import Dispatch
import Synchronization
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension PluginLoader {
    /// A probe's verdict: `nil` if the file may load, otherwise the reason, whether it is
    /// quarantined, and whether it is the file's own, for the registry to keep (``PluginProbe/verdict(for:)``).
    package typealias ProbeVerdict = (reason: String, quarantined: Bool, lasting: Bool)?

    /// Asks the registry, or else the probe, whether `file` may load here; throws the reason if not.
    static func probeIfNew(_ file: String, probe: PluginProbe, registry: inout PluginRegistry) throws(PluginLoadFailure) {
        // The cheap checks run no plugin code, so no child is needed for a file that fails them.
        try PluginFileInspector.inspect(file)
        let key = FileSystem.realPath(file) ?? file
        guard let status = FileSystem.status(of: file) else { return }
        if let cached = registry.entry(for: key, status: status) {
            if cached.verdict == "ok" { return }
            throw .init(cached.reason ?? cached.verdict)
        }
        let verdict = probe.verdict(for: file)
        record(verdict, sha256: SHA256.ofFile(file), key: key, status: status, in: &registry)
        if let verdict { throw .init(verdict.reason) }
    }

    /// Probes the files the registry has no verdict for, as many at a time as this process may use
    /// CPUs, and records each verdict. A folder of new plugins costs about one probe per CPU in
    /// wall time instead of one probe per file.
    /// - Returns: The files the registry now admits (known, or just probed, as `ok`): they need no
    ///   `probeIfNew`. The rest go through it, which gives the reason for each refusal.
    static func probeNewFiles(_ files: [String], probe: PluginProbe, registry: inout PluginRegistry) -> Set<String> {
        var admitted: Set<String> = []
        // The registry first: a warm start reads no file's header here.
        let unknown: [(file: String, key: String, status: FileSystem.Status)] = files.compactMap { file in
            guard let status = FileSystem.status(of: file) else { return nil }
            let key = FileSystem.realPath(file) ?? file
            if let known = registry.entry(for: key, status: status) {
                if known.verdict == "ok" { admitted.insert(file) }
                return nil
            }
            guard (try? PluginFileInspector.inspect(file)) != nil else { return nil }
            return (file, key, status)
        }
        guard !unknown.isEmpty else { return admitted }
        let work = Mutex(ProbeWork(count: unknown.count))
        let width = min(unknown.count, max(1, ProcessInfo.processInfo.activeProcessorCount))
        DispatchQueue.concurrentPerform(iterations: width) { _ in
            while let index = work.withLock({ $0.take() }) {
                let file = unknown[index].file
                let answer = ProbeAnswer(verdict: probe.verdict(for: file), sha256: SHA256.ofFile(file))
                work.withLock { $0.answers[index] = answer }
            }
        }
        let answers = work.withLock { $0.answers }
        for (index, probed) in unknown.enumerated() {
            guard let answer = answers[index] else { continue }
            record(answer.verdict, sha256: answer.sha256, key: probed.key, status: probed.status, in: &registry)
            if answer.verdict == nil { admitted.insert(probed.file) }
        }
        return admitted
    }

    private static func record(
        _ verdict: ProbeVerdict, sha256: String?, key: String, status: FileSystem.Status, in registry: inout PluginRegistry
    ) {
        // A refusal for what this machine lacks is asked again next time.
        if let verdict, !verdict.lasting { return }
        registry.record(PluginRegistry.Entry(
            size: status.size, modified: status.modified, inode: status.inode, sha256: sha256 ?? "",
            verdict: verdict == nil ? "ok" : (verdict!.quarantined ? "quarantined" : "refused"), reason: verdict?.reason,
            probedAt: Date().timeIntervalSince1970
        ), for: key)
    }
}

/// What one probe found about a file, and the file's digest for the registry.
private struct ProbeAnswer {
    let verdict: PluginLoader.ProbeVerdict
    let sha256: String?
}

/// The probes still to start, and the answers in so far, shared by the probing threads.
private struct ProbeWork {
    private var next = 0
    let count: Int
    var answers: [ProbeAnswer?]

    init(count: Int) {
        self.count = count
        answers = Array(repeating: nil, count: count)
    }

    /// The index of the next file to probe, or `nil` when every probe has started.
    mutating func take() -> Int? {
        guard next < count else { return nil }
        defer { next += 1 }
        return next
    }
}
