import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The writes the journal makes.
package enum JournalWrite: Sendable {
    case accept(AcceptedCommand)
    case update(JournalUpdate)
    case linkUndo(undo: UUID, original: UUID)
    case exclude(UUID, Bool)
    case markFailed(UUID, code: String, message: String)
    case discard(UUID)
}

/// A command's write-ahead with every value its row binds worked out by the caller, so the
/// journal's one writing thread, which all commands share, only binds and steps. A class: a
/// queued write is copied as one reference.
package final class AcceptedCommand: Sendable {
    let id: UUID
    let idText: String
    let name: String
    let parentText: String?
    let correlationText: String
    let createdAt: Double
    let metadataText: String?
    let payload: Data

    init(_ envelope: CommandEnvelope, payload: Data) {
        id = envelope.id
        idText = CommandID.text(envelope.id)
        name = envelope.commandName
        parentText = envelope.parentID.map(CommandID.text)
        // A root command is its own tree: one text serves both columns.
        correlationText = envelope.correlationID == envelope.id ? idText : CommandID.text(envelope.correlationID)
        createdAt = envelope.createdAt.timeIntervalSince1970
        metadataText = envelope.metadata.isEmpty ? nil : JSONValue.object(envelope.metadata.mapValues(JSONValue.string)).text
        self.payload = payload
    }
}

/// One queued write and whoever waits for it to be durable.
package struct PendingWrite: @unchecked Sendable {
    /// `nil`: a flush, or a `running` write an ending took in (``startedAt``).
    package var operation: JournalWrite?
    package let completion: UnsafeContinuation<Result<Void, CommandBusError>, Never>?
    /// For an ending: when its command started running, if the ending took in the `running`
    /// write still queued before it, so one statement records both.
    package var startedAt: Date?

    package init(operation: JournalWrite?, completion: UnsafeContinuation<Result<Void, CommandBusError>, Never>?) {
        self.operation = operation
        self.completion = completion
    }
}

/// The queue of writes waiting for a commit, in order.
struct WriteQueue {
    private(set) var writes: [PendingWrite] = []
    /// Where each `running` write nobody waits for sits in ``writes``, until its ending takes it in.
    private var runningWrites: [UUID: Int] = [:]

    var isEmpty: Bool { writes.isEmpty }

    /// Appends `write`. An ending takes in its command's `running` write if that is still queued:
    /// the `running` write is emptied, and the ending records when the command started. The
    /// commit then writes one statement for both, and the ending waits behind no commit of its own.
    mutating func append(_ write: PendingWrite) {
        var write = write
        if case .update(let update)? = write.operation {
            if update.state == .running, write.completion == nil {
                runningWrites[update.id] = writes.count
            } else if update.state.isTerminal, !runningWrites.isEmpty, let index = runningWrites.removeValue(forKey: update.id) {
                if case .update(let running)? = writes[index].operation { write.startedAt = running.at }
                writes[index].operation = nil
            }
        }
        writes.append(write)
    }

    /// Everything queued, in order; the queue is left empty.
    mutating func takeAll() -> [PendingWrite] {
        defer {
            writes = []
            runningWrites.removeAll(keepingCapacity: true)
        }
        return writes
    }
}
