//! `soakd history REPORT... | DIR`: a series of runs (a release train's
//! nightly soaks) judged run after run, so the build that made things worse
//! is named, not found by reading six reports side by side.
//!
//! Runs are put in start order (the timeline's `started_at`), and each
//! run's p50, p99, p99.9, requests/s and error rate are judged against the
//! run before it and against the first run (the reference) with `soakd
//! compare`'s rules ([`super::compare`]: tolerance, floors, the rank test
//! on the runs' interval logs when the reports name them, the generator-lag
//! excuse). A run whose load differs from the one it is compared with is
//! shown with the difference, and its verdicts are not regression
//! verdicts. The first run worse than its predecessor is named; the exit
//! code is 3 when the newest run is worse than the one before it.

use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Serialize;

use super::{Comparison, Options, Run, Verdict, compare};
use crate::Error;
use crate::report::{Counted, human};

/// The figures of a history, in column order: `soakd compare`'s row name,
/// the name shown.
const METRICS: [(&str, &str); 5] = [
    ("p50", "p50"),
    ("p99", "p99"),
    ("p99.9", "p99.9"),
    ("rps", "req/s"),
    ("error_rate", "error rate"),
];

/// One figure of one workload of one run, judged.
#[derive(Clone, Debug, Serialize)]
pub struct Cell {
    /// `p50`, `p99`, `p99.9`, `rps` or `error_rate`.
    pub metric: &'static str,
    /// The run's figure (seconds, requests/s, a 0–1 ratio).
    pub value: Option<f64>,
    /// Against the run before (`null` for the first run).
    pub vs_previous: Option<Judged>,
    /// Against the first run, the reference (`null` for the first run).
    pub vs_reference: Option<Judged>,
}

/// A verdict against another run.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Judged {
    /// The verdict.
    pub verdict: Verdict,
    /// (new − other) ÷ other.
    pub change: Option<f64>,
    /// The method (`soakd compare`'s).
    pub method: &'static str,
}

/// One workload of one run.
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadRow {
    /// Its name.
    pub workload: String,
    /// One per figure.
    pub cells: Vec<Cell>,
}

/// One watched series of the server in one run (`--target-metrics`,
/// `--prometheus`, …): its slope and last value, judged as `soakd
/// compare` judges them.
#[derive(Clone, Debug, Serialize)]
pub struct ServerRow {
    /// The series (`rss{pod="api-1"}`).
    pub series: String,
    /// The unit of its values (its slope is that per second).
    pub unit: String,
    /// `slope` and `last`.
    pub cells: Vec<Cell>,
}

/// One run.
#[derive(Clone, Debug, Serialize)]
pub struct HistoryRun {
    /// 1-based, in start order.
    pub run: usize,
    /// The report file.
    pub report: String,
    /// When it started (RFC 3339), empty when the report does not say.
    pub started_at: String,
    /// Where its load differs from the run before (empty: the same).
    pub load_differs: Vec<String>,
    /// Per workload.
    pub workloads: Vec<WorkloadRow>,
    /// Per watched series of the server (empty without a server watch).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub server: Vec<ServerRow>,
    /// Worse than the run before in some figure (under the same load).
    pub worse_than_previous: bool,
}

/// The whole history.
#[derive(Clone, Debug, Serialize)]
pub struct History {
    /// The tolerance used.
    pub tolerance: f64,
    /// The runs, in start order.
    pub runs: Vec<HistoryRun>,
    /// The first run worse than the one before it (1-based), if any.
    pub first_worse: Option<usize>,
    /// The newest run is worse than the one before it: exit code 3.
    pub newest_worse: bool,
}

/// The report files named: files as given, directories as the `*.json`
/// files in them (sorted; files that are no soakd report are skipped with
/// a note). At least two are needed.
pub fn load(paths: &[PathBuf]) -> Result<Vec<Run>, Error> {
    let mut runs = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| Error::Usage(format!("{}: cannot list it ({e})", p.display())))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "json"))
                .collect();
            files.sort();
            for f in files {
                match Run::load(&f, None, "REPORT", "--hdr-log") {
                    Ok(r) => runs.push(r),
                    Err(e) => eprintln!("soakd history: skipping {} ({e})", f.display()),
                }
            }
        } else {
            runs.push(Run::load(p, None, "REPORT", "--hdr-log")?);
        }
    }
    if runs.len() < 2 {
        return Err(Error::Usage(format!(
            "soakd history needs at least two reports (found {}); give report files (`soakd run --report`) or a directory of them",
            runs.len()
        )));
    }
    Ok(runs)
}

