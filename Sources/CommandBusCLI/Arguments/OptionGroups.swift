import CommandBusHost
import CommandBusSupport
import CommandBusServer
import CommandBusSQLite
import CommandBusPostgres
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// The option groups subcommands share, as swift-argument-parser's `@OptionGroup`s: each group
// lists its options once and parses them once into typed values. A bad value is reported
// naming the option it was given to.

extension PluginOptions {
    /// `--plugins`, `--insecure-plugins`, `--isolate`, `--no-probe`, `--probe-timeout`, `-q`.
    static let options: [ArgumentSpec.Option] = [.plugins, .insecurePlugins, .isolate, .noProbe, .probeTimeout, .quiet]

    /// The plugin options from parsed arguments.
    init(_ arguments: ArgumentSpec.Parsed) throws(HostFailure) {
        self.init()
        directories = arguments.all("plugins")
        insecure = arguments.has("insecure-plugins")
        isolateAll = arguments.has("isolate")
        probe = !arguments.has("no-probe")
        probeTimeout = try arguments.seconds("probe-timeout") ?? .seconds(10)
        quiet = arguments.has("quiet")
    }
}

extension JournalOptions {
    /// `--journal`, `--no-journal`, `--durability`, `--max-payload`.
    static let options: [ArgumentSpec.Option] = [
        .init(name: "journal", short: nil, value: "PATH", help: "Journal file (default \(defaultPath))."),
        .init(name: "no-journal", short: nil, help: "Keep no journal."),
        .init(name: "durability", short: nil, value: "MODE", choices: ["batched", "synced", "deferred"], help: "batched (group commit, default), synced, or deferred (one sync per command)."),
        .maxPayload,
    ]

    /// The journal options from parsed arguments; `enabled` is false with `--no-journal`.
    init(_ arguments: ArgumentSpec.Parsed) throws(HostFailure) {
        self.init()
        path = arguments.value("journal") ?? Self.defaultPath
        enabled = !arguments.has("no-journal")
        // One of the option's choices, as the parser checked.
        durability = switch arguments.value("durability") {
        case "synced": .synced
        case "deferred": .deferred
        default: .batched(maxDelay: .zero)
        }
        maxPayloadBytes = try arguments.positiveInteger("max-payload") ?? Self.defaultMaxPayloadBytes
    }

    /// Options that never journal (a query such as `can`), with `--max-payload` still honoured.
    static func withoutJournal(_ arguments: ArgumentSpec.Parsed) throws(HostFailure) -> JournalOptions {
        var options = JournalOptions()
        options.enabled = false
        options.maxPayloadBytes = try arguments.positiveInteger("max-payload") ?? Self.defaultMaxPayloadBytes
        return options
    }
}

/// `--connect[=SOCKET]` (a running `cmdbus serve`) or `--bus URL` (the shared bus in PostgreSQL,
/// also `$CMDBUS_BUS`): where the bus is, if not in this process.
struct ConnectionOptions: Sendable {
    /// The server's socket, or `nil`.
    var socket: String?
    /// The shared bus's PostgreSQL URL, or `nil`.
    var bus: String?

    init(_ arguments: ArgumentSpec.Parsed, environment: [String: String] = ProcessInfo.processInfo.environment) throws(HostFailure) {
        let defaultSocket = environment["CMDBUS_SOCKET"].flatMap { $0.isEmpty ? nil : $0 } ?? CommandServer.defaultSocketPath
        socket = arguments.has("connect") ? arguments.value("connect") ?? defaultSocket : nil
        bus = arguments.value("bus") ?? environment["CMDBUS_BUS"].flatMap { $0.isEmpty ? nil : $0 }
        if let bus, !PGURL.isPlausible(bus) {
            throw .usage("--bus takes a PostgreSQL URL (postgres://user@host/database) or libpq key=value string, got \(quoted(PGURL.redacted(bus)))")
        }
        if socket != nil, arguments.value("bus") != nil { throw .usage("--connect and --bus name two different buses; give one") }
        if socket != nil { bus = nil }
        // A journal on this machine is a third place: a server keeps its own, and the shared bus
        // is its own. Named with either, it would be ignored; named with only $CMDBUS_BUS, the
        // command line wins, as --connect does. (--no-journal names none, and holds either way.)
        if let option = ["journal", "durability"].first(where: { arguments.value($0) != nil }) {
            if socket != nil {
                throw .usage("--\(option) is for a journal on this machine, and --connect names a server, which keeps its own (serve --journal); give one")
            }
            if arguments.value("bus") != nil {
                throw .usage("--\(option) is for a journal on this machine, and --bus names the shared bus, which is its own journal; give one")
            }
            bus = nil
        }
    }

    /// Refuses `--no-wait` on `verb` (`run`, `batch`) unless a bus outlives this process, a
    /// server or the shared bus: a bus in this process would end, cancelling what was posted.
    func requireLastingBus(forNoWaitOn verb: String) throws(HostFailure) {
        guard socket == nil, bus == nil else { return }
        throw .usage("--no-wait needs a bus that outlives this \(verb): a server (--connect) or the shared bus (--bus); without one, leave --no-wait out and \(verb) waits for its commands")
    }
}

extension ArgumentSpec.Option {
    static let bus = Self(name: "bus", short: nil, value: "URL", help: "The shared bus in PostgreSQL (postgres://…; or $CMDBUS_BUS).")
    static let maxPayload = Self(name: "max-payload", short: nil, value: "BYTES", help: "Largest payload in bytes (default 16777216).")
}
