import Foundation
import Testing

/// `cmdbus completion bash`, sourced into a real bash and asked as bash asks it: the
/// subcommands, their options and option values, files, and the command names the plugins handle.
struct CompletionTests {
    /// The script `cmdbus completion bash` wrote, in a scratch directory with two plugins.
    private struct Shell {
        let work: TemporaryDirectory
        let script: URL
        let cmdbus: String

        init() async throws {
            work = try TemporaryDirectory()
            try work.subdirectory("plugins").install("libGreeter.so", "libGreetAll.so")
            cmdbus = try TestPaths.product("cmdbus").path
            let written = try await runProcess(cmdbus, ["completion", "bash"])
            try #require(written.status == 0, "\(written.stderr)")
            script = work.file("cmdbus.bash")
            try written.stdout.write(to: script, atomically: true, encoding: .utf8)
        }

        /// What bash offers for the last of `words` (after `cmdbus`), as its completion of a line.
        func complete(_ words: String...) async throws -> [String] {
            let result = try await runProcess("/bin/bash", [
                "-c", #"source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _cmdbus; printf '%s\n' "${COMPREPLY[@]}""#,
                "_", script.path, cmdbus,
            ] + words, environment: ["CMDBUS_REGISTRY": work.file("registry.json").path], directory: work.url)
            try #require(result.status == 0, "\(result.stderr)")
            // Sorted, as bash shows them.
            return result.stdout.split(separator: "\n").map(String.init).sorted()
        }
    }

    @Test func subcommandsOptionsAndTheirValuesComplete() async throws {
        let shell = try await Shell()
        defer { shell.work.remove() }
        #expect(try await shell.complete("jo") == ["journal"])
        #expect(try await shell.complete("journal", "re") == ["recover", "replay", "retry"])
        #expect(try await shell.complete("plugins", "") == ["check", "forget", "lock"])
        #expect(try await shell.complete("help", "se") == ["serve"])
        #expect(try await shell.complete("completion", "") == ["bash", "zsh"])
        #expect(try await shell.complete("serve", "--dur") == ["--durability"])
        #expect(try await shell.complete("serve", "--durability", "d") == ["deferred"])
        // --name=value: bash splits the word at '='.
        #expect(try await shell.complete("serve", "--log-level", "=", "w") == ["warning"])
        #expect(try await shell.complete("journal", "tree", "x", "--format", "") == ["dot", "mermaid", "text"])
        #expect(try await shell.complete("serve", "--plugins", "plu") == ["plugins"])
        #expect(try await shell.complete("serve", "--bus", "") == [])
        #expect(try await shell.complete("run", "greet", "--t") == ["--timeout"])
    }

    @Test func runAndCanOfferTheCommandsThePluginsHandle() async throws {
        let shell = try await Shell()
        defer { shell.work.remove() }
        #expect(try await shell.complete("run", "gr") == ["greet", "greet-all"])
        // Options and their values before the name, key=value split at '=', as bash splits it.
        #expect(try await shell.complete("can", "-p", "name", "=", "Ada", "--max-payload", "100", "greet-") == ["greet-all"])
        // The --plugins directories on the line are the ones asked.
        let other = try shell.work.subdirectory("other")
        try other.install("libCEcho.so")
        #expect(try await shell.complete("run", "--plugins", other.path, "") == ["c.echo", "c.fail"])
        // After the command's name, its payload: nothing to offer, but a file after '@'.
        #expect(try await shell.complete("run", "greet", "") == [])
        try "{}".write(to: shell.work.file("payload.json"), atomically: true, encoding: .utf8)
        #expect(try await shell.complete("run", "greet", "@pay") == ["@payload.json"])
        #expect(try await shell.complete("can", "greet", "@oth") == ["@other"])
    }

