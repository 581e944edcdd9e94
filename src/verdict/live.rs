//! `--baseline` at start: the baseline's report and interval log turned
//! into what the live comparison judges each window against
//! ([`crate::observe::baseline::Reference`]), and every reason not to
//! start checked before anything opens.
//!
//! Bad input (exit 2): a report with no workload that pairs with this
//! run's (pairs as `soakd compare` pairs them), or an interval log that is
//! not that report's run's (none of the paired workloads' tags in it, a
//! start time other than the run's, or intervals past its end). A load
//! that differs is not an error: it is said once at start and in the
//! report, and its verdicts are information, not a regression verdict.

use std::path::Path;
use std::time::Duration;

use super::Run;
use super::samples::{Interval, start_time, stretches, tag_of};
use crate::Error;
use crate::observe::baseline::{PairRef, RefFigures, RefSample, Reference};
use crate::observe::stated_interval;
use crate::plan::{Baseline, Plan};
use crate::report::{Counted, Figures, HOST_ERRORS, Load, Report, WorkloadReport};
use crate::stats::judge::Options;

/// How far a log's start may be from its report's: the log is opened a
/// moment before the run's clock starts (the observers, then the workers;
/// milliseconds), and a continued run keeps both its first start.
const START_SLACK_SECONDS: f64 = 5.0;

/// The reference of `plan`'s run against `base` (read with
/// [`Run::load`]), with the settings of `b`.
pub fn reference(plan: &Plan, base: &Run, b: &Baseline) -> Result<Reference, Error> {
    let names: Vec<&str> = plan.workloads.iter().map(|w| w.name.as_str()).collect();
    let base_names: Vec<&str> = base.report.workloads.iter().map(|w| w.name.as_str()).collect();
    let (paired, _) = super::pairs(&base_names, &names);
    if paired.is_empty() {
        return Err(Error::Usage(format!(
            "--baseline {}: no workload of it pairs with this run's (it has {}; this run has {}); give the report of a run of the same soak, or name the workloads alike",
            base.label,
            list(&base_names),
            list(&names)
        )));
    }
    if let Some(log) = &base.log {
        belongs(log, &base.report, &paired, &base.label)?;
    }
    let interval = base
        .log
        .as_deref()
        .and_then(|l| std::fs::read(l).ok())
        .and_then(|bytes| stated_interval(&bytes))
        .or_else(|| usual_interval(base))
        .unwrap_or(plan.hdr_log_interval);
    let mut load_differs = Vec::new();
    let several = paired.len() > 1;
    let mut pairs = Vec::new();
    for &(bi, ni) in &paired {
        let bw = &base.report.workloads[bi];
        let lw = &plan.workloads[ni];
        for d in bw.load.differences(&Load::of(lw)) {
            load_differs.push(if several { format!("{}: {d}", lw.name) } else { d });
        }
        let samples: Vec<RefSample> = base
            .samples
            .as_ref()
            .and_then(|s| s.get(&tag_of(&bw.name)))
            .map(|v| v.iter().map(sample).collect())
            .unwrap_or_default();
        let by_window = if bw.load.stages.is_empty() {
            Vec::new()
        } else {
            staged(base, bw, bi, b.window)?
        };
        pairs.push(PairRef {
            live: ni,
            name: lw.name.clone(),
            baseline_name: bw.name.clone(),
            whole: whole(&bw.figures),
            samples,
            by_window,
        });
    }
    let (base_shards, shards) = (base.report.shard.count.max(1), plan.shard.count.max(1));
    if base_shards != shards || base.report.shard.index.is_none() {
        load_differs.push(format!(
            "share of the plan {} → {}",
            share(base.report.shard.index, base_shards),
            share(Some(plan.shard.index), shards)
        ));
    }
    Ok(Reference {
        label: base.label.clone(),
        hdr_log: base.log.as_ref().map(|l| l.display().to_string()),
        window: b.window,
        interval,
        options: Options {
            tolerance: b.tolerance,
            ..Options::default()
        },
        staged: pairs.iter().any(|p| !p.by_window.is_empty()),
        load_differs,
        pairs,
    })
}

fn list(names: &[&str]) -> String {
    names.join(", ")
}

fn share(index: Option<u32>, count: u32) -> String {
    match (index, count) {
        (_, 1) => "the whole plan".into(),
        (None, n) => format!("{n} shards merged"),
        (Some(i), n) => format!("shard {i}/{n}"),
    }
}

