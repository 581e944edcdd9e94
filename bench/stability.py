#!/usr/bin/env python3
"""Samples a running soakd every N seconds and checks that it is stable.

Used by bench/stability.sh; runs on its own against any soakd with a
metrics endpoint:

    bench/stability.py --pid PID --metrics 127.0.0.1:9469 [--every 10] [--warmup 60]

Each sample reads, as close together as possible, the endpoint's /metrics
(connection states, request counters) and then /proc/PID (resident memory,
open descriptors, CPU). It prints one row per sample and, when soakd has
exited, the series' start (the first sample after the warm-up), end and
maximum, and three verdicts over the samples after the warm-up:

- rss: the maximum is at most 1% above the start;
- fds: open descriptors minus held connections (open + connecting, from the
  metrics) is the same in every steady sample: one descriptor per
  connection plus a constant. Steady means no slot in backoff and no error
  since the previous sample: while connects fail, slots change state faster
  than the metrics snapshot (refreshed every 250 ms) follows, so the two
  counts are read at different moments and differ by the slots in flux;
- accounting: sent = completed + failed + in flight in every sample.

Exits 1 when a verdict fails or there were no samples after the warm-up.
"""

import argparse
import os
import subprocess
import sys
import time
import urllib.request

CLK_TCK = os.sysconf("SC_CLK_TCK")


def scrape(addr):
    """Sums of the series we need, over all targets, from /metrics."""
    with urllib.request.urlopen(f"http://{addr}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    sums = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        series, _, value = line.rpartition(" ")
        name = series.split("{", 1)[0]
        if name == "soakd_connections":
            state = series.split('state="', 1)[1].split('"', 1)[0]
            name = f"{name}:{state}"
        sums[name] = sums.get(name, 0.0) + float(value)
    return sums


def proc(pid):
    """(RSS KiB, open fds, socket fds, CPU ticks) of PID, or None if gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
        fds = sockets = 0
        for fd in os.listdir(f"/proc/{pid}/fd"):
            fds += 1
            try:
                sockets += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
            except FileNotFoundError:
                pass  # closed while we looked
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
        ticks = int(rest[11]) + int(rest[12])
        return rss, fds, sockets, ticks
    except (FileNotFoundError, ProcessLookupError, StopIteration):
        return None


def time_wait():
    out = subprocess.run(["ss", "-tanH", "state", "time-wait"], capture_output=True, text=True)
    return len(out.stdout.splitlines())


COLUMNS = [
    ("t_s", 6), ("rss_kib", 8), ("fds", 6), ("sockets", 7), ("held", 6), ("fds-held", 8),
    ("backoff", 7), ("req/s", 7), ("conn/s", 6), ("errors", 6), ("cpu%", 5), ("time_wait", 9),
    ("accounting", 10),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--metrics", required=True, help="host:port of soakd's metrics endpoint")
    ap.add_argument("--every", type=float, default=10.0)
    ap.add_argument("--warmup", type=float, default=60.0)
    ap.add_argument("--csv", help="also write the samples to this file")
    a = ap.parse_args()

    print(" ".join(f"{name:>{width}}" for name, width in COLUMNS), flush=True)
    csv = open(a.csv, "w") if a.csv else None
    if csv:
        csv.write(",".join(name for name, _ in COLUMNS) + "\n")
    samples = []
    t0 = time.monotonic()
    prev = None
    k = 1
    while True:
        time.sleep(max(0.0, t0 + k * a.every - time.monotonic()))
        k += 1
        try:
            m = scrape(a.metrics)
        except OSError:
            if proc(a.pid) is None:
                break  # soakd has exited
            print("scrape failed; soakd still running", file=sys.stderr)
            continue
        p = proc(a.pid)
        if p is None:
            break
        now = time.monotonic()
        rss, fds, sockets, ticks = p
        held = int(m.get("soakd_connections:open", 0) + m.get("soakd_connections:connecting", 0))
        sent = m.get("soakd_requests_sent_total", 0)
        completed = m.get("soakd_responses_total", 0)
        failed = m.get("soakd_requests_failed_total", 0)
        in_flight = m.get("soakd_requests_in_flight", 0)
        s = {
            "t_s": round(now - t0),
            "rss_kib": rss,
            "fds": fds,
            "sockets": sockets,
            "held": held,
            "fds-held": fds - held,
            "backoff": int(m.get("soakd_connections:backoff", 0)),
            "completed": completed,
            "opened": m.get("soakd_connections_opened_total", 0),
            "errors_total": m.get("soakd_errors_total", 0),
            "ticks": ticks,
            "time_wait": time_wait(),
            "accounting": "ok" if sent == completed + failed + in_flight else
            f"BROKEN:{sent}!={completed}+{failed}+{in_flight}",
            "now": now,
        }
        if prev:
            dt = now - prev["now"]
            s["req/s"] = round((completed - prev["completed"]) / dt)
            s["conn/s"] = round((s["opened"] - prev["opened"]) / dt)
            s["errors"] = int(s["errors_total"] - prev["errors_total"])
            s["cpu%"] = round((ticks - prev["ticks"]) / CLK_TCK / dt * 100, 1)
        else:
            s["req/s"] = s["conn/s"] = s["errors"] = s["cpu%"] = "-"
        prev = s
        samples.append(s)
        row = [str(s[name]) for name, _ in COLUMNS]
        print(" ".join(f"{v:>{w}}" for v, (_, w) in zip(row, COLUMNS)), flush=True)
        if csv:
            csv.write(",".join(row) + "\n")
            csv.flush()

    after = [s for s in samples if s["t_s"] >= a.warmup]
    print()
    if not after:
        print(f"no samples after the {a.warmup:g} s warm-up ({len(samples)} in all): run longer")
        return 1
    first, last = after[0], after[-1]
    print(f"{len(after)} samples from t={first['t_s']} s to t={last['t_s']} s (after the warm-up):")
    print(f"{'series':>10} {'start':>8} {'end':>8} {'min':>8} {'max':>8}")
    for name in ("rss_kib", "fds", "held", "fds-held", "time_wait"):
        vals = [s[name] for s in after]
        print(f"{name:>10} {first[name]:>8} {last[name]:>8} {min(vals):>8} {max(vals):>8}")
    print()

    ok = True
    rss_max = max(s["rss_kib"] for s in after)
    growth = (rss_max - first["rss_kib"]) / first["rss_kib"] * 100
    verdict = growth <= 1.0
    ok &= verdict
    print(f"rss:        max {rss_max} KiB is {growth:+.2f}% of the start {first['rss_kib']} KiB "
          f"(limit +1%): {'ok' if verdict else 'FAIL'}")
    steady = [s for s in after if s["backoff"] == 0 and s["errors"] in (0, "-")]
    extra = sorted({s["fds-held"] for s in steady})
    verdict = len(extra) == 1
    ok &= verdict
    print(f"fds:        descriptors minus held connections took the values {extra} in "
          f"{len(steady)} steady samples (want one constant; {len(after) - len(steady)} "
          f"with backoff or errors left out): {'ok' if verdict else 'FAIL'}")
    broken = [s for s in samples if s["accounting"] != "ok"]
    verdict = not broken
    ok &= verdict
    print(f"accounting: sent = completed + failed + in flight in {len(samples) - len(broken)} of "
          f"{len(samples)} samples: {'ok' if verdict else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
