import CommandBusSupport
import Glibc

/// The rules a plugin file must pass before the host runs any of its code, as sshd checks
/// the files it trusts. On by default; `--insecure-plugins` relaxes the permission and
/// symlink rules (an allowlist, once written, always applies).
///
/// - A plugin file, or its directory, that group or others can write, or that a non-root
///   user other than this one owns, is refused: someone else could replace the code.
/// - A symlink that points outside its plugin directory is refused.
/// - If the directory holds `plugins.lock`, only files listed there with a matching SHA-256 load.
public struct PluginTrustPolicy: Sendable {
    /// Whether the permission and symlink rules apply.
    public var enforcesPermissions: Bool
    /// Whether a directory's `plugins.lock` applies (off only while writing a new one).
    public var usesAllowlist: Bool

    /// The strict policy, or with `insecure` the relaxed one.
    public init(insecure: Bool = false, usesAllowlist: Bool = true) {
        enforcesPermissions = !insecure
        self.usesAllowlist = usesAllowlist
    }

    /// Checks a plugin directory; throws the rule it breaks.
    package func check(directory: String) throws(PluginLoadFailure) {
        guard enforcesPermissions, let status = FileSystem.status(of: directory) else { return }
        try checkOwnerAndMode(status, what: "plugin directory")
    }

    /// Checks one plugin file in `directory` against the rules and the directory's allowlist.
    package func check(file path: String, in directory: String, allowlist: PluginAllowlist?) throws(PluginLoadFailure) {
        if enforcesPermissions {
            if let link = FileSystem.status(of: path, followingLinks: false), link.isSymlink,
               let target = FileSystem.realPath(path), let root = FileSystem.realPath(directory),
               !target.hasPrefix(root.hasSuffix("/") ? root : root + "/") {
                throw .init("is a symlink to '\(target)', outside the plugin directory (rule: no symlinks out; or --insecure-plugins)")
            }
            if let status = FileSystem.status(of: path) { try checkOwnerAndMode(status, what: "file") }
        }
        if let allowlist { try allowlist.check(path) }
    }

    private func checkOwnerAndMode(_ status: FileSystem.Status, what: String) throws(PluginLoadFailure) {
        if status.mode & 0o022 != 0 {
            let mode = String(status.mode & 0o777, radix: 8)
            throw .init("\(what) is writable by group or others (mode \(mode)) (rule: only its owner may write it; chmod go-w, or --insecure-plugins)")
        }
        if status.owner != 0 && status.owner != getuid() {
            throw .init("\(what) is owned by another user (uid \(status.owner)) (rule: owned by root or by you; or --insecure-plugins)")
        }
    }
}