    /// With `--connect`, the names are the server's, whatever plugins are here.
    @Test func runWithConnectOffersTheServersCommands() async throws {
        let shell = try await Shell()
        defer { shell.work.remove() }
        let server = try await ServerTests.Server()
        defer { server.work.remove() }
        let served = ["counter.add", "counter.get", "greet"]
        #expect(try await shell.complete("run", "--connect=\(server.socket)", "").filter { !$0.hasPrefix("fixture.") } == served)
        // bash splits --connect=SOCKET at '='; a path after --connect is its value.
        #expect(try await shell.complete("run", "--connect", "=", server.socket, "co").filter { !$0.hasPrefix("fixture.") } == ["counter.add", "counter.get"])
        #expect(try await shell.complete("can", "--connect", server.socket, "-p", "a", "=", "b", "gr") == ["greet"])
        // Without it, the local plugins'.
        #expect(try await shell.complete("run", "co") == [])
        await server.stop()
    }

    /// Every option a subcommand's help lists is offered after `--`, and nothing else.
    @Test func everyOptionOfEverySubcommandIsOffered() async throws {
        let shell = try await Shell()
        defer { shell.work.remove() }
        for subcommand in ["run", "can", "plugins", "batch", "journal", "serve", "status", "bus", "completion"] {
            let help = try await cmdbus(subcommand, "--help").stdout
            let listed = help.components(separatedBy: "Options:\n").last!.split(separator: "\n").prefix { $0.hasPrefix("  ") }
                .compactMap { line in line.split(separator: " ").first { $0.hasPrefix("--") }.map(String.init) }
            let offered = try await shell.complete(subcommand, "--")
            #expect(!listed.isEmpty && Set(offered) == Set(listed), "\(subcommand): help lists \(listed), completion offers \(offered)")
        }
        let refused = try await cmdbus("completion", "fish")
        #expect(refused.status == 64 && refused.stderr.contains("writes a script for bash or zsh, not for 'fish'"), "\(refused.stderr)")
    }

    /// `cmdbus completion zsh` in a real interactive zsh, driven through a pseudo-terminal
    /// (`zsh/zpty`) as a user types: keys and tabs go in, and a key bound to a widget writes
    /// the line as completion left it. Subcommands, their verbs, options, an option's value and
    /// the command names the plugins handle all complete, through zsh's bashcompinit.
    @Test(.timeLimit(.minutes(2)))
    func zshCompletesTheSameThroughItsBashcompinit() async throws {
        let shell = try await Shell()
        defer { shell.work.remove() }
        let written = try await runProcess(shell.cmdbus, ["completion", "zsh"])
        try #require(written.status == 0, "\(written.stderr)")
        let script = shell.work.file("cmdbus.zsh"), lines = shell.work.file("lines")
        try written.stdout.write(to: script, atomically: true, encoding: .utf8)
        // Each line is typed at a fresh prompt and ends in ^T, bound to write what completion made
        // of it, ^U, which clears it, and Return, for the next prompt.
        let typed = ["cmdbus jo\\t li\\t --st\\t", "cmdbus serve --durability d\\t", "cmdbus run greet-\\t", "cmdbus completion z\\t"]
        let driver = """
            zmodload zsh/zpty
            zpty -b typing zsh -f -i
            zpty -w typing 'autoload -U compinit && compinit -u -D; source \(script.path); path=(\(URL(fileURLWithPath: shell.cmdbus).deletingLastPathComponent().path) $path)'
            zpty -w typing 'written() { print -r -- "$BUFFER" >> \(lines.path) }; zle -N written; bindkey "^T" written; PS1="READ""Y> "'
            zpty -r typing seen '*READY> '
            for keys in \(typed.map { "$'\($0)'" }.joined(separator: " ")); do
              zpty -w -n typing "$keys"$'\\x14\\x15\\r'
              zpty -r typing seen '*READY> '
            done
            zpty -d typing
            """
        let result = try await runProcess(
            "/usr/bin/zsh", ["-f", "-c", driver], environment: ["CMDBUS_REGISTRY": shell.work.file("registry.json").path, "HOME": shell.work.path],
            directory: shell.work.url, timeout: .seconds(90)
        )
        #expect(result.status == 0, "\(result.stderr)")
        let completed = (try? String(contentsOf: lines, encoding: .utf8)) ?? ""
        #expect(completed.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) } == [
            "cmdbus journal list --state", "cmdbus serve --durability deferred", "cmdbus run greet-all", "cmdbus completion zsh",
        ], "\(completed)")
    }
}
