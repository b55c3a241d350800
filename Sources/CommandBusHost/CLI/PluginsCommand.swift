import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `cmdbus plugins [--json]` lists what loaded and what was skipped; `cmdbus plugins check FILE` validates one file.
enum PluginsCommand {
    static let spec = ArgumentSpec(command: "plugins", options: [.plugins, .connect, .insecurePlugins, .isolate, .noProbe, .probeTimeout, .json, .help])

    static let help = """
        Usage: cmdbus plugins [--json] [--plugins DIR ...]
               cmdbus plugins check <file> [--json]
               cmdbus plugins lock [--plugins DIR ...]
               cmdbus plugins forget <file>

        Lists each plugin with its file, name, version, ABI, commands and load time;
        which plugin handles each command and which ones it shadows; and every file
        that was skipped, with the reason.

        'check' loads one file on its own, validates its descriptor and prints what
        it declares; it exits 0 if the file is a loadable plugin, 1 if not.

        New plugin files are first loaded in a child process (the probe); a file that
        crashes or hangs it is quarantined and not tried again until it changes. The
        verdicts are cached in $CMDBUS_REGISTRY (default ~/.cache/cmdbus/registry.json).
        'forget' drops a file's cached verdict, so it is probed again.

        'lock' writes plugins.lock in each plugin directory: the SHA-256 of every plugin
        that loads now. From then on only those files, unchanged, load from there.

        Options:
        \(spec.optionsHelp)
        """

    static func run(_ arguments: ArgumentSpec.Parsed, console: Console) async throws(CLIFailure) {
        if arguments.positionals.first == "check" {
            return try check(arguments, console: console)
        }
        if arguments.positionals.first == "lock" {
            return try await lock(arguments, console: console)
        }
        if arguments.positionals.first == "worker", arguments.positionals.count == 2 {
            PluginWorker.run(file: arguments.positionals[1])
        }
        if arguments.positionals.first == "probe", arguments.positionals.count == 2 {
            return console.out(PluginProbe.answer(for: arguments.positionals[1]))
        }
        if arguments.positionals.first == "forget" {
            guard arguments.positionals.count == 2 else { throw .usage("'cmdbus plugins forget' takes one file") }
            var registry = PluginRegistry(path: PluginRegistry.defaultPath(environment: ProcessInfo.processInfo.environment))
            guard registry.forget(arguments.positionals[1]) else {
                throw CLIFailure(message: "\(registry.path) has no entry for \(arguments.positionals[1])", exitCode: .failure, code: "usage", command: nil, plugin: nil)
            }
            registry.save()
            return console.out("forgot \(arguments.positionals[1]); it will be probed again")
        }
        guard arguments.positionals.isEmpty else {
            throw .usage("unknown 'cmdbus plugins' subcommand '\(arguments.positionals[0])'; see 'cmdbus plugins --help'")
        }
        if let socket = ServerClient.socket(arguments) {
            let response = try ServerClient.request(socket, ["op": .string("plugins")])
            guard response["ok"] == .bool(true), case .array(let plugins)? = response["plugins"] else { throw ServerClient.failure(response, command: nil) }
            if arguments.has("json") { return console.out(JSONValue.object(["plugins": .array(plugins)]).text) }
            for case .object(let plugin) in plugins {
                let commands: [String] = if case .array(let names)? = plugin["commands"] { names.compactMap(\.stringValue) } else { [] }
                console.out("\(plugin["name"]?.stringValue ?? "?") \(plugin["version"]?.stringValue ?? "?") (\(plugin["path"]?.stringValue ?? "?")): "
                    + "commands: \(commands.joined(separator: ", ")); loaded \(plugin["loadedAt"]?.stringValue ?? "?")")
            }
            return
        }
        let session = try await HostSession.start(arguments, console: console, reportSkipped: false)
        if arguments.has("json") {
            console.out(catalogJSON(session.catalog).text)
        } else {
            console.out(catalogText(session.catalog))
        }
    }

    private static func check(_ arguments: ArgumentSpec.Parsed, console: Console) throws(CLIFailure) {
        guard arguments.positionals.count == 2 else { throw .usage("'cmdbus plugins check' takes exactly one file") }
        let path = arguments.positionals[1]
        switch PluginLoader.load(file: path) {
        case .success(let plugin):
            console.out(arguments.has("json") ? pluginJSON(plugin).text : "ok: \(pluginLine(plugin))")
        case .failure(let error):
            throw CLIFailure(message: "\(path): \(error.reason)", exitCode: .failure, code: "pluginFailed", command: nil, plugin: path)
        }
    }

    /// Writes each directory's plugins.lock from the plugins that load now.
    private static func lock(_ arguments: ArgumentSpec.Parsed, console: Console) async throws(CLIFailure) {
        guard arguments.positionals.count == 1 else { throw .usage("'cmdbus plugins lock' takes no operands; use --plugins DIR") }
        let session = try await HostSession.start(arguments, console: console, reportSkipped: true, usesAllowlist: false)
        for directory in session.catalog.directories {
            var allowlist = PluginAllowlist(hashes: [:])
            for plugin in session.catalog.plugins where plugin.path.hasPrefix(FileSystem.join(directory, "")) {
                guard let hash = SHA256.ofFile(plugin.path) else { continue }
                allowlist.hashes[FileSystem.lastComponent(plugin.path)] = hash
            }
            guard case .directory = FileSystem.kind(of: directory) else { continue }
            let path = FileSystem.join(directory, PluginAllowlist.fileName)
            guard FileSystem.writeAtomically(allowlist.text, to: path) else {
                throw CLIFailure(message: "cannot write \(path)", exitCode: .failure, code: "pluginFailed", command: nil, plugin: nil)
            }
            console.out("locked \(allowlist.hashes.count) plugin(s) in \(path)")
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
            lines.append("    loaded \(plugin.loadedAt.formatted(.iso8601)) in \((plugin.loadMilliseconds * 100).rounded() / 100) ms")
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

    private static func pluginJSON(_ plugin: LoadedPlugin) -> JSONValue {
        .object([
            "path": .string(plugin.path), "name": .string(plugin.name), "version": .string(plugin.version),
            "abi": .string(plugin.abi), "priority": .integer(Int64(plugin.priority)),
            "commands": .array(plugin.commands.map(JSONValue.string)),
            "loadedAt": .string(plugin.loadedAt.formatted(.iso8601)), "loadMilliseconds": .number(plugin.loadMilliseconds),
            "sdkVersion": .optional(plugin.sdkVersion), "swiftVersion": .optional(plugin.swiftVersion),
        ])
    }

    private static func catalogJSON(_ catalog: PluginCatalog) -> JSONValue {
        .object([
            "directories": .array(catalog.directories.map(JSONValue.string)),
            "plugins": .array(catalog.plugins.map(pluginJSON)),
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
