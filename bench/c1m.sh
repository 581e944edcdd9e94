#!/usr/bin/env bash
# A million held connections from one host (issue 41). One plan of CONNS
# connections, one request a minute each, run as SHARDS local processes by
# one command (`soakd run --processes`), each with its own loopback source
# address, against SERVERS `soakd target --reuse-port` processes sharing one
# address (the kernel spreads the connections over them, as a load balancer
# would), with one Prometheus job scraping every shard through the file_sd
# list the run writes. Held HOLD seconds once every connection is open.
#
# It prints: the ramp (until every connection is open, from the kernel's
# socket count and from the report), Prometheus's sum of open connections,
# the requests against the schedule, errors, the memory each side spends per
# held connection (proportional set size, Pss in /proc/PID/smaps_rollup,
# summed over the processes, base included) and the kernel's slab per
# connection (both sockets), the CPU per second of the hold, a plain curl
# to the held servers, and the merged report against Prometheus (responses
# counted, histogram_quantile over the shards against the exact
# percentiles).
#
# The open-file limit here is 20,000 per process and cannot be raised: that
# is why one plan is many processes (15,000 connections each by default).
# Nothing here needs a sysctl on this machine (see docs/operating.md,
# "Holding a million connections", for hosts that do). Run by hand as root,
# with ~14 GB of memory free; not in CI. Figures: bench/README.md.
#
#   bench/c1m.sh                              # HTTP/1.1, 1,000,000 for 10 min
#   MODE=ws bench/c1m.sh                      # WebSocket, held with a ping a minute
#   MODE=h2 bench/c1m.sh                      # HTTP/2 (h2c), one request a minute
#   MODE=h2idle bench/c1m.sh                  # HTTP/2 held with a PING a minute
#   CONNS=60000 HOLD=60 bench/c1m.sh          # a small rehearsal
#   NET=3 bench/c1m.sh                        # sources 127.3.x.y (a fresh set
#                                             # after a run: no TIME_WAIT)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
MODE=${MODE:-http}
CONNS=${CONNS:-1000000}
PER=${PER:-15000}
SHARDS=${SHARDS:-$(((CONNS + PER - 1) / PER))}
SERVERS=${SERVERS:-$(((CONNS + 17999) / 18000))}
HOLD=${HOLD:-600}
RAMP=${RAMP:-14000}
NET=${NET:-2}
HOST=${HOST:-127.0.1.1}
PORT=${PORT:-8080}
METRICS=${METRICS:-9600}

# shellcheck source=bench/lib.sh
. bench/lib.sh
need prometheus prometheus
need curl curl
use_soakd
work_init c1m
ulimit -n "$(ulimit -Hn)"

case $MODE in
http)
    URL=http://$HOST:$PORT/
    SERVER_ARGS=()
    RUN_ARGS=(-i 60s)
    ;;
ws)
    URL=ws://$HOST:$PORT/ws
    SERVER_ARGS=()
    RUN_ARGS=(--ws-ping 60s)
    ;;
h2)
    URL=http://$HOST:$PORT/
    SERVER_ARGS=(--h2)
    RUN_ARGS=(--http 2 -i 60s)
    ;;
h2idle)
    # Held HTTP/2 connections kept alive by a PING a minute; a request
    # every 1,000 hours each (its first at the slot's phase: ~0.2% of
    # the connections send one in a 12-minute run).
    URL=http://$HOST:$PORT/
    SERVER_ARGS=(--h2)
    RUN_ARGS=(--http 2 -i 1000h --h2-ping 60s)
    ;;
*)
    echo "MODE is http, ws, h2 or h2idle" >&2
    exit 2
    ;;
esac

