#!/usr/bin/env bash
# What a request costs soakd in system calls, and the CPU that follows,
# for one or more builds side by side in the same run (issue 40:
# "one write per wakeup", "a paced request costs at most three system
# calls"; bench/README.md, "bench/syscalls.sh"). The built-in target
# serves (`soakd target --grpc`, which speaks HTTP/1.1, h2c and gRPC) on
# CPU 0; every client runs on CPU 1.
#
# PARTS picks among (default all):
#   writes  each build under `strace -c -f` for WRITES_SECS (10) s, closed
#           loop, -c 100, on each load: grpc (--call soakd.test.v1.Echo/
#           Unary --streams 10), h2 (--http 2 --streams 10), h1p10
#           (--pipeline 10), ws10 (ws://.../ws --ws-message soak
#           --pipeline 10); sends (sendto + write + writev + sendmsg),
#           receives and waits per request, the soakd process only.
#   cpu     ROUNDS (2) rounds, interleaved, untraced: h2load -c 100 -m 10
#           -t 1 posting the same gRPC message, then each build; the same
#           for plain HTTP/2 (GET /). CPU per request, and each build's
#           ratio to h2load's in the same round.
#   paced   one process (-t 1) holding PACED_CONNS (15000) connections at
#           -i PACED_INTERVAL (60s); once all are open: `strace -c` on every
#           thread for PACED_STRACE_SECS (12) s, calls per request sent
#           meanwhile (its soakd_requests_sent_total, before and after);
#           then its idle CPU over PACED_CPU_SECS (20) s, untraced, beside
#           bench/floor/paced_floor.c in `timer` mode (one periodic timer
#           armed once, at the same pace, no sockets).
#   lag     the same connections at -i 1s (15,000 requests a second) for
#           LAG_SECS (20) s, 2 rounds: schedule lag p99 and max, CPU per
#           request; then one run of 10 s under `perf stat` counting
#           waits and timer calls per request (strace would change the
#           timing it counts).
#   floor   paced_floor in `http` mode (the paced connections and pace,
#           one send per expiry, one receive per answer, to a second
#           target) under strace -c: a paced request with nothing else
#           done.
#
#   bench/syscalls.sh /tmp/soakd-before target/release/soakd
#   PARTS="writes cpu" WRITES_SECS=5 bench/syscalls.sh target/release/soakd
#
# Addresses: the targets on 127.0.40.1, soakd's connections from a new
# 127.0.40.x per run (no run waits for another's TIME_WAIT). SERVER_SOAKD
# picks the binary that serves (default: the first build given), so every
# client meets the same server. The paced parts need an open-file limit
# above PACED_CONNS + 100 per process.
set -euo pipefail
[ $# -ge 1 ] || {
    echo "usage: bench/syscalls.sh SOAKD..." >&2
    exit 2
}
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
PARTS=${PARTS:-writes cpu paced lag floor}
ROUNDS=${ROUNDS:-2}
WRITES_SECS=${WRITES_SECS:-10}
PACED_CONNS=${PACED_CONNS:-15000}
PACED_INTERVAL=${PACED_INTERVAL:-60}
PACED_STRACE_SECS=${PACED_STRACE_SECS:-12}
PACED_CPU_SECS=${PACED_CPU_SECS:-20}
LAG_SECS=${LAG_SECS:-20}
METHOD=soakd.test.v1.Echo/Unary
BUILDS=("$@")

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
bench_init
need /usr/bin/time time
need h2load nghttp2-client
need strace strace
need perf linux-perf
need cc gcc
part() { [[ " $PARTS " == *" $1 "* ]]; }

SOAKD=${SERVER_SOAKD:-${BUILDS[0]}}
TARGET_LISTEN=127.0.40.1:0 start_target target --grpc
taskset -pc 0 "$TARGET_PID" >/dev/null
echo "server: $SOAKD target --grpc on $ADDR (CPU 0); clients on CPU 1; $(uptime)"
# The message both clients send (as bench/grpc.sh): not compressed, 6
# bytes, EchoRequest{text: "soak"}.
printf '\x00\x00\x00\x00\x06\x0a\x04soak' >"$WORK/message.bin"

SRC=1
# next_src: a fresh source address for the next soakd run (in SRC_ADDR).
next_src() {
    SRC=$((SRC + 1))
    [ "$SRC" -lt 250 ] || SRC=2
    SRC_ADDR=127.0.40.$SRC
}

# calls FILE NAME...: the summed counts of the named calls in strace -c's
# table (the calls column is the 4th, with or without an errors column).
calls() {
    local file=$1
    shift
    awk -v names=" $* " 'index(names, " " $NF " ") && $4 ~ /^[0-9]+$/ { n += $4 } END { print n + 0 }' "$file"
}

