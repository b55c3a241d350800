import CommandBusHTTP

/// Who may read the dashboard and who may change things through it.
///
/// - With a token (`--http-token-file`, required off loopback), every request must carry it:
///   `Authorization: Bearer TOKEN`, or the `cmdbus_token` cookie that `?token=TOKEN` sets once.
/// - Every POST (retry, discard) needs the action token in `X-Cmdbus-Token` (or the bearer
///   token), and a browser's request must come from the dashboard's own origin. The action token
///   is the configured token, or a random one made at start and written into the page, so a
///   page from another origin cannot learn it.
package struct DashboardAccess: Sendable {
    /// The token every request needs, if one was configured.
    package let requiredToken: String?
    /// The token POSTs need.
    package let actionToken: String
    /// The name of the cookie that carries the token.
    package static let cookieName = "cmdbus_token"

    /// Access with `token` required on every request (if not `nil`).
    package init(requiredToken: String?) {
        self.requiredToken = requiredToken
        actionToken = requiredToken ?? Self.randomToken()
    }

    /// What to do with a request before routing it.
    package enum Verdict: Sendable {
        case allow
        /// The token came in the query: set the cookie and send the browser to the same path without it.
        case setCookie(redirectTo: String)
        case deny(HTTPResponse)
    }

    /// Checks `request` against the rules above.
    package func check(_ request: HTTPRequest) -> Verdict {
        let bearer = request.header("authorization").flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }
        if let required = requiredToken {
            if let given = request.parameter("token"), Self.same(given, required), request.method == "GET" {
                return .setCookie(redirectTo: request.path)
            }
            let presented = bearer ?? request.cookie(Self.cookieName)
            guard let presented, Self.same(presented, required) else {
                return .deny(.error(401, "this dashboard needs its token: open it with ?token=TOKEN once, or send Authorization: Bearer TOKEN"))
            }
        }
        guard request.method == "POST" else { return .allow }
        if let site = request.header("sec-fetch-site"), site != "same-origin" {
            return .deny(.error(403, "POST from another site (\(site)) refused; use the dashboard's own page"))
        }
        if let origin = request.header("origin") {
            guard let host = request.header("host"), origin == "http://\(host)" || origin == "https://\(host)" else {
                return .deny(.error(403, "POST from origin \(origin) refused; use the dashboard's own page"))
            }
        }
        let presented = request.header("x-cmdbus-token") ?? bearer
        guard let presented, Self.same(presented, actionToken) else {
            return .deny(.error(403, "POST needs the action token in X-Cmdbus-Token (the page sends it; scripts send the --http-token-file token as a bearer token)"))
        }
        return .allow
    }

    /// Compares in time that does not depend on where the strings differ.
    static func same(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var difference: UInt8 = 0
        for index in x.indices { difference |= x[index] ^ y[index] }
        return difference == 0
    }

    /// 32 random bytes from the system's generator (the kernel's `getrandom`), as hex.
    static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    }

    /// The headers every dashboard response carries: no inline script, no framing, no sniffing.
    package static let securityHeaders: [(name: String, value: String)] = [
        ("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"),
        ("X-Content-Type-Options", "nosniff"),
        ("X-Frame-Options", "DENY"),
        ("Referrer-Policy", "no-referrer"),
    ]
}
