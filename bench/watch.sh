#!/usr/bin/env bash
# The server watch (issue 39): does soakd judge a server it reads only
# through its metrics as it judges its own figures? bench/README.md
# ("Issue 39") and docs/operating.md quote what this printed.
#
#   (a) leak: tests/peers/leaky_server.py (Python, prometheus_client)
#       leaking LEAK bytes per request, soaked RATE req/s for LEAK_DURATION
#       with --target-metrics and 'slope(rss)<=1MiB/h': the slope soakd
#       reports against the least-squares slope of the server's RSS read
#       from /proc by this script (every 2 s, the same span), when the
#       threshold first failed live (soakd_threshold_passing 0), the exit;
#   (b) steady: the same server without the leak, STEADY runs of
#       STEADY_DURATION (the last with HOG CPU hogs beside it): every
#       slope and drift, and the failures (want 0);
#   (c) prometheus: two instances scraped by a real Prometheus (1 s), one
#       leaking, watched through --prometheus only: which series failed;
#   (d) fds: Debian's prometheus-process-exporter watching a server that
#       leaks a descriptor every 10 requests: slope(fds);
#   (e) restart: the leaking server killed and started again on its ports
#       halfway: restarts, events, the slope between them;
#   (f) bad: an exporter that answers, then hangs, answers HTML, 50 MB,
#       closes at once, answers again: failures by reason, the soak's
#       errors and rate, soakd's peak RSS against before.
#
#   bench/watch.sh                        # all, ~40 min
#   ONLY="a" LEAK_DURATION=6m bench/watch.sh
#   ONLY="b" STEADY=5 STEADY_DURATION=4m bench/watch.sh
set -euo pipefail
cd "$(dirname "$0")/.."

LEAK=${LEAK:-2048}
RATE=${RATE:-50}
LEAK_DURATION=${LEAK_DURATION:-6m}
STEADY=${STEADY:-5}
STEADY_DURATION=${STEADY_DURATION:-4m}
HOG=${HOG:-2}
SHORT=${SHORT:-90s}
ONLY=${ONLY:-a b c d e f}
INTERVAL=${INTERVAL:-10s}
PY=${PY:-${SOAKD_TEST_PYTHON:-$HOME/.cache/soakd/peers-venv/bin/python}}
SOAKD=${SOAKD:-}
ulimit -n 20000 2>/dev/null || ulimit -n "$(ulimit -Hn)"
# shellcheck source=bench/lib.sh
. bench/lib.sh
use_soakd
work_init watch
"$PY" -c 'import prometheus_client' || {
    echo "$PY cannot import prometheus_client: run scripts/test.sh once (it makes the venv)" >&2
    exit 1
}

# leaky NAME ARGS...: starts tests/peers/leaky_server.py; sets PORT,
# MPORT, SPID.
leaky() {
    local name=$1
    shift
    "$PY" tests/peers/leaky_server.py "$@" >"$WORK/$name.out" 2>&1 &
    PIDS+=("$!")
    for _ in $(seq 100); do
        if grep -q '^port ' "$WORK/$name.out"; then
            read -r _ PORT _ MPORT _ SPID <"$WORK/$name.out"
            return 0
        fi
        sleep 0.1
    done
    cat "$WORK/$name.out" >&2
    exit 1
}

# sample PID FILE: the process's VmRSS (bytes) every 2 s as "t rss".
sample() {
    local start
    start=$(date +%s.%N)
    while kill -0 "$1" 2>/dev/null; do
        awk -v t="$(calc "$(date +%s.%N) - $start")" '/^VmRSS/ { print t, $2 * 1024 }' "/proc/$1/status" >>"$2" 2>/dev/null || true
        sleep 2
    done
}

# series REPORT WATCH: each series of WATCH in the report, with its
# slope, drift and restarts.
series() {
    python3 - "$1" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for s in r.get("server", {}).get("series", []):
    if s["watch"] != sys.argv[2]:
        continue
    sl, d = s["slope"], s["drift"]
    slope = "-" if sl.get("slope") is None else "%+.1f %s (95%% %+.1f .. %+.1f) p=%.2g%s" % (
        sl["slope"], sl["unit"], sl["low"], sl["high"], sl["p_value"], " significant" if sl["significant"] else "")
    drift = "-" if d.get("drift") is None else "%+.1f%% p=%.2g%s" % (
        d["drift"] * 100, d["p_value"], " significant" if d["significant"] else "")
    labels = ",".join("%s=%s" % kv for kv in sorted(s.get("labels", {}).items()))
    print("  %s{%s} last %s, slope %s, drift %s, restarts %s" % (
        s["watch"], labels, s.get("last"), slope, drift, s.get("restarts", [])))
for t in r.get("thresholds", []):
    print("  %s %s measured %s: %s" % ("PASS" if t["pass"] else "FAIL", t["threshold"], t.get("measured"), t.get("note")))
PY
}

