import CommandBusSupport
import CommandBusHost
import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `journal undo`: an entry's inverse sent, or the entry dropped from replay.
extension JournalCommand {
    /// `journal undo [ID] [--rebuild]`: sends the inverse of an entry (the latest by default)
    /// and links the two, on the bus with `--bus`; or drops it from the log's replay.
    static func undo(_ arguments: ArgumentSpec.Parsed, _ operands: [String], _ console: Console) async throws(HostFailure) {
        let onTheBus = try ConnectionOptions(arguments).bus != nil
        // On the bus, the local plugins only name the inverse; the bus runs it.
        var journalOptions = try JournalOptions(arguments)
        if onTheBus { journalOptions.enabled = false }
        let session = try await HostSession.start(
            plugins: try PluginOptions(arguments), journal: journalOptions, console: console, reportSkipped: true
        )
        let journal: any Journal, location: String
        if onTheBus {
            (journal, location) = try readableJournal(arguments)
        } else {
            guard let file = session.journal else { throw .usage("'cmdbus journal undo' needs a journal; drop --no-journal") }
            (journal, location) = (file, "journal \(file.path)")
        }
        let record: JournalRecord
        if operands.isEmpty {
            record = try await latestToUndo(in: journal, location: location)
        } else {
            record = try await find(operands, in: journal, location: location, verb: "undo")
        }
        let name = record.envelope.commandName, id = record.envelope.id
        if let undoneBy = record.undoneBy {
            throw HostFailure(.entryNotApplicable, "entry \(id) ('\(name)') was already undone by \(undoneBy)", command: name)
        }
        guard record.state == .succeeded else {
            throw HostFailure(.entryNotApplicable, "entry \(id) ('\(name)') is \(record.state.rawValue); only succeeded entries are undone", command: name)
        }
        if arguments.has("rebuild") {
            do { try await journal.setExcluded(id, true) } catch { throw .journal(error) }
            console.out("removed entry \(id) ('\(name)') from the log's replay; state is rebuilt without it from the next start")
            return
        }
        let inverse: (name: String, payload: Data)?
        do { inverse = try session.bus.inverse(of: record) } catch { throw session.failure(error, command: name) }
        guard let inverse else {
            throw HostFailure(
                .entryNotApplicable, "entry \(id) ('\(name)') cannot be undone: the command declares no inverse (use --rebuild to drop it from the log's replay)",
                command: name
            )
        }
        if onTheBus, let url = try ConnectionOptions(arguments).bus {
            let client = try BusClientFactory.sharedBus(url, console: console)
            let (undoID, result) = try await client.sendReturningID(
                CommandRequest(name: inverse.name, payload: inverse.payload, metadata: ["cmdbus.undo-of": id.uuidString])
            )
            await client.close()
            do { try await journal.linkUndo(undoID, of: id) } catch { throw .journal(error) }
            console.err("cmdbus: undid \(id) ('\(name)') with \(undoID) ('\(inverse.name)') on the bus")
            console.out(String(decoding: result, as: UTF8.self))
            return
        }
        let ticket = session.bus.post(name: inverse.name, payload: inverse.payload, metadata: ["cmdbus.undo-of": id.uuidString])
        do {
            let result = try await ticket.result
            try await journal.linkUndo(ticket.id, of: id)
            await session.close()
            console.err("cmdbus: undid \(id) ('\(name)') with \(ticket.id) ('\(inverse.name)')")
            console.out(String(decoding: result, as: UTF8.self))
        } catch {
            throw session.failure(error, command: inverse.name)
        }
    }

    /// The newest succeeded piece of work that is not undone, not an undo and not taken out of
    /// replay: a root, since a subcommand is undone with its parent. Read newest first, a page at
    /// a time, so the newest is found without reading the journal whole.
    private static func latestToUndo(in journal: any Journal, location: String) async throws(HostFailure) -> JournalRecord {
        var through: Int64?
        while true {
            let page: [JournalRecord]
            do {
                page = try await journal.records(JournalQuery(states: [.succeeded], throughSequence: through, limit: 1_000, newestFirst: true))
            } catch {
                throw .journal(error)
            }
            if let latest = page.first(where: { $0.envelope.parentID == nil && $0.undoneBy == nil && $0.undoOf == nil && !$0.excluded }) {
                return latest
            }
            guard page.count == 1_000, let oldest = page.last else {
                throw HostFailure(.entryNotApplicable, "\(location) has no succeeded command left to undo")
            }
            through = oldest.sequence - 1
        }
    }
}
