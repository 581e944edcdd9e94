//! The HTML report: one self-contained page to look at a soak with.
//!
//! `soakd report REPORT.json --html OUT.html` (and `soakd run
//! --html-report`) turn a JSON report into a page a person can open
//! offline, attach to a ticket or archive next to the JSON: the plan, the
//! summary, the thresholds, the verdicts against a baseline, and charts of
//! latency, throughput, errors, connections and schedule lag over time plus
//! the percentile spectrum. It holds no script, no stylesheet link, no
//! font and no image fetched from anywhere: inline CSS and inline SVG
//! only (see [`svg`] for why the charts are drawn by hand).
//!
//! Its input is the typed [`Report`], read through the one reader of
//! report files ([`crate::report::read`]): the page is built from files
//! (today's run, a baseline from last week, maybe from an older soakd), and
//! that reader's defaults make what an older report lacks zero, `null`
//! (shown as a dash) or empty. Its size follows the report's
//! timeline, which is bounded (`stats::Timeline`), so a week's page is as
//! small as a day's.
//!
//! The time charts sum every workload (the timeline is summed); the
//! percentile spectrum is, in order of preference, that of the HDR interval
//! log given (all its intervals and tags merged), of the report's full-run
//! histograms (`workloads[].histograms.latency`, merged), or the report's
//! few percentiles.

mod baseline;
mod disruptions;
pub mod history;
mod server;
pub mod svg;
mod trends;

use std::fmt::Write as _;
use std::path::Path;

use crate::Error;
use crate::report::{Counted, Figures, Report, ThresholdResult};
use crate::stats::PointJson;
use crate::verdict::{Row, Verdict};
use hdrhistogram::Histogram;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use svg::{Chart, Series, Unit, esc, label};

/// Colours of the latency quantiles, the rate and the error kinds.
const P50: &str = "#1f77b4";
const P90: &str = "#2ca02c";
const P99: &str = "#ff7f0e";
const PMAX: &str = "#d62728";
pub(crate) const PALETTE: [&str; 8] = [
    "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#ff7f0e",
];

/// The spectrum's quantiles: x = log10(1/(1-q)) from 0 to 5 (p99.999).
const SPECTRUM_STEPS: usize = 100;

/// What a page is made of.
#[derive(Debug)]
pub struct Inputs<'a> {
    /// The report.
    pub report: &'a Report,
    /// A baseline report to overlay (dashed).
    pub baseline: Option<&'a Report>,
    /// The latency percentile spectrum from an HDR interval log, as
    /// (log10(1/(1-q)), seconds); see [`spectrum_of_log`].
    pub spectrum: Option<Vec<(f64, f64)>>,
    /// Rows of a baseline comparison. `None`: no comparison was made.
    pub verdicts: Option<&'a [Row]>,
}

/// Fails with a usage error (exit 2) when `path` cannot be written; run
/// before the work whose result goes there. Nothing is created.
pub fn check_writable(path: &Path, flag: &str) -> Result<(), Error> {
    crate::fsio::check_writable(path).map_err(|e| {
        Error::Usage(format!(
            "{flag} {}: cannot be written ({e}); give a writable path",
            path.display()
        ))
    })
}

/// Writes the page whole or not at all (see [`crate::fsio`]).
pub fn write(path: &Path, page: &str) -> Result<(), Error> {
    crate::fsio::write_atomic(path, page.as_bytes())
        .map_err(|e| Error::io(format!("writing the HTML report to {}", path.display()), e))
}

