import CommandBusSupport
import CommandBusLoading
import CommandBusHost
import CCommandBusABI
import CommandBus
import Glibc
import Synchronization
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The `cmdbus` command line: parses the arguments, runs the subcommand, and returns the exit code.
///
/// `cmdbus`'s `main` is one call to ``run(_:)``.
public enum CommandLineTool {
    /// The version `cmdbus --version` prints.
    public static let version = "1.0.0"

    static let usage = """
        Usage: cmdbus <subcommand> [options]

        A command bus whose handlers are plugins (.so files) loaded from a directory:
        --plugins DIR (repeatable), else $CMDBUS_PLUGINS (colon-separated), else ./plugins.

        Subcommands:
          run <command> [<json>]     Send a command and print its JSON result.
          can <command> [<json>]     Exit 0 if some handler would take it now, 69 if not.
          plugins [--json]           List loaded plugins, command routes and skipped files.
          plugins check <file>       Validate one plugin file.
          plugins lock               Pin the plugins that load now (plugins.lock).
          plugins forget <file>      Probe a quarantined file again.
          batch [FILE|-]             Run NDJSON commands; one result line each.
          journal <subcommand>       list, show, tree, retry, replay, undo, import, discard,
                                     recover, prune, backup.
          serve                      Run a long-lived host on a Unix socket (NDJSON).
          status --connect           A running server's uptime, work and latencies.
          cancel <id>...             Cancel commands in flight on a server or the shared bus.
          bus status --bus URL       The shared bus: hosts, queues and their waits, what is paused.
          bus pause|resume <cmd>...  Stop (or start again) hosts claiming these command names.
          bus limit <cmd>... <N>     Run at most N of these at once across the bus ('none': no limit).
          bus periodic <cmd> --every Post a command on a schedule (--every 1h, --cron '0 3 * * *').
          bus cancel <cmd>...        Cancel every command of these names that waits on the bus.
          bus retry <cmd>...         Run again every command of these names that failed on the bus.
          completion bash|zsh        A completion script: source <(cmdbus completion bash).
          help [<subcommand>]        Show help.

        Options: --help, --version. 'cmdbus <subcommand> --help' shows a subcommand's options.
        """

    /// Runs `cmdbus` with `arguments` (without the program name) and returns the exit code; or,
    /// given an argument that was not UTF-8 as the process got it (`notUTF8`), refuses to run.
    public static func run(_ arguments: [String], notUTF8: ArgumentNotUTF8? = nil) async -> Int32 {
        let console = Console()
        let wantsJSON = arguments.contains("--json")
        // A reader that goes away (`| head`) ends `cmdbus` as it ends any tool, by SIGPIPE, but
        // only once what it started has ended: at once, a `run` or `batch` left its commands
        // unfinished in the journal, and a server died at the next line of its log. Its workers
        // and probes, started after this, inherit it.
        Console.outliveTheReader()
        // Ctrl-C means cancel: the first SIGINT or SIGTERM cancels the commands of a one-shot
        // subcommand (cooperatively, down to their subcommands, recorded `cancelled`) and it exits
        // 130; a second exits at once. `serve` drains on its own terms.
        let interrupted = Atomic<Bool>(false)
        let work = Task {
            do throws(HostFailure) {
                if let notUTF8 { throw notUTF8.failure }
                try await dispatch(arguments, console: console)
                return ExitCode.ok.rawValue
            } catch {
                if interrupted.load(ordering: .acquiring) {
                    let what = error.command.map { "command \(quoted($0)) was cancelled" } ?? "the commands in flight were cancelled"
                    console.report(HostFailure(.interrupted, "interrupted: \(what)", command: error.command, plugin: error.plugin), json: wantsJSON)
                    return ExitCode.interrupted.rawValue
                }
                console.report(error, json: wantsJSON)
                return error.exitCode.rawValue
            }
        }
        let signals = arguments.first == "serve" ? nil : ShutdownSignals(first: {
            interrupted.store(true, ordering: .releasing)
            work.cancel()
        }, second: {
            fflush(nil)
            _exit(ExitCode.interrupted.rawValue)
        })
        var status = await work.value
        withExtendedLifetime(signals) {}
        if console.readerWentAway { Console.endForTheReaderWentAway() }
        if let failure = console.resultWriteFailure {
            let lost = HostFailure(.outputFailed, "cannot write results to stdout (\(failure)); the output is incomplete, though what ran has run (the journal says how it ended): free the space or send the output elsewhere")
            console.report(lost, json: wantsJSON)
            if status == ExitCode.ok.rawValue { status = lost.exitCode.rawValue }
        }
        return status
    }

