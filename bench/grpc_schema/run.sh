#!/usr/bin/env bash
# Measures the two pure-Rust schema stacks soakd could compile --proto
# files with (docs/grpc.md, "Choosing the schema compiler"):
#   prost/   protox + prost-reflect (serde feature for the JSON mapping)
#   rustpb/  rust-protobuf 3: protobuf-parse in pure mode, dynamic
#            messages, protobuf-json-mapping
# For each: a clean release build's wall and CPU time, the stripped
# binary's size above baseline/ (serde_json only, which soakd has anyway),
# the median time to compile tests/proto/echo.proto (with its import and
# google/protobuf/timestamp.proto) over 200 runs, and the JSON mapping
# cases of cases.json judged by reference.py against protobuf's own.
#
# Needs python with grpcio-tools (scripts/test.sh's peers venv):
#   PY=~/.cache/soakd/peers-venv/bin/python bench/grpc_schema/run.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
PY=${PY:-python3}
out=${OUT:-/tmp/grpc_schema_bench}
mkdir -p "$out"
proto=$(cd ../../tests/proto && pwd)

for c in baseline prost rustpb; do
    (cd "$c" && cargo fetch -q)
    rm -rf "$out/$c"
    /usr/bin/time -f "%e %U %S" -o "$out/$c.time" \
        cargo build -q --release -j2 --manifest-path "$c/Cargo.toml" --target-dir "$out/$c"
    strip -o "$out/$c.bin" "$out/$c/release/schema-$c"
    read -r wall user sys <"$out/$c.time"
    printf '%-9s build %6.1f s wall %6.1f s CPU  stripped %8d bytes\n' \
        "$c" "$wall" "$(echo "$user + $sys" | bc)" "$(stat -c %s "$out/$c.bin")"
done

for c in prost rustpb; do
    echo "== $c"
    echo "compile echo.proto: median $("$out/$c.bin" compile 200 "$proto" echo.proto) us"
    "$out/$c.bin" cases . wkt.proto cases.json bench.All >"$out/$c.cases"
    "$PY" reference.py cases.json "$out/$c.cases"
done
