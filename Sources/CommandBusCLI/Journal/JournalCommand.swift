import CommandBusSupport
import CommandBusSQLite
import CommandBusHost
import CommandBusPostgres
import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `cmdbus journal list|show|retry|replay|undo|import|tree|discard|recover|prune|backup`: reading and using the journal.
enum JournalCommand {
    static let spec = ArgumentSpec(command: "journal", options: [
        .init(name: "state", short: nil, value: "STATE", help: "list: only this state; prune: only trees whose root ended so (repeatable, or a list: failed,timedOut)."),
        .init(name: "command", short: nil, value: "NAME", help: "list: only this command name."),
        .init(name: "limit", short: "n", value: "N", help: "list: at most N entries (the newest)."),
        .init(name: "since", short: nil, value: "WHEN", help: "list: created within an age (1h, 30m) or since a time; replay: from this entry id or time (ISO 8601, a UTC date, or seconds)."),
        .init(name: "until", short: nil, value: "WHEN", help: "replay: through this entry id or time (all of its last digit)."),
        .init(name: "rebuild", short: nil, help: "undo: drop the entry from replay instead of sending an inverse."),
        .init(name: "format", short: nil, value: "FORMAT", choices: ["text", "mermaid", "dot"], help: "tree: text (default), mermaid or dot."),
        .init(name: "older-than", short: nil, value: "AGE", help: "prune: remove what ended longer ago than AGE (30d, 12h, 90m)."),
        .init(name: "dry-run", short: nil, help: "prune: count what would be removed, and remove nothing."),
        .json, .bus, .help,
    ] + PluginOptions.options + JournalOptions.options)

    static let help = """
        Usage: cmdbus journal <subcommand> [options]

          list [--state S] [--command NAME] [--since WHEN] [--limit N] [--json]
                                 List entries, oldest first (failed ones are the dead letters).
          show ID                Print one entry: envelope, payload, state, attempts, result or error.
          retry ID               Run a failed, cancelled or timed-out entry again, under its id.
          replay [--since ID|TIME] [--until ID|TIME]
                                 Run succeeded entries again, in order, into fresh state.
          undo [ID] [--rebuild]  Send the inverse of an entry (the latest by default) and link the two;
                                 --rebuild instead drops it from the log's replay.
          import OTHER.sqlite    Play, in their order, the succeeded entries this journal hasn't seen.
          tree ID [--format text|mermaid|dot]
                                 Print an entry and its subcommands with states and timings.
          discard ID...          Take failed, cancelled or timed-out entries off the dead letters, or
                                 drop unfinished ones a dead process left (recorded, not deleted).
          recover                Run what processes that died left unfinished; one-shot commands only
                                 report it (cmdbus serve recovers at start).
          prune --older-than AGE [--state S] [--dry-run]
                                 Remove whole trees of work that ended longer ago than AGE (30d);
                                 unfinished work stays. The journal keeps everything until then.
          backup FILE            Write a copy of the journal to a new FILE, safe while a server writes
                                 to it (where cp can tear one); the copy is a journal on its own.

        ID is an entry's id (a UUID) or its number, the first column of 'journal list'.

        The journal is \(JournalOptions.defaultPath) unless --journal PATH.

        Options:
        \(spec.optionsHelp)
        """

    static func run(_ arguments: ArgumentSpec.Parsed, console: Console) async throws(HostFailure) {
        let onTheBus = try ConnectionOptions(arguments).bus != nil
        let table = onTheBus ? busVerbs : verbs
        if onTheBus, let verb = arguments.positionals.first, let why = notOnTheBus[verb] {
            throw .usage("'cmdbus journal \(verb)' works on a journal file, not with --bus: \(why)")
        }
        if let verb = arguments.positionals.first, table[verb] != nil { try refuseOptionsOtherVerbsTake(verb, arguments) }
        try await Verb.dispatch(table, command: "journal", arguments, console)
    }

    /// The options only some verbs read, by option. Given to another verb they would be ignored
    /// (`journal list --since x` listed everything), so they are refused instead.
    private static let verbOptions: [String: [String]] = [
        "state": ["list", "prune"], "older-than": ["prune"], "dry-run": ["prune"], "command": ["list"], "limit": ["list"], "since": ["list", "replay"], "until": ["replay"],
        "rebuild": ["undo"], "format": ["tree"],
    ]

    private static func refuseOptionsOtherVerbsTake(_ verb: String, _ arguments: ArgumentSpec.Parsed) throws(HostFailure) {
        for (option, verbs) in verbOptions.sorted(by: { $0.key < $1.key })
        where !verbs.contains(verb) && (arguments.has(option) || arguments.value(option) != nil) {
            throw .usage("--\(option) is for 'cmdbus journal \(verbs.joined(separator: "' and '"))', not 'journal \(verb)', which would ignore it; leave it out")
        }
    }

