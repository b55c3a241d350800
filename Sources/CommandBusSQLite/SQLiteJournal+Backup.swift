import CommandBus
import CommandBusSupport
import Glibc

extension SQLiteJournal {
    /// Writes a copy of the journal to `destination`, a file that must not exist yet: every
    /// entry committed when the copy starts, compacted (SQLite's `VACUUM INTO`), and synced,
    /// while other processes go on writing to the journal. A copy of a journal's file made with
    /// `cp` while a process writes can be torn; this one is a journal on its own, with no
    /// write-ahead log or side log to keep beside it.
    /// - Returns: How many entries the copy holds.
    public func backup(to destination: String) async throws(CommandBusError) -> Int64 {
        try await read { statements throws(CommandBusError) in try statements.backup(to: destination) }
    }
}

extension SQLiteJournalStatements {
    func backup(to destination: String) throws(CommandBusError) -> Int64 {
        guard FileSystem.status(of: destination, followingLinks: false) == nil else {
            throw .journalFailed(destination, "exists; a backup never overwrites a file: name a new one, or remove this one first")
        }
        let vacuum = try database.prepare("VACUUM INTO ?1")
        vacuum.bind(1, destination)
        do {
            _ = try vacuum.step()
        } catch {
            // SQLite's failure is the destination's (its directory, its disk), not the journal's;
            // what it wrote of the copy before failing is not a copy.
            let reason = database.lastError
            unlink(destination)
            throw .journalFailed(destination, reason)
        }
        // `VACUUM INTO` writes a rollback-journal file; a journal is in WAL mode, so that its
        // readers and its writer do not wait on each other from the copy's first use on.
        let entries: Int64
        do {
            let copy = try SQLiteDatabase(path: destination, create: false)
            defer { copy.close() }
            try copy.execute("PRAGMA journal_mode = WAL")
            entries = try copy.integer("SELECT count(*) FROM commands")
        }
        try Self.sync(destination)
        return entries
    }

    /// Makes the copy durable, and its name in its directory: `VACUUM INTO` syncs only as the
    /// journal's connection is told to, which a deferred journal's is not.
    private static func sync(_ path: String) throws(CommandBusError) {
        for (name, flags) in [(path, O_RDONLY), (FileSystem.parentDirectory(of: path), O_RDONLY | O_DIRECTORY)] {
            let descriptor = open(name, flags | O_CLOEXEC)
            guard descriptor >= 0, fsync(descriptor) == 0 else {
                let reason = String(cString: strerror(errno))
                if descriptor >= 0 { close(descriptor) }
                throw .journalFailed(path, "was written but could not be synced (\(reason)); check the disk, then back up again")
            }
            close(descriptor)
        }
    }
}
