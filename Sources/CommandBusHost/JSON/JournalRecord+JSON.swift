import CommandBusSupport
import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension JournalRecord {
    /// The entry as JSON (`journal show`, the dashboard's API), with its payload and result inline.
    package var json: JSONValue {
        let record = self
        func inline(_ data: Data?) -> JSONValue {
            guard let data else { return .null }
            let text = String(decoding: data, as: UTF8.self)
            return JSONValue.parse(text) ?? .string(text)
        }
        var fields: [String: JSONValue] = [
            "sequence": .integer(record.sequence), "id": .string(record.envelope.id.uuidString),
            "command": .string(record.envelope.commandName), "correlationId": .string(record.envelope.correlationID.uuidString),
            "createdAt": .string(record.envelope.createdAt.timestamp), "state": .string(record.state.rawValue),
            "attempts": .integer(Int64(record.attempts)), "payload": inline(record.payload), "result": inline(record.result),
            "updatedAt": .string(record.updatedAt.timestamp), "excluded": .bool(record.excluded),
            "metadata": .object(record.envelope.metadata.mapValues(JSONValue.string)),
        ]
        fields["parentId"] = .optional(record.envelope.parentID?.uuidString)
        fields["undoOf"] = .optional(record.undoOf?.uuidString)
        fields["undoneBy"] = .optional(record.undoneBy?.uuidString)
        fields["startedAt"] = .optional(record.startedAt?.timestamp)
        fields["finishedAt"] = .optional(record.finishedAt?.timestamp)
        fields["discardedAt"] = .optional(record.discardedAt?.timestamp)
        fields["error"] = record.errorCode.map { .object(["code": .string($0), "message": .optional(record.errorMessage)]) } ?? .null
        return .object(fields)
    }
}
