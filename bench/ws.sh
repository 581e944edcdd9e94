#!/usr/bin/env bash
# MODE=ws of bench/compare.sh (run it as `MODE=ws bench/compare.sh`): what a
# WebSocket soak costs soakd, against soakd's built-in target (pinned to
# CPU 0; soakd on CPU 1), each figure beside its HTTP/1.1 counterpart from
# the same run. See bench/README.md, "MODE=ws".
#
#   1. hold: WS_CONNS (15,000) ws:// sockets pinging every WS_PING (30s),
#      held WS_HOLD (60) s after the ramp: soakd's resident memory per
#      socket and its CPU over the hold, then the same number of HTTP/1.1
#      connections paced at the same rate (-i WS_PING: one request per
#      connection per interval, as one ping per socket), and wss:// sockets
#      (memory), opened at WS_TLS_RAMP (500) a second: the target is one
#      thread on one core, and a TLS handshake costs it about a millisecond,
#      so at the plain hold's 5,000 a second its accept queue overflowed,
#      handshakes ran past the connect timeout and the hold never reached
#      its count (measured: 2,000 wss:// sockets at --ramp 5000 were all up
#      only after 3.7 s, ~540 handshakes a second, on a loaded machine).
#   2. echo: ECHO_CONNS (100) sockets in closed loop for ECHO_SECS (10) s,
#      each message answered by the target's /ws echo: CPU per message, vs
#      CPU per HTTP/1.1 request against the target's / in the same way.
#      The floor: the same exchanges by bench/floor/echo_floor.c (a C
#      program doing nothing else), when a C compiler is here.
#   3. a peer: Artillery (ARTILLERY=/path/to/artillery, from npm) holding
#      the same sockets, when it is given.
#
# WS_CONNS, WS_HOLD, WS_PING, WS_TLS_RAMP, ECHO_CONNS and ECHO_SECS change
# the above;
# WS_PARTS (default "hold tls echo") picks which of hold (ws://, http://
# and the peer), tls (wss://) and echo run.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
SOAKD_GIVEN=${SOAKD:+yes}
SOAKD=${SOAKD:-$ROOT/target/release/soakd}
WS_CONNS=${WS_CONNS:-15000}
WS_HOLD=${WS_HOLD:-60}
WS_PING=${WS_PING:-30s}
WS_TLS_RAMP=${WS_TLS_RAMP:-500}
ECHO_CONNS=${ECHO_CONNS:-100}
ECHO_SECS=${ECHO_SECS:-10}
WS_PARTS=${WS_PARTS:-hold tls echo}

# part NAME: whether WS_PARTS has NAME.
part() {
    [[ " $WS_PARTS " == *" $1 "* ]]
}

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
bench_init
need /usr/bin/time time
build_soakd
if [ "$SOAKD_OK" = no ]; then
    echo "MODE=ws needs soakd" >&2
    exit 1
fi
if [ "$NOFILE" != unlimited ] && [ "$NOFILE" -lt $((WS_CONNS + 100)) ]; then
    echo "WARNING: open-file limit $NOFILE is below $((WS_CONNS + 100))" >&2
fi

# start_target [ARGS...]: `soakd target` on a free port, pinned to CPU 0;
# sets ADDR and CERT (with --tls). Its pid goes where lib.sh's cleanup
# stops the server (NGINX_PID), so it never outlives the script.
start_target() {
    stop_target
    taskset -c 0 "$SOAKD" target --listen 127.0.0.1:0 "$@" </dev/null >"$WORK/target.out" 2>"$WORK/target.err" &
    NGINX_PID=$!
    ADDR=
    for _ in $(seq 250); do
        ADDR=$(sed -n 's/^listening on //p' "$WORK/target.out")
        [ -z "$ADDR" ] || break
        sleep 0.02
    done
    [ -n "$ADDR" ] || {
        echo "soakd target did not start:" >&2
        cat "$WORK/target.err" >&2
        exit 1
    }
    CERT=$(sed -n 's/^certificate \([^ ]*\) .*/\1/p' "$WORK/target.out")
}

stop_target() {
    if [ -n "${NGINX_PID:-}" ]; then
        kill -TERM "$NGINX_PID" 2>/dev/null || true
        wait "$NGINX_PID" 2>/dev/null || true
        NGINX_PID=
    fi
}

# fds PID: its open descriptors.
fds() {
    find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l
}

