#!/usr/bin/env bash
# What soakd's memory does against servers that write and never read
# (tests/peers/hostile.py): its RSS every SAMPLE seconds over SECS seconds,
# for each mode, and how the run ended (errors by kind).
#
#   bench/hostile.sh                          # all three modes, 30 s each
#   MODES=ws-ping-flood SECS=20 bench/hostile.sh
#   SOAKD=/path/to/soakd bench/hostile.sh     # that binary (e.g. an older build)
#
# Modes: ws-ping-flood (pings as fast as the socket takes them), h2-flood
# (SETTINGS and PINGs the same way), http1-silent (never reads nor answers
# while soakd pipelines 64 requests per connection). Loopback only; each
# run is bounded by SECS.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
MODES=${MODES:-ws-ping-flood h2-flood http1-silent}
SECS=${SECS:-30}
SAMPLE=${SAMPLE:-5}
CONNS=${CONNS:-10}
SOAKD_GIVEN=${SOAKD:+yes}
SOAKD=${SOAKD:-$ROOT/target/release/soakd}

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
bench_init
build_soakd

rss_kib() {
    awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo gone
}

for mode in $MODES; do
    section "$mode: $CONNS connections, ${SECS}s"
    python3 "$ROOT/tests/peers/hostile.py" "$mode" >"$WORK/peer.out" 2>&1 &
    peer=$!
    for _ in $(seq 50); do
        grep -q '^port ' "$WORK/peer.out" && break
        sleep 0.1
    done
    port=$(awk '/^port / {print $2}' "$WORK/peer.out")
    case "$mode" in
    ws-ping-flood) args=("ws://127.0.0.1:$port/") ;;
    h2-flood) args=("http://127.0.0.1:$port/" --http 2) ;;
    http1-silent) args=("http://127.0.0.1:$port/" --pipeline 64 --request-timeout 10s) ;;
    esac
    "$SOAKD" run "${args[@]}" -c "$CONNS" -d "${SECS}s" --metrics-listen off \
        --report "$WORK/$mode.json" >"$WORK/$mode.log" 2>&1 &
    pid=$!
    series=""
    t=0
    while kill -0 "$pid" 2>/dev/null && [ "$t" -le "$SECS" ]; do
        series="$series ${t}s:$(rss_kib "$pid")KiB"
        sleep "$SAMPLE"
        t=$((t + SAMPLE))
    done
    wait "$pid" || true
    kill "$peer" 2>/dev/null || true
    wait "$peer" 2>/dev/null || true
    errors=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print({k: v for k, v in r["errors"].items() if v})' \
        "$WORK/$mode.json" 2>/dev/null || echo "no report")
    echo "RSS:$series"
    echo "errors: $errors"
done
