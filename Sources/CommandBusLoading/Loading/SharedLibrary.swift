import CommandBusSupport
import Glibc

/// A shared library opened with `dlopen`. It is never closed: unloading Swift images is unsupported.
package struct SharedLibrary: @unchecked Sendable {
    // The handle stays valid for the life of the process (RTLD_NODELETE, no dlclose).
    private let handle: UnsafeMutableRawPointer

    /// Opens `path` with `RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE`.
    /// - Throws: The loader's own message (`dlerror`) when it cannot be opened, said for a
    ///   person (``worded(_:path:)``).
    package init(opening path: String) throws(PluginLoadFailure) {
        guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE) else {
            var failure = PluginLoadFailure(Self.worded(Self.lastError() ?? "dlopen failed", path: path))
            // The file passed the header checks before it got here: what the linker refuses is
            // what this machine lacks (a library, a symbol's version, a mount that lets code run).
            failure.dependsOnThisMachine = true
            throw failure
        }
        self.handle = handle
    }

    /// The dynamic linker's `message` about `path` without the path it begins with (whoever
    /// reports a file's failure names the file), and with what to do where the cause is one a
    /// plugin's author or its host's administrator can act on: a file system mounted `noexec`,
    /// a library the plugin links that is not on this machine, a symbol nothing it links has.
    /// The linker's words stay in the message.
    package static func worded(_ message: String, path: String) -> String {
        let reason = message.hasPrefix(path + ": ") ? String(message.dropFirst(path.count + 2)) : message
        if reason.contains("failed to map segment"), FileSystem.isOnNoExecFileSystem(path) {
            return "its file system is mounted noexec, where no code may run (\(reason)); use a directory on one that allows it, or remount it without noexec"
        }
        if reason.contains("cannot open shared object file") {
            return "\(reason); the plugin links a library this machine does not have: install it, or put it where the plugin's rpath or LD_LIBRARY_PATH looks"
        }
        if reason.hasPrefix("undefined symbol: ") {
            return "\(reason); the plugin uses a symbol none of the libraries it links provides: link the library that has it, or rebuild the plugin"
        }
        return reason
    }

    /// The address of `symbol`, or `nil` if the library does not export it.
    package func address(of symbol: String) -> UnsafeMutableRawPointer? {
        _ = dlerror()
        return dlsym(handle, symbol)
    }

    private static func lastError() -> String? {
        guard let message = dlerror() else { return nil }
        return String(cString: message)
    }
}

/// Why one plugin file could not be loaded: a one-line reason.
package struct PluginLoadFailure: Error, Sendable, CustomStringConvertible {
    package let reason: String
    /// Whether nothing was wrong with the file: no private copy of it could be made
    /// (``SharedLibrary/init(openingPrivateCopyOf:)``), so it was not opened at all.
    package var foundNoPlaceForACopy = false
    /// Whether the file may load once this machine changes (a library installed, a file system
    /// remounted): a refusal no cache keeps as the file's verdict.
    package var dependsOnThisMachine = false
    package init(_ reason: String) { self.reason = reason }
    package var description: String { reason }
}
