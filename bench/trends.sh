#!/usr/bin/env bash
# Trends: does a leak fail its slope threshold with the right slope, does a
# creeping latency fail p99_drift, do steady runs never fail, and does the
# timeline itself stay flat? docs/verdicts.md ("Trends") quotes what this
# printed.
#
#   (a) a process leaking LEAK_MIB MiB a minute (python3, pages written),
#       soaked LEAK_DURATION with --target-pid and
#       'target_rss_slope<=10MiB/h': exit 3, slope within ±25%;
#   (b) latency creeping 10%/min (needs `soakd target --slowdown`; skipped
#       until the target has it): exit 3 on 'p99_drift<=10%';
#   (c) STEADY runs of STEADY_DURATION against the built-in target with
#       every trend threshold: 0 failures;
#   (d) the timeline's own cost: a CHURN-connection churn run of
#       CHURN_DURATION (one request per connection); soakd's RSS, from its
#       own timeline samples, over the second half of the steady part
#       (after one-off steps), within 2% + 4 KiB a point.
#
#   bench/trends.sh
#   LEAK_DURATION=3m STEADY=10 bench/trends.sh
#   ONLY="d" bench/trends.sh              # just the timeline's cost
set -euo pipefail
cd "$(dirname "$0")/.."

LEAK_MIB=${LEAK_MIB:-2}
LEAK_DURATION=${LEAK_DURATION:-3m}
STEADY=${STEADY:-5}
STEADY_DURATION=${STEADY_DURATION:-60s}
CHURN=${CHURN:-3000}
CHURN_DURATION=${CHURN_DURATION:-40s}
ONLY=${ONLY:-a b c d}
SOAKD=${SOAKD:-}
if [ -z "$SOAKD" ]; then
    cargo build --release --quiet
    SOAKD=${CARGO_TARGET_DIR:-target}/release/soakd
fi
ulimit -n 20000 2>/dev/null || ulimit -n "$(ulimit -Hn)"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/soakd-trends.XXXXXX")
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

# start_target NAME ARGS...: a built-in target on a free port; sets $ADDR.
start_target() {
    local name=$1
    shift
    "$SOAKD" target --listen 127.0.0.1:0 "$@" >"$WORK/$name.out" 2>&1 &
    PIDS+=($!)
    TARGET_PID=$!
    for _ in $(seq 50); do
        ADDR=$(sed -n 's/^listening on //p' "$WORK/$name.out")
        [ -n "$ADDR" ] && return 0
        sleep 0.1
    done
    echo "target $name did not start" >&2
    exit 1
}

# field FILE EXPR: a Python expression over the report `r`.
field() {
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}
slope_of='[s for s in r["trends"]["slopes"] if s["metric"]=="target_rss_slope"][0]["slope"]'

start_target base
BASE=$ADDR
BASE_PID=$TARGET_PID

if [[ " $ONLY " == *" a "* ]]; then
echo "== (a) a target leaking $LEAK_MIB MiB/min, $LEAK_DURATION, target_rss_slope<=10MiB/h"
python3 -c "
import time
keep = []
chunk = int($LEAK_MIB * 1048576 / 60)
t0 = time.monotonic()
while time.monotonic() - t0 < 3600:
    keep.append(bytearray(b'\x01') * chunk)
    time.sleep(1)
" &
LEAKER=$!
PIDS+=("$LEAKER")
set +e
"$SOAKD" run "http://$BASE/" -c 50 -r 500 -d "$LEAK_DURATION" --metrics-listen off \
    --target-pid "$LEAKER" --threshold 'target_rss_slope<=10MiB/h' --report "$WORK/leak.json" 2>"$WORK/leak.err"
code=$?
set -e
slope=$(field "$WORK/leak.json" "$slope_of")
ratio=$(python3 -c "print(round($slope / ($LEAK_MIB * 1048576 / 60), 3))")
echo "exit $code (want 3); slope $(python3 -c "print(round($slope * 60 / 1048576, 3))") MiB/min = ${ratio}x the leak (want 0.75..1.25)"
kill "$LEAKER" 2>/dev/null || true
fi

if [[ " $ONLY " == *" b "* ]]; then
echo "== (b) latency creeping 10%/min, p99_drift<=10%"
if "$SOAKD" target --help 2>&1 | grep -q -- --slowdown; then
    start_target creep --slowdown 10%/min
    set +e
    "$SOAKD" run "http://$ADDR/" -c 50 -r 500 -d "$LEAK_DURATION" --metrics-listen off \
        --threshold 'p99_drift<=10%' --report "$WORK/creep.json" 2>/dev/null
    code=$?
    set -e
    echo "exit $code (want 3); p99_drift $(field "$WORK/creep.json" '[d for d in r["trends"]["drifts"] if d["metric"]=="p99_drift"][0]["drift"]')"
else
    echo "skipped: this soakd target has no --slowdown yet"
fi
fi

if [[ " $ONLY " == *" c "* ]]; then
echo "== (c) $STEADY steady runs of $STEADY_DURATION with every trend threshold"
fails=0
for i in $(seq "$STEADY"); do
    set +e
    "$SOAKD" run "http://$BASE/" -c 50 -r 500 -d "$STEADY_DURATION" --metrics-listen off \
        --target-pid "$BASE_PID" --threshold 'target_rss_slope<=10MiB/h' --threshold 'target_fds_slope<=60/h' \
        --threshold 'soakd_rss_slope<=10MiB/h' --threshold 'p50_drift<=20%' --threshold 'p99_drift<=20%' \
        --threshold 'error_rate_drift<=10%' --report "$WORK/steady$i.json" 2>/dev/null
    code=$?
    set -e
    [ "$code" = 0 ] || { fails=$((fails + 1)); field "$WORK/steady$i.json" '[t for t in r["thresholds"] if not t["pass"]]'; }
    printf '.'
done
echo " $fails of $STEADY failed (want 0)"
fi

if [[ " $ONLY " == *" d "* ]]; then
echo "== (d) timeline cost: $CHURN connections churning, $CHURN_DURATION"
"$SOAKD" run "http://$BASE/" -c "$CHURN" --close -d "$CHURN_DURATION" --metrics-listen off \
    --report "$WORK/churn.json" 2>/dev/null || true
python3 - "$WORK/churn.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
steady = r["trends"]["steady_from_seconds"]
pts = [p for p in r["timeline"]["points"]
       if p.get("soakd_rss_bytes") and steady <= p["t"] < r["duration_seconds"]]
print("soakd RSS (KiB) by point:", " ".join(str(p["soakd_rss_bytes"] // 1024) for p in pts))
# A timeline cost per point grows RSS linearly with the points; a one-off
# step (an arena, a buffer grown once) does not. Judge the second half of
# the steady part, after any such step, and show the whole as well.
for name, part in (("steady part", pts), ("second half", pts[len(pts) // 2:])):
    a, b, n = part[0]["soakd_rss_bytes"], part[-1]["soakd_rss_bytes"], len(part)
    allowed = 0.02 * a + 4096 * n
    print("%s: %.2f MiB -> %.2f MiB over %d points: %+d KiB (allowed 2%% + 4 KiB a point = %d KiB): %s"
          % (name, a / 1048576, b / 1048576, n, (b - a) // 1024, allowed // 1024,
             "flat" if b - a <= allowed else "GROWS"))
s = [s for s in r["trends"]["slopes"] if s["metric"] == "soakd_rss_slope"][0]
print("soakd_rss_slope (Theil-Sen) %s bytes/s, p %s" % (s.get("slope"), s.get("p_value")))
PY
fi