# hold NAME CMD...: starts CMD (a load generator holding $WS_CONNS sockets)
# on CPU 1, waits until it holds them (or its count stops growing for 5 s),
# lets it settle for 5 s, then measures its CPU over $WS_HOLD s and its
# VmRSS at the end; stops it with SIGTERM. Sets HOLD_CPU_S, HOLD_RSS_KIB,
# HOLD_FDS.
hold() {
    local name=$1 pid hz t0 c0 c1 t1 last=-1 last_change=$SECONDS n
    shift
    wait_timewait
    hz=$(getconf CLK_TCK)
    taskset -c 1 "$@" </dev/null >"$WORK/$name.out" 2>"$WORK/$name.err" &
    pid=$!
    LOAD_PID=$pid
    while kill -0 "$pid" 2>/dev/null; do
        n=$(fds "$pid")
        [ "$n" -lt "$WS_CONNS" ] || break
        if [ "$n" -ne "$last" ]; then
            last=$n
            last_change=$SECONDS
        elif [ $((SECONDS - last_change)) -ge 5 ]; then
            echo "WARNING: $name stuck at $n descriptors (< $WS_CONNS)" >&2
            break
        fi
        sleep 0.2
    done
    sleep 5
    HOLD_FDS=$(fds "$pid")
    c0=$(cpu_ticks "$pid")
    t0=$(date +%s.%N)
    sleep "$WS_HOLD"
    c1=$(cpu_ticks "$pid")
    t1=$(date +%s.%N)
    HOLD_RSS_KIB=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")
    HOLD_CPU_S=$(calc "($c1 - $c0) / $hz")
    echo "$name: $HOLD_FDS fds, CPU $HOLD_CPU_S s over $(calc "$t1 - $t0") s" \
        "($(calc "$HOLD_CPU_S / ($t1 - $t0) * 100")% of a core), VmRSS $HOLD_RSS_KIB KiB" \
        "= $(calc "$HOLD_RSS_KIB * 1024 / $HOLD_FDS") bytes per descriptor, base included"
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    LOAD_PID=
}

# base_rss ARGS...: soakd's VmRSS holding one connection (its base: threads,
# histograms, tables), to subtract from a hold's.
base_rss() {
    local pid rss=
    wait_timewait
    taskset -c 1 "$SOAKD" run "$@" -c 1 -d 30s -t 1 --metrics-listen off </dev/null >/dev/null 2>"$WORK/base.err" &
    pid=$!
    LOAD_PID=$pid
    sleep 3
    rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
    if ! kill -0 "$pid" 2>/dev/null || [ -z "$rss" ]; then
        echo "soakd $* -c 1 is not running:" >&2
        cat "$WORK/base.err" >&2
        exit 1
    fi
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    LOAD_PID=
    echo "$rss"
}

# A hold's soakd flags besides the URL and the workload's own.
HOLD_ARGS=(-c "$WS_CONNS" -d 1h -t 1 --ramp 5000 --connect-timeout 30s --metrics-listen off)
# wss://: at the rate the one-thread TLS target handshakes (see the top).
TLS_HOLD_ARGS=(-c "$WS_CONNS" -d 1h -t 1 --ramp "$WS_TLS_RAMP" --connect-timeout 60s --metrics-listen off)

declare -A CPU MEM_PER
CPU[header]="CPU s/${WS_HOLD}s"
MEM_PER[header]="bytes/socket"
# per_socket RSS_KIB BASE_KIB: bytes per socket above the base, over the
# sockets the hold really held (its descriptors but the base's dozen).
per_socket() {
    calc "($1 - $2) * 1024 / ($HOLD_FDS - 12)"
}

if part hold; then
section "hold: $WS_CONNS sockets, ping every $WS_PING, ${WS_HOLD}s after the ramp"
start_target
echo "target on $ADDR (CPU 0); load generators on CPU 1"
base=$(base_rss "ws://$ADDR/ws" --ws-ping "$WS_PING")
echo "soakd base (1 socket): VmRSS $base KiB"
hold ws-hold "$SOAKD" run "ws://$ADDR/ws" --ws-ping "$WS_PING" "${HOLD_ARGS[@]}"
CPU[ws]=$HOLD_CPU_S
MEM_PER[ws]=$(per_socket "$HOLD_RSS_KIB" "$base")
hold http-hold "$SOAKD" run "http://$ADDR/" -i "$WS_PING" "${HOLD_ARGS[@]}"
CPU[http]=$HOLD_CPU_S
MEM_PER[http]=$(per_socket "$HOLD_RSS_KIB" "$base")

# The peer: Artillery (npm), holding the same sockets with its ws engine
# (one virtual user per socket, thinking for the whole hold; it sends no
# pings). Not installed by this script: `npm install artillery` somewhere
# and give ARTILLERY=that/node_modules/.bin/artillery (or have it on PATH).
ARTILLERY=${ARTILLERY:-$(command -v artillery || true)}
if [ -n "$ARTILLERY" ] && [ -x "$ARTILLERY" ]; then
    cat >"$WORK/artillery.yml" <<EOF
config:
  target: "ws://$ADDR/ws"
  phases:
    - duration: $((WS_CONNS / 1000))
      arrivalRate: 1000
scenarios:
  - engine: ws
    flow:
      - think: $((WS_HOLD + 120))
