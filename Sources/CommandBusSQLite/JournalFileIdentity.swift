import Glibc

/// Which file a path led to when the journal opened it, by device and inode: SQLite writes to
/// the file it opened whatever becomes of its path, so a journal removed, renamed or replaced
/// under a running process goes on taking writes no other process can read, all of them gone
/// when the process ends.
struct JournalFileIdentity: Equatable, Sendable {
    let device: UInt64
    let inode: UInt64

    /// The file `path` leads to now, or `nil` if it leads to none.
    init?(path: String) {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        device = UInt64(status.st_dev)
        inode = UInt64(status.st_ino)
    }
}

extension SQLiteJournal {
    /// What became of the journal's file, if its path no longer leads to the file this journal
    /// writes to (said to follow "journal PATH"); `nil` while it does. One `stat`.
    public var fileProblem: String? {
        guard let opened = file else { return nil }
        guard let now = JournalFileIdentity(path: path) else {
            return "was removed or renamed while this process writes to it, so what the process records goes to a file no longer "
                + "at that path (one removed is gone when the process ends); rename the file back, or restart the process to begin a new journal there"
        }
        guard now != opened else { return nil }
        return "was replaced by another file while this process writes to the one it opened: what the process records is "
            + "gone when it ends; restart it to open the new file"
    }
}
