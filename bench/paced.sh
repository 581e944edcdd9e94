#!/usr/bin/env bash
# What a paced request costs soakd in system calls, and what holding
# paced connections costs it in CPU, beside a C floor in the same run
# (issue 40, "a paced request costs at most three system calls";
# bench/README.md, "bench/paced.sh").
#
# For each build given: one process (-t 1, on CPU 1) holds PACED_CONNS
# (15000) connections to the built-in target (HTTP/1.1, CPU 0), each
# sending one request every PACED_INTERVAL (60s). Once every connection is
# open:
#   1. syscalls: `strace -c` on every thread for PACED_STRACE_SECS (12) s;
#      the calls of each kind per request sent meanwhile (soakd's
#      soakd_requests_sent_total, read from its /metrics before and after).
#   2. idle CPU: soakd's utime + stime over PACED_CPU_SECS (20) s, untraced,
#      beside bench/floor/paced_floor.c in `timer` mode (one periodic timer
#      armed once, at the same pace, no sockets) over the same seconds.
# The table's columns are calls per request: all, sends, receives, waits
# (epoll_wait and kin) and timer calls (timerfd_settime; for the floor,
# its reads of the timer's count).
#   3. lag: the same connections at one request a second (-i 1s, 15,000
#      requests a second), LAG_SECS (20) s: the report's schedule lag p99
#      and max (how late requests went out), CPU per request, and the
#      loop's wake-ups per request (strace -c -f, a second run): the
#      wait ends to the microsecond, so serving the requests due in each
#      100 us tick together must not make them later.
# Then the floor in `http` mode (the same connections and pace to a
# second target, one send per expiry, one recv per answer) under strace -c
# for the same seconds: the system calls of a paced request with nothing
# else done.
#
#   bench/paced.sh /tmp/soakd-before target/release/soakd
#   PACED_CONNS=5000 PACED_STRACE_SECS=6 bench/paced.sh target/release/soakd
#
# Addresses: the targets on 127.0.40.1, soakd's connections from a new
# 127.0.40.x per run (no run waits for another's TIME_WAIT), the floor's
# from 127.0.40.1. Needs an open-file limit above PACED_CONNS + 100 for
# each process (each target holds one set of connections).
set -euo pipefail
[ $# -ge 1 ] || {
    echo "usage: bench/paced.sh SOAKD..." >&2
    exit 2
}
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
PACED_CONNS=${PACED_CONNS:-15000}
PACED_INTERVAL=${PACED_INTERVAL:-60}
PACED_STRACE_SECS=${PACED_STRACE_SECS:-12}
PACED_CPU_SECS=${PACED_CPU_SECS:-20}
LAG_SECS=${LAG_SECS:-20}
PARTS=${PARTS:-paced lag floor}
BUILDS=("$@")
BUILD_IDX=("${!BUILDS[@]}")

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
bench_init
need strace strace
need cc gcc
[ "$NOFILE" -gt $((PACED_CONNS + 100)) ] || {
    echo "open-file limit $NOFILE: too low for $PACED_CONNS connections" >&2
    exit 1
}
cc -O2 -o "$WORK/paced_floor" "$ROOT/bench/floor/paced_floor.c"

SOAKD=${SERVER_SOAKD:-${BUILDS[0]}}
TARGET_LISTEN=127.0.40.1:0 start_target target
taskset -pc 0 "$TARGET_PID" >/dev/null
URL=http://$ADDR/
TARGET_LISTEN=127.0.40.1:0 start_target floor-target
taskset -pc 0 "$TARGET_PID" >/dev/null
FLOOR_ADDR=$ADDR
echo "targets: $URL for soakd, $FLOOR_ADDR for the floor (CPU 0); clients on CPU 1"

# sent METRICS: soakd_requests_sent_total, summed over its series.
sent() {
    curl -s "http://$1/metrics" | awk '/^soakd_requests_sent_total/ {n += $NF} END {printf "%d\n", n}'
}
# open_conns METRICS: the connections soakd holds open.
open_conns() {
    curl -s "http://$1/metrics" | awk '/^soakd_connections[{ ]/ {n += $NF} END {printf "%d\n", n}'
}

# strace_tids PID SECS OUT: strace -c over every thread of PID for SECS.
strace_tids() {
    local args=() t
    for t in /proc/"$1"/task/*; do args+=(-p "${t##*/}"); done
    timeout -s INT "$2" strace -c -o "$3" "${args[@]}" 2>/dev/null || true
}

