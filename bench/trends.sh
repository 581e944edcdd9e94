#!/usr/bin/env bash
# Trends: does a leaking server fail its slope threshold with the right
# slope, does a creeping latency fail p99_drift, do steady runs never fail,
# and does soakd's own memory stay flat under churn? bench/README.md
# ("Trends") and docs/verdicts.md quote what this printed.
#
#   (a) `soakd target --leak LEAK_MIB MiB/min`, soaked LEAK_DURATION with
#       --target-pid and 'target_rss_slope<=10MiB/h': exit 3, slope within
#       ±25% of the leak;
#   (b) `soakd target --delay 5ms --slowdown 10%/min`, soaked LEAK_DURATION
#       with 'p99_drift<=10%': exit 3;
#   (c) STEADY runs of STEADY_DURATION, each against a fresh steady
#       target, with both thresholds (a)'s and (b)'s: 0 failures; each
#       run's slope, drift and their p-values printed;
#   (d) a CHURN-connection churn run of CHURN_DURATION (one request per
#       connection, CHURN new connections a second, closed with a reset so
#       no TIME_WAIT is left): soakd's own RSS from its timeline points,
#       judged flat within 2% + 4 KiB a point.
#
#   bench/trends.sh                       # all four, ~25 min
#   ONLY="c" STEADY=3 bench/trends.sh     # fewer steady runs
#   ONLY="d" CHURN_DURATION=60s bench/trends.sh
set -euo pipefail
cd "$(dirname "$0")/.."

LEAK_MIB=${LEAK_MIB:-2}
LEAK_DURATION=${LEAK_DURATION:-3m}
STEADY=${STEADY:-10}
STEADY_DURATION=${STEADY_DURATION:-90s}
CHURN=${CHURN:-3000}
CHURN_DURATION=${CHURN_DURATION:-60s}
ONLY=${ONLY:-a b c d}
LOAD=${LOAD:--c 50 -r 500}
SOAKD=${SOAKD:-}
ulimit -n 20000 2>/dev/null || ulimit -n "$(ulimit -Hn)"
# shellcheck source=bench/lib.sh
. bench/lib.sh
use_soakd
work_init trends

# figures REPORT: the report's target RSS slope and p99 drift with their
# p-values, and the thresholds that failed.
figures() {
    python3 - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = r["trends"]
s = {x["metric"]: x for x in t["slopes"]}["target_rss_slope"]
d = {x["metric"]: x for x in t["drifts"]}["p99_drift"]
def slope(x):
    if x.get("slope") is None:
        return "slope - (%s)" % x.get("not_judged")
    return "slope %+8.3f MiB/min (%+9.1f KiB/h) p=%.3g%s" % (
        x["slope"] * 60 / 1048576, x["slope"] * 3600 / 1024, x["p_value"],
        " significant" if x["significant"] else "")
def drift(x):
    if x.get("drift") is None:
        return "p99 drift - (%s)" % x.get("not_judged")
    extra = " significant" if x["significant"] else ""
    if x.get("excused_by_lag"):
        extra = " excused: soakd's lag %.2f ms" % (x["generator_lag"] * 1e3)
    return "p99 drift %+6.1f%% (%.2f -> %.2f ms) rho=%.2f p=%.3g%s" % (
        x["drift"] * 100, x["first"] * 1e3, x["last"] * 1e3,
        x.get("autocorrelation") or 0, x["p_value"], extra)
failed = [f'{x["threshold"]}' for x in r.get("thresholds", []) if not x["pass"]]
print(f"{slope(s)}; {drift(d)}; failed: {', '.join(failed) or 'none'}")
PY
}

