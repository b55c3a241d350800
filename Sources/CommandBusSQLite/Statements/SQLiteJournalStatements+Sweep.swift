import CommandBus

// How a writer keeps the sweep (``SQLiteJournalSchema/sweep``) close behind the newest command,
// so that recovery reads few commands past it: the sweep's bounds and the cheap sweep of a
// connection's own commands. The statements it uses are prepared in SQLiteJournalStatements.swift.
extension SQLiteJournalStatements {
    /// How many endings a writer records between sweeps. A sweep's cost does not grow with it, so
    /// this bounds only how many commands recovery reads past the last one: about this many, and
    /// ``sweepLag`` more.
    package static let sweepInterval = 4_096
    /// How many of the newest commands a writer's own sweep leaves past it (``sweepOwnCommands()``).
    static let sweepLag: Int64 = 2_048
    /// The most commands still in flight a writer's own sweep writes to `unended`; with more, it
    /// stops short of the oldest of them (``sweepOwnCommands()``).
    package static let unendedPerSweep = 64
    /// How far behind the newest the oldest command in flight may hold a writer's own sweep
    /// back; past it, the sweep writes every command in flight before it to `unended`.
    static let sweepHoldLimit: Int64 = 65_536

    /// Runs a sweep (``SQLiteJournalSchema/sweep``) in the caller's transaction.
    package static func sweep(_ database: SQLiteDatabase) throws(CommandBusError) {
        try database.execute(SQLiteJournalSchema.sweep)
    }

    /// Sweeps (``SQLiteJournalSchema/sweep``), cheaply when every command past the last sweep was
    /// inserted on this connection, the usual case.
    ///
    /// Row ids are given once and only grow (a prune keeps the newest entry's tree), so every id
    /// past the sweep up to the newest was given to a command of this connection or another's
    /// (one a prune removed since had ended, and counts on both sides), and counting this
    /// connection's among them says whether another process wrote any. If none did, the unended
    /// ones are the commands still in flight here (``rowIDs``): the sweep writes
    /// those to `unended` instead of reading every command since the last sweep. And it stops
    /// ``sweepLag`` commands short of the newest. The commands in flight are mostly the newest,
    /// and each one written to `unended`, then deleted from it when it ends, cost two statements,
    /// about 9,000 instructions; left past the sweep, most have ended by the next. If another
    /// process wrote commands past the sweep, it sweeps them all as a fresh connection does.
    ///
    /// A burst of posts puts thousands of commands in flight at once, accepted and waiting for a
    /// runner: written to `unended` and deleted from it again moments later, they cost a sweep
    /// 12 million instructions, about 3,000 a command. With more than ``unendedPerSweep`` in
    /// flight, the sweep stops short of the oldest of them instead, unless that one is more than
    /// ``sweepHoldLimit`` commands old (a command that runs for hours must not hold the sweep,
    /// and the reads of recovery, back forever).
    func sweepOwnCommands() throws(CommandBusError) {
        guard try sweepBounds.step() else {
            sweepBounds.reset()
            insertedSinceSweep.removeAll(keepingCapacity: true)
            return try Self.sweep(database)
        }
        let through = sweepBounds.int64(0), newest = sweepBounds.int64(1)
        sweepBounds.reset()
        guard newest - through == Int64(insertedSinceSweep.count { $0 > through }) else {
            insertedSinceSweep.removeAll(keepingCapacity: true)
            return try Self.sweep(database)
        }
        var sweptThrough = newest - Self.sweepLag
        var inFlight = 0, oldestInFlight = Int64.max
        for row in rowIDs.values where row > through && row <= sweptThrough {
            inFlight += 1
            oldestInFlight = min(oldestInFlight, row)
        }
        if inFlight > Self.unendedPerSweep, newest - oldestInFlight < Self.sweepHoldLimit {
            sweptThrough = oldestInFlight - 1
        }
        guard sweptThrough > through else { return }
        for row in rowIDs.values where row > through && row <= sweptThrough {
            insertUnended.bind(1, row)
            try run(insertUnended)
        }
        // As the full sweep does: a command that ended since, or was ended by another process
        // (a discard, a failed replay), leaves `unended`.
        try database.execute("""
            DELETE FROM unended WHERE EXISTS (SELECT 1 FROM endings e WHERE e.seq = unended.seq);
            UPDATE sweep SET through = \(sweptThrough);
            """)
        insertedSinceSweep.removeAll { $0 <= sweptThrough }
    }
}
