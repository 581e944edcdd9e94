#!/usr/bin/env bash
# Stops an nginx and starts it again after a pause, as a deploy would, and
# says how long it was not accepting connections, measured here (the
# outage soakd should find): used as an `[[event]]` command by
# tests/outages.rs.
#
# Usage: nginx_bounce.sh PIDFILE PORT PAUSE OUT NGINX-COMMAND...
#   sends the master in PIDFILE a SIGTERM (a fast shutdown: every
#   connection closes), waits until 127.0.0.1:PORT refuses connections,
#   sleeps PAUSE seconds, runs NGINX-COMMAND in the background, waits
#   until the port accepts again, and writes "DOWN UP" (Unix seconds) to
#   OUT.
set -eu
pidfile=$1 port=$2 pause=$3 out=$4
shift 4
accepts() { (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; }
kill -TERM "$(cat "$pidfile")"
while accepts; do sleep 0.01; done
down=$(date +%s.%N)
sleep "$pause"
"$@" </dev/null >/dev/null 2>&1 &
until accepts; do sleep 0.01; done
up=$(date +%s.%N)
echo "$down $up" >"$out"
