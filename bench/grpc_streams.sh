#!/usr/bin/env bash
# Held gRPC server streams (issue 31, `--stream subscribe`; bench/README.md,
# "gRPC held streams"), against grpcio's asyncio server
# (tests/peers/grpc_stream_server.py: one coroutine per call, so it holds
# thousands of streams; the thread-pool server of grpc_server.py holds as
# many as it has threads).
#
#   1. ageing: grpcio ages every connection out after 2 s
#      (grpc.max_connection_age_ms=2000, grace 1000 ms): AGE_CONNS (20)
#      connections x AGE_STREAMS (10) streams held for AGE_SECS (60) s, a
#      push every 100 ms. Rotations, restarts, errors (0 wanted), messages
#      counted by soakd and sent by grpcio.
#   3. alloc: soakd under heaptrack (held streams' hot path: no
#      allocation per message): Chat (bidirectional, closed loop, 4 x 4
#      streams) for ALLOC_N1 (5000) and ALLOC_N2 (25000) messages, and
#      Subscribe (4 x 25 streams, a push every 10 ms) for 2 s and 6 s: the
#      difference of the allocation calls over the difference of the
#      messages.
#   2. memory: soakd's RSS holding 10,000 idle streams (one push at the
#      start, then silence) as 100 x 100 and as 10,000 x 1, against its
#      RSS at the same connection count and --streams without streams
#      held (unary calls at -i 1h: connections up, idle). The difference
#      divided by 10,000 is what a held idle stream costs above the HTTP/2
#      connection's own cost (2 KiB wanted).
#
# PARTS (default "ageing memory") picks the parts; SOURCE_PREFIX (127.0.43)
# the loopback source addresses.
#
#   bench/grpc_streams.sh
#   PARTS=memory bench/grpc_streams.sh
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
PARTS=${PARTS:-ageing memory alloc}
ALLOC_N1=${ALLOC_N1:-5000}
ALLOC_N2=${ALLOC_N2:-25000}
AGE_CONNS=${AGE_CONNS:-20}
AGE_STREAMS=${AGE_STREAMS:-10}
AGE_SECS=${AGE_SECS:-60}
SOURCE_PREFIX=${SOURCE_PREFIX:-127.0.43}
PEERS_VENV=${SOAKD_PEERS_VENV:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/soakd/peers-venv}
[ -x "$PEERS_VENV/bin/python" ] || {
    echo "no grpcio venv at $PEERS_VENV: run scripts/test.sh once (it makes it)" >&2
    exit 1
}
ulimit -n 20000 2>/dev/null || ulimit -n "$(ulimit -Hn)"

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
use_soakd
bench_init
need curl curl

PROTO=tests/proto/echo.proto

# start_server NAME OPTIONS_JSON: grpcio's asyncio server; sets ADDR and
# SERVER_PID.
start_server() {
    SOAKD_GRPC_OPTIONS=$2 "$PEERS_VENV/bin/python" tests/peers/grpc_stream_server.py tests/proto \
        "$WORK/$1.json" >"$WORK/$1.out" 2>&1 &
    SERVER_PID=$!
    PIDS+=("$SERVER_PID")
    for _ in $(seq 300); do
        grep -q '^port ' "$WORK/$1.out" && break
        sleep 0.1
    done
    ADDR=127.0.0.1:$(awk '/^port / {print $2; exit}' "$WORK/$1.out")
}

# metric PORT REGEX: the sum of the series of soakd's /metrics matching REGEX.
metric() {
    curl -s "http://127.0.0.1:$1/metrics" | awk -v re="$2" '$0 ~ re {s += $2} END {print s + 0}'
}

rss_kib() {
    awk '/^VmRSS/ {print $2}' "/proc/$1/status"
}

if [[ " $PARTS " == *" ageing "* ]]; then
    section "ageing: $AGE_CONNS x $AGE_STREAMS held streams, ${AGE_SECS} s, grpcio max_connection_age 2 s, grace 1 s"
    start_server ageing-server '[["grpc.max_connection_age_ms", 2000], ["grpc.max_connection_age_grace_ms", 1000]]'
    "$SOAKD" run "grpc://$ADDR" --call soakd.test.v1.Echo/Subscribe --proto "$PROTO" \
        --data '{"count": 0, "interval_ms": 100}' --stream subscribe -c "$AGE_CONNS" --streams "$AGE_STREAMS" \
        -d "${AGE_SECS}s" --source-addr "$SOURCE_PREFIX.20" --metrics-listen off \
        --threshold 'errors<=0' --report "$WORK/ageing.json" 2>"$WORK/ageing.log" || echo "soakd exit $?"
    sleep 1
    python3 - "$WORK/ageing.json" <<'PY' 
import json, sys
w = json.load(open(sys.argv[1]))["workloads"][0]
g = w["http"]["grpc"]
s = g["streams"]
errors = sum(w["errors"].values())
print(f"rotations (server closes) {w['connections']['closed_by_reason']['server_close']}  "
      f"goaways {sum(w['http']['goaways'].values())}  errors {errors}")
print(f"streams opened {s['opened']}  restarts {s['restarts']}  calls by code "
      + str({k: v for k, v in g['calls'].items() if v}))
