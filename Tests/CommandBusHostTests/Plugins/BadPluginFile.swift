import Foundation

/// The kinds of bad file a plugin directory can hold, each made for real on disk.
enum BadPluginFile: String, CaseIterable, Sendable {
    case textFile, emptyFile, randomBytes, truncatedPlugin, sharedLibraryNotAPlugin, systemLibrary
    case entryReturnsNull, otherABIEntryPoint, otherABIInDescriptor, missingName, directory, danglingSymlink
    case controlCharactersInAName, spaceInAName, overlongName, duplicateCommand, noInit, hugeStructSize, tooManyCommands
    case fileNameNotUTF8, symlinkLoop

    /// Creates the bad file in `directory`; returns its path and a phrase its skip reason must contain.
    func create(in directory: TemporaryDirectory) async throws -> (path: String, reason: String) {
        switch self {
        case .textFile:
            let url = directory.file("x.so")
            try "this is not a library\n".write(to: url, atomically: true, encoding: .utf8)
            return (url.path, "not an ELF shared library")
        case .emptyFile:
            let url = directory.file("empty.so")
            _ = FileManager.default.createFile(atPath: url.path, contents: Data())
            return (url.path, "empty file")
        case .randomBytes:
            let url = directory.file("random.so")
            var generator = SystemRandomNumberGenerator()
            try Data((0..<4096).map { _ in UInt8.random(in: 0...255, using: &generator) }).write(to: url)
            return (url.path, "not an ELF shared library")
        case .truncatedPlugin:
            let url = directory.file("truncated.so")
            let whole = try Data(contentsOf: try TestPaths.product("libGreeter.so"))
            try whole.prefix(whole.count / 3).write(to: url)
            return (url.path, "truncated ELF file")
        case .sharedLibraryNotAPlugin:
            return (try await compileFixture("not_a_plugin", into: directory).path, "exports no cmdbus_plugin_v1 symbol")
        case .systemLibrary:
            let url = directory.file("libm.so")
            try FileManager.default.copyItem(at: URL(fileURLWithPath: Self.systemLibraryPath), to: url)
            return (url.path, "exports no cmdbus_plugin_v1 symbol")
        case .entryReturnsNull:
            return (try await compileFixture("null_entry", into: directory).path, "returned no descriptor")
        case .otherABIEntryPoint:
            return (try await compileFixture("abi_v2", into: directory).path, "built for plugin ABI v2")
        case .otherABIInDescriptor:
            return (try await compileFixture("abi_field_mismatch", into: directory).path, "built for plugin ABI v2.0; this host speaks v1.4")
        case .missingName:
            return (try await compileFixture("missing_name", into: directory).path, "missing its name")
        case .directory:
            let url = directory.file("y.so")
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
            return (url.path, "is a directory")
        case .controlCharactersInAName:
            return (try await compileFixture("bad_descriptor", into: directory, as: "control.so", defines: ["CONTROL_NAME"]).path,
                    #"command #0 of 'bad' has a name with a control character ('evil\u{1b}[31m.red\nnext'); names and versions are printable"#)
        case .spaceInAName:
            return (try await compileFixture("bad_descriptor", into: directory, as: "spaced.so", defines: ["SPACED_NAME"]).path,
                    "command #0 of 'bad' has a name with whitespace ('two words'); names are one word")
        case .overlongName:
            return (try await compileFixture("bad_descriptor", into: directory, as: "long.so", defines: ["LONG_NAME"]).path,
                    "command #0 of 'bad' has a name longer than 255 bytes")
        case .duplicateCommand:
            return (try await compileFixture("bad_descriptor", into: directory, as: "duplicate.so", defines: ["DUPLICATE"]).path,
                    "'bad' declares command 'ok.echo' twice")
        case .noInit:
            return (try await compileFixture("bad_descriptor", into: directory, as: "noinit.so", defines: ["NO_INIT"]).path,
                    "descriptor of 'bad' has no init function")
        case .hugeStructSize:
            return (try await compileFixture("bad_descriptor", into: directory, as: "huge.so", defines: ["HUGE_SIZE"]).path,
                    "descriptor claims 1073741824 bytes, more than the 65536 allowed")
        case .tooManyCommands:
            return (try await compileFixture("bad_descriptor", into: directory, as: "many.so", defines: ["TOO_MANY"]).path,
                    "'bad' declares 100000 commands, more than the 1000 allowed")
        case .fileNameNotUTF8:
            // Found by hand: skipped as "no such file". Foundation takes names as text, so the
            // byte 0xFF goes in through open(2); the host reads the name with U+FFFD in its place.
            let name = Array(directory.path.utf8) + Array("/lib".utf8) + [0xFF] + Array("x.so".utf8) + [0]
            let descriptor = name.withUnsafeBufferPointer { open(UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), O_WRONLY | O_CREAT, 0o644) }
            guard descriptor >= 0 else { throw POSIXError(.EIO) }
            _ = write(descriptor, "not a library\n", 14)
            close(descriptor)
            return (directory.path + "/lib\u{FFFD}x.so", "its name is not UTF-8 text (shown with U+FFFD where it is not), so cmdbus cannot open it by name; rename the file")
        case .danglingSymlink:
            let url = directory.file("dangling.so")
            try FileManager.default.createSymbolicLink(atPath: url.path, withDestinationPath: "/nonexistent/plugin.so")
            return (url.path, "dangling symlink")
        case .symlinkLoop:
            // Found by hand: a link to itself was called dangling.
            let url = directory.file("loop.so")
            try FileManager.default.createSymbolicLink(atPath: url.path, withDestinationPath: "loop.so")
            return (url.path, "symlink to 'loop.so' that leads back to itself")
        }
    }

    /// A real system shared library that is not a plugin (glibc's libm is on every Linux machine).
    static let systemLibraryPath: String = {
        let candidates = ["/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6", "/lib/aarch64-linux-gnu/libm.so.6", "/lib64/libm.so.6"]
        return candidates.first { FileManager.default.fileExists(atPath: $0) } ?? candidates[0]
    }()
}
