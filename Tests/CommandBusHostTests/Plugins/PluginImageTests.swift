import CommandBus
import CommandBusLoading
import Foundation
import Testing

/// A plugin file loaded again in one process: the same image while the file is unchanged, and
/// a new image running the new code once the file has been replaced or rewritten in place.
struct PluginImageTests {
    /// Builds the C `greet` plugin that answers `greeting`, into `directory` under a scratch name.
    private func build(_ greeting: String, in directory: TemporaryDirectory) async throws -> String {
        try await compileFixture("shadowing_greeter", into: directory, as: "build-\(UUID().uuidString).tmp", defines: ["GREETING=\"\(greeting)\""]).path
    }

    /// Loads `path` onto a bus of its own and sends it `greet`.
    private func load(_ path: String, in directory: TemporaryDirectory) async throws -> (greeting: String, plugin: LoadedPlugin, bus: CommandBus) {
        let bus = CommandBus()
        let loaded = try PluginLoader(directories: [directory.path]).loadFile(path, in: directory.path, into: bus).get()
        return (try await bus.send(Greet(name: "Ada")).greeting, loaded.plugin, bus)
    }

    @Test func aFileLoadedAgainUnchangedIsTheSameImage() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("bonjour.so").path
        #expect(rename(try await build("one", in: directory), path) == 0)
        let first = try await load(path, in: directory), again = try await load(path, in: directory)
        #expect(first.greeting == "one" && again.greeting == "one")
        #expect(first.plugin.descriptor?.raw == again.plugin.descriptor?.raw, "an unchanged file was mapped a second time")
    }

    @Test func aReplacedOrRewrittenFileLoadsAsANewImageRunningItsNewCode() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("bonjour.so").path
        #expect(rename(try await build("one", in: directory), path) == 0)
        let first = try await load(path, in: directory)
        #expect(first.greeting == "one")

        // Moved in whole over the loaded file, as an install should be.
        #expect(rename(try await build("two", in: directory), path) == 0)
        let second = try await load(path, in: directory)
        #expect(second.greeting == "two")
        #expect(second.plugin.descriptor?.raw != first.plugin.descriptor?.raw)

        // Written over in place (as `cp` does), then once more by a rename: each is a new image.
        let third = try Data(contentsOf: URL(fileURLWithPath: try await build("three", in: directory)))
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.truncate(atOffset: 0)
        try handle.write(contentsOf: third)
        try handle.close()
        #expect(try await load(path, in: directory).greeting == "three")
        #expect(rename(try await build("four", in: directory), path) == 0)
        #expect(try await load(path, in: directory).greeting == "four")

        // Nothing is unloaded: the first image still answers on the bus that loaded it.
        #expect(try await first.bus.send(Greet(name: "Ada")).greeting == "one")
        // The private copies are gone once open.
        let leftovers = await privateCopiesLeftBehind()
        #expect(leftovers.isEmpty, "\(leftovers)")
    }
}
