import Testing
import Foundation

/// A server's hot loading when a loaded plugin's file is written again: its commands always
/// have a handler, whether the file changed, was replaced, or was replaced by one that does not load.
@Suite(.timeLimit(.minutes(3)))
struct PluginReplacementTests {
    /// Whether a directory in the temporary directory can be made immutable (`chattr +i`): as
    /// root, on ext4, XFS, btrfs or a recent tmpfs.
    static let canMakeDirectoriesImmutable: Bool = {
        guard let probe = try? TemporaryDirectory() else { return false }
        defer { probe.remove() }
        return system("chattr +i '\(probe.path)' >/dev/null 2>&1 && chattr -i '\(probe.path)' >/dev/null 2>&1") == 0
    }()

    /// Sends `greet` one at a time while `writer` (Python, given the plugin's path, the built
    /// plugin's and the server's log) writes to the plugin file; prints the sends that failed, then `done`.
    static func greetWhile(_ writer: String, server: ServerTests.Server) async throws -> String {
        try await server.client("""
            import os, shutil, threading, time
            path, built, log = sys.argv[2], sys.argv[3], sys.argv[4]
            def write():
            \(writer.split(separator: "\n").map { "    " + $0 }.joined(separator: "\n"))
            writing = threading.Thread(target=write); writing.start()
            s, f = connect()
            sent = 0
            while writing.is_alive() or sent < 200:
                answer = ask(f, {"id": sent, "op": "send", "command": "greet", "payload": {"name": "n"}})
                if not answer["ok"]: print(answer["error"]["message"])
                sent += 1
            writing.join()
            print("done")
            """, server.plugins.file("libGreeter.so").path, try TestPaths.product("libGreeter.so").path, server.log)
    }

    /// The server's log once `line` appears in it `count` times (or after a minute).
    static func log(of server: ServerTests.Server, containing line: String, count: Int) async -> String {
        let read: @Sendable () -> String = { (try? String(contentsOfFile: server.log, encoding: .utf8)) ?? "" }
        _ = await waitUntil(.seconds(60)) { read().components(separatedBy: line).count - 1 >= count }
        return read()
    }

