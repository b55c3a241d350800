import CommandBus
import CommandBusHost
import CommandBusSupport

/// `cmdbus journal backup FILE`: a copy of the journal that can be trusted while a server
/// writes to it, where `cp` can tear one (SQLite's file, its write-ahead log and the deferred
/// journal's side log change together).
extension JournalCommand {
    static func backup(_ arguments: ArgumentSpec.Parsed, _ operands: [String], _ console: Console) async throws(HostFailure) {
        guard operands.count == 1, let destination = operands.first, !destination.isEmpty else {
            throw .usage("'cmdbus journal backup' takes one file to write the copy to, such as journal-backup.sqlite")
        }
        // Checked here too, before the journal opens, for a usage error rather than a journal's.
        if FileSystem.status(of: destination, followingLinks: false) != nil {
            throw .usage("\(quoted(destination)) exists; 'cmdbus journal backup' never overwrites a file: name a new one, or remove this one first")
        }
        let journal = try existingJournal(arguments)
        let entries: Int64
        do { entries = try await journal.backup(to: destination) } catch { throw .journal(error) }
        let bytes = Int64(FileSystem.status(of: destination)?.size ?? 0)
        if arguments.has("json") {
            console.out(JSONValue.object([
                "backup": .string(destination), "journal": .string(journal.path), "entries": .integer(entries), "bytes": .integer(bytes),
            ]).text)
        } else {
            console.out("backed up \(counted(Int(entries), "entry", plural: "entries")) of \(journal.path) to \(destination) (\(Self.size(bytes))); "
                + "'cmdbus journal list --journal \(destination)' reads it")
        }
    }

    /// A file's size for a person: bytes, KB or MB, with one decimal past the first.
    private static func size(_ bytes: Int64) -> String {
        if bytes < 1_000 { return "\(bytes) bytes" }
        if bytes < 1_000_000 { return "\((Double(bytes) / 100).rounded() / 10) KB" }
        return "\((Double(bytes) / 100_000).rounded() / 10) MB"
    }
}
