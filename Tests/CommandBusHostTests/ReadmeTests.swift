import Foundation
import Testing

/// The README's five-minute path, pasted as written into a fresh shell outside the repo.
struct ReadmeTests {
    /// The shell block between `<!-- five-minute-path -->` and `<!-- /five-minute-path -->`.
    static func fiveMinutePath() throws -> String {
        let readme = try String(contentsOf: TestPaths.packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let start = try #require(readme.range(of: "<!-- five-minute-path -->\n```sh\n"), "the README lost its five-minute-path markers")
        let end = try #require(readme.range(of: "```\n<!-- /five-minute-path -->", range: start.upperBound..<readme.endIndex))
        return String(readme[start.upperBound..<end.lowerBound])
    }

    @Test(.timeLimit(.minutes(30)))
    func theFiveMinutePathWorksAsWrittenInAFreshShell() async throws {
        let block = try Self.fiveMinutePath()
        let work = try TemporaryDirectory("cmdbus-readme")
        defer { work.remove() }
        // A new user's machine: the checkout beside where they work, a home of their own,
        // and nothing of ours on PATH.
        let home = try work.subdirectory("home")
        try FileManager.default.createSymbolicLink(at: work.file("CommandBus"), withDestinationURL: TestPaths.packageRoot)
        let script = work.file("five-minutes.sh")
        try ("set -euo pipefail\n" + block).write(to: script, atomically: true, encoding: .utf8)
        let path = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
            .split(separator: ":").filter { !$0.contains(".build") }.joined(separator: ":")
        let result = try await runProcess("/usr/bin/env", [
            "-i", "HOME=\(home.path)", "PATH=\(path)", "USER=\(NSUserName())",
            // The test suite holds the checkout's .build while it runs: the install builds beside it.
            "CMDBUS_INSTALL_SCRATCH=\(TestPaths.packageRoot.appendingPathComponent(".build-readme").path)",
            "bash", script.path,
        ], directory: work.url, timeout: .seconds(1_700))
        #expect(result.status == 0, "the five-minute path failed:\n\(result.stderr.suffix(3_000))")
        #expect(result.stdout.hasSuffix("{\"message\":\"Hello, Ada!\"}\n"), "\(result.stdout)")
    }

    /// The dashboard's pictures in the README are the ones `scripts/draw-dashboard.sh` draws,
    /// and each is in `docs/dashboard`: a page pictured by hand, or a picture the script stopped
    /// drawing, would go stale with the next change to the pages.
    @Test func theReadmesDashboardPicturesAreTheOnesTheScriptDraws() throws {
        let root = TestPaths.packageRoot
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let script = try String(contentsOf: root.appendingPathComponent("scripts/draw-dashboard.sh"), encoding: .utf8)
        let shown = Set(readme.matches(of: /docs\/dashboard\/([a-z-]+\.png)/).map { String($0.output.1) })
        let drawn = Set(script.split(separator: "\n").filter { $0.hasPrefix("shoot ") }.compactMap { line in
            line.split(separator: " ").first { $0.hasSuffix(".png") }.map(String.init)
        })
        #expect(shown.count == 6, "\(shown.sorted())")
        #expect(shown == drawn, "the README shows \(shown.sorted()); the script draws \(drawn.sorted())")
        for picture in shown {
            #expect(FileManager.default.fileExists(atPath: root.appendingPathComponent("docs/dashboard/\(picture)").path), "\(picture)")
        }
    }
}
