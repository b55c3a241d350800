import CommandBusSupport
import CommandBusHost
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Builds a command's JSON payload from an optional JSON argument and `-p key=value` pairs.
///
/// `-p` values that parse as JSON (`3`, `true`, `[1,2]`, `"quoted"`) keep their type;
/// anything else is a string. Pairs are set on top of the JSON object, if one was given.
enum PayloadBuilder {
    static func build(command: String, json: String?, pairs: [String]) throws(HostFailure) -> Data {
        guard !pairs.isEmpty else { return Data((json ?? "{}").utf8) }
        var object: [String: JSONValue] = [:]
        if let json {
            guard let parsed = JSONValue.parse(json) else { throw malformed(command, "is not valid JSON") }
            guard case .object(let fields) = parsed else { throw malformed(command, "must be a JSON object to combine with -p") }
            object = fields
        }
        for pair in pairs {
            guard let equals = pair.firstIndex(of: "="), equals != pair.startIndex else {
                throw .usage("-p takes key=value, got \(quoted(pair))")
            }
            let text = String(pair[pair.index(after: equals)...])
            object[String(pair[..<equals])] = JSONValue.parse(text) ?? .string(text)
        }
        return Data(JSONValue.object(object).text.utf8)
    }

    private static func malformed(_ command: String, _ problem: String) -> HostFailure {
        HostFailure(.decodingFailed, "payload for \(quoted(command)) \(problem)", command: command)
    }
}
