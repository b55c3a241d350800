import CommandBusPlugin
import Foundation
import Glibc

// A plugin for the host's tests: commands that sleep, fail, emit and send, so the tests
// can drive cancellation, timeouts, errors and events across the C ABI.

struct Sleep: PluginCommand {
    typealias Result = Slept
    static let name = "fixture.sleep"
    var milliseconds: Int
    /// Ignore cancellation and deadlines: sleep the whole time regardless.
    var stubborn: Bool?
    /// With `stubborn`: end as soon as a file exists at this path, `milliseconds` then being the
    /// longest wait, so a test ends the command once it has seen what it waits for, at whatever
    /// pace a loaded machine runs.
    var untilFileExists: String?
    /// Take this long to say whether the handler takes the command (`canHandle`), as one that
    /// looks something up would.
    var decideAfterMilliseconds: Int?
}

/// Says the handler takes the command, after `milliseconds` if given (a decision that takes its time).
func takes(after milliseconds: Int?) -> Bool {
    if let milliseconds { usleep(UInt32(clamping: milliseconds * 1_000)) }
    return true
}

struct Slept: Codable, Sendable {
    var sawCancellation: Bool
}

struct SleepHandler: PluginHandler {
    func canHandle(_ command: Sleep) -> Bool { takes(after: command.decideAfterMilliseconds) }

    func handle(_ command: Sleep, context: PluginContext) async throws -> Slept {
        if command.stubborn == true {
            let end = ContinuousClock.now + .milliseconds(command.milliseconds)
            while ContinuousClock.now < end {
                if let path = command.untilFileExists, access(path, F_OK) == 0 { break }
                usleep(5_000)
            }
            return Slept(sawCancellation: false)
        }
        do {
            try await Task.sleep(for: .milliseconds(command.milliseconds))
            return Slept(sawCancellation: false)
        } catch {
            context.log(.info, "sleep cancelled")
            throw error
        }
    }
}

struct Fail: PluginCommand {
    typealias Result = Slept
    static let name = "fixture.fail"
    var message: String
    var retryable: Bool?
}

struct Transient: RetryablePluginError, CustomStringConvertible {
    var description: String
}

struct FailHandler: PluginHandler {
    func handle(_ command: Fail, context: PluginContext) async throws -> Slept {
        if command.retryable == true { throw Transient(description: command.message) }
        throw PluginError(.failed, command.message)
    }
}

/// Sends `fixture.sleep` as a subcommand and waits, so cancelling the parent must reach the child.
struct SleepVia: PluginCommand {
    typealias Result = Slept
    static let name = "fixture.sleep-via"
    var milliseconds: Int
    var stubborn: Bool?
}

struct SleepViaHandler: PluginHandler {
    func handle(_ command: SleepVia, context: PluginContext) async throws -> Slept {
        try context.emit("sending", ["milliseconds": command.milliseconds])
        return try await context.send(Sleep(milliseconds: command.milliseconds, stubborn: command.stubborn))
    }
}

/// The Greeter plugin's `greet`, which this plugin sends and does not handle: on the shared
/// bus it goes to a host that does.
struct Greet: PluginCommand {
    typealias Result = Greeting
    static let name = "greet"
    var name: String
}

struct Greeting: Codable, Sendable {
    var greeting: String
}

/// Sleeps, then sends `greet` and answers with its greeting: a subcommand sent at a moment a
/// test chooses (while the shared bus's database is down, say).
struct GreetLater: PluginCommand {
    typealias Result = Greeting
    static let name = "fixture.greet-later"
    var milliseconds: Int
    var name: String
}

struct GreetLaterHandler: PluginHandler {
    func handle(_ command: GreetLater, context: PluginContext) async throws -> Greeting {
        try await Task.sleep(for: .milliseconds(command.milliseconds))
        return try await context.send(Greet(name: command.name))
    }
}

/// Answers with the envelope the host gave this command, so tests can check ids cross the boundary.
struct WhoAmI: PluginCommand {
    typealias Result = PluginEnvelope
    static let name = "fixture.whoami"
}

struct WhoAmIHandler: PluginHandler {
    func handle(_ command: WhoAmI, context: PluginContext) async throws -> PluginEnvelope {
        guard let envelope = context.envelope() else { throw PluginError(.failed, "the host gave no envelope") }
        return envelope
    }
}

/// Appends `id attempt host` to a file, once per run, then sleeps: the shared-bus tests count
/// runs and see which host ran which attempt.
struct Append: PluginCommand {
    typealias Result = Appended
    static let name = "fixture.append"
    var file: String
    var milliseconds: Int?
    /// Take this long to say whether the handler takes the command, as `fixture.sleep`'s.
    var decideAfterMilliseconds: Int?
}

struct Appended: Codable, Sendable {
    var host: String
    var attempt: String
}

struct AppendHandler: PluginHandler {
    func canHandle(_ command: Append) -> Bool { takes(after: command.decideAfterMilliseconds) }

    func handle(_ command: Append, context: PluginContext) async throws -> Appended {
        guard let envelope = context.envelope() else { throw PluginError(.failed, "the host gave no envelope") }
        let attempt = envelope.metadata?["cmdbus.attempt"] ?? "1", host = envelope.metadata?["cmdbus.host"] ?? "local"
        let line = Array("\(envelope.id.uuidString) \(attempt) \(host)\n".utf8)
        let descriptor = open(command.file, O_WRONLY | O_APPEND | O_CREAT, 0o644)
        guard descriptor >= 0 else { throw PluginError(.failed, "cannot open \(command.file)") }
        _ = line.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        close(descriptor)
        if let milliseconds = command.milliseconds, milliseconds > 0 { try await Task.sleep(for: .milliseconds(milliseconds)) }
        return Appended(host: host, attempt: attempt)
    }
}

@_cdecl("cmdbus_plugin_v1")
public func cmdbusPluginV1() -> UnsafeRawPointer {
    Plugin(name: "fixture", version: "0.1.0", priority: 5, handlers: [
        SleepHandler(), FailHandler(), SleepViaHandler(), WhoAmIHandler(), AppendHandler(), GreetLaterHandler(),
    ]).export()
}
