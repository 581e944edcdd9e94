//! Thresholds while the run goes: the `soakd_threshold_passing` gauges
//! and `--abort-on-fail`.
//!
//! The end-of-run verdict is the report's; this is the same verdict taken
//! once a second on the figures so far, so Grafana and alerts can show a
//! threshold failing hours before the soak ends, and a soak that is
//! already lost can stop early. Both use [`crate::report::measure`], so a
//! metric means the same thing live and at the end.
//!
//! The default window is the whole run (the cumulative totals, nothing
//! kept). With `--threshold-window DUR` the recent past is kept as at most
//! [`SLICES`] slices of DUR/10 each (at least a second), merged at each
//! evaluation: memory is bounded by the slice count, not by DUR, at the
//! price of a window that is DUR to DUR + one slice (and a tick) long.
//!
//! A threshold with nothing measured yet (no response, no ramp completed)
//! counts as passing live: nothing has violated it. At the end of the run
//! the same threshold fails, since a soak that measured nothing proved
//! nothing.
//!
//! Trend thresholds (`target_rss_slope`, `p99_drift`, …) are judged on the
//! timeline so far with the report's own analysis
//! ([`crate::stats::trends`], [`ThresholdResult::of_trend`]), every
//! [`TREND_EVERY`] rather than every second: a full timeline's slopes are
//! half a million pairs. One that cannot be judged yet (too few points
//! after the warmup) passes live, like any unmeasured threshold; the
//! threshold window does not apply to them (a trend needs the whole
//! steady part).

use std::collections::VecDeque;
use std::time::Duration;

use crate::plan::{Plan, Threshold};
use crate::report::{ThresholdResult, measure, measure_outages, threshold_value, trend_settings};
use crate::state::{ItemSaved, SliceSaved, WindowSaved};
use crate::stats::trends::TrendInput;
use crate::stats::watch::{SeriesTable, SeriesTrend};
use crate::stats::{MAX_POINTS, MAX_WORKLOADS, Totals, WorkloadStats};

/// Slices a window is kept in.
const SLICES: u32 = 10;
/// How often thresholds are evaluated.
const EVERY: Duration = Duration::from_secs(1);
/// How often trend thresholds are evaluated.
pub const TREND_EVERY: Duration = Duration::from_secs(10);
/// The `target` label of a run-wide threshold (over all workloads).
pub const ALL_TARGETS: &str = "*";

/// One threshold being watched.
struct Watched {
    workload: Option<usize>,
    threshold: Threshold,
    target: String,
    passing: bool,
    /// When it last went from passing to failing (run time).
    failing_since: Option<Duration>,
    last: Option<f64>,
}

/// Part of a window: what arrived during it, and the fewest connections
/// open at a tick in it (after the ramp).
struct Slice {
    start: Duration,
    stats: Vec<WorkloadStats>,
    open_min: Vec<Option<u64>>,
    open_min_all: Option<u64>,
}

/// The thresholds of a run, evaluated live.
pub struct Watch {
    items: Vec<Watched>,
    window: Option<Duration>,
    slice_len: Duration,
    slices: VecDeque<Slice>,
    abort_after: Option<Duration>,
    last_eval: Option<Duration>,
    /// When the trends were last computed.
    last_trends: Option<Duration>,
    /// The planned run time (the warmup is a tenth of it).
    duration: Option<Duration>,
    /// `--warmup`, when given.
    warmup: Option<Duration>,
    /// Why the run should stop, once a threshold failed long enough.
    pub abort: Option<String>,
    /// With trend thresholds: what the trends are computed from, filled
    /// in place every [`TREND_EVERY`] (its room made at start).
    trend_input: Option<TrendInput>,
    /// What an evaluation adds up (the window's slices per workload, all
    /// workloads summed), kept from second to second and cleared: each
    /// [`WorkloadStats`] is four full histograms (~740 KB), and making
    /// and dropping them every second moved the top of soakd's heap
    /// (issue 29, bench/README.md).
    merged: Vec<WorkloadStats>,
    sum: WorkloadStats,
    /// A slice that left the window, kept for the next one to start in.
    spare_slice: Option<Slice>,
}

