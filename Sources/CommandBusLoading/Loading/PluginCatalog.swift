import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What a load found: the plugins loaded, the files skipped, and who handles each command.
public struct PluginCatalog: Sendable {
    /// The directories searched, in order.
    public let directories: [String]
    /// The plugins loaded, in load order.
    public let plugins: [LoadedPlugin]
    /// The files (or directories) skipped, each with its reason.
    public let skipped: [SkippedPluginFile]
    /// The registrations of each loaded file's handlers, by path.
    package let registrations: [String: [HandlerRegistration]]

    package init(directories: [String], plugins: [LoadedPlugin], skipped: [SkippedPluginFile], registrations: [String: [HandlerRegistration]] = [:]) {
        self.directories = directories
        self.plugins = plugins
        self.skipped = skipped
        self.registrations = registrations
    }

    /// Stops the worker processes of isolated plugins (plugins loaded in-process stay: they are never unloaded).
    public func stopWorkers() {
        for plugin in plugins { plugin.worker?.stop() }
    }

    /// The handlers of one command, in the order the bus asks them.
    public struct Route: Sendable {
        /// The command's name.
        public let command: String
        /// The plugins that handle it: the first is asked first; the rest are shadowed by it.
        public let plugins: [LoadedPlugin]
    }

    /// Every command any plugin handles, with its plugins in chain-of-responsibility order:
    /// higher declared priority first, then load (directory) order.
    public var routes: [Route] {
        var byCommand: [String: [(order: Int, plugin: LoadedPlugin)]] = [:]
        for (order, plugin) in plugins.enumerated() {
            for command in plugin.commands { byCommand[command, default: []].append((order, plugin)) }
        }
        return byCommand.keys.sorted().map { command in
            let ordered = byCommand[command]!.sorted {
                $0.plugin.priority != $1.plugin.priority ? $0.plugin.priority > $1.plugin.priority : $0.order < $1.order
            }
            return Route(command: command, plugins: ordered.map(\.plugin))
        }
    }

    /// The routes this host can serve now: ``routes`` without the isolated plugins quarantined
    /// for crashing (a route left with none goes). A host of the shared bus offers these, so it
    /// stops claiming what only a quarantined plugin handles: those commands wait for another
    /// host, or for the file to be replaced (loaded anew, not quarantined), instead of failing
    /// here one after another.
    public var servingRoutes: [Route] {
        routes.compactMap { route in
            let serving = route.plugins.filter { $0.quarantine == nil }
            return serving.isEmpty ? nil : Route(command: route.command, plugins: serving)
        }
    }

    /// Calls `handler` whenever one of these plugins is quarantined (each in its isolated worker).
    package func whenAnyQuarantined(_ handler: @escaping @Sendable () -> Void) {
        for plugin in plugins { plugin.worker?.whenQuarantined(handler) }
    }

    /// The most of each command this host's handlers run at once, for the commands whose every
    /// handler declares a limit (`max_concurrency`): the sum of their limits, since a handler
    /// that declines passes the command on. A command with a handler that declares none has no
    /// limit here, and is not listed. A host of the shared bus claims no more than this of a command.
    public var concurrencyLimits: [String: Int] {
        var limits: [String: Int] = [:]
        for route in routes {
            let declared = route.plugins.map { plugin in plugin.declared.first { $0.name == route.command }?.maxConcurrency }
            guard declared.allSatisfy({ $0 != nil }) else { continue }
            limits[route.command] = declared.reduce(0) { $0 + ($1 ?? 0) }
        }
        return limits
    }
}
