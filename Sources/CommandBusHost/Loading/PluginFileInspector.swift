import Foundation

/// Cheap checks on a candidate plugin file before anything is loaded: it exists, is a
/// regular file (through any symlink), is not empty, and is a whole ELF shared library
/// for this machine (see ``ELFImage``).
///
/// These catch the common mistakes (a directory named `x.so`, a dangling symlink, an
/// empty or text file) with a precise reason, before `dlopen` runs any code.
enum PluginFileInspector {
    /// The extension plugin files carry.
    static let pluginExtension = "so"

    /// Checks `path`; throws the reason it cannot be a plugin.
    static func inspect(_ path: String) throws(PluginLoadFailure) {
        let manager = FileManager.default
        var isDirectory: ObjCBool = false
        guard manager.fileExists(atPath: path, isDirectory: &isDirectory) else {
            if (try? manager.destinationOfSymbolicLink(atPath: path)) != nil {
                throw .init("dangling symlink to '\((try? manager.destinationOfSymbolicLink(atPath: path)) ?? "?")'")
            }
            throw .init("no such file")
        }
        if isDirectory.boolValue { throw .init("is a directory, not a shared library") }
        guard let handle = FileHandle(forReadingAtPath: path) else { throw .init("cannot be read (permission denied?)") }
        defer { try? handle.close() }
        var header = (try? handle.read(upToCount: 64)) ?? Data()
        if header.isEmpty { throw .init("empty file") }
        guard header.prefix(4) == Data([0x7F, 0x45, 0x4C, 0x46]) else {
            throw .init("not an ELF shared library (bad magic bytes)")
        }
        let fileSize = Int((try? handle.seekToEnd()) ?? 0)
        let needed = ELFImage.headerLength(of: header)
        if needed > header.count {
            try? handle.seek(toOffset: 0)
            header = (try? handle.read(upToCount: needed)) ?? header
        }
        try ELFImage.validate(header, fileSize: fileSize)
    }
}
