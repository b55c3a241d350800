import CommandBusSupport
import CommandBusHost
import CommandBusHTTP
import CommandBusDashboard
import CommandBusServer
import CommandBus
import Synchronization
import Glibc
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `serve --http [ADDR:]PORT` and `--http-token-file FILE`: where the dashboard listens, and the
/// token it asks for. Off loopback the token is required.
struct DashboardOptions {
    static let options: [ArgumentSpec.Option] = [
        .init(name: "http", short: nil, value: "[ADDR:]PORT", help: "Serve the web dashboard and /metrics on [ADDR:]PORT (ADDR 127.0.0.1 unless given)."),
        .init(name: "http-token-file", short: nil, value: "PATH", help: "A file holding the token every dashboard request needs (required off loopback)."),
    ]

    let listener: TCPListener
    let token: String?
    /// What the log says of the token's file as the dashboard starts: that others may read it.
    let tokenFileWarning: String?

    /// The dashboard's listener, bound now so a taken port fails before plugins load; `nil` without `--http`.
    static func listen(_ arguments: ArgumentSpec.Parsed) throws(HostFailure) -> DashboardOptions? {
        guard let text = arguments.value("http") else {
            if arguments.value("http-token-file") != nil { throw .usage("--http-token-file goes with --http [ADDR:]PORT") }
            return nil
        }
        guard let (host, port) = TCPListener.parse(text) else {
            throw .usage("--http takes [ADDR:]PORT, such as 8080, 127.0.0.1:8080 or [::1]:8080, got \(quoted(text))")
        }
        let tokenFile = arguments.value("http-token-file")
        let token = try tokenFile.map(readToken)
        let listener: TCPListener
        do { listener = try TCPListener.listen(host: host, port: port) } catch { throw HostFailure(.socketFailed, "--http: \(error.message)") }
        guard listener.isLoopback || token != nil else {
            close(listener.descriptor)
            throw .usage("--http \(text) listens beyond this machine; give --http-token-file FILE so every request needs a token")
        }
        return DashboardOptions(listener: listener, token: token, tokenFileWarning: tokenFile.flatMap(exposure))
    }

    private static func readToken(_ path: String) throws(HostFailure) -> String {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw HostFailure(.noInput, "--http-token-file \(path) cannot be read; create it with a random token, e.g. openssl rand -hex 32 > \(path)")
        }
        let token = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isWhitespace).joined(separator: " ")
        let printable = token.utf8.allSatisfy { byte in byte > 0x20 && byte < 0x7F && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: ";") }
        guard token.utf8.count >= 16, printable else {
            throw HostFailure(.badConfiguration, "--http-token-file \(path) must hold one token of at least 16 printable characters, without spaces, quotes or semicolons")
        }
        return token
    }

    /// What is wrong with who may use the token's file, as ssh says of a private key: a token
    /// others on the machine can read (or change) lets them in.
    private static func exposure(of path: String) -> String? {
        guard let mode = FileSystem.status(of: path)?.mode, mode & 0o077 != 0 else { return nil }
        return "--http-token-file \(path) can be read or changed by other users of this machine (mode 0\(String(mode & 0o777, radix: 8))), who could use the dashboard with it; chmod 600 \(path)"
    }

    /// Starts the dashboard over `sources` and says where it is.
    @discardableResult
    func start(_ sources: DashboardSources, log: ServerLog) -> HTTPServer {
        let reference = ServerReference()
        let dashboard = Dashboard(sources: sources, access: DashboardAccess(requiredToken: token)) {
            reference.server.withLock { $0?.openConnections ?? 0 }
        }
        let http = HTTPServer(listener: listener) { request in await dashboard.handle(request) }
        reference.server.withLock { $0 = http }
        http.start()
        log(.info, "dashboard on \(listener.url)/ (metrics at \(listener.url)/metrics)")
        if let tokenFileWarning { log(.warning, tokenFileWarning) }
        return http
    }
}

/// The HTTP server, for the dashboard's connection gauge, which exists before the server does.
private final class ServerReference: Sendable {
    let server = Mutex<HTTPServer?>(nil)
}
