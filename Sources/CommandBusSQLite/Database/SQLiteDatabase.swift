import CommandBus
import CommandBusSupport
import CSQLite
import Glibc
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A thin, checked wrapper over one SQLite connection. Not thread-safe: its owner serializes use.
package final class SQLiteDatabase {
    private(set) var handle: OpaquePointer?
    package let path: String

    /// Opens (or, if `create`, creates) the database at `path`.
    package init(path: String, create: Bool, readOnly: Bool = false) throws(CommandBusError) {
        self.path = path
        _ = Self.configured
        let flags = readOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0))
        var connection: OpaquePointer?
        let status = sqlite3_open_v2(path, &connection, flags | SQLITE_OPEN_NOMUTEX, nil)
        handle = connection
        guard status == SQLITE_OK else {
            let message = connection.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            close()
            throw .journalFailed(path, Self.worded(message, status: status, path: path))
        }
        sqlite3_extended_result_codes(connection, 1)
    }

    deinit { close() }

    /// Process-wide settings, made once before the first connection opens SQLite.
    private static let configured: Void = { _ = cmdbus_sqlite3_disable_memory_statistics() }()

    package func close() {
        if let handle { sqlite3_close_v2(handle) }
        handle = nil
    }

    /// Runs SQL with no results (one or more statements).
    package func execute(_ sql: String) throws(CommandBusError) {
        var message: UnsafeMutablePointer<CChar>?
        let status = sqlite3_exec(handle, sql, nil, nil, &message)
        guard status == SQLITE_OK else {
            // `lastError` words the same failure for a person (a damaged file says it was left untouched).
            sqlite3_free(message)
            throw .journalFailed(path, lastError)
        }
    }

    /// Prepares a statement.
    package func prepare(_ sql: String) throws(CommandBusError) -> SQLiteStatement {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil) == SQLITE_OK, let statement else {
            throw .journalFailed(path, lastError)
        }
        return SQLiteStatement(statement, database: self)
    }

    /// The last error, worded for a person: what is wrong with the file and what to do about it.
    package var lastError: String {
        guard let handle else { return "not open" }
        return Self.worded(String(cString: sqlite3_errmsg(handle)), status: sqlite3_errcode(handle), path: path)
    }

    /// SQLite's `message` for a failure with `status` on the file at `path`, said for a person:
    /// a damaged file says it was left untouched, a full disk, a read-only file system or a file
    /// this user cannot write says what to do.
    static func worded(_ message: String, status: Int32, path: String) -> String {
        let code = status & 0xFF
        if [SQLITE_READONLY, SQLITE_PERM, SQLITE_CANTOPEN].contains(code), FileSystem.isOnReadOnlyFileSystem(path) {
            return "cannot be written: the file system that holds it is mounted read-only (\(message)); put the journal on one that can be written"
        }
        return switch code {
        case SQLITE_CORRUPT, SQLITE_NOTADB: "is damaged (\(message)); it was left untouched"
        case SQLITE_BUSY: "is locked by another process for too long (\(message))"
        case SQLITE_FULL: "cannot grow: the disk holding it is full (\(message)); free space on it, then try again"
        case SQLITE_IOERR: "cannot be read or written (\(message)); check the disk and its file system (the kernel log says more)"
        case SQLITE_READONLY, SQLITE_PERM: "cannot be written (\(message)); give this user write access to the file and its directory"
        case SQLITE_CANTOPEN: "cannot be opened (\(message)); check that its directory exists and this user can write there"
        default: message
        }
    }

    /// How many rows the last statement inserted, updated or deleted.
    package var changes: Int { Int(sqlite3_changes(handle)) }

    /// The row id of the last row inserted on this connection; set to 0 before a statement that
    /// may insert, it says whether the statement did.
    package var lastInsertRowID: Int64 {
        get { sqlite3_last_insert_rowid(handle) }
        set { sqlite3_set_last_insert_rowid(handle, newValue) }
    }

    /// The integer result of a one-value query such as a PRAGMA.
    package func integer(_ sql: String) throws(CommandBusError) -> Int64 {
        let statement = try prepare(sql)
        guard try statement.step() else { return 0 }
        return statement.int64(0)
    }
}

