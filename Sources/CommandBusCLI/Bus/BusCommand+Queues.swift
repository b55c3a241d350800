import CommandBus
import CommandBusHost
import CommandBusPostgres
import CommandBusSupport
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `cmdbus bus cancel` and `cmdbus bus retry`: what waits of a name, or what failed of it, all
/// at once, as a job queue's "clear" and "retry all".
extension BusCommand {
    /// `bus cancel NAME... [--running]`: one line a name.
    static func cancel(_ arguments: ArgumentSpec.Parsed, _ names: [String], _ console: Console) async throws(HostFailure) {
        try checkNames(names, verb: "cancel",
            missing: "the command names whose waiting commands to cancel ('cmdbus bus status' lists the queues; 'cmdbus cancel ID' cancels one command)",
            forOneID: { "'cmdbus cancel \($0)' cancels that command; 'cmdbus bus cancel NAME' cancels a name's waiting commands" })
        let running = arguments.has("running")
        let outcomes = try await withClient(arguments, verb: "cancel", console: console) { client throws(HostFailure) in
            try await client.cancelWaiting(names, running: running)
        }
        for outcome in outcomes {
            if arguments.has("json") { console.out(outcome.json.text); continue }
            let name = quoted(outcome.name)
            let waited = outcome.cancelled == 0 ? "\(name) had no command waiting" : "cancelled \(counted(outcome.cancelled, "\(name) command")) that waited"
            let rest = switch (outcome.running, running) {
            case (0, _): ""
            case (let count, true): ", and asked the \(count) running to stop"
            case (let count, false): "; \(count) running finish ('--running' asks them to stop)"
            }
            console.out(waited + rest)
        }
    }

    /// `bus retry NAME... [--state S] [--since AGE]`: one line a name.
    static func retry(_ arguments: ArgumentSpec.Parsed, _ names: [String], _ console: Console) async throws(HostFailure) {
        try checkNames(names, verb: "retry",
            missing: "the command names whose failed commands to run again ('cmdbus journal list --bus --state failed' lists them; 'cmdbus journal retry ID' retries one)",
            forOneID: { "'cmdbus journal retry \($0) --bus' retries that command; 'cmdbus bus retry NAME' retries a name's failed commands" })
        var states: [CommandState] = []
        for text in arguments.all("state").flatMap({ $0.split(separator: ",", omittingEmptySubsequences: false).map(String.init) }) {
            guard let state = CommandState(rawValue: text), BusRetry.retryableStates.contains(state) else {
                throw .usage("--state takes \(BusRetry.retryableStates.map(\.rawValue).joined(separator: ", ")) (the states a command is retried from), got \(quoted(text))")
            }
            if !states.contains(state) { states.append(state) }
        }
        if states.isEmpty { states = BusRetry.deadLetterStates }
        let since = try arguments.duration("since")
        let outcomes = try await withClient(arguments, verb: "retry", console: console) { client throws(HostFailure) in
            try await client.retryEnded(names, states: states, within: since)
        }
        let ended = states.map(\.rawValue).joined(separator: " or ") + (arguments.value("since").map { " within \($0)" } ?? "")
        for outcome in outcomes {
            if arguments.has("json") { console.out(outcome.json.text); continue }
            console.out(outcome.retried == 0
                ? "\(quoted(outcome.name)) had no command that ended \(ended) to retry"
                : "retried \(counted(outcome.retried, "\(quoted(outcome.name)) command")) that ended \(ended): pending again, for the hosts to run")
        }
    }

    /// Refuses no names, a name that cannot be one, and a command's id given where a name goes
    /// (the verb that takes an id is `forOneID`'s).
    private static func checkNames(_ names: [String], verb: String, missing: String, forOneID: (String) -> String) throws(HostFailure) {
        guard !names.isEmpty else { throw .usage("'cmdbus bus \(verb)' needs \(missing)") }
        if let problem = names.lazy.compactMap(commandNameProblem).first { throw .usage(problem) }
        if let id = names.first(where: { UUID(uuidString: $0) != nil }) {
            throw .usage("\(quoted(id)) is a command id, not a name: \(forOneID(id))")
        }
    }
}
