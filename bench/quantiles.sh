#!/usr/bin/env bash
# Percentiles over N shards from Prometheus's classic buckets against the
# merged report's exact ones (issue 41): does `histogram_quantile` over the
# shards say what `soakd merge` says, below a millisecond too?
#
# For each build in BUILDS (default: the one use_soakd builds): N shards of
# one plan (`--shard I/N`) against the built-in target on loopback, one
# Prometheus job scraping every shard each second, the shards lingering
# on their final counters (`--metrics-linger`); then
# histogram_quantile(q, sum by (le) (soakd_request_duration_seconds_bucket))
# at q = 0.5, 0.9, 0.99, 0.999 beside the merged report's exact values.
#
#   BUILDS="/tmp/soakd-before /tmp/soakd-after" bench/quantiles.sh
#   N=3 CONNECTIONS=300 RATE=3000 DURATION=40s bench/quantiles.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
N=${N:-3}
CONNECTIONS=${CONNECTIONS:-300}
RATE=${RATE:-3000}
DURATION=${DURATION:-40s}
# shellcheck source=bench/lib.sh
. bench/lib.sh
need prometheus prometheus
use_soakd
BUILDS=${BUILDS:-$SOAKD}
work_init quantiles

run_build() {
    local build=$1 dir=$2 ports=() targets=""
    mkdir -p "$dir"
    SOAKD=$build start_target "target-$(basename "$dir")"
    for i in $(seq 0 $((N - 1))); do
        ports+=("$(free_port)")
        targets+="${targets:+, }\"127.0.0.1:${ports[$i]}\""
    done
    local pport
    pport=$(free_port)
    printf 'global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: shards\n    static_configs:\n      - targets: [%s]\n' \
        "$targets" >"$dir/prometheus.yml"
    prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
        --web.listen-address="127.0.0.1:$pport" >"$dir/prometheus.log" 2>&1 &
    local prom=$!
    PIDS+=("$prom")
    for _ in $(seq 100); do
        curl -sf "http://127.0.0.1:$pport/-/ready" >/dev/null && break
        sleep 0.3
    done
    local shards=()
    for i in $(seq 0 $((N - 1))); do
        "$build" run "http://$ADDR/" -c "$CONNECTIONS" -r "$RATE" -d "$DURATION" --shard "$i/$N" \
            --metrics-listen "127.0.0.1:${ports[$i]}" --metrics-linger 6s \
            --report "$dir/shard$i.json" >"$dir/shard$i.log" 2>&1 &
        shards+=("$!")
    done
    # Queried while the shards linger on their final counters: once a
    # shard is gone, its failed scrape makes its series stale and the
    # instant queries would leave it out.
    for _ in $(seq 600); do
        local all=yes
        for i in $(seq 0 $((N - 1))); do [ -s "$dir/shard$i.json" ] || all=no; done
        [ "$all" = yes ] && break
        sleep 0.2
    done
    sleep 2.5
    "$build" merge --out "$dir/merged.json" "$dir"/shard*.json
    python3 - "$dir/merged.json" "http://127.0.0.1:$pport" "$build" <<'PY'
import json, sys, urllib.parse, urllib.request
merged, prom, build = sys.argv[1], sys.argv[2], sys.argv[3]
r = json.load(open(merged))
lat = r["latency_seconds"]
def query(q):
    url = prom + "/api/v1/query?" + urllib.parse.urlencode({"query": q})
    res = json.load(urllib.request.urlopen(url))["data"]["result"]
    return float(res[0]["value"][1]) if res else float("nan")
buckets = query('count(count by (le) (soakd_request_duration_seconds_bucket{job="shards"}))')
total = query('sum(soakd_request_duration_seconds_count{job="shards"})')
shards = query('count(soakd_request_duration_seconds_count{job="shards"})')
print("%s: %d responses in the merged report, %d in Prometheus (%d shards' series), %d bounds" % (
    build, r["requests"]["completed"], total, shards, buckets))
print("  q       exact (merge)   histogram_quantile   error")
for q, key in [(0.5, "p50"), (0.9, "p90"), (0.99, "p99"), (0.999, "p999")]:
    exact = lat[key]
    est = query('histogram_quantile(%g, sum by (le) (soakd_request_duration_seconds_bucket{job="shards"}))' % q)
    print("  %-6g %10.1f us %14.1f us %+9.1f%%" % (q, exact * 1e6, est * 1e6, (est / exact - 1) * 100))
PY
    local rc=0
    for p in "${shards[@]}"; do wait "$p" || rc=$?; done
    [ "$rc" = 0 ] || echo "a shard exited $rc"
    kill "$prom" 2>/dev/null || true
    kill "$TARGET_PID" 2>/dev/null || true
}

k=0
for build in $BUILDS; do
    k=$((k + 1))
    section "$build: $N shards x $((CONNECTIONS / N)) connections, $RATE requests/s in all, $DURATION"
    run_build "$build" "$WORK/b$k"
done
