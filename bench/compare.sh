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
#   STATE=1 MODE=lag bench/compare.sh       # ... without and with --state (checkpoints every 5 s), interleaved,
#                                           #   LAG_RUNS pairs (default 2); p99 each, medians, ratio
#   MODE=handshake bench/compare.sh         # TLS: CPU per full and per resumed handshake, aws-lc-rs vs ring
#                                           #   (HS_RUNS, default 5), then 10,000 fresh connections vs oha
#                                           #   (FRESH_RUNS, default 3; OHA=/path/to/oha)
#   MODE=mix bench/compare.sh               # CPU per request: 3-request mix with a body check vs one URL
#   MODE=mix CALLGRIND=1 bench/compare.sh   # ... plus instructions per request under callgrind
#   MODE=scrape bench/compare.sh            # time to serve /metrics at 100 and 10,000 connections, closed loop
#   MODE=h2 bench/compare.sh                # HTTP/2 beside h2load: nginx h2c (TLS=1: h2 by ALPN); bench/mode_h2.sh
#   TLS=1 bench/compare.sh                  # any mode over HTTPS (nginx with ssl; wrk and soakd speak TLS)
#   SOAKD=/path/to/soakd bench/compare.sh   # use that binary, skip the build
#   BENCH_HOST=127.0.40.1 bench/compare.sh  # nginx on that loopback address (default 127.0.0.1)
#   MODE=ws bench/compare.sh                # WebSocket: 15,000 held sockets (memory, CPU vs HTTP/1.1),
#                                           #   echo CPU per message vs per request (bench/ws.sh)
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
compare | hold | ramp | lag | mix | scrape) ;;
# WebSocket: against soakd's own target, not nginx; a script of its own.
ws) exec "$ROOT/bench/ws.sh" ;;
h2) NGINX_HTTP2=1 ;;
handshake) TLS=1 ;;
*)
    echo "unknown MODE=$MODE (want compare, hold, ramp, lag, handshake, mix, scrape, ws or h2)" >&2
    exit 2
    ;;
esac

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
bench_init
need /usr/bin/time time
[ "$MODE" != compare ] || need wrk wrk
[ "$MODE" != h2 ] || need h2load nghttp2-client

build_soakd
if [ "$MODE" != compare ] && [ "$SOAKD_OK" = no ]; then
    echo "MODE=$MODE needs soakd" >&2
    exit 1
fi

section "nginx"
start_nginx
if [ "${TLS:-0}" = 1 ]; then
    URL=https://$BENCH_HOST:$PORT/
    # soakd verifies nginx's certificate (wrk does not verify at all).
    SOAKD_TLS=(--cacert "$WORK/nginx/cert.pem")
else
    URL=http://$BENCH_HOST:$PORT/
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

# lag_ms REPORT: the run's schedule lag p99 in milliseconds.
lag_ms() {
    calc "$(json_get "$1" .schedule_lag_seconds.p99) * 1000"
}

# lag_points REPORT EVERY: the timeline points' lag p99 (ms), the median of
# the points that hold a checkpoint (a multiple of EVERY seconds) beside
# the median of the others: where a checkpoint disturbs the schedule, its
# points stand out.
lag_points() {
    python3 - "$1" "$2" <<'PY'
import json, statistics, sys
r = json.load(open(sys.argv[1]))
every = float(sys.argv[2])
at, rest = [], []
for p in r["timeline"]["points"][2:]:  # after the ramp
    if p.get("lag_p99") is None:
        continue
    held = any(p["t"] <= k * every < p["t"] + p["seconds"] for k in range(1, 10000))
    (at if held else rest).append(p["lag_p99"] * 1e3)
med = lambda v: f"{statistics.median(v):.3f}" if v else "-"
print(f"points' lag p99 (ms), median: {med(at)} in the {len(at)} holding a checkpoint, {med(rest)} in the {len(rest)} others")
PY
}

