import CommandBusHost
import CommandBusSupport

/// A second-level subcommand (`journal list`, `plugins check`): its name and what it does with
/// the parsed arguments and its operands. Every level of `cmdbus` dispatches through a table.
struct Verb: Sendable {
    let run: @Sendable (ArgumentSpec.Parsed, [String], Console) async throws(HostFailure) -> Void

    /// Runs the verb the first positional names (or `missing` if there is none), with the rest as operands.
    static func dispatch(
        _ verbs: [String: Verb], command: String, missing: Verb? = nil, _ arguments: ArgumentSpec.Parsed, _ console: Console
    ) async throws(HostFailure) {
        guard let name = arguments.positionals.first else {
            guard let missing else { throw .usage("'cmdbus \(command)' needs a subcommand; see 'cmdbus \(command) --help'") }
            return try await missing.run(arguments, [], console)
        }
        guard let verb = verbs[name] else {
            let hint = nearestName(to: name, among: Array(verbs.keys)).map { "did you mean \(quoted($0))? " } ?? ""
            throw .usage("unknown 'cmdbus \(command)' subcommand \(quoted(name)); \(hint)see 'cmdbus \(command) --help'")
        }
        try await verb.run(arguments, Array(arguments.positionals.dropFirst()), console)
    }
}
