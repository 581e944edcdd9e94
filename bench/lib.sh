# Shared by the bench scripts (sourced, not run): tools, a temp dir removed
# on exit, a pinned nginx on a free port, the soakd build, small helpers.
# A script sets SOAKD/SOAKD_GIVEN before calling build_soakd, and calls
# bench_init once before anything else.
# shellcheck shell=bash
# Variables set here (NOFILE, SOAKD_OK, ...) are read by the sourcing script.
# shellcheck disable=SC2034

section() {
    printf '\n==== %s ====\n' "$*"
}

# ---------------------------------------------------------------------------
# Tools
# ---------------------------------------------------------------------------

export DEBIAN_FRONTEND=noninteractive
apt_updated=no

# apt-get install PKG..., with one `apt-get update` first. Service starts are
# forbidden meanwhile: we never use the system nginx.
apt_install() {
    if [ "$apt_updated" = no ]; then
        apt-get update
        apt_updated=yes
    fi
    local made_policy=no rc=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        made_policy=yes
    fi
    apt-get install -y --no-install-recommends "$@" || rc=$?
    [ "$made_policy" = no ] || rm -f /usr/sbin/policy-rc.d
    return "$rc"
}

# need COMMAND PACKAGE: install PACKAGE when COMMAND is absent.
need() {
    if ! command -v "$1" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$1" ]; then
        echo "$1 missing: installing $2"
        apt_install "$2"
    fi
}

# bench_init: the tools every script needs, the open-file limit, and $WORK
# (removed on exit, with nginx and any load generator still running).
bench_init() {
    need python3 python3 # free ports, JSON, sampling
    need nginx nginx-light
    need taskset util-linux
    NGINX_BIN=$(command -v nginx || echo /usr/sbin/nginx)

    # Open files: load generators need one per connection plus a few; nginx as well.
    ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
    NOFILE=$(ulimit -n)

    # Everything this run writes goes here; removed on exit.
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/soakd-bench.XXXXXX")
    NGINX_PID=
    LOAD_PID=
    trap cleanup EXIT
    trap 'exit 130' INT TERM
}

# work_init NAME: $WORK (a temp dir, removed on exit) and the exit trap, for
# scripts that need neither nginx nor the tools bench_init installs (they
# run soakd against its built-in target: bench/verdicts.sh, bench/trends.sh).
work_init() {
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/soakd-$1.XXXXXX")
    NGINX_PID=
    LOAD_PID=
    trap cleanup EXIT
    trap 'exit 130' INT TERM
}

# Processes a script started (targets, leakers) that cleanup stops.
PIDS=()

# cleanup: stops the load generator, every process in PIDS and nginx, then
# removes $WORK, first copying it to $KEEP when that is set.
cleanup() {
    set +e
    [ -z "$LOAD_PID" ] || kill -KILL "$LOAD_PID" 2>/dev/null
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    if [ -n "$NGINX_PID" ] && kill -0 "$NGINX_PID" 2>/dev/null; then
        kill -TERM "$NGINX_PID" 2>/dev/null
        for _ in $(seq 100); do
            kill -0 "$NGINX_PID" 2>/dev/null || break
            sleep 0.02
        done
        kill -KILL "$NGINX_PID" 2>/dev/null
    fi
    wait 2>/dev/null
    if [ -n "${KEEP:-}" ]; then
        mkdir -p "$KEEP" && cp -a "$WORK"/. "$KEEP"/ && echo "kept in $KEEP"
    fi
    rm -rf "$WORK"
}

# start_target NAME ARGS...: `$SOAKD target` on a free port of 127.0.0.1
# (of TARGET_LISTEN when set, e.g. 127.0.30.1:0, or of the address
# TARGET_HOST when that is set, e.g. 127.0.29.4) with ARGS, its
# output in $WORK/NAME.out; sets ADDR (host:port) and TARGET_PID, and adds
# the PID to PIDS.
start_target() {
    local name=$1
    shift
    "$SOAKD" target --listen "${TARGET_LISTEN:-${TARGET_HOST:-127.0.0.1}:0}" "$@" >"$WORK/$name.out" 2>&1 &
    TARGET_PID=$!
    PIDS+=("$TARGET_PID")
    for _ in $(seq 50); do
        # The file may not be there yet (the shell that starts the target
        # opens it): not found is not started yet.
        ADDR=$(sed -n 's/^listening on //p' "$WORK/$name.out" 2>/dev/null || true)
        [ -n "$ADDR" ] && return 0
        sleep 0.1
    done
    echo "target $name did not start:" >&2
    cat "$WORK/$name.out" >&2
    exit 1
}