    /// The subcommands of `cmdbus journal`, for shell completion.
    static var verbNames: [String] { verbs.keys.sorted() }

    private static let verbs: [String: Verb] = [
        "list": Verb(run: list), "show": Verb(run: show), "retry": Verb(run: retry), "replay": Verb(run: replay),
        "undo": Verb(run: undo), "import": Verb(run: importJournal), "tree": Verb(run: tree), "discard": Verb(run: discard),
        "recover": Verb(run: recover), "prune": Verb(run: prune), "backup": Verb(run: backup),
    ]

    static func existingJournal(_ arguments: ArgumentSpec.Parsed) throws(HostFailure) -> SQLiteJournal {
        let options = try JournalOptions(arguments)
        return try HostSession.openJournal(options.path, durability: options.durability, create: false)
    }

    /// The journal replay and undo read: the bus with `--bus`, else the local file; and how to name it.
    static func readableJournal(_ arguments: ArgumentSpec.Parsed) throws(HostFailure) -> (journal: any Journal, location: String) {
        if try ConnectionOptions(arguments).bus != nil {
            let bus = try busJournal(arguments)
            return (bus, "the bus at \(bus.location)")
        }
        let file = try existingJournal(arguments)
        return (file, "journal \(file.path)")
    }

    /// A session with the plugins and the journal the options name.
    static func session(_ arguments: ArgumentSpec.Parsed, console: Console) async throws(HostFailure) -> HostSession {
        try await HostSession.start(plugins: try PluginOptions(arguments), journal: try JournalOptions(arguments), console: console, reportSkipped: true)
    }

    private static func retry(_ arguments: ArgumentSpec.Parsed, _ operands: [String], _ console: Console) async throws(HostFailure) {
        let session = try await session(arguments, console: console)
        guard let journal = session.journal else { throw .usage("'cmdbus journal retry' needs a journal; drop --no-journal") }
        let record = try await find(operands, in: journal, verb: "retry")
        guard record.state.isDeadLetter else {
            throw .usage("entry \(record.envelope.id) ('\(record.envelope.commandName)') is \(record.state.rawValue); only failed, cancelled or timed-out entries are retried")
        }
        let ticket = session.bus.resubmit(record)
        do {
            let result = try await ticket.result
            await session.close()
            console.out(String(decoding: result, as: UTF8.self))
        } catch {
            await session.close()
            throw session.failure(error, command: record.envelope.commandName)
        }
    }

    static func replay(_ arguments: ArgumentSpec.Parsed, _ operands: [String], _ console: Console) async throws(HostFailure) {
        guard operands.isEmpty else { throw .usage("'cmdbus journal replay' takes no operands; use --since and --until") }
        let (journal, location) = try readableJournal(arguments)
        // A replay starts from fresh state: load the plugins, but neither replay nor recover on start.
        var noJournal = try JournalOptions(arguments)
        noJournal.enabled = false
        let session = try await HostSession.start(plugins: try PluginOptions(arguments), journal: noJournal, console: console, reportSkipped: true)
        let since = try await bound(arguments.value("since"), in: journal, location: location, option: "--since")
        let until = try await bound(arguments.value("until"), in: journal, location: location, option: "--until")
        let report: JournalReplayer.Report
        do {
            report = try await JournalReplayer(bus: session.bus, journal: journal).replay(
                after: since?.sequence.map { $0 - 1 }, through: until?.sequence,
                createdFrom: since?.start, createdBefore: until?.end
            )
        } catch {
            throw .journal(error)
        }
        for failure in report.failures { console.err("cmdbus: warning: replay: \(failure)") }
        if arguments.has("json") {
            console.out(JSONValue.object([
                "replayed": .integer(Int64(report.replayed)), "failed": .integer(Int64(report.failed)),
                "sentByParents": .integer(Int64(report.sentByParents)),
            ]).text)
        } else {
            let resent = report.sentByParents == 0 ? "" : " (and \(counted(report.sentByParents, "subcommand")) their parents sent again)"
            console.out("replayed \(counted(report.replayed, "entry", plural: "entries"))\(resent); \(report.failed) failed")
        }
    }

