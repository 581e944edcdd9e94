#!/usr/bin/env bash
# What a unary gRPC soak costs soakd, beside h2load posting the same encoded
# gRPC message to the same server in the same run (issue 31; bench/README.md,
# "gRPC"). soakd on CPU 1, the server on CPU 0.
#
#   1. cpu: GRPC_CONNS (100) connections x GRPC_STREAMS (10) streams, closed
#      loop, GRPC_SECS (10) s, ROUNDS (2) times interleaved:
#        h2load -c 100 -m 10 -H 'content-type: application/grpc'
#               -H 'te: trailers' -d MESSAGE URL/soakd.test.v1.Echo/Unary
#        soakd run grpc://... --call soakd.test.v1.Echo/Unary --proto ...
#      CPU per call of each and their ratio. h2load counts a call by its
#      HTTP status only; soakd by its grpc-status too (every call is
#      checked as OK here, see the error column).
#   2. alloc: soakd under heaptrack for GRPC_N1 and GRPC_N2 calls: the
#      difference of the allocation calls divided by the difference of the
#      calls is the allocations per call (0 wanted), start-up taken out.
#
# SERVER picks the server both clients call: `grpcio` (default: Python's
# grpcio serving tests/proto/echo.proto with tests/peers/grpc_server.py,
# from scripts/test.sh's venv, SOAKD_PEERS_VENV) or `target` (`soakd target
# --grpc`, when it is built). PARTS (default "cpu alloc") picks the parts.
#
#   bench/grpc.sh
#   SERVER=target ROUNDS=3 bench/grpc.sh
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
SERVER=${SERVER:-grpcio}
PARTS=${PARTS:-cpu alloc}
ROUNDS=${ROUNDS:-2}
GRPC_CONNS=${GRPC_CONNS:-100}
GRPC_STREAMS=${GRPC_STREAMS:-10}
GRPC_SECS=${GRPC_SECS:-10}
GRPC_N1=${GRPC_N1:-5000}
GRPC_N2=${GRPC_N2:-25000}
PEERS_VENV=${SOAKD_PEERS_VENV:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/soakd/peers-venv}
METHOD=soakd.test.v1.Echo/Unary
DATA='{"text": "soak"}'

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
use_soakd
bench_init
need /usr/bin/time time
need h2load nghttp2-client
need heaptrack heaptrack

# The message both clients send, framed as gRPC frames it: a 0 byte (not
# compressed), the length (4 bytes, big-endian), then EchoRequest{text:
# "soak"} in protobuf (field 1, wire type 2: 0x0a, length 4, the bytes).
# soakd encodes the same from DATA and --proto at start; the check below
# compares the server's view of both.
printf '\x00\x00\x00\x00\x06\x0a\x04soak' >"$WORK/message.bin"

section "server: $SERVER"
case $SERVER in
grpcio)
    [ -x "$PEERS_VENV/bin/python" ] || {
        echo "no grpcio venv at $PEERS_VENV: run scripts/test.sh once (it makes it)" >&2
        exit 1
    }
    # Its stats file rewritten 5 times a second, not after every call.
    SOAKD_GRPC_LAZY_STATS=1 taskset -c 0 "$PEERS_VENV/bin/python" tests/peers/grpc_server.py tests/proto "$WORK/stats.json" none \
        >"$WORK/server.out" 2>&1 &
    SERVER_PID=$!
    PIDS+=("$SERVER_PID")
    for _ in $(seq 300); do
        grep -q '^port ' "$WORK/server.out" && break
        sleep 0.1
    done
    ADDR=127.0.0.1:$(awk '/^port / {print $2; exit}' "$WORK/server.out")
    ;;
target)
    TARGET_LISTEN=127.0.0.1:0 start_target target --grpc
    taskset -pc 0 "$TARGET_PID" >/dev/null
    ;;
*)
    echo "SERVER=$SERVER: want grpcio or target" >&2
    exit 2
    ;;
esac
[ -n "${ADDR:-}" ] && [ "${ADDR#*:}" != "" ] || {
    echo "the server did not start:" >&2
    cat "$WORK/server.out" >&2 || true
    exit 1
}
echo "server on $ADDR (CPU 0); clients on CPU 1"

