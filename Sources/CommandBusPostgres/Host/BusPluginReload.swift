import CommandBus
import CommandBusSupport
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A plugin file loaded again on every live host of the bus that has a file of that name (each
/// host has its own directories): `cmdbus plugins forget NAME.so --bus URL`, and the "Try again"
/// of a quarantine on a bus host's dashboard. Asks on ``BusHost/loadAgainChannel`` and gathers
/// the hosts' answers from ``BusHost/loadedAgainChannel``.
package enum BusPluginReload {
    /// How long the hosts may take to answer: a load may probe the file first (10 s unless a
    /// host's `--probe-timeout`) and start an isolated plugin's worker.
    static let answerTime: Duration = .seconds(30)

    /// How often, while answers are missing, the hosts yet to answer are looked for on the bus:
    /// one that left it (stopped, or silent past its lease) will not answer, and is not waited for.
    static let departureCheckInterval: Duration = .seconds(1)

    /// The live hosts with a plugin file named `file`, loaded or skipped.
    package static func hosts(having file: String, on connection: PGConnection) throws(PGError) -> [BusCatalog.Host] {
        let rows = try connection.execute("""
            SELECT h.id, h.hostname, h.pid::int8 AS pid, h.catalog::text AS catalog
            FROM cmdbus.hosts h WHERE \(BusSQL.liveHost) ORDER BY h.started_at
            """)
        return rows.all.map(BusCatalog.Host.init(row:)).filter { host in
            let files = ["plugins", "skipped"].flatMap { host.catalog[$0]?.arrayValue ?? [] }.compactMap { $0.objectValue?["path"]?.stringValue }
            return files.contains { FileSystem.lastComponent($0) == file }
        }
    }

    /// ``hosts(having:on:)`` on a connection of its own, then ``ask(url:file:of:)``: `nil` when no
    /// live host has a file of that name, so nothing was asked.
    package static func ask(url: String, file: String) async -> Result<JSONValue?, PGError> {
        let found = await DetachedThread.value { () -> Result<[BusCatalog.Host], PGError> in
            do throws(PGError) {
                return .success(try hosts(having: file, on: try PGConnection(url: url)))
            } catch {
                return .failure(error)
            }
        }
        switch found {
        case .failure(let error): return .failure(error)
        case .success(let hosts) where hosts.isEmpty: return .success(nil)
        case .success(let hosts): return await ask(url: url, file: file, of: hosts).map { $0 }
        }
    }

    /// Why nothing was asked: no live host has such a file.
    package static func noHost(having file: String) -> String {
        "no live host of the bus has a plugin file named \(quoted(file)); 'cmdbus plugins --bus' lists each host's files"
    }

    /// Asks `hosts` to load `file` again and waits up to ``answerTime`` for each one's answer,
    /// on a thread of its own, or until the hosts yet to answer have left the bus. Returns
    /// `{"file", "hosts": [...]}`, in `hosts`' order, a host that left or did not answer in time
    /// listed as not `ok`.
    package static func ask(url: String, file: String, of hosts: [BusCatalog.Host]) async -> Result<JSONValue, PGError> {
        let answers: Result<([String: JSONValue], departed: Set<String>), PGError> = await DetachedThread.value {
            let session = PGSession(url: url, listening: [BusHost.loadedAgainChannel])
            defer { session.close() }
            var answers: [String: JSONValue] = [:], departed: Set<String> = []
            let expected = Set(hosts.map(\.id)), deadline = ContinuousClock.now + answerTime
            do throws(PGError) {
                // Listening first (the session's first use), then asking: no answer comes before the wait.
                _ = try session.run { connection throws(PGError) in
                    try connection.execute("SELECT pg_notify($1, $2)", [.text(BusHost.loadAgainChannel), .text(file)])
                }
                var unanswered: Set<String> { expected.subtracting(answers.keys).subtracting(departed) }
                while !unanswered.isEmpty, ContinuousClock.now < deadline {
                    for notification in try session.notifications(waitingUpTo: min(deadline - .now, departureCheckInterval)) {
                        guard let answer = JSONValue.parse(notification.payload)?.objectValue, answer["file"]?.stringValue == file,
                              let host = answer["host"]?.stringValue, expected.contains(host) else { continue }
                        answers[host] = .object(answer)
                    }
                    let waitedFor = unanswered
                    guard !waitedFor.isEmpty else { break }
                    let live = try session.run { connection throws(PGError) in try liveHosts(among: waitedFor, on: connection) }
                    departed.formUnion(waitedFor.subtracting(live))
                }
                return .success((answers, departed))
            } catch {
                return .failure(error)
            }
        }
        return answers.map { answered, departed in
            return .object(["file": .string(file), "hosts": .array(hosts.map { host in
                answered[host.id] ?? .object([
                    "host": .string(host.id), "label": .string(host.label), "file": .string(file), "ok": .bool(false),
                    "message": .string(departed.contains(host.id)
                        ? "left the bus before it answered (it stopped, or went silent past its lease); its log says what it did"
                        : "no answer within \(answerTime.spoken) (a host of a cmdbus older than this one does not answer); its log says what it did"),
                ])
            })])
        }
    }

    /// Those of `ids` (``BusCatalog/Host/id``) still live on the bus.
    private static func liveHosts(among ids: Set<String>, on connection: PGConnection) throws(PGError) -> Set<String> {
        let rows = try connection.execute(
            "SELECT h.id FROM cmdbus.hosts h WHERE h.id = ANY($1::uuid[]) AND \(BusSQL.liveHost)", [.uuidArray(ids.compactMap(UUID.init(uuidString:)))]
        )
        return Set(rows.all.compactMap { $0.uuid("id")?.uuidString })
    }
}