EOF
    hold artillery-hold "$ARTILLERY" run --quiet "$WORK/artillery.yml"
    CPU[artillery]=$HOLD_CPU_S
    MEM_PER[artillery]=$(calc "$HOLD_RSS_KIB * 1024 / $HOLD_FDS")
else
    echo "no Artillery (ARTILLERY=/path/to/artillery): no peer figures"
fi
fi

if part tls; then
section "hold over TLS: $WS_CONNS wss:// sockets"
start_target --tls
base_tls=$(base_rss "wss://$ADDR/ws" --ws-ping "$WS_PING" --cacert "$CERT")
echo "soakd base over TLS (1 socket): VmRSS $base_tls KiB"
hold wss-hold "$SOAKD" run "wss://$ADDR/ws" --ws-ping "$WS_PING" --cacert "$CERT" "${TLS_HOLD_ARGS[@]}"
CPU[wss]=$HOLD_CPU_S
MEM_PER[wss]=$(per_socket "$HOLD_RSS_KIB" "$base_tls")
fi

declare -A PER_OP FLOOR
if part echo; then
section "echo: $ECHO_CONNS connections, closed loop, ${ECHO_SECS}s"
start_target
for kind in ws http; do
    if [ "$kind" = ws ]; then
        args=("ws://$ADDR/ws" --ws-message hello)
    else
        args=("http://$ADDR/")
    fi
    wait_timewait
    RC=0
    /usr/bin/time -o "$WORK/echo-$kind.time" -f '%U %S %M' taskset -c 1 "$SOAKD" run "${args[@]}" \
        -c "$ECHO_CONNS" --ramp 100000 -t 1 -d "${ECHO_SECS}s" --metrics-listen off \
        --report "$WORK/echo-$kind.json" </dev/null >/dev/null 2>"$WORK/echo-$kind.err" || RC=$?
    read -r u s _ < <(tail -n 1 "$WORK/echo-$kind.time")
    done_n=$(json_get "$WORK/echo-$kind.json" .requests.completed)
    errs=$(python3 -c 'import json,sys; print(sum(json.load(open(sys.argv[1]))["errors"].values()))' "$WORK/echo-$kind.json")
    PER_OP[$kind]=$(calc "($u + $s) * 1e6 / $done_n")
    echo "$kind: exit $RC, $done_n completed, $errs errors, CPU $(calc "$u + $s") s: ${PER_OP[$kind]} us each"
done
# The floor: the same exchanges by a C program that does nothing else
# (bench/floor/echo_floor.c), so the kernel's share is in the same run.
if command -v cc >/dev/null; then
    cc -O2 -o "$WORK/echo_floor" "$ROOT/bench/floor/echo_floor.c"
    for kind in ws http; do
        wait_timewait
        read -r _ n fu fs per < <(taskset -c 1 "$WORK/echo_floor" "$kind" "${ADDR%:*}" "${ADDR##*:}" \
            "$ECHO_CONNS" "$ECHO_SECS")
        FLOOR[$kind]=$per
        echo "floor $kind: $n exchanges, user $fu s, sys $fs s: $per us each"
    done
else
    echo "no C compiler: no floor figures"
fi
stop_target
fi

section "results"
row() {
    printf '%-34s %12s %12s\n' "$1" "${CPU[$2]:--}" "${MEM_PER[$2]:--}"
}
row "hold ($WS_CONNS sockets)" header
row "soakd ws:// ping $WS_PING" ws
row "soakd wss:// ping $WS_PING" wss
row "soakd http:// -i $WS_PING" http
row "Artillery ws engine (no pings; base incl.)" artillery
echo
[ -z "${CPU[ws]:-}" ] || echo "ws hold CPU / http hold CPU: $(calc "${CPU[ws]} / ${CPU[http]}") (limit 1.2)"
[ -z "${MEM_PER[ws]:-}" ] || echo "ws bytes per socket: ${MEM_PER[ws]} (limit 2048)"
[ -z "${MEM_PER[wss]:-}" ] || echo "wss bytes per socket: ${MEM_PER[wss]} (limit 6144)"
[ -z "${PER_OP[ws]:-}" ] || echo "echo: ${PER_OP[ws]} us CPU per message vs ${PER_OP[http]} us per HTTP/1.1 request:" \
    "$(calc "${PER_OP[ws]} / ${PER_OP[http]}") (limit 0.8)"
[ -z "${FLOOR[ws]:-}" ] || echo "floor: ${FLOOR[ws]} us per message vs ${FLOOR[http]} us per request:" \
    "$(calc "${FLOOR[ws]} / ${FLOOR[http]}"); soakd / floor: ws $(calc "${PER_OP[ws]} / ${FLOOR[ws]}")," \
    "http $(calc "${PER_OP[http]} / ${FLOOR[http]}")"
