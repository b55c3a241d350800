import CommandBusSupport
import CCommandBusABI
import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The bus errors for a plugin's failures, naming the command, the plugin and its file.
package enum PluginErrors {
    /// The error for a call that ended with ABI `status` (or, isolated, with its worker dead).
    package static func error(plugin: LoadedPlugin, command: String, status: Int32, message: String) -> CommandBusError {
        let origin = "plugin '\(plugin.name)' (\(FileSystem.lastComponent(plugin.path)))"
        switch status {
        case IsolatedPlugin.crashedStatus, IsolatedPlugin.stoppedForAnotherStatus:
            let text = "command '\(command)' failed: \(origin): \(message)"
            return CommandBusError(
                code: .handlerFailed, message: text, cause: PluginCrash(message: text), isRetryable: status == IsolatedPlugin.stoppedForAnotherStatus
            )
        case Int32(CMDBUS_DECODING_FAILED.rawValue):
            return CommandBusError(code: .decodingFailed, message: "payload for '\(command)' does not decode in \(origin): \(message)")
        case Int32(CMDBUS_CANCELLED.rawValue):
            return .cancelled(command)
        default:
            let retryable = status == Int32(CMDBUS_FAILED_RETRYABLE.rawValue)
            let prefix = "command '\(command)' failed in \(origin): "
            return CommandBusError(code: .handlerFailed, message: wrapping(message, in: prefix), isRetryable: retryable)
        }
    }

    /// `body`, the result a plugin answered a command with, checked: a result crosses the ABI as
    /// JSON, and one that is not (empty, text, bytes that are not UTF-8) fails the command, naming
    /// the plugin, where it reached the caller as text (`cmdbus run` printed it as the result,
    /// the server's answer carried it as a string, and bytes that were not UTF-8 as U+FFFD).
    package static func checkedResult(_ body: Data, plugin: LoadedPlugin, command: String) throws(CommandBusError) -> Data {
        guard let problem = body.isEmpty ? "it is empty" : JSONValue.syntaxError(in: body).map({ "it is not JSON (\($0))" }) else { return body }
        throw error(
            plugin: plugin, command: command, status: Int32(CMDBUS_FAILED.rawValue),
            message: "its result was refused: \(problem); a handler answers JSON ({} where it has nothing to say), so the plugin needs fixing"
        )
    }

    /// `message` under `prefix`, where a failure passed up a tree is named once a level: a
    /// handler failing with its own subcommand's failure (the same command, as one that sends
    /// itself does) is named once, and a longer chain keeps its two outer levels and the cause,
    /// counting the levels between (100 levels of two plugins sending each other made about 6 KB).
    static func wrapping(_ message: String, in prefix: String) -> String {
        guard !message.hasPrefix(prefix) else { return message }
        var layers: [Substring] = [], elided = 0
        var rest = Substring(message)
        while true {
            if let (count, after) = elision(at: rest) {
                elided += count
                rest = after
            } else if let end = failurePrefixEnd(in: rest) {
                layers.append(rest[..<end])
                rest = rest[end...]
            } else {
                break
            }
        }
        let hidden = layers.count - 1 + elided
        guard let outer = layers.first, hidden > 0 else { return prefix + message }
        return prefix + outer + "… \(hidden) more \(hidden == 1 ? "level" : "levels") …: " + rest
    }

    /// Where a leading "command 'C' failed in plugin 'P' (F): " of `text` ends, if it has one.
    private static func failurePrefixEnd(in text: Substring) -> Substring.Index? {
        guard text.hasPrefix("command '"), let named = text.firstRange(of: "' failed in plugin '"),
              let end = text[named.upperBound...].firstRange(of: "): ") else { return nil }
        // The prefix is a command name and a file name: no sentence of a cause comes before it.
        guard !text[..<named.lowerBound].contains(": ") else { return nil }
        return end.upperBound
    }

    /// A leading "… N more levels …: " of `text`: N and what follows it.
    private static func elision(at text: Substring) -> (Int, Substring)? {
        guard text.hasPrefix("… "), let end = text.firstRange(of: " …: ") else { return nil }
        let words = text[text.index(after: text.startIndex)..<end.lowerBound].split(separator: " ")
        guard words.count == 3, words[1] == "more", let count = Int(words[0]) else { return nil }
        return (count, text[end.upperBound...])
    }
}

/// The cause of a `handlerFailed` error whose plugin's process died (an isolated worker that
/// crashed, exited or was killed at a deadline): the host reports it as `pluginCrashed`.
package struct PluginCrash: Error, Sendable, CustomStringConvertible {
    /// What happened, naming the command, the plugin and its file.
    package let message: String
    package var description: String { message }
}
