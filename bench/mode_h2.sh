# shellcheck shell=bash
# MODE=h2 of bench/compare.sh (sourced by it): soakd's HTTP/2 client beside
# h2load (nghttp2) in the same run, against the same nginx serving h2c with
# prior knowledge (`listen ... http2`), or h2 by ALPN with TLS=1. See
# bench/README.md, "MODE=h2".
#
#   MODE=h2 bench/compare.sh           # h2c
#   TLS=1 MODE=h2 bench/compare.sh     # h2 over TLS (ALPN)
#   H2_CONNS=5000 MODE=h2 bench/compare.sh   # the held-connection rows at 5,000
#
# Rows: closed loop at -c 100 with 10 streams per connection and at
# -c $H2_CONNS (10,000) with 1 stream; memory per held idle connection at
# $H2_CONNS (one request every 10 s per connection). The HTTP/1.1 figures
# are MODE=compare's: nginx's h2c port (`listen ... http2` without ssl)
# speaks only HTTP/2, so they cannot share this nginx.

# h2load_run NAME ARGS...: h2load ARGS URL timed on CPU 1; sets H2_DONE
# (requests that succeeded, empty on failure) and H2_SECS (its own run time).
h2load_run() {
    local name=$1 line
    shift
    wait_timewait
    # A bound on every h2load run: its duration mode can hang (below).
    timed "$name" timeout -k 10 $((DURATION * 6 + 120)) h2load "$@" "$URL"
    # "requests: 1000 total, 1000 started, 1000 done, 1000 succeeded, 0 failed, ..."
    line=$(grep '^requests:' "$WORK/$name.out" || true)
    H2_DONE=$(awk '{print $8}' <<<"$line")
    # "finished in 10.00s, 12345.60 req/s, 1.23MB/s"
    H2_SECS=$(awk '/^finished in/ {sub(/s,$/, "", $3); print $3}' "$WORK/$name.out")
    if [ "$RC" -ne 0 ] || [ -z "$H2_DONE" ] || [ "$H2_DONE" = 0 ]; then
        show_failure "$name"
        H2_DONE=
    fi
    grep -E '^(requests|status codes|finished in|Application protocol):' "$WORK/$name.out" || true
}

# soakd_h2_run NAME ARGS...: soakd run over HTTP/2 (ARGS add --streams and
# the load); sets H2_DONE and H2_SECS from its report.
soakd_h2_run() {
    local name=$1
    shift
    soakd_run "$name" --http 2 "$@"
    H2_DONE=
    [ -n "$REPORT" ] || return 0
    H2_DONE=$(json_get "$REPORT" .requests.completed)
    H2_SECS=$(json_get "$REPORT" .duration_seconds)
    echo "report: completed=$H2_DONE duration=${H2_SECS}s errors=$(python3 -c \
        'import json,sys; e=json.load(open(sys.argv[1]))["errors"]; print({k: v for k, v in e.items() if v})' "$REPORT")"
}

mode_h2() {
    local n=${H2_CONNS:-10000} key
    declare -A DONE RPS CPU RSS
    # h2row KEY: keeps the last run's figures under KEY.
    h2row() {
        [ -n "$H2_DONE" ] || return 0
        DONE[$1]=$H2_DONE
        RPS[$1]=$(calc "$H2_DONE / $H2_SECS")
        CPU[$1]=$(calc "$CPU_S * 1e6 / $H2_DONE")
        RSS[$1]=$RSS_KIB
    }

    section "h2load -c 100 -m 10 -t 1 -D $DURATION"
    h2load_run h2load-100 -c 100 -m 10 -t 1 -D "$DURATION"
    h2row h2load:100x10
    section "soakd --http 2 -c 100 --streams 10 -t 1 -d ${DURATION}s"
    soakd_h2_run soakd-100 -c 100 --streams 10 --ramp 100000 -t 1 -d "${DURATION}s"
    h2row soakd:100x10

    # Over TLS, h2load 1.52 (Debian 12) hangs at the end of a -D run with
    # thousands of connections: it prints "Stopped all clients" and spins
    # with ~2,000 of them still open (upstream's duration-mode race, fixed
    # after 1.52: nghttp2 PR #2249). A request count (-n, 25 a connection,
    # about as long as $DURATION s here) has no end-of-duration step, so
    # the TLS row counts requests instead; req/s and CPU per request are
    # over h2load's own "finished in" time either way.
    local h2load_len=(-D "$DURATION")
    [ -z "${TLS:-}" ] || h2load_len=(-n $((n * 25)))
    section "h2load -c $n -m 1 -t 1 ${h2load_len[*]}"
    h2load_run "h2load-$n" -c "$n" -m 1 -t 1 "${h2load_len[@]}"
    h2row "h2load:${n}x1"
    section "soakd --http 2 -c $n --streams 1 -t 1 -d ${DURATION}s"
    soakd_h2_run "soakd-$n" -c "$n" --streams 1 --ramp 100000 -t 1 -d "${DURATION}s" --connect-timeout 30s
    h2row "soakd:${n}x1"

    # Held, nearly idle: one request every 10 s per connection, for 30 s
    # (the ramp included). Max RSS / connections, the process's base in.
    section "held: h2load -c $n -m 1 --rps 0.1 -t 1 -D 30"
    h2load_run "h2load-held" -c "$n" -m 1 --rps 0.1 -t 1 -D 30
    h2row h2load:held
    section "held: soakd --http 2 -c $n -i 10s -t 1 -d 30s --ramp 5000"
    soakd_h2_run soakd-held -c "$n" -i 10s --ramp 5000 -t 1 -d 30s --connect-timeout 30s
    h2row soakd:held

    section "Results (${TLS:+TLS, }CPU and max RSS over the whole run)"
    local fmt='%-7s %-10s %12s %10s %11s %11s %9s\n' tool load
    # shellcheck disable=SC2059
    printf "$fmt" tool load completed req/s cpu_us/req maxrss_KiB KiB/conn
    for load in 100x10 "${n}x1" held; do
        for tool in h2load soakd; do
            key=$tool:$load
            local conns=100
            case $load in "${n}x1" | held) conns=$n ;; esac
            # shellcheck disable=SC2059
            printf "$fmt" "$tool" "$load" "${DONE[$key]:-failed}" "${RPS[$key]:--}" "${CPU[$key]:--}" \
                "${RSS[$key]:--}" "$([ -n "${RSS[$key]:-}" ] && calc "${RSS[$key]} / $conns" || echo -)"
        done
    done
    echo
    echo "soakd/h2load ratios (below 1 = soakd uses less):"
    for load in 100x10 "${n}x1"; do
        if [ -n "${CPU[soakd:$load]:-}" ] && [ -n "${CPU[h2load:$load]:-}" ]; then
            printf '  %-8s CPU per request %s\n' "$load" "$(calc "${CPU[soakd:$load]} / ${CPU[h2load:$load]}")"
        fi
    done
    if [ -n "${RSS[soakd:held]:-}" ] && [ -n "${RSS[h2load:held]:-}" ]; then
        printf '  %-8s memory per held connection %s (soakd %s KiB, h2load %s KiB)\n' held \
            "$(calc "${RSS[soakd:held]} / ${RSS[h2load:held]}")" \
            "$(calc "${RSS[soakd:held]} / $n")" "$(calc "${RSS[h2load:held]} / $n")"
    fi
}
