#!/usr/bin/env bash
# Offline checks of soakd's systemd packaging (systemd/), run by
# scripts/test.sh; needs systemd-analyze but not a running systemd.
#
# 1. `systemd-analyze verify` prints nothing for each unit. verify insists
#    that ExecStart='s binary exists, and soakd is not installed where the
#    units expect it, so each unit is checked as a temporary copy whose
#    ExecStart= runs /bin/true with the same arguments; the template is
#    copied under an instance name (soakd@test.service).
# 2. `systemd-analyze security --offline=true` rates each unit's exposure at
#    most MAX_EXPOSURE.
# 3. soakd@.service has the same directives as soakd.service apart from the
#    ones that name the instance.
# 4. Every key in 60-soakd.conf exists in /proc/sys (a typo would be
#    silently ignored at boot), except lines marked "-" (optional modules).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

MAX_EXPOSURE=2.0
fail=0

if ! command -v systemd-analyze >/dev/null 2>&1; then
    echo "systemd-analyze not found: skipping the systemd unit checks"
    exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for unit in systemd/soakd.service systemd/soakd@.service; do
    name=$(basename "$unit")
    copy="$tmp/${name/@./@test.}"
    # ExecStart=[prefixes]/usr/local/bin/soakd ARGS -> ExecStart=[prefixes]/bin/true ARGS
    sed -E 's#^(ExecStart=[-@:+!|]*)[^ ]+#\1/bin/true#' "$unit" >"$copy"

    out=$(systemd-analyze verify "$copy" 2>&1) || true
    if [ -n "$out" ]; then
        printf 'FAIL %s: systemd-analyze verify printed:\n%s\n' "$unit" "$out"
        fail=1
    else
        echo "ok   $unit: systemd-analyze verify is silent"
    fi

    exposure=$(systemd-analyze security --offline=true --no-pager "$unit" 2>&1 |
        sed -nE 's/.*Overall exposure level for [^:]*: ([0-9]+(\.[0-9]+)?).*/\1/p')
    if [ -z "$exposure" ]; then
        echo "FAIL $unit: no 'Overall exposure level' line from systemd-analyze security"
        fail=1
    elif awk -v e="$exposure" -v max="$MAX_EXPOSURE" 'BEGIN { exit !(e > max) }'; then
        echo "FAIL $unit: exposure $exposure > $MAX_EXPOSURE (systemd-analyze security --offline=true $unit)"
        fail=1
    else
        echo "ok   $unit: exposure $exposure <= $MAX_EXPOSURE"
    fi
done

# Directive lines, minus those allowed to differ between the two units.
directives() {
    grep -E '^[A-Za-z]+=' "$1" | grep -vE '^(Description|ExecStart|StateDirectory|LogsDirectory)=' || true
}
if ! diff <(directives systemd/soakd.service) <(directives systemd/soakd@.service) >"$tmp/diff"; then
    echo "FAIL soakd.service and soakd@.service differ (only ExecStart=, Description= and the directories may):"
    cat "$tmp/diff"
    fail=1
else
    echo "ok   soakd@.service has the same directives as soakd.service"
fi

missing=$(sed -nE 's/^[[:space:]]*([a-z][a-z0-9_.]*)[[:space:]]*=.*/\1/p' systemd/60-soakd.conf |
    while read -r key; do [ -e "/proc/sys/${key//.//}" ] || echo "$key"; done)
if [ -n "$missing" ]; then
    echo "FAIL systemd/60-soakd.conf: no such sysctl: $missing"
    fail=1
else
    echo "ok   systemd/60-soakd.conf: every key exists"
fi

exit "$fail"