/// The percentile spectrum of an HDR interval log (every interval and tag
/// merged), as (log10(1/(1-q)), seconds).
pub fn spectrum_of_log(path: &Path) -> Result<Vec<(f64, f64)>, Error> {
    let bad = |why: String| {
        Error::Usage(format!(
            "--hdr-log {}: {why}; give the file a run wrote with --hdr-log",
            path.display()
        ))
    };
    let bytes = std::fs::read(path).map_err(|e| bad(format!("cannot read it ({e})")))?;
    let mut merged: Histogram<u64> = crate::stats::histogram();
    let mut intervals = 0;
    for entry in IntervalLogIterator::new(&bytes) {
        let entry = entry.map_err(|e| bad(format!("not an HdrHistogram interval log ({e:?})")))?;
        let LogEntry::Interval(iv) = entry else {
            continue;
        };
        let h =
            crate::report::decode(iv.encoded_histogram()).ok_or_else(|| bad("an interval does not decode".into()))?;
        merged
            .add(&h)
            .map_err(|e| bad(format!("an interval is out of range ({e:?})")))?;
        intervals += 1;
    }
    if intervals == 0 {
        return Err(bad("it holds no interval".into()));
    }
    Ok(spectrum(|q| {
        (!merged.is_empty()).then(|| merged.value_at_quantile(q) as f64 / 1e6)
    }))
}

/// The spectrum of a quantile function (µs → s done by the caller).
fn spectrum(at: impl Fn(f64) -> Option<f64>) -> Vec<(f64, f64)> {
    (0..=SPECTRUM_STEPS)
        .filter_map(|i| {
            let x = 5.0 * i as f64 / SPECTRUM_STEPS as f64;
            at(1.0 - 10f64.powf(-x)).map(|v| (x, v))
        })
        .collect()
}

/// The spectrum a report itself gives: from its workloads' full-run
/// latency histograms (`workloads[].histograms.latency`) merged when it
/// has them, else from its few percentiles (the max drawn at p99.999).
fn report_spectrum(r: &Report) -> (Vec<(f64, f64)>, &'static str) {
    let mut merged = crate::stats::histogram();
    for w in &r.workloads {
        if let Some(h) = crate::report::decode(&w.histograms.latency) {
            // A histogram past soakd's range is not soakd's: left out.
            let _ = merged.add(&h);
        }
    }
    if !merged.is_empty() {
        return (
            spectrum(|q| Some(merged.value_at_quantile(q) as f64 / 1e6)),
            "from the report's latency histograms",
        );
    }
    let l = &r.all.latency_seconds;
    let pts = [
        (l.p50, 0.5f64),
        (l.p90, 0.9),
        (l.p99, 0.99),
        (l.p999, 0.999),
        (l.max, 0.999_99),
    ]
    .iter()
    .filter_map(|(v, q)| Some(((1.0 / (1.0 - q)).log10(), (*v)?)))
    .collect();
    (pts, "from the report's percentiles (max drawn at 99.999%)")
}

fn cell_secs(v: Option<f64>) -> String {
    v.map_or("-".into(), |s| label(s, Unit::Seconds))
}

fn cell_num(v: Option<f64>) -> String {
    v.map_or("-".into(), |n| {
        if n.fract() == 0.0 {
            format!("{n:.0}")
        } else {
            format!("{n:.1}")
        }
    })
}

/// The timeline's points of a report (empty without one).
fn points(r: &Report) -> &[PointJson] {
    &r.timeline.points
}

/// One series over time: `y` of each point at its midpoint; `None` breaks
/// the line.
fn over_time(r: &Report, y: impl Fn(&PointJson) -> Option<f64>) -> Vec<(f64, f64)> {
    points(r)
        .iter()
        // A gap (soakd was not running) breaks every line.
        .map(|p| (p.t + p.seconds / 2.0, y(p).filter(|_| !p.gap).unwrap_or(f64::NAN)))
        .collect()
}

/// The time ranges no soakd ran (a run continued from its `--state`),
/// shaded on the time charts.
fn gaps(r: &Report) -> Vec<(f64, f64)> {
    points(r)
        .iter()
        .filter(|p| p.gap)
        .map(|p| (p.t, p.t + p.seconds))
        .collect()
}

/// Per second over a point's length.
fn rate(p: &PointJson, count: u64) -> Option<f64> {
    (p.seconds > 0.0).then(|| count as f64 / p.seconds)
}

/// Reads one value off a timeline point.
type Getter<'a> = &'a dyn Fn(&PointJson) -> Option<f64>;
/// A line of a time chart: legend name, colour, value.
type Line<'a> = (&'a str, &'static str, Getter<'a>);