# ---------------------------------------------------------------------------
# writes, cpu: closed loop at 100 connections
# ---------------------------------------------------------------------------

# load_args LOAD: soakd's URL and flags for one of grpc, h2, h1p10, ws10.
load_args() {
    case $1 in
    grpc) echo "grpc://$ADDR --call $METHOD --proto tests/proto/echo.proto --data {\"text\":\"soak\"} --streams 10" ;;
    h2) echo "http://$ADDR/ --http 2 --streams 10" ;;
    h1p10) echo "http://$ADDR/ --http 1.1 --pipeline 10" ;;
    ws10) echo "ws://$ADDR/ws --ws-message soak --pipeline 10" ;;
    esac
}

# closed_run NAME BUILD LOAD [PREFIX...]: one closed-loop run at -c 100 on
# CPU 1 (under PREFIX, e.g. strace); sets DONE (requests completed) and
# CPU_S (user + system seconds).
closed_run() {
    local name=$1 build=$2 load=$3 args u s errs
    shift 3
    read -r -a args <<<"$(load_args "$load")"
    next_src
    RC=0
    /usr/bin/time -o "$WORK/$name.time" -f '%U %S' taskset -c 1 "$@" "$build" run "${args[@]}" \
        -c 100 -t 1 -d "${WRITES_SECS}s" --ramp 100000 --source-addr "$SRC_ADDR" \
        --metrics-listen off --report "$WORK/$name.json" </dev/null >"$WORK/$name.out" 2>"$WORK/$name.err" || RC=$?
    [ "$RC" = 0 ] || {
        tail -20 "$WORK/$name.err" >&2
        exit 1
    }
    DONE=$(json_get "$WORK/$name.json" .requests.completed)
    read -r u s < <(tail -n 1 "$WORK/$name.time")
    CPU_S=$(calc "$u + $s")
    errs=$(python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["errors"]; print({k: v for k, v in e.items() if v})' \
        "$WORK/$name.json")
    [ "$errs" = "{}" ] || echo "  $name: errors $errs"
}

# h2load_run NAME LOAD: h2load -c 100 -m 10 on CPU 1; sets DONE, CPU_S.
h2load_run() {
    local name=$1 load=$2 extra=() url=http://$ADDR/ u s
    if [ "$load" = grpc ]; then
        extra=(-H 'content-type: application/grpc' -H 'te: trailers' -d "$WORK/message.bin")
        url=http://$ADDR/$METHOD
    fi
    RC=0
    /usr/bin/time -o "$WORK/$name.time" -f '%U %S' taskset -c 1 h2load -c 100 -m 10 -t 1 \
        -D "$WRITES_SECS" "${extra[@]}" "$url" </dev/null >"$WORK/$name.out" 2>"$WORK/$name.err" || RC=$?
    DONE=$(awk '/^requests:/ {print $8}' "$WORK/$name.out")
    [ "$RC" = 0 ] && [ -n "$DONE" ] && [ "$DONE" != 0 ] || {
        cat "$WORK/$name.out" "$WORK/$name.err" >&2
        exit 1
    }
    read -r u s < <(tail -n 1 "$WORK/$name.time")
    CPU_S=$(calc "$u + $s")
}

declare -a RESULTS=()
# result LINE: printed now and again at the end.
result() {
    echo "$1"
    RESULTS+=("$1")
}

if part writes; then
    section "writes: system calls per request under strace -c -f (${WRITES_SECS} s, -c 100, closed loop)"
    fmt='%-28s %-6s %9s %8s %8s %8s'
    # shellcheck disable=SC2059
    result "$(printf "$fmt" build load requests sends/rq recvs/rq waits/rq)"
    for load in grpc h2 h1p10 ws10; do
        for b in "${!BUILDS[@]}"; do
            name=strace-$b-$load
            closed_run "$name" "${BUILDS[$b]}" "$load" strace -c -f -o "$WORK/$name.strace"
            # shellcheck disable=SC2059
            result "$(printf "$fmt" "${BUILDS[$b]}" "$load" "$DONE" \
                "$(calc "$(calls "$WORK/$name.strace" sendto write writev sendmsg) / $DONE")" \
                "$(calc "$(calls "$WORK/$name.strace" recvfrom read readv recvmsg) / $DONE")" \
                "$(calc "$(calls "$WORK/$name.strace" epoll_wait epoll_pwait epoll_pwait2) / $DONE")")"
        done
    done
fi

if part cpu; then
    section "cpu: CPU per request beside h2load (${WRITES_SECS} s, -c 100, 10 streams, $ROUNDS rounds)"
    fmt='%-6s %-5s %-28s %10s %10s %8s'
    # shellcheck disable=SC2059
    result "$(printf "$fmt" round load client requests cpu_us/rq /h2load)"
    for r in $(seq "$ROUNDS"); do
        for load in grpc h2; do
            h2load_run "h2load-$r-$load" "$load"
            base=$(calc "$CPU_S * 1e6 / $DONE")
            # shellcheck disable=SC2059
            result "$(printf "$fmt" "$r" "$load" h2load "$DONE" "$base" 1.00)"
            for b in "${!BUILDS[@]}"; do
                closed_run "cpu-$r-$b-$load" "${BUILDS[$b]}" "$load"
                us=$(calc "$CPU_S * 1e6 / $DONE")
                # shellcheck disable=SC2059
                result "$(printf "$fmt" "$r" "$load" "${BUILDS[$b]}" "$DONE" "$us" "$(calc "$us / $base")")"
            done
        done
    done
fi

# ---------------------------------------------------------------------------
# paced, lag, floor: PACED_CONNS held connections
# ---------------------------------------------------------------------------

if part paced || part lag || part floor; then
    [ "$NOFILE" -gt $((PACED_CONNS + 100)) ] || {
        echo "open-file limit $NOFILE: too low for $PACED_CONNS connections" >&2
        exit 1
    }
    cc -O2 -o "$WORK/paced_floor" "$ROOT/bench/floor/paced_floor.c"
fi

# metric METRICS AWK-PATTERN: the sum of the series of soakd's /metrics
# at METRICS that match.
metric() {
    curl -s "http://$1/metrics" | awk "$2"' {n += $NF} END {printf "%d\n", n}'
}

if part paced; then
    fmt='%-28s %8s %7s %7s %7s %7s %7s %13s'
    # shellcheck disable=SC2059
    result "$(printf "$fmt" build requests calls sends recvs waits timers "cpu%/floor%")"
    for b in "${!BUILDS[@]}"; do
        build=${BUILDS[$b]}
        section "paced: $build -c $PACED_CONNS -i ${PACED_INTERVAL}s -t 1"
        next_src
        metrics=127.0.40.1:$(free_port)
        taskset -c 1 "$build" run "http://$ADDR/" -c "$PACED_CONNS" -i "${PACED_INTERVAL}s" -t 1 --ramp 5000 \
            -d 600s --connect-timeout 30s --source-addr "$SRC_ADDR" --metrics-listen "$metrics" \
            >"$WORK/paced-$b.out" 2>"$WORK/paced-$b.err" &
        pid=$!
        PIDS+=("$pid")
        for _ in $(seq 600); do
            n=$(metric "$metrics" '/^soakd_connections[{].*state="open"/' 2>/dev/null) || n=0
            [ "${n:-0}" -ge "$PACED_CONNS" ] && break
            sleep 0.1
        done
        echo "open: $n"
        # The connect burst's own events pass first.
        sleep 3
        s0=$(metric "$metrics" '/^soakd_requests_sent_total/')
        args=()
        for t in /proc/"$pid"/task/*; do args+=(-p "${t##*/}"); done
        timeout -s INT "$PACED_STRACE_SECS" strace -c -o "$WORK/paced-$b.strace" "${args[@]}" 2>/dev/null || true
        s1=$(metric "$metrics" '/^soakd_requests_sent_total/')
        rq=$((s1 - s0))
        f=$WORK/paced-$b.strace
        head -8 "$f"

        # Idle CPU, untraced, beside the timer floor at the same pace.
        taskset -c 1 "$WORK/paced_floor" timer 127.0.40.1 1 "$PACED_CONNS" "$PACED_INTERVAL" "$PACED_CPU_SECS" \
            >"$WORK/floor-timer-$b.out" &
        floor=$!
        t0=$(cpu_ticks "$pid")
        sleep "$PACED_CPU_SECS"
        t1=$(cpu_ticks "$pid")
        wait "$floor"
        read -r _ _ fu fs <"$WORK/floor-timer-$b.out"
        kill -INT "$pid"
        wait "$pid" || true
        # shellcheck disable=SC2059
        result "$(printf "$fmt" "$build" "$rq" "$(calc "$(awk '$NF == "total" {print $4}' "$f") / $rq")" \
            "$(calc "$(calls "$f" sendto write writev sendmsg) / $rq")" \
            "$(calc "$(calls "$f" recvfrom read readv recvmsg) / $rq")" \
            "$(calc "$(calls "$f" epoll_wait epoll_pwait epoll_pwait2) / $rq")" \
            "$(calc "$(calls "$f" timerfd_settime) / $rq")" \
            "$(calc "($t1 - $t0) * 100 / $(getconf CLK_TCK) / $PACED_CPU_SECS")%/$(calc "($fu + $fs) * 100 / $PACED_CPU_SECS")%")"
    done