    private static func dispatch(_ arguments: [String], console: Console) async throws(HostFailure) {
        guard let first = arguments.first else {
            console.err(usage)
            throw .usage("no subcommand given")
        }
        let rest = Array(arguments.dropFirst())
        switch first {
        case "--help", "-h":
            console.out(usage)
        case "--version", "-V":
            console.out("cmdbus \(version) (plugin ABI \(CMDBUS_ABI_VERSION_MAJOR).\(CMDBUS_ABI_VERSION_MINOR), Swift \(hostSwiftCompilerVersion))")
        case "help":
            console.out(rest.first.flatMap { subcommands[$0]?.help() } ?? usage)
        default:
            guard let subcommand = subcommands[first] else {
                let suggestion = synonyms[first] ?? nearestName(to: first, among: Array(subcommands.keys)).map(quoted)
                let hint = suggestion.map { "did you mean \($0)? " } ?? ""
                throw .usage("unknown subcommand \(quoted(first)); \(hint)see 'cmdbus --help'")
            }
            let parsed = try subcommand.spec().parse(rest)
            if parsed.has("help") { return console.out(subcommand.help()) }
            try await subcommand.run(parsed, console)
        }
    }

    /// Words from other buses' command lines, and what says it here.
    private static let synonyms = [
        "send": "'run'", "post": "'run --no-wait'", "submit": "'run'", "dispatch": "'run'", "exec": "'run'",
        "list": "'plugins' or 'journal list'", "server": "'serve'", "start": "'serve'", "version": "'--version'",
    ]

    /// One subcommand: its options, its help, and what it does. The options and the help are
    /// built when asked for: a one-shot `cmdbus run` should not format every subcommand's help.
    private struct Subcommand: Sendable {
        let spec: @Sendable () -> ArgumentSpec
        let help: @Sendable () -> String
        let run: @Sendable (ArgumentSpec.Parsed, Console) async throws(HostFailure) -> Void
        /// Its own subcommands (`journal list`), for shell completion.
        var verbs: @Sendable () -> [String] = { [] }
    }

    /// What shell completion knows of each subcommand.
    private static var completionEntries: [CompletionCommand.Entry] {
        subcommands.map { name, subcommand in
            CompletionCommand.Entry(name: name, options: subcommand.spec().options, verbs: subcommand.verbs())
        }
    }

    private static let subcommands: [String: Subcommand] = [
        "run": .init(spec: { RunCommand.spec }, help: { RunCommand.help }) { arguments, console throws(HostFailure) in
            try await RunCommand.run(arguments, console: console)
        },
        "can": .init(spec: { CanCommand.spec }, help: { CanCommand.help }) { arguments, console throws(HostFailure) in
            try await CanCommand.run(arguments, console: console)
        },
        "plugins": .init(spec: { PluginsCommand.spec }, help: { PluginsCommand.help }, run: { arguments, console throws(HostFailure) in
            try await PluginsCommand.run(arguments, console: console)
        }, verbs: { PluginsCommand.verbNames }),
        "batch": .init(spec: { BatchCommand.spec }, help: { BatchCommand.help }) { arguments, console throws(HostFailure) in
            try await BatchCommand.run(arguments, console: console)
        },
        "journal": .init(spec: { JournalCommand.spec }, help: { JournalCommand.help }, run: { arguments, console throws(HostFailure) in
            try await JournalCommand.run(arguments, console: console)
        }, verbs: { JournalCommand.verbNames }),
        "serve": .init(spec: { ServeCommand.spec }, help: { ServeCommand.help }) { arguments, console throws(HostFailure) in
            try await ServeCommand.run(arguments, console: console)
        },
        "cancel": .init(spec: { CancelCommand.spec }, help: { CancelCommand.help }) { arguments, console throws(HostFailure) in
            try await CancelCommand.run(arguments, console: console)
        },
        "status": .init(spec: { StatusCommand.spec }, help: { StatusCommand.help }) { arguments, console throws(HostFailure) in
            try await StatusCommand.run(arguments, console: console)
        },
        "completion": .init(spec: { CompletionCommand.spec }, help: { CompletionCommand.help }) { arguments, console throws(HostFailure) in
            try await CompletionCommand.run(arguments, console: console, subcommands: completionEntries)
        },
        "bus": .init(spec: { BusCommand.spec }, help: { BusCommand.help }, run: { arguments, console throws(HostFailure) in
            try await BusCommand.run(arguments, console: console)
        }, verbs: { BusCommand.verbNames }),
    ]
}
