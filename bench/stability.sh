#!/usr/bin/env bash
# Stability over time: soakd holds 10,000 connections against nginx for
# 10 minutes with planned churn (every connection closes after about 100
# requests and reconnects), and bench/stability.py samples soakd's RSS, open
# descriptors and request accounting every 10 s. See bench/README.md.
#
#   bench/stability.sh                              # 10,000 connections, 600 s, -r 20000
#   DURATION=120 CONNS=2000 bench/stability.sh      # a shorter look
#   LOAD="" bench/stability.sh                      # closed loop (as fast as nginx answers)
#   SOURCES="" bench/stability.sh                   # one source address (runs out of ports at times)
#   SOAKD=/path/to/soakd bench/stability.sh         # that binary, no build
#
# Exits 0 when every check holds, 1 when one fails (the table says which).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD

CONNS=${CONNS:-10000}
DURATION=${DURATION:-600}
EVERY=${EVERY:-10}
WARMUP=${WARMUP:-60}
CHURN=${CHURN:-100}
THREADS=${THREADS:-1}
# The load model's flags. The default is an open-loop constant rate, what a
# soak usually runs: 2 requests/s per connection, so each connection lives
# ~50 s and the whole set turns over about 12 times in 10 minutes.
LOAD=${LOAD--r 20000}
# Two source addresses, as soakd's own preflight warning advises: 10,000
# connections whose waves of closes leave ~10,000 more in TIME_WAIT do not
# fit one address's 28,232 local ports. SOURCES="" runs on one address.
SOURCES=${SOURCES-127.0.0.2 127.0.0.3}
SOAKD_GIVEN=${SOAKD:+yes}
SOAKD=${SOAKD:-$ROOT/target/release/soakd}

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
bench_init

build_soakd
[ "$SOAKD_OK" = yes ] || exit 1

if [ "$NOFILE" != unlimited ] && [ "$NOFILE" -lt $((CONNS + 100)) ]; then
    echo "open-file limit $NOFILE is below $((CONNS + 100)); lower CONNS" >&2
    exit 1
fi

section "nginx"
start_nginx
URL=http://127.0.0.1:$PORT/
echo "nginx pid $NGINX_PID on $URL (CPU 0); soakd on CPU 1; open-file limit $NOFILE"

# Ports a previous run left in TIME_WAIT would make the first minute differ
# from the rest.
wait_timewait

METRICS=127.0.0.1:$(free_port)
args=(run "$URL" -c "$CONNS" --ramp 5000 -t "$THREADS" -d "${DURATION}s"
    --max-requests-per-conn "$CHURN" --metrics-listen "$METRICS" --report "$WORK/report.json")
# shellcheck disable=SC2206 # LOAD is a list of flags on purpose
args+=($LOAD)
for s in $SOURCES; do
    args+=(--source-addr "$s")
done

section "soakd ${args[*]}"
taskset -c 1 "$SOAKD" "${args[@]}" </dev/null >"$WORK/soakd.out" 2>"$WORK/soakd.err" &
LOAD_PID=$!

RC=0
python3 "$ROOT/bench/stability.py" --pid "$LOAD_PID" --metrics "$METRICS" --every "$EVERY" \
    --warmup "$WARMUP" --csv "${CSV:-$WORK/samples.csv}" || RC=$?

SOAKD_RC=0
wait "$LOAD_PID" || SOAKD_RC=$?
LOAD_PID=
section "soakd exit $SOAKD_RC; last lines of its log"
tail -n 5 "$WORK/soakd.err"
if [ -s "$WORK/report.json" ]; then
    python3 - "$WORK/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
q = r["requests"]
errs = {k: v for k, v in r["errors"].items() if v}
print(f"report: sent {q['sent']} completed {q['completed']} failed {q['failed']} "
      f"in flight at end {q['in_flight_at_end']}; connections opened {r['connections']['opened']}; "
      f"errors {errs or 'none'}")
ok = q["sent"] == q["completed"] + q["failed"] + q["in_flight_at_end"]
print("final accounting sent = completed + failed + in flight:", "ok" if ok else "BROKEN")
sys.exit(0 if ok else 1)
PY
else
    echo "no report written" >&2
    RC=1
fi || RC=1
[ "$SOAKD_RC" -eq 0 ] || RC=1
if [ -n "${CSV:-}" ]; then
    echo "samples kept in $CSV"
fi
exit "$RC"
