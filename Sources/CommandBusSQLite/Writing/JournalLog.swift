import CommandBus
import CommandBusSupport
import Glibc
import Dispatch
import Synchronization

/// The log in front of a `.deferred` SQLite journal: each write is appended to a small file, and
/// a write somebody waits for is made durable by syncing that file, a few hundred bytes, where a
/// synced SQLite commit flushes every page the command touched (about 20 KiB: the command's row,
/// its index entries and its ending, in the write-ahead log). SQLite then commits the same
/// writes without syncing, off the caller's path; a later synced commit (a checkpoint of this
/// log) makes them durable there. An appended record is held in memory until a write or a sync
/// hands it to the file with every other held: a write-ahead is written before its command is
/// scheduled, the rest wait for the next write or sync (``append(_:)``).
///
/// Two files, `PATH-log.0` and `PATH-log.1`, take turns. Records are appended to the active one;
/// past ``switchSize`` the other becomes active (the full one is written and synced with the
/// next write or sync), overwritten from its start in a new generation, once SQLite has synced
/// every write of that other file (the writer tells the log so: ``checkpointed(_:)``). Opening
/// the journal applies whatever both files hold
/// (``SQLiteJournalStatements/applyLogged(_:)``): a process that dies, or a power cut, loses
/// nothing the log made durable.
///
/// One process at a time keeps the log: it holds an exclusive `flock` on `PATH-log.0` while it
/// lives. Another process that opens the journal meanwhile syncs through SQLite, as before.
final class JournalLog: @unchecked Sendable {
    /// Past this many bytes (1 MiB unless a test says otherwise), the other file takes over (if
    /// SQLite has synced its writes).
    let switchSize: Int
    /// Each file's size, written through: the switch size and room for the record that passes it.
    var capacity: Int { switchSize + (64 << 10) }

    /// The journal the log is in front of.
    let journalPath: String
    /// The two files.
    let paths: [String]
    private let descriptors: [Int32]
    private let state: Mutex<State>
    /// Where the syncs after a leader's first go on while anyone waits (``sync(through:then:)``).
    private let queue = DispatchQueue(label: "cmdbus.journal.log")
    /// Held by whoever hands the held records to the operating system, so that the files take
    /// them in order; never taken inside `state`'s lock.
    private let writing = Mutex(())

    private struct Waiter {
        let position: UInt64
        let notify: @Sendable (Result<Void, CommandBusError>) -> Void

        /// Takes out of `waiters` those whose records are all at or before `position`.
        static func take(from waiters: inout [Waiter], through position: UInt64) -> [Waiter] {
            let covered = waiters.filter { $0.position <= position }
            waiters.removeAll { $0.position <= position }
            return covered
        }
    }

    private struct State {
        /// The file records are appended to, and where in it the next goes.
        var active = 0
        var offset = 0
        var generation: UInt32
        /// Bytes appended since the log opened, over both files: a record's position is this after it.
        var appended: UInt64 = 0
        /// Each file's records appended but not yet written, held in memory (``append(_:)``),
        /// and where in the file they start.
        var held: [[UInt8]] = [[], []]
        var heldStart = [0, 0]
        /// Every record up to this position has been handed to the operating system (read it
        /// holding `writing`: one counted may still be on its way otherwise).
        var written: UInt64 = 0
        /// Which files have been written since their last sync.
        var unsynced = [false, false]
        /// Every record up to this position is durable.
        var synced: UInt64 = 0
        /// A thread is syncing (and syncs again while anyone waits for more).
        var syncing = false
        /// Those waiting for a sync, and those waiting for the syncing thread's next write (``write(through:then:)``).
        var waiters: [Waiter] = []
        var writeWaiters: [Waiter] = []
        /// Whether SQLite has synced every write in each file, so it may be overwritten.
        var reusable = [true, true]
        /// A write or sync failed: the log is no longer trusted, and every later write fails with this.
        var failure: CommandBusError?
    }

    /// The two files' paths for the journal at `path`.
    static func paths(journal path: String) -> [String] { [path + "-log.0", path + "-log.1"] }

