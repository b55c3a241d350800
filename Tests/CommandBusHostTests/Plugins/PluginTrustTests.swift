import CommandBus
@testable import CommandBusHost
@testable import CommandBusLoading
import CommandBusSupport
import Foundation
import Testing

/// The trust rules: permissions, owners, symlinks out of the directory, and plugins.lock.
struct PluginTrustTests {
    private func skippedReason(_ path: String, in directory: TemporaryDirectory, trust: PluginTrustPolicy = .init()) -> String? {
        PluginLoader(directories: [directory.path], trust: trust).load(into: CommandBus()).skipped.first { $0.path == path }?.reason
    }

    @Test func aFileOthersCanWriteIsRefusedUnlessInsecure() throws {
        let directory = try examplePluginDirectory()
        defer { directory.remove() }
        let file = directory.file("libGreeter.so").path
        chmod(file, 0o664)
        #expect(skippedReason(file, in: directory)?.contains("file is writable by group or others (mode 664)") == true)
        #expect(skippedReason(file, in: directory, trust: .init(insecure: true)) == nil)
    }

    @Test func aDirectoryOthersCanWriteIsRefused() throws {
        let directory = try examplePluginDirectory()
        defer { directory.remove() }
        chmod(directory.path, 0o777)
        let catalog = PluginLoader(directories: [directory.path]).load(into: CommandBus())
        #expect(catalog.plugins.isEmpty)
        #expect(catalog.skipped.first?.reason.contains("plugin directory is writable by group or others (mode 777)") == true)
    }

    @Test(.enabled(if: getuid() == 0, "giving a file to another user needs root"))
    func aFileAnotherUserOwnsIsRefused() throws {
        let directory = try examplePluginDirectory()
        defer { directory.remove() }
        let file = directory.file("libCEcho.so").path
        chown(file, 4242, 4242)
        #expect(skippedReason(file, in: directory)?.contains("file is owned by another user (uid 4242)") == true)
    }

    @Test func aSymlinkOutOfTheDirectoryIsRefusedAndOneWithinLoads() throws {
        let directory = try TemporaryDirectory(), elsewhere = try TemporaryDirectory()
        defer { directory.remove(); elsewhere.remove() }
        try elsewhere.install("libGreeter.so")
        try directory.install("libCEcho.so")
        try FileManager.default.createSymbolicLink(atPath: directory.file("out.so").path, withDestinationPath: elsewhere.file("libGreeter.so").path)
        try FileManager.default.createSymbolicLink(atPath: directory.file("within.so").path, withDestinationPath: "libCEcho.so")
        let catalog = PluginLoader(directories: [directory.path]).load(into: CommandBus())
        #expect(catalog.skipped.first { $0.path.hasSuffix("out.so") }?.reason.contains("outside the plugin directory") == true)
        #expect(catalog.plugins.map(\.path).contains(directory.file("within.so").path))
    }

    @Test func thePluginsLockAllowsOnlyListedUnchangedFiles() async throws {
        let directory = try examplePluginDirectory()
        defer { directory.remove() }
        let lock = try await cmdbus("plugins", "lock", "--plugins", directory.path)
        #expect(lock.status == 0 && lock.stdout.contains("locked 3 plugins"), "\(lock.stderr)")
        let text = try String(contentsOf: directory.file("plugins.lock"), encoding: .utf8)
        #expect(text.split(separator: "\n").count == 3)
        #expect(text.contains("  libGreeter.so"))

        try directory.install("libCounter.so")
        let greeter = directory.file("libGreeter.so")
        let handle = try FileHandle(forWritingTo: greeter)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data([0]))
        try handle.close()
        let catalog = PluginLoader(directories: [directory.path]).load(into: CommandBus())
        #expect(Set(catalog.plugins.map(\.name)) == ["greet-all", "c-echo"])
        #expect(catalog.skipped.first { $0.path.hasSuffix("libCounter.so") }?.reason.contains("is not listed in plugins.lock") == true)
        #expect(catalog.skipped.first { $0.path.hasSuffix("libGreeter.so") }?.reason.contains("differs from plugins.lock") == true)
    }

    @Test func sha256MatchesKnownDigests() {
        var empty = SHA256()
        #expect(empty.finish() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        var abc = SHA256()
        abc.update(Array("abc".utf8))
        #expect(abc.finish() == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        var long = SHA256()
        long.update(Array(repeating: UInt8(ascii: "a"), count: 1_000))
        #expect(long.finish() == "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3")
    }
}
