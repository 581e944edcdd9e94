#!/usr/bin/env bash
# A CI job that deploys while a soak runs and tells soakd so: it waits
# until soakd serves its metrics, writes the deploy's name as one line to
# soakd's --event-socket (a FIFO here: `echo NAME > FIFO` is all a job
# needs), then, as a job that only knows soakd's pid would, writes a
# second name to soakd's --event-name-file and sends SIGUSR2. Used by
# tests/outages.rs.
#
# Usage: ci_event.sh METRICS-URL FIFO NAME PID NAME-FILE SECOND-NAME
set -eu
metrics=$1 fifo=$2 name=$3 pid=$4 name_file=$5 second=$6
for _ in $(seq 1 500); do
    curl -sf "$metrics" >/dev/null && break
    sleep 0.02
done
echo "$name" >"$fifo"
sleep 1
echo "$second" >"$name_file"
kill -USR2 "$pid"
