import Glibc

/// A shared library opened with `dlopen`. It is never closed: unloading Swift images is unsupported.
package struct SharedLibrary: @unchecked Sendable {
    // The handle stays valid for the life of the process (RTLD_NODELETE, no dlclose).
    private let handle: UnsafeMutableRawPointer

    /// Opens `path` with `RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE`.
    /// - Throws: The loader's own message (`dlerror`) when it cannot be opened.
    package init(opening path: String) throws(PluginLoadFailure) {
        guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE) else {
            throw .init(Self.lastError() ?? "dlopen failed")
        }
        self.handle = handle
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
    package init(_ reason: String) { self.reason = reason }
    package var description: String { reason }
}
