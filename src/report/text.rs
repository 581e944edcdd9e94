//! The report as text for people: the summary printed at the end of a run
//! (and on SIGUSR1), and the units figures are shown in.

use std::fmt::Write as _;

use super::{Report, RequestReport};
use crate::plan::Metric;

impl Report {
    /// The human-readable summary printed to stderr at exit.
    pub fn summary(&self) -> String {
        let f = &self.all;
        let c = &f.connections;
        let r = &f.requests;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "\nsoakd: {:.1} s, {} workload(s)",
            self.duration_seconds,
            self.workloads.len()
        );
        self.resumed_line(&mut s);
        let _ = writeln!(
            s,
            "  connections   desired {}  peak open {}  open at end {}  opened {}  closed {}  ramp {}",
            c.desired,
            c.peak_open,
            c.open_at_end,
            c.opened,
            c.closed,
            c.ramp_seconds
                .map_or("never complete".to_string(), |v| format!("{v:.2} s"))
        );
        let b = &c.closed_by_reason;
        let _ = writeln!(
            s,
            "  closes        server {}  error {}  churn {}  shutdown {}",
            b.get("server_close"),
            b.get("error"),
            b.get("churn"),
            b.get("shutdown")
        );
        let _ = writeln!(
            s,
            "  requests      sent {}  completed {}  failed {}  missed {}  in flight {}  {:.1}/s  {:.1} per connection",
            r.sent, r.completed, r.failed, r.missed, r.in_flight_at_end, r.per_second, f.requests_per_connection
        );
        // WebSocket replies are not HTTP responses: a run of WebSocket
        // workloads only shows them on its `ws` line, not as `2xx`.
        if !self.workloads.iter().all(|w| w.ws.is_some()) {
            let classes: Vec<String> = f.responses.iter().map(|(k, n)| format!("{k} {n}")).collect();
            let _ = writeln!(s, "  responses     {}", classes.join("  "));
        }
        for w in &self.workloads {
            let h = &w.http;
            if h.requested.as_deref() == Some("2") || h.version.as_deref() == Some("2") {
                let _ = writeln!(
                    s,
                    "  http          {}: requested {}  negotiated {}  streams {} per connection (server limit {})  goaways {}  resets {}  retried {}{}",
                    w.name,
                    h.requested.as_deref().unwrap_or("-"),
                    h.version.as_deref().unwrap_or("-"),
                    h.streams,
                    h.streams_limit.map_or("none".into(), |l| l.to_string()),
                    h.goaways.values().sum::<u64>(),
                    h.resets.values().sum::<u64>(),
                    h.retried,
                    h.ping.as_ref().map_or(String::new(), |p| format!(
                        "  pings {} (acked {}, rtt p99 {})",
                        p.sent,
                        p.acked,
                        p.rtt_seconds.p99.map_or("-".into(), |s| format!("{:.3}ms", s * 1000.0))
                    ))
                );
            }
            if let Some(g) = &h.grpc {
                let _ = writeln!(
                    s,
                    "  grpc          {}: {}  {}",
                    w.name,
                    g.method,
                    super::http::calls_summary(&g.calls)
                );
                // A mix of methods: each call's own.
                for r in w.by_request.iter().filter(|_| w.by_request.len() > 1) {
                    if let Some(calls) = &r.grpc_calls {
                        let _ = writeln!(s, "                  {}  {}", r.name, super::http::calls_summary(calls));
                    }
                }
            }
            if let Some(st) = h.grpc.as_ref().and_then(|g| g.streams.as_ref()) {
                s.push_str(&st.summary(&w.name));
            }
            if let Some(ws) = &w.ws {
                s.push_str(&ws.summary(&w.name));
            }
        }
        if let Some(tls) = &f.tls {
            let _ = writeln!(
                s,
                "  tls           {} {}  handshakes {} (resumed {})  {}",
                tls.version.as_deref().unwrap_or("-"),
                tls.cipher.as_deref().unwrap_or("-"),
                tls.handshakes,
                tls.resumed,
                if tls.verified {
                    "certificates verified"
                } else {
                    "CERTIFICATES NOT VERIFIED (--insecure)"
                }
            );
        }
        let failed = f.checks.nonzero();
        if !failed.is_empty() {
            let _ = writeln!(s, "  check failures {}", failed.join("  "));
        }
        let listed = f.errors.nonzero();
        let _ = writeln!(
            s,
            "  errors        {}",
            if listed.is_empty() {
                "none".to_string()
            } else {
                listed.join("  ")
            }
        );
        let _ = writeln!(
            s,
            "  {:<14}{:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "", "min", "mean", "p50", "p90", "p99", "p99.9", "max"
        );
        for (name, p) in [
            ("latency", &f.latency_seconds),
            ("schedule lag", &f.schedule_lag_seconds),
            ("connect", &f.connect_seconds),
            ("tls handshake", &f.tls_handshake_seconds),
        ] {
            if name == "tls handshake" && f.tls.is_none() {
                continue;
            }
            if p.count == 0 {
                let _ = writeln!(s, "  {name:<14}{:>9}", "-");
                continue;
            }
            let _ = writeln!(
                s,
                "  {name:<14}{:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
                human(p.min),
                human(p.mean),
                human(p.p50),
                human(p.p90),
                human(p.p99),
                human(p.p999),
                human(p.max)
            );
        }
        self.request_table(&mut s);
        if let Some(why) = &self.aborted {
            let _ = writeln!(s, "  ABORTED       {why}");
        }
        self.outage_lines(&mut s);
        s.push_str(&self.trends.summary());
        if let Some(server) = &self.server {
            server.summary(&mut s);
        }
        if !self.thresholds.is_empty() {
            let _ = writeln!(s, "  thresholds");
            for t in &self.thresholds {
                let _ = writeln!(
                    s,
                    "    {:<4}  {:<28} {:<20} measured {}{}",
                    if t.pass { "PASS" } else { "FAIL" },
                    t.threshold,
                    t.workload.as_deref().unwrap_or("(all workloads)"),
                    match &t.unit {
                        Some(u) => t
                            .measured
                            .map_or("nothing".into(), |v| crate::stats::trends_text::show_watched(
                                &t.metric, u, v
                            )),
                        None => threshold_value(&t.metric, t.measured),
                    },
                    t.note.as_ref().map_or(String::new(), |n| format!(", {n}"))
                );
            }
        }
        if let Some(b) = &self.baseline {
            b.summary(&mut s);
        }
        s
    }

    /// A run continued from its `--state` after restarts: how many, the
    /// run time they lost and when each was (UTC clock time from the
    /// timeline's start, and run time; run time only when the report has
    /// no start time, e.g. a merged one).
    fn resumed_line(&self, s: &mut String) {
        if self.resumed.is_empty() {
            return;
        }
        let n = self.resumed.len();
        let lost: f64 = self.resumed.iter().map(|r| r.lost_seconds).sum();
        let start = self.timeline.started_at_unix_seconds;
        let each: Vec<String> = self
            .resumed
            .iter()
            .map(|r| {
                let into = format!("{:.1} s into the run", r.at);
                if start > 0.0 {
                    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(start + r.at);
                    let clock = humantime::format_rfc3339_seconds(at).to_string();
                    format!("{} UTC, {into}", &clock[11..19])
                } else {
                    into
                }
            })
            .collect();
        let _ = writeln!(
            s,
            "  resumed       {n} restart{}, {lost:.1} s lost (at {})",
            if n == 1 { "" } else { "s" },
            each.join("; ")
        );
    }

    /// Per workload with a mix (or checks that failed): its requests,
    /// slowest p99 first, so the endpoint that degrades leads.
    fn request_table(&self, s: &mut String) {
        for w in &self.workloads {
            let any_failed = w.by_request.iter().any(|r| r.checks.iter().any(|(_, n)| n > 0));
            if w.by_request.len() < 2 && !any_failed {
                continue;
            }
            let mut rows: Vec<&RequestReport> = w.by_request.iter().collect();
            rows.sort_by(|a, b| {
                b.latency_seconds
                    .p99
                    .unwrap_or(-1.0)
                    .total_cmp(&a.latency_seconds.p99.unwrap_or(-1.0))
            });
            let _ = writeln!(s, "  requests of {} (slowest p99 first)", w.name);
            let _ = writeln!(
                s,
                "    {:<28}{:>10} {:>9} {:>9} {:>9} {:>8} {:>8}  check failures",
                "", "count", "/s", "p50", "p99", "4xx", "5xx"
            );
            for r in rows {
                let failed = r.checks.nonzero();
                let _ = writeln!(
                    s,
                    "    {:<28}{:>10} {:>9.1} {:>9} {:>9} {:>8} {:>8}  {}",
                    r.name,
                    r.count,
                    r.per_second,
                    human(r.latency_seconds.p50),
                    human(r.latency_seconds.p99),
                    r.responses.get("4xx"),
                    r.responses.get("5xx"),
                    if failed.is_empty() {
                        "-".to_string()
                    } else {
                        failed.join("  ")
                    }
                );
            }
        }
    }
}

