import CommandBus
import CommandBusLoading
import CommandBusSupport
import Glibc

// What the watcher does when a plugin directory itself changes: one missing at start appears,
// one is removed or moved away, the symbolic link at its path is made anew, or events were lost
// and all are read again. Each runs on the watching thread only; they are the module's, not
// private, only to live in this file.
extension PluginWatcher {
    /// Loads and watches each awaited plugin directory that exists now, though no event said so.
    func loadAwaitedDirectoriesThatExist() {
        for (parent, names) in watches.withLock({ $0.awaited }) {
            for (name, directory) in names where FileSystem.kind(of: directory) == .directory { appeared(name, watchedBy: parent) }
        }
    }

    /// Watches `directory`'s parent for it to be created or moved in (adding to the parent's
    /// mask, which may be a plugin directory's too); the parent's watch, or `nil` if the parent
    /// cannot be watched either.
    static func watchForCreation(of directory: String, descriptor: Int32, in watches: inout Watches) -> Int32? {
        let parent = inotify_add_watch(descriptor, FileSystem.parentDirectory(of: directory), UInt32(IN_CREATE | IN_MOVED_TO | IN_ONLYDIR | IN_MASK_ADD))
        guard parent >= 0 else { return nil }
        watches.awaited[parent, default: [:]][FileSystem.lastComponent(directory)] = directory
        return parent
    }

    /// If `directory`'s path is a symbolic link, watches its parent for the link to be made anew.
    static func watchLink(of directory: String, descriptor: Int32, in watches: inout Watches) {
        guard let status = FileSystem.status(of: directory, followingLinks: false), mode_t(status.mode) & S_IFMT == S_IFLNK else { return }
        let parent = inotify_add_watch(descriptor, FileSystem.parentDirectory(of: directory), UInt32(IN_CREATE | IN_MOVED_TO | IN_MASK_ADD))
        guard parent >= 0 else { return }
        watches.links[parent, default: [:]][FileSystem.lastComponent(directory)] = directory
    }

    /// A directory `name` appeared in a directory watched for it: if it is an awaited plugin
    /// directory, watches it and loads what it holds.
    func appeared(_ name: String, watchedBy parent: Int32) {
        guard let directory = watches.withLock({ $0.awaited[parent]?[name] }) else { return }
        let watch = inotify_add_watch(descriptor, directory, Self.directoryEvents)
        guard watch >= 0 else { return }
        watches.withLock { watches in
            watches.directories[watch] = directory
            watches.awaited[parent]?[name] = nil
            Self.watchLink(of: directory, descriptor: descriptor, in: &watches)
        }
        skipped.withLock { _ = $0.removeValue(forKey: directory) }
        log(.info, "plugin directory \(directory) was created; loading its plugins")
        // Files copied in before the watch began are loaded here; later ones by their events.
        loadAll(in: directory)
    }

    /// Reads the plugin directories again, so what was added, replaced or removed is loaded or
    /// taken off as its events would have had it; unchanged files stay as they are. For when the
    /// kernel dropped events (this watcher's queue overflowed, as a burst of file changes while
    /// the server is stopped or busy can make it), or when asked (``rescanSoon()``).
    func rescan(announcing message: String, level: LogLevel = .warning) {
        log(level, message)
        let directories = watches.withLock { $0.directories }
        for (watch, directory) in directories where FileSystem.kind(of: directory) != .directory { vanished(watch) }
        let removed = loaded.withLock { Array($0.keys) }.filter { FileSystem.status(of: $0) == nil }
        for path in removed.sorted() { unload(path, reason: "the file was removed") }
        for directory in directories.values { dropSkippedFilesGone(from: directory) }
        for directory in watches.withLock({ $0.directories.values }).sorted() {
            loadAll(in: directory)
        }
        loadAwaitedDirectoriesThatExist()
    }

    /// A plugin directory was removed or moved away (`watch` was its watch, if it is one): its
    /// plugins come off the bus, and it is awaited at its path again, as one missing at start is.
    func vanished(_ watch: Int32) {
        guard let directory = watches.withLock({ $0.directories.removeValue(forKey: watch) }) else { return }
        inotify_rm_watch(descriptor, watch)  // a moved directory's watch would follow it
        let removed = loaded.withLock { table in
            table.keys.filter { Self.isFile($0, directlyIn: directory) }.compactMap { path in
                table.removeValue(forKey: path).map { (path, $0) }
            }
        }
        for (path, entry) in removed { retire(entry, path: path, reason: "its directory was removed") }
        let parent = watches.withLock { Self.watchForCreation(of: directory, descriptor: descriptor, in: &$0) }
        dropSkippedFilesGone(from: directory)
        skipped.withLock { $0[directory] = SkippedPluginFile(path: directory, reason: PluginLoader.missingDirectory) }
        log(.warning, "plugin directory \(directory) was removed or moved away"
            + (removed.isEmpty ? "" : "; \(counted(removed.count, "plugin")) taken off the bus")
            + (parent == nil ? "; its parent cannot be watched, so it is not loaded again until a restart" : "; its plugins load again once it is created"))
        if !removed.isEmpty { onChange(catalog) }
        // Back before its parent's watch began: loaded now.
        if let parent, FileSystem.kind(of: directory) == .directory { appeared(FileSystem.lastComponent(directory), watchedBy: parent) }
    }

    /// The symbolic link at a plugin directory's path was made anew (a deploy pointed it at a
    /// new release): the directory it leads to now is watched in place of the old one, and read
    /// as a rescan reads it, so a file of the same name there replaces the loaded one and a file
    /// it lacks comes off the bus.
    func relinked(_ directory: String) {
        let old = watches.withLock { watches in watches.directories.first { $0.value == directory }?.key }
        guard FileSystem.kind(of: directory) == .directory else {
            if let old { vanished(old) }
            return
        }
        let new = inotify_add_watch(descriptor, directory, Self.directoryEvents)
        guard new >= 0 else { return }
        // The old target's watch goes, unless it is the same directory (the link made anew to it).
        if let old, old != new { inotify_rm_watch(descriptor, old) }
        watches.withLock { watches in
            if let old { watches.directories[old] = nil }
            watches.directories[new] = directory
        }
        log(.info, "plugin directory \(directory) is a symbolic link made anew; reading the directory it leads to now")
        let gone = loaded.withLock { Array($0.keys) }.filter { Self.isFile($0, directlyIn: directory) && FileSystem.status(of: $0) == nil }
        for path in gone.sorted() { unload(path, reason: "the file is not in the directory the link leads to now") }
        dropSkippedFilesGone(from: directory)
        loadAll(in: directory)
    }
}
