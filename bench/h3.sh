#!/usr/bin/env bash
# What HTTP/3 (QUIC) costs soakd, each figure beside its TCP counterpart
# from the same run, against soakd's built-in target (`soakd target --tls
# --h3`, pinned to CPU 0; soakd on CPU 1, one worker thread). See
# bench/README.md, "bench/h3.sh".
#
#   A. hold: CONNS (10,000) connections from one soakd, one request per
#      connection every PACE (60s), opened at RAMP (1000) a second, held
#      HOLD (600) s after the ramp, first over QUIC (`--http 3`, keep-alive
#      default), then over TLS/TCP (`--http 1.1` to https://, from a
#      loopback source address of its own, against a fresh target with the
#      same flags): soakd's errors, connections open at the end (the
#      report's), memory per connection of soakd (VmRSS at the hold's end
#      minus the VmRSS of the same command with -c 1; Pss likewise) and of
#      the target (VmRSS at the hold's end minus its VmRSS before the hold's
#      soakd started), and soakd's CPU over IDLE (60) s in the middle of the
#      hold (utime + stime from /proc/PID/stat), as % of a core.
#   B. cpu: B_CONNS (100) connections x B_STREAMS (10) streams, closed loop,
#      D (20) s, against one target started with --tls --h2 --h3: CPU per
#      completed request of soakd (/usr/bin/time) and of the target
#      (/proc/PID/stat over the run) for --http 3 and --http 2, requests/s,
#      the ratios h3/h2; oha --http-version 3 beside them when oha is here.
#   C. perf: `perf record -g` of soakd for PERF_SECS (10) s of one more run
#      of B's HTTP/3 workload (its own run, so the profiler's cost is in
#      none of B's figures): `perf report --no-children`, top symbols.
#   D. floor: bench/quic_floor (quinn-proto with soakd's TLS and transport
#      settings, nothing of soakd's) holding CONNS connections against a
#      fresh target for FLOOR_HOLD (60) s: its VmRSS per connection, whole
#      and added, beside soakd's from A. What QUIC costs before soakd.
#
# SKIP_A=1, SKIP_B=1, SKIP_C=1, SKIP_D=1 skip a part. H3_NET (127.0.43) is the
# loopback /24 its targets and source addresses live on; SOAKD=/path skips
# the build; KEEP=DIR keeps the reports and logs.
#
#   bench/h3.sh                                   # the full run: ~25 min
#   CONNS=300 HOLD=20 D=5 bench/h3.sh             # a smoke test: ~1.5 min
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
CONNS=${CONNS:-10000}
HOLD=${HOLD:-600}
IDLE=${IDLE:-60}
PACE=${PACE:-60s}
RAMP=${RAMP:-1000}
THREADS=${THREADS:-1}
D=${D:-20}
B_CONNS=${B_CONNS:-100}
B_STREAMS=${B_STREAMS:-10}
PERF_SECS=${PERF_SECS:-10}
PERF_LIMIT=${PERF_LIMIT:-0.5}
SKIP_A=${SKIP_A:-0}
SKIP_B=${SKIP_B:-0}
SKIP_C=${SKIP_C:-0}
SKIP_D=${SKIP_D:-0}
FLOOR_HOLD=${FLOOR_HOLD:-60}
H3_NET=${H3_NET:-127.0.43}
case $H3_NET in
127.*.*) ;;
*)
    echo "H3_NET=$H3_NET: loopback only (127.x.y)" >&2
    exit 2
    ;;
esac
# The quiet stretch fits in the hold.
[ "$IDLE" -le $((HOLD / 2)) ] || IDLE=$((HOLD / 2))
[ "$IDLE" -ge 1 ] || IDLE=1

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
need python3 python3
need curl curl
need /usr/bin/time time
use_soakd
work_init h3
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
NOFILE=$(ulimit -n)
if [ "$SKIP_A" = 0 ] && [ "$NOFILE" != unlimited ] && [ "$NOFILE" -lt $((CONNS + 100)) ]; then
    echo "WARNING: open-file limit $NOFILE is below $((CONNS + 100)): the TCP hold cannot reach $CONNS" >&2
fi
HZ=$(getconf CLK_TCK)

# The target on CPU 0 and soakd on CPU 1 when there are two; unpinned else.
if [ "$(nproc)" -ge 2 ]; then
    PIN_T=(taskset -c 0)
    PIN_C=(taskset -c 1)
    PINNING="target on CPU 0, soakd on CPU 1"
