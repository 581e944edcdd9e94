//! `soakd compare` and `soakd run --baseline`: is this run worse than that
//! one?
//!
//! Two soaks of the same server never measure the same numbers, least of
//! all on a shared machine: a p99 or a max is often set by one scheduler
//! hiccup. A verdict that calls every such difference a regression is
//! ignored after a week, so a row is `worse` (or `better`) only when the
//! change is
//!
//! - larger than `--tolerance` (10%) relative to the baseline, and larger
//!   than an absolute floor where relative changes of tiny values mean
//!   nothing (1 ms for latencies, 0.1 percentage point for the error rate:
//!   [`crate::plan::defaults`]); and
//! - when both runs have an HDR interval log, significant: the
//!   per-interval values of that quantile (or of requests/s) in the two
//!   runs differ by a Mann–Whitney rank test at p < 0.01, in the same
//!   direction. A single bad interval cannot make a verdict then; a shift
//!   that holds through the run does.
//!
//! Without logs only the first rule applies. Either way, a latency row is
//! not judged (`same`, method `generator_lag`) when soakd's own schedule
//! lag at that quantile, in either run, is half the change or more:
//! latency counts from the due time, so a load generator starved of CPU
//! shows up in it, and on a shared machine that is what moves the tails.
//! Errors that are limits of the soakd host (`addr_unavailable`,
//! `fd_limit`) are left out of the compared error rate. Each row says
//! which method judged it. docs/verdicts.md has the measured false-positive and
//! detection rates. Reports are read typed through the one reader
//! ([`crate::report::read`]), whose defaults let reports from older soakd
//! versions compare (a figure they lack is `null` and its row is left out)
//! and which ignores fields it does not know (a newer soakd's).

pub mod history;
pub mod live;
pub mod samples;
mod server;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::Error;
use crate::report::{Counted, Figures, Percentiles, Report, human};
use samples::{Samples, read_log, tag_of};

use crate::stats::judge::{Evidence, Kind, judge};
pub use crate::stats::judge::{Method, Options, Verdict};

/// One run to compare: its report and, when there is one, its interval log.
#[derive(Clone, Debug)]
pub struct Run {
    /// The report.
    pub report: Report,
    /// Per-interval samples by log tag, from the HDR interval log.
    pub samples: Option<Samples>,
    /// The interval log they were read from.
    pub log: Option<PathBuf>,
    /// Where it came from, for the output.
    pub label: String,
}

impl Run {
    /// A run from a report already in hand (the end of `soakd run`).
    pub fn of(report: Report, samples: Option<Samples>, label: &str) -> Run {
        Run {
            report,
            samples,
            log: None,
            label: label.to_string(),
        }
    }

    /// Reads `path` (a `--report` file) and its interval log: `hdr_log`
    /// when given, else the one the report names (`hdr_log`, relative to
    /// the working directory or to the report's own directory) if it still
    /// exists. `what` names the argument in messages.
    pub fn load(path: &Path, hdr_log: Option<&Path>, what: &str, log_what: &str) -> Result<Run, Error> {
        let report = crate::report::read(path, what)?;
        let label = path.display().to_string();
        let named = report.hdr_log.as_deref().map(PathBuf::from);
        let (log, samples) = match (hdr_log, named) {
            (Some(p), _) => (Some(p.to_path_buf()), Some(read_log(p, log_what)?)),
            (None, Some(p)) => {
                let beside = path.parent().map(|d| d.join(&p));
                let found = if p.exists() {
                    Some(p)
                } else {
                    beside.filter(|b| p.is_relative() && b.exists())
                };
                match found {
                    Some(f) => {
                        let s = read_log(&f, &format!("{label}'s hdr_log"))?;
                        (Some(f), Some(s))
                    }
                    None => (None, None),
                }
            }
            (None, None) => (None, None),
        };
        Ok(Run {
            report,
            samples,
            log,
            label,
        })
    }
}

