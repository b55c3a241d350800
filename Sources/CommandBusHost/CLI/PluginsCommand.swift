import CommandBus
import Foundation

/// `cmdbus plugins [--json]` lists what loaded and what was skipped; `cmdbus plugins check FILE` validates one file.
enum PluginsCommand {
    static let spec = ArgumentSpec(command: "plugins", options: [.plugins, .json, .help])

    static let help = """
        Usage: cmdbus plugins [--json] [--plugins DIR ...]
               cmdbus plugins check <file> [--json]

        Lists each plugin with its file, name, version, ABI, commands and load time;
        which plugin handles each command and which ones it shadows; and every file
        that was skipped, with the reason.

        'check' loads one file on its own, validates its descriptor and prints what
        it declares; it exits 0 if the file is a loadable plugin, 1 if not.

        Options:
        \(spec.optionsHelp)
        """

    static func run(_ arguments: ArgumentSpec.Parsed, console: Console) throws(CLIFailure) {
        if arguments.positionals.first == "check" {
            return try check(arguments, console: console)
        }
        guard arguments.positionals.isEmpty else {
            throw .usage("unknown 'cmdbus plugins' subcommand '\(arguments.positionals[0])'; see 'cmdbus plugins --help'")
        }
        let session = HostSession.start(arguments, console: console, reportSkipped: false)
        if arguments.has("json") {
            console.out(Console.json(catalogJSON(session.catalog)))
        } else {
            console.out(catalogText(session.catalog))
        }
    }

    private static func check(_ arguments: ArgumentSpec.Parsed, console: Console) throws(CLIFailure) {
        guard arguments.positionals.count == 2 else { throw .usage("'cmdbus plugins check' takes exactly one file") }
        let path = arguments.positionals[1]
        switch PluginLoader.load(file: path) {
        case .success(let plugin):
            console.out(arguments.has("json") ? Console.json(pluginJSON(plugin)) : "ok: \(pluginLine(plugin))")
        case .failure(let error):
            throw CLIFailure(message: "\(path): \(error.reason)", exitCode: .failure, code: "pluginFailed", command: nil, plugin: path)
        }
    }

    static func pluginLine(_ plugin: LoadedPlugin) -> String {
        let built = [plugin.sdkVersion.map { "SDK \($0)" }, plugin.swiftVersion.map { "Swift \($0)" } ?? "C"].compactMap { $0 }
        return "\(plugin.name) \(plugin.version) (\(plugin.path)): ABI \(plugin.abi), \(built.joined(separator: ", ")), "
            + "priority \(plugin.priority), commands: \(plugin.commands.joined(separator: ", "))"
    }

    private static func catalogText(_ catalog: PluginCatalog) -> String {
        var lines = ["Plugin directories: \(catalog.directories.joined(separator: ", "))", "", "Plugins (\(catalog.plugins.count)):"]
        for plugin in catalog.plugins {
            lines.append("  " + pluginLine(plugin))
            lines.append("    loaded \(ISO8601DateFormatter().string(from: plugin.loadedAt)) in \(String(format: "%.2f", plugin.loadMilliseconds)) ms")
        }
        lines.append("")
        lines.append("Commands (\(catalog.routes.count)):")
        for route in catalog.routes {
            var line = "  \(route.command) → \(route.plugins[0].name) (\(route.plugins[0].path))"
            let shadowed = route.plugins.dropFirst().map { "\($0.name) (\($0.path))" }
            if !shadowed.isEmpty { line += "; shadows \(shadowed.joined(separator: ", "))" }
            lines.append(line)
        }
        lines.append("")
        lines.append("Skipped (\(catalog.skipped.count)):")
        for skipped in catalog.skipped { lines.append("  \(skipped.path): \(skipped.reason)") }
        return lines.joined(separator: "\n")
    }

    private static func pluginJSON(_ plugin: LoadedPlugin) -> [String: Any] {
        var fields: [String: Any] = [
            "path": plugin.path, "name": plugin.name, "version": plugin.version, "abi": plugin.abi,
            "priority": plugin.priority, "commands": plugin.commands,
            "loadedAt": ISO8601DateFormatter().string(from: plugin.loadedAt), "loadMilliseconds": plugin.loadMilliseconds,
        ]
        fields["sdkVersion"] = plugin.sdkVersion ?? NSNull()
        fields["swiftVersion"] = plugin.swiftVersion ?? NSNull()
        return fields
    }

    private static func catalogJSON(_ catalog: PluginCatalog) -> [String: Any] {
        [
            "directories": catalog.directories,
            "plugins": catalog.plugins.map(pluginJSON),
            "commands": catalog.routes.map { route in
                [
                    "command": route.command,
                    "plugin": route.plugins[0].name, "path": route.plugins[0].path,
                    "shadowed": route.plugins.dropFirst().map { ["plugin": $0.name, "path": $0.path] },
                ] as [String: Any]
            },
            "skipped": catalog.skipped.map { ["path": $0.path, "reason": $0.reason] },
        ]
    }
}