/// The series of a time chart for the report, and the baseline's dashed.
fn both(r: &Report, base: Option<&Report>, lines: &[Line<'_>]) -> Vec<Series> {
    let mut out = Vec::new();
    for (from, dashed, suffix) in [(Some(r), false, ""), (base, true, " (baseline)")] {
        let Some(from) = from else { continue };
        for (name, color, y) in lines {
            out.push(Series {
                name: format!("{name}{suffix}"),
                color,
                dashed,
                points: over_time(from, y),
            });
        }
    }
    out
}

fn time_chart(title: &str, y_unit: Unit, series: Vec<Series>) -> Chart {
    Chart {
        title: title.into(),
        x_label: "seconds since the start of the run".into(),
        x_unit: Unit::Count,
        y_unit,
        // Latency spans decades (a 100 µs median under a 1 s max).
        log_y: y_unit == Unit::Seconds,
        series,
        gaps: Vec::new(),
        bands: Vec::new(),
        marks: Vec::new(),
    }
}

/// The charts, in page order.
fn charts(i: &Inputs<'_>, r: &Report) -> Vec<(Chart, String)> {
    let base = i.baseline;
    let mut out = Vec::new();
    let mut latency = both(
        r,
        base,
        &[
            ("p50", P50, &|p: &PointJson| p.p50),
            ("p90", P90, &|p: &PointJson| p.p90),
            ("p99", P99, &|p: &PointJson| p.p99),
            ("max", PMAX, &|p: &PointJson| p.max),
        ],
    );
    // The baseline's p50 and p99 under the live lines (its p90 and max
    // would only crowd them): what each window was judged against when
    // the run was judged live, else its own timeline.
    let judged = baseline::reference_lines(r, [P50, P99]);
    latency.retain(|s| !s.dashed || (judged.is_empty() && (s.name.starts_with("p50") || s.name.starts_with("p99"))));
    latency.extend(judged);
    let mut chart = time_chart("Latency over time", Unit::Seconds, latency);
    chart.bands = baseline::bands(r);
    out.push((
        chart,
        format!(
            "Per interval of the timeline, all workloads: from the due time in paced and open-loop runs.{}",
            match (base.is_some(), r.baseline.as_ref().is_some_and(|b| !b.windows.is_empty())) {
                (_, true) => " Dashed: the baseline's p50 and p99 each window was judged against; shaded: windows judged worse (red) or better (green) than it.",
                (true, false) => " Dashed: the baseline's p50 and p99.",
                (false, false) => "",
            }
        ),
    ));

    let (mut spec, mut note) = report_spectrum(r);
    if let Some(s) = &i.spectrum {
        spec = s.clone();
        note = "from the HDR interval log (all intervals merged)";
    }
    let mut series = vec![Series {
        name: "latency".into(),
        color: P99,
        dashed: false,
        points: spec,
    }];
    if let Some(b) = base {
        series.push(Series {
            name: "latency (baseline)".into(),
            color: P50,
            dashed: true,
            points: report_spectrum(b).0,
        });
    }
    out.push((
        Chart {
            title: "Latency by percentile".into(),
            x_label: "percentile (log scale of 1/(1-q))".into(),
            x_unit: Unit::Percentile,
            y_unit: Unit::Seconds,
            log_y: true,
            series,
            gaps: Vec::new(),
            bands: Vec::new(),
            marks: Vec::new(),
        },
        format!("The whole run's latency distribution, {note}."),
    ));

    let completed = |p: &PointJson| rate(p, p.completed);
    out.push((
        time_chart(
            "Requests per second",
            Unit::Count,
            both(r, base, &[("completed/s", P50, &completed)]),
        ),
        "Complete responses per second, all workloads.".to_string(),
    ));

    // Every kind seen in either run gets a line; none seen draws a zero line.
    let mut kinds: Vec<String> = Vec::new();
    for p in points(r).iter().chain(base.map_or(&[][..], points)) {
        for k in p.errors.keys() {
            if !kinds.contains(k) {
                kinds.push(k.clone());
            }
        }
    }
    let errors = if kinds.is_empty() {
        let zero = |p: &PointJson| rate(p, 0);
        both(r, base, &[("errors/s (none)", P90, &zero)])
    } else {
        type Owned = Box<dyn Fn(&PointJson) -> Option<f64>>;
        let getters: Vec<(String, &'static str, Owned)> = kinds
            .iter()
            .enumerate()
            .map(|(n, k)| {
                let k = k.clone();
                let g: Owned = Box::new(move |p: &PointJson| rate(p, p.errors.get(&k).copied().unwrap_or(0)));
                (format!("{}/s", kinds[n]), PALETTE[n % PALETTE.len()], g)
            })
            .collect();
        let lines: Vec<Line<'_>> = getters.iter().map(|(n, c, g)| (n.as_str(), *c, g.as_ref())).collect();
        both(r, base, &lines)
    };
    out.push((
        time_chart("Errors per second by kind", Unit::Count, errors),
        "Failed connects and requests per second, by kind (docs/operating.md lists them).".to_string(),
    ));

    let open = |p: &PointJson| Some(p.open as f64);
    out.push((
        time_chart("Connections open", Unit::Count, both(r, base, &[("open", P50, &open)])),
        "Established connections at the end of each interval, all workloads.".to_string(),
    ));
    out.push((
        time_chart(
            "Schedule lag p99",
            Unit::Seconds,
            both(r, base, &[("lag p99", PMAX, &|p: &PointJson| p.lag_p99)]),
        ),
        "Due time → written: soakd's own lateness (paced and open-loop runs; empty in closed loop).".to_string(),
    ));
    out.extend(trends::charts(r, base));
    out.extend(server::charts(r));
    let gaps = gaps(r);
    let (bands, marks) = (disruptions::bands(r), disruptions::marks(r));
    for (c, _) in &mut out {
        if c.x_unit == Unit::Count {
            c.gaps.clone_from(&gaps);
            // After the baseline's windows, where the latency chart has them.
            c.bands.extend(bands.iter().cloned());
            c.marks.clone_from(&marks);
        }
    }
    out
}

pub(crate) const STYLE: &str = "body{font-family:sans-serif;margin:24px;color:#222;max-width:1140px}\
h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}\
th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}\
pre{background:#f7f7f7;padding:8px;font-size:12px;overflow-x:auto}\
.pass{color:#080;font-weight:bold}.fail{color:#c00;font-weight:bold}.note{color:#555;font-size:12px}\
figure{margin:12px 0}figcaption{font-size:12px;color:#555}";

/// The summary row of one set of figures.
fn summary_row(s: &mut String, name: &str, fig: &Figures) {
    let l = &fig.latency_seconds;
    let errors: u64 = fig.errors.iter().map(|(_, n)| n).sum();
    let rate = fig
        .error_rate(Counted::Every)
        .map_or("-".into(), |r| format!("{:.3}%", 100.0 * r));
    let _ = write!(
        s,
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{errors}</td><td>{rate}</td><td>{}/{}</td>",
        esc(name),
        fig.requests.completed,
        cell_num(Some(fig.requests.per_second)),
        fig.connections.peak_open,
        fig.connections.desired,
    );
    for v in [l.p50, l.p90, l.p99, l.p999, l.max] {
        let _ = write!(s, "<td>{}</td>", cell_secs(v));
    }
    s.push_str("</tr>");
}

fn summary(s: &mut String, r: &Report, base: Option<&Report>) {
    s.push_str(
        "<h2>Summary</h2><table><tr><th>workload</th><th>completed</th><th>req/s</th><th>errors</th>\
<th>error rate</th><th>peak open/desired</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th></tr>",
    );
    for (from, suffix) in [(Some(r), ""), (base, " (baseline)")] {
        let Some(from) = from else { continue };
        summary_row(s, &format!("all{suffix}"), &from.all);
        for w in &from.workloads {
            summary_row(s, &format!("{}{suffix}", w.name), &w.figures);
        }
    }
    s.push_str("</table>");
}

/// A measured or limit value of a threshold, in the metric's unit.
fn threshold_value(metric: &str, v: Option<f64>) -> String {
    let Some(n) = v else {
        return "-".into();
    };
    if let Some(m) = crate::plan::Metric::from_name(metric).filter(|m| m.is_trend()) {
        crate::plan::threshold::show_trend(m.unit(), n)
    } else if metric.starts_with('p') || metric == "max" || metric == "mean" || metric.ends_with("_p99") {
        label(n, Unit::Seconds)
    } else if metric.ends_with("error_rate") {
        format!("{:.3}%", n * 100.0)
    } else {
        cell_num(Some(n))
    }
}

/// The gRPC calls of each gRPC workload by status code (codes seen only,
/// OK first); nothing for a run without one.
fn grpc(s: &mut String, r: &Report) {
    let calls: Vec<_> = r
        .workloads
        .iter()
        .filter_map(|w| w.http.grpc.as_ref().map(|g| (&w.name, g)))
        .collect();
    if calls.is_empty() {
        return;
    }
    s.push_str(
        "<h2>gRPC calls</h2><table><tr><th>workload</th><th>method</th><th>calls</th><th>non-OK rate</th><th>by status</th></tr>",
    );
    for (name, g) in calls {
        let all: u64 = g.calls.values().sum();
        let ok = g.calls.get("ok").copied().unwrap_or(0);
        let mut codes = vec![format!("ok {ok}")];
        codes.extend(
            g.calls
                .iter()
                .filter(|(c, n)| **n > 0 && c.as_str() != "ok")
                .map(|(c, n)| format!("<span class=fail>{} {n}</span>", esc(c))),
        );
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{all}</td><td>{}</td><td>{}</td></tr>",
            esc(name),
            esc(&g.method),
            threshold_value("grpc_error_rate", g.error_rate),
            codes.join(" · "),
        );
    }
    s.push_str("</table>");
}

fn thresholds(s: &mut String, rows: &[ThresholdResult]) {
    s.push_str("<h2>Thresholds</h2>");
    if rows.is_empty() {
        s.push_str("<p class=note>No thresholds were set for this run.</p>");
        return;
    }
    s.push_str("<table><tr><th>workload</th><th>threshold</th><th>limit</th><th>measured</th><th>result</th></tr>");
    for t in rows {
        let (class, word) = if t.pass { ("pass", "pass") } else { ("fail", "FAIL") };
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class={class}>{word}</td></tr>",
            esc(t.workload.as_deref().unwrap_or("all")),
            esc(&t.threshold),
            threshold_value(&t.metric, Some(t.limit)),
            threshold_value(&t.metric, t.measured),
        );
    }
    s.push_str("</table>");
}