/// Judges `runs` (see the module doc); they are put in start order.
pub fn history(mut runs: Vec<Run>, opts: &Options) -> History {
    // Runs without a start time (a merged report) keep their place among
    // those given; a stable sort keeps ties in the given order.
    if runs.iter().all(|r| r.report.timeline.started_at_unix_seconds > 0.0) {
        runs.sort_by(|a, b| {
            a.report
                .timeline
                .started_at_unix_seconds
                .total_cmp(&b.report.timeline.started_at_unix_seconds)
        });
    }
    let mut out = Vec::with_capacity(runs.len());
    for (i, run) in runs.iter().enumerate() {
        let previous = (i > 0).then(|| compare(&runs[i - 1], run, opts));
        let reference = (i > 0).then(|| compare(&runs[0], run, opts));
        let load_differs = if i > 0 { differs(&runs[i - 1], run) } else { Vec::new() };
        let workloads: Vec<WorkloadRow> = run
            .report
            .workloads
            .iter()
            .map(|w| WorkloadRow {
                workload: w.name.clone(),
                cells: METRICS
                    .iter()
                    .map(|(metric, _)| Cell {
                        metric,
                        value: match *metric {
                            "p50" => w.figures.latency_seconds.p50,
                            "p99" => w.figures.latency_seconds.p99,
                            "p99.9" => w.figures.latency_seconds.p999,
                            "rps" => Some(w.figures.requests.per_second),
                            _ => Some(w.figures.error_rate(Counted::Target).unwrap_or(0.0)),
                        },
                        vs_previous: previous.as_ref().and_then(|c| judged(c, &w.name, metric)),
                        vs_reference: reference.as_ref().and_then(|c| judged(c, &w.name, metric)),
                    })
                    .collect(),
            })
            .collect();
        let server: Vec<ServerRow> = run
            .report
            .server
            .iter()
            .flat_map(|x| &x.series)
            .map(|x| {
                let key = format!("server {}", x.info.name());
                ServerRow {
                    series: x.info.name(),
                    unit: x.info.unit.clone(),
                    cells: [("slope", x.trend.slope.slope), ("last", x.trend.last)]
                        .into_iter()
                        .map(|(metric, value)| Cell {
                            metric,
                            value,
                            vs_previous: previous.as_ref().and_then(|c| judged(c, &key, metric)),
                            vs_reference: reference.as_ref().and_then(|c| judged(c, &key, metric)),
                        })
                        .collect(),
                }
            })
            .collect();
        let worse_than_previous = load_differs.is_empty()
            && workloads
                .iter()
                .flat_map(|w| &w.cells)
                .chain(server.iter().flat_map(|x| &x.cells))
                .any(|c| c.vs_previous.is_some_and(|j| j.verdict == Verdict::Worse));
        out.push(HistoryRun {
            run: i + 1,
            report: run.label.clone(),
            started_at: run.report.timeline.started_at.clone(),
            load_differs,
            workloads,
            server,
            worse_than_previous,
        });
    }
    History {
        tolerance: opts.tolerance,
        first_worse: out.iter().find(|r| r.worse_than_previous).map(|r| r.run),
        newest_worse: out.last().is_some_and(|r| r.worse_than_previous),
        runs: out,
    }
}

/// Where `b`'s load differs from `a`'s, per workload that pairs.
fn differs(a: &Run, b: &Run) -> Vec<String> {
    let an: Vec<&str> = a.report.workloads.iter().map(|w| w.name.as_str()).collect();
    let bn: Vec<&str> = b.report.workloads.iter().map(|w| w.name.as_str()).collect();
    let (pairs, _) = super::pairs(&an, &bn);
    let several = pairs.len() > 1;
    let mut out = Vec::new();
    for (ai, bi) in pairs {
        let d: Vec<String> = a.report.workloads[ai].load.differences(&b.report.workloads[bi].load);
        for x in d {
            out.push(if several { format!("{}: {x}", bn[bi]) } else { x });
        }
    }
    out
}

fn judged(c: &Comparison, workload: &str, metric: &str) -> Option<Judged> {
    c.rows
        .iter()
        .find(|r| r.workload == workload && r.metric == metric)
        .map(|r| Judged {
            verdict: r.verdict,
            change: r.rel_change,
            method: r.method.name(),
        })
}

/// A figure for the table.
pub fn shown(metric: &str, v: Option<f64>) -> String {
    match (metric, v) {
        (_, None) => "-".into(),
        ("rps", Some(v)) => format!("{v:.1}"),
        ("error_rate", Some(v)) => format!("{:.3}%", v * 100.0),
        (_, Some(v)) => human(Some(v)),
    }
}

