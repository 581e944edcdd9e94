#!/usr/bin/env bash
# Outages (issue 30): does a healthy soak on a busy machine find none, and
# are scheduled restarts and brownouts found once each, with the right
# durations? bench/README.md ("bench/outages.sh") quotes what this printed.
#
#   (a) RUNS healthy runs of DURATION, each `soakd run -c 1000 -i 1s
#       --threshold outages<=0` against a fresh `soakd target`, while
#       another load runs on the machine: a second soakd holding 200
#       connections at NEIGHBOUR_RATE requests/s against a second target
#       (both as busy as any neighbour): every run must exit 0 with no
#       outage; the run's excursions, errors, fewest open, p99, soakd's own
#       lag p99 and the load average are printed;
#   (b) a `soakd target --restart-every 40s --down-for 5s --brownout-every
#       57s --brownout-for 5s --brownout-delay 100ms` soaked for 110 s:
#       each restart (at 40 s and 80 s) an outage of 5 ± 1 s starting
#       within 1 s of it, the brownout (at 57 s) an excursion of 5 ± 1.5 s
#       starting within 1.5 s of it, and nothing else.
#
#   bench/outages.sh                        # (a) 3 × 10 min and (b), ~35 min
#   ONLY=a RUNS=1 DURATION=60s bench/outages.sh
#   ONLY=b bench/outages.sh
#   SOAKD=/path/to/soakd KEEP=/tmp/o bench/outages.sh
#
# Loopback addresses 127.0.30.x keep these runs' ports apart from other
# soaks on the machine. Exits 1 when a check fails.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-3}
DURATION=${DURATION:-10m}
NEIGHBOUR_RATE=${NEIGHBOUR_RATE:-20000}
ONLY=${ONLY:-a b}
NET=${NET:-127.0.30}
SOAKD=${SOAKD:-}
ulimit -n 20000 2>/dev/null || ulimit -n "$(ulimit -Hn)"
# shellcheck source=bench/lib.sh
. bench/lib.sh
use_soakd
work_init outages

# target NAME HOST ARGS...: start_target on HOST (one of this script's
# loopback addresses).
target() {
    local name=$1 host=$2
    shift 2
    TARGET_LISTEN=$host:0 start_target "$name" "$@"
}

# summary REPORT: one line of what the run found.
summary() {
    python3 - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
pts = r["timeline"]["points"]
worst = max((sum(p["errors"].values()) / max(p["seconds"], 1e-9) for p in pts), default=0)
fewest = min((p["open_min"] for p in pts[5:-1]), default=None)
lat, lag = r["latency_seconds"], r["schedule_lag_seconds"]
errors = sum(r["errors"].values())
print(f'outages {len(r["outages"])}  excursions {len(r["excursions"])}  errors {errors} '
      f'(worst second {worst:.0f}/s)  fewest open {fewest}/{r["connections"]["desired"]}  '
      f'p99 {lat["p99"]*1e3:.2f} ms  max {lat["max"]*1e3:.1f} ms  lag p99 {(lag["p99"] or 0)*1e3:.2f} ms')
for x in r["excursions"]:
    print(f'    excursion at {x["start"]:.0f} s for {x["duration_seconds"]:.1f} s: p50 up to '
          f'{x["p50_max"]*1e3:.1f} ms over a p99 of {x["baseline_p99"]*1e3:.2f} ms before')
PY
}

status=0

if [[ " $ONLY " == *" a "* ]]; then
    section "(a) healthy soaks while another load runs: $RUNS × $DURATION"
    for i in $(seq "$RUNS"); do
        target "steady-$i" "$NET.1"
        steady=$ADDR
        target "neighbour-$i" "$NET.2"
        neighbour=$ADDR
        secs=$(python3 -c "u={'s':1,'m':60,'h':3600}; d='$DURATION'; print(int(float(d[:-1])*u[d[-1]]))")
        "$SOAKD" run "http://$neighbour/" -c 200 -r "$NEIGHBOUR_RATE" -d "$((secs + 20))s" \
            --source-addr "$NET.3" --metrics-listen off >"$WORK/neighbour-$i.log" 2>&1 &
        LOAD_PID=$!
        sleep 5
        load_before=$(cut -d' ' -f1 /proc/loadavg)
        code=0
        "$SOAKD" run "http://$steady/" -c 1000 -i 1s -d "$DURATION" --source-addr "$NET.4" \
            --metrics-listen off --threshold 'outages<=0' --report "$WORK/steady-$i.json" \
            >"$WORK/steady-$i.log" 2>&1 || code=$?
        load_after=$(cut -d' ' -f1 /proc/loadavg)
        kill "$LOAD_PID" 2>/dev/null || true
        wait "$LOAD_PID" 2>/dev/null || true
        LOAD_PID=
        for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
        PIDS=()
        echo "run $i: exit $code, load average $load_before → $load_after"
        summary "$WORK/steady-$i.json"
        [ "$code" = 0 ] || status=1
    done
fi

if [[ " $ONLY " == *" b "* ]]; then
    section "(b) restarts every 40 s (5 s down) and a brownout at 57 s (5 s, +100 ms)"
    target restarts "$NET.1" --restart-every 40s --down-for 5s \
        --brownout-every 57s --brownout-for 5s --brownout-delay 100ms
    code=0
    "$SOAKD" run "http://$ADDR/" -c 1000 -i 1s -d 110s --source-addr "$NET.5" \
        --metrics-listen off --report "$WORK/restarts.json" >"$WORK/restarts.log" 2>&1 || code=$?
    python3 - "$WORK/restarts.json" <<'PY' || status=1
import json, sys
r = json.load(open(sys.argv[1]))
# The target's schedule counts from its own start, a fraction of a second
# before soakd's: each disruption is looked for within 1 s of its time.
restarts, brownout = [40, 80], 57
ok = True
for o in r["outages"]:
    near = [t for t in restarts if abs(o["start"] - t) <= 1]
    good = len(near) == 1 and abs(o["duration_seconds"] - 5) <= 1
    print(f'outage at {o["start"]:6.2f} s: {o["duration_seconds"]:.2f} s '
          f'({"the restart at %d s, 5 s scheduled" % near[0] if near else "UNEXPECTED: no restart then"}), '
          f'errors {o["errors"]}, lost {o["connections_lost"]}, '
          f'reconnect {o["reconnect_seconds"]}, recovery {o["recovery_seconds"]}')
    ok &= good
    restarts = [t for t in restarts if t not in near]
for x in r["excursions"]:
    good = abs(x["start"] - brownout) <= 1.5 and abs(x["duration_seconds"] - 5) <= 1.5
    print(f'excursion at {x["start"]:6.2f} s: {x["duration_seconds"]:.2f} s '
          f'({"the brownout at %d s, 5 s scheduled" % brownout if good else "UNEXPECTED: not the brownout"}), '
          f'p50 up to {x["p50_max"]*1e3:.1f} ms over a p99 of {x["baseline_p99"]*1e3:.2f} ms before, '
          f'recovery {x["recovery_seconds"]}')
    ok &= good
found = [x for x in r["excursions"] if abs(x["start"] - brownout) <= 1.5]
ok &= not restarts and len(r["outages"]) == 2 and len(r["excursions"]) == 1 and len(found) == 1
for t in restarts:
    print(f"MISSED: the restart at {t} s")
if not found:
    print(f"MISSED: the brownout at {brownout} s")
print("restarts and brownouts found once each:", "yes" if ok else "NO")
sys.exit(0 if ok else 1)
PY
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    PIDS=()
fi

exit "$status"