meminfo() { awk -v k="$1:" '$1 == k { print $2 * 1024 }' /proc/meminfo; }
# tcp_inuse: TCP sockets in use on the host (both ends of each connection).
tcp_inuse() { awk '$1 == "TCP:" { print $3 }' /proc/net/sockstat; }
# pss PID...: the processes' proportional set sizes summed, bytes.
pss() {
    local p t=0 v
    for p in "$@"; do
        v=$(awk '$1 == "Pss:" { print $2 * 1024 }' "/proc/$p/smaps_rollup" 2>/dev/null || echo 0)
        t=$((t + ${v:-0}))
    done
    echo "$t"
}
ticks() {
    local p t=0 v
    for p in "$@"; do
        v=$(cpu_ticks "$p" 2>/dev/null || echo 0)
        t=$((t + ${v:-0}))
    done
    echo "$t"
}

section "before: $(free -g | awk '/Mem:/ { print $7 }') GiB available; TCP sockets in use $(tcp_inuse)"
SLAB0=$(meminfo Slab)
SUNRECLAIM0=$(meminfo SUnreclaim)
cp /proc/slabinfo "$WORK/slabinfo0"

section "$SERVERS servers: soakd target --listen $HOST:$PORT --reuse-port ${SERVER_ARGS[*]}"
SERVER_PIDS=()
for i in $(seq "$SERVERS"); do
    "$SOAKD" target --listen "$HOST:$PORT" --reuse-port "${SERVER_ARGS[@]}" >"$WORK/server$i.out" 2>&1 &
    SERVER_PIDS+=($!)
    PIDS+=($!)
done
for i in $(seq "$SERVERS"); do
    for _ in $(seq 50); do
        grep -q '^listening on' "$WORK/server$i.out" 2>/dev/null && break
        sleep 0.1
    done
    grep -q '^listening on' "$WORK/server$i.out" || {
        cat "$WORK/server$i.out"
        exit 1
    }
done
SERVERS_PSS0=$(pss "${SERVER_PIDS[@]}")

section "prometheus: one job, the shards from the run's file_sd list"
PROM_PORT=$(free_port)
mkdir -p "$WORK/prom"
cat >"$WORK/prom/prometheus.yml" <<EOF
global:
  scrape_interval: 15s
scrape_configs:
  - job_name: soakd
    file_sd_configs:
      - files: ["$WORK/run.json.shards/targets.json"]
        refresh_interval: 5s
EOF
prometheus --config.file="$WORK/prom/prometheus.yml" --storage.tsdb.path="$WORK/prom/data" \
    --web.listen-address="127.0.0.1:$PROM_PORT" >"$WORK/prom/log" 2>&1 &
PROM_PID=$!
PIDS+=($PROM_PID)
for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$PROM_PORT/-/ready" >/dev/null && break
    sleep 0.3
done
query() {
    curl -fsG "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=$1" | python3 -c '
import json, sys
r = json.load(sys.stdin)["data"]["result"]
print(" ".join(s["value"][1] for s in r) if r else "none")'
}

SOURCES=()
for i in $(seq 0 $((SHARDS - 1))); do
    SOURCES+=(--source-addr "127.$NET.$((i / 250)).$((i % 250 + 1))")
done
RAMP_S=$((CONNS / RAMP))
DURATION=$((RAMP_S + 30 + HOLD))
section "soakd run $URL --processes $SHARDS -c $CONNS ${RUN_ARGS[*]} --ramp $RAMP -d ${DURATION}s (sources 127.$NET.0.1 …)"
START=$(date +%s.%N)
"$SOAKD" run "$URL" --processes "$SHARDS" -c "$CONNS" "${RUN_ARGS[@]}" --ramp "$RAMP" -d "${DURATION}s" \
    "${SOURCES[@]}" --close-with-reset --metrics-listen "127.0.0.1:$METRICS" --metrics-linger 40s \
    --report "$WORK/run.json" 2>"$WORK/run.log" &
RUN_PID=$!
PIDS+=($RUN_PID)

# The ramp: until the kernel counts both ends of every connection.
OPEN_AT=
for _ in $(seq $((RAMP_S * 10 + 1200))); do
    if [ "$(tcp_inuse)" -ge $((2 * CONNS)) ]; then
        OPEN_AT=$(date +%s.%N)
        break
    fi
    kill -0 "$RUN_PID" 2>/dev/null || break
    sleep 0.1