# calls FILE NAME...: the summed counts of the named calls in strace -c's
# table.
calls() {
    local file=$1
    shift
    awk -v names=" $* " 'index(names, " " $NF " ") && $4 ~ /^[0-9]+$/ { n += $4 } END { print n + 0 }' "$file"
}

fmt='%-28s %8s %7s %7s %7s %7s %7s %7s\n'
declare -a ROWS=() LAGS=()
src=10
[[ " $PARTS " == *" paced "* ]] || BUILD_IDX=()
for b in ${BUILD_IDX[@]+"${BUILD_IDX[@]}"}; do
    build=${BUILDS[$b]}
    section "$build: -c $PACED_CONNS -i ${PACED_INTERVAL}s -t 1"
    src=$((src + 1))
    metrics=127.0.40.1:$(free_port)
    taskset -c 1 "$build" run "$URL" -c "$PACED_CONNS" -i "${PACED_INTERVAL}s" -t 1 --ramp 5000 \
        -d 600s --connect-timeout 30s --source-addr "127.0.40.$src" --metrics-listen "$metrics" \
        >"$WORK/soakd-$b.out" 2>"$WORK/soakd-$b.err" &
    pid=$!
    PIDS+=("$pid")
    for _ in $(seq 600); do
        n=$(open_conns "$metrics" 2>/dev/null) || n=0
        [ "${n:-0}" -ge "$PACED_CONNS" ] && break
        sleep 0.1
    done
    echo "open: $(open_conns "$metrics")"
    # A few seconds for the connect burst's own events to pass.
    sleep 3

    s0=$(sent "$metrics")
    strace_tids "$pid" "$PACED_STRACE_SECS" "$WORK/strace-$b.txt"
    s1=$(sent "$metrics")
    rq=$((s1 - s0))
    total=$(awk '$NF == "total" {print $4}' "$WORK/strace-$b.txt")
    sends=$(calls "$WORK/strace-$b.txt" sendto write writev sendmsg)
    recvs=$(calls "$WORK/strace-$b.txt" recvfrom read readv recvmsg)
    waits=$(calls "$WORK/strace-$b.txt" epoll_wait epoll_pwait epoll_pwait2)
    timers=$(calls "$WORK/strace-$b.txt" timerfd_settime)
    echo "strace ${PACED_STRACE_SECS} s: $rq requests sent; calls: total $total, sends $sends, receives $recvs," \
        "waits $waits, timerfd_settime $timers"
    head -12 "$WORK/strace-$b.txt"

    # Idle CPU, untraced, beside the timer floor at the same pace.
    "$WORK/paced_floor" timer 127.0.40.1 1 "$PACED_CONNS" "$PACED_INTERVAL" "$PACED_CPU_SECS" \
        >"$WORK/floor-timer-$b.out" &
    floor=$!
    taskset -pc 1 "$floor" >/dev/null
    t0=$(cpu_ticks "$pid")
    sleep "$PACED_CPU_SECS"
    t1=$(cpu_ticks "$pid")
    wait "$floor"
    read -r _ fticks fu fs <"$WORK/floor-timer-$b.out"
    hz=$(getconf CLK_TCK)
    cpu_pct=$(calc "($t1 - $t0) * 100 / $hz / $PACED_CPU_SECS")
    floor_pct=$(calc "($fu + $fs) * 100 / $PACED_CPU_SECS")
    echo "idle CPU over $PACED_CPU_SECS s: soakd $cpu_pct% of a core; timer floor $floor_pct% ($fticks wake-ups)"
    kill -INT "$pid"
    wait "$pid" || true
    ROWS+=("$(printf "$fmt" "$build" "$rq" "$(calc "$total / $rq")" "$(calc "$sends / $rq")" \
        "$(calc "$recvs / $rq")" "$(calc "$waits / $rq")" "$(calc "$timers / $rq")" "$cpu_pct%/$floor_pct%")")
done

