import Foundation
import Testing

/// The authoring template: `scripts/new-plugin.sh` makes a package outside the repo that builds,
/// passes its own test, and loads into `cmdbus` with no edits.
struct PluginTemplateTests {
    @Test(.timeLimit(.minutes(10)))
    func aNewPluginBuildsTestsAndRuns() async throws {
        let work = try TemporaryDirectory("cmdbus-new-plugin")
        defer { work.remove() }
        let script = TestPaths.packageRoot.appendingPathComponent("scripts/new-plugin.sh").path
        let made = try await runProcess("/bin/bash", [script, "Weather", work.file("weather").path])
        #expect(made.status == 0, "new-plugin.sh failed: \(made.stderr)")
        #expect(made.stdout.contains("swift build -c release"))
        #expect(made.stdout.contains("libWeather.so"))

        let package = work.file("weather")
        let built = try await runProcess("/usr/bin/env", ["swift", "build"], directory: package, timeout: .seconds(600))
        try #require(built.status == 0, "the new plugin does not build: \(built.stdout)\(built.stderr)")
        let tested = try await runProcess("/usr/bin/env", ["swift", "test"], directory: package, timeout: .seconds(600))
        #expect(tested.status == 0, "the new plugin's test fails: \(tested.stdout)\(tested.stderr)")

        let plugins = try work.subdirectory("plugins")
        try FileManager.default.copyItem(at: package.appendingPathComponent(".build/debug/libWeather.so"), to: plugins.file("libWeather.so"))
        let run = try await cmdbus("run", "weather.hello", #"{"name":"Ada"}"#, "--plugins", plugins.path)
        #expect(run.status == 0)
        #expect(run.stdout == "{\"message\":\"Hello, Ada!\"}\n")
        #expect(try await cmdbus("can", "weather.hello", #"{"name":""}"#, "--plugins", plugins.path).status == 69)
    }

    @Test func badNamesAndOccupiedDirectoriesAreRefused() async throws {
        let work = try TemporaryDirectory("cmdbus-new-plugin")
        defer { work.remove() }
        let script = TestPaths.packageRoot.appendingPathComponent("scripts/new-plugin.sh").path
        let lowercase = try await runProcess("/bin/bash", [script, "weather", work.file("a").path])
        #expect(lowercase.status != 0 && lowercase.stderr.contains("must be a Swift type name"))
        try "x".write(to: try work.subdirectory("occupied").file("file"), atomically: true, encoding: .utf8)
        let occupied = try await runProcess("/bin/bash", [script, "Weather", work.file("occupied").path])
        #expect(occupied.status != 0 && occupied.stderr.contains("already exists and is not empty"))
        // A module's own name would hide the module; an empty DIR made ./NAME.
        let module = try await runProcess("/bin/bash", [script, "Foundation", work.file("b").path])
        #expect(module.status != 0 && module.stderr.contains("is the name of a module the plugin builds against; choose another, such as FoundationPlugin"), "\(module.stderr)")
        let empty = try await runProcess("/bin/bash", [script, "Weather", ""], directory: work.url)
        #expect(empty.status != 0 && empty.stderr.contains("DIR is empty") && !FileManager.default.fileExists(atPath: work.file("Weather").path), "\(empty.stderr)")
    }
}
