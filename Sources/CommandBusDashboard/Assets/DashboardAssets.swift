import CommandBusSupport

/// The dashboard's page, served from the binary: no CDN, no external fonts or scripts.
///
/// The page is a shell; `DashboardScript.swift` renders every view from the JSON API with DOM
/// calls (never HTML strings, so nothing from a payload can run), and `DashboardStyle.swift`
/// styles it. The content-security policy forbids inline script, so the only script is `/app.js`.
package enum DashboardAssets {
    /// The HTML shell, with the action token the page sends on its POSTs.
    package static func page(actionToken: String) -> String {
        #"""
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="cmdbus-action-token" content="\#(htmlEscaped(actionToken))">
        <title>cmdbus</title>
        <link rel="icon" href="/favicon.svg" type="image/svg+xml">
        <link rel="stylesheet" href="/app.css">
        <script src="/app.js" defer></script>
        </head>
        <body>
        <aside class="nav">
          <a class="brand" href="#/"><img src="/favicon.svg" alt="" width="22" height="22"><span>cmdbus</span></a>
          <nav>
            <a href="#/" data-page="overview">Overview</a>
            <a href="#/commands" data-page="commands">Commands</a>
            <a href="#/dead" data-page="dead">Dead letters</a>
            <a href="#/plugins" data-page="plugins">Plugins</a>
            <a href="#/hosts" data-page="hosts">Hosts &amp; queues</a>
          </nav>
          <div class="live" id="live"><span class="dot"></span><span id="live-text">connecting</span></div>
        </aside>
        <main id="main"><p class="muted">Loading…</p></main>
        <div id="toast" class="toast" hidden></div>
        </body>
        </html>
        """#
    }

    /// Makes text safe inside an HTML attribute or element: `htmlEscaped(text)`.
    package static let htmlEscaped = ASCIIEscaping(["&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;"])

    /// The favicon: a bus stop sign.
    package static let icon = #"""
        <svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect x="2" y="2" width="28" height="28" rx="7" fill="#4f46e5"/><path d="M9 11h14M9 16h9M9 21h14" stroke="#fff" stroke-width="3" stroke-linecap="round"/><circle cx="23" cy="16" r="2.5" fill="#a5f3fc"/></svg>
        """#
}
