import CommandBusSupport
import CCommandBusABI
import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Finds plugin files in directories, loads each one, checks its descriptor, and registers its handlers.
///
/// A file that cannot be a plugin is skipped with a one-line reason; one bad file never
/// stops the others from loading, and nothing it holds crashes the host.
/// ```swift
/// let bus = CommandBus()
/// let catalog = PluginLoader(directories: ["./plugins"]).load(into: bus)
/// for skipped in catalog.skipped { print(skipped.path, skipped.reason) }
/// ```
public struct PluginLoader: Sendable {
    /// The directories searched, in order; earlier directories win ties in priority.
    public let directories: [String]
    /// The rules a file must pass before any of its code runs.
    public let trust: PluginTrustPolicy
    /// Loads each new file in a child process first; `nil` loads straight into this process.
    public let probe: PluginProbe?
    /// Where probe verdicts are cached, so a file is probed again only when it changes.
    public let registryPath: String?
    /// The `cmdbus` binary whose workers run each plugin in its own process; `nil` loads plugins here.
    public let isolatingWith: String?
    /// Plugin file names to isolate even when the rest load here (needs `isolatingWith`).
    public let isolatedFiles: Set<String>?
    /// Puts a known file's handlers on the bus from its cached descriptor and opens the file only
    /// when a command first reaches one of them (``DeferredPlugin``): for one-shot commands.
    public let defersLoading: Bool
    /// Opens each plugin loaded into this process from a private copy of its file
    /// (``SharedLibrary/init(openingPrivateCopyOf:)``): for a long-running host, whose plugin
    /// files may be written over in place while it runs.
    public let loadsPrivateCopies: Bool
    /// Where this loader's plugins log outside a command, and where their misuse of the ABI is reported.
    package let log: PluginLog

    /// Creates a loader for `directories` that applies `trust` and, if given, probes new files.
    /// - Parameters:
    ///   - isolatingWith: A `cmdbus` executable: run plugins in worker processes of it.
    ///   - isolatedFiles: Isolate only these file names; `nil` isolates every plugin.
    ///   - defersLoading: Open each in-process plugin the registry knows only when a command reaches it.
    ///   - loadsPrivateCopies: Open each in-process plugin from a private copy of its file.
    public init(
        directories: [String], trust: PluginTrustPolicy = .init(), probe: PluginProbe? = nil,
        registryPath: String? = nil, isolatingWith: String? = nil, isolatedFiles: Set<String>? = nil, defersLoading: Bool = false,
        loadsPrivateCopies: Bool = false
    ) {
        self.loadsPrivateCopies = loadsPrivateCopies
        self.isolatedFiles = isolatedFiles
        self.defersLoading = defersLoading
        self.directories = directories
        self.trust = trust
        self.probe = probe
        self.registryPath = registryPath
        self.isolatingWith = isolatingWith
        log = PluginLog.standardError()
    }

    /// The plugin directories to use: the explicit ones if any, else `$CMDBUS_PLUGINS` (colon-separated), else `./plugins`.
    public static func directories(explicit: [String], environment: [String: String]) -> [String] {
        if !explicit.isEmpty { return explicit }
        if let fromEnvironment = environment["CMDBUS_PLUGINS"] {
            let list = fromEnvironment.split(separator: ":").map(String.init).filter { !$0.isEmpty }
            if !list.isEmpty { return list }
        }
        return ["./plugins"]
    }

    /// Loads every `.so` file in the directories, in order (by file name within a directory), onto `bus`.
    public func load(into bus: CommandBus) -> PluginCatalog {
        var plugins: [LoadedPlugin] = []
        var skipped: [SkippedPluginFile] = []
        var registrations: [String: [HandlerRegistration]] = [:]
        var registry = openRegistry()
        defer { save(registry) }
        for directory in directories {
            // The directory's own rules and its plugins.lock are checked once, not per file.
            let files: [String]
            let allowlist: PluginAllowlist?
            do {
                files = try Self.candidates(in: directory)
                allowlist = try admission(of: directory)
            } catch {
                skipped.append(SkippedPluginFile(path: directory, reason: error.reason))
                continue
            }
            // The trust rules first, for every file: no code of a file they refuse runs, not even in a probe.
            var refusals: [String: PluginLoadFailure] = [:]
            for file in files {
                do { try trust.check(file: file, in: directory, allowlist: allowlist) } catch { refusals[file] = error }
            }
            var admitted: Set<String> = []
            if let probe, registry != nil {
                admitted = Self.probeNewFiles(files.filter { refusals[$0] == nil }, probe: probe, registry: &registry!)
            }
            for file in files {
                let result = refusals[file].map { .failure(Self.skipped(file, $0)) }
                    ?? loadTrustedFile(file, allowlist: allowlist, into: bus, registry: &registry, admittedByProbe: admitted.contains(file))
                switch result {
                case .success(let loaded):
                    plugins.append(loaded.plugin)
                    registrations[file] = loaded.registrations
                case .failure(let skip): skipped.append(skip)
                }
            }
        }
        return PluginCatalog(directories: directories, plugins: plugins, skipped: skipped, registrations: registrations)
    }

