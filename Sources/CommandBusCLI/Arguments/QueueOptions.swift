import CommandBusHost
import CommandBusSupport

/// `--priority N` and `--max-attempts N`: how the shared bus queues a command and how often it
/// runs it again. Only the shared bus has a queue to order and retries a command (after a
/// retryable failure, or a host lost while it ran), so without it each is refused, not ignored.
/// A batch line's `"priority"` and `"maxAttempts"` win over them (``problem(priority:maxAttempts:onTheBus:)``).
struct QueueOptions: Sendable {
    /// `--priority` and `--max-attempts`, as `run`, `batch` and `bus periodic` take them.
    static let options: [ArgumentSpec.Option] = [
        .init(name: "priority", short: nil, value: "N", help: "On the shared bus: hosts claim higher first (-1000 to 1000, default 0)."),
        .init(name: "max-attempts", short: nil, value: "N", help: "On the shared bus: run it at most N times (1 to 100, default 5)."),
    ]

    /// The priorities a person may give (``CommandRequest/priorities``).
    static let priorities = CommandRequest.priorities
    /// The attempts a person may allow.
    static let attempts = 1...100

    var priority: Int?
    var maxAttempts: Int?

    /// The options from parsed arguments; `connection` says whether the bus is the shared one.
    init(_ arguments: ArgumentSpec.Parsed, connection: ConnectionOptions) throws(HostFailure) {
        priority = try Self.number(arguments, "priority", in: Self.priorities, meaning: "higher is claimed first; 0 by default")
        maxAttempts = try Self.number(arguments, "max-attempts", in: Self.attempts, meaning: "how many times the bus runs it at most; 5 by default")
        guard connection.bus == nil else { return }
        if priority != nil { throw .usage(Self.priorityNeedsTheBus("--priority")) }
        if maxAttempts != nil { throw .usage(Self.attemptsNeedTheBus("--max-attempts")) }
    }

    /// Sets what was given on `request`, where its own (a batch line's) does not say.
    func apply(to request: inout CommandRequest) {
        if let priority { request.priority = priority }
        if let maxAttempts { request.maxAttempts = maxAttempts }
    }

    /// Why a batch line's own `"priority"` or `"maxAttempts"` cannot be used, if it cannot.
    static func problem(priority: Int?, maxAttempts: Int?, onTheBus: Bool) -> String? {
        if let priority, !priorities.contains(priority) {
            return "\"priority\" is \(priority); give a whole number from \(priorities.lowerBound) to \(priorities.upperBound) (higher is claimed first)"
        }
        if let maxAttempts, !attempts.contains(maxAttempts) {
            return "\"maxAttempts\" is \(maxAttempts); give a whole number from \(attempts.lowerBound) to \(attempts.upperBound)"
        }
        if onTheBus { return nil }
        if priority != nil { return priorityNeedsTheBus("\"priority\"") }
        if maxAttempts != nil { return attemptsNeedTheBus("\"maxAttempts\"") }
        return nil
    }

    private static func priorityNeedsTheBus(_ name: String) -> String {
        "\(name) orders the shared bus's queue (--bus or $CMDBUS_BUS); a server or this process starts each command as it comes, so leave it out"
    }

    private static func attemptsNeedTheBus(_ name: String) -> String {
        "\(name) is for the shared bus (--bus or $CMDBUS_BUS), which runs a command again after a retryable failure or a lost host; a server or this process runs each once, so leave it out"
    }

    private static func number(_ arguments: ArgumentSpec.Parsed, _ name: String, in range: ClosedRange<Int>, meaning: String) throws(HostFailure) -> Int? {
        guard let text = arguments.value(name) else { return nil }
        guard let number = Int(text), range.contains(number) else {
            throw .usage("--\(name) takes a whole number from \(range.lowerBound) to \(range.upperBound) (\(meaning)), got \(quoted(text))")
        }
        return number
    }
}
