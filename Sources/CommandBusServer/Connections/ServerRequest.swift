import CommandBusSupport
import CommandBus
import CommandBusHost
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One request line of the server's protocol, its fields read and their types checked.
struct ServerRequest {
    /// The ops the server answers, in the order its messages list them.
    static let ops = ["send", "post", "can", "cancel", "status", "plugins", "forget", "subscribe"]

    let id: JSONValue?
    let op: String
    let command: String?
    let payload: JSONValue?
    let metadata: [String: String]?
    /// A W3C `traceparent`, kept in the command's metadata.
    let traceparent: String?
    let timeout: Double?
    let commandId: UUID?
    let correlationId: UUID?
    /// For `forget`: the plugin file to load again.
    let path: String?
    let cancelOnDisconnect: Bool?
    /// For `send`: stream the command tree's events before the response.
    let events: Bool?
    /// For `post`: acknowledge once the journal has the command (`.journaled`, the default) or
    /// as soon as the server has read it (`.received`).
    let acknowledge: Acknowledgement?

    /// When a `post` is acknowledged.
    enum Acknowledgement: String {
        /// Once the journal has the command's write-ahead (at once without a journal).
        case journaled
        /// As soon as the request is read: faster, but a server killed then may lose the command.
        case received
    }

    /// Why a line is not a request: the message for the client, and the request's `id` when
    /// the line was an object that had one, so a client with many requests in flight can tell
    /// which one was refused.
    struct Malformed: Error {
        let id: JSONValue?
        let message: String
    }

    /// The request on a line: a JSON object with a string `op` whose other fields, where present
    /// and not `null`, have their types; a field the protocol does not know is ignored.
    ///
    /// The fields are read in one pass over the object, not looked up one by one: on a busy
    /// server this runs on the request loop's one thread, for every request.
    init(line: [UInt8]) throws(Malformed) {
        guard let members = JSONValue.members(ofObject: line) else {
            let what = JSONValue.syntaxError(in: line).map { "request is not JSON (\($0))" } ?? "request is not a JSON object"
            throw Malformed(id: nil, message: what + #"; send one object per line, such as {"id": 1, "op": "status"}"#)
        }
        // The id is looked up again only for a refusal: a good request is read in one pass.
        func refusal(_ message: String) -> Malformed {
            Malformed(id: members.first { $0.key == "id" }?.value, message: message)
        }
        func wrong(_ key: String, _ expected: String, _ value: JSONValue) -> Malformed {
            refusal("request field \(quoted(key)) must be \(expected), not \(value.kindName); fix the field or leave it out")
        }
        var id: JSONValue?, op: String?, command: String?, payload: JSONValue?, metadata: [String: String]?
        var traceparent: String?, timeout: Double?, commandId: UUID?, correlationId: UUID?
        var cancelOnDisconnect: Bool?, events: Bool?, acknowledge: Acknowledgement?, path: String?
        for (key, value) in members where value != .null {
            switch key {
            case "id": id = value
            case "op": guard let text = value.stringValue else { throw wrong(key, "a string", value) }; op = text
            case "command":
                guard let text = value.stringValue else { throw wrong(key, "a string (the command's name)", value) }
                // No plugin can declare such a name (a longer one would be journaled and echoed whole).
                if let fault = commandNameFault(text) {
                    throw refusal("request field 'command' is not a command name: \(fault); the 'plugins' op lists the commands")
                }
                command = text
            case "payload": payload = value
            case "metadata":
                guard let object = value.objectValue else { throw wrong(key, "an object of strings", value) }
                if let (name, field) = object.first(where: { $0.value.stringValue == nil }) {
                    throw refusal("request field 'metadata' must hold strings, but \(quoted(name)) is \(field.kindName); quote the value")
                }
                metadata = object.compactMapValues(\.stringValue)
            case "traceparent": guard let text = value.stringValue else { throw wrong(key, "a string", value) }; traceparent = text
            case "timeout":
                guard case let seconds? = value.doubleValue else { throw wrong(key, "a number of seconds", value) }
                // Its milliseconds must fit an Int64: 1e300 once stopped the server. One of 0 or
                // less ran the command with no deadline at all.
                guard seconds > 0, seconds <= longestAcceptedSeconds else {
                    throw refusal("request field 'timeout' must be more than 0 and at most \(Int(longestAcceptedSeconds)) seconds; leave it out for none")
                }
                timeout = seconds
            case "commandId", "correlationId":
                guard let text = value.stringValue, let uuid = UUID(uuidString: text) else {
                    throw refusal("request field \(quoted(key)) must be a command id (the UUID a send or post answered with), not \(Self.described(value))")
                }
                if key == "commandId" { commandId = uuid } else { correlationId = uuid }
            case "path": guard let text = value.stringValue else { throw wrong(key, "a string (a plugin file's path)", value) }; path = text
            case "cancelOnDisconnect": guard case .bool(let flag) = value else { throw wrong(key, "true or false", value) }; cancelOnDisconnect = flag
            case "events": guard case .bool(let flag) = value else { throw wrong(key, "true or false", value) }; events = flag
            case "ack":
                guard let text = value.stringValue, let choice = Acknowledgement(rawValue: text) else {
                    throw refusal("request field 'ack' must be 'journaled' or 'received', not \(Self.described(value))")
                }
                acknowledge = choice
            default: continue
            }
        }
        guard let op else {
            throw refusal("request has no 'op'; give one of \(Self.ops.joined(separator: ", "))")
        }
        self.op = op
        self.id = id
        self.command = command
        self.payload = payload
        self.metadata = metadata
        self.traceparent = traceparent
        self.timeout = timeout
        self.commandId = commandId
        self.correlationId = correlationId
        self.path = path
        self.cancelOnDisconnect = cancelOnDisconnect
        self.events = events
        self.acknowledge = acknowledge
    }

    /// A wrong value for a message: a string quoted (its first 40 characters), anything else by kind.
    private static func described(_ value: JSONValue) -> String {
        guard let text = value.stringValue else { return value.kindName }
        return text.count > 40 ? quoted(text.prefix(40) + "…") : quoted(text)
    }
}
