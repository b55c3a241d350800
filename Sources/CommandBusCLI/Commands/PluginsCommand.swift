import CommandBusSupport
import CommandBusLoading
import CommandBusHost
import CommandBusServer
import CommandBusPostgres
import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `cmdbus plugins [--json]` lists what loaded and what was skipped; `cmdbus plugins check FILE` validates one file.
enum PluginsCommand {
    static let spec = ArgumentSpec(command: "plugins", options: [.connect, .bus, .json, .help] + PluginOptions.options)

    static let help = """
        Usage: cmdbus plugins [--json] [--plugins DIR ...]
               cmdbus plugins check <file> [--json]
               cmdbus plugins lock [--plugins DIR ...]
               cmdbus plugins forget <file> [--connect SOCKET | --bus URL]

        Lists each plugin with its file, name, version, ABI, commands and load time;
        which plugin handles each command and which ones it shadows; and every file
        that was skipped, with the reason.

        'check' loads one file on its own, validates its descriptor and prints what
        it declares; it exits 0 if the file is a loadable plugin, 1 if not.

        New plugin files are first loaded in a child process (the probe); a file that
        crashes or hangs it is quarantined and not tried again until it changes. The
        verdicts are cached in $CMDBUS_REGISTRY (default ~/.cache/cmdbus/registry.json);
        a refusal for what this machine lacks (a library, a mount that runs no code) is not.
        'forget' drops a file's cached verdict, so it is probed again. With --connect,
        the server forgets it too and loads the file again now, changed or not: a
        quarantined isolated plugin gets a new worker, its crashes forgotten. With
        --bus, every live host with a file of that name does so, and says how it went.

        'lock' writes plugins.lock in each plugin directory: the SHA-256 of every plugin
        that loads now. From then on only those files, unchanged, load from there.

        Options:
        \(spec.optionsHelp)
        """

    static func run(_ arguments: ArgumentSpec.Parsed, console: Console) async throws(HostFailure) {
        try await Verb.dispatch(verbs, command: "plugins", missing: Verb(run: list), arguments, console)
    }

    /// The subcommands of `cmdbus plugins`, for shell completion.
    static var verbNames: [String] { verbs.keys.sorted() }

    private static let verbs: [String: Verb] = ["check": Verb(run: check), "lock": Verb(run: lock), "forget": Verb(run: forget)]

    /// `cmdbus plugins forget FILE`: drops a file's cached probe verdict; with `--connect`, the
    /// server drops it and loads the file again now, lifting a quarantine; with `--bus`, every
    /// live host with a file of that name does.
    private static func forget(_ arguments: ArgumentSpec.Parsed, _ operands: [String], _ console: Console) async throws(HostFailure) {
        guard operands.count == 1 else { throw .usage("'cmdbus plugins forget' takes one file") }
        let connection = try ConnectionOptions(arguments)
        if connection.socket != nil || connection.bus != nil {
            let client = try await BusClientFactory.client(connection: connection, plugins: PluginOptions(), journal: noJournal, console: console)
            // The server's working directory is not this one; a bare name is matched by the host.
            let path = operands[0].hasPrefix("/") || !operands[0].contains("/") ? operands[0] : FileSystem.join(FileManager.default.currentDirectoryPath, operands[0])
            let answer = try await client.loadPluginAgain(path)
            if arguments.has("json") { console.out(answer.text) }
            guard let hosts = answer.objectValue?["hosts"]?.arrayValue?.compactMap(\.objectValue) else {
                if !arguments.has("json") { console.out("loaded again: \(pluginLine(answer.objectValue?["plugin"]?.objectValue ?? [:]))") }
                return
            }
            // The shared bus: each host that has the file answers for itself.
            let failed = hosts.filter { $0["ok"] != .bool(true) }
            if !arguments.has("json") {
                for host in hosts {
                    let label = quotedLine(host["label"]?.stringValue ?? "?")
                    if host["ok"] == .bool(true) {
                        console.out("loaded again on \(label): \(pluginLine(host["plugin"]?.objectValue ?? [:]))")
                    } else {
                        console.err("cmdbus: warning: \(label) did not load it again: \(quotedLine(host["message"]?.stringValue ?? "?"))")
                    }
                }
            }
            if !failed.isEmpty {
                throw HostFailure(.pluginFailed, "\(failed.count) of \(counted(hosts.count, "host")) with a file named \(quoted(answer.objectValue?["file"]?.stringValue ?? "?")) did not load it again; "
                    + "each host's log says why ('cmdbus plugins --bus' shows what each one loads)")
            }
            return
        }
        var registry = PluginRegistry(path: PluginRegistry.defaultPath(environment: ProcessInfo.processInfo.environment))
        guard registry.forget(operands[0]) else {
            throw HostFailure(.entryNotFound, "\(registry.path) has no entry for \(operands[0])")
        }
        if let failure = registry.save() { throw HostFailure(.pluginFailed, "cannot write the plugin registry \(registry.path): \(failure)") }
        let file = quotedLine(operands[0])
        console.out("forgot \(file); it is probed again the next time a host loads it (a running server loads it now with 'cmdbus plugins forget \(file) --connect')")
    }