# json_get FILE PATH: prints the value at PATH (like .requests.completed).
json_get() {
    python3 - "$1" "$2" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
for key in sys.argv[2].strip(".").split("."):
    v = v[key]
print(v)
PY
}

# calc EXPR: floating-point arithmetic with 2 decimals, via awk (cheap
# enough to call every second while sampling). "n/a" when it fails, e.g. on
# division by 0 (mawk prints inf, gawk errors out).
calc() {
    local r
    r=$(awk "BEGIN { printf \"%.2f\", ($1) }" 2>/dev/null) || r=n/a
    case $r in
    '' | *inf* | *nan*) r=n/a ;;
    esac
    echo "$r"
}

# use_soakd: SOAKD as given, else the release binary, built now (quietly);
# for the scripts that run soakd against its built-in target.
use_soakd() {
    if [ -z "${SOAKD:-}" ]; then
        cargo build --release --quiet
        SOAKD=${CARGO_TARGET_DIR:-target}/release/soakd
    fi
}

# build_soakd: builds the release binary unless SOAKD was given; sets
# SOAKD_OK=yes|no.
build_soakd() {
    section "cargo build --release"
    SOAKD_OK=yes
    if [ -n "$SOAKD_GIVEN" ]; then
        echo "SOAKD=$SOAKD given: not building"
        [ -x "$SOAKD" ] || SOAKD_OK=no
    elif ! cargo build --release; then
        echo "WARNING: cargo build --release failed; soakd runs are skipped" >&2
        SOAKD_OK=no
    elif [ ! -x "$SOAKD" ]; then
        echo "WARNING: $SOAKD not found after the build; soakd runs are skipped" >&2
        SOAKD_OK=no
    fi
}

# ---------------------------------------------------------------------------
# nginx
# ---------------------------------------------------------------------------

# The loopback address nginx listens on (BENCH_HOST, default 127.0.0.1):
# engineers sharing a machine each bench on their own 127.x.y.z, so one's
# TIME_WAIT ports never slow the other's connects.
BENCH_HOST=${BENCH_HOST:-127.0.0.1}

free_port() {
    python3 -c 'import socket, sys; s = socket.socket(); s.bind((sys.argv[1], 0)); print(s.getsockname()[1])' "$BENCH_HOST"
}

port_open() {
    (exec 3<>"/dev/tcp/$BENCH_HOST/$1") 2>/dev/null
}