else
    PIN_T=()
    PIN_C=()
    PINNING="one CPU: nothing pinned"
fi

# Results, printed at the end.
declare -A R

# start_h3_target NAME HOST ARGS...: `soakd target --listen HOST:0 ARGS`;
# sets ADDR, CERT and TARGET_PID (stopped by cleanup).
start_h3_target() {
    local name=$1 host=$2
    shift 2
    "${PIN_T[@]}" "$SOAKD" target --listen "$host:0" "$@" </dev/null >"$WORK/$name.out" 2>"$WORK/$name.err" &
    TARGET_PID=$!
    PIDS+=("$TARGET_PID")
    ADDR=
    for _ in $(seq 100); do
        ADDR=$(sed -n 's/^listening on //p' "$WORK/$name.out" 2>/dev/null || true)
        if [ -n "$ADDR" ] && { [[ " $* " != *" --h3 "* ]] || grep -q '^serving HTTP/3 on udp' "$WORK/$name.out"; }; then
            break
        fi
        ADDR=
        sleep 0.1
    done
    [ -n "$ADDR" ] || {
        echo "target $name did not start:" >&2
        cat "$WORK/$name.out" "$WORK/$name.err" >&2
        exit 1
    }
    CERT=$(sed -n 's/^certificate \([^ ]*\) .*/\1/p' "$WORK/$name.out")
    echo "target $name: $(grep -E '^(listening|serving)' "$WORK/$name.out" | tr '\n' ' ')"
}

stop_pid() {
    local pid=$1
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 300); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

# status_kib PID FIELD: a /proc/PID/status field (VmRSS, VmHWM) in KiB.
status_kib() {
    awk -v f="$2:" '$1 == f {print $2}' "/proc/$1/status" 2>/dev/null
}

# pss_kib PID: the process's proportional set size, KiB.
pss_kib() {
    awk '$1 == "Pss:" {print $2}' "/proc/$1/smaps_rollup" 2>/dev/null || echo n/a
}

# open_conns PORT: soakd's open connections, from its metrics.
open_conns() {
    { curl -s --max-time 2 "http://127.0.0.1:$1/metrics" 2>/dev/null || true; } |
        awk '/^soakd_connections\{.*state="open"/ {n += $2} END {print n + 0}'
}

# report_errors FILE: the sum of the report's error counts.
report_errors() {
    python3 -c 'import json, sys; print(sum(json.load(open(sys.argv[1]))["errors"].values()))' "$1"
}

# report_error_kinds FILE: the non-zero error counts, or "-".
report_error_kinds() {
    python3 -c 'import json, sys
e = {k: v for k, v in json.load(open(sys.argv[1]))["errors"].items() if v}
print(" ".join(f"{k}={v}" for k, v in e.items()) or "-")' "$1"
}

