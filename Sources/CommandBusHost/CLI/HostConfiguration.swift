import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The optional configuration file: per-plugin settings that a command line would make repetitive.
///
/// `$CMDBUS_CONFIG`, else `./.cmdbus/config.json`:
/// ```json
/// { "plugins": { "libUntrusted.so": { "isolate": true } } }
/// ```
/// Plugins are named by file name. A missing file is an empty configuration; a malformed one
/// is an error naming the file and the cause.
struct HostConfiguration: Sendable, Equatable {
    /// The settings of one plugin file.
    struct PluginSettings: Codable, Sendable, Equatable {
        /// Run this plugin's handlers in a worker process, as `--isolate` does for all.
        var isolate: Bool?
    }

    private struct File: Codable {
        var plugins: [String: PluginSettings]?
    }

    /// Settings by plugin file name.
    var plugins: [String: PluginSettings] = [:]

    /// The file names of the plugins to isolate.
    var isolatedFiles: Set<String> { Set(plugins.filter { $0.value.isolate == true }.keys) }

    static func defaultPath(environment: [String: String]) -> String {
        environment["CMDBUS_CONFIG"].flatMap { $0.isEmpty ? nil : $0 } ?? "./.cmdbus/config.json"
    }

    /// Reads the configuration at `path`, or the empty one if there is no file.
    static func load(_ path: String) throws(CLIFailure) -> HostConfiguration {
        guard FileSystem.kind(of: path) != .missing else { return HostConfiguration() }
        guard let bytes = FileSystem.readAll(path) else {
            throw CLIFailure(message: "configuration \(path) cannot be read", exitCode: .usage, code: "usage", command: nil, plugin: nil)
        }
        do {
            let file = try JSONDecoder().decode(File.self, from: Data(bytes))
            return HostConfiguration(plugins: file.plugins ?? [:])
        } catch {
            throw CLIFailure(
                message: "configuration \(path) is malformed: \(describeDecodingFailure(error))", exitCode: .usage, code: "usage", command: nil, plugin: nil
            )
        }
    }
}
