import CommandBus
import CommandBusSupport
import Synchronization

// A plugin file loaded again at a client's request, on every host that has it:
// `cmdbus plugins forget FILE --bus URL` asks on `cmdbus_plugins`, with the file's name, and
// each host with a file of that name loads it again and answers on `cmdbus_plugins_done`.
extension BusHost {
    /// The channel a client asks on; the payload is a plugin file's name (`libx.so`).
    package static let loadAgainChannel = "cmdbus_plugins"
    /// The channel hosts answer on: `{"host", "label", "file", "ok", "plugin" or "message"}`.
    package static let loadedAgainChannel = "cmdbus_plugins_done"

    /// What loads a plugin file again at a client's request: a closure in a struct, which a
    /// `Mutex` can hold as it is (see `Callback`: a closure held as the value itself is
    /// rewrapped at every access).
    struct LoadAgainHandler: Sendable {
        let body: @Sendable (_ fileName: String) async -> JSONValue?
    }

    /// Sets what loads a plugin file of this host's again, by its name, when a client asks:
    /// `{"ok": true, "plugin": {...}}` or `{"ok": false, "message": ...}`, which goes back to the
    /// client, or `nil` for a name this host has no file of, which answers nothing.
    package func whenAskedToLoadAgain(_ handler: @escaping @Sendable (_ fileName: String) async -> JSONValue?) {
        loadAgainHandler.withLock { $0 = LoadAgainHandler(body: handler) }
    }

    /// A client asked the hosts to load `fileName` again: this host does, if it has such a file,
    /// and answers (off the claimer's thread, which goes on claiming).
    func loadAgain(_ fileName: String) {
        guard let handler = loadAgainHandler.withLock({ $0 }) else { return }
        Task { [self] in
            guard case .object(var answer)? = await handler.body(fileName) else { return }
            answer["host"] = .string(id.uuidString)
            answer["label"] = .string(label)
            answer["file"] = .string(fileName)
            var text = JSONValue.object(answer).text
            // A notification's payload is at most 8,000 bytes: a plugin of many commands is named only.
            if text.utf8.count > 7_000, case .object(let plugin)? = answer["plugin"] {
                answer["plugin"] = .object(plugin.filter { ["name", "version", "path"].contains($0.key) })
                text = JSONValue.object(answer).text
            }
            let failure = await DetachedThread.value { [settings, text] () -> String? in
                do throws(PGError) {
                    let connection = try PGConnection(url: settings.url, linkTimeout: settings.lease)
                    _ = try connection.execute("SELECT pg_notify($1, $2)", [.text(Self.loadedAgainChannel), .text(text)])
                    return nil
                } catch {
                    return error.message
                }
            }
            if let failure { log(.warning, "could not tell the bus how loading \(fileName) again went: \(failure)") }
        }
    }
}
