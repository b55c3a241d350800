import CommandBusLoading
import CommandBusSupport
import Foundation
import Testing

/// The registry file, read and written with the project's own JSON parser and writer.
struct PluginRegistryFileTests {
    @Test func aRegistryTheCodableVersionWroteStillReads() throws {
        let directory = try TemporaryDirectory("cmdbus-registry")
        defer { directory.remove() }
        let plugin = directory.file("libA.so").path, quarantined = directory.file("libB.so").path
        try Data("a".utf8).write(to: URL(fileURLWithPath: plugin))
        try Data("bb".utf8).write(to: URL(fileURLWithPath: quarantined))
        let a = try #require(FileSystem.status(of: plugin)), b = try #require(FileSystem.status(of: quarantined))
        // Byte for byte what JSONEncoder (.prettyPrinted, .sortedKeys) wrote before descriptors were kept.
        let old = """
            {
              "entries" : {
                "\(plugin)" : {
                  "inode" : \(a.inode),
                  "modified" : \(a.modified),
                  "probedAt" : 1795402357.2700021,
                  "sha256" : "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb",
                  "size" : 1,
                  "verdict" : "ok"
                },
                "\(quarantined)" : {
                  "inode" : \(b.inode),
                  "modified" : \(b.modified),
                  "probedAt" : 1795402358,
                  "reason" : "quarantined: crashed the probe (signal 11, \\"SIGSEGV\\")",
                  "sha256" : "",
                  "size" : 2,
                  "verdict" : "quarantined"
                }
              },
              "version" : 1
            }
            """
        let path = directory.file("registry.json").path
        try Data(old.utf8).write(to: URL(fileURLWithPath: path))
        var registry = PluginRegistry(path: path)
        #expect(registry.entry(for: plugin, status: a)?.verdict == "ok")
        #expect(registry.entry(for: plugin, status: a)?.probedAt == 1795402357.2700021)
        #expect(registry.entry(for: quarantined, status: b)?.reason == #"quarantined: crashed the probe (signal 11, "SIGSEGV")"#)
        #expect(registry.descriptor(for: plugin, status: a) == nil)

        // Written back and read again, the same verdicts; the file is JSON, one line per file.
        registry.record(try #require(registry.entry(for: plugin, status: a)), for: directory.file("libC.so").path)
        registry.save()
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(try JSONSerialization.jsonObject(with: Data(text.utf8)) is [String: Any])
        #expect(text.split(separator: "\n").filter { $0.contains(directory.path) }.count == 2, "libC.so does not exist, so it is dropped")
        let reread = PluginRegistry(path: path)
        #expect(reread.entry(for: plugin, status: a) == registry.entry(for: plugin, status: a))
        #expect(reread.entry(for: quarantined, status: b) == registry.entry(for: quarantined, status: b))
    }

    @Test func aRegistryThatIsNotJSONReadsAsEmptyAndIsReplaced() throws {
        let directory = try TemporaryDirectory("cmdbus-registry")
        defer { directory.remove() }
        let path = directory.file("registry.json").path
        for garbage in ["", "{", "[1,2]", #"{"entries": 5}"#, #"{"entries": {"/x": {"size": "big"}}}"#] {
            try Data(garbage.utf8).write(to: URL(fileURLWithPath: path))
            var registry = PluginRegistry(path: path)
            let hadEntry = registry.forget("/x")
            #expect(!hadEntry, "\(garbage)")
        }
    }

    /// Found by hand: a registry that cannot be written (its path under a file, a home directory
    /// this user cannot write) cost every start its probes, and said nothing. The command still
    /// runs; one line names the registry, the cause and what to set.
    @Test func aRegistryThatCannotBeSavedIsNamedOnce() async throws {
        let work = try TemporaryDirectory("cmdbus-registry-unsaved")
        defer { work.remove() }
        let plugins = try work.subdirectory("plugins")
        try plugins.install("libGreeter.so", "libCounter.so")
        try Data("a file, not a directory".utf8).write(to: work.file("blocker"))
        let registry = work.file("blocker/registry.json").path
        let run = try await cmdbus(["run", "greet", "-p", "name=Ada", "--no-journal", "--plugins", plugins.path], environment: ["CMDBUS_REGISTRY": registry])
        #expect(run.status == 0 && run.stdout == "{\"greeting\":\"Hello, Ada!\"}\n", "\(run.stderr)")
        let warnings = run.stderr.split(separator: "\n").filter { $0.contains("plugin registry") }
        #expect(warnings == [
            "cmdbus: plugin warning: cannot save the plugin registry \(registry) (\(work.file("blocker").path) exists and is not a directory): "
                + "each start probes and opens the plugin files anew, which is slower; set CMDBUS_REGISTRY to a file this user can write",
        ], "\(run.stderr)")
    }
}
