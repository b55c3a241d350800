import CommandBusLoading
import CommandBusSupport

extension PluginCatalog {
    /// What a "no handler" error for `command` adds for its reader, with `registered` handlers on
    /// the bus for it: the plugins whose handlers declined it (where to look), else a command of
    /// a near name, else the plugins there are. The command line says it in-process and the
    /// server in its answer alike.
    package func noHandlerDetail(for command: String, registered: Int) -> String {
        let declining = registered > 0 ? routes.first { $0.command == command }?.plugins ?? [] : []
        if !declining.isEmpty {
            let named = declining.map { "\(quoted($0.name)) (\(FileSystem.lastComponent($0.path)))" }
            return declining.count == 1
                ? " (the handler in plugin \(named[0]) declined it)"
                : " (the handlers in plugins \(named.joined(separator: ", ")) declined it)"
        }
        if let nearest = nearestName(to: command, among: routes.map(\.command)) { return "; did you mean \(quoted(nearest))?" }
        // The plugins whose handlers are on the bus: a one-shot command opens a known file only
        // when a command reaches it, so "loaded" would not be true of them all.
        let available = plugins.map(\.name)
        // A plugin file that did not load is the likeliest reason, and a client of a server never saw the warning.
        // (A directory not made yet is said already.)
        let unloaded = skipped.filter { $0.reason != PluginLoader.missingDirectory }.map { FileSystem.lastComponent($0.path) }
        let skippedNote = unloaded.isEmpty ? "" : "; \(firstFew(unloaded, limit: 3)) \(unloaded.count == 1 ? "was" : "were") skipped: 'cmdbus plugins' says why"
        return available.isEmpty
            ? " (no plugins in \(directories.joined(separator: ", "))\(skippedNote))"
            : " (plugins: \(available.joined(separator: ", "))\(skippedNote))"
    }
}
