import CommandBusSupport
import Foundation
import Testing

/// The `posix_spawn` launcher the end-to-end tests and benchmarks start `cmdbus` with, in place of
/// Foundation's `Process` (whose `run()` crashes now and then on Linux: swift-corelibs-foundation#5472).
struct LaunchedProcessTests {
    @Test func itRunsInTheGivenDirectoryWithTheEnvironmentLaidOverOursAndWritesWhereItIsTold() async throws {
        let scratch = try TemporaryDirectory("launched")
        defer { scratch.remove() }
        let out = scratch.file("out").path, err = scratch.file("err").path
        let child = try LaunchedProcess(
            "/bin/sh", ["-c", #"pwd; echo "$LAUNCHED_EXTRA ${PATH:+path}"; echo oops >&2; exit 3"#],
            environment: ["LAUNCHED_EXTRA": "extra"], directory: scratch.path,
            standardOutput: .file(out), standardError: .file(err)
        )
        #expect(await child.wait() == .exited(3))
        #expect(!child.isRunning && child.ending == .exited(3))
        let printed = try String(contentsOfFile: out, encoding: .utf8).split(separator: "\n")
        #expect(printed.count == 2 && printed[0].hasSuffix(scratch.url.lastPathComponent) && printed[1] == "extra path")
        #expect(try String(contentsOfFile: err, encoding: .utf8) == "oops\n")
    }

    @Test func aSignalEndsItAndEveryWaiterHearsHow() async throws {
        let child = try LaunchedProcess("/bin/sleep", ["60"], standardOutput: .discard)
        #expect(child.isRunning)
        async let first = child.wait()
        async let second = child.wait()
        child.send(SIGKILL)
        #expect(await [first, second] == [.signaled(SIGKILL), .signaled(SIGKILL)])
        // Reaped: a late signal goes nowhere (the pid may already be another process's).
        child.send(SIGKILL)
        #expect(await child.wait() == .signaled(SIGKILL))
    }

    @Test func aProgramThatCannotStartIsNamedWithTheCause() throws {
        let error = #expect(throws: LaunchFailure.self) {
            _ = try LaunchedProcess("/nonexistent/cmdbus", [])
        }
        #expect(error?.description == "cannot start /nonexistent/cmdbus: No such file or directory")
    }
}
