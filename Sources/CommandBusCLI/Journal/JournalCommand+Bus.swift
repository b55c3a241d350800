import CommandBus
import CommandBusHost
import CommandBusPostgres
import CommandBusSQLite
import CommandBusSupport
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `cmdbus journal … --bus`: the shared bus's commands are its journal.
extension JournalCommand {
    static let busVerbs: [String: Verb] = [
        "list": Verb(run: busList), "show": Verb(run: busShow), "retry": Verb(run: busRetry), "import": Verb(run: busImport),
        "replay": Verb(run: replay), "undo": Verb(run: undo), "prune": Verb(run: busPrune), "tree": Verb(run: tree),
    ]

    /// Why each verb a journal file has is not one of the bus's, and what to use instead:
    /// without it, `journal recover --bus` said the verb was unknown.
    static let notOnTheBus: [String: String] = [
        "backup": "back up the shared bus with PostgreSQL's own tools ('pg_dump --schema=cmdbus', or the database's base backups)",
        "discard": "the shared bus keeps its dead letters listed; 'cmdbus journal prune --older-than AGE --bus URL' removes them, with their trees, once they are that old",
        "recover": "the shared bus has nothing to recover by hand: the commands of a host that dies go back to the queue when its lease runs out, and a live host runs them ('cmdbus bus status' shows the hosts)",
    ]

    static func busJournal(_ arguments: ArgumentSpec.Parsed) throws(HostFailure) -> BusJournal {
        guard let url = try ConnectionOptions(arguments).bus else { throw .usage("the bus needs --bus URL or $CMDBUS_BUS") }
        do { return try BusJournal(url: url) } catch { throw PostgresBusClient.failure(error) }
    }

    private static func busList(_ arguments: ArgumentSpec.Parsed, _ operands: [String], _ console: Console) async throws(HostFailure) {
        guard operands.isEmpty else { throw .usage("'cmdbus journal list' takes no operands") }
        let journal = try busJournal(arguments)
        try await printList(try listQuery(arguments), arguments, console) { query throws(HostFailure) in
            do throws(PGError) { return try journal.rows(query) } catch { throw PostgresBusClient.failure(error) }
        }
    }

    private static func busShow(_ arguments: ArgumentSpec.Parsed, _ operands: [String], _ console: Console) async throws(HostFailure) {
        let journal = try busJournal(arguments)
        let record = try busFind(operands, in: journal, verb: "show")
        // The journal entry's fields, and under "bus" what the shared bus keeps besides.
        guard case .object(var fields) = record.json, let details = try? journal.queueDetails(record.envelope.id) else { return console.out(record.json.text) }
        fields["bus"] = details
        console.out(JSONValue.object(fields).text)
    }

    private static func busRetry(_ arguments: ArgumentSpec.Parsed, _ operands: [String], _ console: Console) async throws(HostFailure) {
        let journal = try busJournal(arguments)
        let record = try busFind(operands, in: journal, verb: "retry")
        guard record.state.isDeadLetter else {
            throw HostFailure(.entryNotApplicable, "entry \(record.envelope.id) ('\(record.envelope.commandName)') is \(record.state.rawValue); only failed, cancelled or timed-out entries are retried", command: record.envelope.commandName)
        }
        let row: BusCommandRow
        do { row = try await journal.retry(record.envelope.id) } catch { throw PostgresBusClient.failure(error) }
        do {
            console.out(String(decoding: try row.outcome(), as: UTF8.self))
        } catch {
            throw HostFailure.bus(error, command: row.name)
        }
    }

    private static func busImport(_ arguments: ArgumentSpec.Parsed, _ operands: [String], _ console: Console) async throws(HostFailure) {
        guard operands.count == 1 else { throw .usage("'cmdbus journal import' takes one journal file") }
        let other: SQLiteJournal
        do { other = try SQLiteJournal(path: operands[0], durability: .synced, create: false, readOnly: true) } catch { throw .journal(error) }
        let journal = try busJournal(arguments)
        // A thousand entries at a time, so a journal of any size imports in bounded memory.
        var counts = BusImportCounts()
        var cursor: Int64?
        while true {
            let page: [JournalRecord]
            do { page = try await other.records(JournalQuery(afterSequence: cursor, limit: 1_000)) } catch { throw .journal(error) }
            guard let last = page.last else { break }
            do { counts = counts + (try journal.importHistory(page)) } catch { throw PostgresBusClient.failure(error) }
            cursor = last.sequence
        }
        if counts.unfinished > 0 {
            console.err("""
                cmdbus: warning: \(counts.unfinished) unfinished \(counts.unfinished == 1 ? "entry was" : "entries were") left out \
                (a process died while they ran): finish them with 'cmdbus journal recover --journal \(operands[0]) --plugins DIR' \
                (or drop them with 'journal discard ID...'), then import again
                """)
        }
        if counts.excluded > 0 {
            console.err("""
                cmdbus: note: \(counts.excluded) \(counts.excluded == 1 ? "entry" : "entries") taken out of replay by \
                'journal undo --rebuild' left out: the bus has no place for them
                """)
        }
        if arguments.has("json") {
            console.out(JSONValue.object([
                "new": .integer(Int64(counts.added)), "present": .integer(Int64(counts.present)), "failed": .integer(0),
                "unfinished": .integer(Int64(counts.unfinished)), "excluded": .integer(Int64(counts.excluded)),
            ]).text)
        } else {
            let leftOut = [(counts.unfinished, "unfinished"), (counts.excluded, "out of replay")].filter { $0.0 > 0 }
                .map { ", \($0.0) \($0.1) left out" }.joined()
            console.out("imported \(counts.added) new, \(counts.present) already present, 0 failed\(leftOut) (as history: nothing ran again)")
        }
    }

    private static func busFind(_ operands: [String], in journal: BusJournal, verb: String) throws(HostFailure) -> JournalRecord {
        guard operands.count == 1 else { throw .usage("'cmdbus journal \(verb)' takes one entry id") }
        guard let id = UUID(uuidString: operands[0]) else { throw .usage("\(quoted(operands[0])) is not an entry id (a UUID)") }
        let record: JournalRecord?
        do { record = try journal.row(id) } catch { throw PostgresBusClient.failure(error) }
        guard let record else { throw HostFailure(.entryNotFound, "the bus at \(journal.location) has no entry \(id)") }
        return record
    }
}
