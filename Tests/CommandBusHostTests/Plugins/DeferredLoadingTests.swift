import CommandBus
import CommandBusLoading
import Foundation
import Synchronization
import Testing

/// One-shot commands open a known plugin file only when a command reaches it.
struct DeferredLoadingTests {
    /// A plugin folder, a registry beside it, and a first `cmdbus` run (in its own process, so
    /// this one has opened nothing) that fills the registry with the folder's descriptors.
    private struct KnownFolder {
        let root: TemporaryDirectory
        let plugins: TemporaryDirectory
        var registry: String { root.file("registry.json").path }

        init(_ products: String...) async throws {
            root = try TemporaryDirectory("cmdbus-deferred")
            plugins = try root.subdirectory("plugins")
            for product in products {
                try FileManager.default.copyItem(at: try TestPaths.product(product), to: plugins.file(product))
            }
        }

        /// The first run in the folder: every file opened, the registry written.
        func fillRegistry() async throws {
            let first = try await cmdbus(
                ["can", "greet", #"{"name":"Ada"}"#, "--no-probe", "--plugins", plugins.path], environment: ["CMDBUS_REGISTRY": registry]
            )
            try #require(first.status == 0, "the first run failed: \(first.stderr)")
        }

        /// A deferring loader over the folder, its plugin log lines handed to `log`.
        func loader(logging log: (@Sendable (String) -> Void)? = nil) -> PluginLoader {
            let loader = PluginLoader(directories: [plugins.path], registryPath: registry, defersLoading: true)
            if let log { loader.log.redirect { _, line in log(line) } }
            return loader
        }
    }

    /// Whether this process has the library at `path` open, without opening it.
    private func isOpen(_ path: String) -> Bool {
        dlopen(path, RTLD_NOW | RTLD_NOLOAD) != nil
    }

    @Test func aKnownFileIsOpenedOnlyWhenACommandReachesIt() async throws {
        let folder = try await KnownFolder("libGreeter.so", "libGreetAll.so", "libCEcho.so")
        defer { folder.root.remove() }
        try await folder.fillRegistry()
        let bus = CommandBus()
        let catalog = folder.loader().load(into: bus)
        #expect(catalog.skipped.isEmpty)
        #expect(Set(catalog.plugins.map(\.name)) == ["greeter", "greet-all", "c-echo"])
        #expect(catalog.plugins.allSatisfy { $0.isDeferred })
        let paths = ["libGreeter.so", "libGreetAll.so", "libCEcho.so"].map { folder.plugins.file($0).path }
        #expect(paths.filter { isOpen($0) }.isEmpty, "no file is opened at start")

        // greet-all opens its own file, and its subcommands open the Greeter's; c-echo stays closed.
        let result = try await bus.send(name: "greet-all", payload: json(#"{"names":["Ada","Lin"]}"#))
        #expect(try JSONSerialization.jsonObject(with: result) as? [String: [String]] == ["greetings": ["Hello, Ada!", "Hello, Lin!"]])
        #expect(paths.map { isOpen($0) } == [true, true, false])
        #expect(catalog.plugins.filter { $0.isDeferred }.map(\.name) == ["c-echo"])
        // The registry's flags stand in for the descriptor's before the file is open, and the
        // plugin's own answers after: a blank name is declined, a malformed payload refused.
        #expect(try await !bus.wouldHandle(name: "greet", payload: json(#"{"name":"  "}"#)))
        #expect(try await bus.send(name: "c.echo", payload: json(#"{"a":1}"#)) == json(#"{"a":1}"#))
        #expect(isOpen(paths[2]))
    }

    @Test func theChainKeepsItsOrderAndAShadowedFileStaysClosed() async throws {
        let folder = try await KnownFolder("libGreeter.so", "libCEcho.so")
        defer { folder.root.remove() }
        try await compileFixture("shadowing_greeter", into: folder.plugins)
        try await folder.fillRegistry()
        let bus = CommandBus()
        let catalog = folder.loader().load(into: bus)
        #expect(catalog.routes.first { $0.command == "greet" }?.plugins.map(\.name) == ["bonjour", "greeter"])
        #expect(try await bus.send(Greet(name: "Ada")).greeting == "Bonjour!")
        #expect(isOpen(folder.plugins.file("shadowing_greeter.so").path))
        #expect(!isOpen(folder.plugins.file("libGreeter.so").path), "the shadowed Greeter is never asked, so never opened")
    }

    @Test func aChangedFileIsOpenedAtStartAndAnUnknownOneToo() async throws {
        let folder = try await KnownFolder("libGreeter.so", "libCEcho.so")
        defer { folder.root.remove() }
        try await folder.fillRegistry()
        // A new modification time: the cached descriptor no longer describes the file.
        let echo = folder.plugins.file("libCEcho.so").path
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -3600)], ofItemAtPath: echo)
        try FileManager.default.copyItem(at: try TestPaths.product("libGreetAll.so"), to: folder.plugins.file("libGreetAll.so"))
        let catalog = folder.loader().load(into: CommandBus())
        let deferred = Dictionary(uniqueKeysWithValues: catalog.plugins.map { ($0.name, $0.isDeferred) })
        #expect(deferred == ["greeter": true, "c-echo": false, "greet-all": false])
        // Those two were opened now, and their descriptors recorded: the next start defers all three.
        #expect(folder.loader().load(into: CommandBus()).plugins.allSatisfy { $0.isDeferred })
    }

