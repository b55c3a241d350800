import CommandBusSupport
import CommandBus

/// Checks an existing journal file before SQLite opens it, so a damaged or foreign file is
/// refused with a clear reason and never written to.
package enum JournalFileCheck {
    /// SQLite's 16-byte file header magic.
    package static let sqliteMagic = Array("SQLite format 3\0".utf8)

    /// Throws why the file at `path` cannot be a journal; returns whether it exists (and is not empty).
    package static func validate(_ path: String) throws(CommandBusError) -> Bool {
        let size: Int
        switch FileSystem.kind(of: path) {
        case .missing: return false
        case .danglingSymlink(let target): throw .journalFailed(path, "is a dangling symlink to '\(target)'")
        case .symlinkLoop(let target): throw .journalFailed(path, "is a symlink to '\(target)' that leads back to itself; point it at the journal file")
        case .directory: throw .journalFailed(path, "is a directory, not a journal file")
        case .other: throw .journalFailed(path, "is a FIFO, socket or device, not a journal file")
        case .regularFile(let fileSize): size = fileSize
        }
        if size == 0 { return false }
        guard let header = FileSystem.readPrefix(of: path, count: 100) else {
            throw .journalFailed(path, "cannot be read (permission denied?)")
        }
        // Checked first: a short file that does not start as SQLite's do is some other file, not a cut-off journal.
        guard header.starts(with: sqliteMagic.prefix(header.count)) else {
            throw .journalFailed(path, "is not an SQLite database (bad header); it was left untouched")
        }
        guard header.count == 100 else {
            throw .journalFailed(path, "is truncated (\(size) bytes, shorter than an SQLite header); it was left untouched")
        }
        let rawPageSize = Int(header[16]) << 8 | Int(header[17])
        let pageSize = rawPageSize == 1 ? 65536 : rawPageSize
        let changeCounter = header[24..<28], validFor = header[92..<96]
        let pageCount = header[28..<32].reduce(0) { $0 << 8 | Int($1) }
        // A write-ahead log beside the file may hold the pages it lacks: a checkpoint cut short
        // (the process killed) writes the first page, with the new size, before the pages that
        // reach it, and SQLite reads them from the log until a checkpoint completes.
        let logHoldsPages = if case .regularFile(let logSize) = FileSystem.kind(of: path + "-wal") { logSize > 0 } else { false }
        if !logHoldsPages, changeCounter.elementsEqual(validFor), pageSize > 0, pageCount * pageSize > size {
            throw .journalFailed(path, "is truncated (\(size) bytes; its header says \(pageCount * pageSize)); it was left untouched")
        }
        return true
    }
}
