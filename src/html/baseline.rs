//! The page's part of a run judged live against `--baseline`: each window
//! judged worse (or better) shaded on the latency chart, and the windows in
//! a table, from the report's `baseline` section.

use std::fmt::Write as _;

use super::svg::{Band, Series, Unit, esc, label};
use crate::report::Report;
use crate::report::baseline::{Row, clock};
use crate::stats::judge::Verdict;

/// Latency metrics: the ones whose windows are shaded on the latency chart.
const LATENCY: [&str; 3] = ["p50", "p99", "p999"];

/// One band per window with a latency metric judged worse (red) or, with
/// none worse, better (green).
pub fn bands(r: &Report) -> Vec<Band> {
    let Some(b) = &r.baseline else { return Vec::new() };
    b.windows
        .iter()
        .filter_map(|w| {
            let latency: Vec<&Row> = w.rows.iter().filter(|x| LATENCY.contains(&x.metric.as_str())).collect();
            let worse: Vec<String> = latency
                .iter()
                .filter(|x| x.verdict == Verdict::Worse)
                .map(|x| describe(x))
                .collect();
            let better: Vec<String> = latency
                .iter()
                .filter(|x| x.verdict == Verdict::Better)
                .map(|x| describe(x))
                .collect();
            let (class, color, what) = if !worse.is_empty() {
                (
                    "worse",
                    "#fbe3d6",
                    format!("worse than the baseline: {}", worse.join(", ")),
                )
            } else if !better.is_empty() {
                (
                    "better",
                    "#dff0d8",
                    format!("better than the baseline: {}", better.join(", ")),
                )
            } else {
                return None;
            };
            Some(Band {
                from: w.t,
                to: w.t + w.seconds,
                class,
                color,
                title: format!("{} {:.0}-{:.0} s: {what}", w.workload, w.t, w.t + w.seconds),
            })
        })
        .collect()
}

