import CommandBusSupport
import CommandBusSQLite
import CommandBusHost
import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `journal list`, `show` and `tree`, and finding the entry an operand names.
extension JournalCommand {
    /// `journal list`: the entries the options select, oldest first.
    static func list(_ arguments: ArgumentSpec.Parsed, _ operands: [String], _ console: Console) async throws(HostFailure) {
        guard operands.isEmpty else { throw .usage("'cmdbus journal list' takes no operands") }
        let journal = try existingJournal(arguments)
        try await printList(try listQuery(arguments), arguments, console) { query throws(HostFailure) in
            do throws(CommandBusError) { return try await journal.records(query) } catch { throw .journal(error) }
        }
    }

    /// `--state` and `--command` as a query.
    static func listQuery(_ arguments: ArgumentSpec.Parsed) throws(HostFailure) -> JournalQuery {
        var states: Set<CommandState> = []
        // Repeated, or as one list (`--state pending,running`, as the dashboard's filter writes it).
        for name in arguments.all("state").flatMap({ $0.split(separator: ",", omittingEmptySubsequences: false).map(String.init) }) {
            guard let state = CommandState(rawValue: name) else {
                throw .usage("--state takes one of \(CommandState.allCases.map(\.rawValue).joined(separator: ", ")), got \(quoted(name))")
            }
            states.insert(state)
        }
        var query = JournalQuery(states: states, commandName: arguments.value("command"))
        if let since = arguments.value("since") { query.createdSince = try listedSince(since) }
        return query
    }

    /// `list --since`: an age with its unit (`1h`: created in the last hour) or a time, as
    /// `replay --since` reads one (ISO 8601, or seconds since 1970).
    static func listedSince(_ text: String, now: Date = .now) throws(HostFailure) -> Date {
        if text.last?.isLetter == true, let age = ArgumentSpec.Parsed.seconds(in: text) { return now.addingTimeInterval(-age) }
        if let time = ReplayBound(time: text)?.start { return time }
        throw .usage("--since takes an age with its unit (90s, 30m, 1h, 7d) or a time (ISO 8601, or seconds since 1970), got \(quoted(text))"
            + ReplayBound.fieldsWord(text))
    }

    /// How many entries `journal list` reads at a time.
    static let listPageSize = 1_000

    /// Prints the entries `query` selects, oldest first, as lines or `--json`, reading them with
    /// `read`: with `--limit N` the newest N in one read; without, a page at a time, so a
    /// journal of millions of entries is never held whole, and a reader that stops (`| head`)
    /// or a stdout that fails stops the reading.
    static func printList(
        _ query: JournalQuery, _ arguments: ArgumentSpec.Parsed, _ console: Console,
        read: (JournalQuery) async throws(HostFailure) -> [JournalRecord]
    ) async throws(HostFailure) {
        let json = arguments.has("json")
        var printed = 0
        func print(_ records: some Sequence<JournalRecord>) {
            var bytes: [UInt8] = []
            for record in records {
                if json {
                    bytes.append(printed == 0 ? UInt8(ascii: "[") : UInt8(ascii: ","))
                    record.json.write(into: &bytes)
                } else {
                    bytes += listLine(record).utf8
                    bytes.append(UInt8(ascii: "\n"))
                }
                printed += 1
            }
            if !bytes.isEmpty { console.out(bytes: bytes) }
        }
        if let limit = try arguments.positiveInteger("limit") {
            var newest = query
            newest.limit = limit
            newest.newestFirst = true
            print(try await read(newest).reversed())
        } else {
            var page = query
            page.limit = listPageSize
            while true {
                let records = try await read(page)
                print(records)
                guard records.count == listPageSize, console.resultWriteFailure == nil, !console.readerWentAway, let last = records.last else { break }
                page.afterSequence = last.sequence
            }
        }
        if json { console.out(printed == 0 ? "[]" : "]") }
    }

    /// An entry's line in `journal list`: number, id, state, name, attempts, and why it failed.
    private static func listLine(_ record: JournalRecord) -> String {
        var line = "\(record.sequence)  \(record.envelope.id)  \(record.state.rawValue)  \(record.envelope.commandName)  attempts \(record.attempts)"
        if let message = record.errorMessage { line += "  \(message)" }
        if let undone = record.undoneBy { line += "  (undone by \(undone))" }
        return line
    }

    /// `journal show ID`: one entry whole, as JSON.
    static func show(_ arguments: ArgumentSpec.Parsed, _ operands: [String], _ console: Console) async throws(HostFailure) {
        let journal = try existingJournal(arguments)
        let record = try await find(operands, in: journal, verb: "show")
        console.out(record.json.text)
    }

    /// `journal tree ID`: an entry and its subcommands, as text, Mermaid or DOT.
    static func tree(_ arguments: ArgumentSpec.Parsed, _ operands: [String], _ console: Console) async throws(HostFailure) {
        let format = arguments.choice("format", or: CommandTree.Format.text)
        let (journal, location) = try readableJournal(arguments)
        let record = try await find(operands, in: journal, location: location, verb: "tree")
        let family: [JournalRecord]
        do { family = try await journal.records(JournalQuery(correlationID: record.envelope.correlationID)) } catch { throw .journal(error) }
        guard let tree = CommandTree(root: record.envelope.id, records: family) else {
            throw HostFailure(.entryNotFound, "\(location) has no tree for entry \(record.envelope.id)")
        }
        console.out(tree.rendered(format))
    }

    /// The entry named by the one operand.
    static func find(_ operands: [String], in journal: SQLiteJournal, verb: String) async throws(HostFailure) -> JournalRecord {
        try await find(operands, in: journal, location: "journal \(journal.path)", verb: verb)
    }

    /// The entry named by the one operand, an id or a number, in `journal` (named `location` in errors).
    static func find(_ operands: [String], in journal: any Journal, location: String, verb: String) async throws(HostFailure) -> JournalRecord {
        guard operands.count == 1 else { throw .usage("'cmdbus journal \(verb)' takes one entry id") }
        // An entry's number, the first column of `journal list`, names it as well as its id.
        if let number = Int64(operands[0]), number > 0 {
            let rows: [JournalRecord]
            do { rows = try await journal.records(JournalQuery(afterSequence: number - 1, throughSequence: number)) } catch { throw .journal(error) }
            guard let record = rows.first else { throw HostFailure(.entryNotFound, "\(location) has no entry number \(number); 'cmdbus journal list' shows the numbers") }
            return record
        }
        guard let id = UUID(uuidString: operands[0]) else {
            let why = Int64(operands[0]) != nil ? "is not an entry: their numbers start at 1" : "is not an entry id (a UUID) or number"
            throw .usage("\(quoted(operands[0])) \(why); 'cmdbus journal list' shows both")
        }
        let record: JournalRecord?
        do { record = try await journal.record(id) } catch { throw .journal(error) }
        guard let record else {
            throw HostFailure(.entryNotFound, "\(location) has no entry \(id)")
        }
        return record
    }
}
