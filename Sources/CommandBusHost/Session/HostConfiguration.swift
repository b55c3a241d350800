import CommandBusSupport
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
package struct HostConfiguration: Sendable, Equatable {
    /// The settings of one plugin file.
    package struct PluginSettings: Codable, Sendable, Equatable {
        /// Run this plugin's handlers in a worker process, as `--isolate` does for all.
        package var isolate: Bool?
    }

    private struct File: Codable {
        package var plugins: [String: PluginSettings]?
    }

    /// Settings by plugin file name.
    package var plugins: [String: PluginSettings] = [:]

    /// The file names of the plugins to isolate.
    package var isolatedFiles: Set<String> { Set(plugins.filter { $0.value.isolate == true }.keys) }

    package static func defaultPath(environment: [String: String]) -> String {
        environment["CMDBUS_CONFIG"].flatMap { $0.isEmpty ? nil : $0 } ?? "./.cmdbus/config.json"
    }

    /// Reads the configuration at `path`, or the empty one if there is no file.
    package static func load(_ path: String) throws(HostFailure) -> HostConfiguration {
        guard FileSystem.kind(of: path) != .missing else { return HostConfiguration() }
        guard let bytes = FileSystem.readAll(path) else {
            throw HostFailure(.badConfiguration, "configuration \(path) cannot be read")
        }
        do {
            let file = try JSONDecoder().decode(File.self, from: Data(bytes))
            return HostConfiguration(plugins: file.plugins ?? [:])
        } catch {
            throw HostFailure(.badConfiguration, "configuration \(path) is malformed: \(describeDecodingFailure(error))")
        }
    }
}
