import CommandBusSupport
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What probing found about plugin files, cached on disk as GStreamer caches its registry:
/// a file is probed again only when it changes (its size, modification time or inode).
public struct PluginRegistry: Sendable {
    /// What probing a file concluded.
    public struct Entry: Codable, Sendable, Equatable {
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

    private struct Stored: Codable {
        package var version = 1
        package var entries: [String: Entry]
    }

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
        let stored = FileSystem.readAll(path).flatMap { try? JSONDecoder().decode(Stored.self, from: Data($0)) }
        entries = stored?.entries ?? [:]
    }

    /// The cached entry for the file at `path`, if the file has not changed since it was probed.
    package func entry(for path: String, status: FileSystem.Status) -> Entry? {
        guard let entry = entries[path], entry.size == status.size, entry.modified == status.modified, entry.inode == status.inode else {
            return nil
        }
        return entry
    }

    package mutating func record(_ entry: Entry, for path: String) {
        entries[path] = entry
    }

    /// Forgets the file at `path`; returns whether there was an entry.
    public mutating func forget(_ path: String) -> Bool {
        entries.removeValue(forKey: FileSystem.realPath(path) ?? path) != nil
    }

    /// Writes the registry (its directory is created if needed).
    package func save() {
        let directory = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        if !directory.isEmpty, FileSystem.kind(of: directory) == .missing {
            try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        // Files that are gone no longer need a verdict.
        let current = entries.filter { FileSystem.kind(of: $0.key) != .missing }
        guard let data = try? encoder.encode(Stored(entries: current)) else { return }
        _ = FileSystem.writeAtomically(String(decoding: data, as: UTF8.self), to: path)
    }
}
