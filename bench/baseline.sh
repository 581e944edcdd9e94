#!/usr/bin/env bash
# soakd run --baseline, live: is a build slower than the last good one, told
# while the soak runs? Real runs against `soakd target`, a real Prometheus
# loading grafana/rules.yml and grafana/alerts.yml, every new dashboard
# panel's query asked of it. bench/README.md ("Live baseline") quotes what
# this printed.
#
#   A   the baseline: BASE_DURATION against `soakd target`
#   1-3 RUN_DURATION against the same target with --baseline A
#       --baseline-window WINDOW, while LOAD_CMD runs beside (another load
#       on the machine): soakd_baseline_verdict 0 for p50 and p99 in every
#       window, exit 0
#   4   the same against `soakd target --delay 2ms`: p50 and p99 worse from
#       the first or second window, SoakdLatencyRegression firing in
#       Prometheus (its `for` is 10 minutes: the run lingers LINGER for
#       it), exit 3; its HTML page rendered by Chromium
#   B,5 a baseline against `soakd target --delay 2ms`, then a run against
#       the plain target with --baseline B: better, exit 0
#   H   soakd history over A, 1, 2, 3, 4, 5: names the fifth (run 4),
#       the sixth better than it, exit 0; over the first five: exit 3
#
#   bench/baseline.sh                     # ~60 min
#   PARTS=slow bench/baseline.sh          # A and run 4 only (~15 min)
#   RUN_DURATION=3m BASE_DURATION=1m LINGER=10m bench/baseline.sh   # quicker, same checks
#   KEEP=/tmp/baseline-bench bench/baseline.sh   # keep reports, logs, page
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

BASE_DURATION=${BASE_DURATION:-2m}
RUN_DURATION=${RUN_DURATION:-10m}
WINDOW=${WINDOW:-1m}
LINGER=${LINGER:-3m}
# Which of the runs above: same (1-3), slow (4), fast (B, 5), history (H,
# which needs all of them).
PARTS=${PARTS:-same slow fast history}
LOAD=${LOAD:--c 1000 -i 1s}
# The other load on the machine during runs 1-3: one core hashing zeros.
LOAD_CMD=${LOAD_CMD:-sha256sum /dev/zero}
# Loopback addresses for the targets and soakd's sockets (several agents
# share this machine: each has its own range).
TARGET_HOST=${TARGET_HOST:-127.0.0.1}
SOURCE=${SOURCE:-}
ulimit -n 20000 2>/dev/null || ulimit -n "$(ulimit -Hn)"
# shellcheck source=bench/lib.sh
. bench/lib.sh
use_soakd
work_init baseline
need prometheus prometheus
need curl curl
export TARGET_HOST

section "prometheus: rules.yml and alerts.yml as shipped, scraping soakd every 5s"
MPORT=$(free_port)
PROM_PORT=$(free_port)
mkdir -p "$WORK/prom"
cat >"$WORK/prom/prometheus.yml" <<EOT
global:
  scrape_interval: 5s
  evaluation_interval: 5s
rule_files: [$ROOT/grafana/rules.yml, $ROOT/grafana/alerts.yml]
scrape_configs:
  - job_name: soakd
    static_configs:
      - targets: ["127.0.0.1:$MPORT"]
EOT
prometheus --config.file="$WORK/prom/prometheus.yml" --storage.tsdb.path="$WORK/prom/data" \
    --web.listen-address="127.0.0.1:$PROM_PORT" >"$WORK/prom/log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do
    curl -fs "http://127.0.0.1:$PROM_PORT/-/ready" >/dev/null 2>&1 && break
    sleep 0.2
done
echo "prometheus on 127.0.0.1:$PROM_PORT; soakd's metrics on 127.0.0.1:$MPORT"

# query EXPR: "labels=value" per series, or "none".
query() {
    curl -fsG "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=$1" | python3 -c '
import json, sys
r = json.load(sys.stdin)["data"]["result"]
print("; ".join("%s=%s" % (",".join("%s=%s" % kv for kv in sorted(s["metric"].items()) if kv[0] in ("metric", "alertstate", "quantile")), s["value"][1]) for s in r) if r else "none")'
}

src=()
[ -z "$SOURCE" ] || src=(--source-addr "$SOURCE")

# soak NAME URL BASELINE ARGS...: one soakd run, its report, log and HDR
# log in $WORK/NAME.*; prints its exit code.
soak() {
    local name=$1 url=$2 base=$3
    shift 3
    local b=()
    [ -z "$base" ] || b=(--baseline "$WORK/$base.json" --baseline-window "$WINDOW")
    # shellcheck disable=SC2086 # LOAD is a list of flags
    set +e
    "$SOAKD" run "$url" $LOAD -t 1 "${src[@]}" "${b[@]}" --metrics-listen "127.0.0.1:$MPORT" \
        --report "$WORK/$name.json" --hdr-log "$WORK/$name.hlog" "$@" 2>"$WORK/$name.log"
    echo $? >"$WORK/$name.exit"
    set -e
    echo "$name: exit $(cat "$WORK/$name.exit")"
}

# windows NAME: each window's p50 and p99 verdicts (-1/0/1) and changes.
windows() {
    python3 - "$WORK/$1.json" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))["baseline"]
sign = {"better": -1, "same": 0, "worse": 1}
for metric in ("p50", "p99"):
    rows = [next(x for x in w["rows"] if x["metric"] == metric) for w in b["windows"]]
    print("  %-4s verdicts %s" % (metric, " ".join("%+d" % sign[x["verdict"]] for x in rows)))
    print("       change   %s" % " ".join("%+.0f%%" % (100 * x["change"]) if x["change"] is not None else "-" for x in rows))
    print("       methods  %s" % " ".join(sorted(set(x["method"] for x in rows))))
