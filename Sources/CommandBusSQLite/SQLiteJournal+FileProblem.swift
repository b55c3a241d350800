import CommandBusSupport

extension SQLiteJournal {
    /// What became of the journal's file, if its path no longer leads to the file this journal
    /// writes to (said to follow "journal PATH"); `nil` while it does. One `stat`.
    ///
    /// SQLite writes to the file it opened whatever becomes of its path, so a journal removed,
    /// renamed or replaced under a running process goes on taking writes no other process can
    /// read, all of them gone (if removed) when the process ends. The file is known by its device
    /// and inode (``file``, taken when the journal opened).
    public var fileProblem: String? {
        guard let opened = file else { return nil }
        guard let now = FileSystem.status(of: path) else {
            return "was removed or renamed while this process writes to it, so what the process records goes to a file no longer "
                + "at that path (one removed is gone when the process ends); rename the file back, or restart the process to begin a new journal there"
        }
        guard now.device != opened.device || now.inode != opened.inode else { return nil }
        return "was replaced by another file while this process writes to the one it opened: what the process records is "
            + "gone when it ends; restart it to open the new file"
    }
}
