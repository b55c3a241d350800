import CommandBus
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The client side of `--connect`: requests to a `cmdbus serve`, and their responses.
enum ServerClient {
    /// The socket `--connect` names: `--connect=PATH`, else the server's default.
    static func socket(_ arguments: ArgumentSpec.Parsed) -> String? {
        guard arguments.has("connect") else { return nil }
        return arguments.value("connect") ?? ServeCommand.defaultSocketPath
    }

    /// Sends `request` (an `id` is added) and returns the response's fields; event lines that
    /// carry the request's id go to `onEvent` on the way.
    static func request(
        _ socket: String, _ request: [String: JSONValue], onEvent: ([String: JSONValue]) -> Void = { _ in }
    ) throws(CLIFailure) -> [String: JSONValue] {
        let connection = try ServerConnection(socket)
        try connection.send(.object(request.merging(["id": .integer(1)]) { _, new in new }))
        while true {
            let fields = try connection.receive()
            guard fields["id"] == .integer(1) else { continue }
            if case .object(let event)? = fields["event"] { onEvent(event); continue }
            return fields
        }
    }

    /// A failure response as the CLI failure a local run would have had (same exit code).
    static func failure(_ fields: [String: JSONValue], command: String?) -> CLIFailure {
        guard case .object(let error)? = fields["error"], case .string(let code)? = error["code"], case .string(let message)? = error["message"] else {
            return CLIFailure(message: "the server answered something unexpected", exitCode: .failure, code: "usage", command: command, plugin: nil)
        }
        let exitCode = code == "usage" ? ExitCode.usage : CommandBusError.Code(name: code).map(ExitCode.init) ?? .failure
        return CLIFailure(message: message, exitCode: exitCode, code: code, command: command, plugin: nil)
    }
}

/// A connection to a running server for many requests: write some, read their answers as they come.
final class ServerConnection {
    private let descriptor: Int32
    private let reader: LineSocketReader
    let socket: String

    init(_ socket: String) throws(CLIFailure) {
        do {
            descriptor = try UnixSocket.connect(to: socket)
        } catch {
            let message = if case .failed(let text) = error { text } else { "cannot connect to \(socket)" }
            throw CLIFailure(message: "\(message) (is 'cmdbus serve' running?)", exitCode: .failure, code: "usage", command: nil, plugin: nil)
        }
        reader = LineSocketReader(descriptor: descriptor, limit: 1 << 30)
        self.socket = socket
    }

    deinit { close(descriptor) }

    func send(_ request: JSONValue) throws(CLIFailure) {
        guard sendAll(descriptor, Array((request.text + "\n").utf8)) else {
            throw CLIFailure(message: "the server at \(socket) closed the connection", exitCode: .failure, code: "usage", command: nil, plugin: nil)
        }
    }

    /// The next response line's fields.
    func receive() throws(CLIFailure) -> [String: JSONValue] {
        while let next = reader.next() {
            if case .text(let bytes) = next, case .object(let fields)? = JSONValue.parse(String(decoding: bytes, as: UTF8.self)) { return fields }
        }
        throw CLIFailure(message: "the server at \(socket) closed the connection before answering", exitCode: .failure, code: "usage", command: nil, plugin: nil)
    }
}
