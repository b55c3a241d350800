import CommandBus
import CommandBusLoading
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension PluginCatalog {
    /// One plugin as `cmdbus plugins --json` and the server's `plugins` op show it.
    package static func json(_ plugin: LoadedPlugin) -> JSONValue {
        .object([
            "path": .string(plugin.path), "name": .string(plugin.name), "version": .string(plugin.version),
            "abi": .string(plugin.abi), "priority": .integer(Int64(plugin.priority)),
            "commands": .array(plugin.commands.map(JSONValue.string)),
            "loadedAt": .string(plugin.loadedAt.timestamp), "loadMilliseconds": .number(plugin.loadMilliseconds),
            "sdkVersion": .optional(plugin.sdkVersion), "swiftVersion": .optional(plugin.swiftVersion),
            "debugBuild": .bool(plugin.isDebugBuild),
        ])
    }

    /// The whole catalog: directories, plugins, who handles each command and whom it shadows, skipped files.
    package var json: JSONValue {
        let catalog = self
        return .object([
            "directories": .array(catalog.directories.map(JSONValue.string)),
            "plugins": .array(catalog.plugins.map(Self.json)),
            "commands": .array(catalog.routes.map { route in
                .object([
                    "command": .string(route.command),
                    "plugin": .string(route.plugins[0].name), "path": .string(route.plugins[0].path),
                    "shadowed": .array(route.plugins.dropFirst().map { .object(["plugin": .string($0.name), "path": .string($0.path)]) }),
                ])
            }),
            "skipped": .array(catalog.skipped.map {
                .object(["path": .string($0.path), "reason": .string($0.reason), "quarantined": .bool($0.isQuarantined)])
            }),
        ])
    }
}
