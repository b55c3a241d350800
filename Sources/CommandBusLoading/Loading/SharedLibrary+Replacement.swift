import CommandBusSupport
import Synchronization
import Glibc

extension SharedLibrary {
    /// The status of each plugin file opened by its own path, as it was when opened.
    ///
    /// The dynamic linker keeps one image per name for the life of the process (`dlopen` of a
    /// name it has hands back that image), and this record mirrors that table, which is as
    /// process-wide as it is: it tells a file opened again unchanged from one replaced since.
    private static let openedByPath = Mutex<[String: FileSystem.Status]>([:])
    /// Counts the private copies made, so no two share a directory name in this process.
    private static let copiesMade = Atomic<Int>(0)
    /// The plugin images this process has mapped, and their files' sizes in bytes.
    private static let mapped = Mutex<(count: Int, bytes: Int)>((0, 0))

    /// The plugin images this process has mapped, the loaded ones and those replaced since
    /// (nothing is unloaded, so they stay until the process ends), and their files' total size:
    /// what hot loading has cost in memory, for the metrics.
    package static var imagesMapped: (count: Int, bytes: Int) { mapped.withLock { $0 } }

    /// Counts a new image of `size` bytes.
    private static func countImage(size: Int?) {
        mapped.withLock { $0.count += 1; $0.bytes += size ?? 0 }
    }

    /// Opens a plugin file so that its current code runs: by its path the first time, and
    /// again by its path while it is unchanged; once it has changed (replaced, or rewritten
    /// in place), from a private copy, which the linker takes as a new image.
    ///
    /// The image opened before stays in memory (nothing is unloaded); the copy is removed
    /// once it is open, and the crash report still names the file.
    /// A plugin under a `plugins.lock` is opened from a checked copy instead
    /// (``init(openingPrivateCopyOf:hash:)``).
    /// - Throws: The linker's message, naming `path`, or why no copy could be made.
    package init(openingPlugin path: String) throws(PluginLoadFailure) {
        let status = FileSystem.status(of: path)
        let openedBefore = Self.openedByPath.withLock { $0[path] }
        guard let openedBefore, openedBefore != status else {
            try self.init(opening: path)
            if openedBefore == nil { Self.countImage(size: status?.size) }
            if let status { Self.openedByPath.withLock { opened in opened[path] = opened[path] ?? status } }
            return
        }
        try self.init(openingPrivateCopyOf: path)
    }

    /// Opens a private copy of `path`, made in a new directory of the temporary directory or,
    /// if that cannot be made or mapped (a `noexec` mount), of the plugin's own directory, and
    /// removed once open: the image then owes nothing to the file, which may be written over
    /// in place (`cp` a new build onto it) without changing or crashing the code running.
    ///
    /// - Parameter hash: The SHA-256 `plugins.lock` lists for the file. The copy is checked
    ///   against it before it is opened, so what runs is what the lock admitted, even if the
    ///   file changed between the trust rules' check and the copy.
    /// - Throws: The linker's refusal of the file, a copy whose hash differs, or why neither place would do.
    package init(openingPrivateCopyOf path: String, hash: String? = nil) throws(PluginLoadFailure) {
        var refusals: [String] = []
        for place in [Self.temporaryDirectory, FileSystem.parentDirectory(of: path)] {
            let copy: PluginFileCopy
            do {
                copy = try PluginFileCopy(of: path, under: place, number: Self.copiesMade.add(1, ordering: .relaxed).newValue)
            } catch {
                refusals.append(error.reason)
                continue
            }
            defer { copy.remove() }
            if let hash { try PluginAllowlist.verify(copy.path, hash: hash) }
            do {
                try self.init(opening: copy.path)
                Self.countImage(size: FileSystem.status(of: copy.path)?.size)
                return
            } catch {
                // The linker names the copy; the user knows the file.
                let reason = error.reason.replacing(copy.path, with: path)
                guard reason.contains("failed to map segment") else {
                    var failure = PluginLoadFailure(reason)
                    failure.dependsOnThisMachine = error.dependsOnThisMachine
                    throw failure
                }
                refusals.append("in \(place): \(reason)")
            }
        }
        var failure = PluginLoadFailure(
            "no private copy of it could be made to load (\(refusals.joined(separator: "; "))); "
                + "set TMPDIR to a directory this process can write to and run code from"
        )
        failure.foundNoPlaceForACopy = true
        failure.dependsOnThisMachine = true
        throw failure
    }

    private static var temporaryDirectory: String {
        getenv("TMPDIR").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
    }
}
