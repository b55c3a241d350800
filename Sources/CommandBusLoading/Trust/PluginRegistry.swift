import CommandBusSupport
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What probing and loading found about plugin files, cached on disk as GStreamer caches its
/// registry: a file is probed again only when it changes (its size, modification time or inode),
/// and a one-shot command opens only the files its command reaches (``PluginDescriptorSummary``).
public struct PluginRegistry: Sendable {
    /// What probing a file concluded.
    public struct Entry: Sendable, Equatable {
        /// The file's size, modification time (ns) and inode when it was probed.
        package var size: Int
        package var modified: Int64
        package var inode: UInt64
        /// Its SHA-256 when it was probed.
        package var sha256: String
        /// `ok`, `refused` (not a loadable plugin) or `quarantined` (it crashed or hung the probe).
        package var verdict: String
        /// Why it was refused or quarantined.
        package var reason: String?
        /// When it was probed.
        package var probedAt: Double
    }

    /// The cache file.
    public let path: String
    private(set) var entries: [String: Entry]
    /// What each file's descriptor said when it last loaded, by real path.
    private(set) var descriptors: [String: PluginDescriptorSummary]
    /// Whether anything was recorded or forgotten since the file was read.
    package private(set) var isChanged = false

    /// The registry at `$CMDBUS_REGISTRY`, else `$XDG_CACHE_HOME/cmdbus/registry.json`, else `~/.cache/cmdbus/registry.json`.
    public static func defaultPath(environment: [String: String]) -> String {
        if let explicit = environment["CMDBUS_REGISTRY"], !explicit.isEmpty { return explicit }
        let cache = environment["XDG_CACHE_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? FileSystem.join(environment["HOME"] ?? "/tmp", ".cache")
        return FileSystem.join(FileSystem.join(cache, "cmdbus"), "registry.json")
    }

    /// Reads the registry at `path`; a missing or unreadable one starts empty.
    public init(path: String) {
        self.path = path
        (entries, descriptors) = FileSystem.readAll(path).map(Self.decode) ?? ([:], [:])
    }

    /// The cached entry for the file at `path`, if the file has not changed since it was probed.
    package func entry(for path: String, status: FileSystem.Status) -> Entry? {
        guard let entry = entries[path], entry.size == status.size, entry.modified == status.modified, entry.inode == status.inode else {
            return nil
        }
        return entry
    }

    package mutating func record(_ entry: Entry, for path: String) {
        guard entries[path] != entry else { return }
        entries[path] = entry
        isChanged = true
    }

    /// The descriptor cached for the file at `path`, if the file has not changed since it loaded
    /// and a host of this plugin ABI and Swift compiler loaded it.
    package func descriptor(for path: String, status: FileSystem.Status) -> PluginDescriptorSummary? {
        guard let summary = descriptors[path], summary.describes(status), summary.host == PluginDescriptorSummary.currentHost else {
            return nil
        }
        return summary
    }

    package mutating func record(_ summary: PluginDescriptorSummary, for path: String) {
        guard descriptors[path] != summary else { return }
        descriptors[path] = summary
        isChanged = true
    }

    /// Forgets the file at `path`: its verdict and its descriptor. Returns whether there was either.
    public mutating func forget(_ path: String) -> Bool {
        let key = FileSystem.realPath(path) ?? path
        let hadVerdict = entries.removeValue(forKey: key) != nil
        let hadDescriptor = descriptors.removeValue(forKey: key) != nil
        let forgotten = hadVerdict || hadDescriptor
        isChanged = isChanged || forgotten
        return forgotten
    }

    /// Writes the registry (its directory is created if needed); `nil` once written, else why not.
    @discardableResult
    package func save() -> String? {
        let directory = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        if !directory.isEmpty, let failure = FileSystem.makeDirectories(directory, mode: 0o755) { return failure }
        // Files that are gone no longer need a verdict.
        let current = entries.filter { FileSystem.kind(of: $0.key) != .missing }
        let described = descriptors.filter { FileSystem.kind(of: $0.key) != .missing }
        return FileSystem.writeAtomically(Self.encode(entries: current, descriptors: described), to: path)
    }

    /// What a host says, once, when it cannot save the registry: what that costs and how to mend it.
    package func unsavedWarning(_ failure: String) -> String {
        "cannot save the plugin registry \(path) (\(failure)): each start probes and opens the plugin files anew, which is slower; "
            + "set CMDBUS_REGISTRY to a file this user can write"
    }
}
