import Foundation

/// Builds a command's JSON payload from an optional JSON argument and `-p key=value` pairs.
///
/// `-p` values that parse as JSON (`3`, `true`, `[1,2]`, `"quoted"`) keep their type;
/// anything else is a string. Pairs are set on top of the JSON object, if one was given.
enum PayloadBuilder {
    static func build(command: String, json: String?, pairs: [String]) throws(CLIFailure) -> Data {
        guard !pairs.isEmpty else { return Data((json ?? "{}").utf8) }
        var object: [String: Any] = [:]
        if let json {
            guard let parsed = try? JSONSerialization.jsonObject(with: Data(json.utf8), options: [.fragmentsAllowed]) else {
                throw malformed(command, "is not valid JSON")
            }
            guard let dictionary = parsed as? [String: Any] else {
                throw malformed(command, "must be a JSON object to combine with -p")
            }
            object = dictionary
        }
        for pair in pairs {
            guard let equals = pair.firstIndex(of: "="), equals != pair.startIndex else {
                throw .usage("-p takes key=value, got '\(pair)'")
            }
            let key = String(pair[..<equals])
            let text = String(pair[pair.index(after: equals)...])
            object[key] = (try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])) ?? text
        }
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else {
            throw malformed(command, "cannot be encoded as JSON")
        }
        return data
    }

    private static func malformed(_ command: String, _ problem: String) -> CLIFailure {
        .init(message: "payload for '\(command)' \(problem)", exitCode: .malformedPayload, code: "decodingFailed", command: command, plugin: nil)
    }
}
