#!/usr/bin/env bash
# HTTP/2 client instructions per request of one or more soakd builds, under
# callgrind, which other load on the machine does not disturb (issue 28's
# before/after at 10,000 x 1; bench/README.md). Each build runs CONNS
# connections x 1 stream, closed loop, against nginx h2c, for N1 and then
# N2 requests; the difference of the two whole-process counts divided by
# N2 - N1 is the cost of a request with the connections' set-up and
# teardown taken out; what remains, per connection, is a connection's
# set-up and teardown plus its share of the process's start (a large share
# at a few hundred connections).
#
#   bench/h2_instructions.sh /path/soakd-before /path/soakd-after
#   CONNS=1000 N1=50000 N2=150000 bench/h2_instructions.sh target/release/soakd
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: bench/h2_instructions.sh SOAKD..." >&2; exit 2; }
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_init
need valgrind valgrind
CONNS=${CONNS:-10000}
N1=${N1:-200000}
N2=${N2:-600000}
NGINX_HTTP2=1 start_nginx
URL=http://127.0.0.1:$PORT/
run=0
# ir SOAKD N: whole-process instructions of one run of N requests.
ir() {
    run=$((run + 1))
    local out=$WORK/cg-$run
    # A loopback source address per run: no run waits on another's TIME_WAIT.
    valgrind --tool=callgrind --callgrind-out-file="$out.cg" \
        "$1" run "$URL" --http 2 -c "$CONNS" --streams 1 -t 1 -n "$2" --ramp 100000 \
        --source-addr "127.0.28.$((10 + run))" --metrics-listen off --report "$out.json" \
        >/dev/null 2>"$out.err"
    local done_
    done_=$(json_get "$out.json" .requests.completed)
    [ "$done_" = "$2" ] || { echo "$1: $done_ of $2 requests completed" >&2; exit 1; }
    awk '/^(summary|totals):/ {print $2; exit}' "$out.cg"
}
for soakd in "$@"; do
    a=$(ir "$soakd" "$N1")
    b=$(ir "$soakd" "$N2")
    per=$(calc "($b - $a) / ($N2 - $N1)")
    echo "$soakd: $per instructions a request," \
        "$(calc "($a - $N1 * $per) / $CONNS") a connection (set-up, teardown, share of the start)"
done