    /// Opens (creating) the journal's log and takes its lock; `nil` if another live process holds it.
    /// The files keep what they hold: read it with ``storedEntries()``, then ``reset()``.
    /// - Throws: `journalFailed` if the files cannot be opened or locked.
    init?(journal path: String, switchSize: Int = 1 << 20) throws(CommandBusError) {
        journalPath = path
        self.switchSize = switchSize
        paths = Self.paths(journal: path)
        guard let first = try Self.lockedFirstFile(paths[0], journal: path) else { return nil }
        let second = open(paths[1], O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard second >= 0 else {
            let failure = Self.openFailure(paths[1], journal: path)
            close(first)
            throw failure
        }
        descriptors = [first, second]
        state = Mutex(State(generation: 1))
    }

    /// Opens `file` and takes its lock; `nil` if another live process holds it. A process that
    /// takes the lock of a file another has just removed (one that closed its log, below) opens
    /// the path again, so that two processes never each lock a file of their own.
    private static func lockedFirstFile(_ file: String, journal path: String) throws(CommandBusError) -> Int32? {
        while true {
            let descriptor = open(file, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard descriptor >= 0 else { throw openFailure(file, journal: path) }
            guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
                let busy = errno == EWOULDBLOCK
                let cause = errorText()
                close(descriptor)
                if busy { return nil }
                throw .journalFailed(path, "cannot lock its log \(file): \(cause)")
            }
            var opened = stat(), named = stat()
            if fstat(descriptor, &opened) == 0, stat(file, &named) == 0, opened.st_ino == named.st_ino, opened.st_dev == named.st_dev {
                return descriptor
            }
            close(descriptor)
        }
    }

    /// Removes both files, while this process holds the lock: for a journal that keeps no log
    /// once it has applied what one left.
    func remove() {
        unlink(paths[1])
        unlink(paths[0])
    }

    deinit {
        // Closing the first file lets go of the lock.
        descriptors.forEach { close($0) }
    }

    /// The writes both files hold, oldest generation first.
    func storedEntries() -> [JournalLogEntry] {
        let files = paths.compactMap { FileSystem.readAll($0).flatMap(JournalLogRecord.scanFirstGeneration) }
        return files.sorted { $0.generation < $1.generation }.flatMap(\.entries)
    }

    /// Empties both files (their writes are durable in SQLite) and starts a new generation in
    /// the first, numbered at random: an emptied file keeps the records past its first, and
    /// one of an earlier generation that lay exactly where this one's records end would be read
    /// as this one's if the numbers could repeat (counting on from the files' newest did repeat
    /// them, from 1, once both first headers were zeroed).
    ///
    /// A file shorter than ``capacity`` is written through with zeros first: a sync that
    /// overwrites written blocks writes only them, where one into a new or allocated-but-unwritten
    /// block also commits the file system's journal, and with it every other file's pending
    /// blocks (SQLite's write-ahead log's among them). A file written through before is emptied
    /// by zeroing its first record's header, which no scan reads past: a one-shot command that
    /// opens a deferred journal writes 2 MiB the first time, and 32 bytes after.
    func reset() throws(CommandBusError) {
        for (index, descriptor) in descriptors.enumerated() {
            var info = stat()
            let size = fstat(descriptor, &info) == 0 ? Int(info.st_size) : 0
            let zeros = [UInt8](repeating: 0, count: size < capacity ? capacity : JournalLogRecord.headerSize)
            if let cause = Self.write(zeros, at: 0, to: descriptor) ?? (fdatasync(descriptor) == 0 ? nil : Self.errorText()) {
                throw .journalFailed(journalPath, "cannot empty its log \(paths[index]): \(cause); check the disk's free space")
            }
        }
        state.withLock { state in
            state.active = 0
            state.offset = 0
            // Room above for a billion switches before the numbers could wrap.
            state.generation = UInt32.random(in: 1...(1 << 30))
            state.reusable = [true, true]
            state.held = [[], []]
            state.unsynced = [false, false]
        }
    }

    /// Appends `record` (``JournalLogRecord/encode(_:owner:)``) to the active file, and returns
    /// its position (for ``write(through:)`` and ``sync(through:then:)``) and, if the files
    /// switched after it, the one just retired: once SQLite has synced its writes, call
    /// ``checkpointed(_:)`` with it.
    ///
    /// The record is only copied: it is held in memory until a write or sync through it, or
    /// past it, hands it to the operating system, one `pwrite` for all held. So a write nobody
    /// waits for, or one about to be synced, costs a copy, and the caller's lock (the journal
    /// writer's, which keeps SQLite in the log's order) is never held across a system call.
    func append(_ record: consuming [UInt8]) throws(CommandBusError) -> (position: UInt64, retired: Int?) {
        var record = record
        return try state.withLock { state throws(CommandBusError) -> (position: UInt64, retired: Int?) in
            if let failure = state.failure { throw failure }
            JournalLogRecord.stamp(&record, generation: state.generation)
            let active = state.active
            if state.held[active].isEmpty { state.heldStart[active] = state.offset }
            state.held[active].append(contentsOf: record)
            state.offset += record.count
            state.appended += UInt64(record.count)
            let position = state.appended
            guard state.offset > switchSize, state.reusable[1 - active] else { return (position, nil) }
            // The file is full: turn to the other, overwritten from its start in a new generation.
            // What it held and nobody wrote is in SQLite, synced (it is reusable): it is dropped.
            // The retired file's records are written and synced with the next write or sync.
            state.reusable[active] = false
            state.active = 1 - active
            state.held[state.active].removeAll(keepingCapacity: true)
            state.offset = 0
            state.generation &+= 1
            return (position, active)
        }
    }

    /// SQLite has synced every write of file `index`: it may be overwritten.
    func checkpointed(_ index: Int) {
        state.withLock { $0.reusable[index] = true }
    }

    /// Hands every record up to `position` to the operating system (a process that dies keeps
    /// it), with every record held before it and any after: one `pwrite` a file.
    func write(through position: UInt64) throws(CommandBusError) {
        try writing.withLock { _ throws(CommandBusError) in
            try writeHeld(ifBefore: position)
        }
    }

    /// Calls `notify` once every record up to `position` is written (a process that dies keeps
    /// it). While a sync is under way, the syncing thread writes it in its next round, with every
    /// record appended meanwhile, and calls `notify` there: a burst of posts shares a `pwrite` a
    /// sync, and its posting thread makes none. Otherwise it is written now, on this thread.
    func write(through position: UInt64, then notify: @escaping @Sendable (Result<Void, CommandBusError>) -> Void) {
        let ridesTheSync = state.withLock { state -> Bool in
            guard state.syncing, state.failure == nil else { return false }
            state.writeWaiters.append(Waiter(position: position, notify: notify))
            return true
        }
        if ridesTheSync { return }
        do throws(CommandBusError) {
            try write(through: position)
            notify(.success(()))
        } catch {
            notify(.failure(error))
        }
    }

    /// Writes what is held, if anything up to `position` is, and marks the files written to as
    /// needing a sync. Called holding `writing`, so writes reach each file in the order appended,
    /// and a record counted as written has been.
    private func writeHeld(ifBefore position: UInt64) throws(CommandBusError) {
        let (runs, failure) = state.withLock { state -> ([(file: Int, start: Int, bytes: [UInt8])], CommandBusError?) in
            if let failure = state.failure { return ([], failure) }
            guard state.written < position else { return ([], nil) }
            // The retired file's run first: it holds the older records.
            var runs: [(file: Int, start: Int, bytes: [UInt8])] = []
            for file in [1 - state.active, state.active] where !state.held[file].isEmpty {
                runs.append((file, state.heldStart[file], state.held[file]))
                state.held[file].removeAll(keepingCapacity: true)
                state.unsynced[file] = true
            }
            state.written = state.appended
            return (runs, nil)
        }
        if let failure { throw failure }
        for run in runs {
            if let cause = Self.write(run.bytes, at: run.start, to: descriptors[run.file]) {
                throw state.withLock { fail(&$0, "cannot write its log \(paths[run.file]): \(cause); check the disk's free space") }
            }
        }
    }

    /// Writes `bytes` at `offset` of the file `descriptor` whole; the cause if it cannot.
    private static func write(_ bytes: [UInt8], at offset: Int, to descriptor: Int32) -> String? {
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { pwrite(descriptor, $0.baseAddress! + written, $0.count - written, off_t(offset + written)) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return errorText() }
            written += count
        }
        return nil
    }

