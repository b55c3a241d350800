import CommandBus
import CommandBusHost
import CommandBusLoading
import Foundation
import Synchronization
import Testing

struct Greet: Command {
    typealias Result = Greeting
    static let name = "greet"
    var name: String
}

struct Greeting: Codable, Sendable, Equatable {
    var greeting: String
}

struct PluginLoaderTests {
    /// A bus with the test fixture plugin loaded from a directory of its own.
    private func fixtureBus(_ configuration: CommandBusConfiguration = .init()) throws -> (CommandBus, TemporaryDirectory) {
        let directory = try TemporaryDirectory()
        try directory.install("libFixturePlugin.so")
        let bus = CommandBus(configuration: configuration)
        _ = PluginLoader(directories: [directory.path]).load(into: bus)
        return (bus, directory)
    }

    @Test func loadsTheExamplePluginsAndRoutesToThem() async throws {
        let directory = try examplePluginDirectory()
        defer { directory.remove() }
        let bus = CommandBus()
        let catalog = PluginLoader(directories: [directory.path]).load(into: bus)
        #expect(catalog.skipped.isEmpty)
        #expect(Set(catalog.plugins.map(\.name)) == ["greeter", "greet-all", "c-echo"])
        let greeter = try #require(catalog.plugins.first { $0.name == "greeter" })
        #expect(greeter.abi == "1.4" && greeter.sdkVersion == "1.0.0" && greeter.swiftVersion != nil)
        #expect(catalog.plugins.first { $0.name == "c-echo" }?.swiftVersion == nil)

        // The typed path reaches a plugin handler, as does the dynamic one.
        #expect(try await bus.send(Greet(name: "Ada")) == Greeting(greeting: "Hello, Ada!"))
        let echoed = try await bus.send(name: "c.echo", payload: json(#"{"a":[1,2]}"#))
        #expect(echoed == json(#"{"a":[1,2]}"#))
    }

    @Test func wouldHandleCrossesTheBoundaryWithoutRunning() async throws {
        let directory = try examplePluginDirectory()
        defer { directory.remove() }
        let bus = CommandBus()
        _ = PluginLoader(directories: [directory.path]).load(into: bus)
        #expect(try await bus.wouldHandle(name: "greet", payload: json(#"{"name":"Ada"}"#)))
        #expect(try await !bus.wouldHandle(name: "greet", payload: json(#"{"name":"  "}"#)))
        await #expect(throws: CommandBusError(code: .decodingFailed, message: "")) {
            try await bus.wouldHandle(name: "greet", payload: json("not json"))
        }
    }

    @Test func subcommandsFromOnePluginReachAnother() async throws {
        let directory = try examplePluginDirectory()
        defer { directory.remove() }
        let bus = CommandBus()
        _ = PluginLoader(directories: [directory.path]).load(into: bus)
        let events = bus.events()
        let ticket = bus.post(name: "greet-all", payload: json(#"{"names":["Ada","Lin","Grace"]}"#))
        let result = try await ticket.result
        #expect(try JSONSerialization.jsonObject(with: result) as? [String: [String]] == ["greetings": ["Hello, Ada!", "Hello, Lin!", "Hello, Grace!"]])
        bus.finishEventStreams()
        var childParents: [UUID?] = [], progress: [Int] = [], emitted = 0
        for await event in events {
            if event.envelope.commandName == "greet", case .accepted = event.kind { childParents.append(event.envelope.parentID) }
            if event.commandID == ticket.id, case .progress(let done, _) = event.kind { progress.append(done) }
            if event.commandID == ticket.id, case .emitted("greeted", _) = event.kind { emitted += 1 }
        }
        #expect(childParents == [ticket.id, ticket.id, ticket.id])
        // GreetAll reports its own progress, which replaces the count of finished subcommands.
        #expect(progress == [0, 1, 2, 3])
        #expect(emitted == 3)
    }

    @Test func errorsNameTheCommandThePluginAndTheCause() async throws {
        let directory = try examplePluginDirectory()
        defer { directory.remove() }
        try directory.install("libFixturePlugin.so")
        let bus = CommandBus()
        _ = PluginLoader(directories: [directory.path]).load(into: bus)
        await #expect {
            try await bus.send(name: "fixture.fail", payload: json(#"{"message":"disk full"}"#))
        } throws: { error in
            let busError = error as? CommandBusError
            return busError?.code == .handlerFailed
                && busError?.message == "command 'fixture.fail' failed in plugin 'fixture' (libFixturePlugin.so): disk full"
        }
        await #expect {
            try await bus.send(name: "greet", payload: json(#"{"nom":"Ada"}"#))
        } throws: { error in
            (error as? CommandBusError)?.message == "payload for 'greet' does not decode in plugin 'greeter' (libGreeter.so): missing field 'name'"
        }
    }

    @Test func retryableFailuresFromAPluginAreRetried() async throws {
        let deadLetters = FailedCommandRecorder()
        let (bus, directory) = try fixtureBus(.init(middleware: [deadLetters, RetryMiddleware(maxAttempts: 3, initialDelay: .milliseconds(1))]))
        defer { directory.remove() }
        await #expect(throws: CommandBusError(code: .handlerFailed, message: "")) {
            try await bus.send(name: "fixture.fail", payload: json(#"{"message":"busy","retryable":true}"#))
        }
        #expect(deadLetters.failures.map(\.attempts) == [3])
        #expect(deadLetters.failures.first?.error.isRetryable == true)
    }

    @Test func cancellationReachesAPluginHandler() async throws {
        let (bus, directory) = try fixtureBus()
        defer { directory.remove() }
        let events = bus.events()
        let ticket = bus.post(name: "fixture.sleep", payload: json(#"{"milliseconds":60000}"#))
        #expect(await waitUntil { ticket.state == .running })
        ticket.cancel()
        // The handler sleeps for a minute; only cancellation reaching it ends the call sooner.
        await #expect(throws: CommandBusError(code: .cancelled, message: "")) { try await ticket.result }
        bus.finishEventStreams()
        var pluginSawCancellation = false
        for await event in events where event.kind == .log(level: .info, message: "sleep cancelled") { pluginSawCancellation = true }
        #expect(pluginSawCancellation)
    }

    @Test func aTimeoutEndsAPluginCommandAndItsSubcommand() async throws {
        let (bus, directory) = try fixtureBus()
        defer { directory.remove() }
        let events = bus.events()
        await #expect(throws: CommandBusError(code: .timedOut, message: "")) {
            try await bus.send(name: "fixture.sleep-via", payload: json(#"{"milliseconds":60000}"#), timeout: .milliseconds(200))
        }
        // The child fixture.sleep, sent through the host by the parent plugin, is cancelled too.
        var childEnded: CommandState?
        for await event in events where event.envelope.commandName == "fixture.sleep" {
            if case .stateChanged(_, let to) = event.kind, to.isTerminal { childEnded = to; break }
        }
        #expect(childEnded == .cancelled)
    }

    @Test(arguments: BadPluginFile.allCases)
    func aBadFileIsSkippedWithItsReasonAndTheRestStillWork(kind: BadPluginFile) async throws {
        let directory = try examplePluginDirectory()
        defer { directory.remove() }
        let (path, reason) = try await kind.create(in: directory)
        let bus = CommandBus()
        let catalog = PluginLoader(directories: [directory.path]).load(into: bus)
        let skipped = try #require(catalog.skipped.first { $0.path == path }, "\(kind) was not reported: \(catalog.skipped)")
        #expect(skipped.reason.contains(reason), "reason was: \(skipped.reason)")
        #expect(!skipped.reason.isEmpty && !skipped.reason.contains("\n"))
        #expect(catalog.plugins.count == 3)
        #expect(try await bus.send(Greet(name: "Ada")).greeting == "Hello, Ada!")
    }

    /// An SDK plugin's handle() decides (ABI 1.4): one call into the plugin per command, and its
    /// canHandle's "no" passes the command to the next handler, as the chain of responsibility says.
    @Test func aPluginsNoInHandlePassesTheCommandDownTheChain() async throws {
        let directory = try examplePluginDirectory()
        defer { directory.remove() }
        let bus = CommandBus()
        let catalog = PluginLoader(directories: [directory.path]).load(into: bus)
        #expect(catalog.plugins.first { $0.name == "greeter" }?.abi == "1.4")
        // Asked without sending, the plugin's own can_handle() answers.
        #expect(try await !bus.wouldHandle(name: "greet", payload: json(#"{"name":" "}"#)))
        #expect(try bus.canHandle(name: "greet", payload: json(#"{"name":" "}"#)), "routing takes the command as wanted")
        bus.register(GreetsStrangers(), priority: -100)
        #expect(try await bus.send(name: "greet", payload: json(#"{"name":"Ada"}"#)) == json(#"{"greeting":"Hello, Ada!"}"#))
        #expect(try await bus.send(name: "greet", payload: json(#"{"name":" "}"#)) == json(#"{"greeting":"Hello, stranger!"}"#))
        // A payload that does not decode is an error, not a "no": it is not passed on.
        await #expect {
            try await bus.send(name: "greet", payload: json(#"{"name":42}"#))
        } throws: { error in
            (error as? CommandBusError)?.code == .decodingFailed
        }
    }

    @Test func aPluginHandlerSeesItsEnvelopeInProcessAndIsolated() async throws {
        let (bus, directory) = try fixtureBus()
        defer { directory.remove() }
        let isolated = CommandBus()
        let catalog = PluginLoader(directories: [directory.path], isolatingWith: try TestPaths.product("cmdbus").path).load(into: isolated)
        defer { catalog.stopWorkers() }
        for target in [bus, isolated] {
            let ticket = target.post(name: "fixture.whoami", payload: json("{}"), metadata: ["user": "ada"])
            let envelope = try jsonObject(String(decoding: try await ticket.result, as: UTF8.self))
            #expect(envelope["id"] as? String == ticket.id.uuidString)
            #expect(envelope["correlationId"] as? String == ticket.id.uuidString)
            #expect(envelope["metadata"] as? [String: String] == ["user": "ada"])
        }
    }

    @Test func aPluginBuiltForABI10StillLoads() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try await compileFixture("abi_1_0", into: directory)
        let bus = CommandBus()
        let catalog = PluginLoader(directories: [directory.path]).load(into: bus)
        #expect(catalog.plugins.map(\.abi) == ["1.0"])
        #expect(try await bus.send(name: "old.echo", payload: json(#"{"x":1}"#)) == json(#"{"x":1}"#))
    }

    @Test func aPluginThatCompletesTwiceIsIgnoredTheSecondTime() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try await compileFixture("double_complete", into: directory)
        let bus = CommandBus()
        _ = PluginLoader(directories: [directory.path]).load(into: bus)
        #expect(try await bus.send(name: "twice", payload: json(#"{"ok":true}"#)) == json(#"{"ok":true}"#))
    }

    @Test func priorityThenDirectoryOrderDecideWhoHandles() async throws {
        let first = try examplePluginDirectory(), second = try TemporaryDirectory()
        defer { first.remove(); second.remove() }
        try second.install("libGreeter.so")
        let bus = CommandBus()
        var catalog = PluginLoader(directories: [first.path, second.path]).load(into: bus)
        var route = try #require(catalog.routes.first { $0.command == "greet" })
        #expect(route.plugins.map(\.path) == [first.file("libGreeter.so").path, second.file("libGreeter.so").path])

        try await compileFixture("shadowing_greeter", into: second)
        let shadowed = CommandBus()
        catalog = PluginLoader(directories: [first.path, second.path]).load(into: shadowed)
        route = try #require(catalog.routes.first { $0.command == "greet" })
        #expect(route.plugins.map(\.name) == ["bonjour", "greeter", "greeter"])
        #expect(try await shadowed.send(Greet(name: "Ada")).greeting == "Bonjour!")
    }

    @Test func directoriesComeFromFlagsThenEnvironmentThenDefault() {
        #expect(PluginLoader.directories(explicit: ["a", "b"], environment: ["CMDBUS_PLUGINS": "c"]) == ["a", "b"])
        #expect(PluginLoader.directories(explicit: [], environment: ["CMDBUS_PLUGINS": "c::d"]) == ["c", "d"])
        #expect(PluginLoader.directories(explicit: [], environment: [:]) == ["./plugins"])
    }

    @Test func aMissingDirectoryIsReported() {
        let bus = CommandBus()
        let catalog = PluginLoader(directories: ["/nonexistent/cmdbus-plugins"]).load(into: bus)
        #expect(catalog.skipped == [SkippedPluginFile(path: "/nonexistent/cmdbus-plugins", reason: "plugin directory does not exist")])
    }
}

/// Greets whoever the plugins declined.
private struct GreetsStrangers: DynamicCommandHandler {
    let commandName = "greet"
    func handle(payload: Data, context: CommandContext) async throws -> Data { json(#"{"greeting":"Hello, stranger!"}"#) }
}
