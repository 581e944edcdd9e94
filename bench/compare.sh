#!/usr/bin/env bash
# Benchmark soakd against wrk in the same run, against the same nginx.
# See bench/README.md for what is measured and how to read the numbers.
#
#   bench/compare.sh                        # wrk vs soakd, 100 and 10000 connections
#   CONNS="100 1000" DURATION=5 bench/compare.sh
#   MODE=hold bench/compare.sh              # soakd CPU while holding 15,000 idle-ish connections
#   HOLD_CONNS=10000 HOLD_RAMP=1000 MODE=hold bench/compare.sh   # other count / ramp rate
#   MODE=ramp bench/compare.sh              # how long opening 15,000 connections takes
#   MODE=lag  bench/compare.sh              # p99 schedule lag at 15,000 connections
#   MODE=handshake bench/compare.sh         # TLS: CPU per full and per resumed handshake (--close churn)
#   TLS=1 bench/compare.sh                  # any mode over HTTPS (nginx with ssl; wrk and soakd speak TLS)
#   SOAKD=/path/to/soakd bench/compare.sh   # use that binary, skip the build
#
# nginx (1 worker) is pinned to CPU 0 and the load generator to CPU 1, so
# neither steals the other's core.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD

MODE=${MODE:-compare}
CONNS=${CONNS:-100 10000}
DURATION=${DURATION:-10}
# wrk counts a response slower than this as a timeout (its default is 2 s;
# 10,000 TLS handshakes on one nginx core take longer than that to ramp).
WRK_TIMEOUT=${WRK_TIMEOUT:-2s}
# Extra flags for every soakd run (e.g. "--connect-timeout 30s").
SOAKD_ARGS=${SOAKD_ARGS:-}
# SOAKD=/path/to/soakd benchmarks that binary instead, without building.
SOAKD_GIVEN=${SOAKD:+yes}
SOAKD=${SOAKD:-$ROOT/target/release/soakd}

case "$MODE" in
compare | hold | ramp | lag) ;;
handshake) TLS=1 ;;
*)
    echo "unknown MODE=$MODE (want compare, hold, ramp, lag or handshake)" >&2
    exit 2
    ;;
esac

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
bench_init
need /usr/bin/time time
[ "$MODE" != compare ] || need wrk wrk

build_soakd
if [ "$MODE" != compare ] && [ "$SOAKD_OK" = no ]; then
    echo "MODE=$MODE needs soakd" >&2
    exit 1
fi

section "nginx"
start_nginx
if [ "${TLS:-0}" = 1 ]; then
    URL=https://127.0.0.1:$PORT/
    # soakd verifies nginx's certificate (wrk does not verify at all).
    SOAKD_TLS=(--cacert "$WORK/nginx/cert.pem")
else
    URL=http://127.0.0.1:$PORT/
    SOAKD_TLS=()
fi
echo "nginx pid $NGINX_PID on $URL (CPU 0); load generators on CPU 1; open-file limit $NOFILE"

# ---------------------------------------------------------------------------
# Running a load generator
# ---------------------------------------------------------------------------

# timed NAME CMD...: runs CMD on CPU 1 under /usr/bin/time with stdout in
# $WORK/NAME.out and stderr in $WORK/NAME.err; sets CPU_S (user+system CPU
# seconds), RSS_KIB (max RSS) and RC (exit status).
timed() {
    local name=$1
    shift
    RC=0
    /usr/bin/time -o "$WORK/$name.time" -f '%U %S %M' taskset -c 1 "$@" \
        </dev/null >"$WORK/$name.out" 2>"$WORK/$name.err" || RC=$?
    # On failure time(1) puts a "Command exited with..." line first.
    local u s m
    read -r u s m < <(tail -n 1 "$WORK/$name.time")
    CPU_S=$(calc "$u + $s")
    RSS_KIB=$m
}

# show_failure NAME: what a failed run printed.
show_failure() {
    echo "---- $1 failed (exit $RC); stderr (last 30 lines): ----" >&2
    tail -n 30 "$WORK/$1.err" >&2 || true
    echo "----" >&2
}

# soakd_run NAME ARGS...: runs `soakd run URL ARGS... --report FILE
# --metrics-listen off` timed on CPU 1. Sets REPORT (empty on failure).
soakd_run() {
    local name=$1
    shift
    REPORT=$WORK/$name.json
    rm -f "$REPORT"
    wait_timewait
    # shellcheck disable=SC2086 # SOAKD_ARGS is a list of flags
    timed "$name" "$SOAKD" run "$URL" "$@" "${SOAKD_TLS[@]}" $SOAKD_ARGS --report "$REPORT" --metrics-listen off
    if [ "$RC" -ne 0 ] || [ ! -s "$REPORT" ] || ! json_get "$REPORT" .requests.completed >/dev/null 2>&1; then
        show_failure "$name"
        REPORT=
    fi
}