    /// Checks, probes and loads one file of `directory`, and registers its handlers on `bus`.
    /// - Returns: The plugin and its registrations (cancel them to take its handlers off), or why it was skipped.
    public func loadFile(
        _ file: String, in directory: String, into bus: CommandBus
    ) -> Result<(plugin: LoadedPlugin, registrations: [HandlerRegistration]), SkippedPluginFile> {
        let allowlist: PluginAllowlist?
        do {
            allowlist = try admission(of: directory)
        } catch {
            return .failure(SkippedPluginFile(path: file, reason: error.reason))
        }
        var registry = openRegistry()
        defer { save(registry) }
        return loadFile(file, in: directory, allowlist: allowlist, into: bus, registry: &registry)
    }

    /// Saves `registry` if anything in it changed, and warns once if it cannot be saved.
    private func save(_ registry: PluginRegistry?) {
        guard let registry, registry.isChanged, let failure = registry.save() else { return }
        log.once("registry", .warning, registry.unsavedWarning(failure))
    }

    /// Checks a plugin directory against the trust rules and reads its allowlist, if it has one.
    private func admission(of directory: String) throws(PluginLoadFailure) -> PluginAllowlist? {
        try trust.check(directory: directory)
        return trust.usesAllowlist ? try PluginAllowlist.load(directory: directory) : nil
    }

    /// Forgets what the registry knows of `file` (its probe verdict and cached descriptor), if
    /// this loader keeps one, so the next load probes and opens it anew; returns whether it knew anything.
    package func forgetVerdict(_ file: String) -> Bool {
        guard var registry = openRegistry(), registry.forget(file) else { return false }
        registry.save()
        return true
    }

    /// The registry, if this loader probes or defers loading.
    private func openRegistry() -> PluginRegistry? {
        probe != nil || defersLoading ? PluginRegistry(path: resolvedRegistryPath) : nil
    }

    private var resolvedRegistryPath: String {
        registryPath ?? PluginRegistry.defaultPath(environment: ProcessInfo.processInfo.environment)
    }

    private func loadFile(
        _ file: String, in directory: String, allowlist: PluginAllowlist?, into bus: CommandBus, registry: inout PluginRegistry?
    ) -> Result<(plugin: LoadedPlugin, registrations: [HandlerRegistration]), SkippedPluginFile> {
        do {
            try trust.check(file: file, in: directory, allowlist: allowlist)
        } catch {
            return .failure(Self.skipped(file, error))
        }
        return loadTrustedFile(file, allowlist: allowlist, into: bus, registry: &registry)
    }

    /// Probes (unless the registry knows the file), loads and registers a file the trust rules admitted.
    /// - Parameters:
    ///   - allowlist: The directory's, checked again when a deferred file is opened.
    ///   - admittedByProbe: The registry has just been asked, and holds an `ok` verdict for it.
    private func loadTrustedFile(
        _ file: String, allowlist: PluginAllowlist?, into bus: CommandBus, registry: inout PluginRegistry?, admittedByProbe: Bool = false
    ) -> Result<(plugin: LoadedPlugin, registrations: [HandlerRegistration]), SkippedPluginFile> {
        do {
            if let probe, registry != nil, !admittedByProbe { try Self.probeIfNew(file, probe: probe, registry: &registry!) }
        } catch {
            return .failure(Self.skipped(file, error))
        }
        let isolating = isolatingWith.flatMap { executable in
            isolatedFiles.map { $0.contains(FileSystem.lastComponent(file)) } ?? true ? executable : nil
        }
        // The file's identity before it is opened: what the registry's descriptor is keyed by.
        let identity = isolating == nil && registry != nil ? FileSystem.status(of: file).map { (FileSystem.realPath(file) ?? file, $0) } : nil
        if defersLoading, let (key, status) = identity, let summary = registry!.descriptor(for: key, status: status) {
            return .success(register(deferred(file, summary, allowlist: allowlist), on: bus))
        }
        let hash = allowlist?.hash(of: file)
        switch isolating.map({ Self.loadIsolated(file: file, executable: $0, log: log, hash: hash) })
            ?? Self.load(file: file, hostTable: HostFunctionTable.pointer, log: log, privateCopy: loadsPrivateCopies, hash: hash) {
        case .success(let plugin):
            if let (key, status) = identity { registry!.record(PluginDescriptorSummary(plugin, status: status), for: key) }
            return .success(register(plugin, on: bus))
        case .failure(let failure):
            return .failure(SkippedPluginFile(path: file, reason: failure.reason))
        }
    }

