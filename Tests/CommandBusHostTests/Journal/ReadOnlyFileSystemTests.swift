import Foundation
import Testing

/// A file system mounted read-only, as a container's often is: each command that would write
/// there, or open a journal there (SQLite's write-ahead log needs its files beside it), says so,
/// and what to do, in one line.
struct ReadOnlyFileSystemTests {
    /// Found by hand: `cmdbus run` printed Foundation's whole error for the journal's directory,
    /// a journal file there was said to need "write access" (no permission helps), and
    /// `plugins lock` said only "cannot write ./plugins/plugins.lock".
    @Test(.enabled(if: getuid() == 0, "needs root to mount a file system"))
    func aReadOnlyFileSystemIsNamedWithWhatToDo() async throws {
        let work = try TemporaryDirectory("cmdbus-read-only")
        defer { work.remove() }
        let disk = try work.subdirectory("disk")
        // A tmpfs written to (a plugin, and a journal by one command), then mounted read-only.
        let script = #"""
            set -e
            mount -t tmpfs -o size=8m tmpfs "$1"
            cd "$1" && mkdir plugins made && cp "$3" plugins/
            (cd made && "$2" run greet -p name=Ada --plugins ../plugins >/dev/null 2>&1)
            # Closed as a process that ends cleanly closes it: checkpointed, no -wal or -shm beside it.
            python3 -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.close()" made/.cmdbus/journal.sqlite
            mount -o remount,ro "$1"
            set +e
            "$2" run greet -p name=Grace --plugins plugins; echo "== $?"
            (cd made && "$2" run greet -p name=Grace --plugins ../plugins); echo "== $?"
            (cd made && "$2" journal list); echo "== $?"
            "$2" plugins lock --plugins plugins; echo "== $?"
            "$2" journal list --journal none.sqlite; echo "== $?"
            """#
        let result = try await runInOwnMountNamespace(script, on: disk)
        let text = (result.stdout + result.stderr).split(separator: "\n").filter { !$0.contains("debug build") }.joined(separator: "\n")
        // stdout and stderr come apart; each command's lines are found by their words.
        let ends = result.stdout.split(separator: "\n").filter { $0.hasPrefix("== ") }
        #expect(ends == ["== 74", "== 74", "== 74", "== 1", "== 74"], "\(text)")
        #expect(text.contains("journal ./.cmdbus/journal.sqlite: cannot create its directory ./.cmdbus: its file system is mounted read-only; put the journal on one that can be written"), "\(text)")
        #expect(text.contains("journal ./.cmdbus/journal.sqlite: cannot be written: the file system that holds it is mounted read-only"), "\(text)")
        // `run` and `journal list` on the journal made before the remount.
        #expect(text.components(separatedBy: "journal ./.cmdbus/journal.sqlite: cannot be written: the file system that holds it is mounted read-only").count == 3, "\(text)")
        #expect(text.contains("cannot write plugins/plugins.lock: its file system is mounted read-only; lock the plugins where the directory can be written"), "\(text)")
        #expect(text.contains("journal none.sqlite: does not exist (or is empty); check the path"), "\(text)")
    }
}
