//! The page's trends: the report's `trends` table (slopes and drifts,
//! significant or not, run-wide and per workload) and the process charts drawn from the timeline's
//! samples (the server's memory and descriptors via `--target-pid`,
//! soakd's own memory beside it).
//!
//! Kept apart from the page's other sections so the report's typed
//! reading can change there without touching this, and so a report
//! without trends (an older soakd, a merged report) simply skips it.

use std::fmt::Write as _;

use super::svg::{Chart, Unit, esc};
use super::{Line, P50, P99, PMAX, both, points, time_chart};
use crate::report::Report;
use crate::stats::PointJson;
use crate::stats::trends::Drift;

/// The sum of one field over a point's `--target-pid` samples (`None`
/// without any).
fn targets_sum(p: &PointJson, field: impl Fn(&crate::stats::ProcSample) -> Option<u64>) -> Option<f64> {
    if p.targets.is_empty() {
        return None;
    }
    p.targets.iter().map(|t| field(t).map(|v| v as f64)).sum()
}

/// The memory chart (target RSS and soakd's RSS) and the target's
/// descriptors chart; nothing when no point has a sample.
pub(super) fn charts(r: &Report, base: Option<&Report>) -> Vec<(Chart, String)> {
    let sampled = points(r)
        .iter()
        .any(|p| !p.targets.is_empty() || p.soakd_rss_bytes.is_some());
    if !sampled {
        return Vec::new();
    }
    let rss = |p: &PointJson| targets_sum(p, |t| Some(t.rss_bytes));
    let own = |p: &PointJson| p.soakd_rss_bytes.map(|v| v as f64);
    let fds = |p: &PointJson| targets_sum(p, |t| t.open_fds);
    let memory: [Line<'_>; 2] = [("target RSS", PMAX, &rss), ("soakd RSS", P50, &own)];
    let mut out = vec![(
        time_chart("Memory: the server and soakd", Unit::Bytes, both(r, base, &memory)),
        "Resident memory as sampled once a point: the --target-pid processes summed, and soakd itself (a flat generator is part of a valid soak).".to_string(),
    )];
    if points(r).iter().any(|p| fds(p).is_some()) {
        out.push((
            time_chart(
                "Server descriptors",
                Unit::Count,
                both(r, base, &[("target fds", P99, &fds)]),
            ),
            "Open descriptors of the --target-pid processes, summed.".to_string(),
        ));
    }
    out
}

/// A slope per second in a readable unit per hour or minute.
fn per_time(v: f64, bytes: bool) -> String {
    let (per, secs) = if v.abs() * 60.0 >= if bytes { 1048576.0 } else { 10.0 } {
        ("min", 60.0)
    } else {
        ("h", 3600.0)
    };
    if bytes {
        format!("{}/{per}", super::svg::label(v * secs, Unit::Bytes))
    } else {
        format!("{:.1}/{per}", v * secs)
    }
}

/// A cell with a significance verdict.
fn sig(significant: bool) -> &'static str {
    if significant {
        "<td class=fail>yes</td>"
    } else {
        "<td>no</td>"
    }
}

/// A p-value cell's text.
fn p(v: Option<f64>) -> String {
    v.map_or("-".into(), |p| format!("{p:.2e}"))
}

/// The trends table (nothing for a report without trends).
pub(super) fn table(s: &mut String, r: &Report) {
    let tr = &r.trends;
    if tr.slopes.is_empty() && tr.drifts.is_empty() {
        return;
    }
    let _ = write!(
        s,
        "<h2>Trends</h2><p class=note>After the ramp and the warmup ({} s); significant at p &lt; {}.</p>",
        tr.steady_from_seconds.round(),
        tr.significance
    );
    s.push_str(
        "<table><tr><th>trend</th><th>value</th><th>95% interval / windows</th><th>p</th><th>significant</th></tr>",
    );
    for x in &tr.slopes {
        if let Some(why) = &x.not_judged {
            let _ = write!(s, "<tr><td>{}</td><td colspan=4>{}</td></tr>", esc(&x.metric), esc(why));
            continue;
        }
        let bytes = x.unit == "bytes/s";
        let show = |v: Option<f64>| v.map_or("-".into(), |v| per_time(v, bytes));
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{} .. {}</td><td>{}</td>{}</tr>",
            esc(&x.metric),
            show(x.slope),
            show(x.low),
            show(x.high),
            p(x.p_value),
            sig(x.significant)
        );
    }
    for x in &tr.drifts {
        drift_row(s, "", x);
    }
    for w in &tr.workloads {
        for x in &w.drifts {
            drift_row(s, &w.workload, x);
        }
    }
    s.push_str("</table>");
}