# hold KIND URL ARGS...: part A for one protocol (KIND: quic or tcp).
# The same soakd command with -c 1 first (its VmRSS and Pss: the base),
# then CONNS connections: waits for them (bounded), measures the CPU over
# IDLE s in the middle of the hold, the memory at its end, stops soakd
# (SIGTERM) and reads its report. Fills R[KIND.*].
hold() {
    local kind=$1 url=$2
    shift 2
    local args=("$SOAKD" run "$url" "$@" -i "$PACE" -t "$THREADS" --cacert "$CERT" --servername localhost)
    local pid mport base_rss base_pss t_before n=0 t_open started waited ramp_limit c0 c1 t0 t1 before_idle after_idle

    # The base: the same command holding one connection.
    "${PIN_C[@]}" "${args[@]}" -c 1 -d 60s --metrics-listen off </dev/null >"$WORK/$kind-base.out" 2>"$WORK/$kind-base.err" &
    pid=$!
    LOAD_PID=$pid
    sleep 3
    base_rss=$(status_kib "$pid" VmRSS || true)
    base_pss=$(pss_kib "$pid")
    if ! kill -0 "$pid" 2>/dev/null || [ -z "$base_rss" ]; then
        echo "soakd -c 1 ($kind) is not running:" >&2
        cat "$WORK/$kind-base.err" >&2
        exit 1
    fi
    stop_pid "$pid"
    LOAD_PID=
    echo "$kind: soakd with 1 connection: VmRSS $base_rss KiB, Pss $base_pss KiB"
    sleep 1
    t_before=$(status_kib "$TARGET_PID" VmRSS)

    # The hold. Its duration is only a bound: soakd is stopped once the
    # hold is measured.
    ramp_limit=$((CONNS * 3 / RAMP + 60))
    mport=$(free_port)
    "${PIN_C[@]}" "${args[@]}" -c "$CONNS" --ramp "$RAMP" --connect-timeout 60s \
        -d $((ramp_limit + HOLD + 120))s --metrics-listen "127.0.0.1:$mport" --report "$WORK/$kind.json" \
        </dev/null >"$WORK/$kind.out" 2>"$WORK/$kind.err" &
    pid=$!
    LOAD_PID=$pid
    started=$SECONDS
    # Scraped once a second during the ramp only, never during the hold.
    while kill -0 "$pid" 2>/dev/null && [ $((SECONDS - started)) -lt "$ramp_limit" ]; do
        n=$(open_conns "$mport")
        [ "$n" -lt "$CONNS" ] || break
        sleep 1
    done
    t_open=$((SECONDS - started))
    if ! kill -0 "$pid" 2>/dev/null; then
        echo "soakd ($kind) exited during the ramp:" >&2
        tail -20 "$WORK/$kind.err" >&2
        exit 1
    fi
    [ "$n" -ge "$CONNS" ] || echo "WARNING: $kind: only $n of $CONNS open after ${ramp_limit}s; holding anyway" >&2
    echo "$kind: $n connections open after ~${t_open}s; holding ${HOLD}s (CPU measured over ${IDLE}s in the middle)"
    R[$kind.ramp_open]=$n
    R[$kind.ramp_s]=$t_open

    before_idle=$(((HOLD - IDLE) / 2))
    after_idle=$((HOLD - IDLE - before_idle))
    sleep "$before_idle"
    c0=$(cpu_ticks "$pid")
    t0=$(date +%s.%N)
    sleep "$IDLE"
    c1=$(cpu_ticks "$pid")
    t1=$(date +%s.%N)
    sleep "$after_idle"
    waited=$(status_kib "$pid" VmRSS)
    R[$kind.rss]=$waited
    R[$kind.pss]=$(pss_kib "$pid")
    R[$kind.hwm]=$(status_kib "$pid" VmHWM)
    R[$kind.t_rss]=$(status_kib "$TARGET_PID" VmRSS)
    R[$kind.fds]=$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
    R[$kind.cpu_pct]=$(calc "($c1 - $c0) / $HZ / ($t1 - $t0) * 100")
    R[$kind.cpu_s]=$(calc "($c1 - $c0) / $HZ")
    R[$kind.idle_s]=$(calc "$t1 - $t0")
    stop_pid "$pid"
    LOAD_PID=
    if [ ! -s "$WORK/$kind.json" ]; then
        echo "soakd ($kind) wrote no report:" >&2
        tail -20 "$WORK/$kind.err" >&2
        exit 1
    fi
    R[$kind.errors]=$(report_errors "$WORK/$kind.json")
    R[$kind.error_kinds]=$(report_error_kinds "$WORK/$kind.json")
    R[$kind.open_at_end]=$(json_get "$WORK/$kind.json" .connections.open_at_end)
    R[$kind.peak_open]=$(json_get "$WORK/$kind.json" .connections.peak_open)
    R[$kind.opened]=$(json_get "$WORK/$kind.json" .connections.opened)
    R[$kind.completed]=$(json_get "$WORK/$kind.json" .requests.completed)
    R[$kind.ramp_report]=$(calc "$(json_get "$WORK/$kind.json" .connections.ramp_seconds)")
    R[$kind.soakd_b]=$(calc "($waited - $base_rss) * 1024 / $CONNS")
    R[$kind.soakd_pss_b]=$(calc "(${R[$kind.pss]} - $base_pss) * 1024 / $CONNS")
    R[$kind.target_b]=$(calc "(${R[$kind.t_rss]} - $t_before) * 1024 / $CONNS")
    R[$kind.base_rss]=$base_rss
    R[$kind.t_before]=$t_before
    echo "$kind: errors ${R[$kind.errors]} (${R[$kind.error_kinds]}), open at end ${R[$kind.open_at_end]}," \
        "completed ${R[$kind.completed]}; soakd VmRSS $waited KiB (base $base_rss), Pss ${R[$kind.pss]} KiB" \
        "(base $base_pss), ${R[$kind.fds]} fds; target VmRSS ${R[$kind.t_rss]} KiB (before $t_before);" \
        "idle CPU ${R[$kind.cpu_s]} s over ${R[$kind.idle_s]} s = ${R[$kind.cpu_pct]}% of a core"
}

