/// The journal file's layout (schema version 6) and the steps that bring older files to it.
///
/// A command's entry is two rows. `commands` holds what is known when it is accepted, written
/// once; `endings` holds how it ended, appended when it ends. Recording an ending is then one
/// short insert near the end of a table instead of rewriting the command's row and an index
/// entry. The `entries` view joins the two: readers see one row per command, as before.
///
/// ```
/// commands (seq, id, payload, …) ──┐
///                                   ├── entries (the view every read goes through)
/// endings  (seq, state, result, …) ─┘
/// sweep (through) + unended (seq): where recovery looks for commands without an ending
/// prune_mark (before): the latest prune's cutoff, made by the first prune (see PrunedLogCommands)
/// ```
///
/// Finding the commands without an ending needs no index kept up per command: a sweep, now and
/// then, moves `sweep.through` to the last command and keeps in `unended` the earlier ones it
/// found without an ending (in flight then, or left by a process that died). Recovery reads
/// `unended` and the commands accepted since the sweep.
package enum SQLiteJournalSchema {
    /// The schema version this code writes.
    package static let version: Int64 = 6

    /// What a new file gets.
    package static var current: String {
        table(named: "commands") + indexes + endings + deadLetterIndex + "INSERT INTO sweep (through) VALUES (0);\n"
    }

    /// A version 3 file's layout, for tests that make one.
    package static var versionThree: String { table(named: "commands") + versionThreeIndexes }

    /// A version 4 file's layout, for tests that make one.
    package static var versionFour: String { table(named: "commands") + versionFourIndexes + endings + "INSERT INTO sweep (through) VALUES (0);\n" }

    /// The commands table, as version 3 made it. `seq` is the row id without `AUTOINCREMENT`:
    /// the newest row is never deleted (a prune keeps its tree), so the next id is always one
    /// past every id given, and an accept does not write `sqlite_sequence`. The ending columns
    /// (`result` to `finished_at`) hold the endings of commands that ended before version 4;
    /// later ones are in `endings`.
    static func table(named name: String) -> String {
        """
        CREATE TABLE \(name) (
            seq INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            name TEXT NOT NULL,
            parent_id TEXT,
            correlation_id TEXT NOT NULL,
            created_at REAL NOT NULL,
            metadata TEXT,
            payload BLOB NOT NULL,
            state TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            result BLOB,
            error_code TEXT,
            error_message TEXT,
            accepted_at REAL NOT NULL,
            started_at REAL,
            finished_at REAL,
            updated_at REAL NOT NULL,
            owner TEXT,
            undo_of TEXT,
            undone_by TEXT,
            excluded INTEGER NOT NULL DEFAULT 0,
            discarded_at REAL
        );

        """
    }

    /// Version 5's indexes. A top-level command is its own tree (its correlation id is its id),
    /// so `commands_correlation` holds only subcommands: a tree is found by its root's id
    /// (`commands.id`'s own index) and its subcommands' correlation id
    /// (``SQLiteJournalStatements/treeCondition``). Every accept of a top-level command, nearly
    /// all of them, updates two indexes instead of three: one page fewer in its commit, and 16%
    /// fewer instructions for a raw insert of its row (19,601 against 23,465).
    static let indexes = """
        CREATE INDEX commands_name ON commands(name, seq);
        CREATE INDEX commands_correlation ON commands(correlation_id, seq) WHERE correlation_id <> id;

        """

    /// Versions 2 to 4's indexes: every command in `commands_correlation`.
    static let versionFourIndexes = """
        CREATE INDEX commands_name ON commands(name, seq);
        CREATE INDEX commands_correlation ON commands(correlation_id, seq);

        """

    /// Version 3's indexes: version 4 drops `commands_unfinished`, which every accept and every
    /// ending had to update.
    static let versionThreeIndexes = """
        CREATE INDEX commands_unfinished ON commands(state) WHERE state IN ('pending', 'running');
        """ + "\n" + versionFourIndexes

    /// The dead letters' endings, as the index of them (``deadLetterIndex``) and a read that uses
    /// it (``SQLiteJournalStatements/records(_:)``) both say it: SQLite uses a partial index only
    /// for a query that says its `WHERE` term as it is written. An ending is of a final state, so
    /// one that did not succeed failed, was cancelled or timed out. Not `state IN (…)`: SQLite
    /// builds the list anew for each row it inserts, and every journaled command cost 9,500
    /// instructions more (51,013 a post against 41,510).
    package static let deadLetterStates = "state <> 'succeeded'"

    /// Version 6's index of the endings of dead letters: few on a healthy journal, so a page of
    /// them, newest first (the dashboard's, `journal list --state failed`), read the whole journal
    /// back to front without it (0.6 s at 2 million entries with three failed; 3 ms with it). An
    /// ending that succeeded does not enter it.
    static let deadLetterIndex = """
        CREATE INDEX IF NOT EXISTS endings_dead_letters ON endings(seq) WHERE \(deadLetterStates);

        """

    /// Version 4's tables and view. `endings.attempts` counts the attempts of the run that ended,
    /// added to those `commands` kept from earlier runs; the view's `updated_at` is the later of
    /// the two rows'. A command without an ending has no result, error or finish time (an
    /// accept clears them in `commands`, and version 3's endings are copied to `endings`), so
    /// the view reads those from `endings` alone.
    static let endings = """
        CREATE TABLE endings (
            seq INTEGER PRIMARY KEY,
            state TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            result BLOB,
            error_code TEXT,
            error_message TEXT,
            started_at REAL,
            finished_at REAL,
            updated_at REAL NOT NULL
        );
        CREATE TABLE sweep (through INTEGER NOT NULL);
        CREATE TABLE unended (seq INTEGER PRIMARY KEY);
        CREATE VIEW entries AS
        SELECT c.seq, c.id, c.name, c.parent_id, c.correlation_id, c.created_at, c.metadata, c.payload,
            coalesce(e.state, c.state) AS state,
            c.attempts + coalesce(e.attempts, 0) AS attempts,
            e.result, e.error_code, e.error_message,
            max(c.updated_at, coalesce(e.updated_at, c.updated_at)) AS updated_at,
            c.undo_of, c.undone_by, c.excluded, c.owner,
            coalesce(e.started_at, c.started_at) AS started_at,
            e.finished_at, c.discarded_at
        FROM commands c LEFT JOIN endings e ON e.seq = c.seq;

        """

    /// Moves the sweep to the last command: the commands accepted since the last sweep that have
    /// no ending join `unended`, and those in `unended` that ended since leave it. Each command is
    /// looked at by one sweep, so its cost is a row read per command, whenever it runs; a sweep
    /// that finds nothing to change writes nothing.
    ///
    /// The first statement is a join, not `NOT EXISTS`: SQLite runs a correlated subquery with a
    /// cursor opened and closed per command, and the join keeps one open (2.6k instructions a
    /// command against 0.7k). It reads no column of `commands`: a command accepted since
    /// version 4 keeps `pending` or `running` there (its ending is in `endings`), and recovery
    /// reads `unended` through `entries`, whose state it checks anyway.
    ///
    /// A mark past the newest command was left by a prune before it kept the newest tree: the
    /// commands since may hold numbers at or below it that no sweep looked at. The first
    /// statement starts such a journal's sweeps again from its first command.
    static let sweep = """
        UPDATE sweep SET through = 0 WHERE through > (SELECT coalesce(max(seq), 0) FROM commands);
        INSERT OR IGNORE INTO unended (seq)
            SELECT c.seq FROM commands c LEFT JOIN endings e ON e.seq = c.seq
            WHERE c.seq > (SELECT through FROM sweep) AND e.seq IS NULL;
        DELETE FROM unended WHERE EXISTS (SELECT 1 FROM endings e WHERE e.seq = unended.seq);
        UPDATE sweep SET through = (SELECT max(seq) FROM commands) WHERE through < (SELECT coalesce(max(seq), 0) FROM commands);

        """

    /// The SQL that brings a journal of version `from` to `from + 1`, for every older version.
    package static let migrations: [Int64: String] = [
        // Version 2: dead letters can be discarded, trees found by correlation.
        1: """
            ALTER TABLE commands ADD COLUMN discarded_at REAL;
            CREATE INDEX commands_correlation ON commands(correlation_id, seq);

            """,
        // Version 3: the table is rebuilt without AUTOINCREMENT, keeping every row and its seq
        // (the columns are in the same order: version 2's last one, discarded_at, was appended).
        2: table(named: "commands_v3") + """
            INSERT INTO commands_v3 SELECT * FROM commands;
            DROP TABLE commands;
            ALTER TABLE commands_v3 RENAME TO commands;

            """ + versionThreeIndexes,
        // Version 4: endings get their own table. Every ended command's ending is copied there
        // (its attempts stay in `commands`), the unfinished ones are the first sweep's `unended`,
        // and the index on unfinished states goes.
        3: endings + """
            INSERT INTO endings (seq, state, attempts, result, error_code, error_message, started_at, finished_at, updated_at)
                SELECT seq, state, 0, result, error_code, error_message, started_at, finished_at, updated_at
                FROM commands WHERE state NOT IN ('pending', 'running');
            INSERT INTO unended (seq) SELECT seq FROM commands WHERE state IN ('pending', 'running');
            INSERT INTO sweep (through) VALUES ((SELECT coalesce(max(seq), 0) FROM commands));
            DROP INDEX commands_unfinished;

            """,
        // Version 5: the correlation index keeps only subcommands (see `indexes`).
        4: """
            DROP INDEX commands_correlation;
            CREATE INDEX commands_correlation ON commands(correlation_id, seq) WHERE correlation_id <> id;

            """,
        // Version 6: the dead letters' endings are indexed (see `deadLetterIndex`).
        5: deadLetterIndex,
    ]
}
