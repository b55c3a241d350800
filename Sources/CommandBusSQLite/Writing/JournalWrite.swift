import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The writes the journal makes.
///
/// An update is `indirect`: a queued write is copied as it is queued, taken and applied, and a
/// `JournalUpdate` held inline (a result and two error strings) cost each copy a retain per
/// field through their value witnesses, about 1,800 instructions a journaled post.
package enum JournalWrite: Sendable {
    case accept(AcceptedCommand)
    indirect case update(JournalUpdate)
    case linkUndo(undo: UUID, original: UUID)
    case exclude(UUID, Bool)
    case markFailed(UUID, code: String, message: String)
    case discard(UUID)
}

/// A command's write-ahead with every value its row binds worked out by the caller, so the
/// journal's one writing thread, which all commands share, only binds and steps. A class: a
/// queued write is copied as one reference.
///
/// The text and blob values sit end to end in one buffer, which the writing thread binds without
/// SQLite copying them (``SQLiteStatement/bindBorrowed(_:text:)``): a copy per value was an
/// allocation, a copy and a free on that thread. The buffer is the object's own, written only
/// while it is made and freed with it, so its address holds while the object lives: a
/// statement that inserts many commands binds them all before it runs.
package final class AcceptedCommand: @unchecked Sendable {
    let id: UUID
    let createdAt: Double
    /// The id's text, the name, the parent's id, the correlation id, the metadata's JSON and the
    /// payload, end to end; ``Part`` says where each is. Valid while this object lives.
    let values: UnsafeRawBufferPointer
    let idText: Part
    let name: Part
    let parentText: Part?
    let correlationText: Part
    let metadataText: Part?
    let payload: Part

    /// Where a value sits in ``values``.
    struct Part: Sendable {
        let start: Int
        let count: Int

        /// The value's bytes, in `values`' bytes.
        func bytes(in values: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
            UnsafeRawBufferPointer(rebasing: values[start..<(start + count)])
        }
    }

    package init(_ envelope: CommandEnvelope, payload: Data) {
        id = envelope.id
        createdAt = envelope.createdAt.timeIntervalSince1970
        var name = envelope.commandName
        var metadata = envelope.metadata.isEmpty ? nil : JSONValue.object(envelope.metadata.mapValues(JSONValue.string)).text
        // Where each part goes: the id, the name, the parent's id, the correlation id (a root
        // command is its own tree, and its id's text serves both columns), the metadata, the payload.
        let idLength = CommandID.textLength
        idText = Part(start: 0, count: idLength)
        self.name = Part(start: idLength, count: name.utf8.count)
        parentText = envelope.parentID == nil ? nil : Part(start: self.name.start + self.name.count, count: idLength)
        let afterParent = self.name.start + self.name.count + (parentText?.count ?? 0)
        let ownTree = envelope.correlationID == envelope.id
        correlationText = ownTree ? idText : Part(start: afterParent, count: idLength)
        let afterCorrelation = afterParent + (ownTree ? 0 : idLength)
        metadataText = metadata.map { Part(start: afterCorrelation, count: $0.utf8.count) }
        self.payload = Part(start: afterCorrelation + (metadataText?.count ?? 0), count: payload.count)
        let parts = (name: self.name, parent: parentText, correlation: correlationText, metadata: metadataText, payload: self.payload)
        // Each part is written straight into the buffer, which is allocated once at its full size.
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: parts.payload.start + parts.payload.count, alignment: 1)
        let base = buffer.baseAddress!.assumingMemoryBound(to: UInt8.self)
        CommandID.writeText(envelope.id, to: base)
        Self.copy(&name, to: base + parts.name.start)
        if let parentID = envelope.parentID, let parent = parts.parent { CommandID.writeText(parentID, to: base + parent.start) }
        if !ownTree { CommandID.writeText(envelope.correlationID, to: base + parts.correlation.start) }
        if let part = parts.metadata, metadata != nil { Self.copy(&metadata!, to: base + part.start) }
        payload.withUnsafeBytes { bytes in
            guard let source = bytes.baseAddress else { return }
            UnsafeMutableRawPointer(base + parts.payload.start).copyMemory(from: source, byteCount: bytes.count)
        }
        values = UnsafeRawBufferPointer(buffer)
    }

    /// A command read back from the journal's log (``JournalWriteCoding``): `values` is copied,
    /// and each part must lie within it.
    init(
        id: UUID, createdAt: Double, values: [UInt8],
        idText: Part, name: Part, parentText: Part?, correlationText: Part, metadataText: Part?, payload: Part
    ) {
        self.id = id
        self.createdAt = createdAt
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: values.count, alignment: 1)
        buffer.copyBytes(from: values)
        self.values = UnsafeRawBufferPointer(buffer)
        self.idText = idText
        self.name = name
        self.parentText = parentText
        self.correlationText = correlationText
        self.metadataText = metadataText
        self.payload = payload
    }

    deinit { values.deallocate() }

    /// The id of the command's tree's root: its own, for a root.
    var correlationID: UUID {
        guard correlationText.start != idText.start else { return id }
        return CommandID.parse(String(decoding: correlationText.bytes(in: values), as: UTF8.self)) ?? id
    }

    /// Copies `text`'s UTF-8 bytes to `destination`.
    private static func copy(_ text: inout String, to destination: UnsafeMutablePointer<UInt8>) {
        text.withUTF8 { bytes in
            guard let source = bytes.baseAddress else { return }
            destination.initialize(from: source, count: bytes.count)
        }
    }
}

/// One queued write and whoever waits for it to be durable.
package struct PendingWrite: @unchecked Sendable {
    /// `nil`: a flush, or a `running` write an ending took in (``startedAt``).
    package var operation: JournalWrite?
    package let completion: UnsafeContinuation<Result<Void, CommandBusError>, Never>?
    /// Called on the journal's delivery queue, in commit order, once the write is durable (or
    /// failed): for a caller that does not wait (see ``Journal/update(_:whenDurable:)``).
    package var callback: (@Sendable (Result<Void, CommandBusError>) -> Void)?
    /// Somebody is told when it is durable.
    package var isWaited: Bool { completion != nil || callback != nil }
    /// For an ending: when its command started running, if the ending took in the `running`
    /// write still queued before it, so one statement records both.
    package var startedAt: Date?

    package init(
        operation: JournalWrite?, completion: UnsafeContinuation<Result<Void, CommandBusError>, Never>?,
        callback: (@Sendable (Result<Void, CommandBusError>) -> Void)? = nil
    ) {
        self.operation = operation
        self.completion = completion
        self.callback = callback
    }
}

/// The queue of writes waiting for a commit, in order.
struct WriteQueue {
    private(set) var writes: [PendingWrite] = []
    /// Where each `running` write nobody waits for sits in ``writes``, until its ending takes it in.
    private var runningWrites: [CommandKey: Int] = [:]

    var isEmpty: Bool { writes.isEmpty }

    /// Appends `write`. An ending takes in its command's `running` write if that is still queued:
    /// the `running` write is emptied, and the ending records when the command started. The
    /// commit then writes one statement for both, and the ending waits behind no commit of its own.
    mutating func append(_ write: consuming PendingWrite) {
        if case .update(let update)? = write.operation {
            if update.state == .running, !write.isWaited {
                runningWrites[CommandKey(update.id)] = writes.count
            } else if update.state.isTerminal, !runningWrites.isEmpty, let index = runningWrites.removeValue(forKey: CommandKey(update.id)) {
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
