import CommandBus
import CommandBusHost
import CommandBusPostgres
import CommandBusSupport
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `cmdbus journal prune --older-than AGE [--state S]`: the journal keeps every command until
/// told otherwise (it is what replay, undo and sync read); this removes the trees of work that
/// ended longer ago than AGE, whole, from the file or, with `--bus`, from the shared bus.
extension JournalCommand {
    /// The cutoff and the root states `prune`'s options name.
    private static func pruning(_ arguments: ArgumentSpec.Parsed, _ operands: [String]) throws(HostFailure) -> (cutoff: Date, states: Set<CommandState>) {
        guard operands.isEmpty else { throw .usage("'cmdbus journal prune' takes no operands; give --older-than AGE") }
        guard let age = try arguments.duration("older-than") else {
            throw .usage("'cmdbus journal prune' needs --older-than AGE (such as 30d or 12h): what ended longer ago than that is removed")
        }
        let states = try listQuery(arguments).states
        if let unfinished = states.first(where: { !$0.isTerminal }) {
            throw .usage("--state for 'journal prune' takes succeeded, failed, cancelled or timedOut, got \(quoted(unfinished.rawValue)): unfinished work is never pruned")
        }
        return (Date() - age.seconds, states)
    }

    static func prune(_ arguments: ArgumentSpec.Parsed, _ operands: [String], _ console: Console) async throws(HostFailure) {
        let (cutoff, states) = try pruning(arguments, operands)
        let journal = try existingJournal(arguments)
        let removed: Int
        do {
            removed = try await journal.prune(endedBefore: cutoff, rootStates: states, dryRun: arguments.has("dry-run"))
        } catch {
            throw .journal(error)
        }
        report(removed, cutoff: cutoff, arguments, console)
    }

    static func busPrune(_ arguments: ArgumentSpec.Parsed, _ operands: [String], _ console: Console) async throws(HostFailure) {
        let (cutoff, states) = try pruning(arguments, operands)
        let journal = try busJournal(arguments)
        let removed: Int
        do {
            removed = try journal.prune(endedBefore: cutoff, rootStates: states, dryRun: arguments.has("dry-run"))
        } catch {
            throw PostgresBusClient.failure(error)
        }
        report(removed, cutoff: cutoff, arguments, console)
    }

    private static func report(_ removed: Int, cutoff: Date, _ arguments: ArgumentSpec.Parsed, _ console: Console) {
        let time = cutoff.formatted(.iso8601)
        let entries = counted(removed, "entry", plural: "entries")
        if arguments.has("dry-run") {
            if arguments.has("json") {
                console.out(JSONValue.object(["wouldRemove": .integer(Int64(removed)), "endedBefore": .string(time), "dryRun": .bool(true)]).text)
            } else {
                console.out("would remove \(entries) that ended before \(time); nothing was removed (--dry-run)")
            }
        } else if arguments.has("json") {
            console.out(JSONValue.object(["removed": .integer(Int64(removed)), "endedBefore": .string(time)]).text)
        } else {
            console.out("removed \(entries) that ended before \(time); unfinished work, trees with a part that ended since, and the newest entry's tree stay")
        }
    }
}