# timed NAME CMD...: CMD on CPU 1 under /usr/bin/time; sets CPU_S and RC.
timed() {
    local name=$1
    shift
    RC=0
    /usr/bin/time -o "$WORK/$name.time" -f '%U %S %M' taskset -c 1 "$@" \
        </dev/null >"$WORK/$name.out" 2>"$WORK/$name.err" || RC=$?
    local u s m
    read -r u s m < <(tail -n 1 "$WORK/$name.time")
    CPU_S=$(calc "$u + $s")
}

# soakd's unary call to the server, before the run's own flags.
SOAKD_GRPC=("$SOAKD" run "grpc://$ADDR" --call "$METHOD" --proto tests/proto/echo.proto --data "$DATA"
    --metrics-listen off)

if [[ " $PARTS " == *" cpu "* ]]; then
    declare -a RATIOS=()
    for r in $(seq "$ROUNDS"); do
        section "round $r: h2load -c $GRPC_CONNS -m $GRPC_STREAMS -t 1 -D $GRPC_SECS"
        wait_timewait
        timed "h2load-$r" h2load -c "$GRPC_CONNS" -m "$GRPC_STREAMS" -t 1 -D "$GRPC_SECS" \
            -H 'content-type: application/grpc' -H 'te: trailers' -d "$WORK/message.bin" \
            "http://$ADDR/$METHOD"
        h2_done=$(awk '/^requests:/ {print $8}' "$WORK/h2load-$r.out")
        h2_secs=$(awk '/^finished in/ {sub(/s,$/, "", $3); print $3}' "$WORK/h2load-$r.out")
        grep -E '^(requests|status codes|finished in):' "$WORK/h2load-$r.out"
        h2_us=$(calc "$CPU_S * 1e6 / $h2_done")

        section "round $r: soakd run grpc:// -c $GRPC_CONNS --streams $GRPC_STREAMS -t 1 -d ${GRPC_SECS}s"
        wait_timewait
        timed "soakd-$r" "${SOAKD_GRPC[@]}" -c "$GRPC_CONNS" --streams "$GRPC_STREAMS" -t 1 -d "${GRPC_SECS}s" \
            --ramp 100000 --report "$WORK/soakd-$r.json"
        [ "$RC" = 0 ] || { tail -20 "$WORK/soakd-$r.err" >&2; exit 1; }
        s_done=$(json_get "$WORK/soakd-$r.json" .requests.completed)
        s_secs=$(json_get "$WORK/soakd-$r.json" .duration_seconds)
        s_err=$(python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["errors"]; print({k: v for k, v in e.items() if v})' \
            "$WORK/soakd-$r.json")
        echo "completed $s_done in ${s_secs}s, errors $s_err"
        s_us=$(calc "$CPU_S * 1e6 / $s_done")
        ratio=$(calc "$s_us / $h2_us")
        RATIOS+=("$ratio")
        printf 'round %s: calls/s h2load %s soakd %s; CPU us/call h2load %s soakd %s; soakd/h2load %s\n' \
            "$r" "$(calc "$h2_done / $h2_secs")" "$(calc "$s_done / $s_secs")" "$h2_us" "$s_us" "$ratio"
    done
    echo "soakd/h2load CPU per call, by round: ${RATIOS[*]}"
fi

if [[ " $PARTS " == *" alloc "* ]]; then
    section "heaptrack: allocations per call ($GRPC_N1 and $GRPC_N2 calls, -c 10 --streams 10)"
    allocs() {
        wait_timewait
        heaptrack -o "$WORK/ht-$1" "${SOAKD_GRPC[@]}" -c 10 --streams 10 -t 1 -n "$1" \
            --report "$WORK/ht-$1.json" >/dev/null 2>&1
        [ "$(json_get "$WORK/ht-$1.json" .requests.completed)" = "$1" ] || {
            echo "heaptrack run of $1 calls did not complete them" >&2
            exit 1
        }
        heaptrack_print "$(ls "$WORK"/ht-"$1"*.zst "$WORK"/ht-"$1"*.gz 2>/dev/null | head -1)" 2>/dev/null |
            awk '/^calls to allocation functions:/ {print $5; exit}'
    }
    a=$(allocs "$GRPC_N1")
    b=$(allocs "$GRPC_N2")
    echo "allocation calls: $a for $GRPC_N1 calls, $b for $GRPC_N2;" \
        "per call $(calc "($b - $a) / ($GRPC_N2 - $GRPC_N1)")"
fi
