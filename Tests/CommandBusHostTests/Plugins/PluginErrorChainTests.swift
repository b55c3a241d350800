@testable import CommandBusLoading
import Testing

/// A failure passed up a tree of plugin commands is named once a level, not once per level: two
/// plugins that send each other 100 levels deep made a message of 7 KB.
struct PluginErrorChainTests {
    static func prefix(_ command: String, _ plugin: String) -> String {
        "command '\(command)' failed in plugin '\(plugin)' (\(plugin).so): "
    }

    /// Wraps `cause` as `levels` plugin handlers, alternating ping and pong, would.
    static func chain(_ levels: Int, cause: String) -> String {
        (0..<levels).reduce(cause) { message, level in
            PluginErrors.wrapping(message, in: level % 2 == 0 ? prefix("ping", "ping") : prefix("pong", "pong"))
        }
    }

    @Test func aShortChainIsWhole() {
        #expect(Self.chain(1, cause: "boom") == Self.prefix("ping", "ping") + "boom")
        #expect(Self.chain(2, cause: "boom") == Self.prefix("pong", "pong") + Self.prefix("ping", "ping") + "boom")
    }

    @Test func aLongChainKeepsTwoOuterLevelsAndTheCauseAndCountsTheRest() {
        #expect(Self.chain(3, cause: "boom") == Self.prefix("ping", "ping") + Self.prefix("pong", "pong") + "… 1 more level …: boom")
        let long = Self.chain(100, cause: "subcommand 'pong' of 'ping' would be 101 levels below its root")
        #expect(long == Self.prefix("pong", "pong") + Self.prefix("ping", "ping") + "… 98 more levels …: subcommand 'pong' of 'ping' would be 101 levels below its root")
    }

    @Test func oneCommandThatSendsItselfIsNamedOnce() {
        let message = (0..<100).reduce("deep") { message, _ in PluginErrors.wrapping(message, in: Self.prefix("down", "recurse")) }
        #expect(message == Self.prefix("down", "recurse") + "deep")
    }

    @Test func aCauseThatMerelyMentionsAFailureIsKept() {
        let cause = "the file said: command 'x' failed in plugin 'y' (z): no"
        #expect(PluginErrors.wrapping(cause, in: Self.prefix("a", "b")) == Self.prefix("a", "b") + cause)
    }
}