    @Test func aKnownFileThatCannotOpenWhenReachedIsSkippedForgottenAndPassedOver() async throws {
        let folder = try await KnownFolder("libGreeter.so")
        defer { folder.root.remove() }
        try await compileFixture("shadowing_greeter", into: folder.plugins)
        try await folder.fillRegistry()
        let lines = LoggedLines()
        let bus = CommandBus()
        let catalog = folder.loader(logging: lines.append).load(into: bus)
        #expect(catalog.plugins.allSatisfy { $0.isDeferred })
        // Between start and the first command, the higher-priority file is truncated.
        let bonjour = folder.plugins.file("shadowing_greeter.so").path
        try Data("not a library".utf8).write(to: URL(fileURLWithPath: bonjour))

        #expect(try await bus.send(Greet(name: "Ada")).greeting == "Hello, Ada!", "the command passes down the chain")
        let logged = lines.all
        #expect(logged.count == 1)
        #expect(logged.first?.hasPrefix("skipped \(bonjour): ") == true, "\(logged)")
        // Its summary is gone, so the next start opens it at once and reports it there.
        var registry = PluginRegistry(path: folder.registry)
        let hadSummary = registry.forget(bonjour)
        #expect(!hadSummary)
        #expect(try await bus.send(Greet(name: "Lin")).greeting == "Hello, Lin!")
        #expect(lines.all.count == 1, "a file is tried once")
    }