fn verdicts(s: &mut String, rows: Option<&[Row]>, has_baseline: bool) {
    s.push_str("<h2>Verdicts</h2>");
    let Some(rows) = rows else {
        s.push_str(if has_baseline {
            "<p class=note>The baseline is overlaid on the charts (dashed); no comparison was made.</p>"
        } else {
            "<p class=note>No baseline: give one with --baseline REPORT.json.</p>"
        });
        return;
    };
    s.push_str(
        "<table><tr><th>workload</th><th>metric</th><th>baseline</th><th>new</th><th>change</th>\
<th>relative</th><th>verdict</th><th>method</th></tr>",
    );
    for v in rows {
        let class = match v.verdict {
            Verdict::Worse => "fail",
            Verdict::Better => "pass",
            Verdict::Same => "",
        };
        let rel = v.rel_change.map_or("-".into(), |x| format!("{:+.1}%", x * 100.0));
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{rel}</td><td class={class}>{}</td><td>{}</td></tr>",
            esc(&v.workload),
            esc(v.metric),
            threshold_value(v.metric, Some(v.baseline)),
            threshold_value(v.metric, Some(v.new)),
            threshold_value(v.metric, Some(v.abs_change)),
            v.verdict.name(),
            v.method.name(),
        );
    }
    s.push_str("</table>");
}