if [ "$SKIP_A" = 0 ]; then
    section "A. $CONNS held connections, -i $PACE, --ramp $RAMP, ${HOLD}s hold ($PINNING)"
    start_h3_target a-quic "$H3_NET.1" --tls --h3
    hold quic "https://$ADDR/" --http 3
    stop_pid "$TARGET_PID"

    # TLS/TCP: a fresh target with the same flags (so its memory starts from
    # the same place), reached from a source address of its own, so this
    # part's TIME_WAIT ports never meet anyone else's.
    wait_timewait
    start_h3_target a-tcp "$H3_NET.2" --tls --h3
    hold tcp "https://$ADDR/" --http 1.1 --source-addr "$H3_NET.3"
    stop_pid "$TARGET_PID"
fi

# closed NAME ARGS...: soakd run ARGS closed loop for D s under
# /usr/bin/time, with the target's CPU read around it. Fills R[NAME.*].
closed() {
    local name=$1 tc0 tc1 u s rc=0
    shift
    tc0=$(cpu_ticks "$TARGET_PID")
    /usr/bin/time -o "$WORK/$name.time" -f '%U %S %M' "${PIN_C[@]}" "$SOAKD" run "$@" \
        -c "$B_CONNS" --streams "$B_STREAMS" -t "$THREADS" --ramp 100000 -d "${D}s" \
        --cacert "$CERT" --servername localhost --metrics-listen off --report "$WORK/$name.json" \
        </dev/null >"$WORK/$name.out" 2>"$WORK/$name.err" || rc=$?
    tc1=$(cpu_ticks "$TARGET_PID")
    if [ ! -s "$WORK/$name.json" ]; then
        echo "soakd ($name) exited $rc without a report:" >&2
        tail -20 "$WORK/$name.err" >&2
        exit 1
    fi
    read -r u s _ < <(tail -n 1 "$WORK/$name.time")
    R[$name.rc]=$rc
    R[$name.completed]=$(json_get "$WORK/$name.json" .requests.completed)
    R[$name.rps]=$(calc "$(json_get "$WORK/$name.json" .requests.per_second)")
    R[$name.errors]=$(report_errors "$WORK/$name.json")
    R[$name.error_kinds]=$(report_error_kinds "$WORK/$name.json")
    R[$name.cpu_s]=$(calc "$u + $s")
    R[$name.us]=$(calc "($u + $s) * 1e6 / ${R[$name.completed]}")
    R[$name.t_us]=$(calc "($tc1 - $tc0) / $HZ * 1e6 / ${R[$name.completed]}")
    echo "$name: exit $rc, ${R[$name.completed]} completed (${R[$name.rps]}/s), errors ${R[$name.errors]}" \
        "(${R[$name.error_kinds]}); soakd CPU ${R[$name.cpu_s]} s = ${R[$name.us]} us/request;" \
        "target ${R[$name.t_us]} us/request"
}

if [ "$SKIP_B" = 0 ] || [ "$SKIP_C" = 0 ]; then
    start_h3_target b "$H3_NET.4" --tls --h2 --h3
fi

