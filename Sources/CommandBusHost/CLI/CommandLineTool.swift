import CCommandBusABI
import CommandBus
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
          batch [FILE|-]             Run NDJSON commands; one result line each.
          journal <subcommand>       list, show, retry, replay, undo, import.
          serve                      Run a long-lived host on a Unix socket (NDJSON).
          status --connect           A running server's uptime, work and latencies.
          help [<subcommand>]        Show help.

        Options: --help, --version. 'cmdbus <subcommand> --help' shows a subcommand's options.
        """

    /// Runs `cmdbus` with `arguments` (without the program name) and returns the exit code.
    public static func run(_ arguments: [String]) async -> Int32 {
        let console = Console()
        let wantsJSON = arguments.contains("--json")
        do {
            try await dispatch(arguments, console: console)
            return ExitCode.ok.rawValue
        } catch {
            console.report(error, json: wantsJSON)
            return error.exitCode.rawValue
        }
    }

    private static func dispatch(_ arguments: [String], console: Console) async throws(CLIFailure) {
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
            console.out(rest.first.flatMap(help(for:)) ?? usage)
        case "run":
            let parsed = try RunCommand.spec.parse(rest)
            if parsed.has("help") { return console.out(RunCommand.help) }
            try await RunCommand.run(parsed, console: console)
        case "can":
            let parsed = try CanCommand.spec.parse(rest)
            if parsed.has("help") { return console.out(CanCommand.help) }
            try await CanCommand.run(parsed, console: console)
        case "batch":
            let parsed = try BatchCommand.spec.parse(rest)
            if parsed.has("help") { return console.out(BatchCommand.help) }
            try await BatchCommand.run(parsed, console: console)
        case "journal":
            try await JournalCommand.run(rest, console: console)
        case "status":
            let parsed = try StatusCommand.spec.parse(rest)
            if parsed.has("help") { return console.out(StatusCommand.help) }
            try StatusCommand.run(parsed, console: console)
        case "serve":
            let parsed = try ServeCommand.spec.parse(rest)
            if parsed.has("help") { return console.out(ServeCommand.help) }
            try await ServeCommand.run(parsed, console: console)
        case "plugins":
            let parsed = try PluginsCommand.spec.parse(rest)
            if parsed.has("help") { return console.out(PluginsCommand.help) }
            try await PluginsCommand.run(parsed, console: console)
        default:
            throw .usage("unknown subcommand \(quoted(first)); see 'cmdbus --help'")
        }
    }

    private static func help(for subcommand: String) -> String? {
        switch subcommand {
        case "run": RunCommand.help
        case "can": CanCommand.help
        case "plugins": PluginsCommand.help
        case "batch": BatchCommand.help
        case "journal": JournalCommand.help
        case "serve": ServeCommand.help
        case "status": StatusCommand.help
        default: nil
        }
    }
}
