#!/usr/bin/env bash
# soakd's own RSS over a long soak at 10,000 connections (issue 29): is it
# flat once the ramp is over, with everything that grows with the run's
# timeline switched on (--state checkpoints, live trend thresholds, the HDR
# log, --target-pid sampling)? Before issue 29 it grew ~350 KiB a minute
# for the ~17 minutes the timeline takes to reach its 1,000 points, which
# `soakd_rss_slope` read as a leak. bench/README.md ("soakd's RSS over 30
# minutes") quotes what this printed.
#
# soakd's VmRSS is read from /proc every SAMPLE (default 30 s) by this
# script, not by soakd, together with soakd_threshold_passing from its
# /metrics. "After the ramp" starts at the first sample at least SETTLE
# (default 60 s) after every connection is open; the verdict is flat when
# every later sample is within 1% of the first of them.
#
#   bench/rss.sh                                  # 30 min
#   DURATION=10m bench/rss.sh                     # shorter
#   TARGET_HOST=127.0.29.4 SOURCE=127.0.29.3 KEEP=/tmp/rss bench/rss.sh
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-30m}
CONNS=${CONNS:-10000}
SAMPLE=${SAMPLE:-30}
SETTLE=${SETTLE:-60}
# The per-connection pace of the issue's soak.
PACE=${PACE:-10s}
TARGET_HOST=${TARGET_HOST:-127.0.0.1}
SOURCE=${SOURCE:-}
ulimit -n 20000 2>/dev/null || ulimit -n "$(ulimit -Hn)"
# shellcheck source=bench/lib.sh
. bench/lib.sh
use_soakd
work_init rss
need curl curl
export TARGET_HOST

start_target target
echo "target $ADDR (pid $TARGET_PID)"
MPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
src=()
[ -z "$SOURCE" ] || src=(--source-addr "$SOURCE")

section "soakd run: $CONNS connections, -i $PACE, -t 1, $DURATION, --state (every 10 s), --hdr-log, --target-pid, trend thresholds"
set +e
"$SOAKD" run "http://$ADDR/" -c "$CONNS" -i "$PACE" -t 1 -d "$DURATION" "${src[@]}" \
    --state "$WORK/state" --checkpoint-interval 10s --hdr-log "$WORK/run.hlog" \
    --target-pid "$TARGET_PID" --metrics-listen "127.0.0.1:$MPORT" \
    --threshold 'soakd_rss_slope<=5MiB/h' --threshold 'target_rss_slope<=10MiB/h' \
    --threshold 'p99_drift<=50%' --report "$WORK/run.json" 2>"$WORK/run.log" &
SOAKD_PID=$!
set -e
PIDS+=("$SOAKD_PID")
start=$(date +%s)
: >"$WORK/samples.tsv"
while kill -0 "$SOAKD_PID" 2>/dev/null; do
    now=$(($(date +%s) - start))
    rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$SOAKD_PID/status" 2>/dev/null || true)
    [ -n "$rss" ] || break
    m=$(curl -fs "http://127.0.0.1:$MPORT/metrics" 2>/dev/null || true)
    open=$(echo "$m" | awk '/^soakd_connections\{/ && /state="open"/ {s += $NF} END {print s + 0}')
    passing=$(echo "$m" | awk '/^soakd_threshold_passing\{/ && /soakd_rss_slope/ {print $NF}')
    printf '%s\t%s\t%s\t%s\n' "$now" "$rss" "$open" "${passing:-?}" | tee -a "$WORK/samples.tsv"
    sleep "$SAMPLE"
done
set +e
wait "$SOAKD_PID"
rc=$?
set -e
echo "soakd exit $rc"
tail -3 "$WORK/run.log"

python3 - "$WORK/samples.tsv" "$WORK/run.json" "$CONNS" "$SETTLE" <<'PY'
import json, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().split("\n") if l]
rows = [(int(t), int(kb), int(float(o)), p.strip()) for t, kb, o, p in rows]
conns, settle = int(sys.argv[3]), int(sys.argv[4])
full = next((t for t, _, o, _ in rows if o >= conns), None)
print("samples (s, soakd VmRSS KiB, open, soakd_rss_slope passing):")
for t, kb, o, p in rows:
    print("  %5d %7d %6d %s" % (t, kb, o, p))
if full is None:
    print("never reached %d open connections" % conns); sys.exit(0)
after = [(t, kb) for t, kb, _, _ in rows if t >= full + settle]
if len(after) < 2:
    print("too few samples after the ramp"); sys.exit(0)
first = after[0][1]
lo, hi = min(kb for _, kb in after), max(kb for _, kb in after)
print("all open at %d s; from %d s (%d samples): first %d KiB, min %d, max %d, last %d; spread %+.2f%% of the first -> %s"
      % (full, after[0][0], len(after), first, lo, hi, after[-1][1], 100.0 * (hi - lo) / first,
         "FLAT (within 1%)" if hi - lo <= 0.01 * first else "NOT flat"))
r = json.load(open(sys.argv[2]))
for th in r.get("thresholds", []):
    print("threshold %-28s pass=%s measured=%s %s" % (th["threshold"], th["pass"], th["measured"], th.get("note") or ""))
for s in r.get("trends", {}).get("slopes", []):
    if s["metric"] == "soakd_rss_slope":
        print("soakd_rss_slope at the end: %s bytes/s (%s), p %s" % (s.get("slope"), s.get("verdict", ""), s.get("p_value")))
pts = r["timeline"]["points"]
print("timeline: %d points, last interval %.0f s" % (len(pts), pts[-1]["seconds"] if pts else 0))
PY