if [[ " $PARTS " == *" lag "* ]]; then
    lfmt='%-28s %9s %10s %10s %10s %9s\n'
    for round in 1 2; do
        for b in "${!BUILDS[@]}"; do
            build=${BUILDS[$b]}
            section "lag round $round: $build -c $PACED_CONNS -i 1s -t 1 -d ${LAG_SECS}s"
            src=$((src + 1))
            args=(run "$URL" -c "$PACED_CONNS" -i 1s -t 1 --ramp 10000 -d "${LAG_SECS}s" --connect-timeout 30s
                --source-addr "127.0.40.$src" --metrics-listen off --report "$WORK/lag-$round-$b.json")
            /usr/bin/time -o "$WORK/lag-$round-$b.time" -f '%U %S' taskset -c 1 "$build" "${args[@]}" \
                >/dev/null 2>"$WORK/lag-$round-$b.err" || { tail -5 "$WORK/lag-$round-$b.err"; exit 1; }
            rep=$WORK/lag-$round-$b.json
            done_=$(json_get "$rep" .requests.completed)
            read -r u s <"$WORK/lag-$round-$b.time"
            row=$(printf "$lfmt" "$build" "$done_" "$(calc "$(json_get "$rep" .schedule_lag_seconds.p99) * 1000")" \
                "$(calc "$(json_get "$rep" .schedule_lag_seconds.max) * 1000")" \
                "$(calc "($u + $s) * 1e6 / $done_")" "r$round")
            echo "$row"
            LAGS+=("$row")
        done
    done
    # Wake-ups per request at this rate, one traced run per build.
    for b in "${!BUILDS[@]}"; do
        src=$((src + 1))
        taskset -c 1 strace -c -f -o "$WORK/lag-strace-$b.txt" "${BUILDS[$b]}" run "$URL" -c "$PACED_CONNS" -i 1s \
            -t 1 --ramp 10000 -d 10s --connect-timeout 30s --source-addr "127.0.40.$src" --metrics-listen off \
            --report "$WORK/lag-strace-$b.json" >/dev/null 2>&1
        n=$(json_get "$WORK/lag-strace-$b.json" .requests.completed)
        LAGS+=("$(printf '%-28s waits/request under strace, 10 s: %s (timerfd_settime %s)' "${BUILDS[$b]}" \
            "$(calc "$(calls "$WORK/lag-strace-$b.txt" epoll_wait epoll_pwait epoll_pwait2) / $n")" \
            "$(calc "$(calls "$WORK/lag-strace-$b.txt" timerfd_settime) / $n")")")
    done
fi

[[ " $PARTS " == *" floor "* ]] || {
    section "Results"
    printf '%s\n' ${ROWS[@]+"${ROWS[@]}"} ${LAGS[@]+"${LAGS[@]}"}
    exit 0
}
section "floor: paced_floor http, -c $PACED_CONNS at ${PACED_INTERVAL}s, strace -c"
secs=$((PACED_STRACE_SECS + 10))
taskset -c 1 strace -c -o "$WORK/strace-floor.txt" "$WORK/paced_floor" http "${FLOOR_ADDR%:*}" "${FLOOR_ADDR##*:}" \
    "$PACED_CONNS" "$PACED_INTERVAL" "$secs" >"$WORK/floor-http.out"
read -r _ frq _ _ <"$WORK/floor-http.out"
head -10 "$WORK/strace-floor.txt"
# The floor's connects (one each) are set-up, not the paced requests'.
ftotal=$(awk '$NF == "total" {print $4}' "$WORK/strace-floor.txt")
fset=$(calls "$WORK/strace-floor.txt" socket connect setsockopt epoll_ctl timerfd_create timerfd_settime)
ROWS+=("$(printf "$fmt" "paced_floor http ($secs s)" "$frq" "$(calc "($ftotal - $fset) / $frq")" \
    "$(calc "$(calls "$WORK/strace-floor.txt" sendto) / $frq")" \
    "$(calc "$(calls "$WORK/strace-floor.txt" recvfrom) / $frq")" \
    "$(calc "$(calls "$WORK/strace-floor.txt" epoll_wait) / $frq")" \
    "$(calc "$(calls "$WORK/strace-floor.txt" read) / $frq")" -)")

section "Results: calls per paced request; idle CPU (soakd / timer floor)"
# shellcheck disable=SC2059
printf "$fmt" build requests calls sends recvs waits timers cpu
printf '%s\n' "${ROWS[@]}"
if [ ${#LAGS[@]} -gt 0 ]; then
    section "Results: -i 1s, schedule lag (ms) and CPU per request"
    # shellcheck disable=SC2059
    printf "$lfmt" build completed lag_p99 lag_max cpu_us/rq round
    printf '%s\n' "${LAGS[@]}"
fi
uptime
