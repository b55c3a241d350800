import CommandBusSupport
/// `plugins.lock`: the plugin files a directory may load, each with its SHA-256.
///
/// One line per file, as `sha256sum` writes them: `<64 hex digits>  <file name>`.
/// `cmdbus plugins lock` writes it; once it exists, a file loads only if it is listed
/// with the same hash.
package struct PluginAllowlist: Sendable, Equatable {
    /// The lock file's name inside a plugin directory.
    package static let fileName = "plugins.lock"

    /// SHA-256 by file name.
    package var hashes: [String: String]

    /// An allowlist of `hashes` (SHA-256 by file name).
    package init(hashes: [String: String]) {
        self.hashes = hashes
    }

    /// The allowlist of `directory`, or `nil` if it has none.
    /// - Throws: If the file exists but cannot be read or parsed.
    package static func load(directory: String) throws(PluginLoadFailure) -> PluginAllowlist? {
        let path = FileSystem.join(directory, fileName)
        guard case .regularFile = FileSystem.kind(of: path) else { return nil }
        guard let bytes = FileSystem.readAll(path) else { throw .init("\(fileName) cannot be read; give this user read access to it") }
        var hashes: [String: String] = [:]
        for (number, line) in String(decoding: bytes, as: UTF8.self).split(separator: "\n").enumerated() {
            let text = line.trimmingPrefix(" ")
            if text.isEmpty || text.hasPrefix("#") { continue }
            let parts = text.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
            guard parts.count == 2, parts[0].count == 64, parts[0].allSatisfy(\.isHexDigit) else {
                throw .init("\(fileName) line \(number + 1) is not '<sha256>  <file name>'; mend it, or write it again with 'cmdbus plugins lock'")
            }
            hashes[String(parts[1].trimmingPrefix(" ").trimmingPrefix("*"))] = parts[0].lowercased()
        }
        return PluginAllowlist(hashes: hashes)
    }

    /// Why a file the lock does not list is refused.
    package static let notListed = "is not listed in \(fileName) (rule: allowlist; run 'cmdbus plugins lock' to list it)"

    /// Throws unless `path` is listed with its current hash.
    package func check(_ path: String) throws(PluginLoadFailure) {
        let name = FileSystem.lastComponent(path)
        guard let expected = hashes[name] else {
            throw .init(Self.notListed)
        }
        try Self.verify(path, hash: expected)
    }

    /// Throws unless the file at `path` (a plugin, or the private copy about to be opened in
    /// its place) has the SHA-256 `expected`, as `plugins.lock` lists it.
    package static func verify(_ path: String, hash expected: String) throws(PluginLoadFailure) {
        guard let actual = SHA256.ofFile(path) else { throw .init("cannot be read to check its SHA-256") }
        guard actual == expected else {
            throw .init(
                "SHA-256 \(actual.prefix(12))… differs from \(fileName)'s \(expected.prefix(12))… "
                    + "(rule: allowlist; the file changed since it was locked: run 'cmdbus plugins lock' if the new build is trusted)"
            )
        }
    }

    /// The SHA-256 `plugins.lock` lists for the file at `path`, if it lists one.
    package func hash(of path: String) -> String? {
        hashes[FileSystem.lastComponent(path)]
    }

    /// The lock file's text.
    package var text: String {
        hashes.keys.sorted().map { "\(hashes[$0]!)  \($0)" }.joined(separator: "\n") + "\n"
    }
}
