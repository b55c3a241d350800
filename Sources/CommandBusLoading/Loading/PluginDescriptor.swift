import CommandBusSupport
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import CCommandBusABI
import Glibc

/// What a plugin's descriptor says, read and checked the way PostgreSQL checks a module's magic block.
package struct PluginDescriptor: @unchecked Sendable {
    // The pointer stays valid for the life of the process: plugins are never unloaded.
    package let raw: UnsafePointer<cmdbus_plugin_descriptor>
    package let name: String
    package let version: String
    package let abiMajor: UInt32
    package let abiMinor: UInt32
    package let sdkVersion: String?
    package let swiftVersion: String?
    package let priority: Int32
    package let commands: [Command]

    /// One command the plugin declares.
    package struct Command: Sendable {
        package let index: UInt32
        package let name: String
        package let maxConcurrency: Int?
        /// `CMDBUS_COMMAND_*` flags (ABI 1.1; none for a 1.0 plugin).
        package let flags: UInt32

        package var isJournaled: Bool { flags & CMDBUS_COMMAND_NOT_JOURNALED == 0 }
        package var replaysOnStart: Bool { flags & CMDBUS_COMMAND_REPLAY_ON_START != 0 }
        package var isReversible: Bool { flags & CMDBUS_COMMAND_REVERSIBLE != 0 }
    }

    /// The size of an ABI 1.0 descriptor: everything before `command_flags`.
    package static let version10Size = MemoryLayout<cmdbus_plugin_descriptor>.offset(of: \cmdbus_plugin_descriptor.command_flags)!
    /// The size of an ABI 1.1 or 1.2 descriptor: everything before `plugin_flags`.
    package static let version11Size = MemoryLayout<cmdbus_plugin_descriptor>.offset(of: \cmdbus_plugin_descriptor.plugin_flags)!

    /// Whether the plugin's descriptor has the ABI 1.1 fields.
    package var hasVersion11Fields: Bool {
        abiMinor >= 1 && Int(raw.pointee.struct_size) >= Self.version11Size
    }

    /// Whether the plugin says it was built without optimization (ABI 1.3).
    package var isDebugBuild: Bool {
        abiMinor >= 3 && Int(raw.pointee.struct_size) >= MemoryLayout<cmdbus_plugin_descriptor>.size
            && raw.pointee.plugin_flags & CMDBUS_PLUGIN_DEBUG_BUILD != 0
    }

    /// Whether the plugin's handle() checks can_handle itself and may complete with
    /// `CMDBUS_DECLINED` (ABI 1.4), so the host need not ask can_handle first.
    package var handleDecides: Bool {
        abiMinor >= 4 && Int(raw.pointee.struct_size) >= MemoryLayout<cmdbus_plugin_descriptor>.size
            && raw.pointee.plugin_flags & CMDBUS_PLUGIN_HANDLE_DECIDES != 0
    }

    /// The ABI this host speaks.
    package static let hostABI = (major: UInt32(CMDBUS_ABI_VERSION_MAJOR), minor: UInt32(CMDBUS_ABI_VERSION_MINOR))
    /// The most commands a descriptor may declare; more means garbage.
    package static let maxCommands: UInt32 = 1_000
    /// The largest `struct_size` believed: a descriptor is a few hundred bytes.
    package static let maxStructSize: UInt32 = 65_536
    /// The longest plugin name, version and command name, in bytes.
    package static let maxNameLength = 128, maxVersionLength = 64, maxCommandNameLength = longestCommandName
    /// The longest other string read from a descriptor (SDK and Swift versions).
    package static let maxStringLength = 256

    /// Reads and validates `raw`. Only fields are read; no plugin code runs.
    package init(reading raw: UnsafePointer<cmdbus_plugin_descriptor>) throws(PluginLoadFailure) {
        self.raw = raw
        let fields = raw.pointee
        guard fields.magic == CMDBUS_PLUGIN_MAGIC else {
            throw .init("descriptor has the wrong magic number (0x\(String(fields.magic, radix: 16))); not a CommandBus descriptor")
        }
        let host = Self.hostABI
        guard fields.abi_major == host.major else {
            throw .init("built for plugin ABI v\(fields.abi_major).\(fields.abi_minor); this host speaks v\(host.major).\(host.minor)")
        }
        guard fields.abi_minor <= host.minor else {
            throw .init("needs plugin ABI v\(fields.abi_major).\(fields.abi_minor); this host speaks only up to v\(host.major).\(host.minor)")
        }
        let minimumSize = fields.abi_minor >= 3 ? MemoryLayout<cmdbus_plugin_descriptor>.size
            : fields.abi_minor >= 1 ? Self.version11Size : Self.version10Size
        guard Int(fields.struct_size) >= minimumSize else {
            throw .init("descriptor is \(fields.struct_size) bytes, smaller than ABI v\(fields.abi_major).\(fields.abi_minor)'s \(minimumSize)")
        }
        guard fields.struct_size <= Self.maxStructSize else {
            throw .init("descriptor claims \(fields.struct_size) bytes, more than the \(Self.maxStructSize) allowed")
        }
        let name = try Self.name(fields.name, limit: Self.maxNameLength, what: "the plugin", missing: "descriptor is missing its name")
        let version = try Self.name(
            fields.version, limit: Self.maxVersionLength, what: "'\(name)'", missing: "descriptor of '\(name)' is missing its version",
            noun: "a version", allowsSpaces: true
        )
        let swiftVersion = Self.string(fields.swift_version)
        if let swiftVersion, swiftVersion != hostSwiftCompilerVersion {
            throw .init("'\(name)' was built with Swift \(swiftVersion); this host was built with Swift \(hostSwiftCompilerVersion) (rebuild the plugin)")
        }
        guard fields.handle != nil else { throw .init("descriptor of '\(name)' has no handle function") }
        guard fields.`init` != nil else {
            throw .init("descriptor of '\(name)' has no init function: handle() can only answer through the host table init() receives")
        }
        guard fields.command_count > 0, let table = fields.commands else { throw .init("'\(name)' declares no commands") }
        guard fields.command_count <= Self.maxCommands else {
            throw .init("'\(name)' declares \(fields.command_count) commands, more than the \(Self.maxCommands) allowed")
        }
        let flagTable = fields.abi_minor >= 1 ? fields.command_flags : nil
        var commands: [Command] = []
        var seen: Set<String> = []
        for index in 0..<fields.command_count {
            let entry = table[Int(index)]
            let commandName = try Self.name(
                entry.name, limit: Self.maxCommandNameLength, what: "command #\(index) of '\(name)'", missing: "command #\(index) of '\(name)' has no name"
            )
            guard seen.insert(commandName).inserted else { throw .init("'\(name)' declares command '\(commandName)' twice") }
            commands.append(Command(
                index: index, name: commandName, maxConcurrency: entry.max_concurrency > 0 ? Int(entry.max_concurrency) : nil,
                flags: flagTable?[Int(index)] ?? 0
            ))
        }
        self.name = name
        self.version = version
        self.abiMajor = fields.abi_major
        self.abiMinor = fields.abi_minor
        self.sdkVersion = Self.string(fields.sdk_version)
        self.swiftVersion = swiftVersion
        self.priority = fields.priority
        self.commands = commands
    }

    /// A name from the descriptor: present, no longer than `limit` bytes (read no further), and
    /// printable: no control characters, and no whitespace unless `allowsSpaces`.
    private static func name(
        _ pointer: UnsafePointer<CChar>?, limit: Int, what: String, missing: String, noun: String = "a name", allowsSpaces: Bool = false
    ) throws(PluginLoadFailure) -> String {
        guard let pointer, strnlen(pointer, limit + 1) > 0 else { throw .init(missing) }
        guard strnlen(pointer, limit + 1) <= limit else { throw .init("\(what) has \(noun) longer than \(limit) bytes") }
        let text = string(pointer) ?? ""
        // Printable ASCII, nearly every name, needs no look at Unicode properties (a cost per plugin at start).
        let ascii = isPrintableASCII(text)
        if !ascii, text.unicodeScalars.contains(where: \.isUnfitForAName) {
            throw .init("\(what) has \(noun) with a control character (\(quoted(text))); names and versions are printable")
        }
        if !allowsSpaces, ascii ? text.utf8.contains(UInt8(ascii: " ")) : text.contains(where: \.isWhitespace) {
            throw .init("\(what) has \(noun) with whitespace (\(quoted(text))); names are one word")
        }
        return text
    }

    /// A NUL-terminated UTF-8 string from the descriptor, read no further than `maxStringLength`.
    private static func string(_ pointer: UnsafePointer<CChar>?) -> String? {
        guard let pointer else { return nil }
        let length = strnlen(pointer, maxStringLength)
        return pointer.withMemoryRebound(to: UInt8.self, capacity: length) {
            String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
        }
    }
}