    /// Puts each of `plugin`'s commands on `bus`, at its priority.
    private func register(_ plugin: LoadedPlugin, on bus: CommandBus) -> (plugin: LoadedPlugin, registrations: [HandlerRegistration]) {
        let registrations = plugin.declared.map { command in
            if let worker = plugin.worker {
                bus.register(IsolatedCommandHandler(plugin: plugin, worker: worker, command: command), priority: plugin.priority)
            } else if let deferred = plugin.deferred {
                bus.register(DeferredPluginCommandHandler(plugin: deferred, command: command), priority: plugin.priority)
            } else {
                bus.register(PluginCommandHandler(plugin: plugin, command: command), priority: plugin.priority)
            }
        }
        return (plugin, registrations)
    }

    /// The catalog's entry for a file not opened yet, from what its descriptor said last time.
    private func deferred(_ file: String, _ summary: PluginDescriptorSummary, allowlist: PluginAllowlist?) -> LoadedPlugin {
        LoadedPlugin(
            path: file, description: summary.plugin, loadMilliseconds: 0,
            endpoint: PluginEndpoint(name: summary.plugin.name, fileName: FileSystem.lastComponent(file), log: log),
            deferred: DeferredPlugin(path: file, summary: summary, allowlist: allowlist, log: log, registryPath: resolvedRegistryPath)
        )
    }

    /// A file skipped for `failure`, marked quarantined if the probe quarantined it.
    private static func skipped(_ file: String, _ failure: PluginLoadFailure) -> SkippedPluginFile {
        SkippedPluginFile(path: file, reason: failure.reason, isQuarantined: failure.reason.hasPrefix("quarantined:"))
    }

    /// Why a plugin directory is skipped when it is not there (`cmdbus plugins` calls that an error).
    package static let missingDirectory = "plugin directory does not exist"

    /// The plugin files in `directory`: every entry whose name ends in `.so`, sorted by name.
    package static func candidates(in directory: String) throws(PluginLoadFailure) -> [String] {
        switch FileSystem.kind(of: directory) {
        case .directory: break
        case .missing, .danglingSymlink: throw .init(missingDirectory)
        case .symlinkLoop(let target): throw .init("plugin directory is a symlink to '\(target)' that leads back to itself")
        default: throw .init("plugin directory is not a directory")
        }
        guard let names = FileSystem.entries(of: directory) else { throw .init("plugin directory cannot be read") }
        return names.filter { $0.hasSuffix(PluginFileInspector.pluginExtension) }
            .sorted()
            .map { FileSystem.join(directory, $0) }
    }

    /// Loads and initializes one plugin file without registering it anywhere.
    public static func load(file path: String) -> Result<LoadedPlugin, PluginLoadError> {
        load(file: path, hostTable: HostFunctionTable.pointer, log: .standardError())
    }

    /// Loads and initializes one plugin file, handing its `init()` the given host function table.
    /// - Parameters:
    ///   - privateCopy: Open a private copy of the file (``SharedLibrary/init(openingPrivateCopyOf:hash:)``).
    ///   - hash: The SHA-256 the directory's `plugins.lock` lists for it. With one, a private
    ///     copy is opened even where `privateCopy` is `false` (a one-shot run), and checked, so
    ///     a file changed since the trust rules' check cannot slip in.
    package static func load(
        file path: String, hostTable: UnsafePointer<cmdbus_host_api>, log: PluginLog, privateCopy: Bool = false, hash: String? = nil
    ) -> Result<LoadedPlugin, PluginLoadError> {
        let start = ContinuousClock.now
        do {
            try PluginFileInspector.inspect(path)
            let library = try privateCopy || hash != nil ? openPrivateCopy(of: path, log: log, hash: hash) : SharedLibrary(openingPlugin: path)
            let descriptor = try readDescriptor(from: library)
            let state = try initialize(descriptor, hostTable: hostTable)
            let elapsed = ContinuousClock.now - start
            return .success(LoadedPlugin(
                path: path, name: descriptor.name, version: descriptor.version,
                abi: "\(descriptor.abiMajor).\(descriptor.abiMinor)", sdkVersion: descriptor.sdkVersion,
                swiftVersion: descriptor.swiftVersion, priority: Int(descriptor.priority),
                commands: descriptor.commands.map(\.name), loadedAt: Date(),
                loadMilliseconds: milliseconds(elapsed),
                isDebugBuild: descriptor.isDebugBuild, declared: descriptor.commands, descriptor: descriptor, state: state, worker: nil,
                endpoint: PluginEndpoint(name: descriptor.name, fileName: FileSystem.lastComponent(path), log: log)
            ))
        } catch {
            return .failure(PluginLoadError(path: path, reason: error.reason, dependsOnThisMachine: error.dependsOnThisMachine))
        }
    }