/// One figure of one workload, baseline → new.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// The workload (the new run's name).
    pub workload: String,
    /// What is compared: p50 p90 p99 p99.9 max (latency, seconds), rps,
    /// error_rate (0–1), connect_p99, tls_handshake_p99 (seconds).
    pub metric: &'static str,
    /// The baseline's figure.
    pub baseline: f64,
    /// The new run's figure.
    pub new: f64,
    /// new − baseline.
    pub abs_change: f64,
    /// (new − baseline) ÷ baseline; `null` when the baseline is 0.
    pub rel_change: Option<f64>,
    /// The verdict.
    pub verdict: Verdict,
    /// How it was reached.
    pub method: Method,
    /// The rank test's p-value (method `rank_test`).
    pub p_value: Option<f64>,
    /// Intervals per run the rank test used, [baseline, new].
    pub samples: Option<[usize; 2]>,
    /// Latency rows: soakd's own schedule lag at the same quantile, the
    /// larger of the two runs' (seconds).
    pub lag: Option<f64>,
    /// The server watch's rows (`slope`, `last`): the unit of the figures
    /// (`bytes/s`, `bytes`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
}

/// Everything `soakd compare` says.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    /// Where the baseline came from.
    pub baseline: String,
    /// Where the new run came from.
    pub new: String,
    /// The tolerance used (0.1 = 10%).
    pub tolerance: f64,
    /// The rows, per workload in the new report's order.
    pub rows: Vec<Row>,
    /// Workloads found in only one of the two reports.
    pub unmatched: Vec<String>,
}

/// Where a compared figure comes from.
#[derive(Clone, Copy)]
enum Source {
    /// A quantile `at` of the histogram `of`, at `q`; `lagged` when
    /// soakd's schedule lag at the same quantile is part of it (request
    /// latency counts from the due time).
    Quantile {
        of: fn(&Figures) -> &Percentiles,
        at: fn(&Percentiles) -> Option<f64>,
        q: f64,
        lagged: bool,
    },
    /// Completed requests per second.
    Rps,
    /// The target's error rate ([`Counted::Target`]).
    ErrorRate,
}

