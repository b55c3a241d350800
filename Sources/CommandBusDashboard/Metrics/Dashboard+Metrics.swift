import CommandBusSupport
import CommandBusLoading
import CommandBus

/// `GET /metrics`: the Prometheus scrape (README: "Metrics").
extension Dashboard {
    func scrape() async -> String {
        var out = PrometheusText()
        let metrics = sources.metrics
        let names = metrics.names

        out.family("cmdbus_commands_total", type: "counter", help: "Commands that ended, by command name and outcome.")
        for (name, counts) in names {
            for (state, count) in counts.outcomes.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
                out.sample("cmdbus_commands_total", [("command", name), ("outcome", state.rawValue)], Double(count))
            }
        }
        out.family("cmdbus_command_duration_seconds", type: "histogram", help: "How long commands took from acceptance to their end, by command name.")
        for (name, counts) in names {
            out.histogram("cmdbus_command_duration_seconds", [("command", name)], counts.histogram)
        }
        out.family("cmdbus_commands_in_flight", type: "gauge", help: "Commands accepted and not yet ended.")
        out.sample("cmdbus_commands_in_flight", [], Double(metrics.inFlight))

        let catalog = sources.catalog()
        let files = PluginFileCounts(catalog)
        out.family(
            "cmdbus_plugins", type: "gauge",
            help: "Plugin files by state: loaded, quarantined (by the probe, or an isolated one's worker for crashing), or skipped for another reason."
        )
        out.sample("cmdbus_plugins", [("state", "loaded")], Double(files.loaded))
        out.sample("cmdbus_plugins", [("state", "quarantined")], Double(files.quarantined))
        out.sample("cmdbus_plugins", [("state", "skipped")], Double(files.skipped))
        let images = SharedLibrary.imagesMapped
        out.family(
            "cmdbus_plugin_images", type: "gauge",
            help: "Plugin images mapped into this process: the loaded ones and those hot loading replaced, which stay until a restart."
        )
        out.sample("cmdbus_plugin_images", [], Double(images.count))
        out.family("cmdbus_plugin_image_bytes", type: "gauge", help: "The total size of the files of the plugin images mapped into this process.")
        out.sample("cmdbus_plugin_image_bytes", [], Double(images.bytes))
        out.family("cmdbus_worker_restarts_total", type: "counter", help: "Times an isolated plugin's worker was started again, by plugin.")
        for plugin in catalog.plugins {
            guard let worker = plugin.worker else { continue }
            out.sample("cmdbus_worker_restarts_total", [("plugin", plugin.name)], Double(worker.restarts))
        }
        out.family(
            "cmdbus_worker_runs_again_total", type: "counter",
            help: "Commands an isolated plugin ran again on a new worker after theirs ended for another command's sake (a crash, a cancellation), by plugin."
        )
        for plugin in catalog.plugins {
            guard let worker = plugin.worker else { continue }
            out.sample("cmdbus_worker_runs_again_total", [("plugin", plugin.name)], Double(worker.runsAgain))
        }

        let journal = metrics.journal
        out.family("cmdbus_journal_commit_duration_seconds", type: "histogram", help: "How long each journal commit took, from its start to durable.")
        out.histogram("cmdbus_journal_commit_duration_seconds", [], journal.commits)
        out.family("cmdbus_journal_writes_total", type: "counter", help: "Journal writes committed (accepts, transitions).")
        out.sample("cmdbus_journal_writes_total", [], Double(journal.writes))
        out.family("cmdbus_journal_syncs_total", type: "counter", help: "Journal commits that synced to disk (the others left it to a later one).")
        out.sample("cmdbus_journal_syncs_total", [], Double(journal.syncs))