mode_lag() {
    local args=(-c 15000 -i 1s -d 30s --ramp 10000 -t 1)
    if [ "${STATE:-0}" != 1 ]; then
        section "lag: soakd ${args[*]} (CPU 1)"
        soakd_run lag "${args[@]}"
        [ -n "$REPORT" ] || exit 1
        echo "schedule_lag_seconds.p99: $(json_get "$REPORT" .schedule_lag_seconds.p99)"
        echo "schedule_lag_seconds.max: $(json_get "$REPORT" .schedule_lag_seconds.max)"
        echo "requests.completed:       $(json_get "$REPORT" .requests.completed)"
        echo "CPU ${CPU_S}s, max RSS ${RSS_KIB} KiB"
        return
    fi
    # STATE=1: runs without and with --state (checkpointing every 5 s, six
    # times as often as the default), interleaved (LAG_RUNS pairs, default
    # 2) so that a change in the shared machine's load hits both alike, to
    # show that a checkpoint leaves the schedule alone. LAG_KEEP=DIR keeps
    # the reports.
    local runs=${LAG_RUNS:-2} i without=() with=()
    for i in $(seq "$runs"); do
        section "lag run $i/$runs without --state: soakd ${args[*]} (CPU 1); $(uptime | sed 's/.*load/load/')"
        soakd_run "lag-$i" "${args[@]}"
        [ -n "$REPORT" ] || exit 1
        without+=("$(lag_ms "$REPORT")")
        echo "schedule lag p99 ${without[-1]} ms, max $(calc "$(json_get "$REPORT" .schedule_lag_seconds.max) * 1000") ms; CPU ${CPU_S}s"
        lag_points "$REPORT" 5
        [ -z "${LAG_KEEP:-}" ] || cp "$REPORT" "$LAG_KEEP/"
        section "lag run $i/$runs with --state (checkpoint every 5s); $(uptime | sed 's/.*load/load/')"
        rm -f "$WORK/lag.state"
        SOAKD_STATE_DEBUG=1 soakd_run "lag-state-$i" "${args[@]}" --state "$WORK/lag.state" --checkpoint-interval 5s
        [ -n "$REPORT" ] || exit 1
        with+=("$(lag_ms "$REPORT")")
        echo "schedule lag p99 ${with[-1]} ms, max $(calc "$(json_get "$REPORT" .schedule_lag_seconds.max) * 1000") ms; CPU ${CPU_S}s"
        lag_points "$REPORT" 5
        grep 'checkpoint at' "$WORK/lag-state-$i.err" | sed 's/^/  /' || true
        echo "state file: $(stat -c %s "$WORK/lag.state") bytes"
        [ -z "${LAG_KEEP:-}" ] || cp "$REPORT" "$LAG_KEEP/"
    done
    section "schedule lag p99, ms ($runs runs each, interleaved)"
    echo "without --state: ${without[*]} (median $(median "${without[@]}"))"
    echo "with --state:    ${with[*]} (median $(median "${with[@]}"))"
    echo "ratio with/without (medians): $(calc "$(median "${with[@]}") / $(median "${without[@]}")")"
    echo "machine: $(uptime)"
}

# ---------------------------------------------------------------------------
# MODE=handshake: CPU per TLS handshake by crypto provider, and 10,000 fresh
# TLS connections side by side with oha
# ---------------------------------------------------------------------------

# median X...: the median of the numbers given (the mean of the middle two
# for an even count).
median() {
    [ "$#" -gt 0 ] || {
        echo -
        return 0
    }
    printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {
        if (NR == 0) { print "-"; exit }
        m = int((NR + 1) / 2); printf "%.2f\n", (NR % 2) ? v[m] : (v[m] + v[m + 1]) / 2 }'
}

# ring_soakd: the soakd built on ring (the default build is aws-lc-rs), in
# its own target directory so the two builds do not undo each other.
# SOAKD_RING=/path gives one instead. Sets SOAKD_RING (empty if none).
ring_soakd() {
    if [ -n "${SOAKD_RING:-}" ]; then
        [ -x "$SOAKD_RING" ] || SOAKD_RING=
        return 0
    fi
    section "cargo build --release --no-default-features --features ring"
    if cargo build --release --no-default-features --features ring --target-dir "$ROOT/target/ring"; then
        SOAKD_RING=$ROOT/target/ring/release/soakd
    else
        echo "WARNING: the ring build failed; only the default provider is measured" >&2
        SOAKD_RING=
    fi
}