/// The page.
pub fn render(i: &Inputs<'_>) -> String {
    let r = i.report;
    let mut s = String::with_capacity(64 * 1024);
    let started = Some(r.timeline.started_at.as_str())
        .filter(|t| !t.is_empty())
        .unwrap_or("?");
    let _ = write!(
        s,
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>soakd report {}</title><style>{STYLE}</style></head><body>",
        esc(started)
    );
    let _ = write!(
        s,
        "<h1>soakd report</h1><p>Started {} · ran {} · {} workload(s){}</p>",
        esc(started),
        cell_secs(Some(r.duration_seconds)),
        r.workloads.len(),
        if i.baseline.is_some() {
            " · baseline overlaid (dashed)"
        } else {
            ""
        }
    );
    s.push_str("<h2>Plan</h2>");
    if r.plan.is_empty() {
        s.push_str("<ul>");
        for w in &r.workloads {
            let url = if w.url.is_empty() { "?" } else { &w.url };
            let _ = write!(s, "<li>{} → {}</li>", esc(&w.name), esc(url));
        }
        s.push_str("</ul>");
    } else {
        let _ = write!(s, "<pre>{}</pre>", esc(&r.plan));
    }
    summary(&mut s, r, i.baseline);
    disruptions::tables(&mut s, r);
    grpc(&mut s, r);
    thresholds(&mut s, &r.thresholds);
    trends::table(&mut s, r);
    server::table(&mut s, r);
    verdicts(&mut s, i.verdicts, i.baseline.is_some());
    baseline::section(&mut s, r);
    s.push_str("<h2>Charts</h2>");
    if points(r).is_empty() {
        s.push_str(
            "<p class=note>This report has no timeline (written by an older soakd): the time charts are empty.</p>",
        );
    }
    for (chart, caption) in charts(i, r) {
        let _ = write!(
            s,
            "<figure>{}<figcaption>{}</figcaption></figure>",
            chart.svg(),
            esc(&caption)
        );
    }
    let t = &r.timeline;
    let _ = write!(
        s,
        "<p class=note>Timeline: {} points of {} each (intervals merge pairwise past {} points).</p></body></html>",
        t.points.len(),
        cell_secs((t.interval_seconds > 0.0).then_some(t.interval_seconds)),
        t.max_points
    );
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report() -> Report {
        // 15 samples at 1 ms, 12 at 2 ms, 3 at 9 ms.
        let mut hist = crate::stats::histogram();
        hist.record_n(1000, 15).unwrap();
        hist.record_n(2000, 12).unwrap();
        hist.record_n(9000, 3).unwrap();
        let r = json!({
            "duration_seconds": 3.0,
            "latency_seconds": {"p50": 0.001, "p90": 0.002, "p99": 0.004, "p999": 0.005, "max": 0.009},
            "requests": {"completed": 30, "per_second": 10.0},
            "errors": {"reset": 1, "timeout": 0},
            "connections": {"peak_open": 10, "desired": 10},
            "workloads": [{"name": "t<1>", "url": "http://127.0.0.1:1/", "latency_seconds": {},
                           "histograms": {"latency": crate::report::encode(&hist)}}],
            "timeline": {"started_at": "2026-01-01T00:00:00.000Z", "started_at_unix_seconds": 1767225600.0,
                "interval_seconds": 1.0, "max_points": 1000,
                "points": [
                    {"t": 0.0, "seconds": 1.0, "sent": 10, "completed": 10, "responses": {"2xx": 10}, "errors": {}, "open": 10, "open_min": 10,
                     "p50": 0.001, "p90": 0.002, "p99": 0.003, "max": 0.004, "lag_p99": null},
                    {"t": 1.0, "seconds": 1.0, "sent": 21, "completed": 20, "responses": {"2xx": 20}, "errors": {"reset": 1}, "open": 9, "open_min": 9,
                     "p50": 0.001, "p90": 0.002, "p99": 0.003, "max": 0.004, "lag_p99": 0.0001}
                ]},
            "thresholds": [{"workload": null, "threshold": "p99<50ms", "metric": "p99", "op": "<", "limit": 0.05, "measured": 0.031, "pass": true},
                           {"workload": "t<1>", "threshold": "error_rate<0.1%", "metric": "error_rate", "op": "<", "limit": 0.001, "measured": 0.03, "pass": false}]
        });
        serde_json::from_value(r).expect("the fixture is a report")
    }

    #[test]
    fn the_page_has_every_section_and_six_charts() {
        let r = report();
        let rows = [Row {
            workload: "t<1>".into(),
            metric: "p99",
            baseline: 0.003,
            new: 0.004,
            abs_change: 0.001,
            rel_change: Some(0.333),
            verdict: Verdict::Worse,
            method: crate::verdict::Method::RankTest,
            p_value: Some(0.001),
            samples: Some([10, 10]),
            lag: None,
            unit: None,
        }];
        let page = render(&Inputs {
            report: &r,
            baseline: Some(&r),
            spectrum: None,
            verdicts: Some(&rows),
        });
        assert_eq!(page.matches("<svg").count(), 6);
        for title in [
            "Latency over time",
            "Latency by percentile",
            "Requests per second",
            "Errors per second by kind",
            "Connections open",
            "Schedule lag p99",
        ] {
            assert!(page.contains(&format!("<title>{title}</title>")), "{title}");
        }
        assert!(page.contains("t&lt;1&gt;"), "names are escaped");
        assert!(!page.contains("t<1>"));
        assert!(page.contains("<td class=fail>FAIL</td>"));
        assert!(page.contains("3.000%"), "error rate threshold in percent");
        assert!(page.contains("+33.3%"));
        assert!(page.contains("reset/s (baseline)"));
        assert!(page.contains("stroke-dasharray"));
        assert!(!page.contains("<script"));
        assert!(!page.contains("https://"));
    }

    #[test]
    fn grpc_calls_by_status_only_for_grpc_workloads() {
        let page = |r: &Report| {
            render(&Inputs {
                report: r,
                baseline: None,
                spectrum: None,
                verdicts: None,
            })
        };
        assert!(!page(&report()).contains("gRPC calls"), "no gRPC workload, no table");
        let r: Report = serde_json::from_value(json!({"duration_seconds": 1.0, "workloads": [{"name": "rpc",
            "http": {"grpc": {"method": "pkg.Svc/Get", "calls": {"ok": 300, "unavailable": 100, "internal": 0},
                               "error_rate": 0.25}}}]}))
        .unwrap();
        let p = page(&r);
        assert!(p.contains("<h2>gRPC calls</h2>"));
        assert!(p.contains(
            "<td>rpc</td><td>pkg.Svc/Get</td><td>400</td><td>25.000%</td><td>ok 300 · <span class=fail>unavailable 100</span></td>"
        ), "{p}");
        assert!(!p.contains("internal 0"), "codes not seen are left out");
    }

    #[test]
    fn an_old_report_renders_with_dashes() {
        let r: Report =
            serde_json::from_value(json!({"duration_seconds": 1.0, "workloads": [{"name": "old"}]})).unwrap();
        let page = render(&Inputs {
            report: &r,
            baseline: None,
            spectrum: None,
            verdicts: None,
        });
        assert!(page.contains("no timeline"));
        assert!(page.contains("No thresholds"));
        assert!(page.contains("No baseline"));
        assert_eq!(page.matches("<svg").count(), 6);
    }

    #[test]
    fn the_spectrum_from_the_embedded_histogram() {
        let (pts, note) = report_spectrum(&report());
        assert!(note.contains("histograms"));
        assert_eq!(pts.len(), SPECTRUM_STEPS + 1);
        // 15 of 30 at 1 ms, then 2 ms, the tail 9 ms (0.1% buckets).
        let at = |x: f64| pts.iter().find(|p| (p.0 - x).abs() < 1e-9).unwrap().1;
        let near = |v: f64, ms: f64| (v - ms / 1e3).abs() < ms / 1e3 * 0.002;
        assert!(near(at(0.0), 1.0), "{}", at(0.0));
        assert!(near(at(0.3), 1.0), "p49.9: rank 15 of 30: {}", at(0.3));
        assert!(near(at(0.6), 2.0), "p74.9: rank 23: {}", at(0.6));
        assert!(near(at(2.0), 9.0), "{}", at(2.0));
        assert!(near(at(5.0), 9.0), "{}", at(5.0));
    }
}
