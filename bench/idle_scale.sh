#!/usr/bin/env bash
# Does anything in soakd cost more per second with more connections held
# when they are idle (issue 41)? The timers, the status line, the
# checkpoints (--state) and the metrics (scraped every second here) must
# cost the same at 1,000 and at 15,000 held connections; only requests may
# cost. One soakd process holds N connections to the built-in target, one
# request an hour each (so, after the ramp, about N/3600 a second), for
# HOLD seconds after the ramp; its CPU time is read from /proc before and
# after. Run by hand; figures in bench/README.md.
#
#   bench/idle_scale.sh
#   COUNTS="1000 15000" HOLD=120 bench/idle_scale.sh
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
COUNTS=${COUNTS:-1000 15000}
HOLD=${HOLD:-60}
# shellcheck source=bench/lib.sh
. bench/lib.sh
need curl curl
use_soakd
work_init idle-scale
ulimit -n "$(ulimit -Hn)"
HZ=$(getconf CLK_TCK)

k=0
for n in $COUNTS; do
    k=$((k + 1))
    TARGET_HOST=127.0.9.$k start_target "target$k"
    mport=$(free_port)
    "$SOAKD" run "http://$ADDR/" -c "$n" -i 1h --ramp 10000 -t 1 -d $((HOLD + 20))s \
        --source-addr "127.0.10.$k" --metrics-listen "127.0.0.1:$mport" \
        --state "$WORK/state$k" --checkpoint-interval 5s >"$WORK/run$k.log" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    sleep 10
    # Scraped every second meanwhile, as a busy Prometheus would.
    (for _ in $(seq "$HOLD"); do curl -s "http://127.0.0.1:$mport/metrics" >/dev/null; sleep 1; done) &
    scraper=$!
    t0=$(date +%s.%N)
    c0=$(cpu_ticks "$pid")
    sleep "$HOLD"
    t1=$(date +%s.%N)
    c1=$(cpu_ticks "$pid")
    wait "$scraper" || true
    open=$(curl -s "http://127.0.0.1:$mport/metrics" | awk '/^soakd_connections\{.*state="open"/ { print $2 }')
    printf '%6d held (open %s): soakd %.3f%% of a core over %.0f s (scraped every second, checkpoint every 5 s)\n' \
        "$n" "$open" "$(calc "($c1 - $c0) / $HZ / ($t1 - $t0) * 100")" "$(calc "$t1 - $t0")"
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    kill "$TARGET_PID" 2>/dev/null || true
done