OHA_LINE="oha: not installed"
if [ "$SKIP_B" = 0 ]; then
    section "B. $B_CONNS connections x $B_STREAMS streams, closed loop, ${D}s ($PINNING)"
    closed h3 "https://$ADDR/" --http 3 --source-addr "$H3_NET.5"
    closed h2 "https://$ADDR/" --http 2 --source-addr "$H3_NET.5"
    R[ratio.soakd]=$(calc "${R[h3.us]} / ${R[h2.us]}")
    R[ratio.target]=$(calc "${R[h3.t_us]} / ${R[h2.t_us]}")
    R[ratio.rps]=$(calc "${R[h3.rps]} / ${R[h2.rps]}")

    # oha (not installed by this script): the same concurrency over HTTP/3.
    if command -v oha >/dev/null 2>&1; then
        tc0=$(cpu_ticks "$TARGET_PID")
        rc=0
        /usr/bin/time -o "$WORK/oha.time" -f '%U %S %M' "${PIN_C[@]}" timeout $((D + 60)) \
            oha --http-version 3 --insecure --no-tui -c "$B_CONNS" -p "$B_STREAMS" -z "${D}s" "https://$ADDR/" \
            </dev/null >"$WORK/oha.out" 2>"$WORK/oha.err" || rc=$?
        tc1=$(cpu_ticks "$TARGET_PID")
        read -r u s _ < <(tail -n 1 "$WORK/oha.time")
        # Its status code distribution: "[200] N responses".
        done_n=$(awk '/^ *\[[0-9]+\] [0-9]+ responses/ {gsub(/[^0-9 ]/, ""); n += $2} END {print n + 0}' "$WORK/oha.out")
        rps=$(awk '/Requests\/sec:/ {print $2; exit}' "$WORK/oha.out")
        if [ "$rc" = 0 ] && [ "$done_n" -gt 0 ]; then
            OHA_LINE=$(printf '%-28s %10s %14s %14s %8s' "oha --http-version 3" "${rps:-?}" \
                "$(calc "($u + $s) * 1e6 / $done_n")" "$(calc "($tc1 - $tc0) / $HZ * 1e6 / $done_n")" "-")
        else
            OHA_LINE="oha --http-version 3: exit $rc, $done_n responses: $(tail -n 3 "$WORK/oha.err" | tr '\n' ' ')"
        fi
        echo "$OHA_LINE"
    fi
fi

PERF_LINES="perf: skipped (SKIP_C=1)"
if [ "$SKIP_C" = 0 ]; then
    section "C. perf record -g of soakd: ${PERF_SECS}s of B's HTTP/3 workload"
    if ! command -v perf >/dev/null 2>&1; then
        PERF_LINES="perf: not installed (apt-get install linux-perf): no profile"
    else
        "${PIN_C[@]}" "$SOAKD" run "https://$ADDR/" --http 3 --source-addr "$H3_NET.5" \
            -c "$B_CONNS" --streams "$B_STREAMS" -t "$THREADS" --ramp 100000 -d $((PERF_SECS + 5))s \
            --cacert "$CERT" --servername localhost --metrics-listen off --report "$WORK/perf-run.json" \
            </dev/null >"$WORK/perf-run.out" 2>"$WORK/perf-run.err" &
        pid=$!
        LOAD_PID=$pid
        sleep 2
        rc=0
        timeout $((PERF_SECS + 30)) perf record -q -g -o "$WORK/perf.data" -p "$pid" -- sleep "$PERF_SECS" \
            >"$WORK/perf-record.out" 2>&1 || rc=$?
        stop_pid "$pid"
        LOAD_PID=
        if [ "$rc" = 0 ] && [ -s "$WORK/perf.data" ]; then
            # Flat (-g none): a release build has no frame pointers, so
            # its call chains say little; by shared object, then by symbol.
            {
                echo "by shared object:"
                timeout 300 perf report -i "$WORK/perf.data" --stdio --no-children --sort dso -g none \
                    --percent-limit 1 2>/dev/null | grep -v '^#' | grep -v '^$' || true
                echo
                echo "symbols at ${PERF_LIMIT}% and over (PERF_LIMIT), self time:"
                timeout 300 perf report -i "$WORK/perf.data" --stdio --no-children --percent-limit "$PERF_LIMIT" \
                    -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -50 || true
            } | sed 's/ *$//' >"$WORK/perf.txt"
            PERF_LINES=$(cat "$WORK/perf.txt")
        else
            PERF_LINES="perf record failed (exit $rc): $(tail -n 3 "$WORK/perf-record.out" | tr '\n' ' ')"
        fi
    fi
fi

FLOOR_LINE="floor: skipped (SKIP_D=1)"
if [ "$SKIP_D" = 0 ]; then
    section "D. the floor: quic_floor holding $CONNS connections for ${FLOOR_HOLD}s"
    cargo build --release --quiet --manifest-path "$ROOT/bench/quic_floor/Cargo.toml"
    start_h3_target d-floor "$H3_NET.4" --tls --h3
    "${PIN_C[@]}" "$ROOT/bench/quic_floor/target/release/quic_floor" "$ADDR" "$CERT" "$CONNS" "$FLOOR_HOLD" \
        </dev/null >"$WORK/floor.out" 2>"$WORK/floor.err" || {
        echo "quic_floor failed:" >&2
        tail -20 "$WORK/floor.err" >&2
        exit 1
    }
    stop_pid "$TARGET_PID"
    cat "$WORK/floor.out"
    # held N lost N rss_before B rss_after B per_connection_whole B per_connection_added B
    read -r _ f_held _ f_lost _ _ _ _ _ f_whole _ f_added <"$WORK/floor.out"
    FLOOR_LINE="quic_floor: $f_held held, $f_lost lost; VmRSS per connection $f_whole B whole, $f_added B added"
