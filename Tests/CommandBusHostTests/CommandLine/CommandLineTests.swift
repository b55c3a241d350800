import Foundation
import Testing

/// End-to-end: the built `cmdbus` binary, its stdout, stderr and exit code.
struct CommandLineTests {
    @Test func runPrintsTheResultOnStdout() async throws {
        let plugins = try examplePluginDirectory()
        defer { plugins.remove() }
        let result = try await cmdbus("run", "greet", #"{"name": "Ada"}"#, "--plugins", plugins.path)
        #expect(result.status == 0)
        #expect(result.stdout == "{\"greeting\":\"Hello, Ada!\"}\n")
        #expect(result.stderr.isEmpty)
    }

    @Test func paramsBuildThePayload() async throws {
        let plugins = try examplePluginDirectory()
        defer { plugins.remove() }
        let result = try await cmdbus("run", "c.echo", "-p", "name=Ada", "-p", "count=3", "-p", "tags=[\"a\"]", "--plugins", plugins.path)
        #expect(result.status == 0)
        #expect(try jsonObject(result.stdout) as NSDictionary == ["name": "Ada", "count": 3, "tags": ["a"]] as NSDictionary)
        // A short option's value may be attached, as getopt allows (it was an unknown option).
        let attached = try await cmdbus("run", "c.echo", "-pname=Ada", "-pcount=3", "--plugins", plugins.path)
        #expect(try attached.status == 0 && jsonObject(attached.stdout) as NSDictionary == ["name": "Ada", "count": 3] as NSDictionary, "\(attached.stderr)")
    }

    /// A payload from a file (`@PATH`) or standard input (`-`, `@-`), which can be larger than
    /// one argument may be (128 KiB); what is wrong with one says where.
    @Test func aPayloadComesFromAFileOrStandardInput() async throws {
        let plugins = try examplePluginDirectory()
        defer { plugins.remove() }
        let payload = plugins.file("p.json")
        try #"{"name": "File"}"#.write(to: payload, atomically: true, encoding: .utf8)
        let fromFile = try await cmdbus("run", "greet", "@" + payload.path, "--plugins", plugins.path)
        #expect(fromFile.status == 0 && fromFile.stdout == "{\"greeting\":\"Hello, File!\"}\n", "\(fromFile.stderr)")
        let cmdbusPath = try TestPaths.product("cmdbus").path
        func shell(_ line: String) async throws -> ProcessResult {
            try await runProcess("/bin/sh", ["-c", line, cmdbusPath, plugins.path, payload.path], directory: plugins.url)
        }
        let fromInput = try await shell(#""$0" run greet - --no-journal --plugins "$1" < "$2""#)
        #expect(fromInput.stdout == "{\"greeting\":\"Hello, File!\"}\n", "\(fromInput.stderr)")
        // A file saved with a byte order mark, as some editors save JSON.
        let marked = plugins.file("marked.json")
        try Data([0xEF, 0xBB, 0xBF] + Array(#"{"name": "Marked"}"#.utf8)).write(to: marked)
        let fromMarked = try await cmdbus("run", "greet", "@" + marked.path, "--no-journal", "--plugins", plugins.path)
        #expect(fromMarked.stdout == "{\"greeting\":\"Hello, Marked!\"}\n", "\(fromMarked.stderr)")
        let fromPipe = try await shell(#"printf '{"name": "Pipe"}' | "$0" can greet @- --plugins "$1" && echo can"#)
        #expect(fromPipe.stdout == "can\n", "\(fromPipe.stderr)")

        let large = plugins.file("large.json")
        try #"{"name": "\#(String(repeating: "x", count: 300_000))"}"#.write(to: large, atomically: true, encoding: .utf8)
        let fromLarge = try await cmdbus("run", "greet", "@" + large.path, "--no-journal", "--plugins", plugins.path)
        #expect(fromLarge.status == 0 && fromLarge.stdout.count == 300_024, "\(fromLarge.stderr)")

        let bad = plugins.file("bad.json")
        try "{\n  \"name\": x}".write(to: bad, atomically: true, encoding: .utf8)
        let failures: [(ProcessResult, Int32, String)] = [
            (try await cmdbus("run", "greet", "@" + bad.path, "--plugins", plugins.path), 65,
             "payload for 'greet' in file '\(bad.path)' is not valid JSON: unexpected 'x' at line 2, column 11; fix the file"),
            (try await cmdbus("run", "greet", "@" + plugins.file("missing.json").path, "--plugins", plugins.path), 66,
             "cannot read the payload file '\(plugins.file("missing.json").path)' (No such file or directory); give @PATH of a JSON file, or - to read standard input"),
            (try await cmdbus("run", "greet", "@" + plugins.path, "--plugins", plugins.path), 66, "(Is a directory)"),
            (try await cmdbus("run", "greet", "@" + large.path, "--max-payload", "1000", "--plugins", plugins.path), 65,
             "payload for 'greet' in file '\(large.path)' is more than the 1000-byte limit; raise --max-payload if the handlers take it"),
            (try await shell(#"printf '{"name": "\377"}' | "$0" run greet - --plugins "$1""#), 65, "payload for 'greet' on standard input is not UTF-8 text"),
            (try await shell(#"printf '{"name": x' | "$0" run greet - --plugins "$1""#), 65,
             "payload for 'greet' on standard input is not valid JSON: unexpected 'x' at line 1, column 10; send one JSON value there"),
        ]
        for (result, status, message) in failures {
            #expect(result.status == status && result.stderr.hasPrefix("cmdbus: error: ") && result.stderr.contains(message), "\(result.stderr)")
            #expect(result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
        }
    }

    @Test func subcommandEventsGoToStderr() async throws {
        let plugins = try examplePluginDirectory()
        defer { plugins.remove() }
        let result = try await cmdbus("run", "greet-all", #"{"names":["Ada","Lin"]}"#, "--plugins", plugins.path)
        #expect(result.status == 0)
        #expect(result.stdout == "{\"greetings\":[\"Hello, Ada!\",\"Hello, Lin!\"]}\n")
        #expect(result.stderr.contains(#"event greet-all: greeted {"done":2,"name":"Lin","total":2}"#))
        #expect(result.stderr.contains("info greet-all: greeted 2 people"))
    }

    @Test(arguments: [false, true])
    func aHandlersOwnProgressIsTheCommandsProgress(isolated: Bool) async throws {
        let plugins = try examplePluginDirectory()
        defer { plugins.remove() }
        let result = try await cmdbus(
            ["run", "greet-all", #"{"names":["Ada","Lin","Bo"]}"#, "--json", "--plugins", plugins.path] + (isolated ? ["--isolate"] : [])
        )
        #expect(result.status == 0, "\(result.stderr)")
        let progress = result.stderr.split(separator: "\n").compactMap { try? jsonObject(String($0))["event"] as? [String: Any] }
            .filter { $0["kind"] as? String == "progress" && $0["parentId"] == nil }
            .map { "\($0["completed"] as? Int ?? -1)/\($0["total"] as? Int ?? -1)" }
        // The handler's own count (0/3 … 3/3), not the subcommands finished so far (1/1, 2/2, …).
        #expect(progress == ["0/3", "1/3", "2/3", "3/3"], "\(progress)")
    }

    @Test func aDebugBuildPluginIsFlagged() async throws {
        let plugins = try examplePluginDirectory()
        defer { plugins.remove() }
        let text = try await cmdbus("plugins", "--plugins", plugins.path)
        let json = try await cmdbus("plugins", "--json", "--plugins", plugins.path)
        let entries = try #require((try jsonObject(json.stdout))["plugins"] as? [[String: Any]])
        let greeter = try #require(entries.first { $0["name"] as? String == "greeter" })
        let c = try #require(entries.first { $0["name"] as? String == "c-echo" })
        // The test products are debug builds, or all release ones; the C example says nothing of
        // how it was built.
        let debug = !TestPaths.productsAreReleaseBuilds
        #expect(greeter["debugBuild"] as? Bool == debug && greeter["abi"] as? String == "1.4")
        #expect(c["debugBuild"] as? Bool == false)
        #expect(text.stdout.contains("debug build: unoptimized, often ten times slower; rebuild it with 'swift build -c release'") == debug)
    }

    @Test func theEnvironmentNamesThePluginDirectories() async throws {
        let plugins = try examplePluginDirectory()
        defer { plugins.remove() }
        let result = try await cmdbus("run", "greet", "-p", "name=Lin", environment: ["CMDBUS_PLUGINS": "/nonexistent:" + plugins.path])
        #expect(result.status == 0)
        #expect(result.stdout == "{\"greeting\":\"Hello, Lin!\"}\n")
        #expect(result.stderr == "cmdbus: warning: skipped /nonexistent: plugin directory does not exist\n")
    }

    /// Found by hand: a payload argument holding a byte that is not UTF-8 ran with U+FFFD in its
    /// place ("Hello, \u{FFFD}!"), as Swift's `CommandLine.arguments` repairs it. A shell passes
    /// the raw bytes here; Foundation's `Process` takes only strings.
    @Test func anArgumentThatIsNotUTF8IsRefusedNotRepaired() async throws {
        let work = try TemporaryDirectory()
        defer { work.remove() }
        try work.subdirectory("plugins").install("libGreeter.so")
        let script = #"exec "$0" run greet --no-journal "$(printf '{"name": "Ad\303\251\377"}')""#
        let refused = try await runProcess("/bin/sh", ["-c", script, try TestPaths.product("cmdbus").path], directory: work.url)
        #expect(refused.status == 64)
        #expect(refused.stdout == "")
        #expect(refused.stderr == "cmdbus: error: argument 4 is not UTF-8 text (byte 0xFF at byte 15 of it), which cmdbus would have to change; give it as UTF-8 (iconv -t UTF-8 converts a file) and run again\n")
        // The same bytes with the last left out are UTF-8, and run.
        let accepted = try await runProcess("/bin/sh", ["-c", script.replacingOccurrences(of: #"\377"#, with: ""), try TestPaths.product("cmdbus").path], directory: work.url)
        #expect(accepted.stdout == "{\"greeting\":\"Hello, Adé!\"}\n")
    }

    @Test func theDefaultDirectoryIsPluginsInTheWorkingDirectory() async throws {
        let work = try TemporaryDirectory()
        defer { work.remove() }
        try work.subdirectory("plugins").install("libGreeter.so")
        let result = try await cmdbus("run", "greet", "-p", "name=Ada", directory: work.url)
        #expect(result.stdout == "{\"greeting\":\"Hello, Ada!\"}\n")
    }

    @Test(arguments: [
        (["run", "greet", "not json"], Int32(65), "payload for 'greet' is not valid JSON: unexpected 'n' at line 1, column 1; quote it whole for the shell"),
        (["run", "greet", "{name: Ada}"], 65, "payload for 'greet' is not valid JSON: unexpected 'n' at line 1, column 2;"),
        (["run", "greet", "{\"name\": \"Ada\"\n]"], 65, "payload for 'greet' is not valid JSON: unexpected ']' at line 2, column 1;"),
        (["run", "greet", "{\"name\": \"Ad"], 65, "payload for 'greet' is not valid JSON: it ends at line 1, column 13 before the value does;"),
        (["run", "nope", "{\"é\": 1} x"], 65, "payload for 'nope' is not valid JSON: unexpected 'x' at line 1, column 10;"),
        (["run", "greet", #"{"name": "Ada", "n": 1e999}"#], 65, "payload for 'greet' is not valid JSON: the number 1e999 at line 1, column 22 is out of range"),
        (["run", "greet", "{\"name\": \"Ada\tLovelace\"}"], 65, #"is not valid JSON: a tab at line 1, column 14 is inside a string unescaped; write it \t;"#),
        (["run", "greet", #"{"nom":"x"}"#], 65, "missing field 'name'"),
        // JSON's words for what was wanted, not Swift's type names (`Dictionary<String, Any>`).
        (["run", "greet", #""Ada""#], 65, "does not decode in plugin 'greeter' (libGreeter.so): the payload should be an object"),
        (["run", "greet", #"{"name": 5}"#], 65, "does not decode in plugin 'greeter' (libGreeter.so): field 'name' should be a string"),
        (["run", "nope"], 69, "no handler for command 'nope'"),
        (["run", "greet", #"{"name":""}"#], 69, "1 handler is registered but would not take it now (the handler in plugin 'greeter' (libGreeter.so) declined it)"),
        (["run", "c.fail", "{}"], 1, "command 'c.fail' failed in plugin 'c-echo' (libCEcho.so): c.fail always fails, as asked"),
        (["run", "greet", "-p"], 64, "option '-p' of 'cmdbus run' needs a value"),
        (["run", "greet", "--frobnicate"], 64, "unknown option '--frobnicate' for 'cmdbus run'; see 'cmdbus run --help'"),
        (["run", "greet", "--tiemout", "3"], 64, "unknown option '--tiemout' for 'cmdbus run'; did you mean '--timeout'? see"),
        (["run"], 64, "'cmdbus run' needs a command name"),
        (["run", "greet", "-p", "novalue"], 64, "-p takes key=value"),
        (["run", "greet", "-p", "=x"], 64, "-p takes key=value, got '=x', which has no key; name the field before the '='"),
        (["run", "greet", "-m", "=x"], 64, "--meta takes key=value, got '=x', which has no key; name the key before the '='"),
        (["run", "greet", "-m", "trace"], 64, "--meta takes key=value, got 'trace'; write it as one argument: --meta trace=VALUE"),
        (["run", "", "{}"], 64, "'' is not a command name: it is empty; 'cmdbus plugins' lists the commands"),
        // Found by hand: names no plugin can declare were journaled as failed commands (and `can` answered no).
        (["run", "greet "], 64, "'greet ' is not a command name: it holds whitespace; a command's name is one word; 'cmdbus plugins' lists the commands"),
        (["can", "x\u{7F}"], 64, "is not a command name: it holds a control character (U+7F); a command's name is printable;"),
        (["run", String(repeating: "x", count: 256)], 64, "is not a command name: it is 256 bytes long, and a command's name is at most 255;"),
        (["run", "greet", "-p", "name=Ada", "-p", "name=Grace"], 64, "-p sets 'name' twice ('Ada', then 'Grace'); give each field once, or a JSON array as its value"),
        (["run", "greet", "--timeout", "soon"], 64, "--timeout takes a positive number of seconds"),
        (["run", "greet", "--timeout", "0ms"], 64, "--timeout takes a positive number of seconds (or 500ms, 5m, 2h), at most 1000000000, got '0ms'"),
        // Found by hand: seconds whose milliseconds overflow Int64 stopped cmdbus with SIGILL.
        (["run", "greet", "--timeout", "1e300"], 64, "--timeout takes a positive number of seconds (or 500ms, 5m, 2h), at most 1000000000, got '1e300'"),
        (["run", "greet", "--delay", "2e7h"], 64, "--delay takes a duration such as 30, 30s, 500ms, 5m, 2h or 30d, at most 1000000000 seconds, got '2e7h'"),
        (["serve", "--drain", "1e300"], 64, "--drain takes a positive number of seconds (or 500ms, 5m, 2h), at most 1000000000, got '1e300'"),
        (["serve", "--lease", "5"], 64, "--lease is for a host of the shared bus (serve --bus URL or $CMDBUS_BUS), which this server is not; leave it out"),
        // Found by hand: a host with a lease of 1 ms was declared dead by the bus over and over.
        (["serve", "--bus", "postgres:///x", "--capacity", "0"], 64, "--capacity takes a positive integer, got '0'"),
        (["serve", "--bus", "postgres:///x", "--lease", "500ms"], 64, "--lease takes at least 1s, got '500ms': a host renews its lease every third of it, and a shorter one has the bus declare a live host dead"),
        (["serve", "--bus", "postgres:///x", "--socket", "s.sock"], 64, "--socket is for a server on this machine, which this host of the shared bus (--bus or $CMDBUS_BUS) is not: it takes its commands from the bus, not a socket (clients send with 'cmdbus run --bus URL'); leave it out"),
        (["serve", "--bus", "postgres:///x", "--journal", "j.sqlite"], 64, "--journal is for a journal on this machine, and --bus names the shared bus, which is its own journal; give one"),
        (["journal", "list", "--bus", "postgres:///x", "--journal", "j.sqlite"], 64, "--journal is for a journal on this machine, and --bus names the shared bus, which is its own journal; give one"),
        (["run", "greet", "--connect=s.sock", "--durability", "synced"], 64, "--durability is for a journal on this machine, and --connect names a server, which keeps its own (serve --journal); give one"),
        (["run", "greet", "--durability", "fast"], 64, "--durability takes batched, synced or deferred, got 'fast'"),
        (["serve", "--log-level", "loud"], 64, "--log-level takes debug, info, warning or error, got 'loud'"),
        (["serve", "--log-format=xml"], 64, "--log-format takes text or json, got 'xml'"),
        (["journal", "tree", "1", "--format", "svg"], 64, "--format takes text, mermaid or dot, got 'svg'"),
        (["frobnicate"], 64, "unknown subcommand 'frobnicate'"),
        // Found by hand: an empty path was taken as one. `--journal ''` kept SQLite's private
        // temporary journal, `--socket ''` served on a nameless abstract socket.
        (["serve", "--socket", ""], 64, "option '--socket' of 'cmdbus serve' was given an empty value; give it a PATH, or leave the option out"),
        (["run", "greet", "--journal="], 64, "option '--journal' of 'cmdbus run' was given an empty value; give it a PATH, or leave the option out"),
        (["run", "greet", "--connect="], 64, "option '--connect' of 'cmdbus run' was given an empty value; give it a PATH, or leave the option out"),
        (["run", "greet", "-p", ""], 64, "option '-p' of 'cmdbus run' was given an empty value; give it a KEY=VALUE, or leave the option out"),
        (["serve", "--socket", "/tmp/" + String(repeating: "s", count: 100)], 64, "a socket path is at most 99 bytes, and this one is 105; give --socket a path of 1 to 99 bytes"),
        (["run", "greet", "--connect=/tmp/" + String(repeating: "s", count: 100)], 1, "a socket path is at most 99 bytes, and this one is 105, so no server listens there; give the path the server's --socket names"),
        // Found by the argument fuzzer: user text with a newline must not break the one-line rule.
        (["run", "greet", "--bo\ngus"], 64, "unknown option '--bo\\ngus'"),
        (["run", "gr\neet"], 64, "'gr\\neet' is not a command name: it holds a control character (U+A)"),
        (["run", "greet", "-p", "name=Adalbert", "--max-payload", "8"], 65, "payload for 'greet' is 19 bytes, more than the 8-byte limit"),
    ])
    func failuresHaveTheirExitCodeAndOneLine(arguments: [String], status: Int32, message: String) async throws {
        let plugins = try examplePluginDirectory()
        defer { plugins.remove() }
        let result = try await cmdbus(arguments + ["--plugins", plugins.path])
        #expect(result.status == status)
        #expect(result.stdout.isEmpty)
        let lines = result.stderr.split(separator: "\n")
        #expect(lines.count == 1, "stderr: \(result.stderr)")
        #expect(result.stderr.hasPrefix("cmdbus: error: ") && result.stderr.contains(message), "stderr: \(result.stderr)")
    }

    /// A timeout is seconds, or a number with a unit as `--delay` takes (`200ms` was refused).
    @Test(arguments: ["0.2", "200ms"])
    func aTimeoutExits75(timeout: String) async throws {
        let plugins = try TemporaryDirectory()
        defer { plugins.remove() }
        try plugins.install("libFixturePlugin.so")
        let result = try await cmdbus("run", "fixture.sleep", "-p", "milliseconds=60000", "--timeout", timeout, "--plugins", plugins.path)
        #expect(result.status == 75, "\(result.stderr)")
        #expect(result.stderr.contains("command 'fixture.sleep' timed out"))
    }

    /// The fixture plugin imports full Foundation, which this host does not link; loading it
    /// once made every `cmdbus` call hang after printing its result.
    @Test func aPluginThatLoadsFullFoundationDoesNotHangTheHost() async throws {
        let plugins = try TemporaryDirectory()
        defer { plugins.remove() }
        try plugins.install("libFixturePlugin.so", "libGreeter.so")
        let listing = try await cmdbus("plugins", "--plugins", plugins.path)
        #expect(listing.status == 0)
        let run = try await cmdbus("run", "fixture.sleep", "-p", "milliseconds=1", "--plugins", plugins.path)
        #expect(run.status == 0)
        #expect(run.stdout == "{\"sawCancellation\":false}\n")
    }

    @Test func jsonErrorsAreMachineReadable() async throws {
        let plugins = try examplePluginDirectory()
        defer { plugins.remove() }
        let result = try await cmdbus("run", "c.fail", "{}", "--json", "--plugins", plugins.path)
        #expect(result.status == 1)
        let error = try #require(try jsonObject(result.stderr)["error"] as? [String: Any])
        #expect(error["code"] as? String == "handlerFailed")
        #expect(error["command"] as? String == "c.fail")
        #expect(error["plugin"] as? String == "c-echo")
        #expect(error["exitCode"] as? Int == 1)
    }

    /// Each `--json` error code agrees with the exit status, and a bad option value names its option.
    @Test func errorCodesAndExitStatusesAgree() async throws {
        let plugins = try examplePluginDirectory()
        defer { plugins.remove() }
        func code(_ result: ProcessResult) -> String? {
            ((try? jsonObject(result.stderr))?["error"] as? [String: Any])?["code"] as? String
        }
        let unreachable = try await cmdbus("run", "greet", "--connect=/nonexistent/cmdbus.sock", "--json")
        #expect(unreachable.status == 1 && (code(unreachable)) == "serverUnreachable")
        let journal = plugins.file("journal.sqlite").path
        #expect(try await cmdbus("run", "greet", "-p", "name=Ada", "--plugins", plugins.path, "--journal", journal).status == 0)
        let missing = try await cmdbus("journal", "show", UUID().uuidString, "--journal", journal, "--json")
        #expect(missing.status == 1 && (code(missing)) == "entryNotFound")
        let noJournal = try await cmdbus("journal", "list", "--journal", plugins.file("none.sqlite").path, "--json")
        #expect(noJournal.status == 74 && (code(noJournal)) == "journalFailed")
        let timeout = try await cmdbus("run", "greet", "--timeout", "soon", "--json")
        #expect(timeout.status == 64 && (code(timeout)) == "usage" && timeout.stderr.contains("--timeout"))
        let drain = try await cmdbus("serve", "--drain", "-", "--socket", plugins.file("s.sock").path)
        #expect(drain.status == 64 && drain.stderr.contains("--drain takes a positive number of seconds"))
        let probe = try await cmdbus("plugins", "--probe-timeout", "0")
        #expect(probe.status == 64 && probe.stderr.contains("--probe-timeout"))
    }

    /// With `--json`, a run's events are NDJSON on stderr, so a program can read them; and
    /// `plugins` exits 66 naming a plugin directory that does not exist.
    @Test func jsonEventsAndAMissingPluginDirectory() async throws {
        let plugins = try examplePluginDirectory()
        defer { plugins.remove() }
        let run = try await cmdbus("run", "greet-all", "-p", #"names=["Ada","Lin"]"#, "--json", "--no-journal", "--plugins", plugins.path)
        #expect(run.status == 0)
        let events = try run.stderr.split(separator: "\n").map { try jsonObject(String($0)) }
        #expect(events.count >= 3 && events.allSatisfy { $0["event"] is [String: Any] })
        #expect(events.contains { ($0["event"] as? [String: Any])?["kind"] as? String == "emitted" })
        let missing = try await cmdbus("plugins", "--plugins", plugins.path, "--plugins", "/nonexistent/cmdbus-plugins")
        #expect(missing.status == 66 && missing.stderr.contains("plugin directory '/nonexistent/cmdbus-plugins' does not exist"))
        #expect(missing.stdout.contains("greeter 1.0.0"))
    }

    /// Errors that say what to do next: a misspelt command, a forgotten -p, a -p without its =,
    /// and a -p value read as a number where the command wants a string.
    @Test func errorsSayWhatToDoNext() async throws {
        let plugins = try examplePluginDirectory()
        defer { plugins.remove() }
        let common = ["--no-journal", "--plugins", plugins.path]
        let typo = try await cmdbus(["run", "gret", "-p", "name=Ada"] + common)
        #expect(typo.status == 69 && typo.stderr.contains("did you mean 'greet'?"), "\(typo.stderr)")
        let verb = try await cmdbus("rn", "greet")
        #expect(verb.status == 64 && verb.stderr.contains("unknown subcommand 'rn'; did you mean 'run'?"), "\(verb.stderr)")
        let otherBus = try await cmdbus("send", "greet")
        #expect(otherBus.status == 64 && otherBus.stderr.contains("unknown subcommand 'send'; did you mean 'run'?"), "\(otherBus.stderr)")
        let journalVerb = try await cmdbus("journal", "lst")
        #expect(journalVerb.status == 64 && journalVerb.stderr.contains("did you mean 'list'?"), "\(journalVerb.stderr)")
        try "\n".write(to: plugins.file("empty.json"), atomically: true, encoding: .utf8)
        let empty = try await cmdbus(["run", "greet", "@" + plugins.file("empty.json").path] + common)
        #expect(empty.status == 65 && empty.stderr.contains("empty.json' is empty; write one JSON value in the file, such as {}"), "\(empty.stderr)")
        let forgotten = try await cmdbus(["run", "greet", "name=Ada"] + common)
        #expect(forgotten.status == 65 && forgotten.stderr.contains("set fields with -p 'name=Ada'"), "\(forgotten.stderr)")
        let split = try await cmdbus(["run", "greet", "-p", "name", "Ada"] + common)
        #expect(split.status == 64 && split.stderr.contains("write it as one argument: -p name=VALUE"), "\(split.stderr)")
        let number = try await cmdbus(["run", "greet", "-p", "name=2024"] + common)
        #expect(number.status == 65 && number.stderr.contains(#"-p read name=2024 as a number; for a string, quote it: -p 'name="2024"'"#), "\(number.stderr)")
    }

    /// A FIFO where a plugin or the journal should be is named for what it is, and not opened
    /// (opening one for reading would wait for a writer).
    @Test func aFIFOForAPluginOrAJournalIsNamedAndLeftAlone() async throws {
        let plugins = try examplePluginDirectory()
        defer { plugins.remove() }
        #expect(mkfifo(plugins.file("libPipe.so").path, 0o600) == 0)
        #expect(mkfifo(plugins.file("journal.sqlite").path, 0o600) == 0)
        let listed = try await cmdbus("plugins", "--plugins", plugins.path)
        #expect(listed.status == 0 && listed.stdout.contains("libPipe.so: is a FIFO, socket or device, not a shared library"), "\(listed.stdout)")
        let journal = try await cmdbus("journal", "list", "--journal", plugins.file("journal.sqlite").path)
        #expect(journal.status != 0 && journal.stderr.contains("journal.sqlite: is a FIFO, socket or device, not a journal file"), "\(journal.stderr)")
    }

    @Test func canAnswersWithItsExitCode() async throws {
        let plugins = try examplePluginDirectory()
        defer { plugins.remove() }
        #expect(try await cmdbus("can", "greet", "-p", "name=Ada", "--plugins", plugins.path).status == 0)
        #expect(try await cmdbus("can", "greet", "-p", "name=", "--plugins", plugins.path).status == 69)
        #expect(try await cmdbus("can", "nope", "--plugins", plugins.path).status == 69)
        #expect(try await cmdbus("can", "greet", "{", "--plugins", plugins.path).status == 65)
    }

    @Test func pluginsListsLoadedShadowedAndSkipped() async throws {
        let first = try examplePluginDirectory(), second = try TemporaryDirectory()
        defer { first.remove(); second.remove() }
        try second.install("libGreeter.so")
        let bad = try await BadPluginFile.textFile.create(in: second)
        let result = try await cmdbus("plugins", "--json", "--plugins", first.path, "--plugins", second.path)
        #expect(result.status == 0)
        let listing = try jsonObject(result.stdout)
        let plugins = try #require(listing["plugins"] as? [[String: Any]])
        #expect(plugins.count == 4)
        let greeter = try #require(plugins.first { $0["name"] as? String == "greeter" })
        for key in ["path", "version", "abi", "commands", "loadedAt", "loadMilliseconds", "sdkVersion", "swiftVersion"] {
            #expect(greeter[key] != nil, "missing \(key)")
        }
        let greet = try #require((listing["commands"] as? [[String: Any]])?.first { $0["command"] as? String == "greet" })
        #expect(greet["path"] as? String == first.file("libGreeter.so").path)
        #expect((greet["shadowed"] as? [[String: String]])?.map { $0["path"] } == [second.file("libGreeter.so").path])
        let skipped = try #require(listing["skipped"] as? [[String: Any]])
        #expect(skipped.count == 1)
        #expect(skipped.first?["path"] as? String == bad.path)
        #expect(skipped.first?["reason"] as? String == "not an ELF shared library (bad magic bytes)")
        #expect(skipped.first?["quarantined"] as? Bool == false)

        let text = try await cmdbus("plugins", "--plugins", first.path, "--plugins", second.path)
        #expect(text.stdout.contains("shadows greeter (\(second.file("libGreeter.so").path))"))
        #expect(text.stdout.contains("\(bad.path): not an ELF shared library"))
    }

    @Test(arguments: BadPluginFile.allCases)
    func runStillWorksBesideABadFileAndPluginsNamesIt(kind: BadPluginFile) async throws {
        let plugins = try examplePluginDirectory()
        defer { plugins.remove() }
        let (path, reason) = try await kind.create(in: plugins)
        let run = try await cmdbus("run", "greet", "-p", "name=Ada", "--plugins", plugins.path)
        #expect(run.status == 0)
        #expect(run.stdout == "{\"greeting\":\"Hello, Ada!\"}\n")
        let warning = run.stderr.split(separator: "\n").first { $0.hasPrefix("cmdbus: warning: skipped \(path): ") }
        #expect(warning?.contains(reason) == true, "stderr: \(run.stderr)")
        let listing = try await cmdbus("plugins", "--json", "--plugins", plugins.path)
        let skipped = try #require(try jsonObject(listing.stdout)["skipped"] as? [[String: Any]])
        #expect(skipped.contains { $0["path"] as? String == path && ($0["reason"] as? String)?.contains(reason) == true })
    }

    @Test func checkValidatesOneFile() async throws {
        let plugins = try examplePluginDirectory()
        defer { plugins.remove() }
        let good = try await cmdbus("plugins", "check", plugins.file("libCEcho.so").path)
        #expect(good.status == 0)
        #expect(good.stdout.hasPrefix("ok: c-echo 1.0.0"))
        let (badPath, reason) = try await BadPluginFile.missingName.create(in: plugins)
        let bad = try await cmdbus("plugins", "check", badPath)
        #expect(bad.status == 1)
        #expect(bad.stderr == "cmdbus: error: \(badPath): descriptor is missing its name\n")
        #expect(reason == "missing its name")
    }

    /// A socket that answers something other than the protocol (another program's) is named
    /// as such, where the client skipped the lines and said the server closed before answering:
    /// text, or a JSON object that is neither an answer nor an event.
    @Test(arguments: [
        ("HTTP/1.1 200 OK\r\n\r\nhello\n", #"'HTTP/1.1 200 OK\r'"#),
        (#"{"hello": "world"}"# + "\n", #"'{"hello": "world"}'"#),
    ])
    func aSocketThatDoesNotSpeakTheProtocolIsNamed(answer: String, shown: String) async throws {
        let work = try TemporaryDirectory()
        defer { work.remove() }
        let result = try await runProcess("/usr/bin/env", ["python3", "-c", """
            import os, socket, subprocess, sys, threading
            path = sys.argv[2]
            listener = socket.socket(socket.AF_UNIX); listener.bind(path); listener.listen(4)
            def answer():
                while True:
                    client, _ = listener.accept(); client.recv(4096); client.sendall(sys.argv[3].encode()); client.close()
            threading.Thread(target=answer, daemon=True).start()
            run = subprocess.run([sys.argv[1], "status", "--connect=" + path], capture_output=True, text=True, timeout=60)
            print(run.returncode); print(run.stderr, end="")
            """, try TestPaths.product("cmdbus").path, work.file("other.sock").path, answer])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.hasPrefix("1\ncmdbus: error: what answers at \(work.file("other.sock").path) does not speak cmdbus's protocol (it sent \(shown))"), "\(result.stdout)")
    }

    /// A run that waits out a delay says so on stderr, where it looked hung; then it runs.
    @Test func aDelayedRunSaysItWaits() async throws {
        let plugins = try examplePluginDirectory()
        defer { plugins.remove() }
        let started = ContinuousClock.now
        let delayed = try await cmdbus("run", "greet", "-p", "name=Ada", "--delay", "1", "--no-journal", "--plugins", plugins.path)
        #expect(delayed.status == 0 && delayed.stdout == "{\"greeting\":\"Hello, Ada!\"}\n", "\(delayed.stderr)")
        #expect(ContinuousClock.now - started >= .seconds(1))
        #expect(delayed.stderr.hasPrefix("cmdbus: 'greet' starts in 1s (at 20") && delayed.stderr.contains("this run waits for its result"), "\(delayed.stderr)")
        let quiet = try await cmdbus("run", "greet", "-p", "name=Ada", "--delay", "1", "--no-journal", "--json", "--plugins", plugins.path)
        #expect(quiet.status == 0 && quiet.stderr.isEmpty, "--json keeps stderr to JSON lines: \(quiet.stderr)")
    }

    /// Results stdout cannot take (a full disk) fail the run, where it ended 0 with its output lost.
    @Test func aStdoutThatCannotTakeTheResultFailsTheRun() async throws {
        let plugins = try examplePluginDirectory()
        defer { plugins.remove() }
        for json in [false, true] {
            let full = try await runProcess("/bin/sh", [
                "-c", #"exec "$0" run greet -p name=Ada --no-journal --plugins "$1" $2 >/dev/full"#,
                try TestPaths.product("cmdbus").path, plugins.path, json ? "--json" : "",
            ])
            #expect(full.status == 1, "\(full.stderr)")
            #expect(full.stderr.contains(json ? #""code":"outputFailed""# : "cmdbus: error: cannot write results to stdout (No space left on device); the output is incomplete"), "\(full.stderr)")
        }
    }

    /// A caller that closed stdout (`>&-`) has descriptor 1 opened on /dev/null before anything
    /// else opens a file: a server so started had Dispatch's epoll on descriptor 1, where its
    /// first result went, and any file the process opened next could have been written over.
    @Test func aClosedStdoutIsNotTakenByTheNextFileOpened() async throws {
        let work = try TemporaryDirectory()
        defer { work.remove() }
        let plugins = try work.subdirectory("plugins")
        try plugins.install("libGreeter.so")
        let log = work.file("server.log").path
        let started = try await runProcess("/bin/sh", [
            "-c", #""$0" serve --plugins "$1" --no-journal --socket "$2" >&- 2>"$3" & echo $!"#,
            try TestPaths.product("cmdbus").path, plugins.path, work.file("s.sock").path, log,
        ], environment: ["CMDBUS_REGISTRY": work.file("registry.json").path])
        let pid = try #require(Int32(started.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
        defer { kill(pid, SIGKILL) }
        #expect(await waitUntil(.seconds(60)) { ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains("serving on") })
        // Descriptor 1 is stderr's file (plugins' prints go there); results go to /dev/null.
        let one = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/1")
        #expect(one == log, "descriptor 1 is \(one)")
        let targets = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\($0)") }
        #expect(targets.contains("/dev/null"), "\(targets)")
    }

    @Test func helpAndVersionWork() async throws {
        let version = try await cmdbus("--version")
        #expect(version.status == 0 && version.stdout.hasPrefix("cmdbus 1.0.0 (plugin ABI 1.4"))
        for subcommand in ["run", "can", "plugins"] {
            let help = try await cmdbus(subcommand, "--help")
            #expect(help.status == 0 && help.stdout.hasPrefix("Usage: cmdbus \(subcommand)"))
        }
        #expect(try await cmdbus("--help").stdout.contains("Subcommands:"))
        #expect(try await cmdbus("help", "run").stdout.hasPrefix("Usage: cmdbus run"))
        // Options name what their values are, and every option's help starts in one column.
        let serve = try await cmdbus("serve", "--help").stdout
        for shown in ["--socket PATH ", "--drain SECONDS ", "--http [ADDR:]PORT ", "--bus URL ", "--plugins DIR ", "--durability MODE "] {
            #expect(serve.contains(shown), "\(shown) is not in 'serve --help'")
        }
        let options = serve.components(separatedBy: "Options:\n")[1].split(separator: "\n").prefix { $0.hasPrefix("  ") }
        let columns = Set(options.map { line in line.ranges(of: /\S+(?: \S+)? {2,}/).first.map { line.distance(from: line.startIndex, to: $0.upperBound) } })
        #expect(options.count > 15 && columns.count == 1, "\(options.joined(separator: "\n"))")
        #expect(try await cmdbus().status == 64)
    }

    /// Every verb a subcommand dispatches (read from the completion script, which is built from the
    /// verb tables) is named in `cmdbus --help` and described in the subcommand's own help.
    @Test func everyVerbIsInTheHelp() async throws {
        let script = try await cmdbus("completion", "bash").stdout
        let usage = try await cmdbus("--help").stdout
        var checked = 0
        for match in script.matches(of: /(\w+):0:\*\) COMPREPLY=\(\$\(compgen -W "([^"]+)"/) {
            let subcommand = String(match.1)
            if subcommand == "help" { continue }  // its words are the subcommands themselves
            let help = try await cmdbus(subcommand, "--help").stdout
            for verb in match.2.split(separator: " ") {
                let named = try Regex("\\b\(verb)\\b")
                #expect(usage.contains(named), "'cmdbus --help' does not name '\(subcommand) \(verb)'")
                let described = try Regex("(^  |cmdbus \(subcommand) )\(verb)\\b").anchorsMatchLineEndings()
                #expect(help.contains(described), "'cmdbus \(subcommand) --help' does not describe '\(verb)'")
                checked += 1
            }
        }
        #expect(checked >= 12, "only \(checked) verbs were found in the completion script")
    }
}
