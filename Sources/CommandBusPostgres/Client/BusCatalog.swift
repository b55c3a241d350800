import CommandBus
import CommandBusHost
import CommandBusSupport

/// The plugins of every live host on the shared bus as one catalog: `cmdbus plugins --bus`.
///
/// Ten hosts that load the same build of a plugin list it once, with the hosts that have it.
/// A plugin whose hosts load different builds (another version, other commands, another
/// file) is listed once per build and named in `differences`: a command may run on any host
/// that claims its name, so such a bus answers one way or another by chance.
package enum BusCatalog {
    /// One live host's catalog, as it offered it to the bus.
    package struct Host: Sendable {
        /// The host's id on the bus.
        package var id: String
        /// `hostname:pid`, as the host's log, `cmdbus.host` metadata and `attempted_by` name it.
        package var label: String
        /// Its catalog: the host's `cmdbus plugins --json`, each plugin with its file's `sha256`.
        package var catalog: [String: JSONValue]

        /// A host's row of `cmdbus.hosts`, read with its `id`, `hostname`, `pid` and `catalog` (as text).
        package init(row: PGRow) {
            self.init(
                id: row.uuid("id")?.uuidString ?? "?", label: BusHost.label(hostname: row.text("hostname") ?? "?", pid: row.integer("pid") ?? 0),
                catalog: row.text("catalog").flatMap(JSONValue.parse)?.objectValue ?? [:]
            )
        }

        /// A host's catalog as the bus stores it.
        package init(id: String, label: String, catalog: [String: JSONValue]) {
            self.id = id
            self.label = label
            self.catalog = catalog
        }

        /// What is quarantined on this host, with why: isolated plugins whose worker crashed too
        /// often (`{"plugin", "path", "reason"}`) and files the probe refused (`{"path", "reason"}`).
        package var quarantined: [JSONValue] {
            let workers: [JSONValue] = (catalog["plugins"]?.arrayValue ?? []).compactMap { plugin in
                guard let fields = plugin.objectValue, let reason = fields["isolated"]?.objectValue?["quarantine"]?.stringValue else { return nil }
                return .object(["plugin": fields["name"] ?? .null, "path": fields["path"] ?? .null, "reason": .string(reason)])
            }
            let probed: [JSONValue] = (catalog["skipped"]?.arrayValue ?? []).compactMap { skipped in
                guard let fields = skipped.objectValue, fields["quarantined"] == .bool(true) else { return nil }
                return .object(["path": fields["path"] ?? .null, "reason": fields["reason"] ?? .null])
            }
            return workers + probed
        }

        /// The commands of this host's quarantined isolated plugins: names it handles no more
        /// (a file the probe refused was never loaded, and named no command).
        package var quarantinedCommands: Set<String> {
            var names: Set<String> = []
            for plugin in BusCatalog.objects(catalog["plugins"]) where plugin["isolated"]?.objectValue?["quarantine"] != nil {
                names.formUnion(plugin["commands"]?.arrayValue?.compactMap(\.stringValue) ?? [])
            }
            return names
        }
    }

    /// The fields that belong to one host's copy of a plugin rather than to its build (`isolated`:
    /// whether its worker there is quarantined).
    private static let perHostFields: Set<String> = ["path", "loadedAt", "loadMilliseconds", "isolated"]

    /// The hosts' catalogs merged, in the hosts' order.
    package static func merge(_ hosts: [Host]) -> JSONValue {
        var plugins = Grouping(sideBySide: "name"), routes = Grouping(sideBySide: "command"), skipped = Grouping(sideBySide: "path")
        var directories: [String] = []
        for host in hosts {
            let catalog = host.catalog
            for directory in catalog["directories"]?.arrayValue?.compactMap(\.stringValue) ?? [] where !directories.contains(directory) {
                directories.append(directory)
            }
            for plugin in objects(catalog["plugins"]) {
                let build = plugin.filter { !perHostFields.contains($0.key) }
                var copy: [String: JSONValue] = ["host": .string(host.label)]
                for field in perHostFields { copy[field] = plugin[field] }
                plugins.add(plugin, key: JSONValue.object(build).text, host: .object(copy))
            }
            for route in objects(catalog["commands"]) {
                // Which plugin takes the name, and whom it shadows; the files' paths are each host's own.
                let shadowed = objects(route["shadowed"]).map { $0["plugin"]?.stringValue ?? "" }
                let key = JSONValue.array([route["command"] ?? .null, route["plugin"] ?? .null, .array(shadowed.map(JSONValue.string))]).text
                routes.add(route, key: key, host: .string(host.label))
            }
            for file in objects(catalog["skipped"]) {
                skipped.add(file, key: JSONValue.object(file).text, host: .string(host.label))
            }
        }
        return .object([
            "hosts": .array(hosts.map { host in
                .object(["id": .string(host.id), "host": .string(host.label), "directories": host.catalog["directories"] ?? .array([])])
            }),
            "directories": .array(directories.map(JSONValue.string)),
            "plugins": .array(plugins.merged), "commands": .array(routes.merged), "skipped": .array(skipped.merged),
            "differences": .array(differences(plugins.groups) + routeDifferences(routes.groups)),
        ])
    }

    /// Entries that are the same on several hosts, kept once each in the order first seen.
    private struct Grouping {
        /// The field whose entries are listed side by side: a plugin's builds, a command's routes.
        let sideBySide: String
        var groups: [(entry: [String: JSONValue], hosts: [JSONValue])] = []
        var index: [String: Int] = [:]

        mutating func add(_ entry: [String: JSONValue], key: String, host: JSONValue) {
            if let at = index[key] {
                groups[at].hosts.append(host)
            } else {
                index[key] = groups.count
                groups.append((entry, [host]))
            }
        }

        /// Each entry with the hosts that have it; entries that agree on ``sideBySide`` together.
        var merged: [JSONValue] {
            func name(_ entry: [String: JSONValue]) -> String { entry[sideBySide]?.stringValue ?? "" }
            var rank: [String: Int] = [:]
            for group in groups where rank[name(group.entry)] == nil { rank[name(group.entry)] = rank.count }
            let sorted = groups.enumerated().sorted { left, right in
                (rank[name(left.element.entry)] ?? 0, left.offset) < (rank[name(right.element.entry)] ?? 0, right.offset)
            }.map(\.element)
            return sorted.map { group in .object(group.entry.merging(["hosts": .array(group.hosts)]) { _, hosts in hosts }) }
        }
    }

    /// The plugins that more than one build of runs on the bus, each with its builds and a line that says so.
    private static func differences(_ builds: [(entry: [String: JSONValue], hosts: [JSONValue])]) -> [JSONValue] {
        var names: [String] = []
        var byName: [String: [(entry: [String: JSONValue], hosts: [JSONValue])]] = [:]
        for build in builds {
            let name = build.entry["name"]?.stringValue ?? "?"
            if byName[name] == nil { names.append(name) }
            byName[name, default: []].append(build)
        }
        return names.compactMap { name -> JSONValue? in
            guard let builds = byName[name], builds.count > 1 else { return nil }
            let versions = Set(builds.map { $0.entry["version"]?.stringValue ?? "?" })
            let described = builds.map { build -> String in
                let version = build.entry["version"]?.stringValue ?? "?"
                // Where the versions agree, the file's hash is what tells the builds apart.
                let file = versions.count < builds.count ? " (file \(fileHash(build.entry)))" : ""
                let labels = build.hosts.compactMap { $0.objectValue?["host"]?.stringValue }
                return "version \(quotedLine(version))\(file) on \(hostList(labels))"
            }
            let message = "plugin \(quoted(name)) differs between hosts: \(described.joined(separator: "; ")); "
                + "its commands run on whichever host claims them, so give every host the same build"
            return .object([
                "plugin": .string(name), "message": .string(message),
                "builds": .array(builds.map { build in
                    .object([
                        "version": build.entry["version"] ?? .null, "sha256": build.entry["sha256"] ?? .null,
                        "hosts": .array(build.hosts.compactMap { $0.objectValue?["host"] }),
                    ])
                }),
            ])
        }
    }

    /// The command names that one plugin takes on some hosts and another on others (one host
    /// has a plugin that shadows the rest, another lacks it), each with a line that says so.
    private static func routeDifferences(_ routes: [(entry: [String: JSONValue], hosts: [JSONValue])]) -> [JSONValue] {
        var commands: [String] = []
        var takers: [String: [(plugin: String, hosts: [String])]] = [:]
        for route in routes {
            let command = route.entry["command"]?.stringValue ?? "?", plugin = route.entry["plugin"]?.stringValue ?? "?"
            let hosts = route.hosts.compactMap(\.stringValue)
            if takers[command] == nil { commands.append(command) }
            if let at = takers[command]?.firstIndex(where: { $0.plugin == plugin }) {
                takers[command]![at].hosts += hosts
            } else {
                takers[command, default: []].append((plugin, hosts))
            }
        }
        return commands.compactMap { command -> JSONValue? in
            guard let plugins = takers[command], plugins.count > 1 else { return nil }
            let described = plugins.map { "\(quoted($0.plugin)) on \(hostList($0.hosts))" }
            let message = "command \(quoted(command)) is taken by \(described.joined(separator: ", by ")); "
                + "it runs on whichever host claims it, so give every host that handles it the same plugins"
            return .object([
                "command": .string(command), "message": .string(message),
                "plugins": .array(plugins.map { .object(["plugin": .string($0.plugin), "hosts": .array($0.hosts.map(JSONValue.string))]) }),
            ])
        }
    }

    /// The start of a plugin's file hash, enough to tell builds apart in a line.
    package static func fileHash(_ plugin: [String: JSONValue]) -> String {
        String((plugin["sha256"]?.stringValue ?? "unknown").prefix(12))
    }

    /// Hosts' labels for a line: the first few, then how many more.
    package static func hostList(_ labels: [String], limit: Int = 8) -> String {
        firstFew(labels.map(quotedLine), limit: limit)
    }

    private static func objects(_ value: JSONValue?) -> [[String: JSONValue]] {
        value?.arrayValue?.compactMap(\.objectValue) ?? []
    }
}