fn min_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl Watch {
    /// Watches the plan's thresholds; `None` when it has none.
    pub fn new(plan: &Plan) -> Option<Watch> {
        let items: Vec<Watched> = plan
            .all_thresholds()
            .into_iter()
            .map(|(wi, t)| Watched {
                workload: wi,
                threshold: t.clone(),
                target: wi.map_or(ALL_TARGETS.to_string(), |wi| plan.workloads[wi].name.clone()),
                passing: true,
                failing_since: None,
                last: None,
            })
            .collect();
        if items.is_empty() {
            return None;
        }
        // Trend thresholds analyze the whole timeline every 10 s: the
        // input and the analysis' working vectors get their room for a
        // full timeline now, before the ramp, so the analysis never grows
        // soakd's heap (issue 29).
        let trend_input = items.iter().any(|w| w.threshold.metric.is_trend()).then(|| {
            let workloads = plan.workloads.len().min(MAX_WORKLOADS);
            crate::stats::trends::reserve(MAX_POINTS + 1, workloads);
            TrendInput::with_room(MAX_POINTS + 1, workloads)
        });
        let slice_len = plan
            .threshold_window
            .map_or(Duration::ZERO, |w| (w / SLICES).max(Duration::from_secs(1)));
        Some(Watch {
            items,
            window: plan.threshold_window,
            slice_len,
            slices: VecDeque::new(),
            abort_after: plan.abort_on_fail,
            last_eval: None,
            last_trends: None,
            duration: plan.duration,
            warmup: plan.warmup(),
            abort: None,
            trend_input,
            merged: Vec::new(),
            sum: WorkloadStats::default(),
            spare_slice: None,
        })
    }

    /// (target label, threshold, passing) of every threshold, for the
    /// gauges.
    pub fn states(&self) -> Vec<(String, String, bool)> {
        self.items
            .iter()
            .map(|w| (w.target.clone(), w.threshold.text.clone(), w.passing))
            .collect()
    }

    /// The live state as data for a `--state` checkpoint.
    pub fn saved(&self) -> WindowSaved {
        WindowSaved {
            items: self
                .items
                .iter()
                .map(|w| ItemSaved {
                    threshold: w.threshold.text.clone(),
                    passing: w.passing,
                    failing_since: w.failing_since,
                    last: w.last,
                })
                .collect(),
            slices: self
                .slices
                .iter()
                .map(|s| SliceSaved {
                    start: s.start,
                    stats: s.stats.clone(),
                    open_min: s.open_min.clone(),
                    open_min_all: s.open_min_all,
                })
                .collect(),
            last_eval: self.last_eval,
            last_trends: self.last_trends,
            abort: self.abort.clone(),
        }
    }

    /// Continues from a checkpoint: each threshold's state (matched by
    /// its text; the plan digest makes them the same) and the window's
    /// slices, so a threshold failing for 50 minutes of a 60-minute
    /// `--abort-on-fail` is still 10 minutes from the abort.
    pub fn restore(&mut self, s: WindowSaved) {
        for (w, saved) in self.items.iter_mut().zip(s.items) {
            if w.threshold.text == saved.threshold {
                w.passing = saved.passing;
                w.failing_since = saved.failing_since;
                w.last = saved.last;
            }
        }
        if self.window.is_some() {
            self.slices = s
                .slices
                .into_iter()
                .map(|s| Slice {
                    start: s.start,
                    stats: s.stats,
                    open_min: s.open_min,
                    open_min_all: s.open_min_all,
                })
                .collect();
        }
        self.last_eval = s.last_eval;
        self.last_trends = s.last_trends;
        self.abort = s.abort;
    }

    /// Called every aggregation tick; returns true when the states were
    /// evaluated (once a second).
    pub fn tick(&mut self, totals: &mut Totals, elapsed: Duration) -> bool {
        if self.window.is_some() {
            self.record(totals, elapsed);
        }
        if self.last_eval.is_some_and(|t| elapsed < t + EVERY) {
            return false;
        }
        self.last_eval = Some(elapsed);
        self.evaluate(totals, elapsed);
        true
    }

    /// Adds what arrived since the last tick to the current slice.
    fn record(&mut self, totals: &mut Totals, elapsed: Duration) {
        let n = totals.names.len();
        let window = self.window.unwrap_or_default();
        while self
            .slices
            .front()
            .is_some_and(|s| s.start + self.slice_len + window <= elapsed)
        {
            self.spare_slice = self.slices.pop_front();
        }
        if self.slices.back().is_none_or(|s| elapsed >= s.start + self.slice_len) {
            let slice = match self.spare_slice.take() {
                Some(mut s) => {
                    s.start = elapsed;
                    s.stats.iter_mut().for_each(WorkloadStats::clear);
                    s.open_min.iter_mut().for_each(|m| *m = None);
                    s.open_min_all = None;
                    s
                }
                None => Slice {
                    start: elapsed,
                    stats: Vec::new(),
                    open_min: Vec::new(),
                    open_min_all: None,
                },
            };
            self.slices.push_back(slice);
        }
        let slice = self.slices.back_mut().expect("a slice was just ensured");
        totals.take_recent(&mut slice.stats);
        slice.open_min.resize(n, None);
        for wi in 0..n {
            if totals.ramp[wi].is_some() && !totals.reramping[wi] && totals.open_at_stop.is_none() {
                slice.open_min[wi] = min_opt(slice.open_min[wi], Some(totals.gauges[wi].open));
            }
        }
        if totals.open_min_all.is_some() && !totals.reramping.contains(&true) && totals.open_at_stop.is_none() {
            let open = totals.gauges.iter().map(|g| g.open).sum();
            slice.open_min_all = min_opt(slice.open_min_all, Some(open));
        }
    }

    fn evaluate(&mut self, totals: &mut Totals, elapsed: Duration) {
        let n = totals.names.len();
        // The figures each threshold is judged on: the totals themselves
        // for the whole run, else the window's slices merged.
        let merged = &mut self.merged;
        let (per, open_min, open_min_all, secs): (&[WorkloadStats], Vec<Option<u64>>, Option<u64>, f64) =
            match self.window {
                None => (
                    &totals.stats,
                    totals.open_min.clone(),
                    totals.open_min_all,
                    elapsed.as_secs_f64(),
                ),
                Some(_) => {
                    merged.resize_with(n, WorkloadStats::default);
                    merged.iter_mut().for_each(WorkloadStats::clear);
                    let mut mins = vec![None; n];
                    let mut all = None;
                    for s in &self.slices {
                        for (wi, st) in s.stats.iter().enumerate() {
                            merged[wi].add(st);
                            mins[wi] = min_opt(mins[wi], s.open_min[wi]);
                        }
                        all = min_opt(all, s.open_min_all);
                    }
                    let since = self.slices.front().map_or(Duration::ZERO, |s| s.start);
                    (&merged[..], mins, all, (elapsed - since).as_secs_f64())
                }
            };
        // Only a run-wide threshold on the live figures reads the sum
        // (trends and outages have their own).
        let needs_sum = self.items.iter().any(|w| {
            w.workload.is_none()
                && !w.threshold.metric.is_trend()
                && !w.threshold.metric.is_outage()
                && !w.threshold.metric.is_watch()
        });
        let sum = &mut self.sum;
        if needs_sum {
            sum.clear();
            for s in per {
                sum.add(s);
            }
        }
        let trends = match self.trend_input.as_mut() {
            Some(input) if self.last_trends.is_none_or(|t| elapsed >= t + TREND_EVERY) => {
                self.last_trends = Some(elapsed);
                let ramp = totals
                    .ramp
                    .iter()
                    .try_fold(Duration::ZERO, |acc, r| r.map(|r| acc.max(r)));
                totals.timeline.trend_input(input);
                Some(crate::stats::trends::analyze_input(
                    input,
                    &trend_settings(self.duration, self.warmup, ramp, elapsed),
                    &totals.names,
                ))
            }
            _ => None,
        };
        for w in &mut self.items {
            if w.threshold.metric.is_watch() {
                // Judged as the watch's trends come (`judge_watch`).
                continue;
            }
            if w.threshold.metric.is_trend() {
                // Between trend evaluations the last verdict stands.
                let Some(trends) = &trends else { continue };
                let name = w.workload.and_then(|wi| totals.names.get(wi)).map(String::as_str);
                let r = ThresholdResult::of_trend(&w.threshold, name, trends);
                w.last = r.measured;
                w.passing = r.pass || r.measured.is_none();
            } else if w.threshold.metric.is_outage() {
                // The whole run's outages, whatever the window: one going
                // on counts up to now.
                let name = w.workload.and_then(|wi| totals.names.get(wi)).map(String::as_str);
                w.last = measure_outages(
                    w.threshold.metric,
                    totals.outages.outages(),
                    name,
                    elapsed.as_secs_f64(),
                )
                .0;
                w.passing = w.last.is_none() || w.threshold.passes(w.last);
            } else {
                w.last = match w.workload {
                    Some(wi) if wi < per.len() => measure(w.threshold.metric, &per[wi], secs, open_min[wi]),
                    Some(_) => None,
                    None => measure(w.threshold.metric, sum, secs, open_min_all),
                };
                w.passing = w.last.is_none() || w.threshold.passes(w.last);
            }
            held(w, elapsed, self.abort_after, &mut self.abort);
        }
    }

    /// Judges the watch thresholds (`slope(rss)<=1MiB/h`, …) on the
    /// watched series' trends as the observer computed them (every
    /// [`TREND_EVERY`]); returns true when there was one to judge.
    pub fn judge_watch(&mut self, table: &SeriesTable, trends: &[SeriesTrend], elapsed: Duration) -> bool {
        let mut any = false;
        for w in self.items.iter_mut().filter(|w| w.threshold.metric.is_watch()) {
            any = true;
            let r = crate::report::server::judge(&w.threshold, table.series.iter().zip(trends));
            w.last = r.measured;
            // Nothing judged yet (too few values) passes live, as any
            // unmeasured threshold does.
            w.passing = r.pass || r.note.as_deref().is_some_and(|n| n.starts_with("not judged"));
            held(w, elapsed, self.abort_after, &mut self.abort);
        }
        any
    }
}