# field FILE EXPR: a Python expression over the report `r`.
field() {
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

# soak NAME ARGS...: a run against $ADDR with $LOAD; report NAME.json;
# sets CODE to its exit code.
soak() {
    local name=$1
    shift
    set +e
    # shellcheck disable=SC2086 # LOAD is a list of flags
    "$SOAKD" run "http://$ADDR/" $LOAD --metrics-listen off "$@" \
        --report "$WORK/$name.json" 2>"$WORK/$name.err"
    CODE=$?
    set -e
}

if [[ " $ONLY " == *" a "* ]]; then
    echo "== (a) soakd target --leak ${LEAK_MIB}MiB/min, $LEAK_DURATION, target_rss_slope<=10MiB/h"
    start_target leak --leak "${LEAK_MIB}MiB/min"
    soak leak -d "$LEAK_DURATION" --target-pid "$TARGET_PID" --threshold 'target_rss_slope<=10MiB/h'
    slope=$(field "$WORK/leak.json" '[s for s in r["trends"]["slopes"] if s["metric"]=="target_rss_slope"][0]["slope"]')
    ratio=$(python3 -c "print(round($slope / ($LEAK_MIB * 1048576 / 60), 3))")
    echo "exit $CODE (want 3); $(figures "$WORK/leak.json")"
    echo "slope / leak = $ratio (want 0.75..1.25)"
    kill "$TARGET_PID" 2>/dev/null || true
fi

if [[ " $ONLY " == *" b "* ]]; then
    echo "== (b) soakd target --delay 5ms --slowdown 10%/min, $LEAK_DURATION, p99_drift<=10%"
    start_target creep --delay 5ms --slowdown 10%/min
    soak creep -d "$LEAK_DURATION" --target-pid "$TARGET_PID" --threshold 'p99_drift<=10%'
    echo "exit $CODE (want 3); $(figures "$WORK/creep.json")"
    kill "$TARGET_PID" 2>/dev/null || true
fi

if [[ " $ONLY " == *" c "* ]]; then
    echo "== (c) $STEADY steady runs of $STEADY_DURATION, 'target_rss_slope<=10MiB/h' and 'p99_drift<=10%'"
    fails=0
    for i in $(seq "$STEADY"); do
        start_target "steady$i"
        soak "steady$i" -d "$STEADY_DURATION" --target-pid "$TARGET_PID" \
            --threshold 'target_rss_slope<=10MiB/h' --threshold 'p99_drift<=10%'
        kill "$TARGET_PID" 2>/dev/null || true
        [ "$CODE" = 0 ] || fails=$((fails + 1))
        printf 'run %2d: exit %d; %s\n' "$i" "$CODE" "$(figures "$WORK/steady$i.json")"
    done
    echo "$fails of $STEADY failed (want 0)"
fi

if [[ " $ONLY " == *" d "* ]]; then
    echo "== (d) soakd's RSS: $CHURN connections churning ($CHURN new a second), $CHURN_DURATION"
    start_target churn
    LOAD="-c $CHURN -r $CHURN --ramp $CHURN" soak churn -d "$CHURN_DURATION" --close --close-with-reset
    echo "exit $CODE"
    python3 - "$WORK/churn.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
steady = r["trends"]["steady_from_seconds"]
pts = [p for p in r["timeline"]["points"]
       if p.get("soakd_rss_bytes") and steady <= p["t"] < r["duration_seconds"]]
print("completed %d requests, %d connections opened" % (
    r["requests"]["completed"], r.get("connections", {}).get("opened", -1)))
print("soakd RSS (KiB) by point from %.0f s:" % steady,
      " ".join(str(p["soakd_rss_bytes"] // 1024) for p in pts))
for name, part in (("steady part", pts), ("second half", pts[len(pts) // 2:])):
    a, b, n = part[0]["soakd_rss_bytes"], part[-1]["soakd_rss_bytes"], len(part)
    allowed = 0.02 * a + 4096 * n
    print("%s: %.2f MiB -> %.2f MiB over %d points: %+d KiB (allowed 2%% + 4 KiB a point = %d KiB): %s"
          % (name, a / 1048576, b / 1048576, n, (b - a) // 1024, allowed // 1024,
             "flat" if b - a <= allowed else "GROWS"))
s = [s for s in r["trends"]["slopes"] if s["metric"] == "soakd_rss_slope"][0]
print("soakd_rss_slope (Theil-Sen) %s bytes/s, p %s" % (s.get("slope"), s.get("p_value")))
PY
    kill "$TARGET_PID" 2>/dev/null || true
fi