fi

if part lag; then
    fmt='%-28s %-5s %9s %9s %9s %10s'
    # shellcheck disable=SC2059
    result "$(printf "$fmt" "build (-i 1s)" round completed lag_p99 lag_max cpu_us/rq)"
    lag_args() {
        echo "http://$ADDR/ -c $PACED_CONNS -i 1s -t 1 --ramp 10000 --connect-timeout 30s --metrics-listen off"
    }
    for r in 1 2; do
        for b in "${!BUILDS[@]}"; do
            section "lag round $r: ${BUILDS[$b]} -c $PACED_CONNS -i 1s -t 1 -d ${LAG_SECS}s"
            next_src
            rep=$WORK/lag-$r-$b.json
            read -r -a args <<<"$(lag_args)"
            /usr/bin/time -o "$WORK/lag-$r-$b.time" -f '%U %S' taskset -c 1 "${BUILDS[$b]}" run "${args[@]}" \
                -d "${LAG_SECS}s" --source-addr "$SRC_ADDR" --report "$rep" >/dev/null 2>"$WORK/lag-$r-$b.err" || {
                tail -5 "$WORK/lag-$r-$b.err"
                exit 1
            }
            n=$(json_get "$rep" .requests.completed)
            read -r u s <"$WORK/lag-$r-$b.time"
            # shellcheck disable=SC2059
            result "$(printf "$fmt" "${BUILDS[$b]}" "$r" "$n" \
                "$(calc "$(json_get "$rep" .schedule_lag_seconds.p99) * 1000")" \
                "$(calc "$(json_get "$rep" .schedule_lag_seconds.max) * 1000")" "$(calc "($u + $s) * 1e6 / $n")")"
        done
    done
    for b in "${!BUILDS[@]}"; do
        next_src
        read -r -a args <<<"$(lag_args)"
        taskset -c 1 perf stat -x, -o "$WORK/lag-perf-$b.txt" \
            -e 'syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_pwait2,syscalls:sys_enter_timerfd_settime' \
            "${BUILDS[$b]}" run "${args[@]}" -d 10s --source-addr "$SRC_ADDR" --report "$WORK/lag-perf-$b.json" \
            >/dev/null 2>&1
        n=$(json_get "$WORK/lag-perf-$b.json" .requests.completed)
        waits=$(awk -F, '/epoll_wait|epoll_pwait2/ {n += $1} END {print n + 0}' "$WORK/lag-perf-$b.txt")
        timers=$(awk -F, '/timerfd_settime/ {n += $1} END {print n + 0}' "$WORK/lag-perf-$b.txt")
        result "$(printf '%-28s -i 1s, perf stat, 10 s: waits %s, timer calls %s per request' "${BUILDS[$b]}" \
            "$(calc "$waits / $n")" "$(calc "$timers / $n")")"
    done
