#!/usr/bin/env bash
# Writes per request and CPU per request of one or more soakd builds at
# 100 connections x 10 streams against the built-in gRPC server, beside
# h2load in the same run (issue 40, "one write per wakeup"; bench/README.md,
# "bench/writes.sh"). The server (`soakd target --grpc`, which speaks
# HTTP/1.1 and h2c as well) runs on CPU 0, every client on CPU 1.
#
#   1. syscalls: each build under `strace -c -f` for WRITES_SECS (10) s,
#      closed loop, -c 100, on each load:
#        grpc  grpc://... --call soakd.test.v1.Echo/Unary --streams 10
#        h2    http://... --http 2 --streams 10
#        h1p10 http://... --pipeline 10
#        ws10  ws://.../ws --ws-message soak --pipeline 10 (echoed)
#      prints sends (sendto + write + writev + sendmsg), receives (recvfrom
#      + read + readv + recvmsg) and epoll_wait calls per request
#      (the soakd process only: the server is not traced).
#   2. cpu: ROUNDS (2) rounds, interleaved, without strace: h2load -c 100
#      -m 10 -t 1 posting the same gRPC message, then each build; the same
#      for plain HTTP/2 (GET /); CPU per request of each and each build's
#      ratio to h2load's in the same round.
#
#   bench/writes.sh /tmp/soakd-before target/release/soakd
#   PARTS=syscalls WRITES_SECS=5 bench/writes.sh target/release/soakd
#
# Addresses: the server on 127.0.40.1, soakd's connections from
# 127.0.40.2.. (a new source address per run, so no run waits for another's
# TIME_WAIT). SERVER_SOAKD picks the binary that serves (default: the first
# build given), so every client meets the same server.
set -euo pipefail
[ $# -ge 1 ] || {
    echo "usage: bench/writes.sh SOAKD..." >&2
    exit 2
}
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
PARTS=${PARTS:-syscalls cpu}
ROUNDS=${ROUNDS:-2}
WRITES_SECS=${WRITES_SECS:-10}
CONNS=${CONNS:-100}
STREAMS=${STREAMS:-10}
METHOD=soakd.test.v1.Echo/Unary
DATA='{"text": "soak"}'
BUILDS=("$@")

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
bench_init
need /usr/bin/time time
need h2load nghttp2-client
need strace strace

SOAKD=${SERVER_SOAKD:-${BUILDS[0]}}
TARGET_LISTEN=127.0.40.1:0 start_target target --grpc
taskset -pc 0 "$TARGET_PID" >/dev/null
echo "server: $SOAKD target --grpc on $ADDR (CPU 0); clients on CPU 1"
# The message both clients send (as bench/grpc.sh): not compressed, 6
# bytes, EchoRequest{text: "soak"}.
printf '\x00\x00\x00\x00\x06\x0a\x04soak' >"$WORK/message.bin"

SRC=1
# next_src: a fresh source address for the next soakd run.
next_src() {
    SRC=$((SRC + 1))
    [ "$SRC" -lt 250 ] || SRC=2
    echo "127.0.40.$SRC"
}

# load_args LOAD: soakd's URL and flags for one of grpc, h2, h1p10, ws10.
load_args() {
    case $1 in
    grpc) echo "grpc://$ADDR --call $METHOD --proto tests/proto/echo.proto --data {\"text\":\"soak\"} --streams $STREAMS" ;;
    h2) echo "http://$ADDR/ --http 2 --streams $STREAMS" ;;
    h1p10) echo "http://$ADDR/ --http 1.1 --pipeline 10" ;;
    ws10) echo "ws://$ADDR/ws --ws-message soak --pipeline 10" ;;
    esac
}

