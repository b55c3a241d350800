import CommandBus
import CommandBusLoading
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension PluginCatalog {
    /// One plugin as `cmdbus plugins --json` and the server's `plugins` op show it; an isolated
    /// one with its worker (`isolated`: `running`, with its `pid` while it runs, `callsInProgress`,
    /// `restarts`, `runsAgain` and, if quarantined, `quarantine`).
    package static func json(_ plugin: LoadedPlugin) -> JSONValue {
        .object([
            "path": .string(plugin.path), "name": .string(plugin.name), "version": .string(plugin.version),
            "abi": .string(plugin.abi), "priority": .integer(Int64(plugin.priority)),
            "commands": .array(plugin.commands.map(JSONValue.string)),
            "loadedAt": .string(plugin.loadedAt.timestamp), "loadMilliseconds": .number(plugin.loadMilliseconds),
            "sdkVersion": .optional(plugin.sdkVersion), "swiftVersion": .optional(plugin.swiftVersion),
            "debugBuild": .bool(plugin.isDebugBuild),
            "isolated": plugin.worker.map(worker) ?? .null,
        ].filter { $0.value != .null })
    }

    /// The plugins of `plugins` whose worker is quarantined, as a server's `status` lists them
    /// (`plugin`, `path`, `reason`): loaded, but their commands fail until the file is loaded anew.
    package static func quarantined(_ plugins: [LoadedPlugin]) -> [JSONValue] {
        plugins.compactMap { plugin in
            plugin.quarantine.map { .object(["plugin": .string(plugin.name), "path": .string(plugin.path), "reason": .string($0)]) }
        }
    }

    /// An isolated plugin's worker as `isolated` shows it in ``json(_:)``, and the dashboard's
    /// plugins page beside the plugin's name and path.
    package static func worker(_ worker: IsolatedPlugin) -> JSONValue {
        // Running is told by the pid, read once, so the two never disagree.
        let pid = worker.workerPID
        return .object([
            "running": .bool(pid != nil), "pid": pid.map { .integer(Int64($0)) } ?? .null,
            "callsInProgress": .integer(Int64(worker.callsInProgress)),
            "restarts": .integer(Int64(worker.restarts)), "runsAgain": .integer(Int64(worker.runsAgain)),
            "quarantine": .optional(worker.quarantine),
        ].filter { $0.value != .null })
    }

    /// The whole catalog: directories, plugins, who handles each command and whom it shadows
    /// (and, where its handlers limit it, how many run at once: `maxConcurrency`), skipped files.
    package var json: JSONValue {
        let catalog = self, limits = concurrencyLimits
        return .object([
            "directories": .array(catalog.directories.map(JSONValue.string)),
            "plugins": .array(catalog.plugins.map(Self.json)),
            "commands": .array(catalog.routes.map { route in
                .object([
                    "command": .string(route.command),
                    "plugin": .string(route.plugins[0].name), "path": .string(route.plugins[0].path),
                    "shadowed": .array(route.plugins.dropFirst().map { .object(["plugin": .string($0.name), "path": .string($0.path)]) }),
                    "maxConcurrency": limits[route.command].map { .integer(Int64($0)) } ?? .null,
                ].filter { $0.value != .null })
            }),
            "skipped": .array(catalog.skipped.map {
                .object(["path": .string($0.path), "reason": .string($0.reason), "quarantined": .bool($0.isQuarantined)])
            }),
        ])
    }

    /// The catalog as ``json`` gives it, each plugin with its file's SHA-256 (`sha256`) too: what
    /// a host offers the shared bus, where `cmdbus plugins --bus` tells two builds of one version
    /// apart. Hashing reads every file (about a millisecond a megabyte), so it is done only then.
    /// An isolated plugin's worker is told by its quarantine alone: a host offers its catalog when
    /// it changes and when a plugin is quarantined, not as a worker starts and stops.
    package var jsonWithFileHashes: JSONValue {
        guard case .object(var fields) = json, let plugins = fields["plugins"]?.arrayValue else { return json }
        fields["plugins"] = .array(plugins.map { plugin in
            guard case .object(var plugin) = plugin, let path = plugin["path"]?.stringValue else { return plugin }
            plugin["sha256"] = .optional(SHA256.ofFile(path))
            if let worker = plugin["isolated"]?.objectValue { plugin["isolated"] = .object(worker.filter { $0.key == "quarantine" }) }
            return .object(plugin)
        })
        return .object(fields)
    }
}