/// The baseline's p50 and p99 each window was judged against, as dashed
/// steps over the run (flat for a baseline without stages; the stage's
/// figures at the same elapsed time for one with). With several workloads,
/// the first one's (the chart sums all workloads). Empty without windows.
pub fn reference_lines(r: &Report, colors: [&'static str; 2]) -> Vec<Series> {
    let Some(b) = &r.baseline else { return Vec::new() };
    let first = b.pairs.first().map(|p| p.workload.as_str());
    ["p50", "p99"]
        .iter()
        .zip(colors)
        .map(|(metric, color)| {
            let mut points = Vec::new();
            for w in b.windows.iter().filter(|w| Some(w.workload.as_str()) == first) {
                let v = w
                    .rows
                    .iter()
                    .find(|x| x.metric == *metric)
                    .and_then(|x| x.baseline)
                    .unwrap_or(f64::NAN);
                points.push((w.t, v));
                points.push((w.t + w.seconds, v));
            }
            Series {
                name: format!("{metric} (baseline)"),
                color,
                dashed: true,
                points,
            }
        })
        .filter(|s| !s.points.is_empty())
        .collect()
}

fn describe(x: &Row) -> String {
    match x.change {
        Some(c) => format!("{} {:+.0}%", x.metric, c * 100.0),
        None => x.metric.clone(),
    }
}

fn value(metric: &str, v: Option<f64>) -> String {
    match (metric, v) {
        (_, None) => "-".into(),
        ("rps", Some(v)) => format!("{v:.1}"),
        ("error_rate", Some(v)) => format!("{:.3}%", v * 100.0),
        (_, Some(v)) => label(v, Unit::Seconds),
    }
}

/// The section: what was compared, where the loads differ, and one row per
/// window with each metric's window value, change and verdict.
pub fn section(s: &mut String, r: &Report) {
    let Some(b) = &r.baseline else { return };
    let _ = write!(
        s,
        "<h2>Against the baseline, window by window</h2><p>{} · windows of {} · tolerance {:.0}%{}{}</p>",
        esc(&b.report),
        label(b.window_seconds, Unit::Seconds),
        b.tolerance * 100.0,
        if b.staged {
            " · each window against the baseline at the same elapsed time"
        } else {
            " · each window against the baseline's whole run"
        },
        if b.hdr_log.is_some() {
            " · rank test on the baseline's intervals"
        } else {
            " · tolerance and floors only (no baseline interval log)"
        }
    );
    if !b.load_differs.is_empty() {
        let _ = write!(
            s,
            "<p class=fail>The loads differ ({}): a comparison, not a regression verdict.</p>",
            esc(&b.load_differs.join("; "))
        );
    }
    for m in b.metrics.iter().filter(|m| m.first_worse_at.is_some()) {
        let _ = write!(
            s,
            "<p class=fail>{} {}: regression started at {} ({} of {} windows worse).</p>",
            esc(&m.workload),
            esc(&m.metric),
            clock(m.first_worse_at.unwrap_or(0.0)),
            m.worse,
            m.better + m.same + m.worse
        );
    }
    let Some(first) = b.windows.first() else {
        s.push_str("<p class=note>No window was judged (the run was shorter than half a window).</p>");
        return;
    };
    s.push_str("<table><tr><th>from</th><th>workload</th>");
    for row in &first.rows {
        let _ = write!(s, "<th>{}</th>", esc(&row.metric));
    }
    s.push_str("</tr>");
    for w in &b.windows {
        let _ = write!(s, "<tr><td>{}</td><td>{}</td>", clock(w.t), esc(&w.workload));
        for x in &w.rows {
            let class = match x.verdict {
                Verdict::Worse => " class=fail",
                Verdict::Better => " class=pass",
                Verdict::Same => "",
            };
            let change = x
                .change
                .map_or(String::new(), |c| format!(" ({c:+.0}%)", c = c * 100.0));
            let _ = write!(
                s,
                "<td{class} title=\"{}\">{}{change} {}</td>",
                x.method.name(),
                value(&x.metric, x.new),
                x.verdict.name()
            );
        }
        s.push_str("</tr>");
    }
    s.push_str("</table>");
    if b.windows_dropped > 0 {
        let _ = write!(
            s,
            "<p class=note>{} earlier windows are not listed (the report keeps the last {}).</p>",
            b.windows_dropped,
            crate::report::baseline::MAX_WINDOWS
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn worse_windows_are_shaded_and_listed_with_the_reference_drawn() {
        let row = |metric: &str, b: f64, n: f64, verdict: &str| json!({"metric": metric, "baseline": b, "new": n, "change": n / b - 1.0, "verdict": verdict, "method": "rank_test"});
        let r: Report = serde_json::from_value(json!({
            "duration_seconds": 120.0,
            "workloads": [{"name": "api"}],
            "baseline": {"report": "base.json", "hdr_log": "base.hlog", "window_seconds": 60.0, "tolerance": 0.1,
                "pairs": [{"workload": "api", "baseline": "api"}],
                "metrics": [{"workload": "api", "metric": "p99", "same": 1, "worse": 1, "first_worse_at": 60.0}],
                "windows": [
                    {"t": 0.0, "seconds": 60.0, "workload": "api", "rows": [row("p50", 0.001, 0.001, "same"), row("p99", 0.002, 0.002, "same")]},
                    {"t": 60.0, "seconds": 60.0, "workload": "api", "rows": [row("p50", 0.001, 0.003, "worse"), row("p99", 0.002, 0.005, "worse")]}
                ]}
        }))
        .unwrap();
        let b = bands(&r);
        assert_eq!(b.len(), 1, "{b:?}");
        assert_eq!((b[0].from, b[0].to), (60.0, 120.0));
        assert!(b[0].title.contains("p50 +200%, p99 +150%"), "{}", b[0].title);
        let lines = reference_lines(&r, ["#000", "#111"]);
        assert_eq!(lines.len(), 2);
        assert!(lines.iter().all(|l| l.dashed));
        assert_eq!(
            lines[1].points,
            [(0.0, 0.002), (60.0, 0.002), (60.0, 0.002), (120.0, 0.002)]
        );
        let mut s = String::new();
        section(&mut s, &r);
        assert!(s.contains("api p99: regression started at 1m"), "{s}");
        assert!(
            s.contains("<td class=fail title=\"rank_test\">3ms (+200%) worse</td>"),
            "{s}"
        );
        let page = super::super::render(&super::super::Inputs {
            report: &r,
            baseline: None,
            spectrum: None,
            verdicts: None,
        });
        assert!(page.contains("class=\"worse\"") && page.contains("p99 (baseline)"));
    }
}