    /// Opens a private copy of `path`, or, where no copy can be made anywhere (a read-only
    /// plugin directory and a `noexec` temporary one, as a hardened host has), the file itself,
    /// saying once what that risks.
    private static func openPrivateCopy(of path: String, log: PluginLog, hash: String?) throws(PluginLoadFailure) -> SharedLibrary {
        do {
            return try SharedLibrary(openingPrivateCopyOf: path, hash: hash)
        } catch where error.foundNoPlaceForACopy {
            log.once("no private copy", .warning, "\(FileSystem.lastComponent(path)) and the plugins after it run from their own files, "
                + "so writing over one while it runs can crash this process and a replacement at the same path cannot load: \(error.reason)")
            // No copy to check: the file itself, once more, as close to its opening as can be.
            if let hash { try PluginAllowlist.verify(path, hash: hash) }
            return try SharedLibrary(openingPlugin: path)
        }
    }

    /// Starts a worker process for one plugin file and describes what it loaded.
    /// - Parameter hash: The SHA-256 `plugins.lock` lists for the file, which the worker checks
    ///   on its private copy each time it starts.
    package static func loadIsolated(
        file path: String, executable: String, log: PluginLog, hash: String? = nil
    ) -> Result<LoadedPlugin, PluginLoadError> {
        let start = ContinuousClock.now
        do {
            try PluginFileInspector.inspect(path)
            let worker = IsolatedPlugin(path: path, executable: executable, log: log, hash: hash)
            let description = try worker.start()
            let elapsed = ContinuousClock.now - start
            return .success(LoadedPlugin(
                path: path, description: description, loadMilliseconds: milliseconds(elapsed), worker: worker,
                endpoint: PluginEndpoint(name: description.name, fileName: FileSystem.lastComponent(path), log: log)
            ))
        } catch {
            return .failure(PluginLoadError(path: path, reason: error.reason, dependsOnThisMachine: error.dependsOnThisMachine))
        }
    }

    private static func milliseconds(_ duration: Duration) -> Double {
        roundedMilliseconds(Double(duration.components.attoseconds) / 1e18 + Double(duration.components.seconds))
    }

    private static func readDescriptor(from library: SharedLibrary) throws(PluginLoadFailure) -> PluginDescriptor {
        guard let entry = library.address(of: CMDBUS_PLUGIN_ENTRY_NAME) else {
            if let other = (0...9).first(where: { $0 != Int(CMDBUS_ABI_VERSION_MAJOR) && library.address(of: "cmdbus_plugin_v\($0)") != nil }) {
                throw .init("built for plugin ABI v\(other) (exports cmdbus_plugin_v\(other)); this host speaks v\(CMDBUS_ABI_VERSION_MAJOR)")
            }
            throw .init("not a CommandBus plugin: it exports no \(CMDBUS_PLUGIN_ENTRY_NAME) symbol")
        }
        let function = unsafeBitCast(entry, to: cmdbus_plugin_entry_v1.self)
        guard let raw = function() else {
            throw .init("its \(CMDBUS_PLUGIN_ENTRY_NAME)() returned no descriptor (NULL)")
        }
        return try PluginDescriptor(reading: raw)
    }

    private static func initialize(
        _ descriptor: PluginDescriptor, hostTable: UnsafePointer<cmdbus_host_api>
    ) throws(PluginLoadFailure) -> PluginState {
        guard let initialize = descriptor.raw.pointee.`init` else { return PluginState(pointer: nil) }
        var state: UnsafeMutableRawPointer?
        let status = initialize(hostTable, &state)
        guard status == 0 else { throw .init("'\(descriptor.name)' refused to start: its init() returned \(status)") }
        return PluginState(pointer: state)
    }
}

/// Why a plugin file could not be loaded.
public struct PluginLoadError: Error, Sendable, CustomStringConvertible {
    /// The file.
    public let path: String
    /// A one-line reason.
    public let reason: String
    /// Whether the file may load once this machine changes (``PluginLoadFailure/dependsOnThisMachine``).
    package var dependsOnThisMachine = false
    /// `path: reason`.
    public var description: String { "\(path): \(reason)" }
}
