import CommandBusSQLite

/// Where plugins come from and how far they are trusted: `--plugins`, `--isolate`, `--no-probe`,
/// `--probe-timeout`, `--insecure-plugins` and `--quiet`, parsed.
package struct PluginOptions: Sendable, Equatable {
    /// The directories given with `--plugins`, in order; empty means `$CMDBUS_PLUGINS`, else `./plugins`.
    package var directories: [String] = []
    /// Load plugins others can write, and symlinks out of the directory.
    package var insecure = false
    /// Run every plugin's handlers in a worker process.
    package var isolateAll = false
    /// Probe new plugin files in a child process before loading them here.
    package var probe = true
    /// How long a probe may take.
    package var probeTimeout: Duration = .seconds(10)
    /// Don't report skipped files.
    package var quiet = false
    /// Open a plugin file the registry knows only when a command first reaches it: set by the
    /// one-shot verbs (`run`, `can`, `batch`), which use few of the plugins they find.
    package var defersLoading = false
    /// Open each plugin loaded into this process from a private copy of its file: set by
    /// `serve`, whose plugin files may be written over in place while it runs.
    package var loadsPrivateCopies = false

    /// The defaults: `./plugins` (or `$CMDBUS_PLUGINS`), probed, not isolated.
    package init() {}

    /// These options, with each in-process plugin opened from a private copy of its file.
    package var loadingPrivateCopies: Self {
        var options = self
        options.loadsPrivateCopies = true
        return options
    }

    /// These options, with known plugin files opened when a command first reaches them.
    package var deferringLoads: Self {
        var options = self
        options.defersLoading = true
        return options
    }
}

/// Whether and where a command is journaled: `--journal`, `--no-journal`, `--durability` and
/// `--max-payload`, parsed.
package struct JournalOptions: Sendable {
    /// Where `run`, `batch` and `serve` journal unless told otherwise.
    package static let defaultPath = "./.cmdbus/journal.sqlite"
    /// The payload limit unless `--max-payload` says otherwise: 16 MiB.
    package static let defaultMaxPayloadBytes = 16 << 20

    /// The journal file.
    package var path = Self.defaultPath
    /// `false` with `--no-journal`.
    package var enabled = true
    /// Group commit (the default) or a sync per write.
    package var durability: SQLiteJournal.Durability = .batched(maxDelay: .zero)
    /// The largest payload accepted, in bytes.
    package var maxPayloadBytes = Self.defaultMaxPayloadBytes

    /// The defaults: `./.cmdbus/journal.sqlite`, group commit, 16 MiB payloads.
    package init() {}
}
