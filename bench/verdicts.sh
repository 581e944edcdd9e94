#!/usr/bin/env bash
# How often does `soakd compare` call a run worse than another run of the
# same server (false positives), and does it catch a server 2 ms slower
# per request (detection)? docs/verdicts.md quotes what this printed.
#
# Runs RUNS soaks of DURATION against one built-in target, then PAIRS
# soaks against it and against a target with `--delay 2ms`, all with an
# HDR interval log of INTERVAL. Every pair is compared twice: with the
# logs (rank test) and without (tolerance only). Same-server pairs:
# consecutive runs (1 vs 2, 3 vs 4, ...: independent pairs) and every pair
# of runs (not independent, but more of them). Nothing else should run
# on the machine... except that on a shared machine other work does, which
# is the point: the verdict must survive it.
#
#   bench/verdicts.sh                      # 20 runs + 5 delayed pairs of 10 s
#   RUNS=30 PAIRS=10 DURATION=15s bench/verdicts.sh
#   KEEP=/tmp/runs bench/verdicts.sh       # keep the reports and logs there
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-20}
PAIRS=${PAIRS:-5}
DURATION=${DURATION:-10s}
INTERVAL=${INTERVAL:-1s}
LOAD=${LOAD:--c 50 -r 1000}
SOAKD=${SOAKD:-}
if [ -z "$SOAKD" ]; then
    cargo build --release --quiet
    SOAKD=${CARGO_TARGET_DIR:-target}/release/soakd
fi
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
# shellcheck source=bench/lib.sh
. bench/lib.sh
work_init verdicts

# soak ADDR NAME: one run; report NAME.json, log NAME.hlog, and a copy of
# the report without the log's name (NAME.nolog.json: tolerance only).
soak() {
    # shellcheck disable=SC2086 # LOAD is a list of flags
    "$SOAKD" run "http://$1/" $LOAD -d "$DURATION" --metrics-listen off --close-with-reset \
        --hdr-log "$WORK/$2.hlog" --hdr-log-interval "$INTERVAL" --report "$WORK/$2.json" 2>/dev/null
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); r["hdr_log"]=None; json.dump(r,open(sys.argv[2],"w"))' \
        "$WORK/$2.json" "$WORK/$2.nolog.json"
}

start_target base
BASE=$ADDR
start_target slow --delay 2ms
SLOW=$ADDR
echo "soakd $SOAKD; $RUNS runs of $DURATION ($LOAD), interval $INTERVAL; $PAIRS pairs against +2 ms"
for i in $(seq "$RUNS"); do
    soak "$BASE" "same$i"
    printf '.'
done
for i in $(seq "$PAIRS"); do
    soak "$BASE" "pairbase$i"
    soak "$SLOW" "pairslow$i"
    printf '+'
done
echo

# Every comparison as JSON, then the tally.
for kind in json nolog.json; do
    for a in $(seq "$RUNS"); do
        for b in $(seq "$RUNS"); do
            [ "$a" -lt "$b" ] || continue
            "$SOAKD" compare "$WORK/same$a.$kind" "$WORK/same$b.$kind" --json \
                >"$WORK/cmp-same-$a-$b.$kind" 2>/dev/null || true
        done
    done
    for i in $(seq "$PAIRS"); do
        "$SOAKD" compare "$WORK/pairbase$i.$kind" "$WORK/pairslow$i.$kind" --json \
            >"$WORK/cmp-slow-$i.$kind" 2>/dev/null || true
    done
done

python3 - "$WORK" "$RUNS" "$PAIRS" <<'PY'
import glob, json, os, sys
work, runs, pairs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def load(path):
    return json.load(open(path))

def worse(c):
    return [r["metric"] for r in c["rows"] if r["verdict"] == "worse"]

for kind, label in (("json", "with interval logs (rank test + tolerance)"),
                    ("nolog.json", "reports only (tolerance)")):
    print(f"\n== {label}")
    consecutive = [(a, a + 1) for a in range(1, runs, 2)]
    every = [(a, b) for a in range(1, runs + 1) for b in range(a + 1, runs + 1)]
    for name, pairs_ in (("consecutive same-server pairs", consecutive),
                         ("all same-server pairs", every)):
        bad, per, excused, lag_only = 0, {}, {}, 0
        for a, b in pairs_:
            c = load(f"{work}/cmp-same-{a}-{b}.{kind}")
            w = worse(c)
            bad += bool(w)
            for m in w:
                per[m] = per.get(m, 0) + 1
            # Rows the lag rule excused that were otherwise headed for worse.
            ex = [r["metric"] for r in c["rows"]
                  if r["method"] == "generator_lag" and r["abs_change"] > 0]
            for m in ex:
                excused[m] = excused.get(m, 0) + 1
            lag_only += bool(ex) and not w
        print(f"  {name}: {bad}/{len(pairs_)} called worse  {per or ''}")
        print(f"    excused by soakd's own schedule lag: {lag_only} pairs would otherwise be worse  {excused or ''}")
    hit, p50s = 0, []
    for i in range(1, pairs + 1):
        c = load(f"{work}/cmp-slow-{i}.{kind}")
        row = next(r for r in c["rows"] if r["metric"] == "p50")
        hit += row["verdict"] == "worse"
        p = f' p={row["p_value"]:.4f}' if row["p_value"] is not None else ""
        p50s.append(f'{row["baseline"]*1e3:.2f}->{row["new"]*1e3:.2f}ms {row["method"]}{p}')
        other = [m for m in worse(c) if m != "p50"]
        if other:
            p50s[-1] += f' (also worse: {" ".join(other)})'
    print(f"  +2 ms server: p50 worse in {hit}/{pairs} pairs")
    for line in p50s:
        print(f"    {line}")

# The spread the verdicts had to survive.
p50 = [load(f"{work}/same{i}.json")["latency_seconds"]["p50"] * 1e3 for i in range(1, runs + 1)]
p99 = [load(f"{work}/same{i}.json")["latency_seconds"]["p99"] * 1e3 for i in range(1, runs + 1)]
lag = [load(f"{work}/same{i}.json")["schedule_lag_seconds"]["p99"] * 1e3 for i in range(1, runs + 1)]
print(f"\nsame-server runs: p50 {min(p50):.3f}..{max(p50):.3f} ms, p99 {min(p99):.2f}..{max(p99):.2f} ms,"
      f" schedule lag p99 {min(lag):.2f}..{max(lag):.2f} ms")
PY