mode_handshake() {
    local runs=${HS_RUNS:-5} fresh_runs=${FRESH_RUNS:-3} fresh_conns=${FRESH_CONNS:-10000}
    # 20 s, not the 8 s first tried: on the shared 2-core machine nginx
    # needed more than 8 s for 10,000 full handshakes and neither tool
    # completed a request; both get 30 s to connect.
    local fresh_secs=${FRESH_DURATION:-20}
    local i p r hs resumed us bin
    declare -A HS_US HS_SHARE BIN
    ring_soakd
    BIN[aws-lc-rs]=$SOAKD
    [ -z "$SOAKD_RING" ] || BIN[ring]=$SOAKD_RING
    local providers=(aws-lc-rs)
    [ -z "$SOAKD_RING" ] || providers+=(ring)

    # Providers and resumption alternate within each run, so a busy spell on
    # the machine lands on all of them rather than on one.
    for i in $(seq "$runs"); do
        for p in "${providers[@]}"; do
            for r in off on; do
                section "handshake run $i/$runs, $p: soakd -c 50 --close -d ${DURATION}s --tls-resumption $r -t 1"
                bin=$SOAKD
                SOAKD=${BIN[$p]}
                soakd_run "hs-$p-$r-$i" -c 50 --close -d "${DURATION}s" -t 1 --tls-resumption "$r"
                SOAKD=$bin
                [ -n "$REPORT" ] || continue
                hs=$(json_get "$REPORT" .tls.handshakes)
                resumed=$(json_get "$REPORT" .tls.resumed)
                us=$(calc "$CPU_S * 1e6 / $hs")
                HS_US[$p:$r]="${HS_US[$p:$r]:-} $us"
                HS_SHARE[$p:$r]="${HS_SHARE[$p:$r]:-} $(calc "$resumed * 100 / $hs")"
                echo "handshakes $hs, resumed $resumed, CPU ${CPU_S}s: $us us per handshake" \
                    "(connect, request and close included)"
            done
        done
    done

    # 10,000 fresh connections, closed loop: every connection's full
    # handshake falls inside the run, so handshakes dominate CPU per request.
    local oha_bin=${OHA:-oha} completed
    declare -A FRESH
    if ! command -v "$oha_bin" >/dev/null 2>&1; then
        echo "oha not found (OHA=/path/to/oha, or cargo install --root DIR oha): the fresh-connection row is soakd's alone" >&2
        oha_bin=
    fi
    for i in $(seq "$fresh_runs"); do
        if [ -n "$oha_bin" ]; then
            section "fresh run $i/$fresh_runs: oha -c $fresh_conns -z ${fresh_secs}s (rustls on aws-lc-rs)"
            wait_timewait
            # Both verify nginx's certificate against the same CA file.
            timed "oha-$i" "$oha_bin" -c "$fresh_conns" -z "${fresh_secs}s" --no-tui --output-format json \
                --connect-timeout 30s --cacert "$WORK/nginx/cert.pem" "$URL"
            completed=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["statusCodeDistribution"].get("200", 0))' \
                "$WORK/oha-$i.out" 2>/dev/null || echo 0)
            if [ "$RC" -eq 0 ] && [ "$completed" -gt 0 ]; then
                FRESH[oha]="${FRESH[oha]:-} $(calc "$CPU_S * 1e6 / $completed")"
                echo "oha: $completed responses 200, CPU ${CPU_S}s, $(calc "$CPU_S * 1e6 / $completed") us per request"
            else
                show_failure "oha-$i"
            fi
        fi
        section "fresh run $i/$fresh_runs: soakd -c $fresh_conns -d ${fresh_secs}s --ramp 100000 -t 1"
        soakd_run "fresh-$i" -c "$fresh_conns" --ramp 100000 -t 1 -d "${fresh_secs}s" --connect-timeout 30s
        [ -n "$REPORT" ] || continue
        completed=$(json_get "$REPORT" .requests.completed)
        FRESH[soakd]="${FRESH[soakd]:-} $(calc "$CPU_S * 1e6 / $completed")"
        echo "soakd: $completed completed," \
            "errors $(python3 -c 'import json,sys; print(sum(json.load(open(sys.argv[1]))["errors"].values()))' "$REPORT")," \
            "CPU ${CPU_S}s, $(calc "$CPU_S * 1e6 / $completed") us per request"
    done

    section "Results: CPU per handshake (us, median of $runs runs; connect, request and close included)"
    local fmt='%-10s %-10s %10s %12s  %s\n'
    # shellcheck disable=SC2059
    printf "$fmt" provider resumption median resumed_% "all runs"
    for p in "${providers[@]}"; do
        for r in off on; do
            # shellcheck disable=SC2059,SC2086
            printf "$fmt" "$p" "$r" "$(median ${HS_US[$p:$r]:-})" "$(median ${HS_SHARE[$p:$r]:-})" "${HS_US[$p:$r]:-}"
        done
    done
    section "Results: $fresh_conns fresh TLS connections, ${fresh_secs}s closed loop (us CPU per request, median of $fresh_runs)"
    for p in oha soakd; do
        # shellcheck disable=SC2086
        printf '%-6s %10s  %s\n' "$p" "$(median ${FRESH[$p]:-})" "${FRESH[$p]:-}"
    done
    if [ -n "${FRESH[oha]:-}" ] && [ -n "${FRESH[soakd]:-}" ]; then
        # shellcheck disable=SC2086
        echo "soakd / oha: $(calc "$(median ${FRESH[soakd]}) / $(median ${FRESH[oha]})")"
    fi
}