    /// Latches `cause` as the log's failure (every later write fails with it) and returns it.
    private func fail(_ state: inout State, _ cause: String) -> CommandBusError {
        let failure = CommandBusError.journalFailed(journalPath, cause)
        state.failure = failure
        return failure
    }

    /// Calls `notify` once every record up to `position` is durable. One thread syncs at a time,
    /// for every record appended so far: whoever asks while it syncs waits for its next sync
    /// (group commit). The first to ask syncs once on its own thread, so a lone `send` hears of
    /// its ending without a hop; the syncs for those who asked meanwhile go on on the log's
    /// queue, so a burst's callers (the bus's runners) are not held in a loop of syncs.
    func sync(through position: UInt64, then notify: @escaping @Sendable (Result<Void, CommandBusError>) -> Void) {
        enum Step { case told(Result<Void, CommandBusError>), wait, lead }
        let step = state.withLock { state -> Step in
            if let failure = state.failure { return .told(.failure(failure)) }
            if state.synced >= position { return .told(.success(())) }
            state.waiters.append(Waiter(position: position, notify: notify))
            if state.syncing { return .wait }
            state.syncing = true
            return .lead
        }
        switch step {
        case .told(let result): notify(result)
        case .wait: return
        case .lead: syncWhileWaitedFor()
        }
    }