/// A measured threshold value in the metric's own unit.
pub fn threshold_value(metric: &str, v: Option<f64>) -> String {
    match (Metric::from_name(metric).map(|m| m.unit()), v) {
        (_, None) => "nothing".into(),
        (Some(crate::plan::threshold::Unit::Seconds), v) => human(v),
        (Some(crate::plan::threshold::Unit::Ratio), Some(v)) => format!("{:.3}%", v * 100.0),
        (Some(u), Some(v)) if Metric::from_name(metric).is_some_and(Metric::is_trend) => {
            crate::plan::threshold::show_trend(u, v)
        }
        (_, Some(v)) if v.fract() == 0.0 => format!("{v:.0}"),
        (_, Some(v)) => format!("{v:.1}"),
    }
}

/// Formats seconds with a unit that keeps 3 significant figures readable.
pub fn human(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(v) if v < 1e-3 => format!("{:.0}µs", v * 1e6),
        Some(v) if v < 1.0 => format!("{:.2}ms", v * 1e3),
        Some(v) => format!("{v:.2}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restarts_are_listed_with_their_clock_time() {
        // 2026-12-03T12:00:00Z, restarted 184 s and 7,800 s in.
        let r: Report = serde_json::from_value(serde_json::json!({
            "timeline": {"started_at": "2026-12-03T12:00:00Z", "started_at_unix_seconds": 1_796_299_200.0,
                         "interval_seconds": 1.0, "max_points": 1000, "points": []},
            "resumed": [{"at": 184.0, "lost_seconds": 3.1}, {"at": 7_800.5, "lost_seconds": 1.2}]
        }))
        .unwrap();
        let s = r.summary();
        assert!(
            s.contains("  resumed       2 restarts, 4.3 s lost (at 12:03:04 UTC, 184.0 s into the run; 14:10:00 UTC, 7800.5 s into the run)\n"),
            "{s}"
        );
        // A report without a start time (merged): run time only.
        let r: Report = serde_json::from_value(serde_json::json!({
            "resumed": [{"at": 50.4, "lost_seconds": 2.0}]
        }))
        .unwrap();
        assert!(
            r.summary()
                .contains("  resumed       1 restart, 2.0 s lost (at 50.4 s into the run)\n"),
            "{}",
            r.summary()
        );
        // A run in one piece has no such line.
        let r: Report = serde_json::from_value(serde_json::json!({})).unwrap();
        assert!(!r.summary().contains("resumed"));
    }
}