fi

if part floor; then
    # Its own target: one target holds one set of PACED_CONNS connections.
    TARGET_LISTEN=127.0.40.1:0 start_target floor-target
    taskset -pc 0 "$TARGET_PID" >/dev/null
    secs=$((PACED_STRACE_SECS + 10))
    section "floor: paced_floor http -c $PACED_CONNS at ${PACED_INTERVAL}s for $secs s, strace -c"
    taskset -c 1 strace -c -o "$WORK/floor.strace" "$WORK/paced_floor" http "${ADDR%:*}" "${ADDR##*:}" \
        "$PACED_CONNS" "$PACED_INTERVAL" "$secs" >"$WORK/floor-http.out"
    read -r _ rq _ _ <"$WORK/floor-http.out"
    f=$WORK/floor.strace
    head -10 "$f"
    # The connects (one each) are set-up, not the paced requests'.
    setup=$(calls "$f" socket connect setsockopt epoll_ctl epoll_create1 timerfd_create timerfd_settime)
    result "$(printf '%-28s %8s %7s %7s %7s %7s %7s (timer reads)' "paced_floor http" "$rq" \
        "$(calc "($(awk '$NF == "total" {print $4}' "$f") - $setup) / $rq")" \
        "$(calc "$(calls "$f" sendto) / $rq")" "$(calc "$(calls "$f" recvfrom) / $rq")" \
        "$(calc "$(calls "$f" epoll_wait) / $rq")" "$(calc "$(calls "$f" read) / $rq")")"
fi

section "Results ($(uptime | sed 's/.*load/load/'))"
printf '%s\n' "${RESULTS[@]}"