    /// `cmdbus plugins`: the catalog, through whichever bus the options name.
    private static func list(_ arguments: ArgumentSpec.Parsed, _ operands: [String], _ console: Console) async throws(HostFailure) {
        let client = try await BusClientFactory.client(
            connection: try ConnectionOptions(arguments), plugins: try PluginOptions(arguments), journal: Self.noJournal, console: console,
            reportSkipped: false
        )
        let catalog = try await client.plugins()
        console.out(arguments.has("json") ? catalog.text : catalogText(catalog))
        let fields = catalog.objectValue ?? [:]
        if fields["hosts"] != nil {
            // The shared bus's hosts: their directories are theirs, on their machines.
            BusCommand.warnOfDifferences(fields["differences"], console: console)
            return
        }
        // A plugin directory that is not there is an error here, not just a skipped line: the
        // listing is what a person checks their setup with.
        let directories = Set(fields["directories"]?.arrayValue?.compactMap(\.stringValue) ?? [])
        let missing = (fields["skipped"]?.arrayValue ?? []).compactMap(\.objectValue).compactMap { skipped -> String? in
            guard let path = skipped["path"]?.stringValue, directories.contains(path),
                  skipped["reason"]?.stringValue == PluginLoader.missingDirectory else { return nil }
            return path
        }
        if let first = missing.first {
            throw HostFailure(.noInput, "plugin directory \(quoted(first)) does not exist; create it, or name another with --plugins DIR or $CMDBUS_PLUGINS")
        }
    }

    private static let noJournal: JournalOptions = {
        var options = JournalOptions()
        options.enabled = false
        return options
    }()

    private static func check(_ arguments: ArgumentSpec.Parsed, _ operands: [String], _ console: Console) async throws(HostFailure) {
        guard operands.count == 1 else { throw .usage("'cmdbus plugins check' takes exactly one file") }
        let path = operands[0]
        switch PluginLoader.load(file: path) {
        case .success(let plugin):
            let json = PluginCatalog.json(plugin)
            console.out(arguments.has("json") ? json.text : "ok: \(pluginLine(json.objectValue ?? [:]))")
        case .failure(let error):
            throw HostFailure(.pluginFailed, "\(path): \(error.reason)", plugin: path)
        }
    }

    /// Writes each directory's plugins.lock from the plugins that load now.
    private static func lock(_ arguments: ArgumentSpec.Parsed, _ operands: [String], _ console: Console) async throws(HostFailure) {
        guard operands.isEmpty else { throw .usage("'cmdbus plugins lock' takes no operands; use --plugins DIR") }
        let session = try await HostSession.start(plugins: try PluginOptions(arguments), journal: noJournal, console: console, reportSkipped: true, usesAllowlist: false)
        for directory in session.catalog.directories {
            var allowlist = PluginAllowlist(hashes: [:])
            for plugin in session.catalog.plugins where plugin.path.hasPrefix(FileSystem.join(directory, "")) {
                guard let hash = SHA256.ofFile(plugin.path) else { continue }
                allowlist.hashes[FileSystem.lastComponent(plugin.path)] = hash
            }
            guard case .directory = FileSystem.kind(of: directory) else { continue }
            let path = FileSystem.join(directory, PluginAllowlist.fileName)
            if let failure = FileSystem.writeAtomically(allowlist.text, to: path) {
                let cause = FileSystem.isOnReadOnlyFileSystem(directory)
                    ? "its file system is mounted read-only; lock the plugins where the directory can be written, and copy plugins.lock beside them"
                    : "\(failure); give this user write access to \(directory)"
                throw HostFailure(.pluginFailed, "cannot write \(path): \(cause)")
            }
            console.out("locked \(counted(allowlist.hashes.count, "plugin")) in \(path)")
        }
    }

    /// One plugin's line, from its JSON (`PluginCatalog.json`).
    static func pluginLine(_ plugin: [String: JSONValue]) -> String {
        // Everything here came from a plugin's descriptor: escaped for the terminal.
        func text(_ key: String) -> String { quotedLine(plugin[key]?.stringValue ?? "?") }
        let built = [plugin["sdkVersion"]?.stringValue.map { "SDK \(quotedLine($0))" }, plugin["swiftVersion"]?.stringValue.map { "Swift \(quotedLine($0))" } ?? "C"]
            .compactMap { $0 }
        let commands = plugin["commands"]?.arrayValue?.compactMap(\.stringValue).map(quotedLine) ?? []
        return "\(text("name")) \(text("version")) (\(text("path"))): ABI \(text("abi")), \(built.joined(separator: ", ")), "
            + "priority \(plugin["priority"]?.text ?? "?"), commands: \(commands.joined(separator: ", "))"
    }

