#!/usr/bin/env bash
# soakd's one test command: installs what the tests need, then runs
# rustfmt, clippy and the test suite. Used by CI (.ci/run) and by developers.
#
# Meant for Debian 12 as root. Safe to re-run: installs only what is absent.
set -euo pipefail

# Run from the repo root whatever the caller's working directory.
cd "$(dirname "${BASH_SOURCE[0]}")/.."

section() {
    printf '\n==== %s ====\n' "$*"
}

# ---------------------------------------------------------------------------
section "Test dependencies"
# ---------------------------------------------------------------------------

export DEBIAN_FRONTEND=noninteractive
apt_updated=no

# apt-get install PKG..., running `apt-get update` first, but only once.
apt_install() {
    if [ "$apt_updated" = no ]; then
        apt-get update
        apt_updated=yes
    fi
    # Installing a package with a service (nginx, prometheus) would normally
    # start it. The tests never use the system nginx -- each test starts its
    # own with a generated config on a free port -- so forbid service starts
    # for the duration of the install (exit 101 = "action not allowed"), unless
    # the machine already has such a policy.
    local made_policy=no
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        made_policy=yes
    fi
    local rc=0
    apt-get install -y --no-install-recommends "$@" || rc=$?
    if [ "$made_policy" = yes ]; then
        rm -f /usr/sbin/policy-rc.d
    fi
    return "$rc"
}

# nginx is the HTTP server most integration tests load. /usr/sbin may not be
# on PATH for every user, so look there too.
if command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; then
    echo "nginx: present"
else
    echo "nginx: missing, installing nginx-light"
    apt_install nginx-light
fi

# promtool (from the prometheus package) checks soakd's /metrics output.
if command -v promtool >/dev/null 2>&1; then
    echo "promtool: present"
else
    echo "promtool: missing, installing prometheus"
    apt_install prometheus
fi

# python3 checks the dashboard JSON below, and a hardening test uses it to
# hold ports in a network namespace.
if command -v python3 >/dev/null 2>&1; then
    echo "python3: present"
else
    echo "python3: missing, installing python3"
    apt_install python3
fi

# Load tests open up to ~15,000 sockets in one process; use the hard limit.
ulimit -n "$(ulimit -Hn)"
echo "open-file limit: $(ulimit -n)"

# ---------------------------------------------------------------------------
section "systemd units"
# ---------------------------------------------------------------------------
# Offline: `systemd-analyze verify` must print nothing and `security` must
# rate each unit's exposure <= 2.0; skipped when systemd-analyze is absent.
scripts/check-units.sh

# ---------------------------------------------------------------------------
section "Monitoring mixin (promtool)"
# ---------------------------------------------------------------------------
# grafana/: recording rules, alerts and their unit tests, the example
# Prometheus config (its rule_files resolve relative to the config file) and
# the dashboard JSON. See grafana/README.md.
promtool check rules grafana/rules.yml grafana/alerts.yml
promtool test rules grafana/tests/*.yml
promtool check config grafana/prometheus.yml
python3 -m json.tool grafana/dashboards/soakd.json >/dev/null

# ---------------------------------------------------------------------------
section "cargo fmt --check"
# ---------------------------------------------------------------------------
cargo fmt --check

# ---------------------------------------------------------------------------
section "cargo clippy --all-targets -- -D warnings"
# ---------------------------------------------------------------------------
cargo clippy --all-targets -- -D warnings

# ---------------------------------------------------------------------------
section "cargo test --release"
# ---------------------------------------------------------------------------
# Release build: the load tests drive 5,000-15,000 connections, which a debug
# build is too slow for.
cargo test --release

section "All checks passed"