if [[ " $ONLY " == *" a "* ]]; then
    section "(a) a leak of $LEAK bytes per request at $RATE req/s, $LEAK_DURATION"
    leaky leak --leak-bytes "$LEAK"
    sample "$SPID" "$WORK/proc.txt" &
    port=$(free_port)
    set +e
    "$SOAKD" run "http://127.0.0.1:$PORT/" -c 10 -r "$RATE" -d "$LEAK_DURATION" \
        --metrics-listen "127.0.0.1:$port" --target-metrics "http://127.0.0.1:$MPORT/metrics" \
        --target-metrics-interval "$INTERVAL" --threshold 'slope(rss)<=1MiB/h' \
        --report "$WORK/leak.json" >"$WORK/leak.log" 2>&1 &
    run=$!
    set -e
    start=$(date +%s)
    failed_at=
    while kill -0 "$run" 2>/dev/null; do
        if [ -z "$failed_at" ] && curl -sf "http://127.0.0.1:$port/metrics" |
            grep -q '^soakd_threshold_passing{target="\*",threshold="slope(rss)<=1MiB/h"} 0'; then
            failed_at=$(($(date +%s) - start))
        fi
        sleep 2
    done
    wait "$run" && rc=0 || rc=$?
    echo "exit $rc; slope(rss)<=1MiB/h failed live ${failed_at:-never} s into the run"
    series "$WORK/leak.json" rss
    python3 - "$WORK/leak.json" "$WORK/proc.txt" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
s = [x for x in r["server"]["series"] if x["watch"] == "rss"][0]["slope"]
pts = [tuple(map(float, l.split())) for l in open(sys.argv[2]) if l.strip()]
# The same span as soakd's fit (its first and last value's point ends).
pts = [(t, y) for t, y in pts if s["from_seconds"] - 1 <= t <= s["to_seconds"] + 1]
n = len(pts); mx = sum(p[0] for p in pts) / n; my = sum(p[1] for p in pts) / n
ls = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
print("soakd's slope %.0f B/s from the exposition, /proc least squares %.0f B/s over %d reads: %+.1f%%" % (
    s["slope"], ls, n, (s["slope"] / ls - 1) * 100))
PY
    kill "$SPID" 2>/dev/null || true
fi

if [[ " $ONLY " == *" b "* ]]; then
    section "(b) no leak: $STEADY runs of $STEADY_DURATION (the last with $HOG CPU hogs)"
    fails=0
    for i in $(seq "$STEADY"); do
        leaky "steady$i"
        hog=
        if [ "$i" = "$STEADY" ] && [ "$HOG" -gt 0 ]; then
            for _ in $(seq "$HOG"); do
                sha256sum /dev/zero &
                PIDS+=("$!")
                hog="$hog $!"
            done
        fi
        set +e
        "$SOAKD" run "http://127.0.0.1:$PORT/" -c 10 -r "$RATE" -d "$STEADY_DURATION" --metrics-listen off \
            --target-metrics "http://127.0.0.1:$MPORT/metrics" --target-metrics-interval "$INTERVAL" \
            --threshold 'slope(rss)<=1MiB/h' --threshold 'slope(fds)<=60/h' \
            --report "$WORK/steady$i.json" >"$WORK/steady$i.log" 2>&1
        rc=$?
        set -e
        [ -z "$hog" ] || kill $hog 2>/dev/null || true
        [ "$rc" = 0 ] || fails=$((fails + 1))
        echo "run $i${hog:+ (with $HOG hogs)}: exit $rc"
        series "$WORK/steady$i.json" rss
        series "$WORK/steady$i.json" fds | grep -v 'slope(rss)'
        kill "$SPID" 2>/dev/null || true
    done
    echo "false failures: $fails of $STEADY"
fi

if [[ " $ONLY " == *" c "* ]]; then
    section "(c) two instances through a real Prometheus, one leaking"
    need prometheus prometheus
    leaky quiet
    quiet="127.0.0.1:$MPORT"
    leaky leaking --leak-bytes "$LEAK"
    loud="127.0.0.1:$MPORT"
    pport=$(free_port)
    mkdir -p "$WORK/prom"
    printf 'global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: shop\n    static_configs:\n      - targets: ["%s", "%s"]\n' \
        "$quiet" "$loud" >"$WORK/prom/prometheus.yml"
    prometheus --config.file="$WORK/prom/prometheus.yml" --storage.tsdb.path="$WORK/prom/data" \
        --web.listen-address="127.0.0.1:$pport" >"$WORK/prom/log" 2>&1 &
    PIDS+=("$!")
    for _ in $(seq 100); do
        curl -sf "http://127.0.0.1:$pport/api/v1/query?query=up" | grep -q '"1"' && break
        sleep 0.3
    done
    sleep 3
    set +e
    "$SOAKD" run "http://127.0.0.1:$PORT/" -c 10 -r "$RATE" -d "$SHORT" --metrics-listen off \
        --prometheus "http://127.0.0.1:$pport/" --watch 'rss=process_resident_memory_bytes{job="shop"}' \
        --target-metrics-interval 2s --threshold 'slope(rss)<=1MiB/h' --report "$WORK/prom.json" >"$WORK/prom.log" 2>&1
    echo "exit $? (the leaking instance is $loud)"
    set -e
    series "$WORK/prom.json" rss