/// A prepared statement. Bind, step, read, reset.
package final class SQLiteStatement {
    private let statement: OpaquePointer
    private unowned let database: SQLiteDatabase

    package init(_ statement: OpaquePointer, database: SQLiteDatabase) {
        self.statement = statement
        self.database = database
    }

    deinit { sqlite3_finalize(statement) }

    package func bind(_ index: Int32, _ value: String?) {
        guard let value else { sqlite3_bind_null(statement, index); return }
        // A native string's own bytes, which SQLite copies: no `utf8CString` array in between.
        var text = value
        text.withUTF8 { bytes in
            // A nil pointer would bind NULL: an empty string is bound from a literal instead.
            guard let start = bytes.baseAddress, !bytes.isEmpty else { _ = sqlite3_bind_text(statement, index, "", 0, sqliteTransient); return }
            _ = sqlite3_bind_text(statement, index, UnsafeRawPointer(start).assumingMemoryBound(to: CChar.self), Int32(bytes.count), sqliteTransient)
        }
    }

    /// Binds text SQLite does not copy: the bytes must stay alive and unchanged until the
    /// statement is reset (``reset()`` clears every binding). The journal's writing thread binds
    /// a command's values this way, from one buffer its caller filled.
    package func bindBorrowed(_ index: Int32, text bytes: UnsafeRawBufferPointer) {
        // A nil pointer would bind NULL: an empty string is bound from a static literal instead.
        guard let start = bytes.baseAddress, !bytes.isEmpty else { return bind(index, "" as StaticString) }
        _ = sqlite3_bind_text(statement, index, start.assumingMemoryBound(to: CChar.self), Int32(bytes.count), nil)
    }

    /// Binds a blob SQLite does not copy, on the terms of ``bindBorrowed(_:text:)``. Empty bytes
    /// bind NULL, as binding empty `Data` does.
    package func bindBorrowed(_ index: Int32, blob bytes: UnsafeRawBufferPointer) {
        _ = sqlite3_bind_blob(statement, index, bytes.isEmpty ? nil : bytes.baseAddress, Int32(bytes.count), nil)
    }

    /// Binds a blob SQLite does not copy, on the terms of ``bindBorrowed(_:text:)``, for a column
    /// that may not be NULL: empty bytes bind an empty blob.
    package func bindBorrowed(_ index: Int32, nonNullBlob bytes: UnsafeRawBufferPointer) {
        guard !bytes.isEmpty else { _ = sqlite3_bind_zeroblob(statement, index, 0); return }
        bindBorrowed(index, blob: bytes)
    }

    /// Binds text that lives as long as the program (a literal), which SQLite does not copy.
    package func bind(_ index: Int32, _ value: StaticString) {
        _ = sqlite3_bind_text(statement, index, UnsafeRawPointer(value.utf8Start).assumingMemoryBound(to: CChar.self), Int32(value.utf8CodeUnitCount), nil)
    }

    /// Binds an id as its canonical upper-case text, the form the journal stores ids in.
    package func bind(_ index: Int32, _ value: UUID?) {
        guard let value else { sqlite3_bind_null(statement, index); return }
        bind(index, CommandID.text(value))
    }

    package func bind(_ index: Int32, _ value: Data?) {
        guard let value else { sqlite3_bind_null(statement, index); return }
        value.withUnsafeBytes { raw in
            _ = sqlite3_bind_blob(statement, index, raw.baseAddress, Int32(raw.count), sqliteTransient)
        }
    }

    package func bind(_ index: Int32, _ value: Int64?) {
        guard let value else { sqlite3_bind_null(statement, index); return }
        sqlite3_bind_int64(statement, index, value)
    }

    package func bind(_ index: Int32, _ value: Double) {
        sqlite3_bind_double(statement, index, value)
    }

    /// Steps once: `true` if a row is ready, `false` when done.
    @discardableResult
    package func step() throws(CommandBusError) -> Bool {
        switch sqlite3_step(statement) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw .journalFailed(database.path, database.lastError)
        }
    }

    /// Clears bindings and rewinds, ready to run again.
    package func reset() {
        sqlite3_reset(statement)
        sqlite3_clear_bindings(statement)
    }

    package func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(statement, column) }
    package func double(_ column: Int32) -> Double { sqlite3_column_double(statement, column) }
    package func isNull(_ column: Int32) -> Bool { sqlite3_column_type(statement, column) == SQLITE_NULL }

    package func string(_ column: Int32) -> String? {
        guard let text = sqlite3_column_text(statement, column) else { return nil }
        // The column's own length, no scan for the terminator; and copied in, then validated, by
        // a call that is not generic (decoding a buffer looks up the buffer type's metadata).
        let count = Int(sqlite3_column_bytes(statement, column))
        guard count > 0 else { return "" }
        return String(unsafeUninitializedCapacity: count) { buffer in
            memcpy(buffer.baseAddress!, text, count)
            return count
        }
    }

    /// The command state named in a text column, or `nil` if the column is null or names none;
    /// read from the bytes, without making a string of them.
    package func state(_ column: Int32) -> CommandState? {
        guard let text = sqlite3_column_text(statement, column) else { return nil }
        let bytes = UnsafeBufferPointer(start: text, count: Int(sqlite3_column_bytes(statement, column)))
        let name: StaticString
        let state: CommandState
        switch bytes.first {
        case UInt8(ascii: "s"): (name, state) = ("succeeded", .succeeded)
        case UInt8(ascii: "f"): (name, state) = ("failed", .failed)
        case UInt8(ascii: "p"): (name, state) = ("pending", .pending)
        case UInt8(ascii: "r"): (name, state) = ("running", .running)
        case UInt8(ascii: "c"): (name, state) = ("cancelled", .cancelled)
        case UInt8(ascii: "t"): (name, state) = ("timedOut", .timedOut)
        default: return nil
        }
        guard bytes.count == name.utf8CodeUnitCount, memcmp(text, name.utf8Start, bytes.count) == 0 else { return nil }
        return state
    }

    /// The id written in a text column, or `nil` if the column is null or holds no id.
    package func uuid(_ column: Int32) -> UUID? {
        guard let text = sqlite3_column_text(statement, column) else { return nil }
        let count = Int(sqlite3_column_bytes(statement, column))
        return CommandID.parse(utf8: UnsafeBufferPointer(start: text, count: count))
    }

    package func data(_ column: Int32) -> Data? {
        guard !isNull(column) else { return nil }
        let count = Int(sqlite3_column_bytes(statement, column))
        guard count > 0, let bytes = sqlite3_column_blob(statement, column) else { return Data() }
        return Data(bytes: bytes, count: count)
    }
}

/// SQLite's "copy this buffer now" destructor marker.
private let sqliteTransient = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)

