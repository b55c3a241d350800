#!/usr/bin/env bash
# Draws the README's six pictures of the dashboard (docs/dashboard/*.png) from one scene, so a
# change to a page is shown by running this again rather than by setting a scene up by hand.
#
# The scene: a `cmdbus serve --isolate --http` with two example plugins, the tests' fixture
# plugin and a plugin that crashes (quarantined after three crashes), fed a minute and a half
# of greetings, failures and timeouts, with two long commands in flight; then a shared bus in
# a throwaway PostgreSQL with two hosts, limits, a paused name, a queue, a command due later
# and three periodic entries (one paused). Headless Chromium takes each page at 1280 px wide.
#
# Usage: scripts/draw-dashboard.sh [DIR]   (default docs/dashboard; writes nothing if a step fails)
# Takes about three minutes after the release build; needs no network beyond loopback.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
source scripts/lib/common.sh
source scripts/lib/postgres.sh

out="$(realpath -m "${1:-docs/dashboard}")"
scene="$(mktemp -d /tmp/cmdbus-scene.XXXXXX)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    stop_test_postgres
    rm -rf "$scene"
}
trap cleanup EXIT

ensure_system_packages
scripts/build-plugins.sh "$scene/examples"
swift build -c release --product FixturePlugin >&2
bin="$(swift build -c release --show-bin-path)"
cmdbus="$bin/cmdbus"
# Four plugins, so the pages show each kind without a long list: two examples, the fixture, a crasher.
mkdir -p "$scene/plugins" "$scene/bus-a" "$scene/bus-b"
cp "$scene/examples/libGreeter.so" "$scene/examples/libGreetAll.so" "$bin/libFixturePlugin.so" "$scene/plugins/"
cc -shared -fPIC -O1 -I Sources/CCommandBusABI/include -o "$scene/plugins/libmisbehave.so" Tests/Fixtures/BadPlugins/misbehave.c
mkdir -p "$scene/shots"

# The dashboard's address, once the server at log $1 has written it.
dashboard_url() {
    local log="$1"
    for _ in $(seq 1 300); do
        local url
        url="$(grep -o 'dashboard on http://[^ ]*/' "$log" 2>/dev/null | head -n 1 | sed 's/^dashboard on //; s#/$##')" || true
        [ -n "$url" ] && { echo "$url"; return 0; }
        sleep 0.1
    done
    cat "$log" >&2
    die "the server logging to $log did not start its dashboard"
}

# Takes page $2 of the dashboard at $1 once JavaScript $3 is true, as $4; more options after.
shoot() {
    local url="$1" page="$2" ready="$3" file="$4"
    shift 4
    log "drawing $file"
    python3 scripts/lib/browser.py "$url/$page" --wait-for "$ready" --screenshot "$scene/shots/$file" \
        --size 1280,820 --timeout 60 "$@" >"$scene/browser.json" \
        || { cat "$scene/browser.json" >&2; die "$page never rendered for $file"; }
    grep -q '"exceptions": \[\]' "$scene/browser.json" || { cat "$scene/browser.json" >&2; die "$page threw while drawing $file"; }
}

# --- A server on this machine ---------------------------------------------------------------
socket="$scene/cmdbus.sock"
# Started in the scene's directory, so the pages name the files as a user's would: plugins/libGreeter.so.
(cd "$scene" && exec "$cmdbus" serve --plugins plugins --socket "$socket" --journal journal.sqlite \
    --isolate --http 127.0.0.1:0 >"$scene/serve.log" 2>&1) &
pids+=($!)
local_url="$(dashboard_url "$scene/serve.log")"
run() { "$cmdbus" run "$@" --connect "$socket" >/dev/null 2>&1 || true; }

log "crashing misbehave's worker three times, so it is quarantined"
for _ in 1 2 3; do run bad.segv; done

