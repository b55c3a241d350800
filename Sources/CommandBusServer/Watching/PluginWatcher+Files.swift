import CommandBusLoading
import CommandBusSupport

// What the watcher does to the files its events name: load, replace, take off, retire. Each
// runs on the watching thread only (the thread ``PluginWatcher/start()`` starts), which
// keeps one file's loads in order; they are the module's, not private, only to live in this file.
extension PluginWatcher {
    /// A file's owner, mode or times changed with nothing written. A skipped file is tried
    /// again: the trust rules' advice for a file they refuse, `chmod go-w`, was otherwise
    /// followed by nothing until a restart or SIGHUP. A loaded file whose times changed is
    /// loaded anew, as a quarantine's advice says a `touch` does, whatever the tool (`touch`
    /// opens the file, which makes a close event; `os.utime` does not); one whose owner or mode
    /// alone changed stays as it is (``load(_:in:evenIfUnchanged:)`` says so). A file neither
    /// loaded nor skipped is being written (`cp -p` sets a new file's mode and times before it
    /// closes it): its close loads it, whole.
    func attributesChanged(_ path: String, in directory: String) {
        guard loaded.withLock({ $0[path] != nil }) || skipped.withLock({ $0[path] != nil }) else { return }
        load(path, in: directory)
    }

    /// A plugin directory's own mode or owner changed, which the trust rules read for each file
    /// in it: the files it refused are tried again, and the plugins loaded from it stay, with a
    /// warning if the rules would now refuse the directory.
    func directoryAttributesChanged(_ directory: String) {
        loadAll(in: directory)
        do { try loader.trust.check(directory: directory) } catch {
            let plugins = loaded.withLock { table in table.filter { Self.isFile($0.key, directlyIn: directory) }.map(\.value.plugin.name) }
            warnNoLongerTrusted("\(directory): \(error.reason)", plugins: plugins)
        }
    }

    /// Says that a trust rule now refuses what `plugins` were loaded from (`refusal`: "PATH:
    /// REASON"): they stay loaded as they were checked, and will not load again as they are.
    func warnNoLongerTrusted(_ refusal: String, plugins: [String]) {
        guard !plugins.isEmpty else { return }
        let named = plugins.sorted().map { quoted($0) }.joined(separator: ", ")
        let (plural, them) = plugins.count == 1 ? ("plugin \(named) stays", "it is") : ("plugins \(named) stay", "they are")
        log(.warning, "\(refusal); \(plural) loaded as checked when loaded, but will not load again as \(them)")
    }

    /// Takes the files of `directory` that are gone off the skipped list (a removed directory's
    /// files, those not in the directory a link leads to now).
    func dropSkippedFilesGone(from directory: String) {
        skipped.withLock { table in
            for path in table.keys where Self.isFile(path, directlyIn: directory) && FileSystem.status(of: path) == nil {
                table[path] = nil
            }
        }
    }

    /// Whether `path` names a file directly in `directory` (the watcher's tables key files by
    /// their paths in their plugin directories).
    static func isFile(_ path: String, directlyIn directory: String) -> Bool {
        FileSystem.join(directory, FileSystem.lastComponent(path)) == path
    }

    /// Loads (or, if changed, replaces) each plugin file in `directory`.
    func loadAll(in directory: String) {
        for file in (try? PluginLoader.candidates(in: directory)) ?? [] { load(file, in: directory) }
    }

    /// Loads a file that was written or moved in; if it replaces a loaded one, the old one's
    /// handlers come off once the new one's are on, or stay if the new one cannot be loaded.
    /// A loaded file whose bytes have not changed stays as it is, unless `evenIfUnchanged`,
    /// even if its owner or mode did: the new ones are recorded, so that the next look finds it
    /// unchanged, and a warning says if the trust rules would now refuse it. (Which look comes
    /// first, the file's own event or a read of its whole directory, is a race; either way the
    /// file is loaded anew only if its bytes, or its times, changed.)
    /// - Returns: The plugin loaded now, or the one that stays, or why the file was skipped.
    @discardableResult
    func load(_ path: String, in directory: String, evenIfUnchanged: Bool = false) -> Result<LoadedPlugin, SkippedPluginFile> {
        let status = FileSystem.status(of: path)
        let previous = loaded.withLock { $0[path] }
        if let previous, let status, let before = previous.status, before.hasSameContents(as: status), !evenIfUnchanged {
            if before != status { keepLoaded(previous, at: path, in: directory, now: status) }
            log(.debug, "\(path) is unchanged since it was loaded; \(previous.plugin.name) stays loaded")
            return .success(previous.plugin)
        }
        switch loader.loadFile(path, in: directory, into: bus) {
        case .success(let new):
            self.loaded.withLock { $0[path] = LoadedFile(plugin: new.plugin, registrations: new.registrations, status: status) }
            skipped.withLock { _ = $0.removeValue(forKey: path) }
            log(.info, "loaded \(path): \(new.plugin.name) \(new.plugin.version), commands \(new.plugin.commands.joined(separator: ", "))")
            if let previous { retire(previous, path: path, reason: "the file was replaced") }
            onChange(self.catalog)
            return .success(new.plugin)
        case .failure(let skipped) where previous != nil:
            log(.warning, "skipped the replacement of \(path): \(skipped.reason); the plugin loaded before keeps its commands")
            return .failure(skipped)
        case .failure(let skipped):
            log(.warning, "skipped \(skipped.message)")
            self.skipped.withLock { $0[path] = skipped }
            return .failure(skipped)
        }
    }

    /// Records a loaded file's new owner or mode, and warns if the trust rules would now refuse it.
    private func keepLoaded(_ previous: LoadedFile, at path: String, in directory: String, now status: FileSystem.Status) {
        loaded.withLock { $0[path] = LoadedFile(plugin: previous.plugin, registrations: previous.registrations, status: status) }
        do { try loader.trust.check(file: path, in: directory, allowlist: nil) } catch {
            warnNoLongerTrusted("\(path): \(error.reason)", plugins: [previous.plugin.name])
        }
    }

    func unload(_ path: String, reason: String) {
        skipped.withLock { _ = $0.removeValue(forKey: path) }
        guard let entry = loaded.withLock({ $0.removeValue(forKey: path) }) else { return }
        retire(entry, path: path, reason: reason)
        onChange(catalog)
    }

    /// Takes a loaded file's handlers off the bus and retires its worker, if it has one: the
    /// worker finishes the calls it has, then stops.
    func retire(_ entry: LoadedFile, path: String, reason: String) {
        for registration in entry.registrations { registration.cancel() }
        entry.plugin.worker?.retire(drainingFor: drain)
        let how = entry.plugin.worker == nil
            ? "its handlers were taken off the bus (a plugin loaded in-process stays in memory)"
            : "its worker stops once the calls it has end (within \(drain.spoken))"
        log(.info, "\(reason): \(path); \(how)")
    }
}