/// After `w` was judged at `elapsed`: how long it has been failing, and
/// the run's abort once that reaches `--abort-on-fail`.
fn held(w: &mut Watched, elapsed: Duration, abort_after: Option<Duration>, abort: &mut Option<String>) {
    if w.passing {
        w.failing_since = None;
        return;
    }
    let since = *w.failing_since.get_or_insert(elapsed);
    if let Some(after) = abort_after
        && abort.is_none()
        && elapsed - since >= after
    {
        *abort = Some(format!(
            "threshold {} ({}) failed for {} (measured {}); stopped by --abort-on-fail/abort_on_fail",
            w.threshold.text,
            w.workload.map_or("all workloads", |_| w.target.as_str()),
            humantime::format_duration(Duration::from_secs((elapsed - since).as_secs())),
            threshold_value(w.threshold.metric.name(), w.last)
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{Delta, Mailbox};
    use std::sync::Mutex;

    fn plan(window: Option<Duration>, abort: Option<Duration>, thresholds: &[&str]) -> Plan {
        let mut argv = vec!["soakd", "run", "http://127.0.0.1:1/", "-c", "4"];
        for t in thresholds {
            argv.extend(["--threshold", t]);
        }
        let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(argv).unwrap();
        let crate::cli::Command::Run(run) = cli.command else {
            unreachable!()
        };
        let mut p = run.into_plan().unwrap();
        p.threshold_window = window;
        p.abort_on_fail = abort;
        p
    }

    /// One second of traffic: `n` responses of `latency`, 4 connections
    /// open and ramped.
    fn second(totals: &mut Totals, mb: &[Mailbox], n: u64, latency: Duration) {
        {
            let mut d = mb[0].lock().unwrap();
            for _ in 0..n {
                crate::stats::record(&mut d.stats[0].latency, latency);
            }
            d.stats[0].counters.completed += n;
            d.stats[0].counters.sent += n;
            d.gauges[0].open = 4;
            d.gauges[0].desired = 4;
            d.full_at[0] = Some(Duration::ZERO);
        }
        totals.collect(mb);
    }

    fn run(window: Option<Duration>, abort: Option<Duration>) -> (Vec<Vec<bool>>, Option<String>) {
        let p = plan(window, abort, &["p50<10ms", "open_min>=4"]);
        let mut totals = Totals::new(vec![p.workloads[0].name.clone()], 1, false, window.is_some());
        let mb: Vec<Mailbox> = vec![Mutex::new(Delta::new(1))];
        let mut watch = Watch::new(&p).unwrap();
        let mut states = Vec::new();
        // 5 s fast, then 5 s slow (four times as many slow responses
        // would be needed to move the whole run's median past 10 ms).
        for s in 1..=10u64 {
            let slow = s > 5;
            second(
                &mut totals,
                &mb,
                if slow { 100 } else { 1000 },
                Duration::from_millis(if slow { 50 } else { 1 }),
            );
            assert!(watch.tick(&mut totals, Duration::from_secs(s)));
            states.push(
                watch
                    .states()
                    .into_iter()
                    .map(|(target, _, ok)| {
                        assert_eq!(target, "*");
                        ok
                    })
                    .collect(),
            );
        }
        (states, watch.abort.clone())
    }

    /// An evaluation a second for a whole soak: past its first seconds
    /// it makes no large allocation (the window's slices, the merged
    /// figures and the run-wide sum are kept and cleared; issue 29).
    #[test]
    fn evaluations_allocate_nothing_large_once_running() {
        let p = plan(Some(Duration::from_secs(3)), None, &["p50<10ms", "p99<1s"]);
        let mut totals = Totals::new(vec![p.workloads[0].name.clone()], 1, false, true);
        let mb: Vec<Mailbox> = vec![Mutex::new(Delta::new(1))];
        let mut watch = Watch::new(&p).unwrap();
        let mut large = Vec::new();
        for s in 1..=12u64 {
            second(&mut totals, &mb, 100, Duration::from_millis(2));
            let before = crate::test_alloc::large_allocations();
            assert!(watch.tick(&mut totals, Duration::from_secs(s)));
            large.push(crate::test_alloc::large_allocations() - before);
        }
        // The window (3 slices and one spare) and the sums fill in the
        // first seconds; from then on nothing.
        assert!(large[..5].iter().sum::<u64>() > 0, "{large:?}");
        assert_eq!(large[5..], [0; 7], "large allocations per evaluation: {large:?}");
        assert!(watch.states().iter().all(|(_, _, ok)| *ok));
    }

    #[test]
    fn the_whole_run_and_a_window() {
        let (whole, abort) = run(None, Some(Duration::from_secs(1)));
        assert!(whole.iter().all(|s| s == &[true, true]), "{whole:?}");
        assert_eq!(abort, None);
        // A 2 s window (slices of 1 s, so it spans 2 to 3 s) forgets the
        // fast seconds: at 7 s it still holds the last fast one, from 8 s
        // on only slow ones.
        let (windowed, abort) = run(Some(Duration::from_secs(2)), Some(Duration::from_secs(2)));
        let p50: Vec<bool> = windowed.iter().map(|s| s[0]).collect();
        assert_eq!(
            p50,
            [true, true, true, true, true, true, true, false, false, false],
            "{windowed:?}"
        );
        assert!(windowed.iter().all(|s| s[1]), "open_min held: {windowed:?}");
        let why = abort.expect("failing from 8 s, for 2 s at 10 s");
        assert!(
            why.contains("p50<10ms") && why.contains("all workloads") && why.contains("failed for 2s"),
            "{why}"
        );
    }

    /// A run continued from its `--state`: the window's slices and how
    /// long a threshold has been failing carry over, through the state's
    /// JSON, so `--abort-on-fail` counts from when it began failing in the
    /// first process.
    #[test]
    fn a_restored_watch_keeps_its_window_and_failing_time() {
        let p = plan(
            Some(Duration::from_secs(2)),
            Some(Duration::from_secs(4)),
            &["p50<10ms"],
        );
        let mut totals = Totals::new(vec![p.workloads[0].name.clone()], 1, false, true);
        let mb: Vec<Mailbox> = vec![Mutex::new(Delta::new(1))];
        let mut watch = Watch::new(&p).unwrap();
        for s in 1..=3u64 {
            second(&mut totals, &mb, 100, Duration::from_millis(50));
            watch.tick(&mut totals, Duration::from_secs(s));
        }
        assert!(!watch.states()[0].2);
        let saved: WindowSaved = serde_json::from_str(&serde_json::to_string(&watch.saved()).unwrap()).unwrap();
        let mut again = Watch::new(&p).unwrap();
        again.restore(saved);
        assert!(!again.states()[0].2, "failing, as before the restart");
        assert_eq!(again.slices.len(), watch.slices.len());
        assert_eq!(again.items[0].failing_since, Some(Duration::from_secs(1)));
        // Failing since 1 s: the abort comes at 5 s of run time, not 4 s
        // after the restart.
        let mut totals = Totals::new(vec![p.workloads[0].name.clone()], 1, false, true);
        for s in 4..=5u64 {
            second(&mut totals, &mb, 100, Duration::from_millis(50));
            again.tick(&mut totals, Duration::from_secs(s));
        }
        assert!(again.abort.is_some(), "aborted at 5 s");
    }

    /// A trend threshold live: unjudged (passing) until enough points
    /// follow the warmup, then judged every 10 s on the timeline so far,
    /// failing on a real leak and stopping the run with --abort-on-fail.
    #[test]
    fn a_leak_fails_a_slope_threshold_live() {
        let mut argv = vec!["soakd", "run", "http://127.0.0.1:1/", "--target-pid", "1"];
        argv.extend([
            "--threshold",
            "target_rss_slope<=1MiB/min",
            "--threshold",
            "p99_drift<=50%",
        ]);
        let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(argv).unwrap();
        let crate::cli::Command::Run(run) = cli.command else {
            unreachable!()
        };
        let mut p = run.into_plan().unwrap();
        p.abort_on_fail = Some(Duration::from_secs(10));
        let mut totals = Totals::new(vec![p.workloads[0].name.clone()], 1, false, false);
        let mut watch = Watch::new(&p).unwrap();
        let mut first_failing = None;
        for s in 1..=60u64 {
            // 10 MiB a minute.
            totals.timeline.sample(crate::stats::Resources {
                targets: vec![crate::stats::ProcSample {
                    pid: 1,
                    rss_bytes: 100_000_000 + s * 10 * 1_048_576 / 60,
                    cpu_ms: 0,
                    open_fds: Some(10),
                }],
                soakd_rss_bytes: Some(1 << 20),
            });
            totals.timeline.tick(Duration::from_secs(s));
            watch.tick(&mut totals, Duration::from_secs(s));
            let states = watch.states();
            assert!(states[1].2, "p99_drift has nothing to judge: passing live");
            if !states[0].2 && first_failing.is_none() {
                first_failing = Some(s);
            }
        }
        // Judged at 1, 11, 21 … s; at 11 s there are 10 points, 1 of them
        // after the warmup (10% of 11 s): not judged. At 21 s, 19 after
        // the 2.1 s warmup: failing.
        assert_eq!(first_failing, Some(21));
        let why = watch.abort.expect("failing from 21 s, for 10 s at 31 s");
        assert!(
            why.contains("target_rss_slope<=1MiB/min") && why.contains("MiB/min"),
            "{why}"
        );
    }
}