# ---------------------------------------------------------------------------
# MODE=mix: what a request mix with a body check costs per request
# ---------------------------------------------------------------------------

# mix_config FILE EXTRA: a config of 100 closed-loop connections on one
# thread, three requests (weights 5:3:2, every one answered "pong" by the
# bench's nginx) with a body check inherited by all, plus EXTRA lines for
# the globals.
mix_config() {
    cat >"$1" <<EOF
metrics_listen = "off"
threads = 1
$2

[[workload]]
name = "mix"
url = "$URL"
connections = 100
ramp = 100000
expect_body_contains = "pong"

[[workload.request]]
path = "/items?page=1"
weight = 5

[[workload.request]]
path = "/items/42"
weight = 3

[[workload.request]]
path = "/health"
weight = 2
EOF
}

# One single-URL run and one mix run per round, back to back, so both see
# the same machine; the ratio of each round is the figure (the machine may
# be shared: read the spread over rounds, not one run).
mode_mix() {
    local round rounds=${ROUNDS:-3} single mix ratios=() n
    if [ "${TLS:-0}" = 1 ]; then
        echo "MODE=mix runs over plain HTTP only" >&2
        exit 2
    fi
    for round in $(seq "$rounds"); do
        section "mix round $round: single URL, 100 connections, ${DURATION}s"
        soakd_run "single-$round" -c 100 --ramp 100000 -t 1 -d "${DURATION}s"
        [ -n "$REPORT" ] || exit 1
        n=$(json_get "$REPORT" .requests.completed)
        single=$(calc "$CPU_S * 1e6 / $n")
        echo "completed $n, CPU ${CPU_S}s: $single us per request"

        section "mix round $round: 3 requests + body check, 100 connections, ${DURATION}s"
        mix_config "$WORK/mix.toml" "duration = \"${DURATION}s\""
        wait_timewait
        timed "mix-$round" "$SOAKD" run --config "$WORK/mix.toml" --report "$WORK/mix-$round.json"
        if [ "$RC" -ne 0 ] || [ ! -s "$WORK/mix-$round.json" ]; then
            show_failure "mix-$round"
            exit 1
        fi
        n=$(json_get "$WORK/mix-$round.json" .requests.completed)
        mix=$(calc "$CPU_S * 1e6 / $n")
        echo "completed $n, CPU ${CPU_S}s: $mix us per request," \
            "body check failures $(json_get "$WORK/mix-$round.json" .checks.body)"
        ratios+=("$(calc "$mix / $single")")
        echo "round $round: mix / single CPU per request = ${ratios[-1]}"
    done
    echo
    echo "mix / single CPU per request, by round: ${ratios[*]} (target: at most 1.1)"

    if [ "${CALLGRIND:-0}" = 1 ]; then
        need valgrind valgrind
        # Instructions are not disturbed by other load on the machine. A
        # fixed count of requests on 20 connections; only the hot path
        # (engine/worker/io.rs and everything it calls: framing, checks,
        # histograms, the syscalls' user side) is counted, since the rest of
        # the process (flushes, timers) costs per second, and a process under
        # valgrind runs for a machine-dependent number of seconds.
        local ir
        section "callgrind: single URL, 20 connections, 20000 requests"
        wait_timewait
        valgrind --tool=callgrind --toggle-collect='*engine::worker::io::*' --callgrind-out-file="$WORK/cg-single.out" \
            "$SOAKD" run "$URL" -c 20 -t 1 -n 20000 --metrics-listen off \
            --report "$WORK/cg-single.json" >/dev/null 2>"$WORK/cg-single.err"
        ir=$(callgrind_total "$WORK/cg-single.out")
        single=$(calc "$ir / $(json_get "$WORK/cg-single.json" .requests.completed)")
        section "callgrind: mix, 20 connections, 20000 requests"
        mix_config "$WORK/cg-mix.toml" "requests = 20000"
        sed -i 's/^connections = 100$/connections = 20/' "$WORK/cg-mix.toml"
        wait_timewait
        valgrind --tool=callgrind --toggle-collect='*engine::worker::io::*' --callgrind-out-file="$WORK/cg-mix.out" \
            "$SOAKD" run --config "$WORK/cg-mix.toml" --report "$WORK/cg-mix.json" \
            >/dev/null 2>"$WORK/cg-mix.err"
        ir=$(callgrind_total "$WORK/cg-mix.out")
        mix=$(calc "$ir / $(json_get "$WORK/cg-mix.json" .requests.completed)")
        echo "hot-path instructions per request: single $single, mix $mix," \
            "ratio $(calc "$mix / $single")"
    fi
}