print(f"messages received {s['messages_received']} ({s['messages_per_second']:.0f}/s)  "
      f"gap p50 {s['gap_seconds']['p50']} s  silence p99 {s['silence_seconds']['p99']} s max {s['silence_seconds']['max']} s")
PY
    echo "grpcio: $(cat "$WORK/ageing-server.json")"
    kill "$SERVER_PID" 2>/dev/null || true
fi

# hold LABEL CONNS STREAMS SRC ARGS...: soakd's RSS (KiB) once CONNS
# connections are open and, for subscribe runs, every stream is held;
# printed as "LABEL rss KiB".
hold() {
    local label=$1 conns=$2 streams=$3 src=$4 mport want
    shift 4
    mport=$(free_port)
    "$SOAKD" run "grpc://$ADDR" --proto "$PROTO" -c "$conns" --streams "$streams" -d 10m -t 1 \
        --ramp 2000 --source-addr "$src" --metrics-listen "127.0.0.1:$mport" "$@" \
        >/dev/null 2>"$WORK/$label.log" &
    local pid=$!
    PIDS+=("$pid")
    want=$((conns * streams))
    for _ in $(seq 600); do
        sleep 1
        local open held
        open=$(metric "$mport" '^soakd_connections[{].*state="open"')
        held=$(metric "$mport" '^soakd_grpc_streams_open[{]')
        if [ "$open" -ge "$conns" ] && { [[ $label != held* ]] || [ "$held" -ge "$want" ]; }; then
            break
        fi
    done
    sleep 5 # settle
    echo "$label: open $open held $held rss $(rss_kib "$pid") KiB"
    eval "RSS_$label=$(rss_kib "$pid")"
    kill -INT "$pid"
    wait "$pid" 2>/dev/null || true
}

if [[ " $PARTS " == *" memory "* ]]; then
    section "memory: 10,000 idle held streams as 100 x 100 and 10,000 x 1, soakd's RSS with and without them"
    start_server memory '[]'
    idle='{"count": 0, "interval_ms": 3600000}'
    hold bare100 100 100 "$SOURCE_PREFIX.21" --call soakd.test.v1.Echo/Unary -i 1h
    hold held100 100 100 "$SOURCE_PREFIX.22" --call soakd.test.v1.Echo/Subscribe --stream subscribe --data "$idle"
    hold bare10k 10000 1 "$SOURCE_PREFIX.23" --call soakd.test.v1.Echo/Unary -i 1h
    hold held10k 10000 1 "$SOURCE_PREFIX.24" --call soakd.test.v1.Echo/Subscribe --stream subscribe --data "$idle"
    # shellcheck disable=SC2154
    echo "per held idle stream above the connection's cost: 100 x 100 $(((RSS_held100 - RSS_bare100) * 1024 / 10000)) B," \
        "10,000 x 1 $(((RSS_held10k - RSS_bare10k) * 1024 / 10000)) B (2048 B wanted)"
    echo "grpcio (asyncio) held them: $(cat "$WORK/memory.json")"
fi

if [[ " $PARTS " == *" alloc "* ]]; then
    need heaptrack heaptrack
    section "heaptrack: allocations per message (bidirectional and server streams)"
    start_server alloc '[]'
    # heaptrack_run NAME ARGS...: soakd under heaptrack; prints its allocation calls.
    heaptrack_run() {
        local name=$1
        shift
        heaptrack -o "$WORK/ht-$name" "$SOAKD" run "grpc://$ADDR" --proto "$PROTO" -t 1 --metrics-listen off \
            --report "$WORK/ht-$name.json" "$@" >/dev/null 2>&1
        heaptrack_print "$(ls "$WORK"/ht-"$name"*.zst "$WORK"/ht-"$name"*.gz 2>/dev/null | head -1)" 2>/dev/null |
            awk '/^calls to allocation functions:/ {print $5; exit}'
    }
    chat=(--call soakd.test.v1.Echo/Chat --stream-message '{"text": "hi"}' -c 4 --streams 4)
    a=$(heaptrack_run chat1 "${chat[@]}" -n "$ALLOC_N1" --source-addr "$SOURCE_PREFIX.25")
    b=$(heaptrack_run chat2 "${chat[@]}" -n "$ALLOC_N2" --source-addr "$SOURCE_PREFIX.26")
    echo "bidi: allocation calls $a for $ALLOC_N1 messages, $b for $ALLOC_N2;" \
        "per message $(calc "($b - $a) / ($ALLOC_N2 - $ALLOC_N1)")"
    sub=(--call soakd.test.v1.Echo/Subscribe --stream subscribe --data '{"count": 0, "interval_ms": 10}' -c 4 --streams 25)
    a=$(heaptrack_run sub1 "${sub[@]}" -d 2s --source-addr "$SOURCE_PREFIX.27")
    b=$(heaptrack_run sub2 "${sub[@]}" -d 6s --source-addr "$SOURCE_PREFIX.28")
    received() {
        python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["workloads"][0]["http"]["grpc"]["streams"]["messages_received"])' "$1"
    }
    ma=$(received "$WORK/ht-sub1.json")
    mb=$(received "$WORK/ht-sub2.json")
    echo "subscribe: allocation calls $a for $ma messages, $b for $mb;" \
        "per message $(calc "($b - $a) / ($mb - $ma)")"
fi
