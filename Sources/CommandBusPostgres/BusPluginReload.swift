import CommandBus
import CommandBusSupport

/// A plugin file loaded again on every live host of the bus that has a file of that name (each
/// host has its own directories): `cmdbus plugins forget NAME.so --bus URL`, and the "Try again"
/// of a quarantine on a bus host's dashboard. Asks on ``BusHost/loadAgainChannel`` and gathers
/// the hosts' answers from ``BusHost/loadedAgainChannel``.
package enum BusPluginReload {
    /// How long the hosts may take to answer: a load may probe the file first (10 s unless a
    /// host's `--probe-timeout`) and start an isolated plugin's worker.
    static let answerTime: Duration = .seconds(30)

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
    /// on a thread of its own. Returns `{"file", "hosts": [...]}`, in `hosts`' order, a host that
    /// did not answer in time listed as not `ok`.
    package static func ask(url: String, file: String, of hosts: [BusCatalog.Host]) async -> Result<JSONValue, PGError> {
        let answers: Result<[String: JSONValue], PGError> = await DetachedThread.value {
            let session = PGSession(url: url, listening: [BusHost.loadedAgainChannel])
            defer { session.close() }
            var answers: [String: JSONValue] = [:]
            let expected = Set(hosts.map(\.id)), deadline = ContinuousClock.now + answerTime
            do throws(PGError) {
                // Listening first (the session's first use), then asking: no answer comes before the wait.
                _ = try session.run { connection throws(PGError) in
                    try connection.execute("SELECT pg_notify($1, $2)", [.text(BusHost.loadAgainChannel), .text(file)])
                }
                while answers.count < expected.count, ContinuousClock.now < deadline {
                    for notification in try session.notifications(waitingUpTo: deadline - .now) {
                        guard let answer = JSONValue.parse(notification.payload)?.objectValue, answer["file"]?.stringValue == file,
                              let host = answer["host"]?.stringValue, expected.contains(host) else { continue }
                        answers[host] = .object(answer)
                    }
                }
                return .success(answers)
            } catch {
                return .failure(error)
            }
        }
        return answers.map { answered in
            let seconds = Int(answerTime.components.seconds)
            return .object(["file": .string(file), "hosts": .array(hosts.map { host in
                answered[host.id] ?? .object([
                    "host": .string(host.id), "label": .string(host.label), "file": .string(file), "ok": .bool(false),
                    "message": .string("no answer within \(seconds) s (a host of a cmdbus older than this one does not answer); its log says what it did"),
                ])
            })])
        }
    }
}
