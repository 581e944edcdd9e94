//! The page's trends: the report's `trends` table (slopes and drifts,
//! significant or not) and the process charts drawn from the timeline's
//! samples (the server's memory and descriptors via `--target-pid`,
//! soakd's own memory beside it).
//!
//! Kept apart from the page's other sections so the report's typed
//! reading can change there without touching this, and so a report
//! without trends (an older soakd, a merged report) simply skips it.

use std::fmt::Write as _;

use serde_json::Value;

use super::svg::{Chart, Unit, esc};
use super::{Line, P50, P99, PMAX, both, points, time_chart};

/// The sum of one field over a point's `targets` (`None` without any).
fn targets_sum(p: &Value, field: &str) -> Option<f64> {
    let t = p.get("targets")?.as_array().filter(|t| !t.is_empty())?;
    t.iter().map(|x| x.get(field).and_then(Value::as_f64)).sum()
}

/// The memory chart (target RSS and soakd's RSS) and the target's
/// descriptors chart; nothing when no point has a sample.
pub(super) fn charts(r: &Value, base: Option<&Value>) -> Vec<(Chart, String)> {
    let sampled = |r: &Value| {
        points(r)
            .iter()
            .any(|p| p.get("targets").is_some() || p.get("soakd_rss_bytes").is_some_and(Value::is_number))
    };
    if !sampled(r) {
        return Vec::new();
    }
    let rss = |p: &Value| targets_sum(p, "rss_bytes");
    let own = |p: &Value| p.get("soakd_rss_bytes").and_then(Value::as_f64);
    let fds = |p: &Value| targets_sum(p, "open_fds");
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

/// The trends table (nothing for a report without trends).
pub(super) fn table(s: &mut String, r: &Value) {
    let Some(tr) = r.get("trends").filter(|t| t.get("slopes").is_some()) else {
        return;
    };
    let _ = write!(
        s,
        "<h2>Trends</h2><p class=note>After the ramp and the warmup ({} s); significant at p &lt; {}.</p>",
        tr.get("steady_from_seconds")
            .and_then(Value::as_f64)
            .unwrap_or(0.0)
            .round(),
        tr.get("significance").and_then(Value::as_f64).unwrap_or(0.01)
    );
    s.push_str(
        "<table><tr><th>trend</th><th>value</th><th>95% interval / windows</th><th>p</th><th>significant</th></tr>",
    );
    let sig = |x: &Value| match x.get("significant").and_then(Value::as_bool) {
        Some(true) => "<td class=fail>yes</td>",
        _ => "<td>no</td>",
    };
    let p = |x: &Value| {
        x.get("p_value")
            .and_then(Value::as_f64)
            .map_or("-".into(), |p| format!("{p:.2e}"))
    };
    for x in tr.get("slopes").and_then(Value::as_array).into_iter().flatten() {
        let metric = x.get("metric").and_then(Value::as_str).unwrap_or("");
        let bytes = x.get("unit").and_then(Value::as_str) == Some("bytes/s");
        let show = |k: &str| {
            x.get(k)
                .and_then(Value::as_f64)
                .map_or("-".into(), |v| per_time(v, bytes))
        };
        if let Some(why) = x.get("not_judged").and_then(Value::as_str) {
            let _ = write!(s, "<tr><td>{}</td><td colspan=4>{}</td></tr>", esc(metric), esc(why));
            continue;
        }
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{} .. {}</td><td>{}</td>{}</tr>",
            esc(metric),
            show("slope"),
            show("low"),
            show("high"),
            p(x),
            sig(x)
        );
    }
    for x in tr.get("drifts").and_then(Value::as_array).into_iter().flatten() {
        let metric = x.get("metric").and_then(Value::as_str).unwrap_or("");
        if let Some(why) = x.get("not_judged").and_then(Value::as_str) {
            let _ = write!(s, "<tr><td>{}</td><td colspan=4>{}</td></tr>", esc(metric), esc(why));
            continue;
        }
        let w = |k: &str| {
            let a = x.get(k).and_then(Value::as_array);
            let at = |i: usize| a.and_then(|a| a.get(i)).and_then(Value::as_f64).unwrap_or(0.0);
            format!("{:.0}–{:.0} s", at(0), at(1))
        };
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{} → {}</td><td>{}</td>{}</tr>",
            esc(metric),
            x.get("drift")
                .and_then(Value::as_f64)
                .map_or("-".into(), |d| format!("{:+.1}%", d * 100.0)),
            w("first_window"),
            w("last_window"),
            p(x),
            sig(x)
        );
    }
    s.push_str("</table>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_and_table_from_samples() {
        let r = serde_json::json!({
            "timeline": {"points": [
                {"t": 0.0, "seconds": 1.0, "targets": [{"pid": 1, "rss_bytes": 1048576, "cpu_seconds": 0.5, "open_fds": 10}], "soakd_rss_bytes": 2097152},
                {"t": 1.0, "seconds": 1.0, "targets": [{"pid": 1, "rss_bytes": 2097152, "cpu_seconds": 0.6, "open_fds": 11}], "soakd_rss_bytes": 2097152}
            ]},
            "trends": {"steady_from_seconds": 3.0, "significance": 0.01,
                "slopes": [{"metric": "target_rss_slope", "unit": "bytes/s", "slope": 34952.5, "low": 30000.0, "high": 40000.0, "p_value": 1e-9, "significant": true},
                           {"metric": "soakd_rss_slope", "unit": "bytes/s", "not_judged": "too few points"}],
                "drifts": [{"metric": "p99_drift", "unit": "seconds", "first_window": [3.0, 10.0], "last_window": [20.0, 27.0], "drift": 0.25, "p_value": 0.001, "significant": true}]}
        });
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
        // Nothing sampled, nothing drawn; no trends, no table.
        let old = serde_json::json!({"timeline": {"points": [{"t": 0.0, "seconds": 1.0}]}});
        assert!(charts(&old, None).is_empty());
        let mut s = String::new();
        table(&mut s, &old);
        assert!(s.is_empty());
    }
}
