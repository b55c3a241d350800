#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension CommandBus {
    /// Runs again every command a dead process left pending or running in the journal.
    ///
    /// Delivery is at least once: a command that was running when the process died runs again,
    /// under its original envelope, so its id (the idempotency key) is the same. Only root
    /// commands are run again; an unfinished subcommand is marked cancelled, since its parent's
    /// new run sends its own.
    /// - Returns: Tickets for the commands run again.
    @discardableResult
    public func recover() async throws(CommandBusError) -> [CommandTicket<Data>] {
        guard let journal = configuration.journal else { return [] }
        var tickets: [CommandTicket<Data>] = []
        let unfinished = try await journal.unfinished()
        let rerun = Set(unfinished.filter { $0.envelope.parentID == nil }.map(\.envelope.id))
        for record in unfinished {
            if record.envelope.parentID != nil {
                // Say what really happened: its tree runs again, or its tree had already ended.
                let message: String
                if rerun.contains(record.envelope.correlationID) {
                    message = "subcommand '\(record.envelope.commandName)' was superseded: its parent runs again after its process died"
                } else {
                    let root = try await journal.record(record.envelope.correlationID)
                    let ended = root.map { " (\($0.state.rawValue))" } ?? ""
                    message = "subcommand '\(record.envelope.commandName)' did not finish: its process died after its parent had ended\(ended)"
                }
                let error = CommandBusError(code: .cancelled, message: message)
                // An update counts the attempts of its own run: the dead one's, if it started.
                let attempts = record.state == .running ? 1 : 0
                try await journal.update(JournalUpdate(id: record.envelope.id, state: .cancelled, attempts: attempts, error: error), waitUntilDurable: false)
                continue
            }
            tickets.append(resubmit(record))
        }
        return tickets
    }

    /// Runs a journaled command again under its original envelope, journaled (a retry, an import).
    public func resubmit(_ record: JournalRecord, timeout: Duration? = nil) -> CommandTicket<Data> {
        CommandTicket(json: post(
            .json(record.payload), name: record.envelope.commandName, parent: nil,
            metadata: record.envelope.metadata, timeout: timeout, envelope: record.envelope
        ))
    }

    /// Runs a journaled command again under its original envelope without journaling it:
    /// replay into fresh state, for handlers whose state lives in the log.
    ///
    /// It runs in the caller's task (a replay goes in order, one command at a time), with the
    /// same routing, handler and lifecycle as any other command.
    /// - Returns: The JSON result.
    @discardableResult
    public func replay(_ record: JournalRecord) async throws(CommandBusError) -> Data {
        try await replayOutput(record).jsonData(commandName: record.envelope.commandName)
    }

    /// Runs a journaled command again, as ``replay(_:)`` does, for its effect on the handlers' state
    /// only: its result is dropped without being encoded, which a long replay would otherwise pay for.
    public func replayDiscardingResult(_ record: JournalRecord) async throws(CommandBusError) {
        _ = try await replayOutput(record)
    }

    private func replayOutput(_ record: JournalRecord) async throws(CommandBusError) -> CommandOutput {
        let context = try routedContext(
            .json(record.payload), name: record.envelope.commandName, parent: nil, metadata: record.envelope.metadata,
            timeout: nil, envelope: record.envelope, journaled: false
        )
        return try await context.run().get()
    }

    /// The command that undoes `record`, from the handler that would take it now, or `nil` if it has no inverse.
    /// - Throws: `noHandler` if no handler would take it; `decodingFailed` if its payload no longer decodes.
    public func inverse(of record: JournalRecord) throws(CommandBusError) -> (name: String, payload: Data)? {
        let name = record.envelope.commandName
        let (entry, prepared) = try route(.json(record.payload), name: name)
        return try entry.box.inverse(prepared, commandName: name)
    }
}
