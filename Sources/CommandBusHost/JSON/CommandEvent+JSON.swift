import CommandBus
import CommandBusSupport
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension AsyncStream<CommandEvent> {
    /// Hands each event of command `id`'s tree (its correlation) to `body`, in order, and returns
    /// once the command itself has ended. Subscribe before the command starts, so none is missed.
    package func follow(_ id: UUID, _ body: (CommandEvent) -> Void) async {
        for await event in self where event.correlationID == id {
            body(event)
            if event.commandID == id, case .stateChanged(_, let to) = event.kind, to.isTerminal { return }
        }
    }
}

extension CommandEvent {
    /// The event as the socket protocol and every `BusClient` carry it: `kind` (accepted, state,
    /// progress, emitted, log), the command's name, id, correlation id and parent id, and the kind's fields.
    package var json: JSONValue {
        let event = self
        var fields: [String: JSONValue] = [
            "commandId": .string(event.commandID.uuidString), "command": .string(event.envelope.commandName),
            "correlationId": .string(event.correlationID.uuidString),
        ]
        if let parent = event.envelope.parentID { fields["parentId"] = .string(parent.uuidString) }
        switch event.kind {
        case .accepted: fields["kind"] = .string("accepted")
        case .stateChanged(let from, let to):
            fields["kind"] = .string("state")
            fields["from"] = .string(from.rawValue)
            fields["to"] = .string(to.rawValue)
        case .progress(let completed, let total):
            fields["kind"] = .string("progress")
            fields["completed"] = .integer(Int64(completed))
            fields["total"] = .integer(Int64(total))
        case .emitted(let name, let payload):
            fields["kind"] = .string("emitted")
            fields["name"] = .string(name)
            fields["payload"] = JSONValue.parse(String(decoding: payload, as: UTF8.self)) ?? .null
        case .log(let level, let message):
            fields["kind"] = .string("log")
            fields["level"] = .string(level.rawValue)
            fields["message"] = .string(message)
        }
        return .object(fields)
    }
}