        if let shared = await sharedBusStatus?.current(), case .object(let fields) = shared, case .array(let queues)? = fields["queues"] {
            let counts = [
                ("cmdbus_bus_running", "running", "Commands running on the shared bus's hosts, by command name."),
                ("cmdbus_bus_pending", "pending", "Commands due on the shared bus and waiting for a host, by command name."),
                ("cmdbus_bus_scheduled", "scheduled", "Commands on the shared bus due later (a delay, a retry's backoff), by command name."),
            ]
            for (family, key, help) in counts {
                out.family(family, type: "gauge", help: help)
                for case .object(let queue) in queues {
                    guard case .string(let name)? = queue["command"], case .integer(let count)? = queue[key] else { continue }
                    out.sample(family, [("command", name)], Double(count))
                }
            }
            out.family("cmdbus_bus_oldest_pending_seconds", type: "gauge", help: "How long the longest-waiting due command on the shared bus has waited since it was due, by command name.")
            for case .object(let queue) in queues {
                guard case .string(let name)? = queue["command"], case .number(let age)? = queue["oldestPendingSeconds"] else { continue }
                out.sample("cmdbus_bus_oldest_pending_seconds", [("command", name)], age)
            }
            out.family("cmdbus_bus_limit", type: "gauge", help: "How many commands of a name may run at once across the shared bus ('cmdbus bus limit'), by command name.")
            for case .object(let limit) in fields["limits"]?.arrayValue ?? [] {
                guard case .string(let name)? = limit["command"], case .integer(let most)? = limit["limit"] else { continue }
                out.sample("cmdbus_bus_limit", [("command", name)], Double(most))
            }
            let rated = (fields["limits"]?.arrayValue ?? []).compactMap { limit -> (String, [String: JSONValue], Double)? in
                guard case .string(let name)? = limit.objectValue?["command"], case .object(let rate)? = limit.objectValue?["rate"],
                      let recent = limit.objectValue?["recentStarts"]?.doubleValue else { return nil }
                return (name, rate, recent)
            }
            let rateGauges: [(family: String, help: String, value: ([String: JSONValue], Double) -> Double?)] = [
                ("cmdbus_bus_rate_limit_starts", "How many commands of a name may start in its period across the shared bus ('cmdbus bus limit --rate'), by command name.",
                 { rate, _ in rate["starts"]?.doubleValue }),
                ("cmdbus_bus_rate_limit_period_seconds", "The period of a name's rate across the shared bus, by command name.",
                 { rate, _ in rate["periodSeconds"]?.doubleValue }),
                ("cmdbus_bus_rate_recent_starts", "How many commands of a name with a rate started in its last period (at its limit, the rest wait), by command name.",
                 { _, recent in recent }),
            ]
            for gauge in rateGauges {
                out.family(gauge.family, type: "gauge", help: gauge.help)
                for (name, rate, recent) in rated {
                    if let value = gauge.value(rate, recent) { out.sample(gauge.family, [("command", name)], value) }
                }
            }
            let periodic = fields["periodic"]?.arrayValue?.compactMap(\.objectValue) ?? []
            let periodicCounts = [
                ("cmdbus_bus_periodic_posted_total", "fired", "Commands a periodic entry ('cmdbus bus periodic') has posted, by entry."),
                ("cmdbus_bus_periodic_skipped_total", "skipped", "Slots of a periodic entry that passed unposted (no host was live, or the last run went on, with --no-overlap), by entry."),
            ]
            for (family, key, help) in periodicCounts {
                out.family(family, type: "counter", help: help)
                for entry in periodic {
                    guard case .string(let name)? = entry["name"], case .integer(let count)? = entry[key] else { continue }
                    out.sample(family, [("periodic", name)], Double(count))
                }
            }
            out.family("cmdbus_bus_periodic_next_due_seconds", type: "gauge", help: "Seconds until a periodic entry's next slot, by entry: below zero, it is overdue (no live host posts it).")
            // A paused entry's next slot is not due: left out, so an alert on overdue entries holds.
            for entry in periodic where entry["paused"] != .bool(true) {
                guard case .string(let name)? = entry["name"], let due = entry["nextDueSeconds"]?.doubleValue else { continue }
                out.sample("cmdbus_bus_periodic_next_due_seconds", [("periodic", name)], due)
            }
            out.family("cmdbus_bus_periodic_paused", type: "gauge", help: "Periodic entries paused ('cmdbus bus periodic --pause'): 1 each, by entry.")
            for entry in periodic where entry["paused"] == .bool(true) {
                guard case .string(let name)? = entry["name"] else { continue }
                out.sample("cmdbus_bus_periodic_paused", [("periodic", name)], 1)
            }
            out.family("cmdbus_bus_paused", type: "gauge", help: "Command names no host claims until they are resumed ('cmdbus bus pause'): 1 each.")
            for case .object(let paused) in fields["paused"]?.arrayValue ?? [] {
                guard case .string(let name)? = paused["command"] else { continue }
                out.sample("cmdbus_bus_paused", [("command", name)], 1)
            }
            if case .array(let hosts)? = fields["hosts"] {
                out.family("cmdbus_bus_hosts", type: "gauge", help: "Hosts of the shared bus whose heartbeat is current.")
                out.sample("cmdbus_bus_hosts", [], Double(hosts.filter { if case .object(let host) = $0, host["live"] == .bool(true) { true } else { false } }.count))
            }
        }