# soakd_run NAME BUILD LOAD [PREFIX...]: one closed-loop run on CPU 1;
# sets DONE (requests completed) and CPU_S (user + system seconds).
soakd_run() {
    local name=$1 build=$2 load=$3
    shift 3
    local args
    read -r -a args <<<"$(load_args "$load")"
    RC=0
    /usr/bin/time -o "$WORK/$name.time" -f '%U %S' taskset -c 1 "$@" "$build" run "${args[@]}" \
        -c "$CONNS" -t 1 -d "${WRITES_SECS}s" --ramp 100000 --source-addr "$(next_src)" \
        --metrics-listen off --report "$WORK/$name.json" </dev/null >"$WORK/$name.out" 2>"$WORK/$name.err" || RC=$?
    [ "$RC" = 0 ] || {
        tail -20 "$WORK/$name.err" >&2
        exit 1
    }
    DONE=$(json_get "$WORK/$name.json" .requests.completed)
    local u s
    read -r u s < <(tail -n 1 "$WORK/$name.time")
    CPU_S=$(calc "$u + $s")
    local errs
    errs=$(python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["errors"]; print({k: v for k, v in e.items() if v})' \
        "$WORK/$name.json")
    [ "$errs" = "{}" ] || echo "  $name: errors $errs"
}

# calls FILE NAME...: the sum of the named syscalls' counts in an strace -c
# summary.
calls() {
    local file=$1
    shift
    awk -v names=" $* " '$NF != "" && index(names, " " $NF " ") { n += ($4 ~ /^[0-9]+$/ ? $4 : $3) }
        END { print n + 0 }' "$file"
}

if [[ " $PARTS " == *" syscalls "* ]]; then
    section "syscalls per request under strace -c -f (${WRITES_SECS} s, -c $CONNS)"
    fmt='%-28s %-6s %9s %8s %8s %8s\n'
    # shellcheck disable=SC2059
    printf "$fmt" build load requests sends/rq recvs/rq waits/rq
    for load in grpc h2 h1p10 ws10; do
        for b in "${!BUILDS[@]}"; do
            name=strace-$b-$load
            soakd_run "$name" "${BUILDS[$b]}" "$load" strace -c -f -o "$WORK/$name.strace"
            sends=$(calls "$WORK/$name.strace" sendto write writev sendmsg)
            recvs=$(calls "$WORK/$name.strace" recvfrom read readv recvmsg)
            waits=$(calls "$WORK/$name.strace" epoll_wait epoll_pwait epoll_pwait2)
            # shellcheck disable=SC2059
            printf "$fmt" "${BUILDS[$b]}" "$load" "$DONE" "$(calc "$sends / $DONE")" "$(calc "$recvs / $DONE")" \
                "$(calc "$waits / $DONE")"
        done
    done
fi

# h2load_run NAME LOAD: h2load on CPU 1 for WRITES_SECS; sets DONE, CPU_S.
h2load_run() {
    local name=$1 load=$2 extra=()
    [ "$load" = grpc ] && extra=(-H 'content-type: application/grpc' -H 'te: trailers' -d "$WORK/message.bin")
    local url=http://$ADDR/
    [ "$load" = grpc ] && url=http://$ADDR/$METHOD
    RC=0
    /usr/bin/time -o "$WORK/$name.time" -f '%U %S' taskset -c 1 h2load -c "$CONNS" -m "$STREAMS" -t 1 \
        -D "$WRITES_SECS" "${extra[@]}" "$url" </dev/null >"$WORK/$name.out" 2>"$WORK/$name.err" || RC=$?
    DONE=$(awk '/^requests:/ {print $8}' "$WORK/$name.out")
    [ "$RC" = 0 ] && [ -n "$DONE" ] && [ "$DONE" != 0 ] || {
        cat "$WORK/$name.out" "$WORK/$name.err" >&2
        exit 1
    }
    local u s
    read -r u s < <(tail -n 1 "$WORK/$name.time")
    CPU_S=$(calc "$u + $s")
}

if [[ " $PARTS " == *" cpu "* ]]; then
    section "CPU per request beside h2load (${WRITES_SECS} s, -c $CONNS, $STREAMS streams, $ROUNDS rounds)"
    fmt='%-6s %-5s %-28s %10s %10s %8s\n'
    # shellcheck disable=SC2059
    printf "$fmt" round load client requests cpu_us/rq /h2load
    for r in $(seq "$ROUNDS"); do
        for load in grpc h2; do
            h2load_run "h2load-$r-$load" "$load"
            base=$(calc "$CPU_S * 1e6 / $DONE")
            # shellcheck disable=SC2059
            printf "$fmt" "$r" "$load" h2load "$DONE" "$base" 1.00
            for b in "${!BUILDS[@]}"; do
                soakd_run "cpu-$r-$b-$load" "${BUILDS[$b]}" "$load"
                us=$(calc "$CPU_S * 1e6 / $DONE")
                # shellcheck disable=SC2059
                printf "$fmt" "$r" "$load" "${BUILDS[$b]}" "$DONE" "$us" "$(calc "$us / $base")"
            done
        done
    done
fi