# ---------------------------------------------------------------------------
# MODE=compare: wrk vs soakd
# ---------------------------------------------------------------------------

# Results, keyed "tool:conns".
declare -A COMPLETED RPS CPU_US RSS RSS_PER

# record TOOL N COMPLETED SECONDS: fills the result arrays from the last run.
record() {
    local key=$1:$2
    COMPLETED[$key]=$3
    RPS[$key]=$(calc "$3 / $4")
    CPU_US[$key]=$(calc "$CPU_S * 1e6 / $3")
    RSS[$key]=$RSS_KIB
    RSS_PER[$key]=$(calc "$RSS_KIB / $2")
}

mode_compare() {
    local n wrk_line completed secs
    for n in $CONNS; do
        if [ "$NOFILE" != unlimited ] && [ "$NOFILE" -lt $((n + 100)) ]; then
            echo "WARNING: open-file limit $NOFILE is below $((n + 100)); $n connections will hit it" >&2
        fi

        section "wrk, $n connections, ${DURATION}s"
        wait_timewait
        timed "wrk-$n" wrk -t1 -c "$n" -d "${DURATION}s" --timeout "$WRK_TIMEOUT" --latency "$URL"
        cat "$WORK/wrk-$n.out"
        # "  123456 requests in 10.00s, 14.24MB read"
        wrk_line=$(grep ' requests in ' "$WORK/wrk-$n.out" || true)
        if [ "$RC" -eq 0 ] && [ -n "$wrk_line" ]; then
            completed=$(awk '{print $1}' <<<"$wrk_line")
            secs=$(awk '{sub(/s,?$/, "", $4); print $4}' <<<"$wrk_line")
            record wrk "$n" "$completed" "$secs"
        else
            show_failure "wrk-$n"
        fi

        section "soakd, $n connections, ${DURATION}s"
        if [ "$SOAKD_OK" = no ]; then
            echo "skipped: soakd did not build"
            continue
        fi
        soakd_run "soakd-$n" -c "$n" --ramp 100000 -t 1 -d "${DURATION}s"
        if [ -n "$REPORT" ]; then
            cat "$WORK/soakd-$n.out"
            completed=$(json_get "$REPORT" .requests.completed)
            secs=$(json_get "$REPORT" .duration_seconds)
            echo "report: completed=$completed duration=${secs}s" \
                "errors=$(python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["errors"]; print({k: v for k, v in e.items() if v})' "$REPORT" 2>/dev/null || echo '?')"
            record soakd "$n" "$completed" "$secs"
        fi
    done

    section "Results (CPU and RSS over the whole run, ramp included)"
    local fmt='%-6s %7s %12s %10s %12s %12s %12s\n' tool key
    # shellcheck disable=SC2059
    printf "$fmt" tool conns completed req/s cpu_us/req maxrss_KiB KiB/conn
    for n in $CONNS; do
        for tool in wrk soakd; do
            key=$tool:$n
            # shellcheck disable=SC2059
            printf "$fmt" "$tool" "$n" "${COMPLETED[$key]:-failed}" "${RPS[$key]:--}" \
                "${CPU_US[$key]:--}" "${RSS[$key]:--}" "${RSS_PER[$key]:--}"
        done
    done
    echo
    echo "soakd/wrk ratios (below 1 = soakd uses less):"
    for n in $CONNS; do
        if [ -n "${CPU_US[soakd:$n]:-}" ] && [ -n "${CPU_US[wrk:$n]:-}" ]; then
            printf '  %6s connections: CPU per request %s, RSS per connection %s\n' "$n" \
                "$(calc "${CPU_US[soakd:$n]} / ${CPU_US[wrk:$n]}")" \
                "$(calc "${RSS_PER[soakd:$n]} / ${RSS_PER[wrk:$n]}")"
        else
            printf '  %6s connections: n/a (a run failed)\n' "$n"
        fi
    done
}

# ---------------------------------------------------------------------------
# MODE=hold: soakd's CPU while holding 15,000 connections
# ---------------------------------------------------------------------------