    /// SIGHUP reads the plugin directories again, for a change that makes no file event the
    /// watcher acts on (a hard link made into the directory); it stopped
    /// the server at once, without a drain, as it would when the terminal that started it closes.
    @Test func sighupReadsThePluginDirectoriesAgainAndTheServerServesOn() async throws {
        let server = try await ServerTests.Server()
        defer { server.work.remove() }
        let built = server.work.file("greetall.so").path
        try FileManager.default.copyItem(atPath: try TestPaths.product("libGreetAll.so").path, toPath: built)
        try FileManager.default.linkItem(atPath: built, toPath: server.plugins.file("libGreetAll.so").path)
        let before = try await cmdbus(["can", "greet-all", "--connect", server.socket], directory: server.work.url)
        #expect(before.status == 69, "a hard link makes no event the watcher loads on: \(before.stderr)")
        server.process.send(SIGHUP)
        let log = await Self.log(of: server, containing: "loaded \(server.plugins.path)/libGreetAll.so", count: 1)
        #expect(log.contains("SIGHUP: reading the plugin directories again"), "\(log.suffix(2_000))")
        let after = try await cmdbus(["run", "greet-all", #"{"names":["Ada"]}"#, "--connect", server.socket], directory: server.work.url)
        #expect(after.status == 0 && after.stdout.contains("Hello, Ada!"), "\(after.stderr)")
        #expect(server.process.isRunning)
        server.process.send(SIGTERM)
        #expect(await server.process.wait() == .exited(0))
    }

    /// A file the trust rules refused, fixed as their warning says (`chmod go-w`), loads with
    /// nothing written to it, where a running server went on skipping it until a restart or
    /// SIGHUP; so does one refused for its directory's mode, once the directory's is fixed. A
    /// `chmod` of a loaded file leaves it as it is, and setting its time without opening it
    /// (`os.utime`, as some tools touch) loads it anew.
    @Test func aFileWhoseModeIsFixedLoadsAndOneWhoseTimeIsSetLoadsAnew() async throws {
        let server = try await ServerTests.Server(arguments: ["--log-level", "debug"])
        defer { server.work.remove() }
        let path = server.plugins.file("libGreetAll.so").path
        let staged = server.work.file("greetall.so").path
        try FileManager.default.copyItem(atPath: try TestPaths.product("libGreetAll.so").path, toPath: staged)
        #expect(chmod(staged, 0o666) == 0)
        #expect(chmod(server.plugins.path, 0o777) == 0)
        #expect(rename(staged, path) == 0)
        var log = await Self.log(of: server, containing: "skipped \(path): plugin directory is writable by group or others", count: 1)
        #expect(log.contains("skipped \(path): plugin directory is writable by group or others (mode 777)"), "\(log.suffix(2_000))")

        #expect(chmod(server.plugins.path, 0o755) == 0)
        log = await Self.log(of: server, containing: "skipped \(path): file is writable by group or others", count: 1)
        #expect(log.contains("skipped \(path): file is writable by group or others (mode 666)"), "\(log.suffix(2_000))")

        #expect(chmod(path, 0o644) == 0)
        log = await Self.log(of: server, containing: "loaded \(path)", count: 1)
        let greeted = try await cmdbus(["run", "greet-all", #"{"names":["Ada"]}"#, "--connect", server.socket], directory: server.work.url)
        #expect(greeted.status == 0 && greeted.stdout.contains("Hello, Ada!"), "\(greeted.stderr)\n\(log.suffix(2_000))")

        // A loaded file the rules would now refuse stays loaded, with a warning, as does one in a directory they would.
        // (The directory's first chmod, above, warned of the plugins loaded then.)
        #expect(chmod(path, 0o664) == 0)
        log = await Self.log(of: server, containing: "plugin 'greet-all' stays loaded as checked when loaded", count: 1)
        #expect(log.contains("\(path): file is writable by group or others (mode 664)"), "\(log.suffix(2_000))")
        #expect(chmod(server.plugins.path, 0o775) == 0)
        log = await Self.log(of: server, containing: "'counter', 'fixture', 'greet-all', 'greeter' stay loaded as checked when loaded", count: 1)
        #expect(log.contains("\(server.plugins.path): plugin directory is writable by group or others (mode 775)"), "\(log.suffix(2_000))")
        #expect(!log.contains("skipped the replacement of \(path)"), "a file whose mode alone changed is not loaded again: \(log.suffix(2_000))")
        // The directory's re-read may come before the file's own event (here it does: the server
        // is stopped while both change): a mode changed alone loads nothing anew either way.
        server.process.send(SIGSTOP)
        #expect(chmod(server.plugins.path, 0o755) == 0)
        #expect(chmod(path, 0o600) == 0)
        let marker = server.plugins.file("marker.so").path
        try Data("not a plugin\n".utf8).write(to: URL(fileURLWithPath: marker))
        server.process.send(SIGCONT)
        log = await Self.log(of: server, containing: "skipped \(marker)", count: 1)
        #expect(!log.contains("the file was replaced: \(path)"), "\(log.suffix(2_000))")
        #expect(try await runProcess("/usr/bin/python3", ["-c", "import os; os.utime('\(path)', (1, 1))"]).status == 0)
        log = await Self.log(of: server, containing: "the file was replaced: \(path)", count: 1)
        #expect(log.components(separatedBy: "the file was replaced: \(path)").count - 1 == 1, "one load anew, at the time set, none at the chmod: \(log.suffix(2_000))")
        #expect(log.components(separatedBy: "loaded \(path)").count - 1 == 2, "\(log.suffix(2_000))")

        // A new file copied in with its mode and times (`cp -p`, which sets them before it
        // closes the file) loads once, at its close. A file of no plugin copied in after it
        // says when its events have all been read.
        let echo = server.plugins.file("libCEcho.so").path, sentinel = server.plugins.file("sentinel.so").path
        #expect(try await runProcess("/bin/cp", ["-p", try TestPaths.product("libCEcho.so").path, echo]).status == 0)
        try Data("not a plugin\n".utf8).write(to: URL(fileURLWithPath: sentinel))
        log = await Self.log(of: server, containing: "skipped \(sentinel)", count: 1)
        #expect(log.components(separatedBy: "loaded \(echo)").count - 1 == 1 && !log.contains("\(echo) is unchanged"), "\(log.suffix(2_000))")
        await server.stop()
    }

    /// Opening a plugin for writing and closing it unchanged (as a process that inherited a
    /// writable descriptor to it does when it exits) leaves it loaded: no moment without its handlers.
    /// The writer waits for the log to say each close was seen before the next: the kernel merges
    /// a close event with an identical one not yet read, so a watcher that lags would see fewer.
    @Test func aFileClosedAfterWritingButUnchangedStaysLoaded() async throws {
        let server = try await ServerTests.Server(arguments: ["--log-level", "debug"])
        defer { server.work.remove() }
        let output = try await Self.greetWhile("""
            for n in range(1, 21):
                open(path, 'ab').close()
                deadline = time.time() + 60
                while open(log).read().count('is unchanged since it was loaded') < n and time.time() < deadline: time.sleep(0.01)
            """, server: server)
        #expect(output == "done\n")
        let log = await Self.log(of: server, containing: "is unchanged since it was loaded", count: 20)
        #expect(log.components(separatedBy: "is unchanged since it was loaded").count - 1 == 20, "\(log.suffix(2_000))")
        #expect(!log.contains("the file was replaced"))
        await server.stop()
    }

    /// An isolated plugin quarantined for crashing says so where a person looks (its calls'
    /// errors, `cmdbus plugins` and `status`, their JSON) and what ends it; touching its file, with no new
    /// build, loads it anew, with no crashes counted, and its commands run again.
    @Test func aQuarantinedPluginIsListedAsSuchAndATouchOfItsFileLoadsItAnew() async throws {
        let work = try TemporaryDirectory("cmdbus-serve")
        let path = try await compileFixture("misbehave", into: try work.subdirectory("plugins")).path
        let server = try await ServerTests.Server(work: work, arguments: ["--isolate"])
        defer { server.work.remove() }
        func client(_ arguments: String...) async throws -> ProcessResult {
            try await cmdbus(arguments + ["--connect", server.socket], directory: server.work.url)
        }
        for _ in 0..<3 { #expect(try await client("run", "bad.segv", "{}").status != 0) }
        let quarantine = "quarantined: its worker crashed 3 times within 60 seconds (last: crashed with SIGSEGV); "
            + "replace its file with a fixed build, or try the same one again: 'cmdbus plugins forget FILE --connect' (--bus URL on the shared bus), or touch it"
        let refused = try await client("run", "ok.echo", "{}")
        #expect(refused.status != 0 && refused.stderr.contains(quarantine), "\(refused.stderr)")
        let listed = try await client("plugins")
        #expect(listed.stdout.contains("\n    " + quarantine + "\n"), "\(listed.stdout)")
        let status = try await client("status")
        #expect(status.stdout.contains("\nwarning: plugin 'misbehave' (\(path)) \(quarantine)\n"), "\(status.stdout)")
        let greeter = try #require(try Self.listed("greeter", in: try await client("plugins", "--json").stdout))
        let greeterWorker = greeter["isolated"] as? [String: Any]
        #expect(greeterWorker?["running"] is Bool && greeterWorker?["restarts"] as? Int == 0 && greeterWorker?["quarantine"] == nil)
        let misbehaving = try #require(try Self.listed("misbehave", in: try await client("plugins", "--json").stdout))
        #expect((misbehaving["isolated"] as? [String: Any])?["quarantine"] as? String == quarantine)

        #expect(try await runProcess("/usr/bin/touch", [path]).status == 0)
        let log = await Self.log(of: server, containing: "the file was replaced: \(path)", count: 1)
        #expect(log.contains("the file was replaced: \(path)"), "\(log.suffix(2_000))")
        let echoed = try await client("run", "ok.echo", #"{"a":1}"#)
        #expect(echoed.status == 0 && echoed.stdout == "{\"a\":1}\n", "\(echoed.stderr)")
        let relisted = try await client("plugins")
        #expect(!relisted.stdout.contains("quarantined") && relisted.stdout.contains("\n    isolated: its worker is running as pid "), "\(relisted.stdout)")
        #expect(!(try await client("status").stdout.contains("quarantined")))
        await server.stop()
    }

    /// `cmdbus plugins forget FILE --connect` has a server load a file again with no change to
    /// it: an isolated plugin quarantined for crashing gets a new worker, and a file the probe
    /// quarantined is probed again, and loads once what broke it is gone (and leaves the list of
    /// skipped files). A file that is not one of the server's plugin files is refused, named.
    @Test func forgetOnAServerLoadsAQuarantinedFileAgainWithoutAChangeToIt() async throws {
        let work = try TemporaryDirectory("cmdbus-serve")
        let plugins = try work.subdirectory("plugins")
        let misbehave = try await compileFixture("misbehave", into: plugins).path
        let flag = work.file("crash-now").path
        #expect(FileManager.default.createFile(atPath: flag, contents: nil))
        let steady = try await compileFixture("crash_entry", into: plugins, as: "steady.so", defines: ["CRASH_WHILE_FILE_EXISTS=\"\(flag)\""]).path
        let server = try await ServerTests.Server(work: work, arguments: ["--isolate"])
        defer { server.work.remove() }
        func client(_ arguments: String...) async throws -> ProcessResult {
            try await cmdbus(arguments + ["--connect", server.socket], directory: server.work.url)
        }
        func modified(_ path: String) throws -> Date? { try FileManager.default.attributesOfItem(atPath: path)[.modificationDate] as? Date }

        for _ in 0..<3 { #expect(try await client("run", "bad.segv", "{}").status != 0) }
        #expect(try await client("run", "ok.echo", "{}").stderr.contains("quarantined"))
        let unchanged = try modified(misbehave)
        let forgot = try await client("plugins", "forget", "plugins/misbehave.so")
        #expect(forgot.status == 0 && forgot.stdout.hasPrefix("loaded again: misbehave 1 (\(misbehave)): "), "\(forgot.stdout) \(forgot.stderr)")
        let echoed = try await client("run", "ok.echo", #"{"a":1}"#)
        #expect(echoed.status == 0 && echoed.stdout == "{\"a\":1}\n", "\(echoed.stderr)")
        #expect(!(try await client("plugins").stdout.contains("quarantined: its worker crashed")))
        #expect(try modified(misbehave) == unchanged)

        func skipped() async throws -> [[String: Any]] {
            try jsonObject(try await client("plugins", "--json").stdout)["skipped"] as? [[String: Any]] ?? []
        }
        let quarantine = try #require(try await skipped().first { $0["path"] as? String == steady })
        #expect(quarantine["quarantined"] as? Bool == true)
        #expect((quarantine["reason"] as? String)?.hasSuffix("run 'cmdbus plugins forget FILE' to probe the same one again (with --connect, a running server loads it at once)") == true)
        let stillCrashing = try await client("plugins", "forget", steady)
        #expect(stillCrashing.status == 1 && stillCrashing.stderr.contains("\(steady): quarantined: crashed with SIGSEGV while loading (in the probe)"), "\(stillCrashing.stderr)")
        try FileManager.default.removeItem(atPath: flag)
        let loaded = try await client("plugins", "forget", steady, "--json")
        #expect(loaded.status == 0, "\(loaded.stderr)")
        #expect((try jsonObject(loaded.stdout)["plugin"] as? [String: Any])?["name"] as? String == "steady")
        let steadyEcho = try await client("run", "steady.echo", #"{"b":2}"#)
        #expect(steadyEcho.status == 0 && steadyEcho.stdout == "{\"b\":2}\n", "\(steadyEcho.stderr)")
        #expect(try await skipped().isEmpty)

        let stranger = try await client("plugins", "forget", "/etc/hostname")
        #expect(stranger.status == 1 && stranger.stderr.contains("/etc/hostname: it is not a plugin file (.so) in this host's plugin directories"), "\(stranger.stderr)")
        let missing = try await client("plugins", "forget", "plugins/nothing.so")
        #expect(missing.status == 1 && missing.stderr.contains("nothing.so: there is no such file"), "\(missing.stderr)")
        // A bare name is the file of that name in the server's directories, wherever the client runs.
        let byName = try await cmdbus(["plugins", "forget", "misbehave.so", "--connect", server.socket])
        #expect(byName.status == 0 && byName.stdout.hasPrefix("loaded again: misbehave 1 (\(misbehave)): "), "\(byName.stdout) \(byName.stderr)")
        let noSuchName = try await cmdbus(["plugins", "forget", "nothing.so", "--connect", server.socket])
        #expect(noSuchName.status == 1 && noSuchName.stderr.contains("nothing.so: no plugin file of that name is in this host's plugin directories"), "\(noSuchName.stderr)")
        await server.stop()
    }

    /// The plugin named `name` in a `cmdbus plugins --json` listing.
    static func listed(_ name: String, in output: String) throws -> [String: Any]? {
        let plugins = try jsonObject(output)["plugins"] as? [[String: Any]]
        return plugins?.first { $0["name"] as? String == name }
    }

    /// A plugin replaced whole, again and again, while its command is sent: every send is
    /// answered by the old handler or the new one, and each replacement is loaded (the
    /// writer waits for the log to say so before the next).
    @Test func aReplacedPluginTakesOverWithoutAGap() async throws {
        let server = try await ServerTests.Server()
        defer { server.work.remove() }
        let output = try await Self.greetWhile("""
            for n in range(1, 6):
                shutil.copy(built, path + '.new'); os.rename(path + '.new', path)
                deadline = time.time() + 60
                while open(log).read().count('the file was replaced: ') < n and time.time() < deadline: time.sleep(0.01)
            """, server: server)
        #expect(output == "done\n")
        let log = try String(contentsOfFile: server.log, encoding: .utf8)
        #expect(log.components(separatedBy: "the file was replaced: ").count - 1 == 5, "\(log.suffix(2_000))")
        await server.stop()
    }

    /// A replacement that cannot be loaded is logged and skipped; the plugin loaded before
    /// keeps its commands, and a later good replacement loads.
    @Test func aReplacementThatDoesNotLoadLeavesTheOldPluginServing() async throws {
        let server = try await ServerTests.Server()
        defer { server.work.remove() }
        let path = server.plugins.file("libGreeter.so").path
        try Data("not a shared library\n".utf8).write(to: URL(fileURLWithPath: path + ".new"))
        #expect(rename(path + ".new", path) == 0)
        let log = await Self.log(of: server, containing: "skipped the replacement of \(path): ", count: 1)
        #expect(log.contains("the plugin loaded before keeps its commands"), "\(log.suffix(2_000))")
        let output = try await server.client("""
            s, f = connect()
            print(ask(f, {"id": 1, "op": "send", "command": "greet", "payload": {"name": "Ada"}})["result"]["greeting"])
            print(any(p["name"] == "greeter" for p in ask(f, {"id": 2, "op": "plugins"})["plugins"]))
            """)
        #expect(output == "Hello, Ada!\nTrue\n")

        try copyClosingOnExec(try TestPaths.product("libGreeter.so"), to: URL(fileURLWithPath: path + ".good"))
        #expect(rename(path + ".good", path) == 0)
        let replaced = await Self.log(of: server, containing: "the file was replaced: \(path)", count: 1)
        #expect(replaced.contains("loaded \(path): greeter"), "\(replaced.suffix(2_000))")
        await server.stop()
    }

    /// An isolated plugin replaced while its commands run: they finish in the old worker, new
    /// ones run in a worker of the new file, and the old worker is gone once its calls have ended.
    @Test func anIsolatedPluginReplacedWhileItsCommandsRunLetsThemFinish() async throws {
        let server = try await ServerTests.Server(arguments: ["--isolate"])
        defer { server.work.remove() }
        let path = server.plugins.file("libFixturePlugin.so").path
        let workers = { @Sendable () async throws -> [String] in
            let listed = try await runProcess("/usr/bin/pgrep", ["-f", "--", "--cmdbus-worker \(path)"])
            return listed.stdout.split(separator: "\n").map(String.init)
        }
        let output = try await server.client("""
            import os, shutil, time
            path, built, log = sys.argv[2], sys.argv[3], sys.argv[4]
            s, f = connect()
            for n in range(4):
                f.write(json.dumps({"id": n, "op": "send", "command": "fixture.sleep", "payload": {"milliseconds": 1500}}) + '\\n')
            f.flush()
            time.sleep(0.5)
            shutil.copy(built, path + '.new'); os.rename(path + '.new', path)
            deadline = time.time() + 60
            while 'the file was replaced: ' not in open(log).read() and time.time() < deadline: time.sleep(0.01)
            c, g = connect()
            print(ask(g, {"id": "new", "op": "send", "command": "fixture.sleep", "payload": {"milliseconds": 1}})["ok"])
            print(sorted(json.loads(f.readline())["ok"] for _ in range(4)))
            """, path, try TestPaths.product("libFixturePlugin.so").path, server.log)
        #expect(output == "True\n[True, True, True, True]\n", "\(String((try? String(contentsOfFile: server.log, encoding: .utf8))?.suffix(2_000) ?? ""))")
        #expect(await waitUntil(.seconds(30)) { ((try? await workers()) ?? []).count == 1 }, "the old worker outlived its calls")
        await server.stop()
    }

    /// A command still running in a replaced plugin's old worker when the drain (`--drain 1`)
    /// ends and stops that worker is taken by the plugin that replaced it, and succeeds, its log
    /// saying why it ran again. It failed with "its worker was stopped before this call ended".
    /// The command runs until the test has seen it run again, so the drain ends first however
    /// slowly a loaded machine notices the new file and starts its worker: a CI run replaced the
    /// file more than 2 s after a 3 s command had started, and another 10 s after a 10 s one,
    /// and each command ended in the old worker.
    @Test func aCommandOutlastingAReplacedPluginsDrainRunsInItsReplacement() async throws {
        let server = try await ServerTests.Server(drain: "1", arguments: ["--isolate"])
        defer { server.work.remove() }
        let path = server.plugins.file("libFixturePlugin.so").path
        let ranAgain = server.work.file("ran-again").path
        let sleep = #"{"milliseconds": 120000, "stubborn": true, "untilFileExists": "\#(ranAgain)"}"#
        async let slept = cmdbus(["run", "fixture.sleep", sleep, "--connect", server.socket], directory: server.work.url)
        // Running: its call is in the old worker's hands.
        #expect(await waitUntil(.seconds(30)) {
            let status = try? await cmdbus(["status", "--json", "--connect", server.socket], directory: server.work.url)
            return status?.stdout.contains(#""state":"running""#) == true
        })
        try copyClosingOnExec(try TestPaths.product("libFixturePlugin.so"), to: URL(fileURLWithPath: path + ".new"))
        #expect(rename(path + ".new", path) == 0)
        let log = await Self.log(of: server, containing: "running fixture.sleep again on a new worker (1 of 2)", count: 1)
        #expect(FileManager.default.createFile(atPath: ranAgain, contents: nil))
        let result = try await slept
        #expect(result.status == 0 && result.stdout == "{\"sawCancellation\":false}\n", "\(result.stderr)")
        #expect(log.contains("its file was removed or replaced, and its worker was stopped before this call ended; running fixture.sleep again"), "\(log.suffix(2_000))")
        await server.stop()
    }

    /// An isolated plugin replaced while many of its commands are on their way to it: one
    /// routed to the old plugin just before it came off the bus, whose worker then stopped, is
    /// handed to the new one; none fails. (Before, 181 sends of one run failed with "its file
    /// was removed or replaced, so its worker is not started again".)
    @Test func anIsolatedPluginReplacedUnderLoadLosesNoCommand() async throws {
        let server = try await ServerTests.Server(arguments: ["--isolate"])
        defer { server.work.remove() }
        let output = try await server.client("""
            import os, shutil, threading, time
            path, built, log = sys.argv[2], sys.argv[3], sys.argv[4]
            replacing = True
            failures = []
            def load():
                # Written with sendall and read from a reader of its own: a text file that is
                # written between reads drops the answers it had read ahead.
                s, _ = connect()
                answers = s.makefile('r')
                sent = answered = 0
                while replacing or answered < sent:
                    while replacing and sent - answered < 16:
                        s.sendall((json.dumps({"id": sent, "op": "send", "command": "greet", "payload": {"name": "n"}}) + '\\n').encode()); sent += 1
                    answer = json.loads(answers.readline()); answered += 1
                    if not answer["ok"]: failures.append(answer["error"]["message"])
            loaders = [threading.Thread(target=load) for _ in range(4)]
            for loader in loaders: loader.start()
            for n in range(1, 6):
                time.sleep(0.3)
                shutil.copy(built, path + '.new'); os.rename(path + '.new', path)
                deadline = time.time() + 60
                while open(log).read().count('the file was replaced: ') < n and time.time() < deadline: time.sleep(0.01)
            time.sleep(0.3)
            replacing = False
            for loader in loaders: loader.join()
            print(len(failures), sorted(set(failures))[:3])
            """, server.plugins.file("libGreeter.so").path, try TestPaths.product("libGreeter.so").path, server.log)
        #expect(output == "0 []\n", "\(String((try? String(contentsOfFile: server.log, encoding: .utf8))?.suffix(2_000) ?? ""))")
        await server.stop()
    }

    /// A plugin loaded into the server's process and replaced at its path runs its new code:
    /// the replacement is opened from a private copy, made in the temporary directory or, where
    /// that cannot be made, in the plugin's own directory, and removed once open.
    @Test(arguments: [false, true])
    func anInProcessPluginReplacedAtItsPathRunsItsNewCode(withoutATemporaryDirectory: Bool) async throws {
        let server = try await ServerTests.Server(environment: withoutATemporaryDirectory ? ["TMPDIR": "/nonexistent/cmdbus-tmp"] : [:])
        defer { server.work.remove() }
        let path = server.plugins.file("bonjour.so").path
        var answers: [String] = []
        for (round, greeting) in ["one", "two", "three"].enumerated() {
            let built = try await compileFixture(
                "shadowing_greeter", into: server.plugins, as: "build-\(greeting).tmp", defines: ["GREETING=\"\(greeting)\""]
            )
            #expect(rename(built.path, path) == 0)
            _ = await Self.log(of: server, containing: "loaded \(path): bonjour", count: round + 1)
            answers.append(try await server.client("""
                s, f = connect()
                print(ask(f, {"id": 1, "op": "send", "command": "greet", "payload": {"name": "Ada"}})["result"]["greeting"])
                """))
        }
        let log = try String(contentsOfFile: server.log, encoding: .utf8)
        #expect(answers == ["one\n", "two\n", "three\n"], "\(log.suffix(2_000))")
        #expect(log.components(separatedBy: "the file was replaced: \(path)").count - 1 == 2)
        let left = try FileManager.default.contentsOfDirectory(atPath: server.plugins.path).filter { !$0.hasSuffix(".so") }
        #expect(left.isEmpty, "the private copies were left behind: \(left)")
        await server.stop()
    }

    /// A plugin file written over in place while the server runs its code (as `cp` onto it
    /// does: truncated, then written) neither crashes the server nor changes the code running:
    /// the server runs it from a private copy, and loads the new build once the file is closed.
    @Test func aPluginWrittenOverInPlaceWhileItRunsNeitherCrashesNorChangesIt() async throws {
        let server = try await ServerTests.Server()
        defer { server.work.remove() }
        let path = server.plugins.file("bonjour.so").path
        let first = try await compileFixture("shadowing_greeter", into: server.plugins, as: "build-one.tmp", defines: ["GREETING=\"one\""])
        #expect(rename(first.path, path) == 0)
        _ = await Self.log(of: server, containing: "loaded \(path): bonjour", count: 1)
        let second = try await compileFixture("shadowing_greeter", into: server.work, as: "two.so", defines: ["GREETING=\"two\""])
        let output = try await server.client("""
            import threading, time
            path, built = sys.argv[2], sys.argv[3]
            def overwrite():
                with open(built, 'rb') as b: data = b.read()
                with open(path, 'r+b') as f:
                    f.truncate(0); f.flush(); time.sleep(1)
                    for i in range(0, len(data), 1024):
                        f.write(data[i:i + 1024]); f.flush(); time.sleep(0.002)
            writing = threading.Thread(target=overwrite); writing.start()
            s, f = connect()
            answers = []
            while writing.is_alive():
                answer = ask(f, {"id": 1, "op": "send", "command": "greet", "payload": {"name": "n"}})
                answers.append(answer["result"]["greeting"] if answer["ok"] else answer["error"]["message"])
            writing.join()
            print(len(answers) > 3, sorted(set(answers)))
            """, path, second.path)
        // The last sends may meet the new build, loaded at the close.
        #expect(output == "True ['one']\n" || output == "True ['one', 'two']\n", "\(output)")
        let log = await Self.log(of: server, containing: "the file was replaced: \(path)", count: 1)
        #expect(server.process.isRunning, "the server died: \(log.suffix(2_000))")
        let after = try await server.client("""
            s, f = connect()
            print(ask(f, {"id": 1, "op": "send", "command": "greet", "payload": {"name": "Ada"}})["result"]["greeting"])
            """)
        #expect(after == "two\n")
        await server.stop()
    }

    /// Where no private copy can be made (the temporary directory missing, the plugin
    /// directory unwritable, as on a hardened host), the server still loads its plugins, from
    /// their own files, and says once what that risks.
    @Test(.enabled(if: Self.canMakeDirectoriesImmutable, "needs root and a temporary directory whose file system takes chattr +i"))
    func withNoPlaceForPrivateCopiesPluginsLoadFromTheirFiles() async throws {
        let work = try TemporaryDirectory("cmdbus-serve")
        let plugins = try work.subdirectory("plugins")
        try plugins.install("libGreeter.so", "libCounter.so", "libFixturePlugin.so")
        // Immutable: not even root can make a directory in it.
        try #require(await shell("chattr +i \(plugins.path)") == 0, "this test needs a file system with the immutable flag (ext4, XFS, btrfs)")
        defer { Task { await shell("chattr -i \(plugins.path)"); work.remove() } }
        let server = try await ServerTests.Server(work: work, environment: ["TMPDIR": "/nonexistent/cmdbus-tmp"])
        let output = try await server.client("""
            s, f = connect()
            print(ask(f, {"id": 1, "op": "send", "command": "greet", "payload": {"name": "Ada"}})["result"]["greeting"])
            """)
        #expect(output == "Hello, Ada!\n")
        await server.stop()
        let log = try String(contentsOfFile: server.log, encoding: .utf8)
        #expect(log.components(separatedBy: "run from their own files").count - 1 == 1, "\(log)")
        #expect(log.contains("in /nonexistent/cmdbus-tmp: cannot make a directory (No such file or directory)"), "\(log)")
    }

    /// The metrics count every plugin image the server mapped, replaced ones included (they
    /// stay in memory), so an operator can see what a server that reloads often has grown by.
    @Test func theMetricsCountTheImagesReplacementsLeaveInMemory() async throws {
        let server = try await ServerTests.Server(arguments: ["--http", "127.0.0.1:0"])
        defer { server.work.remove() }
        let started = await Self.log(of: server, containing: "dashboard on ", count: 1)
        let url = try #require(dashboardURL(in: started)) + "/metrics"
        let images = { @Sendable () async throws -> [String] in
            let scrape = try await runProcess("/usr/bin/env", ["python3", "-c", "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1]).read().decode())", url])
            return scrape.stdout.split(separator: "\n").filter { $0.hasPrefix("cmdbus_plugin_image") }.map(String.init)
        }
        let before = try await images()
        #expect(before.first == "cmdbus_plugin_images 3", "\(before)")  // greeter, counter, fixture
        let path = server.plugins.file("bonjour.so").path
        for (round, greeting) in ["one", "two", "three"].enumerated() {
            let built = try await compileFixture(
                "shadowing_greeter", into: server.plugins, as: "build-\(greeting).tmp", defines: ["GREETING=\"\(greeting)\""]
            )
            #expect(rename(built.path, path) == 0)
            _ = await Self.log(of: server, containing: "loaded \(path): bonjour", count: round + 1)
        }
        let after = try await images()
        #expect(after.first == "cmdbus_plugin_images 6", "\(after)")
        let bytes = { (lines: [String]) in lines.last.flatMap { Double($0.split(separator: " ").last ?? "") } ?? 0 }
        #expect(bytes(after) > bytes(before), "\(before) \(after)")
        await server.stop()
    }

    /// A plugin directory that does not exist when the server starts is watched for: once it
    /// is created, the plugins in it load, and so do those copied in later.
    @Test func aPluginDirectoryCreatedAfterTheStartIsLoadedAndWatched() async throws {
        let work = try TemporaryDirectory("cmdbus-serve")
        let late = work.file("late").path
        let server = try await ServerTests.Server(work: work, arguments: ["--plugins", late])
        defer { server.work.remove() }
        let waiting = await Self.log(of: server, containing: "plugin directory \(late) does not exist yet", count: 1)
        #expect(waiting.contains("its plugins load once it is created"), "\(waiting.suffix(2_000))")
        let directory = try work.subdirectory("late")
        try directory.install("libCEcho.so")
        let created = await Self.log(of: server, containing: "loaded \(directory.file("libCEcho.so").path)", count: 1)
        #expect(created.contains("plugin directory \(late) was created; loading its plugins"), "\(created.suffix(2_000))")
        let output = try await server.client("""
            s, f = connect()
            print(json.dumps(ask(f, {"id": 1, "op": "send", "command": "c.echo", "payload": {"x": 1}})["result"]))
            print([s["path"] for s in ask(f, {"id": 2, "op": "plugins"})["catalog"]["skipped"]])
            """)
        #expect(output == "{\"x\": 1}\n[]\n", "\(output)")
        await server.stop()
    }

    /// More file events than the kernel queues for the watcher (the server stopped while a
    /// deploy writes): the events are lost, the kernel says so, and the watcher reads its
    /// directories again, so a plugin added meanwhile loads and one removed comes off.
    @Test func lostFileEventsAreMadeUpByReadingTheDirectoriesAgain() async throws {
        let server = try await ServerTests.Server()
        defer { server.work.remove() }
        let limit = Int(try String(contentsOfFile: "/proc/sys/fs/inotify/max_queued_events", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)) ?? 16_384
        server.process.send(SIGSTOP)
        // Two names in turn, as the kernel merges an event into an identical one before it.
        let flood = try await runProcess("/usr/bin/env", ["python3", "-c", """
            import sys, os
            d, n = sys.argv[1], int(sys.argv[2])
            for i in range(n): open(os.path.join(d, 'noise%d.txt' % (i % 2)), 'w').close()
            """, server.plugins.path, String(limit + 1_000)])
        try #require(flood.status == 0, "\(flood.stderr)")
        try server.plugins.install("libCEcho.so")
        try FileManager.default.removeItem(atPath: server.plugins.file("libCounter.so").path)
        server.process.send(SIGCONT)
        let log = await Self.log(of: server, containing: "loaded \(server.plugins.file("libCEcho.so").path)", count: 1)
        #expect(log.contains("plugin file events were lost (the kernel's queue for them overflowed); reading the plugin directories again"), "\(log.suffix(2_000))")
        let output = try await server.client("""
            s, f = connect()
            print(json.dumps(ask(f, {"id": 1, "op": "send", "command": "c.echo", "payload": {"x": 1}})["result"]))
            print(ask(f, {"id": 2, "op": "send", "command": "counter.get", "payload": {}})["error"]["code"])
            print(ask(f, {"id": 3, "op": "send", "command": "greet", "payload": {"name": "Ada"}})["ok"])
            """)
        #expect(output == "{\"x\": 1}\nnoHandler\nTrue\n", "\(output)")
        await server.stop()
    }

    /// A plugin directory whose path is a symbolic link follows the link when a deploy points it
    /// at a new release (`ln -sfn`, or a new link moved over it): what the new release holds
    /// loads, a file of the same name replaces the loaded one, and what it lacks comes off. The
    /// server went on watching the old release until a SIGHUP.
    @Test func aPluginDirectoryLinkPointedAtANewReleaseIsFollowed() async throws {
        let work = try TemporaryDirectory("cmdbus-serve")
        let first = try work.subdirectory("release-1"), second = try work.subdirectory("release-2"), empty = try work.subdirectory("release-3")
        try first.install("libCEcho.so")
        try second.install("libCEcho.so", "libGreetAll.so")
        let current = work.file("current").path
        try FileManager.default.createSymbolicLink(atPath: current, withDestinationPath: "release-1")
        let server = try await ServerTests.Server(work: work, arguments: ["--plugins", current])
        defer { server.work.remove() }
        let ask = """
            s, f = connect()
            for i, (command, payload) in enumerate([("c.echo", {"x": 1}), ("greet-all", {"names": ["Ada"]})]):
                answer = ask(f, {"id": i, "op": "send", "command": command, "payload": payload})
                print(command, "ok" if answer["ok"] else answer["error"]["code"])
            """
        #expect(try await server.client(ask) == "c.echo ok\ngreet-all noHandler\n")
        let relinked = "plugin directory \(current) is a symbolic link made anew"

        // A new link moved over the old one, as a deploy that must never leave the path missing does.
        try FileManager.default.createSymbolicLink(atPath: work.file("current.new").path, withDestinationPath: "release-2")
        #expect(rename(work.file("current.new").path, current) == 0)
        let log = await Self.log(of: server, containing: "loaded \(current)/libGreetAll.so", count: 1)
        #expect(log.contains(relinked) && log.contains("the file was replaced: \(current)/libCEcho.so"), "\(log.suffix(2_000))")
        #expect(try await server.client(ask) == "c.echo ok\ngreet-all ok\n")

        // Removed and made again (ln -sfn), to a release without plugins: theirs come off.
        #expect(unlink(current) == 0 && symlink("release-3", current) == 0)
        // Each line waited for itself: the log is written as the watcher goes (a rehearsal read it between two lines).
        for file in ["libCEcho.so", "libGreetAll.so"] {
            let emptied = await Self.log(of: server, containing: "the file is not in the directory the link leads to now: \(current)/\(file)", count: 1)
            #expect(emptied.components(separatedBy: relinked).count - 1 == 2, "\(emptied.suffix(2_000))")
        }
        #expect(try await server.client(ask) == "c.echo noHandler\ngreet-all noHandler\n")
        // And the release it leads to now is the one watched.
        try empty.install("libCEcho.so")
        _ = await Self.log(of: server, containing: "loaded \(current)/libCEcho.so", count: 2)  // the first: the replacement
        #expect(try await server.client(ask) == "c.echo ok\ngreet-all noHandler\n")
        await server.stop()
    }

    /// A plugin directory moved away or removed while the server runs: its plugins come off
    /// the bus (their commands have no handler), and it is watched for again, so its plugins
    /// load when it is moved back or created anew.
    @Test func aPluginDirectoryRemovedOrMovedAwayIsWatchedForAgain() async throws {
        let work = try TemporaryDirectory("cmdbus-serve")
        let directory = try work.subdirectory("more")
        try directory.install("libCEcho.so")
        try Data("not a shared library\n".utf8).write(to: directory.file("broken.so"))
        let server = try await ServerTests.Server(work: work, arguments: ["--plugins", directory.path])
        defer { server.work.remove() }
        let echo = """
            s, f = connect()
            answer = ask(f, {"id": 1, "op": "send", "command": "c.echo", "payload": {"x": 1}})
            print(json.dumps(answer["result"]) if answer["ok"] else answer["error"]["code"])
            """
        #expect(try await server.client(echo) == "{\"x\": 1}\n")
        let gone = "plugin directory \(directory.path) was removed or moved away"
        let loaded = "loaded \(directory.file("libCEcho.so").path)"

        // Moved away: nothing of it runs, and moving it back loads it again.
        #expect(rename(directory.path, work.file("more.old").path) == 0)
        let moved = await Self.log(of: server, containing: gone, count: 1)
        #expect(moved.contains(gone + "; 1 plugin taken off the bus; its plugins load again once it is created"), "\(moved.suffix(2_000))")
        #expect(try await server.client(echo) == "noHandler\n")
        // The listing says it is missing, as one missing at start, and no longer lists its file
        // skipped; once it is back, the other way round.
        let listing = "print(sorted((x['path'].split('/')[-1], x['reason'] == 'plugin directory does not exist') for x in ask(connect()[1], {'id': 1, 'op': 'plugins'})['catalog']['skipped']))"
        #expect(try await server.client(listing) == "[('more', True)]\n")
        #expect(rename(work.file("more.old").path, directory.path) == 0)
        _ = await Self.log(of: server, containing: loaded, count: 1)
        #expect(try await server.client(echo) == "{\"x\": 1}\n")
        #expect(try await server.client(listing) == "[('broken.so', False)]\n")

        // Removed with its files, then made again.
        try FileManager.default.removeItem(atPath: directory.path)
        let log = await Self.log(of: server, containing: gone, count: 2)
        #expect(log.components(separatedBy: gone).count - 1 == 2, "\(log.suffix(2_000))")
        #expect(try await server.client(echo) == "noHandler\n")
        try work.subdirectory("more").install("libCEcho.so")
        _ = await Self.log(of: server, containing: loaded, count: 2)
        #expect(try await server.client(echo) == "{\"x\": 1}\n")
        await server.stop()
    }
}
