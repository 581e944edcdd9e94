//! The metric families every target has: connections, requests,
//! responses, errors, latency, the server processes watched, and soakd's
//! own state (health, reloads, thresholds, shard). Declared as one table
//! of [`Family`]s; the protocol-specific ones live beside it (`h2.rs`,
//! `ws.rs`), and [`super::families`] lists them all in one place.

use prometheus::proto::{self, MetricType};

use super::{Family, Fill, RequestSnapshot, Series, WINDOW_QUANTILES, histogram, labels, value};
use crate::stats::{CheckKind, CloseReason, ErrorKind, StatusClass};

/// The families of every target, in exposition order.
pub(super) const FAMILIES: &[Family] = &[
    Family {
        name: "soakd_connections",
        help: "Connection slots by state (backoff includes slots waiting for a ramp token).",
        kind: MetricType::GAUGE,
        labels: &["target", "state"],
        fill: Fill::Target(|x, out| {
            for (state, v) in [
                ("open", x.w.gauges.open),
                ("connecting", x.w.gauges.connecting),
                ("backoff", x.w.gauges.backoff),
            ] {
                out.push(value(x.kind, &[("target", x.t), ("state", state)], v as f64));
            }
        }),
    },
    Family {
        name: "soakd_connections_desired",
        help: "Connection slots the plan wants now.",
        kind: MetricType::GAUGE,
        labels: &["target"],
        fill: Fill::Target(|x, out| {
            out.push(x.one(x.w.gauges.desired));
        }),
    },
    Family {
        name: "soakd_connections_opened_total",
        help: "Successful connects.",
        kind: MetricType::COUNTER,
        labels: &["target"],
        fill: Fill::Target(|x, out| {
            out.push(x.one(x.c.opened));
        }),
    },
    Family {
        name: "soakd_connections_closed_total",
        help: "Closes of established connections by reason.",
        kind: MetricType::COUNTER,
        labels: &["target", "reason"],
        fill: Fill::Target(|x, out| {
            for r in CloseReason::ALL {
                out.push(value(
                    x.kind,
                    &[("target", x.t), ("reason", r.name())],
                    x.c.closed[r as usize] as f64,
                ));
            }
        }),
    },
    Family {
        name: "soakd_requests_sent_total",
        help: "Requests written.",
        kind: MetricType::COUNTER,
        labels: &["target"],
        fill: Fill::Target(|x, out| {
            out.push(x.one(x.c.sent));
        }),
    },
    Family {
        name: "soakd_requests_failed_total",
        help: "Requests sent and then lost to an error (sent = completed + failed + in flight).",
        kind: MetricType::COUNTER,
        labels: &["target"],
        fill: Fill::Target(|x, out| {
            out.push(x.one(x.c.failed));
        }),
    },
    Family {
        name: "soakd_requests_missed_total",
        help: "Scheduled requests never sent: already older than the request timeout when a connection was free.",
        kind: MetricType::COUNTER,
        labels: &["target"],
        fill: Fill::Target(|x, out| {
            out.push(x.one(x.c.missed));
        }),
    },
    Family {
        name: "soakd_requests_in_flight",
        help: "Requests sent and not yet answered.",
        kind: MetricType::GAUGE,
        labels: &["target"],
        fill: Fill::Target(|x, out| {
            out.push(x.one(x.w.gauges.in_flight));
        }),
    },
    Family {
        name: "soakd_responses_total",
        help: "Complete responses by request and status class.",
        kind: MetricType::COUNTER,
        labels: &["target", "request", "code"],
        fill: Fill::Target(|x, out| {
            per_request(x, out, "code", StatusClass::ALL.map(StatusClass::name), |r| r.responses);
        }),
    },
    Family {
        name: "soakd_check_failures_total",
        help: "Complete responses that failed a configured check (status, header, body, size), by request; the connection is kept.",
        kind: MetricType::COUNTER,
        labels: &["target", "request", "check"],
        fill: Fill::Target(|x, out| {
            per_request(x, out, "check", CheckKind::ALL.map(CheckKind::name), |r| r.checks);
        }),
    },
    Family {
        name: "soakd_errors_total",
        help: "Failures by kind: one per request lost, or one per failed connect.",
        kind: MetricType::COUNTER,
        labels: &["target", "kind"],
        fill: Fill::Target(|x, out| {
            for k in ErrorKind::ALL {
                out.push(value(
                    x.kind,
                    &[("target", x.t), ("kind", k.name())],
                    x.c.errors_of(k) as f64,
                ));
            }
        }),
    },
    Family {
        name: "soakd_request_duration_seconds",
        help: "Request latency: from the due time in paced and open-loop modes, from the write in closed loop.",
        kind: MetricType::HISTOGRAM,
        labels: &["target", "request"],
        fill: Fill::Target(|x, out| {
            for r in &x.w.requests {
                out.push(histogram(&[("target", x.t), ("request", &r.name)], &r.latency));
            }
        }),
    },
    Family {
        name: "soakd_connect_duration_seconds",
        help: "TCP connect time.",
        kind: MetricType::HISTOGRAM,
        labels: &["target"],
        fill: Fill::Target(|x, out| {
            out.push(histogram(&[("target", x.t)], &x.w.connect));
        }),
    },
    Family {
        name: "soakd_schedule_lag_seconds",
        help: "Due time to written (paced and open-loop modes): the load generator's own health.",
        kind: MetricType::HISTOGRAM,
        labels: &["target"],
        fill: Fill::Target(|x, out| {
            out.push(histogram(&[("target", x.t)], &x.w.lag));
        }),
    },
    Family {
        name: "soakd_tls_handshake_duration_seconds",
        help: "TLS handshake time, from the TCP connect to the finished handshake (https targets).",
        kind: MetricType::HISTOGRAM,
        labels: &["target"],
        fill: Fill::Target(|x, out| out.push(histogram(&[("target", x.t)], &x.w.tls_handshake))),
    },
    Family {
        name: "soakd_tls_handshakes_total",
        help: "Completed TLS handshakes, by whether the session was resumed.",
        kind: MetricType::COUNTER,
        labels: &["target", "resumed"],
        fill: Fill::Target(|x, out| {
            for (i, resumed) in ["false", "true"].into_iter().enumerate() {
                out.push(value(
                    x.kind,
                    &[("target", x.t), ("resumed", resumed)],
                    x.c.tls_handshakes[i] as f64,
                ));
            }
        }),
    },
    Family {
        name: "soakd_sent_bytes_total",
        help: "Bytes written.",
        kind: MetricType::COUNTER,
        labels: &["target"],
        fill: Fill::Target(|x, out| {
            out.push(x.one(x.c.bytes_sent));
        }),
    },
    Family {
        name: "soakd_received_bytes_total",
        help: "Bytes read.",
        kind: MetricType::COUNTER,
        labels: &["target"],
        fill: Fill::Target(|x, out| {
            out.push(x.one(x.c.bytes_received));
        }),
    },
    Family {
        name: "soakd_request_duration_window_seconds",
        help: "Exact HDR latency quantiles over the last 10 s (count and sum since start); one instance's view, not aggregatable across instances.",
        // A summary, not a gauge: it is what sliding-window quantiles are in
        // the exposition format, and promtool rejects a quantile label on
        // anything else.
        kind: MetricType::SUMMARY,
        labels: &["target"],
        fill: Fill::Target(|x, out| {
            let mut m = proto::Metric::from_label(labels(&[("target", x.t)]));
            let mut summary = proto::Summary::default();
            summary.set_sample_count(x.w.latency.count);
            summary.set_sample_sum(x.w.latency.sum);
            summary.set_quantile(
                WINDOW_QUANTILES
                    .iter()
                    .zip(x.w.window)
                    .map(|((q, _), v)| {
                        let mut quantile = proto::Quantile::default();
                        quantile.set_quantile(*q);
                        quantile.set_value(v);
                        quantile
                    })
                    .collect(),
            );
            m.set_summary(summary);
            out.push(m);
        }),
    },
    Family {
        name: "soakd_healthy",
        help: "1 while every worker loop checked in within the last 5 s, else 0 (what /healthz reports).",
        kind: MetricType::GAUGE,
        labels: &[],
        fill: Fill::Global(|kind, snap, out| {
            out.push(value(kind, &[], if snap.healthy { 1.0 } else { 0.0 }));
        }),
    },
    Family {
        name: "soakd_config_reloads_total",
        help: "Config file reloads (SIGHUP) by result.",
        kind: MetricType::COUNTER,
        labels: &["result"],
        fill: Fill::Global(|kind, snap, out| {
            out.push(value(kind, &[("result", "success")], snap.reloads[0] as f64));
            out.push(value(kind, &[("result", "failure")], snap.reloads[1] as f64));
        }),
    },
    Family {
        name: "soakd_config_last_reload_success_timestamp_seconds",
        help: "Unix time of the last successful config load (the start counts).",
        kind: MetricType::GAUGE,
        labels: &[],
        fill: Fill::Global(|kind, snap, out| {
            out.push(value(kind, &[], snap.last_reload_success));
        }),
    },
    Family {
        name: "soakd_threshold_passing",
        help: "1 while the threshold holds over --threshold-window (default the whole run), else 0; target=\"*\" for a run-wide threshold.",
        kind: MetricType::GAUGE,
        labels: &["target", "threshold"],
        fill: Fill::Global(|kind, snap, out| {
            for (target, threshold, passing) in &snap.thresholds {
                out.push(value(
                    kind,
                    &[("target", target), ("threshold", threshold)],
                    if *passing { 1.0 } else { 0.0 },
                ));
            }
        }),
    },
    Family {
        name: "soakd_build_info",
        help: "Always 1; the version label says which soakd is running.",
        kind: MetricType::GAUGE,
        labels: &["version"],
        fill: Fill::Global(|kind, _, out| {
            out.push(value(kind, &[("version", env!("CARGO_PKG_VERSION"))], 1.0));
        }),
    },
    Family {
        name: "soakd_shard_info",
        help: "Always 1; which share of the plan this process runs (--shard I/N; 0 of 1 unsharded).",
        kind: MetricType::GAUGE,
        labels: &["shard", "shards"],
        fill: Fill::Global(|kind, snap, out| {
            out.push(value(
                kind,
                &[("shard", &snap.shard[0]), ("shards", &snap.shard[1])],
                1.0,
            ));
        }),
    },
    Family {
        name: "soakd_target_process_resident_memory_bytes",
        help: "Resident memory of a process of the server under test (--target-pid).",
        kind: MetricType::GAUGE,
        labels: &["target", "pid"],
        fill: Fill::Target(|x, out| {
            for (pid, p) in x.procs {
                out.push(value(x.kind, &[("target", x.t), ("pid", pid)], p.rss_bytes));
            }
        }),
    },
    Family {
        name: "soakd_target_process_cpu_seconds_total",
        help: "User and system CPU time of a process of the server under test (--target-pid).",
        kind: MetricType::COUNTER,
        labels: &["target", "pid"],
        fill: Fill::Target(|x, out| {
            for (pid, p) in x.procs {
                out.push(value(x.kind, &[("target", x.t), ("pid", pid)], p.cpu_seconds));
            }
        }),
    },
    Family {
        name: "soakd_target_process_open_fds",
        help: "Open file descriptors of a process of the server under test (--target-pid).",
        kind: MetricType::GAUGE,
        labels: &["target", "pid"],
        fill: Fill::Target(|x, out| {
            for (pid, p) in x.procs {
                if let Some(fds) = p.open_fds {
                    out.push(value(x.kind, &[("target", x.t), ("pid", pid)], fds));
                }
            }
        }),
    },
];

/// One series per request of the target and name of a closed set (`code`,
/// `check`), valued from that request's counts in the set's order.
fn per_request<const N: usize>(
    x: &Series<'_>,
    out: &mut Vec<proto::Metric>,
    label: &str,
    names: [&str; N],
    counts: fn(&RequestSnapshot) -> [u64; N],
) {
    for r in &x.w.requests {
        for (name, n) in names.iter().zip(counts(r)) {
            out.push(value(
                x.kind,
                &[("target", x.t), ("request", &r.name), (label, name)],
                n as f64,
            ));
        }
    }
}
