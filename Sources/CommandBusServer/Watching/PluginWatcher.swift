import CommandBusSupport
import CommandBusLoading
import CommandBus
import Synchronization
import Glibc
import CEpoll

/// Hot loading for `cmdbus serve`: watches the plugin directories with inotify and loads a
/// `.so` once it has been written and closed, or moved in whole; takes a removed one's
/// handlers off the bus.
///
/// A file being copied in is loaded only at its close-after-write (or rename), never half-written.
/// Plugins loaded into the process cannot be unloaded: a removed file's handlers are
/// deregistered; an isolated plugin's worker finishes the calls it has, then stops. The
/// server's loader opens each plugin from a private copy of its file
/// (``PluginLoader/loadsPrivateCopies``), so a replacement is a new image running the new
/// code, and a file written over in place never changes the code running; the image a
/// replacement takes over from stays in memory.
///
/// A replacement never leaves its commands without a handler: it is loaded beside the file it
/// replaces, whose handlers come off only once the new ones are on, and if it cannot be loaded
/// the old one keeps its commands. A file opened for writing and closed unchanged (as a
/// process that inherited a writable descriptor to it does when it exits) is left as it is.
package final class PluginWatcher: Sendable {
    /// One loaded file: the plugin, the registrations that put its handlers on the bus, and
    /// the file's status when it was loaded, to tell a real change from a write that changed nothing.
    struct LoadedFile {
        let plugin: LoadedPlugin
        let registrations: [HandlerRegistration]
        let status: FileSystem.Status?
    }

    // Not private: the file work in PluginWatcher+Files.swift and the directory work in
    // PluginWatcher+Directories.swift, on the watching thread, read these, down to `skipped`,
    // and `descriptor`, `watches` and `onChange`.
    let loader: PluginLoader
    let bus: CommandBus
    let log: ServerLog
    /// How long a retired worker may take to finish the calls it has.
    let drain: Duration
    /// What is loaded, by file path.
    let loaded = Mutex<[String: LoadedFile]>([:])
    /// The files skipped and not loaded since, by path (and a plugin directory missing at
    /// start, by its path, until it appears): those of the start, and those a later event or
    /// ``loadAgain(_:)`` could not load.
    let skipped: Mutex<[String: SkippedPluginFile]>
    /// What the watching thread is asked to do between events (``rescanSoon()``, ``loadAgain(_:)``).
    private let requests = Mutex(Requests())
    let descriptor: Int32
    /// Written to wake the watching thread for its ``requests``.
    private let requestsWritten: Int32
    let watches: Mutex<Watches>
    /// The catalog loaded at start: its directories and skipped files.
    private let initial: PluginCatalog
    /// Told the catalog after each load, replacement or removal.
    let onChange: @Sendable (PluginCatalog) -> Void

    /// What inotify watches, by watch descriptor.
    struct Watches {
        /// The plugin directories.
        var directories: [Int32: String] = [:]
        /// For a plugin directory that did not exist at start, its parent, until it appears:
        /// the awaited directories' paths by name, by the parent's watch.
        var awaited: [Int32: [String: String]] = [:]
        /// For a plugin directory whose path is a symbolic link, its parent: the linked
        /// directories' paths by the link's name, by the parent's watch, so a deploy that points
        /// the link at a new release (`ln -sfn`, or `mv -T` of a new link) is seen.
        var links: [Int32: [String: String]] = [:]
    }

    /// What the watching thread is asked to do between events.
    private struct Requests {
        /// Read the plugin directories again.
        var rescan = false
        /// Load these files again, changed or not, and tell each caller how it went.
        var loadsAgain: [(path: String, reply: @Sendable (Result<LoadedPlugin, SkippedPluginFile>) -> Void)] = []
        /// Why the watching thread stopped, if it did: nothing is done any more.
        var ended: String?
    }

    /// What a plugin directory is watched for: its files' events (`IN_ATTRIB`: a `chmod`,
    /// `chown` or `touch` that writes nothing), and its own removal, move or change of mode.
    static let directoryEvents = UInt32(
        IN_CLOSE_WRITE | IN_MOVED_TO | IN_ATTRIB | IN_DELETE | IN_MOVED_FROM | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR
    )
    /// The events that say a plugin directory is gone from its path (`IN_IGNORED`: its watch ended).
    private static let directoryGone = UInt32(IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)

    /// - Parameters:
    ///   - drain: How long the worker of an isolated plugin that was removed or replaced may
    ///     take to finish the calls it has before it is stopped.
    ///   - onChange: Told the catalog after each load, replacement or removal (a host of the
    ///     shared bus offers the bus its new commands).
    package init?(
        loader: PluginLoader, bus: CommandBus, catalog: PluginCatalog, log: ServerLog, drain: Duration,
        onChange: @escaping @Sendable (PluginCatalog) -> Void = { _ in }
    ) {
        let descriptor = inotify_init1(Int32(IN_CLOEXEC))
        guard descriptor >= 0 else { return nil }
        // Requests wake the watching thread through it: without one, none would be answered.
        let requestsWritten = eventfd(0, Int32(EFD_CLOEXEC))
        guard requestsWritten >= 0 else {
            close(descriptor)
            return nil
        }
        var watches = Watches()
        var awaited: [String] = []
        for directory in loader.directories {
            let watch = inotify_add_watch(descriptor, directory, Self.directoryEvents)
            if watch >= 0 {
                watches.directories[watch] = directory
                Self.watchLink(of: directory, descriptor: descriptor, in: &watches)
            } else if errno == ENOENT, Self.watchForCreation(of: directory, descriptor: descriptor, in: &watches) != nil {
                awaited.append(directory)
            }
        }
        self.loader = loader
        self.bus = bus
        self.log = log
        self.drain = drain
        self.descriptor = descriptor
        self.requestsWritten = requestsWritten
        self.watches = Mutex(watches)
        self.initial = catalog
        skipped = Mutex(Dictionary(catalog.skipped.map { ($0.path, $0) }, uniquingKeysWith: { first, _ in first }))
        self.onChange = onChange
        for directory in awaited { log(.info, "plugin directory \(directory) does not exist yet; its plugins load once it is created") }
        loaded.withLock { table in
            for plugin in catalog.plugins {
                table[plugin.path] = LoadedFile(
                    plugin: plugin, registrations: catalog.registrations[plugin.path] ?? [], status: FileSystem.status(of: plugin.path)
                )
            }
        }
    }

    /// The plugins loaded now, initial and hot-loaded.
    package var plugins: [LoadedPlugin] { loaded.withLock { $0.values.map(\.plugin) }.sorted { $0.path < $1.path } }

    /// The catalog now: the plugins loaded at start and since, and the files skipped and not
    /// loaded since (at start, or at a later event); a missing directory is listed until it appears.
    package var catalog: PluginCatalog {
        let skipped = skipped.withLock { Array($0.values) }.sorted { $0.path < $1.path }
        return PluginCatalog(directories: initial.directories, plugins: plugins, skipped: skipped)
    }

    /// Asks the watching thread to read the plugin directories again, as after lost events (a
    /// `kill -HUP`): it does so between events, so no file is loaded twice at once.
    package func rescanSoon() {
        requests.withLock { $0.rescan = true }
        wakeWatchingThread()
    }

    /// Loads a plugin file of the watched directories again, changed or not, as if it had just
    /// been copied in (`cmdbus plugins forget FILE --connect`, the dashboard's "Try again"):
    /// its cached probe verdict is dropped first, so a file the probe quarantined is probed
    /// again, and an isolated plugin quarantined for crashing gets a new worker with no
    /// crashes counted. A loaded plugin is replaced as a new build would replace it.
    ///
    /// The watching thread does it between events, so no file is loaded twice at once.
    /// - Returns: The plugin loaded, or why the file was not.
    package func loadAgain(_ path: String) async -> Result<LoadedPlugin, SkippedPluginFile> {
        await withCheckedContinuation { continuation in
            let ended = requests.withLock { requests -> String? in
                if requests.ended == nil { requests.loadsAgain.append((path, { continuation.resume(returning: $0) })) }
                return requests.ended
            }
            if let ended { return continuation.resume(returning: .failure(SkippedPluginFile(path: path, reason: ended))) }
            wakeWatchingThread()
        }
    }

    /// ``loadAgain(_:)`` of `watcher`, or why a host without one (no inotify) cannot.
    package static func loadAgain(_ path: String, with watcher: PluginWatcher?) async -> Result<LoadedPlugin, SkippedPluginFile> {
        guard let watcher else {
            return .failure(SkippedPluginFile(path: path, reason: "this host does not watch its plugin directories (inotify is unavailable, or it has not joined the bus yet), so it loads no file again now; restart it to load the file"))
        }
        return await watcher.loadAgain(path)
    }

    private func wakeWatchingThread() {
        var one: UInt64 = 1
        _ = write(requestsWritten, &one, 8)
    }

    /// Starts watching on a thread of its own.
    package func start() {
        DetachedThread.start(named: "plugin-watch") { [self] in
            // Created between the start's failed watch and its parent's: loaded now.
            loadAwaitedDirectoriesThatExist()
            self.watch()
        }
    }

    /// Watches until reading the events fails, then says so, and answers what is asked from then on.
    private func watch() {
        let failure = watchUntilAReadFails()
        let reason = "this host stopped watching its plugin directories (\(failure)); restart it to load plugin files again"
        log(.error, reason)
        let waiting = requests.withLock { requests in
            requests.ended = reason
            defer { requests.loadsAgain = [] }
            return requests.loadsAgain
        }
        for request in waiting { request.reply(.failure(SkippedPluginFile(path: request.path, reason: reason))) }
    }

    /// Reads the directories' events, and the requests, until a read fails. Returns what failed,
    /// said as it happened (the error number is read there, before anything can change it).
    private func watchUntilAReadFails() -> String {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var ready = [pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0), pollfd(fd: requestsWritten, events: Int16(POLLIN), revents: 0)]
        while true {
            guard poll(&ready, 2, -1) >= 0 || errno == EINTR else { return "waiting for their events failed: \(String(cString: strerror(errno)))" }
            if ready[1].revents != 0 {
                var count: UInt64 = 0
                _ = read(requestsWritten, &count, 8)
                let asked = requests.withLock { requests in
                    defer { requests = Requests() }
                    return requests
                }
                if asked.rescan { rescan(announcing: "SIGHUP: reading the plugin directories again", level: .info) }
                for request in asked.loadsAgain { request.reply(loadAgainNow(request.path)) }
            }
            guard ready[0].revents != 0 else { continue }
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return count == 0 ? "inotify closed its descriptor" : "reading their events failed: \(String(cString: strerror(errno)))" }
            var offset = 0
            while offset + 16 <= count {
                let (watch, mask, nameLength) = buffer.withUnsafeBytes { raw in
                    (raw.load(fromByteOffset: offset, as: Int32.self), raw.load(fromByteOffset: offset + 4, as: UInt32.self),
                     Int(raw.load(fromByteOffset: offset + 12, as: UInt32.self)))
                }
                let nameBytes = buffer[(offset + 16)..<min(count, offset + 16 + nameLength)].prefix { $0 != 0 }
                offset += 16 + nameLength
                let name = String(decoding: nameBytes, as: UTF8.self)
                if mask & UInt32(IN_Q_OVERFLOW) != 0 {
                    rescan(announcing: "plugin file events were lost (the kernel's queue for them overflowed); reading the plugin directories again")
                    continue
                }
                if mask & Self.directoryGone != 0 {
                    vanished(watch)
                    continue
                }
                if mask & UInt32(IN_CREATE | IN_MOVED_TO) != 0, let directory = watches.withLock({ $0.links[watch]?[name] }) {
                    relinked(directory)
                    continue
                }
                if name.isEmpty, mask & UInt32(IN_ATTRIB) != 0, let directory = watches.withLock({ $0.directories[watch] }) {
                    directoryAttributesChanged(directory)
                    continue
                }
                if mask & UInt32(IN_ISDIR) != 0 {
                    if mask & UInt32(IN_CREATE | IN_MOVED_TO) != 0 { appeared(name, watchedBy: watch) }
                    continue
                }
                guard name.hasSuffix(PluginFileInspector.pluginExtension), let directory = watches.withLock({ $0.directories[watch] }) else { continue }
                let path = FileSystem.join(directory, name)
                if mask & UInt32(IN_DELETE | IN_MOVED_FROM) != 0 {
                    unload(path, reason: "the file was removed")
                } else if mask & UInt32(IN_CLOSE_WRITE | IN_MOVED_TO) != 0 {
                    // Not at IN_CREATE (a plugin directory that is also an awaited one's parent
                    // hears it): a file is loaded once written and closed, never half-written.
                    load(path, in: directory)
                } else if mask & UInt32(IN_ATTRIB) != 0 {
                    attributesChanged(path, in: directory)
                }
            }
        }
    }

    /// ``loadAgain(_:)``, on the watching thread.
    private func loadAgainNow(_ path: String) -> Result<LoadedPlugin, SkippedPluginFile> {
        // A bare name is a file of that name in the directories, the first in their load order.
        let byName = !path.contains("/")
        let wanted = byName ? nil : FileSystem.realPath(path)
        let watched = watches.withLock { Set($0.directories.values) }
        let directories = loader.directories.filter(watched.contains)
        for directory in directories {
            let files = (try? PluginLoader.candidates(in: directory)) ?? []
            guard let file = files.first(where: { candidate in
                byName ? FileSystem.lastComponent(candidate) == path : candidate == path || (wanted != nil && FileSystem.realPath(candidate) == wanted)
            }) else { continue }
            let forgotten = loader.forgetVerdict(file)
            log(.info, "loading \(file) again, as asked" + (forgotten ? "; its cached probe verdict is forgotten" : ""))
            return load(file, in: directory, evenIfUnchanged: true)
        }
        let reason = byName ? "no plugin file of that name is in this host's plugin directories (\(directories.joined(separator: ", "))); 'cmdbus plugins' lists them"
            : FileSystem.kind(of: path) == .missing
            ? "there is no such file; give the path of a plugin file, as 'cmdbus plugins' lists it"
            : "it is not a plugin file (.so) in this host's plugin directories (\(directories.joined(separator: ", "))); give the path of one, as 'cmdbus plugins' lists it"
        return .failure(SkippedPluginFile(path: path, reason: reason))
    }

}