# ---------------------------------------------------------------------------
# MODE=scrape: how long a /metrics scrape takes while soakd is busy
# ---------------------------------------------------------------------------

# scrape_times ADDR N SCRAPES: waits (up to 60 s) until soakd's metrics at
# ADDR show N connections open, then times SCRAPES scrapes of /metrics
# (connect to last byte, 100 ms apart) and prints
# `median_ms X p90_ms Y max_ms Z bytes B`. Exits 1 when it never ramps.
scrape_times() {
    python3 - "$@" <<'PY'
import socket, sys, time
addr, want, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
host, port = addr.rsplit(":", 1)

def scrape():
    t = time.perf_counter()
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    took = time.perf_counter() - t
    raw = b"".join(chunks).decode("utf-8", "replace")
    if not raw.startswith("HTTP/1.1 200"):
        raise RuntimeError(raw[:200])
    return took, raw

def open_now(raw):
    return sum(float(line.rsplit(" ", 1)[1]) for line in raw.splitlines()
               if line.startswith("soakd_connections{") and 'state="open"' in line)

deadline = time.monotonic() + 60
while True:
    try:
        if open_now(scrape()[1]) >= want:
            break
    except (OSError, RuntimeError, ValueError, IndexError):
        pass
    if time.monotonic() > deadline:
        print(f"soakd never had {want} connections open", file=sys.stderr)
        sys.exit(1)
    time.sleep(0.2)
times, size = [], 0
for _ in range(count):
    took, raw = scrape()
    times.append(took * 1000)
    size = len(raw)
    time.sleep(0.1)
times.sort()
print(f"median_ms {times[len(times) // 2]:.2f} p90_ms {times[len(times) * 9 // 10]:.2f} "
      f"max_ms {times[-1]:.2f} bytes {size}")
PY
}

# For each N in $SCRAPE_CONNS (default 100 10000): soakd holds N closed-loop
# connections on one thread (CPU 1, as busy as nginx lets it be), and once
# all are open $SCRAPES scrapes (default 50) are timed. The figure is the
# median at the largest N, and its ratio to the smallest N in the same run.
mode_scrape() {
    local n metrics pid line first_n="" first_median="" median
    for n in ${SCRAPE_CONNS:-100 10000}; do
        section "scrape: soakd -c $n --ramp 10000 -t 1 (CPU 1), ${SCRAPES:-50} scrapes once all are open"
        metrics=$BENCH_HOST:$(free_port)
        wait_timewait
        # shellcheck disable=SC2086 # SOAKD_ARGS is a list of flags
        taskset -c 1 "$SOAKD" run "$URL" -c "$n" --ramp 10000 -t 1 -d 120s "${SOAKD_TLS[@]}" $SOAKD_ARGS \
            --metrics-listen "$metrics" </dev/null >"$WORK/scrape-$n.out" 2>"$WORK/scrape-$n.err" &
        pid=$!
        LOAD_PID=$pid
        line=$(scrape_times "$metrics" "$n" "${SCRAPES:-50}") || line=
        kill -TERM "$pid" 2>/dev/null || true
        RC=0
        wait "$pid" || RC=$?
        LOAD_PID=
        if [ -z "$line" ]; then
            show_failure "scrape-$n"
            exit 1
        fi
        echo "$n connections: $line"
        median=$(awk '{print $2}' <<<"$line")
        if [ -z "$first_median" ]; then
            first_n=$n
            first_median=$median
        fi
    done
    echo
    echo "median scrape at $n connections: $median ms" \
        "($(calc "$median / $first_median")x the median at $first_n connections, same run)"
}

# callgrind_total FILE: the total instruction count (Ir) of a callgrind run.
callgrind_total() {
    awk '/^(summary|totals):/ {print $2; exit}' "$1"
}

# shellcheck source=bench/mode_h2.sh
. "$ROOT/bench/mode_h2.sh"

"mode_$MODE"
