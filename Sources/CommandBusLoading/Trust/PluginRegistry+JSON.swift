import CommandBus

/// The registry file as text, read and written with the project's own JSON parser and writer.
///
/// Every one-shot command reads it, and `JSONDecoder` took about 130,000 instructions per file
/// it describes (13M for a folder of 100 plugins, more than the rest of such a start); this
/// reads the same file in a small fraction of that. The layout is what the `Codable` types
/// wrote, so a registry written by an older host reads the same, one line per file.
extension PluginRegistry {
    /// The verdicts and descriptors in `bytes`; a file that is not a registry reads as empty.
    static func decode(_ bytes: [UInt8]) -> (entries: [String: Entry], descriptors: [String: PluginDescriptorSummary]) {
        guard let fields = JSONValue.parse(bytes: bytes)?.objectValue else { return ([:], [:]) }
        return (
            (fields["entries"]?.objectValue ?? [:]).compactMapValues(Entry.init(json:)),
            (fields["descriptors"]?.objectValue ?? [:]).compactMapValues(PluginDescriptorSummary.init(json:))
        )
    }

    /// The file's text: one line per plugin file, keys sorted.
    static func encode(entries: [String: Entry], descriptors: [String: PluginDescriptorSummary]) -> String {
        func section(_ name: String, _ lines: [String: JSONValue]) -> String {
            let body = lines.keys.sorted().map { "    \(JSONValue.string($0).text): \(lines[$0]!.text)" }.joined(separator: ",\n")
            return "  \(JSONValue.string(name).text): {\n\(body)\n  }"
        }
        return "{\n" + section("descriptors", descriptors.mapValues(\.json)) + ",\n"
            + section("entries", entries.mapValues(\.json)) + ",\n  \"version\": 1\n}\n"
    }
}

extension PluginRegistry.Entry {
    init?(json: JSONValue) {
        guard let fields = json.objectValue, let size = fields["size"]?.intValue, let modified = fields["modified"]?.int64Value,
              let inode = fields["inode"]?.uint64Value, let sha256 = fields["sha256"]?.stringValue,
              let verdict = fields["verdict"]?.stringValue, let probedAt = fields["probedAt"]?.doubleValue else { return nil }
        self.init(
            size: size, modified: modified, inode: inode, sha256: sha256, verdict: verdict,
            reason: fields["reason"]?.stringValue, probedAt: probedAt
        )
    }

    var json: JSONValue {
        var fields: [String: JSONValue] = [
            "size": .integer(Int64(size)), "modified": .integer(modified), "inode": .integer(Int64(bitPattern: inode)),
            "sha256": .string(sha256), "verdict": .string(verdict), "probedAt": .number(probedAt),
        ]
        if let reason { fields["reason"] = .string(reason) }
        return .object(fields)
    }
}

extension PluginDescriptorSummary {
    init?(json: JSONValue) {
        guard let fields = json.objectValue, let size = fields["size"]?.intValue, let modified = fields["modified"]?.int64Value,
              let inode = fields["inode"]?.uint64Value, let host = fields["host"]?.stringValue,
              let plugin = fields["plugin"].flatMap(PluginDescription.init(json:)) else { return nil }
        self.init(size: size, modified: modified, inode: inode, host: host, plugin: plugin)
    }

    var json: JSONValue {
        .object([
            "size": .integer(Int64(size)), "modified": .integer(modified), "inode": .integer(Int64(bitPattern: inode)),
            "host": .string(host), "plugin": plugin.jsonValue,
        ])
    }
}

extension PluginDescription {
    init?(json: JSONValue) {
        guard let fields = json.objectValue, let name = fields["name"]?.stringValue, let version = fields["version"]?.stringValue,
              let abi = fields["abi"]?.stringValue, let priority = fields["priority"]?.intValue,
              let list = fields["commands"]?.arrayValue else { return nil }
        var commands: [Command] = []
        for entry in list {
            guard let command = entry.objectValue, let commandName = command["name"]?.stringValue,
                  let flags = command["flags"]?.intValue.flatMap(UInt32.init(exactly:)) else { return nil }
            commands.append(Command(name: commandName, maxConcurrency: command["maxConcurrency"]?.intValue, flags: flags))
        }
        self.init(
            name: name, version: version, abi: abi, sdkVersion: fields["sdkVersion"]?.stringValue,
            swiftVersion: fields["swiftVersion"]?.stringValue, priority: priority, commands: commands,
            cancellable: fields["cancellable"]?.boolValue ?? false, isDebugBuild: fields["isDebugBuild"]?.boolValue
        )
    }

    /// The description as a JSON value, as its `Codable` conformance writes it.
    var jsonValue: JSONValue {
        var fields: [String: JSONValue] = [
            "name": .string(name), "version": .string(version), "abi": .string(abi), "priority": .integer(Int64(priority)),
            "cancellable": .bool(cancellable),
            "commands": .array(commands.map { command in
                var fields: [String: JSONValue] = ["name": .string(command.name), "flags": .integer(Int64(command.flags))]
                if let limit = command.maxConcurrency { fields["maxConcurrency"] = .integer(Int64(limit)) }
                return .object(fields)
            }),
        ]
        if let sdkVersion { fields["sdkVersion"] = .string(sdkVersion) }
        if let swiftVersion { fields["swiftVersion"] = .string(swiftVersion) }
        if let isDebugBuild { fields["isDebugBuild"] = .bool(isDebugBuild) }
        return .object(fields)
    }
}