    /// Plays the other journal's succeeded work this one has not seen, in order and under its
    /// ids, as a replay would: a subcommand whose parent is played is sent again by it, not on its own.
    private static func importJournal(_ arguments: ArgumentSpec.Parsed, _ operands: [String], _ console: Console) async throws(HostFailure) {
        guard operands.count == 1 else { throw .usage("'cmdbus journal import' takes one journal file") }
        let other: SQLiteJournal
        do { other = try SQLiteJournal(path: operands[0], durability: .synced, create: false, readOnly: true) } catch { throw .journal(error) }
        let session = try await session(arguments, console: console)
        guard let journal = session.journal else { throw .usage("'cmdbus journal import' needs a journal; drop --no-journal") }
        var added = 0, present = 0, failed = 0
        do throws(CommandBusError) {
            _ = try await JournalReplayer(bus: session.bus, journal: other).forEachEntryToRun { record throws(CommandBusError) in
                if try await journal.record(record.envelope.id) != nil {
                    present += 1
                    return
                }
                do throws(CommandBusError) {
                    _ = try await session.bus.resubmit(record).result
                    added += 1
                } catch {
                    failed += 1
                    console.err("cmdbus: warning: import: \(record.envelope.id) ('\(record.envelope.commandName)'): \(error.message)")
                }
            }
        } catch {
            throw .journal(error)
        }
        await session.close()
        if arguments.has("json") {
            console.out(JSONValue.object(["new": .integer(Int64(added)), "present": .integer(Int64(present)), "failed": .integer(Int64(failed))]).text)
        } else {
            console.out("imported \(added) new, \(present) already present, \(failed) failed")
        }
    }

    /// A `--since`/`--until` bound: an entry id (its sequence) or a time.
    private static func bound(
        _ text: String?, in journal: any Journal, location: String, option: String
    ) async throws(HostFailure) -> ReplayBound? {
        guard let text else { return nil }
        if let id = UUID(uuidString: text) {
            let record = try await find([id.uuidString], in: journal, location: location, verb: "replay \(option)")
            return ReplayBound(sequence: record.sequence)
        }
        if let time = ReplayBound(time: text) { return time }
        throw .usage("\(option) takes an entry id, an ISO 8601 time or seconds since 1970, got \(quoted(text))" + ReplayBound.fieldsWord(text))
    }

    private static func discard(_ arguments: ArgumentSpec.Parsed, _ operands: [String], _ console: Console) async throws(HostFailure) {
        guard !operands.isEmpty else { throw .usage("'cmdbus journal discard' takes one or more entry ids or numbers") }
        let journal = try existingJournal(arguments)
        let orphaned: Set<UUID>
        do { orphaned = Set(try await journal.unfinished().map(\.envelope.id)) } catch { throw .journal(error) }
        var records: [JournalRecord] = []
        for operand in operands {
            let record = try await find([operand], in: journal, verb: "discard")
            guard record.state.isDeadLetter || orphaned.contains(record.envelope.id) else {
                let why = record.state.isTerminal ? "is \(record.state.rawValue)" : "is \(record.state.rawValue) in a process that is still alive"
                throw HostFailure(.entryNotApplicable, "entry \(record.envelope.id) (\(quoted(record.envelope.commandName))) \(why); only failed, cancelled or timed-out entries, or unfinished ones a dead process left, are discarded")
            }
            records.append(record)
        }
        for record in records {
            do { try await journal.discard(record.envelope.id) } catch { throw .journal(error) }
            let was = record.state.isTerminal ? "" : " (was \(record.state.rawValue); now cancelled)"
            console.out("discarded \(record.envelope.id) (\(record.envelope.commandName))\(was); it stays in the journal")
        }
    }

    private static func recover(_ arguments: ArgumentSpec.Parsed, _ operands: [String], _ console: Console) async throws(HostFailure) {
        guard operands.isEmpty else { throw .usage("'cmdbus journal recover' takes no operands") }
        let journal = try existingJournal(arguments)
        let roots: [JournalRecord]
        do { roots = try await journal.unfinished().filter { $0.envelope.parentID == nil } } catch { throw .journal(error) }
        guard !roots.isEmpty else {
            console.out("nothing to recover: no process that died left work unfinished in \(journal.path)")
            return
        }
        let session = try await HostSession.start(
            plugins: try PluginOptions(arguments), journal: try JournalOptions(arguments), console: console, reportSkipped: true,
            recovery: .run(await: true)
        )
        await session.close()
        session.catalog.stopWorkers()
        var failed = 0
        for root in roots {
            let now: JournalRecord?
            do { now = try await journal.record(root.envelope.id) } catch { throw .journal(error) }
            let state = now?.state ?? .failed
            if state != .succeeded { failed += 1 }
            var line = "\(root.envelope.id)  \(state.rawValue)  \(root.envelope.commandName)"
            if let message = now?.errorMessage { line += "  \(message)" }
            console.out(line)
        }
        if failed > 0 { throw HostFailure(.someFailed, "\(failed) of \(counted(roots.count, "recovered command")) did not succeed; 'cmdbus journal list --state failed' shows them") }
    }
}