fi

if [[ " $ONLY " == *" d "* ]]; then
    section "(d) descriptors through prometheus-process-exporter"
    need prometheus-process-exporter prometheus-process-exporter
    leaky fdleak --fd-leak-every 10 --tag fdleaker
    eport=$(free_port)
    printf "process_names:\n  - name: fdleaker\n    cmdline: ['fdleaker']\n" >"$WORK/groups.yml"
    prometheus-process-exporter -config.path="$WORK/groups.yml" -web.listen-address="127.0.0.1:$eport" >/dev/null 2>&1 &
    PIDS+=("$!")
    for _ in $(seq 100); do
        curl -sf "http://127.0.0.1:$eport/metrics" | grep -q namedprocess_namegroup_open_filedesc && break
        sleep 0.2
    done
    set +e
    "$SOAKD" run "http://127.0.0.1:$PORT/" -c 10 -r "$RATE" -d "$SHORT" --metrics-listen off \
        --target-metrics "http://127.0.0.1:$eport/metrics" --target-metrics-interval 2s \
        --watch 'fds=namedprocess_namegroup_open_filedesc{groupname="fdleaker"}' \
        --threshold 'slope(fds)<=100/h' --report "$WORK/fds.json" >"$WORK/fds.log" 2>&1
    echo "exit $? (the server leaks $(calc "$RATE / 10") descriptors a second)"
    set -e
    series "$WORK/fds.json" fds
fi

if [[ " $ONLY " == *" e "* ]]; then
    section "(e) the leaking server restarted halfway"
    leaky r1 --leak-bytes "$LEAK"
    p=$PORT
    m=$MPORT
    set +e
    "$SOAKD" run "http://127.0.0.1:$p/" -c 10 -r "$RATE" -d "$SHORT" --metrics-listen off \
        --target-metrics "http://127.0.0.1:$m/metrics" --target-metrics-interval 2s \
        --threshold 'slope(rss)<=1MiB/h' --report "$WORK/restart.json" >"$WORK/restart.log" 2>&1 &
    run=$!
    set -e
    sleep 45
    kill "$SPID"
    sleep 1
    leaky r2 --leak-bytes "$LEAK" --port "$p" --metrics-port "$m"
    wait "$run" && rc=0 || rc=$?
    echo "exit $rc"
    series "$WORK/restart.json" rss
    python3 - "$WORK/restart.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for e in r["events"]:
    print("  event %r at %.1f s: %s" % (e["name"], e["at"], e["status"]))
PY
fi

if [[ " $ONLY " == *" f "* ]]; then
    section "(f) an exporter that goes bad mid-soak"
    start_target bad
    eport=$(free_port)
    python3 - "$eport" "$WORK/mode" <<'PY' &
import socket, sys, threading, time
port, mode_file = int(sys.argv[1]), sys.argv[2]
open(mode_file, "w").write("ok")
def serve(c):
    try:
        c.settimeout(60)
        buf = b""
        while b"\r\n\r\n" not in buf:
            d = c.recv(4096)
            if not d:
                return
            buf += d
        mode = open(mode_file).read().strip()
        if mode == "ok":
            body = b"process_resident_memory_bytes 1.5e+08\nprocess_open_fds 42\n"
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        elif mode == "hang":
            time.sleep(60)
        elif mode == "html":
            body = b"<!doctype html><html><body>Login required</body></html>"
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        elif mode == "huge":
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (50 << 20))
            chunk = b"x" * 65536
            for _ in range(800):
                c.sendall(chunk)
    except OSError:
        pass
    finally:
        c.close()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(64)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
    PIDS+=("$!")
    sleep 1
    set +e
    "$SOAKD" run "http://$ADDR/" -c 100 -r 1000 -d 100s --metrics-listen off \
        --target-metrics "http://127.0.0.1:$eport/metrics" --target-metrics-interval 1s \
        --report "$WORK/bad.json" >"$WORK/bad.log" 2>&1 &
    run=$!
    set -e
    sleep 10
    before=$(awk '/^VmRSS/ { print $2 }' "/proc/$run/status")
    for mode in hang html huge close ok; do
        echo "$mode" >"$WORK/mode"
        sleep 15
    done
    peak=$(awk '/^VmHWM/ { print $2 }' "/proc/$run/status")
    wait "$run" && rc=0 || rc=$?
    echo "exit $rc; soakd RSS before the exporter went bad $((before / 1024)) MiB, peak $((peak / 1024)) MiB"
    python3 - "$WORK/bad.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
errs = sum(v for v in r["errors"].values())
print("  requests %d completed, %.1f/s, errors %d, p99 %.2f ms" % (
    r["requests"]["completed"], r["requests"]["per_second"], errs, r["latency_seconds"]["p99"] * 1e3))
for s in r["server"]["sources"]:
    print("  source %s: %d reads, failures %s, stale at the end: %s" % (s["source"], s["reads"], s["failures"], s["stale"]))
PY
    grep -E "watch source" "$WORK/bad.log" | sed 's/^/  log: /'
fi
