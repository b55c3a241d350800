import CommandBus
import CommandBusLoading
import CommandBusSupport
import Foundation
import Testing

/// `plugins.lock` is checked on what is opened: the private copy a server or a worker loads is
/// hashed before the linker sees it, so a file changed after the trust rules checked it (a new
/// build copied in while the server loads) cannot run unless the lock lists the new build.
///
/// Each test locks one build of the C `greet` fixture and puts another at its path, which is
/// what the loader finds when the file changes between the check and the copy.
struct LockedCopyTests {
    /// Builds the C `greet` plugin that answers `greeting`, under a scratch name in `directory`.
    private func build(_ greeting: String, in directory: TemporaryDirectory) async throws -> String {
        try await compileFixture("shadowing_greeter", into: directory, as: "build-\(UUID().uuidString).tmp", defines: ["GREETING=\"\(greeting)\""]).path
    }

    /// A directory whose `greet.so` answers "two", and the SHA-256 of a build that answers "one".
    private func changedPlugin() async throws -> (directory: TemporaryDirectory, path: String, lockedHash: String) {
        let directory = try TemporaryDirectory()
        let path = directory.file("greet.so").path
        let locked = try #require(SHA256.ofFile(try await build("one", in: directory)))
        #expect(rename(try await build("two", in: directory), path) == 0)
        return (directory, path, locked)
    }

    @Test func aPrivateCopyThatDiffersFromTheLockIsNotOpened() async throws {
        let (directory, path, lockedHash) = try await changedPlugin()
        defer { directory.remove() }
        let refused = PluginLoader.load(file: path, hostTable: HostFunctionTable.pointer, log: .standardError(), privateCopy: true, hash: lockedHash)
        guard case .failure(let error) = refused else {
            Issue.record("a copy whose hash is not the locked one was opened")
            return
        }
        #expect(error.reason.contains("differs from plugins.lock's \(lockedHash.prefix(12))"), "\(error.reason)")
        #expect(error.reason.contains("run 'cmdbus plugins lock' if the new build is trusted"))

        // The build the lock lists loads, and is the one that answers.
        let current = try #require(SHA256.ofFile(path))
        let plugin = try PluginLoader.load(file: path, hostTable: HostFunctionTable.pointer, log: .standardError(), privateCopy: true, hash: current).get()
        let bus = CommandBus()
        for command in plugin.declared { bus.register(PluginCommandHandler(plugin: plugin, command: command)) }
        #expect(try await bus.send(Greet(name: "Ada")).greeting == "two")
        let leftovers = await privateCopiesLeftBehind()
        #expect(leftovers.isEmpty, "a refused copy was left behind: \(leftovers)")
    }

    /// A one-shot run (no private copies asked for) under a lock opens a checked copy too:
    /// the file it would have opened in place is not the build the lock lists.
    @Test func aOneShotLoadUnderALockChecksWhatItOpens() async throws {
        let (directory, path, lockedHash) = try await changedPlugin()
        defer { directory.remove() }
        let refused = PluginLoader.load(file: path, hostTable: HostFunctionTable.pointer, log: .standardError(), hash: lockedHash)
        guard case .failure(let error) = refused else {
            Issue.record("a one-shot load opened a file whose hash is not the locked one")
            return
        }
        #expect(error.reason.contains("differs from plugins.lock's \(lockedHash.prefix(12))"), "\(error.reason)")
        let current = try #require(SHA256.ofFile(path))
        #expect((try? PluginLoader.load(file: path, hostTable: HostFunctionTable.pointer, log: .standardError(), hash: current).get()) != nil)
    }

    /// A lock file that is not `sha256sum`'s format says which line and how to mend it.
    @Test func aMalformedLockSaysWhichLineAndWhatToDo() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try "# written by hand\n\(String(repeating: "ab", count: 32))  good.so\nzzzz  libGreeter.so\n".write(
            to: directory.file("plugins.lock"), atomically: true, encoding: .utf8
        )
        #expect {
            try PluginAllowlist.load(directory: directory.path)
        } throws: { error in
            (error as? PluginLoadFailure)?.reason == "plugins.lock line 3 is not '<sha256>  <file name>'; mend it, or write it again with 'cmdbus plugins lock'"
        }
    }

    @Test func aWorkerChecksItsCopyAgainstTheLock() async throws {
        let (directory, path, lockedHash) = try await changedPlugin()
        defer { directory.remove() }
        let executable = try TestPaths.product("cmdbus").path
        // Starting a worker blocks until it answers: off the cooperative pool.
        let refused = await DetachedThread.value {
            PluginLoader.loadIsolated(file: path, executable: executable, log: .standardError(), hash: lockedHash)
        }
        guard case .failure(let error) = refused else {
            Issue.record("a worker opened a copy whose hash is not the locked one")
            return
        }
        #expect(error.reason.contains("differs from plugins.lock's \(lockedHash.prefix(12))"), "\(error.reason)")

        let current = try #require(SHA256.ofFile(path))
        let loaded = await DetachedThread.value {
            PluginLoader.loadIsolated(file: path, executable: executable, log: .standardError(), hash: current)
        }
        let plugin = try loaded.get()
        defer { plugin.worker?.stop() }
        #expect(plugin.commands == ["greet"])
    }
}
