extension DashboardAssets {
    /// `/app.css`.
    package static let style = #"""
        :root {
          --bg: #f6f7fb; --panel: #ffffff; --ink: #1d2433; --muted: #6b7385; --line: #e4e7ef;
          --nav: #161a2b; --nav-ink: #c9cee0; --accent: #4f46e5;
          --succeeded: #2f9e66; --failed: #d9485f; --timedOut: #e8890c; --cancelled: #8a8f98;
          --running: #3b82f6; --pending: #a0a7b4;
          --sans: ui-sans-serif, system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
          font-family: var(--sans);
          font-size: 14px; color: var(--ink); background: var(--bg);
        }
        * { box-sizing: border-box; }
        /* The page's own left 210 px are the nav's colour: a page longer than the window, captured
           whole, showed the sticky nav (one window high) ending half way down. */
        body { margin: 0; display: flex; min-height: 100vh; background: linear-gradient(to right, var(--nav) 210px, var(--bg) 210px); }
        a { color: var(--accent); text-decoration: none; }
        a:hover { text-decoration: underline; }
        code, pre, .mono { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, "DejaVu Sans Mono", monospace; font-size: 12.5px; }
        .nav { width: 210px; flex: none; background: var(--nav); color: var(--nav-ink); padding: 18px 12px; display: flex; flex-direction: column; gap: 18px; position: sticky; top: 0; height: 100vh; }
        .brand { display: flex; align-items: center; gap: 10px; color: #fff; font-weight: 700; font-size: 17px; padding: 0 8px; letter-spacing: .3px; }
        .brand:hover { text-decoration: none; }
        .nav nav { display: flex; flex-direction: column; gap: 2px; }
        .nav nav a { color: var(--nav-ink); padding: 8px 10px; border-radius: 7px; }
        .nav nav a:hover { background: #23283d; text-decoration: none; }
        .nav nav a.active { background: #2b3150; color: #fff; }
        .live { margin-top: auto; display: flex; align-items: center; gap: 8px; font-size: 12px; padding: 0 8px; }
        .live .dot { width: 8px; height: 8px; border-radius: 50%; background: var(--pending); }
        .live.on .dot { background: #34d399; box-shadow: 0 0 0 3px rgba(52, 211, 153, .2); }
        .live.off .dot { background: var(--failed); }
        main { flex: 1; padding: 26px 32px 60px; min-width: 0; }
        h1 { font-size: 22px; margin: 0 0 4px; display: flex; align-items: center; gap: 10px; flex-wrap: wrap; }
        h2 { font-size: 14px; margin: 0 0 12px; color: var(--muted); font-weight: 600; text-transform: uppercase; letter-spacing: .6px; }
        .subtitle { color: var(--muted); margin: 0 0 20px; }
        .muted { color: var(--muted); }
        .cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr)); gap: 14px; margin-bottom: 18px; }
        .card { background: var(--panel); border: 1px solid var(--line); border-radius: 12px; padding: 16px 18px; }
        .card-link { color: inherit; text-decoration: none; }
        .card-link:hover .card { border-color: var(--accent); }
        .card .label { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .5px; }
        .card .value { font-size: 26px; font-weight: 700; margin-top: 6px; font-variant-numeric: tabular-nums; }
        .card .value.failed { color: var(--failed); }
        .card .value.succeeded { color: var(--succeeded); }
        .panel { background: var(--panel); border: 1px solid var(--line); border-radius: 12px; padding: 18px; margin-bottom: 18px; overflow-x: auto; }
        .grid2 { display: grid; grid-template-columns: repeat(auto-fit, minmax(380px, 1fr)); gap: 18px; }
        .grid2 > .panel { margin-bottom: 0; }
        .wide-narrow { display: grid; grid-template-columns: minmax(0, 2fr) minmax(260px, 1fr); gap: 18px; margin-bottom: 18px; }
        .wide-narrow > .panel { margin-bottom: 0; display: flex; flex-direction: column; }
        .wide-narrow .feed { max-height: 230px; }
        @media (max-width: 1000px) { .wide-narrow { grid-template-columns: 1fr; } }
        table { border-collapse: collapse; width: 100%; }
        th { text-align: left; font-weight: 600; color: var(--muted); font-size: 12px; padding: 8px 10px; border-bottom: 1px solid var(--line); white-space: nowrap; }
        td { padding: 8px 10px; border-bottom: 1px solid var(--line); vertical-align: top; line-height: 1.4; }
        tr:last-child td { border-bottom: none; }
        tbody tr:hover { background: #fafbfe; }
        td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
        td a.mono, td.muted { white-space: nowrap; }
        td.error { color: var(--failed); max-width: 420px; overflow-wrap: anywhere; }
        .badge { font-family: var(--sans); display: inline-block; padding: 2px 9px; border-radius: 999px; font-size: 12px; font-weight: 600; color: #fff; background: var(--pending); white-space: nowrap; }
        .badge.succeeded { background: var(--succeeded); } .badge.failed { background: var(--failed); }
        .badge.timedOut { background: var(--timedOut); } .badge.cancelled { background: var(--cancelled); }
        .badge.running { background: var(--running); } .badge.pending { background: var(--pending); }
        .badge.paused { background: var(--timedOut); margin-left: 8px; }
        .badge.outline { background: transparent; color: var(--muted); border: 1px solid var(--line); }
        .chip { display: inline-block; background: #eef0f8; border-radius: 6px; padding: 1px 7px; margin: 1px 3px 1px 0; font-size: 12px; }
        .filters { display: flex; gap: 10px; flex-wrap: wrap; margin-bottom: 14px; align-items: center; }
        input, select, button { font: inherit; border: 1px solid var(--line); border-radius: 8px; padding: 7px 10px; background: #fff; color: var(--ink); }
        input { min-width: 220px; }
        button { cursor: pointer; background: var(--accent); color: #fff; border-color: var(--accent); font-weight: 600; }
        button.secondary { background: #fff; color: var(--ink); border-color: var(--line); }
        button.danger { background: #fff; color: var(--failed); border-color: #f1c0c8; }
        button.link { background: none; border-color: transparent; color: var(--accent); padding-left: 4px; padding-right: 4px; }
        button.link.danger { color: var(--failed); }
        button:disabled { opacity: .5; cursor: default; }
        dl { display: grid; grid-template-columns: max-content 1fr; gap: 6px 16px; margin: 0; }
        dt { color: var(--muted); }
        dd { margin: 0; overflow-wrap: anywhere; }
        pre { margin: 0; background: #f3f4f9; border-radius: 8px; padding: 12px; overflow: auto; max-height: 420px; white-space: pre-wrap; overflow-wrap: anywhere; }
        .timeline { list-style: none; margin: 0; padding: 0; }
        .timeline li { display: grid; grid-template-columns: 110px 90px 1fr; gap: 10px; padding: 5px 0; border-bottom: 1px dashed var(--line); }
        .timeline li:last-child { border-bottom: none; }
        .timeline li > span { overflow-wrap: anywhere; min-width: 0; }
        .timeline .kind { font-weight: 600; }
        .timeline .log-warning { color: var(--timedOut); } .timeline .log-error { color: var(--failed); }
        .chart { width: 100%; height: 100%; display: block; }
        .chart-box { flex: 1; min-height: 180px; position: relative; }
        .chart-box > .chart { position: absolute; inset: 0; }
        .chart .axis { stroke: var(--line); }
        .chart text { fill: var(--muted); font-size: 11px; }
        .legend { display: flex; gap: 14px; font-size: 12px; color: var(--muted); margin-top: 8px; }
        .legend span::before { content: ""; display: inline-block; width: 10px; height: 10px; border-radius: 3px; margin-right: 5px; vertical-align: -1px; background: var(--c); }
        .f-succeeded { fill: var(--succeeded); } .f-failed { fill: var(--failed); } .f-timedOut { fill: var(--timedOut); }
        .f-cancelled { fill: var(--cancelled); } .f-running { fill: var(--running); } .f-pending { fill: var(--pending); }
        .waterfall text { font-size: 12px; fill: var(--ink); }
        .waterfall .meta { fill: var(--muted); font-size: 11px; }
        .waterfall .meta.inside { fill: #fff; }
        .waterfall .grid { stroke: var(--line); }
        .waterfall a:hover text { text-decoration: underline; }
        .feed { list-style: none; margin: 0; padding: 0; max-height: 320px; overflow: auto; }
        .feed li { display: flex; gap: 10px; align-items: center; padding: 5px 0; border-bottom: 1px solid var(--line); white-space: nowrap; }
        .feed .name { flex: 1; min-width: 0; overflow: hidden; text-overflow: ellipsis; }
        .feed li:last-child { border-bottom: none; }
        .feed .when { color: var(--muted); font-size: 12px; margin-left: auto; font-variant-numeric: tabular-nums; }
        .empty { text-align: center; color: var(--muted); padding: 28px; }
        .alert { border-left: 4px solid var(--timedOut); padding: 4px 0 4px 14px; } .alert p { margin: 6px 0; }
        .actions { display: flex; gap: 8px; align-items: flex-start; }
        .actions button, .actions summary, .nowrap { white-space: nowrap; }
        .actions.toolbar { margin: 0 0 14px; }
        details.limits summary { cursor: pointer; color: var(--accent); font-weight: 600; padding: 7px 4px; list-style: none; }
        details.limits summary::-webkit-details-marker { display: none; }
        details.limits form { display: flex; gap: 8px; align-items: center; flex-wrap: wrap; margin-top: 6px; }
        details.limits label { color: var(--muted); font-size: 12px; display: flex; align-items: center; gap: 4px; }
        details.limits input { min-width: 0; width: 7em; padding: 5px 8px; }
        .toast { position: fixed; right: 22px; bottom: 22px; background: var(--nav); color: #fff; padding: 11px 16px; border-radius: 10px; box-shadow: 0 8px 30px rgba(0,0,0,.2); max-width: 420px; }
        .toast.error { background: var(--failed); }
        .flash { animation: flash 1.2s ease-out; }
        @keyframes flash { from { background: #e9e8ff; } to { background: transparent; } }
        @media (max-width: 760px) { body { flex-direction: column; background: var(--bg); } .nav { width: auto; height: auto; position: static; } main { padding: 18px; } }
        """#
}