# The same config as the tests' nginx (tests/util/mod.rs): everything,
# including temp paths, inside our own dir; long keep-alive; no access log.
# NGINX_WORKERS, NGINX_WORKER_CONNECTIONS and NGINX_RLIMIT size it for more
# connections than one worker holds (bench/scale-out.sh); NGINX_REUSEPORT=1
# gives each worker its own listening socket, so the kernel spreads the
# connections evenly over them; NGINX_CPUS pins it (default CPU 0).
write_nginx_conf() {
    local dir=$1 port=$2 listen_ssl="" ssl="" reuseport="" http2=""
    [ "${NGINX_REUSEPORT:-0}" = 0 ] || reuseport=" reuseport"
    # NGINX_HTTP2=1: HTTP/2 on the port (h2c with prior knowledge, or h2 by
    # ALPN with TLS=1); nginx 1.22's `listen ... http2`.
    [ "${NGINX_HTTP2:-0}" = 0 ] || http2=" http2"
    # TLS=1: nginx serves HTTPS with a certificate made here (EC P-256, for
    # 127.0.0.1), a shared session cache and tickets, so clients can resume.
    # It must say CA:FALSE: rustls (webpki) refuses a CA certificate used as
    # a server's, which is what `req -x509` makes by default.
    if [ "${TLS:-0}" = 1 ]; then
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
            -keyout "$dir/key.pem" -out "$dir/cert.pem" -days 2 -subj "/CN=$BENCH_HOST" \
            -addext "subjectAltName=IP:$BENCH_HOST" -addext basicConstraints=critical,CA:FALSE \
            -addext keyUsage=critical,digitalSignature -addext extendedKeyUsage=serverAuth 2>/dev/null
        listen_ssl=" ssl"
        ssl="ssl_certificate $dir/cert.pem; ssl_certificate_key $dir/key.pem;
        ssl_session_cache shared:bench:50m; ssl_session_timeout 1h;"
    fi
    cat >"$dir/nginx.conf" <<EOF
daemon off;
master_process on;
worker_processes ${NGINX_WORKERS:-1};
worker_rlimit_nofile ${NGINX_RLIMIT:-40000};
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events {
    worker_connections ${NGINX_WORKER_CONNECTIONS:-30000};
    multi_accept on;
}
http {
    access_log off;
    keepalive_requests 1000000;
    keepalive_timeout 3600s;
    client_body_temp_path $dir/client_body;
    proxy_temp_path $dir/proxy;
    fastcgi_temp_path $dir/fastcgi;
    uwsgi_temp_path $dir/uwsgi;
    scgi_temp_path $dir/scgi;
    server {
        listen $BENCH_HOST:$port$listen_ssl$http2 backlog=4096${reuseport};
        $ssl
        location / { return 200 "pong"; }
    }
}
EOF
}

# Sets PORT and NGINX_PID. nginx cannot bind port 0, so take a port that was
# just free and retry with another if someone grabbed it meanwhile.
start_nginx() {
    local dir=$WORK/nginx attempt
    for attempt in $(seq 10); do
        rm -rf "$dir"
        mkdir -p "$dir"
        PORT=$(free_port)
        write_nginx_conf "$dir" "$PORT"
        taskset -c "${NGINX_CPUS:-0}" "$NGINX_BIN" -p "$dir/" -c "$dir/nginx.conf" -e "$dir/error.log" \
            </dev/null >/dev/null 2>"$dir/stderr.log" &
        NGINX_PID=$!
        # nginx writes its pid file only after binding, and retries a busy
        # port for 2.5 s before giving up, so wait up to 5 s.
        for _ in $(seq 250); do
            if ! kill -0 "$NGINX_PID" 2>/dev/null; then
                wait "$NGINX_PID" || true
                NGINX_PID=
                if grep -q "Address already in use" "$dir/error.log" "$dir/stderr.log"; then
                    echo "port $PORT taken, retrying (attempt $attempt)"
                    continue 2
                fi
                echo "nginx failed to start:" >&2
                cat "$dir/error.log" "$dir/stderr.log" >&2
                exit 1
            fi
            if [ -s "$dir/nginx.pid" ] && port_open "$PORT"; then
                return 0
            fi
            sleep 0.02
        done
        echo "nginx did not come up within 5 s:" >&2
        cat "$dir/error.log" "$dir/stderr.log" >&2
        exit 1
    done
    echo "nginx: no free port found in 10 attempts" >&2
    exit 1
}

# wait_timewait: sockets a previous run closed sit in TIME_WAIT for 60 s and
# keep their local ports; 15,000 of them plus 15,000 new connections do not
# fit the 28,000-port range, and connects then crawl through the kernel's
# port search. Start every run with the ports free.
wait_timewait() {
    local tw i
    for i in $(seq 70); do
        tw=$(ss -tan state time-wait 2>/dev/null | wc -l)
        [ "$tw" -gt 1000 ] || return 0
        [ "$i" -gt 1 ] || echo "waiting for $tw TIME_WAIT sockets to expire..." >&2
        sleep 1
    done
}

# cpu_ticks PID: utime + stime of the whole process (all threads), in clock
# ticks. Fields after "(comm) " start at field 3 (state), so utime (14) and
# stime (15) are the 12th and 13th.
cpu_ticks() {
    local rest
    rest=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null) || return 1
    awk '{print $12 + $13}' <<<"$rest"
}