log "a minute and a half of traffic"
for tick in $(seq 1 80); do
    lines="$scene/tick.ndjson"
    : >"$lines"
    for _ in $(seq 1 $((15 + RANDOM % 20))); do echo '{"command": "greet", "payload": {"name": "Ada"}}' >>"$lines"; done
    for _ in $(seq 1 $((2 + RANDOM % 4))); do
        echo '{"command": "greet-all", "payload": {"names": ["Ada", "Grace", "Linus"]}}' >>"$lines"
        echo "{\"command\": \"fixture.sleep\", \"payload\": {\"milliseconds\": $((5 + RANDOM % 60))}}" >>"$lines"
    done
    ((tick % 3 == 0)) && echo "{\"command\": \"fixture.fail\", \"payload\": {\"message\": \"disk full on volume $((100 + tick))\"}}" >>"$lines"
    "$cmdbus" batch "$lines" --connect "$socket" -c 16 >/dev/null 2>&1 || true
    ((tick % 5 == 0)) && run fixture.sleep -p milliseconds=150 --timeout 100ms
    sleep 0.7
done
run greet-all '{"names": ["Ada", "Grace", "Linus"]}'
for _ in 1 2; do run fixture.sleep -p milliseconds=600000 --no-wait; done
run fixture.fail -p "message=disk full on volume 203"

root="$(python3 -c 'import json, sys, urllib.request
commands = json.load(urllib.request.urlopen(sys.argv[1] + "/api/commands?command=greet-all"))["commands"]
print(commands[0]["id"])' "$local_url")"
shoot "$local_url" "#/" "document.querySelectorAll('.feed li:not(.muted)').length >= 5 && performance.now() > 3000" overview.png
shoot "$local_url" "#/commands" "document.querySelectorAll('main table tr').length > 10" commands.png --viewport-only
shoot "$local_url" "#/command/$root" "document.querySelector('.waterfall')" command.png
shoot "$local_url" "#/dead" "document.querySelectorAll('main table tr').length > 5" dead-letters.png --viewport-only
shoot "$local_url" "#/plugins" "document.querySelectorAll('main table').length >= 3" plugins.png

# --- The shared bus ---------------------------------------------------------------------------
start_test_postgres
bus="$CMDBUS_TEST_POSTGRES"
# Host a handles greet and the fixture's commands, host b the fixture's alone.
cp "$scene/examples/libGreeter.so" "$bin/libFixturePlugin.so" "$scene/bus-a/"
cp "$bin/libFixturePlugin.so" "$scene/bus-b/"
"$cmdbus" serve --bus "$bus" --plugins "$scene/bus-a" --http 127.0.0.1:0 >"$scene/a.log" 2>&1 &
pids+=($!)
"$cmdbus" serve --bus "$bus" --plugins "$scene/bus-b" --http 127.0.0.1:0 >"$scene/b.log" 2>&1 &
pids+=($!)
bus_url="$(dashboard_url "$scene/a.log")"
dashboard_url "$scene/b.log" >/dev/null
on_bus() { "$cmdbus" "$@" --bus "$bus" >/dev/null; }

log "limits, a pause, queues and a schedule on the shared bus"
on_bus bus limit fixture.sleep 3
on_bus bus limit fixture.append --rate 10/s
on_bus bus pause greet
lines="$scene/queue.ndjson"
: >"$lines"
for _ in $(seq 1 36); do echo '{"command": "fixture.sleep", "payload": {"milliseconds": 600000}}' >>"$lines"; done
for _ in $(seq 1 400); do echo "{\"command\": \"fixture.append\", \"payload\": {\"file\": \"$scene/appended\"}}" >>"$lines"; done
for name in Ada Grace Linus; do echo "{\"command\": \"greet\", \"payload\": {\"name\": \"$name\"}}" >>"$lines"; done
on_bus batch "$lines" --no-wait
on_bus run fixture.whoami --delay 2h --no-wait
on_bus bus periodic fixture.whoami --every 30s --as heartbeat
on_bus bus periodic fixture.append "{\"file\": \"$scene/hourly\"}" --every 1h --no-overlap --as hourly-sync
on_bus bus periodic report --cron "0 3 * * *" --timezone Europe/Paris --as nightly-report
on_bus bus periodic --pause hourly-sync
on_bus bus periodic --run-now heartbeat
sleep 8
shoot "$bus_url" "#/hosts" "[...document.querySelectorAll('tr')].some(r => r.cells[0] && r.cells[0].textContent === 'nightly-report') && document.querySelectorAll('main table')[0].rows.length >= 3 && document.querySelector('.badge.succeeded') !== null" hosts.png

mkdir -p "$out"
cp "$scene"/shots/*.png "$out/"
log "drew $(ls "$scene/shots" | wc -l) pictures into $out"
