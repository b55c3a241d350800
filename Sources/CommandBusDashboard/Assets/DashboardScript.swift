extension DashboardAssets {
    /// `/app.js`: the views, rendered from `/api/` and kept current by `/api/events`.
    ///
    /// Every value from the bus (names, payloads, errors, log lines) goes into the page as a text
    /// node or an attribute set through the DOM, never as HTML.
    package static let script = #"""
        'use strict';
        const main = document.getElementById('main');
        const actionToken = document.querySelector('meta[name="cmdbus-action-token"]').content;
        const STATES = ['succeeded', 'failed', 'timedOut', 'cancelled'];
        const SVGNS = 'http://www.w3.org/2000/svg';
        let view = { onTick: null };

        // ---- DOM helpers: text only, never HTML ----
        function h(tag, attrs, ...kids) {
          const el = document.createElement(tag);
          setAttrs(el, attrs);
          append(el, kids);
          return el;
        }
        function s(tag, attrs, ...kids) {
          const el = document.createElementNS(SVGNS, tag);
          setAttrs(el, attrs);
          append(el, kids);
          return el;
        }
        function setAttrs(el, attrs) {
          for (const [k, v] of Object.entries(attrs || {})) {
            if (v === null || v === undefined || v === false) continue;
            if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
            // Through the CSSOM: the content-security policy refuses style attributes.
            else if (k === 'style') el.style.cssText = v;
            else el.setAttribute(k, String(v));
          }
        }
        function append(el, kids) {
          for (const kid of kids.flat()) {
            if (kid === null || kid === undefined || kid === false) continue;
            el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
          }
        }
        function badge(state) { return h('span', { class: 'badge ' + state }, state); }
        function link(href, text, cls) { return h('a', { href, class: cls }, text); }
        function short(id) { return id ? id.slice(0, 8) + '…' + id.slice(-4) : ''; }
        // Two decimals under a millisecond, one under a second, then seconds to two; without the
        // trailing zeros ('100 ms', '2.5 ms', '1.5 s'), as the command line's tree says them.
        function ms(v) {
          if (v === null || v === undefined) return '–';
          if (v < 1) return Number(v.toFixed(2)) + ' ms';
          if (v < 1000) return Number(v.toFixed(1)) + ' ms';
          return Number((v / 1000).toFixed(2)) + ' s';
        }
        function ago(seconds) {
          const d = Date.now() / 1000 - seconds;
          if (d < 1) return 'just now';
          if (d < 60) return Math.floor(d) + ' s ago';
          if (d < 3600) return Math.floor(d / 60) + ' min ago';
          if (d < 86400) return Math.floor(d / 3600) + ' h ago';
          return new Date(seconds * 1000).toLocaleString(undefined, { hour12: false });
        }
        function duration(seconds) {
          if (seconds < 60) return Math.floor(seconds) + ' s';
          if (seconds < 3600) return Math.floor(seconds / 60) + ' min';
          // To a tenth, a whole number without its '.0' ('1 h', '1.9 h'), as the command line says it.
          if (seconds < 86400) return Number((seconds / 3600).toFixed(1)) + ' h';
          return Number((seconds / 86400).toFixed(1)) + ' d';
        }
        // Date and time, 24-hour as the timeline's, to the precision the text has (the journal's: seconds).
        function isoTime(text) {
          if (!text) return '–';
          const d = new Date(text), fraction = /\.\d/.test(text) ? '.' + String(d.getMilliseconds()).padStart(3, '0') : '';
          return d.toLocaleDateString() + ' ' + d.toLocaleTimeString(undefined, { hour12: false }) + fraction;
        }
        function num(n) { return (n || 0).toLocaleString(); }
        function toast(text, isError) {
          const el = document.getElementById('toast');
          el.textContent = text;
          el.className = 'toast' + (isError ? ' error' : '');
          el.hidden = false;
          clearTimeout(toast.timer);
          toast.timer = setTimeout(() => { el.hidden = true; }, 4000);
        }
        async function api(path, options) {
          const response = await fetch('/api/' + path, options);
          const body = await response.json().catch(() => ({}));
          if (!response.ok) throw new Error((body.error && body.error.message) || response.status + ' ' + response.statusText);
          return body;
        }
        async function post(path) {
          return api(path, { method: 'POST', headers: { 'X-Cmdbus-Token': actionToken } });
        }
        function table(headers, rows, empty) {
          if (!rows.length) return h('div', { class: 'empty' }, empty);
          return h('table', {},
            h('thead', {}, h('tr', {}, headers.map(x => typeof x === 'string' ? h('th', {}, x) : h('th', { class: x.cls }, x.text)))),
            h('tbody', {}, rows));
        }
        function panel(title, ...kids) { return h('section', { class: 'panel' }, title ? h('h2', {}, title) : null, kids); }
        function card(label, value, cls) {
          return h('div', { class: 'card' }, h('div', { class: 'label' }, label), h('div', { class: 'value ' + (cls || ''), 'data-card': label }, value));
        }
        function throttle(fn, wait) {
          let last = 0, timer = null;
          return () => {
            const now = Date.now();
            if (now - last >= wait) { last = now; fn(); }
            else if (!timer) timer = setTimeout(() => { timer = null; last = Date.now(); fn(); }, wait - (now - last));
          };
        }
        function page(title, subtitle, ...kids) {
          main.replaceChildren(h('h1', {}, title), ...(subtitle ? [h('p', { class: 'subtitle' }, subtitle)] : []), ...kids.flat().filter(Boolean));
        }
        function failure(error) { page('Something went wrong', null, panel(null, h('p', { class: 'error' }, error.message))); }

        // ---- Live updates ----
        function connect() {
          const live = document.getElementById('live'), text = document.getElementById('live-text');
          const events = new EventSource('/api/events');
          events.onopen = () => { live.className = 'live on'; text.textContent = 'live'; };
          events.onerror = () => { live.className = 'live off'; text.textContent = 'reconnecting'; };
          events.addEventListener('tick', e => {
            const tick = JSON.parse(e.data);
            if (view.onTick) view.onTick(tick);
          });
        }

        // ---- Overview ----
        async function overview() {
          const data = await api('overview');
          let series = data.history.slice(-120);
          // The chart fills its card, as tall as the list beside it, drawn at the box's own size
          // (its text at its real size, where a fixed drawing scaled to the card left a gap under it).
          const chartBox = h('div', { class: 'chart-box' });
          const feed = h('ul', { class: 'feed' });
          const cards = h('div', { class: 'cards' },
            link('#/commands?state=pending,running', card('In flight', num(data.inFlight)), 'card-link'),
            card('Succeeded', num(data.totals.completed), 'succeeded'),
            link('#/dead', card('Failed', num(data.totals.failed), data.totals.failed ? 'failed' : ''), 'card-link'),
            link('#/plugins', card('Plugins', num(data.plugins.loaded)), 'card-link'),
            // A quarantine is lifted from the plugins page (Try again), one click away.
            link('#/plugins', card('Quarantined', num(data.plugins.quarantined), data.plugins.quarantined ? 'failed' : ''), 'card-link'),
            card('Uptime', duration(data.uptimeSeconds)));
          const namesBox = h('div');
          const renderNames = d => namesBox.replaceChildren(table(
            ['Command', { text: 'Count', cls: 'num' }, { text: 'Succeeded', cls: 'num' }, { text: 'Failed', cls: 'num' },
             { text: 'Timed out', cls: 'num' }, { text: 'Cancelled', cls: 'num' }, { text: 'p50', cls: 'num' }, { text: 'p99', cls: 'num' }],
            d.commands.map(c => h('tr', {},
              h('td', {}, link('#/commands?command=' + encodeURIComponent(c.command), c.command, 'mono')),
              h('td', { class: 'num' }, num(c.count)), h('td', { class: 'num' }, num(c.succeeded)),
              h('td', { class: 'num' }, num(c.failed)), h('td', { class: 'num' }, num(c.timedOut)),
              h('td', { class: 'num' }, num(c.cancelled)), h('td', { class: 'num' }, ms(c.p50Ms)), h('td', { class: 'num' }, ms(c.p99Ms)))),
            // The socket speaks NDJSON, not HTTP: this said "POST to the socket".
            'No commands have ended here yet. Send one: ' + (d.shared ? 'cmdbus run <command> --bus URL' : 'cmdbus run <command> --connect, or a request line on the socket') + '.'));
          renderNames(data);
          page('Overview', 'What the bus is doing now.',
            cards,
            h('div', { class: 'wide-narrow' },
              panel('Commands per second · last 2 minutes', chartBox, legend()),
              panel('Just ended', feed)),
            panel('By command', namesBox));
          const drawChart = () => chartBox.replaceChildren(chart(series, chartBox.clientWidth, chartBox.clientHeight));
          drawChart();
          // Drawn again at a new size; once the page is left (the box taken out), watched no more.
          const resized = new ResizeObserver(() => chartBox.isConnected ? drawChart() : resized.disconnect());
          resized.observe(chartBox);
          const feedItem = (e, cls) => h('li', cls ? { class: cls, 'data-id': e.id } : { 'data-id': e.id }, badge(e.state), link('#/command/' + e.id, e.command, 'mono name'),
            h('span', { class: 'muted' }, ms(e.durationMs)), h('span', { class: 'when' }, new Date(e.endedAt * 1000).toLocaleTimeString(undefined, { hour12: false })));
          // What ended before the page opened, newest first; then what ends while it is open.
          if (data.lastEnded.length) feed.append(...data.lastEnded.slice().reverse().map(e => feedItem(e)));
          else feed.append(h('li', { class: 'muted' }, 'Waiting for commands…'));
          const refreshNames = throttle(async () => { try { renderNames(await api('overview')); } catch (_) {} }, 2000);
          view.onTick = tick => {
            cards.querySelector('[data-card="In flight"]').textContent = num(tick.inFlight);
            cards.querySelector('[data-card="Succeeded"]').textContent = num(tick.totals.completed);
            const failedCard = cards.querySelector('[data-card="Failed"]');
            failedCard.textContent = num(tick.totals.failed);
            failedCard.className = 'value ' + (tick.totals.failed ? 'failed' : '');
            // Drawn again only when a second is added: a tick without one changes no bar.
            if (tick.second && (!series.length || tick.second.time > series[series.length - 1].time)) {
              series.push(tick.second);
              series = series.slice(-120);
              drawChart();
            }
            if (tick.ended.length) {
              if (feed.firstChild && feed.firstChild.classList.contains('muted')) feed.replaceChildren();
              // The first tick can bring what the page was opened with: each command is listed once.
              const listed = new Set([...feed.children].map(li => li.dataset.id));
              for (const e of tick.ended) if (!listed.has(e.id)) feed.prepend(feedItem(e, 'flash'));
              while (feed.children.length > 40) feed.lastChild.remove();
              refreshNames();
            }
          };
        }
        function legend() {
          return h('div', { class: 'legend' }, STATES.map(st => h('span', { style: '--c: var(--' + st + ')' }, st)));
        }
        // A stacked bar a second, `boxWidth` by `boxHeight` pixels (960 by 190 where the box has no size yet).
        function chart(series, boxWidth, boxHeight) {
          const width = Math.max(240, boxWidth || 960), height = Math.max(120, boxHeight || 190), left = 36, bottom = 20, top = 8;
          const totals = series.map(p => STATES.reduce((sum, st) => sum + (p[st] || 0), 0));
          const peak = Math.max(1, ...totals);
          const step = peak <= 4 ? 1 : Math.pow(10, Math.floor(Math.log10(peak))) / (peak / Math.pow(10, Math.floor(Math.log10(peak))) < 2 ? 4 : 2);
          const max = Math.ceil(peak / step) * step;
          const scale = (height - bottom - top) / max;
          const bar = (width - left) / Math.max(series.length, 1);
          const svg = s('svg', { class: 'chart', viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': 'commands per second' });
          for (const f of [0, 0.5, 1]) {
            const value = f * max;
            if (value !== Math.round(value)) continue;
            const y = height - bottom - value * scale;
            svg.append(s('line', { class: 'axis', x1: left, x2: width, y1: y, y2: y }));
            svg.append(s('text', { x: left - 6, y: y + 4, 'text-anchor': 'end' }, value.toLocaleString()));
          }
          series.forEach((p, i) => {
            let y = height - bottom;
            for (const st of STATES) {
              const v = p[st] || 0;
              if (!v) continue;
              const hgt = v * scale;
              y -= hgt;
              svg.append(s('rect', { x: left + i * bar + 0.5, y, width: Math.max(bar - 1, 1), height: hgt, class: 'f-' + st },
                s('title', {}, `${new Date(p.time * 1000).toLocaleTimeString(undefined, { hour12: false })}: ${v} ${st}`)));
            }
          });
          if (series.length) {
            svg.append(s('text', { x: left, y: height - 4 }, new Date(series[0].time * 1000).toLocaleTimeString(undefined, { hour12: false })));
            svg.append(s('text', { x: width, y: height - 4, 'text-anchor': 'end' }, 'now'));
          }
          return svg;
        }

        // ---- Commands ----
        function commandRows(list) {
          return list.map(c => h('tr', {},
            h('td', { class: 'num muted' }, c.sequence),
            h('td', {}, link('#/command/' + c.id, short(c.id), 'mono')),
            h('td', { class: 'mono' }, c.command, c.parentId ? h('span', { class: 'muted' }, ' (sub)') : null),
            h('td', {}, badge(c.state), c.discarded ? h('span', { class: 'badge outline' }, 'discarded') : null),
            h('td', { class: 'num' }, c.attempts),
            h('td', { class: 'num nowrap' }, c.durationMs == null && c.elapsedMs != null ? h('span', { class: 'muted' }, ms(c.elapsedMs) + ' so far') : ms(c.durationMs)),
            h('td', { class: 'muted' }, ago(c.createdAt)),
            h('td', { class: 'error' }, c.error || '')));
        }
        async function commands(params) {
          const stateSelect = h('select', { name: 'state' }, h('option', { value: '' }, 'any state'),
            h('option', { value: 'pending,running' }, 'in flight'), ['pending', 'running', ...STATES].map(st => h('option', { value: st }, st)));
          stateSelect.value = params.get('state') || '';
          const nameInput = h('input', { name: 'command', placeholder: 'command name', value: params.get('command') || '' });
          const idInput = h('input', { name: 'id', placeholder: 'search by id (UUID)', value: params.get('id') || '' });
          const windowSelect = h('select', { name: 'window' }, h('option', { value: '' }, 'any time'),
            [['300', 'last 5 minutes'], ['3600', 'last hour'], ['86400', 'last day'], ['604800', 'last week']].map(([v, t]) => h('option', { value: v }, t)));
          windowSelect.value = params.get('window') || '';
          const go = () => {
            const q = new URLSearchParams();
            if (windowSelect.value) q.set('window', windowSelect.value);
            if (stateSelect.value) q.set('state', stateSelect.value);
            if (nameInput.value) q.set('command', nameInput.value.trim());
            if (idInput.value) q.set('id', idInput.value.trim());
            location.hash = '#/commands' + (q.toString() ? '?' + q : '');
          };
          const form = h('form', { class: 'filters', onsubmit: e => { e.preventDefault(); go(); } },
            stateSelect, windowSelect, nameInput, idInput, h('button', { type: 'submit' }, 'Filter'),
            h('button', { type: 'button', class: 'secondary', onclick: () => { location.hash = '#/commands'; } }, 'Clear'));
          stateSelect.addEventListener('change', go);
          windowSelect.addEventListener('change', go);
          const body = h('div');
          const more = h('button', { class: 'secondary', hidden: true }, 'Older');
          let oldest = null;
          const load = async (append) => {
            const q = new URLSearchParams(params);
            if (q.get('window')) { q.set('since', String(Date.now() / 1000 - Number(q.get('window')))); q.delete('window'); }
            if (append && oldest) q.set('before', oldest);
            const data = await api('commands?' + q);
            const list = data.commands;
            if (list.length) oldest = list[list.length - 1].sequence;
            more.hidden = list.length < 50 || params.get('id');
            if (append) body.querySelector('tbody').append(...commandRows(list));
            else body.replaceChildren(table(['#', 'Id', 'Command', 'State', { text: 'Attempts', cls: 'num' }, { text: 'Duration', cls: 'num' }, 'Created', 'Error'],
              commandRows(list), 'No commands match.'));
          };
          more.addEventListener('click', () => load(true).catch(e => toast(e.message, true)));
          await load(false);
          page('Commands', 'Newest first, from the journal.', form, panel(null, body, h('div', { class: 'filters' }, more)));
          const refresh = throttle(() => { if (!oldest || body.querySelectorAll('tbody tr').length <= 50) load(false).catch(() => {}); }, 2000);
          view.onTick = tick => { if (tick.ended.length) refresh(); };
        }

        // ---- One command ----
        async function command(id) {
          const data = await api('commands/' + encodeURIComponent(id));
          const r = data.record;
          const dead = ['failed', 'timedOut', 'cancelled'].includes(r.state);
          const facts = h('dl', {},
            h('dt', {}, 'Id'), h('dd', { class: 'mono' }, r.id),
            h('dt', {}, 'Command'), h('dd', { class: 'mono' }, r.command),
            h('dt', {}, 'Plugin'), h('dd', {}, data.plugin ? [data.plugin.name, ' ', h('span', { class: 'muted mono' }, data.plugin.path)] : '–'),
            h('dt', {}, 'Parent'), h('dd', {}, r.parentId ? link('#/command/' + r.parentId, r.parentId, 'mono') : '–'),
            h('dt', {}, 'Tree'), h('dd', {}, data.rootId !== r.id ? link('#/command/' + data.rootId, 'root ' + short(data.rootId), 'mono') : 'this is the root'),
            h('dt', {}, 'Attempts'), h('dd', {}, r.attempts),
            h('dt', {}, 'Created'), h('dd', {}, isoTime(r.createdAt)),
            h('dt', {}, 'Started'), h('dd', {}, isoTime(r.startedAt)),
            h('dt', {}, 'Finished'), h('dd', {}, isoTime(r.finishedAt)),
            h('dt', {}, 'Trace'), h('dd', { class: 'mono' }, data.traceparent || '–'),
            r.undoOf ? [h('dt', {}, 'Undoes'), h('dd', {}, link('#/command/' + r.undoOf, r.undoOf, 'mono'))] : null,
            r.undoneBy ? [h('dt', {}, 'Undone by'), h('dd', {}, link('#/command/' + r.undoneBy, r.undoneBy, 'mono'))] : null,
            Object.keys(r.metadata || {}).filter(k => k !== 'traceparent').map(k => [h('dt', {}, k), h('dd', { class: 'mono' }, r.metadata[k])]));
          const actions = dead ? h('div', { class: 'actions' },
            h('button', { onclick: () => act('retry', r.id) }, 'Retry'),
            r.discardedAt ? h('span', { class: 'badge outline' }, 'discarded') : h('button', { class: 'danger', onclick: () => act('discard', r.id) }, 'Discard'))
            : data.canCancel ? h('div', { class: 'actions' }, h('button', { class: 'danger', onclick: () => act('cancel', r.id) }, 'Cancel')) : null;
          page([h('span', { class: 'mono' }, r.command), badge(r.state)], 'Command ' + r.id,
            actions ? h('div', { style: 'margin-bottom: 16px' }, actions) : null,
            r.error ? panel('Error', h('p', { class: 'error mono' }, r.error.code + ': ' + (r.error.message || ''))) : null,
            data.tree ? panel('Subcommand tree', waterfall(data.tree, r.id)) : null,
            h('div', { class: 'grid2' },
              panel('Envelope', facts),
              panel('Timeline', timeline(r, data.events))),
            h('div', { class: 'grid2', style: 'margin-top: 18px' },
              panel('Payload', h('pre', {}, JSON.stringify(r.payload, null, 2))),
              panel('Result', h('pre', {}, r.result === null ? '–' : JSON.stringify(r.result, null, 2)))));
          const open = !['succeeded', 'failed', 'timedOut', 'cancelled'].includes(r.state);
          const refresh = throttle(() => route(), 1500);
          view.onTick = tick => { if (open && tick.endedCount) refresh(); else if (tick.ended.some(e => e.id === r.id)) refresh(); };
        }
        // Compact JSON with a place to break after each comma (a <wbr>, which copies as nothing),
        // so a long payload wraps between its members, not inside a name or a number.
        function breakable(text) { return text.split(',').flatMap((part, i) => i ? [',', h('wbr', {}), part] : [part]); }
        function timeline(r, events) {
          const items = [];
          const t = x => new Date(x).toLocaleTimeString(undefined, { hour12: false }) + '.' + String(new Date(x).getMilliseconds()).padStart(3, '0');
          for (const e of events) {
            let what;
            if (e.kind === 'state') what = [badge(e.to), ' from ', e.from];
            else if (e.kind === 'progress') what = `${e.completed} of ${e.total} subcommands`;
            else if (e.kind === 'log') what = h('span', { class: 'log-' + e.level }, `[${e.level}] ${e.message}`);
            else if (e.kind === 'emitted') what = [h('span', { class: 'mono' }, e.name), ' ', h('span', { class: 'muted mono' }, breakable(JSON.stringify(e.payload)))];
            // Taken by the bus, pending: sent by its parent, for a subcommand (its kind alone said "accepted" twice).
            else if (e.kind === 'accepted') what = [badge('pending'), e.parentId ? [' sent by ', link('#/command/' + e.parentId, short(e.parentId), 'mono')] : null];
            else what = e.kind;
            items.push(h('li', {}, h('span', { class: 'muted mono' }, t(e.time * 1000)), h('span', { class: 'kind' }, e.kind), h('span', {}, what)));
          }
          if (!items.length) {
            const marks = [['accepted', r.createdAt], ['started', r.startedAt], [r.state, r.finishedAt]].filter(m => m[1]);
            for (const [kind, at] of marks) items.push(h('li', {}, h('span', { class: 'muted mono' }, t(at)), h('span', { class: 'kind' }, kind), h('span', { class: 'muted' }, 'from the journal')));
          }
          return h('ul', { class: 'timeline' }, items);
        }
        function waterfall(tree, current) {
          const rows = [];
          (function walk(node, depth) { rows.push([node, depth]); for (const c of node.children) walk(c, depth + 1); })(tree, 0);
          // A command still at work is drawn to now, and labelled so.
          const span = n => n.durationMs ?? n.elapsedMs ?? 0;
          const took = n => n.durationMs == null && n.elapsedMs != null ? 'running ' + ms(n.elapsedMs) : ms(n.durationMs);
          const end = Math.max(1e-3, ...rows.map(([n]) => n.offsetMs + span(n)));
          const width = 960, labelW = 300, rowH = 26, top = 22, chartW = width - labelW - 110;
          const svg = s('svg', { class: 'waterfall', viewBox: `0 0 ${width} ${top + rows.length * rowH + 6}`, width: '100%', role: 'img', 'aria-label': 'subcommand waterfall' });
          for (const f of [0, 0.25, 0.5, 0.75, 1]) {
            const x = labelW + f * chartW;
            svg.append(s('line', { class: 'grid', x1: x, x2: x, y1: 14, y2: top + rows.length * rowH }));
            svg.append(s('text', { class: 'meta', x, y: 11, 'text-anchor': 'middle' }, ms(f * end)));
          }
          rows.forEach(([n, depth], i) => {
            const y = top + i * rowH;
            const label = s('a', { href: '#/command/' + n.id },
              s('text', { x: 8 + depth * 16, y: y + 17, 'font-weight': n.id === current ? 700 : 400 }, (depth ? '└ ' : '') + n.command));
            svg.append(label);
            const x = labelW + (n.offsetMs / end) * chartW;
            const w = Math.max(2, (span(n) / end) * chartW);
            svg.append(s('rect', { x, y: y + 5, width: w, height: rowH - 10, rx: 3, class: 'f-' + n.state },
              s('title', {}, `${n.command}: ${n.state}, ${took(n)} at +${ms(n.offsetMs)}${n.plugin ? ' on ' + n.plugin : ''}${n.error ? ' — ' + n.error : ''}`)));
            // A label that would run past the chart's right edge goes inside the end of its bar.
            const text = `${took(n)}${n.plugin ? ' · ' + n.plugin : ''}`;
            const inside = x + w + 6 + text.length * 6.5 > width && w > text.length * 6.5 + 12;
            svg.append(s('text', inside ? { class: 'meta inside', x: x + w - 6, y: y + 17, 'text-anchor': 'end' } : { class: 'meta', x: x + w + 6, y: y + 17 }, text));
          });
          return svg;
        }
        async function act(what, id) {
          try {
            const body = await post(`commands/${encodeURIComponent(id)}/${what}`);
            toast(what === 'retry' ? 'Retrying as ' + short(body.commandId) : what === 'cancel' ? 'Cancelling ' + short(id) : 'Discarded ' + short(id));
            setTimeout(route, 400);
          } catch (e) { toast(e.message, true); }
        }

        // Each dead letter listed, one after another: how many ran again, and why any was refused.
        async function retryAll(ids) {
          if (!confirm(`Run the ${num(ids.length)} dead letters listed again, each under its id?`)) return;
          let retried = 0;
          const refused = [];
          for (const id of ids) {
            try { await post(`commands/${encodeURIComponent(id)}/retry`); retried += 1; } catch (e) { refused.push(e.message); }
          }
          toast(`Retried ${num(retried)}` + (refused.length ? `; ${num(refused.length)} refused: ${refused[0]}` : ''), refused.length > 0);
          setTimeout(route, 400);
        }

        async function setPaused(name, pause) {
          try {
            await post(`queues/${encodeURIComponent(name)}/${pause ? 'pause' : 'resume'}`);
            toast(pause ? `Paused ${name}: no host claims it` : `Resumed ${name}`);
            setTimeout(route, 400);
          } catch (e) { toast(e.message, true); }
        }

        async function setLimits(name, atOnce, rate) {
          try {
            await post(`queues/${encodeURIComponent(name)}/limit?atOnce=${encodeURIComponent(atOnce)}&rate=${encodeURIComponent(rate)}`);
            toast(`Limits of ${name} set`);
            setTimeout(route, 400);
          } catch (e) { toast(e.message, true); }
        }

        async function cancelWaiting(name, count) {
          if (!confirm(`Cancel the ${num(count)} ${name} commands that wait? They end cancelled; what runs finishes.`)) return;
          try {
            const body = await post(`queues/${encodeURIComponent(name)}/cancel`);
            toast(`Cancelled ${num(body.cancelled)} waiting ${name}`);
            setTimeout(route, 400);
          } catch (e) { toast(e.message, true); }
        }

        async function periodicAction(name, operation) {
          if (operation === 'run' && !confirm(`Post the command of periodic ${name} now, once? Its schedule stands.`)) return;
          if (operation === 'remove' && !confirm(`Remove periodic ${name}? Its schedule goes; the commands it posted stay.`)) return;
          try {
            const body = await post(`periodic/${encodeURIComponent(name)}/${operation}`);
            toast({ run: `Posted ${name} now`, pause: `Paused periodic ${name}: it posts nothing until resumed`, remove: `Removed periodic ${name}` }[operation]
              || `Resumed periodic ${name}: next in ${duration(body.nextDueSeconds)}`);
            setTimeout(route, 400);
          } catch (e) { toast(e.message, true); }
        }

        // ---- Dead letters ----
        async function deadLetters() {
          const data = await api('dead-letters');
          const rows = data.deadLetters.map(c => h('tr', {},
            h('td', {}, link('#/command/' + c.id, short(c.id), 'mono')),
            h('td', { class: 'mono' }, c.command), h('td', {}, badge(c.state)),
            h('td', { class: 'error' }, (c.errorCode ? c.errorCode + ': ' : '') + (c.error || '')),
            h('td', { class: 'num' }, c.attempts), h('td', { class: 'muted' }, ago(c.updatedAt)),
            h('td', {}, h('div', { class: 'actions' },
              h('button', { onclick: () => act('retry', c.id) }, 'Retry'),
              data.canDiscard ? h('button', { class: 'danger', onclick: () => act('discard', c.id) }, 'Discard') : null))));
          const retryable = data.deadLetters.filter(c => !c.discarded).map(c => c.id);
          page('Dead letters', 'Failed, timed-out and cancelled commands. Retry runs one again under its id; discard takes it off this list (the journal keeps it).',
            retryable.length > 1 ? h('div', { class: 'actions toolbar' }, h('button', { onclick: () => retryAll(retryable) }, `Retry all ${num(retryable.length)}`)) : null,
            panel(null, table(['Id', 'Command', 'State', 'Error', { text: 'Attempts', cls: 'num' }, 'When', ''], rows, 'No dead letters. Everything that ran, succeeded.')));
          const refresh = throttle(() => route(), 3000);
          view.onTick = tick => { if (tick.ended.some(e => e.state !== 'succeeded')) refresh(); };
        }

        // ---- Plugins ----
        // Loads a quarantined file again, unchanged: a new worker, or a new probe.
        async function loadAgain(path) {
          try {
            const body = await post('plugins/forget?path=' + encodeURIComponent(path));
            toast('Loaded ' + body.plugin.name + ' ' + body.plugin.version + ' again');
          } catch (e) { toast(e.message, true); }
          setTimeout(route, 400);
        }
        // Loads a plugin file again on every live host of the bus that has one of that name.
        async function loadAgainOnBus(file) {
          try {
            const body = await post('hosts/forget?file=' + encodeURIComponent(file));
            const loaded = body.hosts.filter(x => x.ok).length;
            const failed = body.hosts.filter(x => !x.ok);
            toast(`Loaded ${file} again on ${loaded} of ${body.hosts.length} host${body.hosts.length === 1 ? '' : 's'}`
              + (failed.length ? ': ' + failed.map(x => x.label + ': ' + x.message).join('; ') : ''), failed.length > 0);
          } catch (e) { toast(e.message, true); }
          setTimeout(route, 400);
        }
        // An isolated plugin's worker under its badge, a line each: which process, its calls, its restarts.
        function workerDetail(w) {
          const parts = w.pid != null ? [`pid ${w.pid}`, `${w.callsInProgress} call${w.callsInProgress === 1 ? '' : 's'} in progress`] : [];
          return parts.concat(`${w.restarts} restart${w.restarts === 1 ? '' : 's'}`).map(part => h('div', { class: 'nowrap' }, part));
        }
        async function plugins() {
          const data = await api('plugins');
          const catalog = data.catalog;
          const workers = Object.fromEntries(data.workers.map(w => [w.path, w]));
          const loaded = catalog.plugins.map(p => {
            const w = workers[p.path];
            return h('tr', {},
              h('td', {}, h('strong', {}, p.name), h('div', { class: 'muted mono' }, p.path)),
              h('td', { class: 'mono' }, p.version), h('td', { class: 'mono' }, p.abi), h('td', { class: 'mono' }, p.sdkVersion || '–'),
              h('td', { class: 'num' }, p.priority),
              h('td', {}, p.commands.map(c => h('span', { class: 'chip mono' }, c))),
              h('td', {}, w ? [h('span', { class: 'badge ' + (w.quarantine ? 'failed' : w.running ? 'succeeded' : 'pending') }, w.quarantine ? 'quarantined' : w.running ? 'worker running' : 'worker idle'),
                h('div', { class: 'muted' }, ...workerDetail(w))] : h('span', { class: 'muted' }, 'in process')));
          });
          // Files the probe quarantined or the loader skipped, and loaded isolated plugins whose
          // worker crashed too often: each with why, and what ends it.
          const stopped = data.workers.filter(w => w.quarantine).map(w => ({ path: w.path, quarantined: true, reason: w.quarantine }));
          // A quarantined file can be tried again as it is, as 'cmdbus plugins forget FILE --connect' does.
          const tryAgain = x => x.quarantined && data.loadsAgain
            ? h('div', { class: 'actions' }, h('button', { onclick: () => loadAgain(x.path) }, 'Try again')) : null;
          const skipped = stopped.concat(catalog.skipped).map(x => h('tr', {},
            h('td', { class: 'mono' }, x.path), h('td', {}, h('span', { class: x.quarantined ? 'badge failed' : 'badge outline' }, x.quarantined ? 'quarantined' : 'skipped')),
            h('td', { class: 'error' }, x.reason), h('td', {}, tryAgain(x))));
          // A quarantined plugin's commands are marked where they route, so the table does not read as healthy.
          const quarantinedPlugins = new Set(catalog.plugins.filter(p => workers[p.path] && workers[p.path].quarantine).map(p => p.name));
          const routes = catalog.commands.map(c => h('tr', {},
            h('td', { class: 'mono' }, c.command), h('td', {}, c.plugin, quarantinedPlugins.has(c.plugin)
              ? [' ', h('span', { class: 'badge failed', title: 'its plugin is quarantined: see Quarantined and skipped' }, 'quarantined')] : null),
            h('td', { class: 'muted' }, c.maxConcurrency ? (c.maxConcurrency === 1 ? 'one at a time' : `at most ${num(c.maxConcurrency)}`) : 'no limit'),
            h('td', { class: 'muted' }, c.shadowed.map(x => x.plugin).join(', ') || '–')));
          page('Plugins', 'Loaded from ' + catalog.directories.join(', '),
            panel('Loaded', table(['Plugin', 'Version', 'ABI', 'SDK', { text: 'Priority', cls: 'num' }, 'Commands', 'Isolation'], loaded, 'No plugins loaded. Drop a .so file into the plugin directory.')),
            panel('Quarantined and skipped', table(['File', 'State', 'Reason', ''], skipped, 'Every file loaded.')),
            panel('Who handles what', table(['Command', 'Plugin', 'At once', 'Shadows'], routes, 'No commands.')));
          view.onTick = null;
        }

        // ---- Hosts and queues ----
        async function hosts() {
          const data = await api('hosts');
          if (!data.shared) {
            page('Hosts & queues', null, panel(null, h('div', { class: 'empty' },
              'This host runs on its own, with a local journal. Start hosts with ',
              h('code', {}, 'cmdbus serve --bus URL --http PORT'), ' to share one bus in PostgreSQL and see them here.')));
            view.onTick = null;
            return;
          }
          const hostRows = data.hosts.map(x => h('tr', {},
            h('td', {}, h('strong', {}, x.hostname), h('div', { class: 'muted mono' }, short(x.id))),
            h('td', { class: 'num' }, x.pid), h('td', {}, h('span', { class: 'badge ' + (x.live ? 'succeeded' : 'failed') }, x.live ? 'live' : 'silent'),
              x.draining ? h('span', { class: 'badge paused', title: 'stopping: claims nothing new, finishes what it runs' }, 'draining') : null),
            h('td', { class: 'num' }, x.secondsSinceHeartbeat.toFixed(1) + ' s'), h('td', { class: 'num' }, x.running),
            h('td', {}, x.commands.map(c => h('span', { class: 'chip mono' }, c)),
              (x.quarantined || []).map(q => h('div', { class: 'error' }, h('span', { class: 'badge failed' }, 'quarantined'), ' ',
                h('span', { class: 'mono' }, q.plugin || q.path), ': ', q.reason.replace(/^quarantined: /, ''), ' ',
                h('button', { class: 'link', onclick: () => loadAgainOnBus(q.path.split('/').pop()) }, 'Try again on every host'))))));
          // A name a live host handles, or one paused or limited, with nothing running or waiting
          // still gets its row: to pause it or set its limits before work comes, to resume it
          // from, and to see its limit.
          const paused = new Map((data.paused || []).map(p => [p.command, p]));
          const limits = new Map((data.limits || []).map(l => [l.command, l]));
          const handled = new Set(data.hosts.filter(x => x.live).flatMap(x => x.commands));
          const queues = data.queues.concat([...new Set([...paused.keys(), ...limits.keys(), ...handled])].sort()
            .filter(n => !data.queues.some(q => q.command === n))
            .map(n => ({ command: n, running: 0, pending: 0, scheduled: 0, paused: paused.has(n), limit: limits.get(n) && limits.get(n).limit })));
          // A name's rate ('bus limit --rate'): how many started in its last period, of how many may.
          const named = { 1: 'a second', 60: 'a minute', 3600: 'an hour', 86400: 'a day' };
          const span = s => s < 1 ? `${Math.round(s * 1000)} ms` : s < 60 ? `${+s.toFixed(2)} s` : duration(s);
          const rateChip = name => {
            const l = limits.get(name);
            return l && l.rate ? h('span', { class: 'chip', title: `at most ${num(l.rate.starts)} start in any ${span(l.rate.periodSeconds)} across the bus; ${num(l.recentStarts)} started in the last` },
              `${num(l.recentStarts)} / ${num(l.rate.starts)} ${named[l.rate.periodSeconds] || 'per ' + span(l.rate.periodSeconds)}`) : null;
          };
          // A rate as 'bus limit --rate' takes it: 10/s, 100/m, 3/700ms.
          const rateInput = r => `${r.starts}/${{ 1: 's', 60: 'm', 3600: 'h', 86400: 'd' }[r.periodSeconds] || (r.periodSeconds < 60 ? Math.round(r.periodSeconds * 1000) + 'ms' : Math.round(r.periodSeconds) + 's')}`;
          // How many run at once and start in a period across the bus: empty removes one.
          const limitEditor = q => {
            const l = limits.get(q.command) || {};
            const atOnce = h('input', { name: 'atOnce', placeholder: 'none', value: l.limit ? String(l.limit) : '', title: 'at most so many run at once, on every host together' });
            const rate = h('input', { name: 'rate', placeholder: 'none (10/s)', value: l.rate ? rateInput(l.rate) : '', title: 'at most so many start in a period: 10/s, 100/m, 5/10s' });
            return h('details', { class: 'limits' }, h('summary', {}, 'Limits'),
              h('form', { onsubmit: e => { e.preventDefault(); setLimits(q.command, atOnce.value.trim() || 'none', rate.value.trim() || 'none'); } },
                h('label', {}, 'At once', atOnce), h('label', {}, 'Rate', rate), h('button', { type: 'submit' }, 'Save')));
          };
          const pauseButton = q => q.commands ? null : h('div', { class: 'actions' }, q.paused
            ? h('button', { onclick: () => setPaused(q.command, false) }, 'Resume')
            : h('button', { class: 'secondary', onclick: () => setPaused(q.command, true) }, 'Pause'),
            q.pending + (q.scheduled || 0) > 0 ? h('button', { class: 'danger', title: 'cancel every command of this name that waits; what runs finishes',
              onclick: () => cancelWaiting(q.command, q.pending + (q.scheduled || 0)) }, 'Cancel waiting') : null, limitEditor(q));
          const queueRows = queues.map(q => h('tr', {},
            h('td', { class: 'mono' }, q.command, ' ', rateChip(q.command), q.commands ? h('span', { class: 'muted' }, ` ${num(q.commands)} more names`) : null,
              q.paused ? h('span', { class: 'badge paused', title: paused.has(q.command) ? `paused ${duration(paused.get(q.command).pausedSeconds)} ago by ${paused.get(q.command).pausedBy}` : '' }, 'paused') : null,
              // What waits for a name no live host handles waits until a host whose plugins do joins.
              !q.commands && q.pending + (q.scheduled || 0) > 0 && !handled.has(q.command)
                ? h('span', { class: 'badge failed', title: 'no live host handles it (none loads a plugin for it, or each has that plugin quarantined): what waits stays until one does' }, 'no live host') : null,
              // Where its plugin is quarantined, those hosts take it no more; the Hosts page tries it again.
              q.quarantinedOn ? h('span', { class: 'badge paused', title: `its plugin is quarantined on ${q.quarantinedOn.join(', ')}: ${handled.has(q.command) ? 'the other hosts that have it take it' : 'no other live host has it'} (the Hosts page says why, and tries it again)` },
                `quarantined on ${q.quarantinedOn.length === 1 ? q.quarantinedOn[0] : q.quarantinedOn.length + ' hosts'}`) : null),
            h('td', { class: 'num', title: q.limit ? `at most ${num(q.limit)} at once across the bus` : '' },
              num(q.running || 0), q.limit ? h('span', { class: 'muted' }, ` / ${num(q.limit)}`) : null),
            h('td', { class: 'num' }, num(q.pending)), h('td', { class: 'num' }, q.pending ? duration(q.oldestPendingSeconds) : '–'),
            h('td', { class: 'num' }, num(q.scheduled || 0)), h('td', { class: 'num' }, q.scheduled ? 'in ' + duration(q.nextDueSeconds) : '–'),
            h('td', {}, pauseButton(q))));
          // Commands the hosts post on a schedule ('cmdbus bus periodic'): when next, and how the last went.
          const periodicRows = (data.periodic || []).map(e => h('tr', {},
            h('td', { class: 'mono nowrap' }, e.name), h('td', { class: 'mono' }, e.command,
              // What it posts for a name no live host handles waits, as a queue's does.
              handled.has(e.command) ? null : [' ', h('span', { class: 'badge failed', title: 'no live host handles it: what it posts waits until a host whose plugins do joins' }, 'no live host')]),
            h('td', { class: 'mono' }, e.every ? `every ${e.every}` : `${e.cron} (${e.timeZone || 'UTC'})`, e.noOverlap ? h('span', { class: 'muted', title: 'a slot is skipped while the last run goes on' }, ' no overlap') : null),
            h('td', { class: 'num' }, e.paused ? h('span', { class: 'badge paused', title: `paused ${duration(e.pausedSeconds)} ago by ${e.pausedBy}` }, 'paused')
              : e.nextDueSeconds > 0 ? 'in ' + duration(e.nextDueSeconds) : h('span', { class: 'badge failed', title: 'no live host has posted it yet' }, 'overdue ' + duration(-e.nextDueSeconds))),
            h('td', {}, e.lastState ? badge(e.lastState) : h('span', { class: 'muted' }, 'not yet'),
              e.lastSlotSecondsAgo !== undefined ? h('span', { class: 'muted nowrap' }, ` ${duration(e.lastSlotSecondsAgo)} ago`) : null),
            h('td', { class: 'num', title: `${num(e.fired)} posted; ${num(e.skipped)} slots skipped` }, num(e.fired),
              e.skipped ? h('span', { class: 'muted' }, ` (${num(e.skipped)} skipped)`) : null),
            h('td', {}, h('div', { class: 'actions' },
              h('button', { class: e.paused ? null : 'secondary', onclick: () => periodicAction(e.name, e.paused ? 'resume' : 'pause') }, e.paused ? 'Resume' : 'Pause'),
              h('button', { class: 'secondary', title: 'post its command now, once; the schedule stands', onclick: () => periodicAction(e.name, 'run') }, 'Run now'),
              h('button', { class: 'danger link', title: 'take it off the bus; the commands it posted stay', onclick: () => periodicAction(e.name, 'remove') }, 'Remove')))));
          const differences = (data.differences || []).map(d => h('p', {}, d.message));
          page('Hosts & queues', `Schema version ${data.schemaVersion} · ${num(data.running)} running on the bus`,
            differences.length ? panel('Hosts load different builds', h('div', { class: 'alert' }, differences)) : null,
            panel('Hosts', table(['Host', { text: 'PID', cls: 'num' }, 'State', { text: 'Heartbeat', cls: 'num' }, { text: 'Running', cls: 'num' }, 'Commands'], hostRows, 'No hosts.')),
            panel('Queues', table(['Command', { text: 'Running', cls: 'num' }, { text: 'Pending', cls: 'num' }, { text: 'Waited', cls: 'num' }, { text: 'Scheduled', cls: 'num' }, { text: 'Next due', cls: 'num' }, ''], queueRows, 'Nothing runs, waits or is scheduled.')),
            periodicRows.length ? panel('Periodic', table(['Name', 'Command', 'Schedule', { text: 'Next', cls: 'num' }, 'Last run', { text: 'Posted', cls: 'num' }, ''], periodicRows, '')) : null);
          const refresh = throttle(() => route(), 2000);
          // Not while a queue's limits are being edited: the page drawn again would drop what was typed.
          view.onTick = () => { if (!document.querySelector('details.limits[open]')) refresh(); };
        }

        // ---- Router ----
        async function route() {
          const hash = location.hash.replace(/^#\/?/, '');
          const [path, query] = hash.split('?');
          const params = new URLSearchParams(query || '');
          const parts = path.split('/').filter(Boolean);
          const name = parts[0] || 'overview';
          for (const a of document.querySelectorAll('.nav nav a')) {
            a.classList.toggle('active', a.dataset.page === (name === 'command' ? 'commands' : name));
          }
          view.onTick = null;
          try {
            if (name === 'overview') await overview();
            else if (name === 'commands') await commands(params);
            else if (name === 'command' && parts[1]) await command(parts[1]);
            else if (name === 'dead') await deadLetters();
            else if (name === 'plugins') await plugins();
            else if (name === 'hosts') await hosts();
            else page('Not found', 'No such page.', panel(null, link('#/', 'Back to the overview')));
            document.title = 'cmdbus · ' + (document.querySelector('main h1').textContent || '');
          } catch (e) { failure(e); }
        }
        window.addEventListener('hashchange', route);
        connect();
        route();
        """#
}