done
if [ -z "$OPEN_AT" ]; then
    echo "never all open: TCP sockets in use $(tcp_inuse); the run's log:"
    tail -30 "$WORK/run.log"
    exit 1
fi
echo "all $CONNS open after $(calc "$OPEN_AT - $START") s (the kernel's TCP sockets in use: $(tcp_inuse))"
SHARD_PIDS=($(pgrep -P "$RUN_PID"))
echo "${#SHARD_PIDS[@]} shard processes under the parent $RUN_PID"
# soakd's memory from the start of the hold, to read again near its end:
# flat, or growing while the connections are only held.
sleep 10
PSS_START=$(pss "$RUN_PID" "${SHARD_PIDS[@]}")
PSS_START_AT=$(date +%s.%N)

# Half the hold, then one minute of CPU, the memory and the kernel's slab.
sleep $((HOLD / 2 - 40))
section "the hold, $((HOLD / 2)) s in"
T0=$(date +%s.%N)
C0=$(ticks "$RUN_PID" "${SHARD_PIDS[@]}")
S0=$(ticks "${SERVER_PIDS[@]}")
sleep 60
T1=$(date +%s.%N)
C1=$(ticks "$RUN_PID" "${SHARD_PIDS[@]}")
S1=$(ticks "${SERVER_PIDS[@]}")
HZ=$(getconf CLK_TCK)
SOAKD_PSS=$(pss "$RUN_PID" "${SHARD_PIDS[@]}")
SERVERS_PSS=$(pss "${SERVER_PIDS[@]}")
SLAB=$(meminfo Slab)
SUNRECLAIM=$(meminfo SUnreclaim)
PROM_OPEN=$(query 'sum(soakd_connections{state="open"})')
PROM_RATE=$(query 'sum(rate(soakd_connections_opened_total[2m])) + sum(rate(soakd_request_duration_seconds_count[2m]))')
PROM_REQ=$(query 'sum(rate(soakd_request_duration_seconds_count[2m]))')
PROM_PINGS=$(query 'sum(rate(soakd_ws_pings_total[2m]))')
PROM_H2_PINGS=$(query 'sum(rate(soakd_h2_pings_total[2m]))')
CURL=$(curl -s -o /dev/null -w '%{http_code} in %{time_total} s' "http://$HOST:$PORT/" || echo failed)
cat <<EOF
Prometheus, one job over $SHARDS shards: sum(soakd_connections{state="open"}) = $PROM_OPEN
  requests/s (2 min rate) $PROM_REQ (the schedule: $(calc "$CONNS / 60")); WebSocket pings/s $PROM_PINGS; HTTP/2 PINGs/s $PROM_H2_PINGS
