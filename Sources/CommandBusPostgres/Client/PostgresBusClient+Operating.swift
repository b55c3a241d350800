import CommandBus
import CommandBusHost
import CommandBusSupport
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What an operator does to the shared bus through a client: cancel or retry by name, pause,
/// limit, periodic commands, a plugin loaded again on every host, and the bus's status.
extension PostgresBusClient {
    /// Cancels the commands of `names` that wait on the bus, and with `running` asks those that
    /// run to stop (``BusCancel``).
    package func cancelWaiting(_ names: [String], running: Bool) async throws(HostFailure) -> [BusCancel.Outcome] {
        try withConnection { connection throws(PGError) in try BusCancel.cancel(names, running: running, by: BusPause.operatorLabel, on: connection) }
    }

    /// Puts the root commands of `names` that ended in one of `states` (within `within`, if
    /// given) back to pending (``BusRetry``).
    package func retryEnded(_ names: [String], states: [CommandState], within: Duration?) async throws(HostFailure) -> [BusRetry.Outcome] {
        try withConnection { connection throws(PGError) in try BusRetry.retry(names, states: states, within: within, on: connection) }
    }

    /// The live hosts' plugins, merged: each build once, with the hosts that load it (``BusCatalog``).
    package func plugins() async throws(HostFailure) -> JSONValue {
        let rows = try withConnection { connection throws(PGError) in
            try connection.execute("""
                SELECT h.id, h.hostname, h.pid::int8 AS pid, h.catalog::text AS catalog
                FROM cmdbus.hosts h WHERE \(BusSQL.liveHost) ORDER BY h.started_at
                """)
        }
        return BusCatalog.merge(rows.all.map(BusCatalog.Host.init(row:)))
    }

    /// Pauses (or, with `false`, resumes) command names on the bus (``BusPause``). Returns what
    /// changed, and the live hosts too old to know a pause that handle one of the names.
    /// With `names` `nil`, every name (``BusPause/allNames(toPause:on:)``).
    package func setPaused(_ names: [String]?, _ paused: Bool) async throws(HostFailure) -> (changes: [BusPause.Change], unaware: [(host: String, command: String)]) {
        try withConnection { connection throws(PGError) in
            let wanted: [String]
            if let names { wanted = names } else { wanted = try BusPause.allNames(toPause: paused, on: connection) }
            let changes = try BusPause.set(wanted, paused: paused, by: BusPause.operatorLabel, on: connection)
            return (changes, paused ? try BusPause.unawareHosts(handling: wanted, on: connection) : [])
        }
    }

    /// Sets, keeps or removes how many of `names` run at once across the bus and how many start
    /// in a period (``BusLimit``); with the live hosts that handle one of them and run a `cmdbus`
    /// from before what was set (limits, or rates).
    package func setLimit(
        _ names: [String], atOnce: BusLimit.Setting<Int>, rate: BusLimit.Setting<BusLimit.Rate>
    ) async throws(HostFailure) -> (changes: [BusLimit.Change], unaware: [(host: String, command: String)]) {
        try withConnection { connection throws(PGError) in
            let changes = try BusLimit.set(names, atOnce: atOnce, rate: rate, by: BusPause.operatorLabel, on: connection)
            var unaware: [(host: String, command: String)] = []
            if case .set = rate {
                unaware = try BusLimit.unawareHosts(handling: names, rates: true, on: connection)
            } else if case .set = atOnce {
                unaware = try BusLimit.unawareHosts(handling: names, on: connection)
            }
            return (changes, unaware)
        }
    }

    /// The names limited across the bus (``BusLimit/limits(on:)``).
    package func limits() async throws(HostFailure) -> JSONValue {
        try withConnection { connection throws(PGError) in try BusLimit.limits(on: connection) }
    }

    /// Sets a periodic command (``BusPeriodic``), replacing one of its name, and says how many
    /// live hosts post periodic commands (none: it waits for one).
    package func setPeriodic(_ entry: BusPeriodic.Entry) async throws(HostFailure) -> (change: BusPeriodic.Change, firingHosts: Int) {
        try withConnection { connection throws(PGError) in
            (try BusPeriodic.set(entry, by: BusPause.operatorLabel, on: connection), try BusPeriodic.firingHosts(on: connection))
        }
    }

    /// Removes the periodic commands of `names`; returns those that were there.
    package func removePeriodic(_ names: [String]) async throws(HostFailure) -> [String] {
        try withConnection { connection throws(PGError) in try BusPeriodic.remove(names, on: connection) }
    }

    /// Pauses (`paused`) or resumes the periodic commands of `names` (``BusPeriodic``); with the
    /// live hosts from before pauses, which post a paused entry all the same.
    package func setPeriodicPaused(_ names: [String], paused: Bool) async throws(HostFailure) -> (actions: [BusPeriodic.Action], unaware: [String]) {
        try withConnection { connection throws(PGError) in
            let actions = try BusPeriodic.setPaused(names, paused: paused, by: BusPause.operatorLabel, on: connection)
            return (actions, paused ? try BusPeriodic.hosts(before: BusPeriodic.pauseSchemaVersion, on: connection) : [])
        }
    }

    /// Posts the command of each periodic entry of `names` now, once (``BusPeriodic/runNow(_:by:on:)``).
    package func runPeriodicNow(_ names: [String]) async throws(HostFailure) -> [BusPeriodic.Action] {
        try withConnection { connection throws(PGError) in try BusPeriodic.runNow(names, by: BusPause.operatorLabel, on: connection) }
    }

    /// The periodic commands, as `bus periodic --json` shows them.
    package func periodic() async throws(HostFailure) -> JSONValue {
        try withConnection { connection throws(PGError) in try BusPeriodic.entries(on: connection) }
    }

    /// Asks every live host with a plugin file of this name (`path`'s last part: each host has
    /// its own directories) to load it again, changed or not, lifting its quarantine there
    /// (``BusPluginReload``). Returns `{"file", "hosts": [{"label", "host", "ok", "plugin" or
    /// "message"}]}`, a host that did not answer in time listed as not `ok`.
    package func loadPluginAgain(_ path: String) async throws(HostFailure) -> JSONValue {
        let file = FileSystem.lastComponent(path)
        let hosts = try withConnection { connection throws(PGError) in try BusPluginReload.hosts(having: file, on: connection) }
        guard !hosts.isEmpty else { throw HostFailure(.entryNotFound, BusPluginReload.noHost(having: file)) }
        switch await BusPluginReload.ask(url: url, file: file, of: hosts) {
        case .success(let answers): return answers
        case .failure(let error): throw Self.failure(error)
        }
    }

    /// The bus's hosts, queues, pauses, limits and periodic commands (``BusStatus``), as `bus status --json` shows them.
    package func status() async throws(HostFailure) -> JSONValue {
        try withConnection { connection throws(PGError) in try BusStatus.read(on: connection) }
    }
}