        // Read from the host itself, so they are there while the database is out of reach.
        if let lease = sources.busHost?() {
            out.family("cmdbus_bus_host_fences_total", type: "counter", help: "Times this host was fenced: its lease ran out without a renewal, or the bus declared it dead.")
            out.sample("cmdbus_bus_host_fences_total", [("reason", "lease_not_renewed")], Double(lease.leaseLapses))
            out.sample("cmdbus_bus_host_fences_total", [("reason", "declared_dead")], Double(lease.declaredDead))
            out.family("cmdbus_bus_host_claiming", type: "gauge", help: "1 while this host claims commands; 0 while its heartbeat fails, it is fenced, or it drains.")
            out.sample("cmdbus_bus_host_claiming", [], lease.claiming ? 1 : 0)
        }

        if let requestLoop = sources.requestLoop?() {
            out.family("cmdbus_socket_sends_total", type: "counter", help: "Socket sends, by where they ran: the request loop's thread, or the bus's runners.")
            out.sample("cmdbus_socket_sends_total", [("runs_on", "request_loop")], Double(requestLoop.sendsOnLoop))
            out.sample("cmdbus_socket_sends_total", [("runs_on", "runners")], Double(requestLoop.sendsOnRunners))
            out.family("cmdbus_request_loop_takeovers_total", type: "counter", help: "Times a command held the socket's request loop so long that a new thread took it over.")
            out.sample("cmdbus_request_loop_takeovers_total", [], Double(requestLoop.takeovers))
        }

        if let server = sources.socketServer?() {
            out.family("cmdbus_max_in_flight", type: "gauge", help: "The most commands the server holds before clients that add more wait (--max-in-flight).")
            out.sample("cmdbus_max_in_flight", [], Double(server.maxInFlight))
            out.family("cmdbus_held_back_total", type: "counter", help: "Times a client was read no further because the server held its most commands.")
            out.sample("cmdbus_held_back_total", [], Double(server.timesHeldBack))
            out.family("cmdbus_subscriptions", type: "gauge", help: "Socket 'subscribe' streams open.")
            out.sample("cmdbus_subscriptions", [], Double(server.subscriptions))
        }

        // As Prometheus's client libraries name them, so the usual dashboards and alerts find them.
        if let process = ProcessFigures.now() {
            let figures: [(name: String, type: String, help: String, value: Double)] = [
                ("process_cpu_seconds_total", "counter", "User and system CPU time spent, in seconds.", process.cpuSeconds),
                ("process_resident_memory_bytes", "gauge", "Resident memory, in bytes.", Double(process.residentBytes)),
                ("process_virtual_memory_bytes", "gauge", "Virtual memory, in bytes.", Double(process.virtualBytes)),
                ("process_open_fds", "gauge", "File descriptors open.", Double(process.openDescriptors)),
                ("process_max_fds", "gauge", "The most file descriptors the process may open.", Double(process.maxDescriptors)),
                ("process_start_time_seconds", "gauge", "When the process started, in seconds since 1970.", process.startTime),
                ("process_threads", "gauge", "Threads of the process.", Double(process.threads)),
            ]
            for figure in figures {
                out.family(figure.name, type: figure.type, help: figure.help)
                out.sample(figure.name, [], figure.value)
            }
        }

        out.family("cmdbus_http_connections", type: "gauge", help: "Open connections to the dashboard, event streams included.")
        out.sample("cmdbus_http_connections", [], Double(connectionCount()))
        out.family("cmdbus_uptime_seconds", type: "gauge", help: "Seconds since the dashboard started.")
        out.sample("cmdbus_uptime_seconds", [], uptime)
        return out.text
    }
}
