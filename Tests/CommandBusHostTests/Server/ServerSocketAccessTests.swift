import Foundation
import Testing

/// Who may connect to a server's socket (mode 0600: its own user alone), and what another is told.
struct ServerSocketAccessTests {
    /// Found by hand: another user was told "Permission denied (is 'cmdbus serve' running?)",
    /// which it was; now it is told whose server it is.
    @Test(.timeLimit(.minutes(2)), .enabled(if: getuid() == 0, "needs root to run a client as another user"))
    func anotherUserIsToldWhoseServerItIs() async throws {
        let server = try await ServerTests.Server()
        defer { server.work.remove() }
        // The client as `nobody`, through the directories it must pass (mode 0700 for a temporary one).
        try FileManager.default.setAttributes([.posixPermissions: 0o711], ofItemAtPath: server.work.path)
        try FileManager.default.setAttributes([.posixPermissions: 0o711], ofItemAtPath: server.work.file(".cmdbus").path)
        let denied = try await runProcess("/usr/sbin/runuser", [
            "-u", "nobody", "--", try TestPaths.product("cmdbus").path, "run", "greet", "-p", "name=Ada", "--connect", server.socket,
        ])
        #expect(denied.status == 1, "\(denied.stderr)")
        #expect(denied.stderr == "cmdbus: error: cannot connect to \(server.socket): Permission denied; "
            + "a server's socket takes its own user alone (mode 0600): run this as root, whose server it is\n", "\(denied.stderr)")
        let owner = try await cmdbus(["run", "greet", "-p", "name=Ada", "--connect", server.socket])
        #expect(owner.status == 0 && owner.stdout.contains("Hello, Ada!"), "\(owner.stderr)")
    }
}
