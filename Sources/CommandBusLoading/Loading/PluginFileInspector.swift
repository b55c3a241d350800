import CommandBusSupport
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Cheap checks on a candidate plugin file before anything is loaded: it exists, is a
/// regular file (through any symlink), is not empty, and is a whole ELF shared library
/// for this machine (see ``ELFImage``).
///
/// These catch the common mistakes (a directory named `x.so`, a dangling symlink, an
/// empty, text or truncated file) with a precise reason, before `dlopen` runs any code.
package enum PluginFileInspector {
    /// The extension plugin files carry.
    package static let pluginExtension = ".so"

    /// Checks `path`; throws the reason it cannot be a plugin.
    package static func inspect(_ path: String) throws(PluginLoadFailure) {
        let size: Int
        switch FileSystem.kind(of: path) {
        case .missing:
            // A name that is not UTF-8 was read with U+FFFD in its bad bytes' place, and names no file.
            throw .init(FileSystem.lastComponent(path).contains("\u{FFFD}")
                ? "its name is not UTF-8 text (shown with U+FFFD where it is not), so cmdbus cannot open it by name; rename the file"
                : "no such file")
        case .danglingSymlink(let target): throw .init("dangling symlink to '\(target)'")
        case .symlinkLoop(let target): throw .init("symlink to '\(target)' that leads back to itself")
        case .directory: throw .init("is a directory, not a shared library")
        case .other: throw .init("is a FIFO, socket or device, not a shared library")
        case .regularFile(let fileSize): size = fileSize
        }
        if size == 0 { throw .init("empty file") }
        guard var header = FileSystem.readPrefix(of: path, count: 64) else { throw .init("cannot be read (permission denied?)") }
        guard header.starts(with: [0x7F, 0x45, 0x4C, 0x46]) else {
            throw .init("not an ELF shared library (bad magic bytes)")
        }
        let needed = ELFImage.headerLength(of: Data(header))
        if needed > header.count { header = FileSystem.readPrefix(of: path, count: needed) ?? header }
        try ELFImage.validate(Data(header), fileSize: size)
    }
}