    /// An isolated plugin's worker, from its JSON (`isolated`): quarantined and what ends it, or
    /// running (as which process, with how many calls in progress) or not, and how often it was
    /// started again after a crash or a stop.
    private static func workerLine(_ worker: [String: JSONValue]) -> String {
        if let quarantine = worker["quarantine"]?.stringValue { return quotedLine(quarantine) }
        let restarts = worker["restarts"]?.intValue ?? 0
        var line = "isolated: no worker running; the next command starts one"
        if worker["running"] == .bool(true) {
            line = "isolated: its worker is running"
            if let pid = worker["pid"]?.intValue { line += " as pid \(pid)" }
            if let calls = worker["callsInProgress"]?.intValue { line += ", \(counted(calls, "call")) in progress" }
        }
        return line + (restarts > 0 ? " (\(counted(restarts, "restart")) so far)" : "")
    }

    /// The catalog as text, from its JSON: the same for a local and a `--connect` listing; the
    /// shared bus's (``BusCatalog``) names its hosts, and which of them load each plugin.
    private static func catalogText(_ catalog: JSONValue) -> String {
        let fields = catalog.objectValue ?? [:]
        func list(_ key: String) -> [[String: JSONValue]] { fields[key]?.arrayValue?.compactMap(\.objectValue) ?? [] }
        func labels(_ entry: [String: JSONValue]) -> [String]? {
            entry["hosts"]?.arrayValue.map { $0.compactMap { $0.stringValue ?? $0.objectValue?["host"]?.stringValue } }
        }
        let plugins = list("plugins"), routes = list("commands"), skipped = list("skipped")
        // Plugins the bus's hosts load different builds of: each build's line says its file.
        let differing = Set(list("differences").compactMap { $0["plugin"]?.stringValue })
        var lines: [String]
        if let hosts = fields["hosts"]?.arrayValue?.compactMap(\.objectValue) {
            lines = ["Hosts (\(hosts.count)):"] + hosts.map { host in
                let directories = host["directories"]?.arrayValue?.compactMap(\.stringValue).map(quotedLine) ?? []
                return "  \(quotedLine(host["host"]?.stringValue ?? "?")) (\(host["id"]?.stringValue ?? "?")): plugin directories \(directories.joined(separator: ", "))"
            }
            if hosts.isEmpty { lines.append("  none live: start a 'cmdbus serve --bus' whose plugins load") }
        } else {
            let directories = fields["directories"]?.arrayValue?.compactMap(\.stringValue) ?? []
            lines = ["Plugin directories: \(directories.joined(separator: ", "))"]
        }
        lines += ["", "Plugins (\(plugins.count)):"]
        for plugin in plugins {
            lines.append("  " + pluginLine(plugin))
            if let copies = plugin["hosts"]?.arrayValue?.compactMap(\.objectValue) {
                // A host whose file is elsewhere says where.
                let path = plugin["path"]?.stringValue
                let hosts = copies.map { copy in
                    let label = copy["host"]?.stringValue ?? "?"
                    guard let own = copy["path"]?.stringValue, own != path else { return label }
                    return "\(label) (\(quotedLine(own)))"
                }
                let file = differing.contains(plugin["name"]?.stringValue ?? "") ? "; file \(BusCatalog.fileHash(plugin))" : ""
                lines.append("    on \(counted(copies.count, "host")): \(BusCatalog.hostList(hosts))\(file)")
                for copy in copies {
                    guard let quarantine = copy["isolated"]?.objectValue?["quarantine"]?.stringValue else { continue }
                    lines.append("    on \(quotedLine(copy["host"]?.stringValue ?? "?")), \(quotedLine(quarantine))")
                }
            } else {
                let milliseconds = plugin["loadMilliseconds"]?.doubleValue ?? 0
                lines.append("    loaded \(plugin["loadedAt"]?.stringValue ?? "?") in \((milliseconds * 100).rounded() / 100) ms")
                if let worker = plugin["isolated"]?.objectValue { lines.append("    " + workerLine(worker)) }
            }
            if plugin["debugBuild"] == .bool(true) {
                lines.append("    debug build: unoptimized, often ten times slower; rebuild it with 'swift build -c release'")
            }
        }
        lines.append("")
        lines.append("Commands (\(routes.count)):")
        for route in routes {
            var line = "  \(route["command"]?.stringValue ?? "?") → \(route["plugin"]?.stringValue ?? "?") (\(route["path"]?.stringValue ?? "?"))"
            let shadowed = (route["shadowed"]?.arrayValue ?? []).compactMap(\.objectValue).map {
                "\($0["plugin"]?.stringValue ?? "?") (\($0["path"]?.stringValue ?? "?"))"
            }
            if !shadowed.isEmpty { line += "; shadows \(shadowed.joined(separator: ", "))" }
            if let limit = route["maxConcurrency"]?.intValue { line += limit == 1 ? "; one at a time" : "; at most \(limit) at once" }
            if let hosts = labels(route) { line += "; on \(BusCatalog.hostList(hosts))" }
            lines.append(line)
        }
        lines.append("")
        lines.append("Skipped (\(skipped.count)):")
        for file in skipped {
            var line = "  \(quotedLine(file["path"]?.stringValue ?? "?")): \(quotedLine(file["reason"]?.stringValue ?? "?"))"
            if let hosts = labels(file) { line += " (on \(BusCatalog.hostList(hosts)))" }
            lines.append(line)
        }
        return lines.joined(separator: "\n")
    }
}