fn mark(j: Option<Judged>) -> String {
    match j {
        Some(Judged {
            verdict: Verdict::Worse,
            change,
            ..
        }) => format!(
            " WORSE{}",
            change.map_or(String::new(), |c| format!(" {:+.0}%", c * 100.0))
        ),
        Some(Judged {
            verdict: Verdict::Better,
            change,
            ..
        }) => format!(
            " better{}",
            change.map_or(String::new(), |c| format!(" {:+.0}%", c * 100.0))
        ),
        _ => String::new(),
    }
}

impl History {
    /// The table for people.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "soakd history: {} runs in start order; each figure judged against the run before it, [in brackets] against run 1 (the reference), with soakd compare's rules (tolerance {:.0}%, 1 ms floor, rank test where the runs have interval logs)\n",
            self.runs.len(),
            self.tolerance * 100.0
        );
        let _ = write!(
            s,
            "  {:<4} {:<20} {:<24} {:<16}",
            "run", "started", "report", "workload"
        );
        for (_, name) in METRICS {
            let _ = write!(s, " {name:<26}");
        }
        s.push('\n');
        for r in &self.runs {
            for (wi, w) in r.workloads.iter().enumerate() {
                let (run, started, report) = if wi == 0 {
                    (
                        r.run.to_string(),
                        r.started_at.get(..19).unwrap_or(&r.started_at).replace('T', " "),
                        r.report.clone(),
                    )
                } else {
                    Default::default()
                };
                let _ = write!(s, "  {run:<4} {started:<20} {report:<24} {:<16}", w.workload);
                for c in &w.cells {
                    // Run 2's reference is the run before it: said once.
                    let reference = match c.vs_reference {
                        Some(j) if j.verdict != Verdict::Same && r.run > 2 => format!(" [{}]", j.verdict.name()),
                        _ => String::new(),
                    };
                    let cell = format!("{}{}{reference}", shown(c.metric, c.value), mark(c.vs_previous));
                    let _ = write!(s, " {cell:<26}");
                }
                s.push('\n');
            }
            for x in &r.server {
                let cells: Vec<String> = x
                    .cells
                    .iter()
                    .map(|c| {
                        let v = c.value.map_or("-".into(), |v| match c.metric {
                            "slope" => crate::stats::trends_text::show(&format!("{}/s", x.unit), v),
                            _ => crate::stats::trends_text::show_value(&x.unit, v),
                        });
                        format!("{} {v}{}", c.metric, mark(c.vs_previous))
                    })
                    .collect();
                let _ = writeln!(s, "       server {}: {}", x.series, cells.join(", "));
            }
            if !r.load_differs.is_empty() {
                let _ = writeln!(
                    s,
                    "       its load differs from run {}'s ({}): a comparison, not a regression verdict",
                    r.run - 1,
                    r.load_differs.join("; ")
                );
            }
        }
        s.push('\n');
        let worse_cells = |r: &HistoryRun| -> Vec<String> {
            let workloads = r.workloads.iter().map(|w| (w.workload.clone(), &w.cells));
            let server = r.server.iter().map(|x| (format!("server {}", x.series), &x.cells));
            workloads
                .chain(server)
                .flat_map(|(name, cells)| {
                    cells.iter().filter_map(move |c| {
                        let j = c.vs_previous?;
                        (j.verdict == Verdict::Worse).then(|| {
                            format!(
                                "{name} {}{}",
                                c.metric,
                                j.change.map_or(String::new(), |x| format!(" {:+.0}%", x * 100.0))
                            )
                        })
                    })
                })
                .collect()
        };
        match self.first_worse {
            Some(n) => {
                let r = &self.runs[n - 1];
                let _ = writeln!(
                    s,
                    "  first run worse than the one before it: run {n} ({}): {}",
                    r.report,
                    worse_cells(r).join(", ")
                );
            }
            None => {
                let _ = writeln!(s, "  no run is worse than the one before it");
            }
        }
        if let Some(newest) = self.runs.last() {
            let verdict = |pick: fn(&Cell) -> Option<Judged>| -> String {
                let all: Vec<Judged> = newest
                    .workloads
                    .iter()
                    .flat_map(|w| &w.cells)
                    .filter_map(pick)
                    .collect();
                if all.iter().any(|j| j.verdict == Verdict::Worse) {
                    "WORSE than".into()
                } else if all.iter().any(|j| j.verdict == Verdict::Better) {
                    "better than".into()
                } else {
                    "the same as".into()
                }
            };
            let _ = writeln!(
                s,
                "  newest, run {} ({}): {} run {}{}, {} run 1 (the reference)",
                newest.run,
                newest.report,
                verdict(|c| c.vs_previous),
                newest.run - 1,
                if newest.load_differs.is_empty() {
                    ""
                } else {
                    " (loads differ: not a regression verdict)"
                },
                verdict(|c| c.vs_reference)
            );
        }
        s
    }

    /// The JSON form (pretty-printed).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a history serializes")
    }

    /// The exit verdict: an error (exit code 3) when the newest run is
    /// worse than the one before it.
    pub fn verdict(&self) -> Result<(), Error> {
        match self.runs.last() {
            Some(r) if self.newest_worse => Err(Error::Verdict(format!(
                "the newest run, {} ({}), is worse than the one before it",
                r.run, r.report
            ))),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(started: f64, p50: f64, connections: u64, label: &str) -> Run {
        let r = json!({
            "duration_seconds": 60.0,
            "timeline": {"started_at": format!("2026-12-0{}T00:00:00.000Z", started as u64), "started_at_unix_seconds": started, "interval_seconds": 1.0, "max_points": 1000, "points": []},
            "workloads": [{"name": "api",
                "load": {"connections": connections, "model": "rate", "rate": 500.0, "pipeline": 1, "streams": 1, "protocol": "http, HTTP auto"},
                "latency_seconds": {"count": 30000, "p50": p50, "p90": p50 * 2.0, "p99": p50 * 3.0, "p999": p50 * 4.0, "max": p50 * 5.0},
                "requests": {"completed": 30000, "per_second": 500.0}}]
        });
        Run::of(serde_json::from_value(r).unwrap(), None, label)
    }

    #[test]
    fn the_first_worse_run_is_named_and_only_a_worse_newest_fails() {
        // Given out of order; four alike, one 2 ms slower, one back.
        let runs = vec![
            run(6.0, 0.0001, 50, "r6.json"),
            run(1.0, 0.0001, 50, "r1.json"),
            run(2.0, 0.00011, 50, "r2.json"),
            run(3.0, 0.0001, 50, "r3.json"),
            run(4.0, 0.0001, 50, "r4.json"),
            run(5.0, 0.0021, 50, "r5.json"),
        ];
        let h = history(runs.clone(), &Options::default());
        let order: Vec<&str> = h.runs.iter().map(|r| r.report.as_str()).collect();
        assert_eq!(
            order,
            ["r1.json", "r2.json", "r3.json", "r4.json", "r5.json", "r6.json"]
        );
        assert_eq!(h.first_worse, Some(5));
        assert!(!h.newest_worse && h.verdict().is_ok());
        let p50 = |r: usize| h.runs[r].workloads[0].cells[0].clone();
        assert_eq!(p50(4).vs_previous.unwrap().verdict, Verdict::Worse);
        assert_eq!(p50(5).vs_previous.unwrap().verdict, Verdict::Better);
        assert_eq!(p50(5).vs_reference.unwrap().verdict, Verdict::Same);
        let text = h.text();
        assert!(
            text.contains("first run worse than the one before it: run 5 (r5.json): api p50 +2000%"),
            "{text}"
        );
        assert!(
            text.contains("newest, run 6 (r6.json): better than run 5, the same as run 1"),
            "{text}"
        );
        // Without the last one, the newest is worse: exit 3.
        let h = history(runs[1..].to_vec(), &Options::default());
        assert!(h.newest_worse);
        assert!(h.verdict().unwrap_err().to_string().contains("r5.json"));
        // Another load is not a regression verdict.
        let mut other = runs[1..].to_vec();
        other[4] = run(5.0, 0.0021, 100, "r5.json");
        let h = history(other, &Options::default());
        assert!(!h.newest_worse && h.first_worse.is_none());
        assert_eq!(h.runs[4].load_differs, ["connections 50 → 100"]);
        assert!(h.text().contains("not a regression verdict"));
        let json: serde_json::Value = serde_json::from_str(&h.to_json()).unwrap();
        assert_eq!(
            json["runs"][4]["workloads"][0]["cells"][0]["vs_previous"]["verdict"],
            "worse"
        );
        let page = crate::html::history::render(&h);
        assert_eq!(page.matches("<svg").count(), 5);
        assert!(page.contains("class=\"worse\""), "run 5 shaded worse");
    }
}
