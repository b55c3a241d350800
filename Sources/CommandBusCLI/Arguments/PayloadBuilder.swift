import CommandBus
import CommandBusHost
import CommandBusSupport
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Builds a command's JSON payload from an optional JSON operand (text, `-` for standard input
/// or `@PATH` for a file: see ``PayloadOperand``) and `-p key=value` pairs.
///
/// `-p` values that parse as JSON (`3`, `true`, `[1,2]`, `"quoted"`) keep their type;
/// anything else is a string. Pairs are set on top of the JSON object, if one was given.
enum PayloadBuilder {
    static func build(command: String, operand: String?, pairs: [String], maxBytes: Int) throws(HostFailure) -> Data {
        // `-p key value` first: its value then stands where the JSON would, and is not the problem.
        var given: [Substring: Substring] = [:]
        for pair in pairs {
            if pair.hasPrefix("=") { throw .usage("-p takes key=value, got \(quoted(pair)), which has no key; name the field before the '='") }
            guard let equals = pair.firstIndex(of: "=") else {
                throw .usage("-p takes key=value, got \(quoted(pair)); write it as one argument: -p \(String(quoted(pair).dropFirst().dropLast()))=VALUE")
            }
            // The last would silently win; say so instead (a JSON operand's fields may be overridden, by design).
            let key = pair[..<equals], value = pair[pair.index(after: equals)...]
            if let earlier = given.updateValue(value, forKey: key) {
                throw .usage("-p sets \(quoted(String(key))) twice (\(quoted(String(earlier))), then \(quoted(String(value)))); give each field once, or a JSON array as its value")
            }
        }
        let source = PayloadOperand(operand)
        // A byte order mark (some editors save JSON with one) is not part of the text, as RFC 8259 allows.
        let text = try source?.text(command: command, maxBytes: maxBytes)
        let json = text.map { $0.hasPrefix("\u{FEFF}") ? String($0.dropFirst()) : $0 }
        // Refused here, saying where, rather than handed to a plugin to refuse (or, in C, to misread).
        if let json, let source, let problem = JSONValue.syntaxError(in: Array(json.utf8)) {
            guard case .argument = source else {
                if json.allSatisfy(\.isWhitespace) { throw malformed(command, "\(source.source) is empty; \(source == .standardInput ? "send one JSON value there" : "write one JSON value in the file"), such as {}") }
                throw malformed(command, "\(source.source) is not valid JSON: \(problem); \(source == .standardInput ? "send one JSON value there" : "fix the file")")
            }
            // `run cmd path=/etc/hosts`: a forgotten -p.
            if let equals = json.firstIndex(of: "="), equals != json.startIndex, !json.hasPrefix("{") {
                throw malformed(command, "is not valid JSON: \(quoted(json)) looks like a field; set fields with -p \(quoted(json))")
            }
            throw malformed(command, "is not valid JSON: \(problem); quote it whole for the shell, as '{\"name\": \"Ada\"}', give @FILE or - for standard input, or set fields with -p key=value")
        }
        guard !pairs.isEmpty else { return Data((json ?? "{}").utf8) }
        var object: [String: JSONValue] = [:]
        if let json {
            guard let parsed = JSONValue.parse(json) else { throw malformed(command, "is not valid JSON") }
            guard case .object(let fields) = parsed else { throw malformed(command, "must be a JSON object to combine with -p") }
            object = fields
        }
        for pair in pairs {
            // Each has a key and an '=', checked above.
            guard let equals = pair.firstIndex(of: "=") else { continue }
            let text = String(pair[pair.index(after: equals)...])
            object[String(pair[..<equals])] = JSONValue.parse(text) ?? .string(text)
        }
        return JSONValue.object(object).data
    }

    /// The `-p` fields whose value was read as a number, boolean, array, object or null rather
    /// than a string, with that value: a hint for when the command wanted a string.
    static func nonStringFields(_ pairs: [String]) -> [(key: String, value: String, kind: String)] {
        pairs.compactMap { pair in
            guard let equals = pair.firstIndex(of: "="), equals != pair.startIndex else { return nil }
            let text = String(pair[pair.index(after: equals)...])
            guard let value = JSONValue.parse(text), value.stringValue == nil else { return nil }
            return (String(pair[..<equals]), text, value.kindName)
        }
    }

    private static func malformed(_ command: String, _ problem: String) -> HostFailure {
        HostFailure(.decodingFailed, "payload for \(quoted(command)) \(problem)", command: command)
    }
}