mode_hold() {
    local n=${HOLD_CONNS:-15000} ramp=${HOLD_RAMP:-10000} pid t0 fds prev now t_prev t_now pct hz samples=0 sum=0 max=0 hwm=
    section "hold: soakd -c $n -i 60s -d 60s -t 1 --ramp $ramp (CPU 1)"
    hz=$(getconf CLK_TCK)
    wait_timewait
    taskset -c 1 "$SOAKD" run "$URL" -c "$n" -i 60s -d 60s -t 1 --ramp "$ramp" "${SOAKD_TLS[@]}" \
        --report "$WORK/hold.json" --metrics-listen off \
        </dev/null >"$WORK/hold.out" 2>"$WORK/hold.err" &
    pid=$!
    LOAD_PID=$pid
    # The ramp is over when soakd holds n descriptors (one per connection),
    # or when the count has stopped growing for 3 s (some connects failed).
    t0=$(date +%s.%N)
    local last=-1 last_change=$SECONDS
    while kill -0 "$pid" 2>/dev/null; do
        fds=$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
        [ "$fds" -lt "$n" ] || break
        if [ "$fds" -ne "$last" ]; then
            last=$fds
            last_change=$SECONDS
        elif [ $((SECONDS - last_change)) -ge 3 ]; then
            echo "WARNING: stuck at $fds descriptors (< $n); sampling anyway" >&2
            break
        fi
        sleep 0.2
    done
    echo "ramp done after $(calc "$(date +%s.%N) - $t0") s ($fds fds); sampling CPU every second:"
    prev=$(cpu_ticks "$pid") || prev=
    t_prev=$(date +%s.%N)
    while [ -n "$prev" ] && sleep 1 && now=$(cpu_ticks "$pid"); do
        t_now=$(date +%s.%N)
        hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo "$hwm")
        pct=$(calc "($now - $prev) / $hz / ($t_now - $t_prev) * 100")
        printf '  %5.1f%%' "$pct"
        samples=$((samples + 1))
        sum=$(calc "$sum + $pct")
        max=$(calc "$pct > $max ? $pct : $max")
        [ $((samples % 10)) -ne 0 ] || echo
        prev=$now
        t_prev=$t_now
    done
    echo
    RC=0
    wait "$pid" || RC=$?
    LOAD_PID=
    if [ "$RC" -ne 0 ] || [ ! -s "$WORK/hold.json" ]; then
        show_failure hold
    fi
    if [ "$samples" -gt 0 ]; then
        echo "soakd CPU after the ramp: mean $(calc "$sum / $samples")% of one core, max $max% ($samples samples)"
    fi
    echo "max RSS ${hwm:-?} KiB (${hwm:+$(calc "$hwm / $n")} KiB per connection, the process's base included)"
    if [ -s "$WORK/hold.json" ]; then
        echo "peak_open $(json_get "$WORK/hold.json" .connections.peak_open)," \
            "completed $(json_get "$WORK/hold.json" .requests.completed)"
    fi
}

# ---------------------------------------------------------------------------
# MODE=ramp and MODE=lag
# ---------------------------------------------------------------------------

mode_ramp() {
    section "ramp: soakd -c 15000 --ramp 10000 -d 5s -i 1s -t 1 (CPU 1)"
    soakd_run ramp -c 15000 --ramp 10000 -d 5s -i 1s -t 1
    [ -n "$REPORT" ] || exit 1
    echo "connections.ramp_seconds: $(json_get "$REPORT" .connections.ramp_seconds)" \
        "(ideal 1.5 at 10,000/s)"
    echo "connections.peak_open:    $(json_get "$REPORT" .connections.peak_open)"
    echo "CPU ${CPU_S}s, max RSS ${RSS_KIB} KiB"
}

mode_lag() {
    section "lag: soakd -c 15000 -i 1s -d 30s --ramp 10000 -t 1 (CPU 1)"
    soakd_run lag -c 15000 -i 1s -d 30s --ramp 10000 -t 1
    [ -n "$REPORT" ] || exit 1
    echo "schedule_lag_seconds.p99: $(json_get "$REPORT" .schedule_lag_seconds.p99)"
    echo "schedule_lag_seconds.max: $(json_get "$REPORT" .schedule_lag_seconds.max)"
    echo "requests.completed:       $(json_get "$REPORT" .requests.completed)"
    echo "CPU ${CPU_S}s, max RSS ${RSS_KIB} KiB"
}

# ---------------------------------------------------------------------------
# MODE=handshake: CPU per TLS handshake, full and resumed
# ---------------------------------------------------------------------------

mode_handshake() {
    local r hs resumed
    for r in off on; do
        section "handshake: soakd -c 50 --close -d ${DURATION}s --tls-resumption $r -t 1 (CPU 1)"
        soakd_run "hs-$r" -c 50 --close -d "${DURATION}s" -t 1 --tls-resumption "$r"
        [ -n "$REPORT" ] || continue
        hs=$(json_get "$REPORT" .tls.handshakes)
        resumed=$(json_get "$REPORT" .tls.resumed)
        echo "handshakes $hs, resumed $resumed ($(calc "$resumed * 100 / $hs")%)," \
            "CPU ${CPU_S}s: $(calc "$CPU_S * 1e6 / $hs") us per handshake (connect, request and close included)"
    done
}

"mode_$MODE"