/// One compared figure: its row name, kind, source, and its index in
/// [`samples::Interval::quantiles`] (5 = requests/s) when the interval log
/// has it.
struct Compared(&'static str, Kind, Source, Option<usize>);

impl Compared {
    fn value(&self, f: &Figures) -> Option<f64> {
        match self.2 {
            Source::Quantile { of, at, .. } => at(of(f)),
            Source::Rps => Some(f.requests.per_second),
            // Nothing attempted compares as 0%, not as missing.
            Source::ErrorRate => Some(f.error_rate(Counted::Target).unwrap_or(0.0)),
        }
    }

    /// Samples beyond the quantile (infinite for a figure that is no
    /// quantile). A quantile with a value but no count comes from a report
    /// without counts, which is taken at its word.
    fn tail(&self, f: &Figures) -> f64 {
        match self.2 {
            Source::Quantile { of, q, .. } => match of(f).count {
                0 => f64::INFINITY,
                c => c as f64 * (1.0 - q),
            },
            _ => f64::INFINITY,
        }
    }

    /// soakd's own schedule lag at the same quantile, for latency rows.
    fn lag(&self, f: &Figures) -> Option<f64> {
        match self.2 {
            Source::Quantile { at, lagged: true, .. } => Some(at(&f.schedule_lag_seconds).unwrap_or(0.0)),
            _ => None,
        }
    }
}

const fn latency(at: fn(&Percentiles) -> Option<f64>, q: f64) -> Source {
    Source::Quantile {
        of: |f| &f.latency_seconds,
        at,
        q,
        lagged: true,
    }
}

/// The compared figures, in row order.
const METRICS: [Compared; 9] = [
    Compared("p50", Kind::Latency, latency(|p| p.p50, 0.5), Some(0)),
    Compared("p90", Kind::Latency, latency(|p| p.p90, 0.9), Some(1)),
    Compared("p99", Kind::Latency, latency(|p| p.p99, 0.99), Some(2)),
    Compared("p99.9", Kind::Latency, latency(|p| p.p999, 0.999), Some(3)),
    Compared("max", Kind::Latency, latency(|p| p.max, 1.0), Some(4)),
    Compared("rps", Kind::Rate, Source::Rps, Some(5)),
    Compared("error_rate", Kind::ErrorRate, Source::ErrorRate, None),
    Compared(
        "connect_p99",
        Kind::Latency,
        Source::Quantile {
            of: |f| &f.connect_seconds,
            at: |p| p.p99,
            q: 0.99,
            lagged: false,
        },
        None,
    ),
    Compared(
        "tls_handshake_p99",
        Kind::Latency,
        Source::Quantile {
            of: |f| &f.tls_handshake_seconds,
            at: |p| p.p99,
            q: 0.99,
            lagged: false,
        },
        None,
    ),
];

fn workloads(r: &Report) -> Vec<(&str, &Figures)> {
    r.workloads.iter().map(|w| (w.name.as_str(), &w.figures)).collect()
}

fn series(run: &Run, name: &str, index: usize) -> Option<Vec<f64>> {
    let s = run.samples.as_ref()?.get(&tag_of(name))?;
    Some(
        s.iter()
            .map(|i| if index == 5 { i.rps } else { i.quantiles[index] })
            .collect(),
    )
}

/// What [`pairs`] finds: (index in the baseline, index in the new run) of
/// each pair, and each workload left alone with whether it is the new
/// run's.
pub type Pairing = (Vec<(usize, usize)>, Vec<(String, bool)>);

/// The workloads of `base` and `new` that pair, as (index in `base`,
/// index in `new`), and the names of those that do not. Workloads pair by
/// name; two runs of one workload each pair whatever their names (the same
/// soak against a server on another port). `soakd compare`, `--baseline`
/// and `soakd history` all pair this way.
pub fn pairs(base: &[&str], new: &[&str]) -> Pairing {
    if base.len() == 1 && new.len() == 1 {
        return (vec![(0, 0)], Vec::new());
    }
    let mut out = Vec::new();
    let mut unmatched = Vec::new();
    for (ni, name) in new.iter().enumerate() {
        match base.iter().position(|b| b == name) {
            Some(bi) => out.push((bi, ni)),
            None => unmatched.push((name.to_string(), true)),
        }
    }
    for name in base {
        if !new.contains(name) {
            unmatched.push((name.to_string(), false));
        }
    }
    (out, unmatched)
}

/// Compares `new` with `base`, workload by workload (paired by
/// [`pairs`]).
pub fn compare(base: &Run, new: &Run, opts: &Options) -> Comparison {
    let (bw, nw) = (workloads(&base.report), workloads(&new.report));
    let (bnames, nnames): (Vec<&str>, Vec<&str>) = (bw.iter().map(|w| w.0).collect(), nw.iter().map(|w| w.0).collect());
    let (paired, missing) = pairs(&bnames, &nnames);
    let pairs: Vec<(&str, &Figures, &str, &Figures)> = paired
        .iter()
        .map(|&(b, n)| (bw[b].0, bw[b].1, nw[n].0, nw[n].1))
        .collect();
    // gRPC workloads also compare their non-OK ratio (in the workload's
    // http section, not its figures).
    let grpc_rate = |r: &Report, i: usize| r.workloads[i].http.grpc.as_ref().and_then(|g| g.error_rate);
    let grpc: Vec<Option<(f64, f64)>> = paired
        .iter()
        .map(|&(b, n)| grpc_rate(&base.report, b).zip(grpc_rate(&new.report, n)))
        .collect();
    let unmatched = missing
        .into_iter()
        .map(|(name, in_new)| format!("{name} (only in {})", if in_new { &new.label } else { &base.label }))
        .collect();
    let mut rows = Vec::new();
    for ((bname, bv, nname, nv), grpc) in pairs.into_iter().zip(grpc) {
        let grpc_row = grpc.map(|(b, n)| {
            let e = Evidence {
                kind: Kind::ErrorRate,
                baseline: b,
                new: n,
                samples: None,
                tail: f64::INFINITY,
                lag: None,
            };
            Row::judged(nname, "grpc_error_rate", &e, opts)
        });
        for m in &METRICS {
            let (Some(b), Some(n)) = (m.value(bv), m.value(nv)) else {
                continue;
            };
            let samples =
                m.3.and_then(|i| Some((series(base, bname, i)?, series(new, nname, i)?)));
            // The generator's lateness at the same quantile, in either run.
            let lag = m.lag(bv).zip(m.lag(nv)).map(|(a, b)| a.max(b));
            let e = Evidence {
                kind: m.1,
                baseline: b,
                new: n,
                samples: samples.as_ref().map(|(a, c)| (a.as_slice(), c.as_slice())),
                tail: m.tail(bv).min(m.tail(nv)),
                lag,
            };
            rows.push(Row::judged(nname, m.0, &e, opts));
        }
        rows.extend(grpc_row);
    }
    let mut c = Comparison {
        baseline: base.label.clone(),
        new: new.label.clone(),
        tolerance: opts.tolerance,
        rows,
        unmatched,
    };
    server::rows(&base.report, &new.report, opts, &mut c);
    c
}

impl Row {
    /// The row of `metric` of `workload`, judged on `e` with `opts`.
    fn judged(workload: &str, metric: &'static str, e: &Evidence<'_>, opts: &Options) -> Row {
        let j = judge(e, opts);
        Row {
            workload: workload.to_string(),
            metric,
            baseline: e.baseline,
            new: e.new,
            abs_change: j.abs_change,
            rel_change: j.rel_change,
            verdict: j.verdict,
            method: j.method,
            p_value: j.p_value,
            samples: j.samples,
            lag: e.lag,
            unit: None,
        }
    }
}

impl Comparison {
    /// Rows judged worse.
    pub fn worse(&self) -> impl Iterator<Item = &Row> {
        self.rows.iter().filter(|r| r.verdict == Verdict::Worse)
    }

    /// The verdict as an error (exit code 3) when a row is worse.
    pub fn verdict(&self) -> Result<(), Error> {
        let worse: Vec<String> = self
            .worse()
            .map(|r| {
                let rel = r.rel_change.map_or(String::new(), |x| format!(" {:+.0}%", x * 100.0));
                format!("{} {}{rel}", r.workload, r.metric)
            })
            .collect();
        if worse.is_empty() {
            Ok(())
        } else {
            Err(Error::Verdict(format!("worse than the baseline: {}", worse.join(", "))))
        }
    }

    /// The JSON form (pretty-printed).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a comparison serializes")
    }

    /// A table for people.
    pub fn text(&self, opts: &Options) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "soakd compare: {} → {}\n  a change counts when over {:.0}% and, for latency, over {}; with interval logs it must also pass a rank test (p < {})",
            self.baseline,
            self.new,
            opts.tolerance * 100.0,
            human(Some(opts.min_latency_change)),
            opts.significance
        );
        let mut last = None;
        for r in &self.rows {
            if last != Some(&r.workload) {
                let _ = writeln!(
                    s,
                    "\n  {}\n    {:<18}{:>10} {:>10} {:>11} {:>9}  {:<7} method",
                    r.workload, "", "baseline", "new", "change", "", "verdict"
                );
                last = Some(&r.workload);
            }
            let shown = |v: f64| match (r.metric, &r.unit) {
                ("slope", Some(u)) => crate::stats::trends_text::show(u, v),
                (_, Some(u)) => crate::stats::trends_text::show_value(u, v),
                ("rps", _) => format!("{v:.1}"),
                ("error_rate" | "grpc_error_rate", _) => format!("{:.3}%", v * 100.0),
                _ => human(Some(v)),
            };
            let change = match r.metric {
                _ if r.unit.is_some() => String::new(),
                "rps" => format!("{:+.1}", r.abs_change),
                "error_rate" | "grpc_error_rate" => format!("{:+.3}%", r.abs_change * 100.0),
                _ if r.abs_change < 0.0 => format!("-{}", human(Some(-r.abs_change))),
                _ => format!("+{}", human(Some(r.abs_change))),
            };
            let rel = r.rel_change.map_or("-".into(), |x| format!("{:+.1}%", x * 100.0));
            let method = match (r.method, r.p_value, r.samples) {
                (Method::RankTest, Some(p), Some([a, b])) => format!("rank test p={p:.3} ({a}/{b} intervals)"),
                (Method::TooFewSamples, ..) => "not judged: too few samples beyond it".into(),
                (Method::GeneratorLag, ..) => format!(
                    "not judged: soakd's own schedule lag ({}) is half the change or more",
                    human(r.lag)
                ),
                _ if r.metric == "slope" => "a significant rise on one side only, else tolerance".into(),
                _ => "tolerance".into(),
            };
            let verdict = match r.verdict {
                Verdict::Better => "better",
                Verdict::Same => "same",
                Verdict::Worse => "WORSE",
            };
            let _ = writeln!(
                s,
                "    {:<18}{:>10} {:>10} {:>11} {:>9}  {:<7} {}",
                r.metric,
                shown(r.baseline),
                shown(r.new),
                change,
                rel,
                verdict,
                method
            );
        }
        for u in &self.unmatched {
            let _ = writeln!(s, "\n  not compared: {u}");
        }
        let worse: Vec<String> = self.worse().map(|r| format!("{} {}", r.workload, r.metric)).collect();
        let _ = writeln!(
            s,
            "\n  verdict: {}",
            if worse.is_empty() {
                "nothing worse".to_string()
            } else {
                format!("WORSE: {}", worse.join(", "))
            }
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::samples::Interval;
    use super::*;
    use serde_json::Value;

    fn report(name: &str, p50: f64, rps: f64, errors: u64) -> Value {
        serde_json::json!({"workloads": [{
            "name": name,
            "latency_seconds": {"count": 10_000, "p50": p50, "p90": p50 * 2.0, "p99": p50 * 3.0, "p999": p50 * 4.0, "max": p50 * 5.0},
            "requests": {"completed": 10_000, "per_second": rps},
            "errors": {"reset": errors, "timeout": 0},
            "connect_seconds": {"count": 50, "p99": 0.0002},
            "tls_handshake_seconds": {"p99": null},
        }]})
    }

    fn run(r: Value, samples: Option<Samples>) -> Run {
        Run::of(serde_json::from_value(r).unwrap(), samples, "x.json")
    }

    fn row<'a>(c: &'a Comparison, metric: &str) -> &'a Row {
        c.rows.iter().find(|r| r.metric == metric).unwrap()
    }

    #[test]
    fn a_report_against_itself_is_all_same() {
        let r = run(report("a", 0.0002, 1000.0, 3), None);
        let c = compare(&r, &r, &Options::default());
        assert_eq!(c.rows.len(), 8, "no tls row without handshakes: {c:?}");
        assert!(c.rows.iter().all(|r| r.verdict == Verdict::Same && r.abs_change == 0.0));
        assert!(c.rows.iter().all(|r| r.method != Method::RankTest));
    }

    #[test]
    fn grpc_workloads_compare_their_non_ok_ratio() {
        let with = |rate: f64| {
            let mut r = report("a", 0.0002, 1000.0, 0);
            r["workloads"][0]["http"] = serde_json::json!({"grpc": {"method": "p.S/M", "error_rate": rate}});
            run(r, None)
        };
        let c = compare(&with(0.0), &with(0.02), &Options::default());
        let g = row(&c, "grpc_error_rate");
        assert_eq!((g.verdict, g.baseline, g.new), (Verdict::Worse, 0.0, 0.02));
        assert_eq!(
            c.rows.last().unwrap().metric,
            "grpc_error_rate",
            "after the workload's other rows"
        );
        assert!(c.text(&Options::default()).contains("+2.000%"));
        let c = compare(&with(0.02), &with(0.0205), &Options::default());
        assert_eq!(row(&c, "grpc_error_rate").verdict, Verdict::Same, "under the floor");
        // Not a gRPC workload on one side: no row.
        let c = compare(
            &run(report("a", 0.0002, 1000.0, 0), None),
            &with(0.5),
            &Options::default(),
        );
        assert!(c.rows.iter().all(|r| r.metric != "grpc_error_rate"));
    }

    #[test]
    fn a_change_the_generator_was_late_for_is_not_judged() {
        let mut base = report("a", 0.0001, 1000.0, 0);
        base["workloads"][0]["schedule_lag_seconds"] = serde_json::json!({"p50": 0.00002, "p99": 0.0005});
        let mut new = report("a", 0.0001, 1000.0, 0);
        new["workloads"][0]["latency_seconds"]["p99"] = serde_json::json!(0.0403);
        new["workloads"][0]["latency_seconds"]["p50"] = serde_json::json!(0.0021);
        new["workloads"][0]["schedule_lag_seconds"] = serde_json::json!({"p50": 0.00003, "p99": 0.035});
        new["workloads"][0]["errors"]["addr_unavailable"] = serde_json::json!(500);
        let c = compare(&run(base, None), &run(new, None), &Options::default());
        let p99 = row(&c, "p99");
        assert_eq!(
            (p99.verdict, p99.method, p99.lag),
            (Verdict::Same, Method::GeneratorLag, Some(0.035))
        );
        assert!(c.text(&Options::default()).contains("schedule lag (35.00ms)"));
        assert_eq!(row(&c, "p50").verdict, Verdict::Worse, "the server's own 2 ms");
        assert_eq!(
            row(&c, "error_rate").verdict,
            Verdict::Same,
            "host limits are not the target's"
        );
    }

    #[test]
    fn a_quantile_of_a_handful_of_samples_is_not_judged() {
        let base = run(report("a", 0.0002, 1000.0, 0), None);
        let mut r = report("a", 0.0002, 1000.0, 0);
        r["workloads"][0]["connect_seconds"]["p99"] = serde_json::json!(0.05);
        r["workloads"][0]["latency_seconds"]["max"] = serde_json::json!(0.5);
        let c = compare(&base, &run(r, None), &Options::default());
        for metric in ["connect_p99", "max"] {
            let row = row(&c, metric);
            assert_eq!(
                (row.verdict, row.method),
                (Verdict::Same, Method::TooFewSamples),
                "{row:?}"
            );
        }
        assert_eq!(
            row(&c, "p99").method,
            Method::Tolerance,
            "100 samples beyond p99 of 10,000"
        );
    }

    #[test]
    fn tolerance_and_floor() {
        let base = run(report("a", 0.0002, 1000.0, 0), None);
        // +50% of 200 µs: beyond the tolerance but under the 1 ms floor.
        let c = compare(&base, &run(report("b", 0.0003, 1000.0, 0), None), &Options::default());
        assert_eq!(row(&c, "p50").verdict, Verdict::Same);
        // +2 ms: worse, whatever the names (one workload each).
        let c = compare(&base, &run(report("b", 0.0022, 850.0, 0), None), &Options::default());
        assert_eq!(row(&c, "p50").verdict, Verdict::Worse);
        assert!((row(&c, "p50").rel_change.unwrap() - 10.0).abs() < 1e-9);
        assert_eq!(row(&c, "rps").verdict, Verdict::Worse, "15% fewer requests/s");
        // Faster and more: better; 5% more requests/s: same.
        let c = compare(
            &run(report("b", 0.0022, 1000.0, 0), None),
            &run(report("b", 0.0002, 1050.0, 0), None),
            &Options::default(),
        );
        assert_eq!(
            (row(&c, "p50").verdict, row(&c, "rps").verdict),
            (Verdict::Better, Verdict::Same)
        );
        // Errors from 0 to 30 in 10,000: 0.3 points, over the 0.1 floor.
        let c = compare(&base, &run(report("a", 0.0002, 1000.0, 30), None), &Options::default());
        assert_eq!(row(&c, "error_rate").verdict, Verdict::Worse);
        assert_eq!(row(&c, "error_rate").rel_change, None);
        let c = compare(&base, &run(report("a", 0.0002, 1000.0, 5), None), &Options::default());
        assert_eq!(row(&c, "error_rate").verdict, Verdict::Same);
    }

    fn samples(name: &str, p50s: &[f64]) -> Samples {
        let mut s = Samples::new();
        s.insert(
            tag_of(name),
            p50s.iter()
                .map(|&p| Interval {
                    start: 0.0,
                    seconds: 1.0,
                    quantiles: [p, p * 2.0, p * 3.0, p * 4.0, p * 5.0],
                    rps: 1000.0,
                })
                .collect(),
        );
        s
    }

    #[test]
    fn the_rank_test_needs_a_consistent_shift() {
        let flat: Vec<f64> = (0..10).map(|i| 0.002 + (i % 3) as f64 * 1e-5).collect();
        let base = run(report("a", 0.002, 1000.0, 0), Some(samples("a", &flat)));
        // The report's max doubled (one spike), the intervals did not move.
        let mut spiky = flat.clone();
        spiky[4] = 0.02;
        let mut r = report("a", 0.002, 1000.0, 0);
        r["workloads"][0]["latency_seconds"]["max"] = serde_json::json!(0.1);
        let c = compare(&base, &run(r, Some(samples("a", &spiky))), &Options::default());
        let max = row(&c, "max");
        assert_eq!((max.verdict, max.method), (Verdict::Same, Method::RankTest), "{max:?}");
        assert_eq!(max.samples, Some([10, 10]));
        // Every interval 2 ms slower: worse, and significant.
        let slower: Vec<f64> = flat.iter().map(|v| v + 0.002).collect();
        let c = compare(
            &base,
            &run(report("a", 0.004, 1000.0, 0), Some(samples("a", &slower))),
            &Options::default(),
        );
        let p50 = row(&c, "p50");
        assert_eq!((p50.verdict, p50.method), (Verdict::Worse, Method::RankTest), "{p50:?}");
        assert!(p50.p_value.unwrap() < 0.001);
        // Too few intervals: tolerance only, and the row says so.
        let short = run(report("a", 0.004, 1000.0, 0), Some(samples("a", &slower[..3])));
        assert_eq!(
            row(&compare(&base, &short, &Options::default()), "p50").method,
            Method::Tolerance
        );
        let text = c.text(&Options::default());
        assert!(text.contains("WORSE") && text.contains("rank test p="), "{text}");
        let json: Value = serde_json::from_str(&c.to_json()).unwrap();
        assert_eq!(json["rows"][0]["verdict"], "worse");
        assert_eq!(json["rows"][0]["method"], "rank_test");
        for m in [
            Method::RankTest,
            Method::Tolerance,
            Method::TooFewSamples,
            Method::GeneratorLag,
        ] {
            assert_eq!(serde_json::to_value(m).unwrap(), m.name());
        }
        for v in [Verdict::Better, Verdict::Same, Verdict::Worse] {
            assert_eq!(serde_json::to_value(v).unwrap(), v.name());
        }
    }

    #[test]
    fn workloads_pair_by_name() {
        let two = |a: f64| {
            let mut r = report("api", a, 100.0, 0);
            let mut w2 = r["workloads"][0].clone();
            w2["name"] = "web".into();
            r["workloads"].as_array_mut().unwrap().push(w2);
            r
        };
        let mut other = two(0.0002);
        other["workloads"][1]["name"] = "static".into();
        let c = compare(&run(two(0.0002), None), &run(other, None), &Options::default());
        assert!(c.rows.iter().all(|r| r.workload == "api"));
        assert_eq!(c.unmatched.len(), 2, "{:?}", c.unmatched);
    }
}