    /// Waits until every record up to `position` is durable.
    func sync(through position: UInt64) async throws(CommandBusError) {
        let result: Result<Void, CommandBusError> = await withUnsafeContinuation { continuation in
            sync(through: position) { continuation.resume(returning: $0) }
        }
        try result.get()
    }

    /// Writes what is held and tells those waiting for a write; syncs the files written to since
    /// the last sync, if anyone waits for that, and tells whoever it covers; then, while anyone
    /// waits, hands the next round to the log's queue (`onQueue`: it is that queue, and goes on).
    private func syncWhileWaitedFor(onQueue: Bool = false) {
        while true {
            let round = writeForRound()
            // Written: a posted command can be scheduled before the sync, which is for others.
            for waiter in round.written { waiter.notify(.success(())) }
            var failed = round.failure
            for file in round.files.indices where round.files[file] && failed == nil && fdatasync(descriptors[file]) != 0 {
                failed = .journalFailed(journalPath, "cannot sync its log \(paths[file]): \(Self.errorText())")
            }
            let (ready, result, done) = state.withLock { state -> ([Waiter], Result<Void, CommandBusError>, Bool) in
                if let failed, state.failure == nil { state.failure = failed }
                if let failure = state.failure {
                    // After a failed sync the kernel may have dropped the pages: nothing since is trusted.
                    let ready = state.waiters + state.writeWaiters
                    state.waiters = []
                    state.writeWaiters = []
                    state.syncing = false
                    return (ready, .failure(failure), true)
                }
                state.synced = max(state.synced, round.syncedThrough)
                let ready = Waiter.take(from: &state.waiters, through: state.synced)
                let done = state.waiters.isEmpty && state.writeWaiters.isEmpty
                if done { state.syncing = false }
                return (ready, .success(()), done)
            }
            for waiter in ready { waiter.notify(result) }
            if done { return }
            if !onQueue {
                queue.async { self.syncWhileWaitedFor(onQueue: true) }
                return
            }
        }
    }

    /// One round's writing: writes what is held and takes the write waiters it covers, and, if
    /// anyone waits for a sync, the files to sync and the position that makes durable.
    private func writeForRound() -> (written: [Waiter], files: [Bool], syncedThrough: UInt64, failure: CommandBusError?) {
        writing.withLock { _ in
            do throws(CommandBusError) {
                try writeHeld(ifBefore: .max)
            } catch {
                return ([], [false, false], 0, error)
            }
            return state.withLock { state in
                let written = Waiter.take(from: &state.writeWaiters, through: state.written)
                guard state.waiters.contains(where: { $0.position > state.synced }) else { return (written, [false, false], 0, nil) }
                defer { state.unsynced = [false, false] }
                return (written, state.unsynced, state.written, nil)
            }
        }
    }

    private static func errorText() -> String { String(cString: strerror(errno)) }

    /// Why a log file would not open (read `errno` at once), and what to do.
    private static func openFailure(_ file: String, journal path: String) -> CommandBusError {
        if errno == EISDIR {
            return .journalFailed(path, "cannot open its log \(file): it is a directory; move it away, the journal keeps its log there")
        }
        return .journalFailed(path, "cannot open its log \(file): \(errorText()); check the directory's permissions")
    }
}