print("  baseline p50 %.0f µs, p99 %.0f µs; %d windows of %.0f s; load differs: %s" % (
    1e6 * b["windows"][0]["rows"][0]["baseline"], 1e6 * b["windows"][0]["rows"][1]["baseline"],
    len(b["windows"]), b["window_seconds"], b["load_differs"] or "no"))
for m in b["metrics"]:
    if m["first_worse_at"] is not None:
        print("  %s %s: first worse window from %.0f s, %d of %d worse" % (
            m["workload"], m["metric"], m["first_worse_at"], m["worse"], m["worse"] + m["same"] + m["better"]))
PY
}

start_target plain
PLAIN=$ADDR
start_target slow --delay 2ms
SLOW=$ADDR
echo "targets: plain $PLAIN, --delay 2ms $SLOW"

section "A: the baseline, $BASE_DURATION against soakd target"
soak A "http://$PLAIN/" "" -d "$BASE_DURATION"

part() { [[ " $PARTS " == *" $1 "* ]]; }

for i in 1 2 3; do
    part same || break
    section "run $i: $RUN_DURATION against the same target, --baseline A, while \`$LOAD_CMD\` runs"
    $LOAD_CMD >/dev/null 2>&1 &
    LOAD_PID=$!
    soak "r$i" "http://$PLAIN/" A -d "$RUN_DURATION" --metrics-linger 20s &
    run=$!
    sleep 30
    echo "  after 30 s, from prometheus: $(query 'soakd_baseline_verdict{metric=~"p50|p99"}')"
    wait $run
    kill "$LOAD_PID" 2>/dev/null || true
    wait "$LOAD_PID" 2>/dev/null || true
    LOAD_PID=
    windows "r$i"
    echo "  prometheus, over the run: max $(query 'max by (metric) (max_over_time(soakd_baseline_verdict{metric=~"p50|p99"}['"$RUN_DURATION"']))'), min $(query 'min by (metric) (min_over_time(soakd_baseline_verdict{metric=~"p50|p99"}['"$RUN_DURATION"']))')"
    echo "  alerts: $(query 'ALERTS{alertname=~"SoakdLatencyRegression|SoakdThroughputRegression"}')"
done

if part slow; then
section "run 4: $RUN_DURATION against soakd target --delay 2ms, --baseline A, lingering $LINGER"
soak r4 "http://$SLOW/" A -d "$RUN_DURATION" --metrics-linger "$LINGER" --html-report "$WORK/r4.html" &
run=$!
# Wait for the alert while the run and its linger last.
fired=no
while kill -0 $run 2>/dev/null; do
    if [ "$(query 'ALERTS{alertname="SoakdLatencyRegression",alertstate="firing"}')" != none ]; then
        fired=yes
        echo "  SoakdLatencyRegression firing: $(query 'ALERTS{alertname="SoakdLatencyRegression",alertstate="firing"}')"
        echo "  its summary: $(curl -fs "http://127.0.0.1:$PROM_PORT/api/v1/alerts" | python3 -c '
import json, sys
for a in json.load(sys.stdin)["data"]["alerts"]:
    if a["labels"]["alertname"] == "SoakdLatencyRegression" and a["state"] == "firing":
        print(a["annotations"]["summary"]); break')"
        echo "  dashboard queries (panels of the new row and the baseline lines):"
        python3 - "$ROOT/grafana/dashboards/soakd.json" "http://127.0.0.1:$PROM_PORT" <<'PY'
import json, sys, urllib.parse, urllib.request
dash = json.load(open(sys.argv[1]))
def ask(expr):
    for k, v in (("$__rate_interval", "1m"), ("$job", "soakd"), ("$instance", ".*"), ("$target", ".*")):
        expr = expr.replace(k, v)
    url = sys.argv[2] + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    return json.load(urllib.request.urlopen(url))["data"]["result"]
for p in dash["panels"]:
    for t in p.get("targets", []):
        if "baseline" in t["expr"]:
            n = len(ask(t["expr"]))
            print("    %-4s %-55s %-12s %s" % ("ok" if n else "NONE", p["title"][:55], t["legendFormat"][:12], "%d series" % n))
PY
        break
    fi
    sleep 10
done
wait $run || true
windows r4
echo "  alert fired: $fired"
if command -v chromium >/dev/null 2>&1; then
    chromium --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$WORK/chromium" \
        --window-size=1200,2600 --screenshot="$WORK/r4.png" "file://$WORK/r4.html" >/dev/null 2>&1 || true
    echo "  HTML page: $WORK/r4.html, screenshot $WORK/r4.png ($(stat -c %s "$WORK/r4.png" 2>/dev/null || echo 0) bytes)"
fi

fi

if part fast; then
section "B, run 5: a baseline against --delay 2ms, then the plain target against it"
soak B "http://$SLOW/" "" -d "$BASE_DURATION"
soak r5 "http://$PLAIN/" B -d "$RUN_DURATION"
windows r5
fi

part history || exit 0
section "history: A, 1, 2, 3, 4, 5 (in start order)"
set +e
"$SOAKD" history "$WORK/A.json" "$WORK/r1.json" "$WORK/r2.json" "$WORK/r3.json" "$WORK/r4.json" "$WORK/r5.json" \
    --html "$WORK/history.html"
echo "history of six: exit $?"
"$SOAKD" history "$WORK/A.json" "$WORK/r1.json" "$WORK/r2.json" "$WORK/r3.json" "$WORK/r4.json" >/dev/null
echo "history of the first five (the newest worse): exit $?"
set -e