fi

section "results"
echo "soakd $("$SOAKD" --version 2>/dev/null | head -1), $(nproc) CPUs, $PINNING, soakd -t $THREADS; $(uptime | sed 's/.*load/load/')"
if [ "$SKIP_A" = 0 ]; then
    echo
    echo "A. $CONNS connections held ${HOLD}s, one request each per $PACE, --ramp $RAMP"
    printf '%-22s %7s %9s %8s %11s %10s %10s %10s %13s\n' "" errors open_end ramp_s "idle %core" "soakd B/c" "Pss B/c" "target B/c" "completed"
    for kind in quic tcp; do
        label="QUIC (--http 3)"
        [ "$kind" = quic ] || label="TLS/TCP (--http 1.1)"
        printf '%-22s %7s %9s %8s %11s %10s %10s %10s %13s\n' "$label" "${R[$kind.errors]}" \
            "${R[$kind.open_at_end]}" "${R[$kind.ramp_report]}" "${R[$kind.cpu_pct]}" "${R[$kind.soakd_b]}" \
            "${R[$kind.soakd_pss_b]}" "${R[$kind.target_b]}" "${R[$kind.completed]}"
    done
    for kind in quic tcp; do
        [ "${R[$kind.error_kinds]}" = - ] || echo "$kind errors: ${R[$kind.error_kinds]}"
        if [ "${R[$kind.errors]}" = 0 ] && [ "${R[$kind.open_at_end]}" = "$CONNS" ]; then
            echo "$kind: held: 0 errors, $CONNS open at the end"
        else
            echo "$kind: NOT HELD: ${R[$kind.errors]} errors, ${R[$kind.open_at_end]} of $CONNS open at the end"
        fi
    done
    echo "idle CPU QUIC / TLS-TCP: $(calc "${R[quic.cpu_pct]} / ${R[tcp.cpu_pct]}")" \
        "(over ${R[quic.idle_s]} s and ${R[tcp.idle_s]} s in the middle of each hold)"
    echo "soakd B/c: (VmRSS at the hold's end - VmRSS of the same command with -c 1) / $CONNS;" \
        "Pss B/c likewise with Pss (smaps_rollup)"
    echo "target B/c: (target VmRSS at the hold's end - its VmRSS before the hold) / $CONNS, a fresh target for each"
    echo "soakd VmRSS KiB at end / base: QUIC ${R[quic.rss]} / ${R[quic.base_rss]}, TCP ${R[tcp.rss]} / ${R[tcp.base_rss]};" \
        "VmHWM QUIC ${R[quic.hwm]}, TCP ${R[tcp.hwm]}; fds QUIC ${R[quic.fds]}, TCP ${R[tcp.fds]}"
fi
if [ "$SKIP_B" = 0 ]; then
    echo
    echo "B. $B_CONNS connections x $B_STREAMS streams, closed loop, ${D}s, target --tls --h2 --h3"
    printf '%-28s %10s %14s %14s %8s\n' "" "req/s" "soakd us/req" "target us/req" errors
    printf '%-28s %10s %14s %14s %8s\n' "soakd --http 3" "${R[h3.rps]}" "${R[h3.us]}" "${R[h3.t_us]}" "${R[h3.errors]}"
    printf '%-28s %10s %14s %14s %8s\n' "soakd --http 2 (TLS)" "${R[h2.rps]}" "${R[h2.us]}" "${R[h2.t_us]}" "${R[h2.errors]}"
    echo "$OHA_LINE"
    printf '%-28s %10s %14s %14s\n' "ratio h3/h2" "${R[ratio.rps]}" "${R[ratio.soakd]}" "${R[ratio.target]}"
    for name in h3 h2; do
        [ "${R[$name.error_kinds]}" = - ] || echo "$name errors: ${R[$name.error_kinds]}"
    done
fi
echo
echo "C. where soakd's time goes (--http 3, B's workload)"
echo "$PERF_LINES"
echo
echo "D. the floor of a held QUIC connection ($CONNS, quinn-proto alone)"
echo "$FLOOR_LINE"