/// One drift's row, its metric prefixed by `workload` when it is one
/// workload's.
fn drift_row(s: &mut String, workload: &str, x: &Drift) {
    let name = if workload.is_empty() {
        esc(&x.metric)
    } else {
        format!("{} {}", esc(workload), esc(&x.metric))
    };
    if let Some(why) = &x.not_judged {
        let _ = write!(s, "<tr><td>{name}</td><td colspan=4>{}</td></tr>", esc(why));
        return;
    }
    let w = |a: [f64; 2]| format!("{:.0}–{:.0} s", a[0], a[1]);
    let verdict = match x.generator_lag {
        Some(lag) if x.excused_by_lag => format!(
            "<td>no: soakd's own lag ({:.2} ms) is half the change or more</td>",
            lag * 1e3
        ),
        _ => sig(x.significant).to_string(),
    };
    let _ = write!(
        s,
        "<tr><td>{name}</td><td>{}</td><td>{} → {}</td><td>{}</td>{verdict}</tr>",
        x.drift.map_or("-".into(), |d| format!("{:+.1}%", d * 100.0)),
        w(x.first_window),
        w(x.last_window),
        p(x.p_value),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_and_table_from_samples() {
        let r = serde_json::json!({
            "timeline": {"started_at": "", "started_at_unix_seconds": 0.0, "interval_seconds": 1.0, "max_points": 1000, "points": [
                {"t": 0.0, "seconds": 1.0, "sent": 0, "completed": 0, "responses": {}, "errors": {}, "open": 0, "open_min": 0, "targets": [{"pid": 1, "rss_bytes": 1048576, "cpu_seconds": 0.5, "open_fds": 10}], "soakd_rss_bytes": 2097152},
                {"t": 1.0, "seconds": 1.0, "sent": 0, "completed": 0, "responses": {}, "errors": {}, "open": 0, "open_min": 0, "targets": [{"pid": 1, "rss_bytes": 2097152, "cpu_seconds": 0.6, "open_fds": 11}], "soakd_rss_bytes": 2097152}
            ]},
            "trends": {"steady_from_seconds": 3.0, "significance": 0.01,
                "slopes": [{"metric": "target_rss_slope", "unit": "bytes/s", "slope": 34952.5, "low": 30000.0, "high": 40000.0, "p_value": 1e-9, "significant": true, "points": 20, "from_seconds": 3.0, "to_seconds": 27.0},
                           {"metric": "soakd_rss_slope", "unit": "bytes/s", "not_judged": "too few points", "significant": false, "points": 0, "from_seconds": 3.0, "to_seconds": 27.0}],
                "drifts": [{"metric": "p99_drift", "unit": "seconds", "first_window": [3.0, 10.0], "last_window": [20.0, 27.0], "drift": 0.25, "p_value": 0.001, "significant": true}],
                "workloads": [{"workload": "api", "drifts": [{"metric": "p50_drift", "unit": "seconds", "first_window": [3.0, 10.0], "last_window": [20.0, 27.0], "drift": 0.5, "p_value": 0.001, "significant": false, "generator_lag": 0.004, "excused_by_lag": true}]}]}
        });
        let typed = |v: serde_json::Value| -> Report {
            let mut v = v;
            v["duration_seconds"] = 1.0.into();
            v["workloads"] = serde_json::json!([]);
            serde_json::from_value(v).expect("a report")
        };
        let r = typed(r);
        let c = charts(&r, None);
        assert_eq!(c.len(), 2);
        let svg = c[0].0.svg();
        assert!(
            svg.contains("target RSS") && svg.contains("soakd RSS") && svg.contains("MiB"),
            "{svg}"
        );
        let mut s = String::new();
        table(&mut s, &r);
        assert!(
            s.contains("2MiB/min") && s.contains("+25.0%") && s.contains("too few points"),
            "{s}"
        );
        assert!(s.contains("3–10 s → 20–27 s"), "{s}");
        // A workload's own drift, excused by soakd's lag.
        assert!(
            s.contains("<td>api p50_drift</td><td>+50.0%</td>") && s.contains("soakd's own lag (4.00 ms)"),
            "{s}"
        );
        // Nothing sampled, nothing drawn; no trends, no table.
        let old = typed(
            serde_json::json!({"timeline": {"started_at": "", "started_at_unix_seconds": 0.0, "interval_seconds": 1.0, "max_points": 1000, "points": [{"t": 0.0, "seconds": 1.0, "sent": 0, "completed": 0, "responses": {}, "errors": {}, "open": 0, "open_min": 0}]}}),
        );
        assert!(charts(&old, None).is_empty());
        let mut s = String::new();
        table(&mut s, &old);
        assert!(s.is_empty());
    }
}
