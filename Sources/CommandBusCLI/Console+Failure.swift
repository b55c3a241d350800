import CommandBus
import CommandBusHost
import CommandBusSupport

extension Console {
    /// Reports a failure on one stderr line, as text or (with `json`) as a JSON object.
    func report(_ failure: HostFailure, json: Bool) {
        guard json else {
            // A backstop: whatever a message quotes, it stays on one line.
            let oneLine = failure.message.split(whereSeparator: \.isNewline).joined(separator: " ")
            err("cmdbus: error: \(oneLine)")
            return
        }
        var fields: [String: JSONValue] = [
            "code": .string(failure.code.name), "message": .string(failure.message), "exitCode": .integer(Int64(failure.exitCode.rawValue)),
        ]
        if let command = failure.command { fields["command"] = .string(command) }
        if let plugin = failure.plugin { fields["plugin"] = .string(plugin) }
        if let id = failure.commandID { fields["commandId"] = .string(id) }
        err(JSONValue.object(["error": .object(fields)]).text)
    }
}