soakd:   Pss $(calc "$SOAKD_PSS / 1048576") MiB over $((${#SHARD_PIDS[@]} + 1)) processes = $(calc "$SOAKD_PSS / $CONNS") B per connection
servers: Pss $(calc "$SERVERS_PSS / 1048576") MiB over $SERVERS processes = $(calc "$SERVERS_PSS / $CONNS") B per connection (before the run: $(calc "$SERVERS_PSS0 / 1048576") MiB)
kernel:  Slab +$(calc "($SLAB - $SLAB0) / 1048576") MiB = $(calc "($SLAB - $SLAB0) / $CONNS") B per connection, both sockets (unreclaimable +$(calc "($SUNRECLAIM - $SUNRECLAIM0) / $CONNS") B)
CPU over $(calc "$T1 - $T0") s: soakd $(calc "($C1 - $C0) / $HZ / ($T1 - $T0) * 100")% of a core, servers $(calc "($S1 - $S0) / $HZ / ($T1 - $T0) * 100")%
curl http://$HOST:$PORT/ while held: $CURL
EOF
# The caches that grew most, per connection (both sockets); the whole slab
# above also holds what else ran meanwhile (a build's inodes and dentries).
cp /proc/slabinfo "$WORK/slabinfo1"
python3 - "$WORK/slabinfo0" "$WORK/slabinfo1" "$CONNS" <<'PY'
import sys
def read(p):
    out = {}
    for line in open(p).read().splitlines()[2:]:
        f = line.split()
        out[f[0]] = int(f[1]) * int(f[3])
    return out
a, b, n = read(sys.argv[1]), read(sys.argv[2]), int(sys.argv[3])
grew = sorted(((b[k] - a.get(k, 0), k) for k in b), reverse=True)[:10]
print("  slab caches that grew most (bytes per connection): " + ", ".join("%s %.0f" % (k, d / n) for d, k in grew))
PY

# soakd's memory near the end of the hold against its start.
sleep $((HOLD / 2 - 60))
PSS_END=$(pss "$RUN_PID" "${SHARD_PIDS[@]}")
echo "soakd's Pss over the hold: $(calc "$PSS_START / 1048576") MiB $(calc "$(date +%s.%N) - $PSS_START_AT") s before, $(calc "$PSS_END / 1048576") MiB now ($(calc "($PSS_END - $PSS_START) * 100 / $PSS_START")%); now $(calc "$PSS_END / $CONNS") B per connection"

section "the end"
# Prometheus is read while the shards linger on their final counters (a
# shard gone is a stale series): once every shard has written its report,
# one scrape interval more.
for _ in $(seq $((HOLD + 600))); do
    n=$(find "$WORK/run.json.shards" -name 'shard-*.json' 2>/dev/null | wc -l)
    [ "$n" -lt "$SHARDS" ] || break
    kill -0 "$RUN_PID" 2>/dev/null || break
    sleep 1
done
sleep 20
"$SOAKD" merge --out "$WORK/merged.json" "$WORK"/run.json.shards/shard-*.json 2>/dev/null
python3 - "$WORK/merged.json" "http://127.0.0.1:$PROM_PORT" "$CONNS" "$MODE" <<'PY' || true
import json, sys, urllib.parse, urllib.request
report, prom, conns, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
r = json.load(open(report))
c, q = r["connections"], r["requests"]
errors = sum(r["errors"].values())
print("the shards' reports merged: %d shards, desired %d, peak open %d, opened %d, ramp %.1f s, errors %d"
      % (len(r["shard"]["merged"]), c["desired"], c["peak_open"], c["opened"], c["ramp_seconds"] or -1, errors))
# Each connection is due one request (or ping) a minute from its open.
held = r["duration_seconds"] - (c["ramp_seconds"] or 0) / 2
due = conns * held / 60
def query(e):
    url = prom + "/api/v1/query?" + urllib.parse.urlencode({"query": e})
    res = json.load(urllib.request.urlopen(url))["data"]["result"]
    return float(res[0]["value"][1]) if res else float("nan")
if mode == "ws":
    ws = r["workloads"][0].get("ws") or {}
    print("pings %d, pongs %d: %.1f%% of one a minute per socket (%d due); Prometheus: pongs %d"
          % (ws.get("pings", 0), ws.get("pongs", 0), 100 * ws.get("pongs", 0) / due, due, query("sum(soakd_ws_pongs_total)")))
else:
    print("requests sent %d, completed %d, missed %d: %.1f%% of the schedule (%d due)"
          % (q["sent"], q["completed"], q["missed"], 100 * q["completed"] / due, due))
    total = query("sum(soakd_request_duration_seconds_count)")
    print("responses: merged report %d, Prometheus %d" % (r["latency_seconds"]["count"], total))
    for qq, key in [(0.5, "p50"), (0.99, "p99")]:
        exact = r["latency_seconds"][key]
        est = query("histogram_quantile(%g, sum by (le) (soakd_request_duration_seconds_bucket))" % qq)
        print("  %s: merged report %.1f us, histogram_quantile over the shards %.1f us (%+.1f%%)"
              % (key, exact * 1e6, est * 1e6, (est / exact - 1) * 100))
PY
wait "$RUN_PID" && RC=0 || RC=$?
echo "soakd run --processes exited $RC; its merged summary:"
sed -n '/^soakd: [0-9.]* s, /,$p' "$WORK/run.log" | head -30