    @Test func aLockedFileIsCheckedAgainWhenItIsOpened() async throws {
        let folder = try await KnownFolder("libGreeter.so")
        defer { folder.root.remove() }
        let greeter = folder.plugins.file("libGreeter.so").path
        let digest = try #require(SHA256.ofFile(greeter))
        try Data("\(digest)  libGreeter.so\n".utf8).write(to: folder.plugins.file("plugins.lock"))
        try await folder.fillRegistry()
        let lines = LoggedLines()
        let bus = CommandBus()
        #expect(folder.loader(logging: lines.append).load(into: bus).plugins.allSatisfy { $0.isDeferred })
        // After the start's check, the file gains a byte: still the same plugin, no longer the locked one.
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: greeter))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data([0]))
        try handle.close()

        await #expect(throws: CommandBusError.self) { try await bus.send(Greet(name: "Ada")) }
        #expect(lines.all.count == 1)
        #expect(lines.all.first?.contains("differs from plugins.lock") == true, "\(lines.all)")
        #expect(!isOpen(greeter))
    }

    @Test func runOpensTheReachedPluginAndAnswersAsTheFirstRunDid() async throws {
        let folder = try await KnownFolder("libGreeter.so", "libGreetAll.so", "libCEcho.so")
        defer { folder.root.remove() }
        let arguments = ["run", "greet-all", #"{"names":["Ada"]}"#, "--no-journal", "--plugins", folder.plugins.path]
        let environment = ["CMDBUS_REGISTRY": folder.registry, "LD_DEBUG": "files", "LD_DEBUG_OUTPUT": folder.root.file("ld").path]
        var outputs: [String] = []
        for _ in 0..<2 {
            let run = try await cmdbus(arguments, environment: environment)
            try #require(run.status == 0, "\(run.stderr)")
            outputs.append(run.stdout)
        }
        #expect(outputs[0] == outputs[1] && outputs[0].contains("Hello, Ada!"))
        // The dynamic loader's own account of each process: which plugin files it initialized.
        let logs = try FileManager.default.contentsOfDirectory(atPath: folder.root.path).filter { $0.hasPrefix("ld.") }
        var initialized: [Set<String>] = []
        for log in logs {
            let text = try String(contentsOfFile: folder.root.file(log).path, encoding: .utf8)
            let plugins = text.split(separator: "\n").compactMap { line -> String? in
                guard let range = line.range(of: "calling init: "), line.hasSuffix(".so"), line.contains(folder.plugins.path) else { return nil }
                return URL(fileURLWithPath: String(line[range.upperBound...])).lastPathComponent
            }
            if !plugins.isEmpty { initialized.append(Set(plugins)) }
        }
        // The probe children open one file each; the two runs open all three, then the two reached.
        #expect(initialized.contains(["libGreeter.so", "libGreetAll.so", "libCEcho.so"]), "\(initialized)")
        #expect(initialized.contains(["libGreeter.so", "libGreetAll.so"]), "\(initialized)")
    }

    /// An unknown command's message names the plugins whose handlers are on the bus, without
    /// calling them loaded: a one-shot run opened none of them.
    @Test func anUnknownCommandNamesThePluginsWithoutCallingThemLoaded() async throws {
        let folder = try await KnownFolder("libGreeter.so")
        defer { folder.root.remove() }
        try await folder.fillRegistry()
        let run = try await cmdbus(
            ["run", "quux-frobnicate", "--no-journal", "--no-probe", "--plugins", folder.plugins.path], environment: ["CMDBUS_REGISTRY": folder.registry]
        )
        #expect(run.status == 69)
        #expect(run.stderr.contains("no handler for command 'quux-frobnicate'") && run.stderr.contains(" (plugins: greeter)"), "\(run.stderr)")
        #expect(!run.stderr.contains("loaded"), "\(run.stderr)")
        let empty = try folder.root.subdirectory("empty")
        let none = try await cmdbus(["run", "quux-frobnicate", "--no-journal", "--plugins", empty.path])
        #expect(none.status == 69 && none.stderr.contains("(no plugins in \(empty.path))"), "\(none.stderr)")
        // A file that did not load is named: the likeliest reason, and a server's client never saw the warning.
        try "not a library\n".write(to: empty.file("libbroken.so"), atomically: true, encoding: .utf8)
        let skipped = try await cmdbus(["run", "quux-frobnicate", "--no-journal", "--plugins", empty.path])
        #expect(skipped.status == 69 && skipped.stderr.contains("(no plugins in \(empty.path); libbroken.so was skipped: 'cmdbus plugins' says why)"), "\(skipped.stderr)")
    }
}

/// Log lines collected from any thread.
private final class LoggedLines: Sendable {
    private let lines = Mutex<[String]>([])
    var all: [String] { lines.withLock { $0 } }
    func append(_ line: String) { lines.withLock { $0.append(line) } }
}