/// The log is the report's run's: a paired workload's tag is in it, it
/// started when the run did, and it ends before the run did (with an
/// interval's slack).
fn belongs(log: &Path, report: &Report, paired: &[(usize, usize)], label: &str) -> Result<(), Error> {
    let bytes = std::fs::read(log).unwrap_or_default();
    let samples = super::samples::read_log(log, "--baseline-hdr-log")?;
    let not_its = |why: String| {
        Error::Usage(format!(
            "--baseline-hdr-log {}: not the interval log of --baseline {label} ({why}); give the log that run wrote (its report names it: {})",
            log.display(),
            report.hdr_log.as_deref().unwrap_or("none")
        ))
    };
    let tags: Vec<String> = paired
        .iter()
        .map(|&(bi, _)| tag_of(&report.workloads[bi].name))
        .collect();
    if !tags.iter().any(|t| samples.contains_key(t)) {
        let found: Vec<&str> = samples.keys().map(String::as_str).collect();
        return Err(not_its(format!(
            "it has no interval of {} (its tags: {})",
            tags.join(", "),
            if found.is_empty() {
                "none".into()
            } else {
                found.join(", ")
            }
        )));
    }
    let started = report.timeline.started_at_unix_seconds;
    if let Some(t) = start_time(log)
        && started > 0.0
        && (t - started).abs() > START_SLACK_SECONDS
    {
        return Err(not_its(format!(
            "it started at {} and the report's run at {}",
            stamp(t),
            stamp(started)
        )));
    }
    let every = stated_interval(&bytes).map_or(10.0, |d| d.as_secs_f64());
    let end = samples
        .values()
        .flatten()
        .map(|i| i.start + i.seconds)
        .fold(0.0, f64::max);
    if report.duration_seconds > 0.0 && end > report.duration_seconds + 2.0 * every + START_SLACK_SECONDS {
        return Err(not_its(format!(
            "its intervals run to {end:.0} s, the report's run lasted {:.0} s",
            report.duration_seconds
        )));
    }
    Ok(())
}

fn stamp(unix: f64) -> String {
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + Duration::from_secs_f64(unix.max(0.0))).to_string()
}

/// The most common interval length of the run's samples.
fn usual_interval(base: &Run) -> Option<Duration> {
    let mut lengths: Vec<f64> = base.samples.as_ref()?.values().flatten().map(|i| i.seconds).collect();
    lengths.sort_by(f64::total_cmp);
    lengths
        .get(lengths.len() / 2)
        .map(|s| Duration::from_secs_f64((s * 10.0).round() / 10.0))
}

fn sample(i: &Interval) -> RefSample {
    RefSample {
        start: i.start,
        values: [i.quantiles[0], i.quantiles[2], i.quantiles[3], i.rps],
    }
}

/// A workload's whole-run figures.
fn whole(f: &Figures) -> RefFigures {
    let l = &f.latency_seconds;
    let g = &f.schedule_lag_seconds;
    RefFigures {
        latency: [l.p50, l.p90, l.p99, l.p999],
        lag: [g.p50, g.p90, g.p99, g.p999],
        count: l.count,
        rps: Some(f.requests.per_second),
        error_rate: Some(f.error_rate(Counted::Target).unwrap_or(0.0)),
    }
}

/// A staged baseline's figures per window: latency from its interval log
/// (exact, per workload) or, without one, from its timeline (the points'
/// quantiles weighted by their responses: close, not exact); requests/s
/// and the error rate from the timeline; the schedule lag of the whole
/// run.
fn staged(base: &Run, bw: &WorkloadReport, bi: usize, window: Duration) -> Result<Vec<RefFigures>, Error> {
    let whole = whole(&bw.figures);
    let w = window.as_secs_f64().max(1e-3);
    let points = &base.report.timeline.points;
    let end = points.last().map_or(0.0, |p| p.t + p.seconds);
    let windows = (end / w).ceil() as usize;
    let one = base.report.workloads.len() == 1;
    let mut out: Vec<RefFigures> = (0..windows)
        .map(|k| {
            let (from, to) = (k as f64 * w, (k + 1) as f64 * w);
            let inside = points.iter().filter(|p| p.t >= from && p.t < to && !p.gap);
            let (mut completed, mut errors, mut secs) = (0u64, 0u64, 0.0);
            let (mut p50, mut p99, mut weight) = (0.0, 0.0, 0.0);
            for p in inside {
                secs += p.seconds;
                let (c, e, q50, q99) = if one {
                    let host: u64 = HOST_ERRORS.iter().filter_map(|k| p.errors.get(k.name())).sum();
                    (p.completed, p.errors.values().sum::<u64>() - host, p.p50, p.p99)
                } else {
                    match p.workloads.get(bi) {
                        Some(x) => (x.completed, x.errors, x.p50, x.p99),
                        None => (0, 0, None, None),
                    }
                };
                completed += c;
                errors += e;
                if let (Some(a), Some(b)) = (q50, q99) {
                    p50 += a * c as f64;
                    p99 += b * c as f64;
                    weight += c as f64;
                }
            }
            let attempts = completed + errors;
            RefFigures {
                latency: if weight > 0.0 {
                    [Some(p50 / weight), None, Some(p99 / weight), None]
                } else {
                    [None; 4]
                },
                lag: whole.lag,
                count: completed,
                rps: (secs > 0.0).then(|| completed as f64 / secs),
                error_rate: (attempts > 0).then(|| errors as f64 / attempts as f64),
            }
        })
        .collect();
    if let Some(log) = &base.log {
        for (k, s) in stretches(log, &tag_of(&bw.name), window, "--baseline-hdr-log")?
            .into_iter()
            .enumerate()
        {
            if s.count == 0 {
                continue;
            }
            if k >= out.len() {
                out.resize(
                    k + 1,
                    RefFigures {
                        lag: whole.lag,
                        ..RefFigures::default()
                    },
                );
            }
            out[k].latency = s.quantiles;
            out[k].count = s.count;
            if out[k].rps.is_none() && s.seconds > 0.0 {
                out[k].rps = Some(s.count as f64 / s.seconds);
            }
        }
    }
    // A window the baseline measured nothing in (a gap) takes its whole
    // run's figures rather than judging against nothing.
    for f in &mut out {
        if f.latency.iter().all(Option::is_none) {
            *f = whole;
        }
    }
    Ok(out)
}
