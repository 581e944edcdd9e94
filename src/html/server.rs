//! The page's server section: a chart per watch (every series of it, the
//! server's own figures over time, its restarts marked with the run's
//! other events) and the table of the series' values, slopes, drifts and
//! restarts, with the sources' reads and failures. Nothing for a report
//! without a server watch.

use std::fmt::Write as _;

use super::svg::{Chart, Series, Unit, esc};
use super::{over_time, points, time_chart};
use crate::report::Report;
use crate::stats::trends_text::{show, show_value};

/// Colours of a watch's series, in turn.
const PALETTE: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// The chart's axis for a series' unit.
fn axis(unit: &str) -> Unit {
    match unit {
        "bytes" => Unit::Bytes,
        "seconds" => Unit::Seconds,
        _ => Unit::Count,
    }
}

/// One chart per watch, its series drawn from the timeline's points.
pub(super) fn charts(r: &Report) -> Vec<(Chart, String)> {
    let Some(server) = &r.server else { return Vec::new() };
    let table = &r.timeline.series.series;
    if points(r).is_empty() || table.is_empty() {
        return Vec::new();
    }
    let mut watches: Vec<&str> = Vec::new();
    for s in table {
        if !watches.contains(&s.watch.as_str()) {
            watches.push(&s.watch);
        }
    }
    watches
        .into_iter()
        .map(|w| {
            let mut series = Vec::new();
            let mut unit = "1";
            for (col, info) in table.iter().enumerate().filter(|(_, s)| s.watch == w) {
                unit = &info.unit;
                let name = if info.labels.is_empty() {
                    info.source.clone()
                } else {
                    info.label_text()
                };
                series.push(Series {
                    name,
                    color: PALETTE[series.len() % PALETTE.len()],
                    dashed: false,
                    points: over_time(r, |p| p.watch.get(col).copied().flatten()),
                });
            }
            let mut chart = time_chart(&format!("Server: {w} ({unit})"), axis(unit), series);
            chart.log_y = false;
            let restarts: usize = server
                .series
                .iter()
                .filter(|s| s.info.watch == w)
                .map(|s| s.info.restarts.len())
                .sum();
            (
                chart,
                format!(
                    "The server's own {w}, as the watch read it (one line per series){}; restarts are marked with the run's events.",
                    if restarts > 0 { format!("; {restarts} restart(s), no slope fitted across one") } else { String::new() }
                ),
            )
        })
        .collect()
}

/// The series table and the sources.
pub(super) fn table(s: &mut String, r: &Report) {
    let Some(server) = &r.server else { return };
    let _ = write!(
        s,
        "<h2>Server</h2><p class=note>The server's own figures (its exposition, Prometheus, /proc or its cgroup); slopes and drifts after the ramp and the warmup ({} s), fitted between restarts.{}</p>",
        server.steady_from_seconds.round(),
        if server.dropped_series > 0 {
            format!(" {} more series were not kept (past the cap).", server.dropped_series)
        } else {
            String::new()
        }
    );
    s.push_str("<table><tr><th>series</th><th>last</th><th>first</th><th>max</th><th>slope (95% interval)</th><th>significant</th><th>drift</th><th>restarts</th></tr>");
    for x in &server.series {
        let (i, t) = (&x.info, &x.trend);
        let v = |v: Option<f64>| v.map_or("-".into(), |v| show_value(&i.unit, v));
        let sl = |v: Option<f64>| v.map_or("-".into(), |v| show(&t.slope.unit, v));
        let slope = match &t.slope.not_judged {
            Some(why) => esc(why),
            None => format!("{} ({} .. {})", sl(t.slope.slope), sl(t.slope.low), sl(t.slope.high)),
        };
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>{}<td>{}</td><td>{}</td></tr>",
            esc(&i.name()),
            v(t.last),
            v(t.first),
            v(t.max),
            slope,
            if t.slope.significant {
                "<td class=fail>yes</td>"
            } else {
                "<td>no</td>"
            },
            t.drift.drift.map_or("-".into(), |d| show("relative", d)),
            i.restarts.len()
        );
    }
    s.push_str(
        "</table><table><tr><th>source</th><th>reads</th><th>failed</th><th>restarts</th><th>at the end</th></tr>",
    );
    for src in &server.sources {
        let failed: Vec<String> = src.failures.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&src.source),
            src.reads,
            if failed.is_empty() {
                "0".into()
            } else {
                esc(&failed.join(", "))
            },
            src.restarts,
            if src.stale { "stale" } else { "answering" }
        );
    }
    s.push_str("</table>");
}
