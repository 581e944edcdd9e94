//! `--baseline` while the run goes: every `--baseline-window` the window
//! just ended is judged against the baseline with `soakd compare`'s rules
//! ([`crate::stats::judge`]), so a regression that starts on day one of a
//! three-day soak is on the dashboard, in the alerts and (with
//! `--abort-on-fail`) in the exit code on day one.
//!
//! What is compared, per workload that pairs with one of the baseline's:
//! latency p50, p99 and p99.9, requests/s and the target's error rate
//! (host limits left out). The baseline side is its whole run, or, when
//! it had stages, its part at the same elapsed time (a ramp is compared
//! with a ramp); [`Reference`] holds both, made at start from its report
//! and interval log (`verdict::live`). The live side is the window,
//! measured as the difference of the cumulative histograms at its two
//! ends (nothing is recorded twice, the workers are not involved), and
//! cut into sub-intervals as long as the baseline log's, whose quantiles
//! are the rank test's samples. The generator-lag excuse takes the larger
//! of the two sides' schedule lag at the quantile.
//!
//! Windows are aligned to the run's start (window k covers k·W to
//! (k+1)·W); a last window shorter than half of W, at the stop, is not
//! judged. A regression starts at the start of the first window judged
//! worse and holds to the end of the last one of that run of windows;
//! `--abort-on-fail DUR` stops the run once one has held DUR. When the
//! baseline's load differs from this run's, the verdicts are published
//! (and `soakd_baseline_load_matches` is 0) but nothing is aborted.
//!
//! Memory is fixed at start: four histograms per compared workload, the
//! sub-interval samples of one window, and the window list of the report
//! section ([`MAX_WINDOWS`]), filled once at start so its pages are
//! touched before the ramp rather than over the following days.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::metrics::BaselineGauges;
use crate::report::baseline::{
    BaselineSection, Judged, MAX_WINDOWS, MetricState, MetricSummary, Pair, Row, Window, WindowRow,
};
use crate::report::{Counted, error_rate};
use crate::state::BaselineSaved;
use crate::stats::judge::{Evidence, Kind, Method, Options, Verdict, judge};
use crate::stats::{ErrorKind, Totals, histogram};

/// The baseline's figures over one stretch of its run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RefFigures {
    /// Latency at p50, p90, p99 and p99.9, seconds.
    pub latency: [Option<f64>; 4],
    /// soakd's own schedule lag at the same quantiles, seconds.
    pub lag: [Option<f64>; 4],
    /// Latency samples (for the too-few-samples rule).
    pub count: u64,
    /// Completed requests per second.
    pub rps: Option<f64>,
    /// The target's error rate (host limits left out).
    pub error_rate: Option<f64>,
}

/// One interval of the baseline's interval log: when it started and its
/// p50, p99, p99.9 (seconds) and requests/s.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct RefSample {
    /// Start, seconds since the baseline's start.
    pub start: f64,
    /// p50, p99, p99.9, requests/s.
    pub values: [f64; 4],
}

/// The baseline of one of this run's workloads.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PairRef {
    /// This run's workload (index in the plan).
    pub live: usize,
    /// Its name.
    pub name: String,
    /// The baseline's workload it pairs with.
    pub baseline_name: String,
    /// The baseline's whole run.
    pub whole: RefFigures,
    /// Its intervals, oldest first (empty without an interval log).
    pub samples: Vec<RefSample>,
    /// A baseline with stages: its figures per window of this run's
    /// length (window k covers k·W to (k+1)·W of its run); empty without
    /// stages. Past its end, the last one stands.
    pub by_window: Vec<RefFigures>,
}

/// What the run is compared with, made at start.
#[derive(Clone, Debug, PartialEq)]
pub struct Reference {
    /// The baseline's report, as given.
    pub label: String,
    /// Its interval log (`None`: tolerance and floors only).
    pub hdr_log: Option<String>,
    /// The window (`--baseline-window`).
    pub window: Duration,
    /// The live samples' length: the baseline log's interval.
    pub interval: Duration,
    /// The rules' settings (`--tolerance`).
    pub options: Options,
    /// The baseline has stages: windows compare with its same elapsed
    /// time.
    pub staged: bool,
    /// Where the loads differ (empty: the same).
    pub load_differs: Vec<String>,
    /// The workloads compared.
    pub pairs: Vec<PairRef>,
}

/// A compared metric: name, kind, index in [`RefFigures::latency`] (a
/// latency) and its quantile, index in [`RefSample::values`].
type Compared = (&'static str, Kind, Option<(usize, f64)>, Option<usize>);

/// The compared metrics, in the gauges' order.
const METRICS: [Compared; 5] = [
    ("p50", Kind::Latency, Some((0, 0.5)), Some(0)),
    ("p99", Kind::Latency, Some((2, 0.99)), Some(1)),
    ("p999", Kind::Latency, Some((3, 0.999)), Some(2)),
    ("rps", Kind::Rate, None, Some(3)),
    ("error_rate", Kind::ErrorRate, None, None),
];

/// One compared workload's running state.
struct Track {
    /// Cumulative latency and lag at the window's start.
    window_latency: Histogram<u64>,
    window_lag: Histogram<u64>,
    /// Completed requests and errors at the window's start.
    window_counts: (u64, [u64; ErrorKind::COUNT]),
    /// Cumulative latency and completed requests at the sub-interval's
    /// start.
    sub_latency: Histogram<u64>,
    sub_completed: u64,
    /// Room for a difference of two of the above.
    scratch: Histogram<u64>,
    /// The window's sub-interval samples, per [`RefSample::values`] index.
    samples: [Vec<f64>; 4],
    states: [MetricState; 5],
    gauges: BaselineGauges,
}

/// The live comparison (see the module doc).
pub struct Live {
    r: Reference,
    abort_after: Option<Duration>,
    tracks: Vec<Track>,
    /// Start of the window (aligned: k·W) and of the sub-interval being
    /// measured; `marked` is when the window's figures were taken (the
    /// first tick at or past its start).
    window_start: Duration,
    sub_start: Duration,
    marked: Duration,
    /// A run continued from its state: the first tick takes the restored
    /// totals as the start of a window (a fresh run's are zero).
    resumed: bool,
    windows: VecDeque<WindowRow>,
    dropped: u64,
    /// The baseline's samples of the window being judged (reused).
    base: Vec<f64>,
    /// Why the run should stop, once a regression has held long enough.
    pub abort: Option<String>,
}

/// A quantile of `h` in seconds (`None` when empty).
fn q(h: &Histogram<u64>, q: f64) -> Option<f64> {
    (!h.is_empty()).then(|| h.value_at_quantile(q) as f64 / 1e6)
}

impl Live {
    /// The comparison with `r`; `abort_after` is `--abort-on-fail`.
    pub fn new(r: Reference, abort_after: Option<Duration>) -> Live {
        let per_window = (r.window.as_secs_f64() / r.interval.as_secs_f64().max(1e-3)).ceil() as usize + 2;
        let tracks = r
            .pairs
            .iter()
            .map(|p| Track {
                window_latency: histogram(),
                window_lag: histogram(),
                window_counts: (0, [0; ErrorKind::COUNT]),
                sub_latency: histogram(),
                sub_completed: 0,
                scratch: histogram(),
                samples: std::array::from_fn(|_| Vec::with_capacity(per_window)),
                states: [MetricState::default(); 5],
                gauges: BaselineGauges {
                    load_matches: r.load_differs.is_empty(),
                    ..gauges_of(&p.whole)
                },
            })
            .collect();
        // The list is filled and emptied once here: its pages are
        // touched now, not one window at a time over the run.
        let mut windows = VecDeque::with_capacity(MAX_WINDOWS);
        windows.resize(MAX_WINDOWS, WindowRow::default());
        windows.clear();
        let most = r.pairs.iter().map(|p| p.samples.len()).max().unwrap_or(0);
        let mut live = Live {
            r,
            abort_after,
            tracks,
            window_start: Duration::ZERO,
            sub_start: Duration::ZERO,
            marked: Duration::ZERO,
            resumed: false,
            windows,
            dropped: 0,
            base: Vec::with_capacity(most),
            abort: None,
        };
        for i in 0..live.tracks.len() {
            let f = live.reference_of(i, 0);
            live.tracks[i].gauges = BaselineGauges {
                load_matches: live.r.load_differs.is_empty(),
                ..gauges_of(&f)
            };
        }
        live
    }

    /// (live workload index, gauges) of every compared workload.
    pub fn gauges(&self) -> Vec<(usize, BaselineGauges)> {
        self.r
            .pairs
            .iter()
            .zip(&self.tracks)
            .map(|(p, t)| (p.live, t.gauges))
            .collect()
    }

    /// The baseline figures window `k` of pair `i` is judged against.
    fn reference_of(&self, i: usize, k: usize) -> RefFigures {
        let p = &self.r.pairs[i];
        match p.by_window.len() {
            0 => p.whole,
            n => p.by_window[k.min(n - 1)],
        }
    }

    /// Called every aggregation tick; true when a window was judged (the
    /// gauges changed).
    pub fn tick(&mut self, totals: &Totals, elapsed: Duration) -> bool {
        if self.resumed {
            // The first tick of a continued run: the window runs from the
            // aligned boundary at or before now, measured from now.
            self.resumed = false;
            let w = self.r.window.as_nanos().max(1);
            self.window_start = Duration::from_nanos((elapsed.as_nanos() / w * w) as u64);
            self.sub_start = elapsed;
            self.marked = elapsed;
            self.mark(totals, true);
            return false;
        }
        let start = self.window_start;
        if elapsed >= self.sub_start + self.r.interval {
            self.close_sub(totals, elapsed);
        }
        if elapsed >= start + self.r.window {
            self.close_window(totals, start, elapsed);
            return true;
        }
        false
    }

    /// At the end of the run: the last window, when it is at least half a
    /// window long.
    pub fn finish(&mut self, totals: &Totals, elapsed: Duration) {
        let start = self.window_start;
        if !self.resumed && elapsed.saturating_sub(self.marked) >= self.r.window / 2 {
            if elapsed > self.sub_start + self.r.interval / 2 {
                self.close_sub(totals, elapsed);
            }
            self.close_window(totals, start, elapsed);
        }
    }

    /// Takes the cumulative figures as the start of a sub-interval (and
    /// of a window, with `window`).
    fn mark(&mut self, totals: &Totals, window: bool) {
        for (p, t) in self.r.pairs.iter().zip(&mut self.tracks) {
            let Some(s) = totals.stats.get(p.live) else { continue };
            t.sub_latency.set_to(&s.latency).expect("histograms share bounds");
            t.sub_completed = s.counters.completed;
            if window {
                t.window_latency.set_to(&s.latency).expect("histograms share bounds");
                t.window_lag.set_to(&s.lag).expect("histograms share bounds");
                t.window_counts = (s.counters.completed, s.counters.errors);
                for v in &mut t.samples {
                    v.clear();
                }
            }
        }
    }

    /// Ends a sub-interval: one sample per compared workload (none for an
    /// interval without a response, as the log reader leaves those out).
    fn close_sub(&mut self, totals: &Totals, elapsed: Duration) {
        let secs = (elapsed - self.sub_start).as_secs_f64();
        for (p, t) in self.r.pairs.iter().zip(&mut self.tracks) {
            let Some(s) = totals.stats.get(p.live) else { continue };
            t.scratch.set_to(&s.latency).expect("histograms share bounds");
            // The cumulative histogram only grows: the subtraction cannot
            // underflow.
            let _ = t.scratch.subtract(&t.sub_latency);
            if !t.scratch.is_empty() && secs > 0.0 {
                let sample = [
                    q(&t.scratch, 0.5),
                    q(&t.scratch, 0.99),
                    q(&t.scratch, 0.999),
                    Some((s.counters.completed - t.sub_completed) as f64 / secs),
                ];
                for (v, x) in t.samples.iter_mut().zip(sample) {
                    if v.len() < v.capacity() {
                        v.push(x.unwrap_or(0.0));
                    }
                }
            }
        }
        self.sub_start = elapsed;
        self.mark(totals, false);
    }

    /// Judges the window from `start` to `elapsed` and starts the next.
    fn close_window(&mut self, totals: &Totals, start: Duration, elapsed: Duration) {
        let k = (start.as_nanos() / self.r.window.as_nanos().max(1)) as usize;
        let secs = (elapsed - self.marked).as_secs_f64();
        for i in 0..self.tracks.len() {
            let Some(s) = totals.stats.get(self.r.pairs[i].live) else {
                continue;
            };
            let reference = self.reference_of(i, k);
            let t = &mut self.tracks[i];
            // The window's latency, then its lag, in the one scratch.
            t.scratch.set_to(&s.latency).expect("histograms share bounds");
            let _ = t.scratch.subtract(&t.window_latency);
            let latency = [0.5, 0.9, 0.99, 0.999].map(|x| q(&t.scratch, x));
            let count = t.scratch.len();
            t.scratch.set_to(&s.lag).expect("histograms share bounds");
            let _ = t.scratch.subtract(&t.window_lag);
            let lag = [0.5, 0.9, 0.99, 0.999].map(|x| q(&t.scratch, x));
            let completed = s.counters.completed - t.window_counts.0;
            let mut errors = s.counters.errors;
            for (e, before) in errors.iter_mut().zip(t.window_counts.1) {
                *e -= before;
            }
            let now = RefFigures {
                latency,
                lag,
                count,
                rps: (secs > 0.0).then(|| completed as f64 / secs),
                error_rate: Some(error_rate(completed, &errors, Counted::Target).unwrap_or(0.0)),
            };
            let mut row = WindowRow {
                t: self.marked.as_secs_f64(),
                seconds: secs,
                pair: i as u16,
                rows: [Judged::default(); 5],
            };
            for (m, (_, kind, quantile, sample)) in METRICS.iter().enumerate() {
                let (b, n) = match quantile {
                    Some((qi, _)) => (reference.latency[*qi], now.latency[*qi]),
                    None if *kind == Kind::Rate => (reference.rps, now.rps),
                    None => (reference.error_rate, now.error_rate),
                };
                row.rows[m] = match (b, n) {
                    (Some(b), Some(n)) => {
                        let samples = sample.and_then(|si| {
                            base_samples(&self.r, i, k, si, &mut self.base);
                            (!self.base.is_empty()).then(|| (self.base.as_slice(), t.samples[si].as_slice()))
                        });
                        let tail = |c: u64| match quantile {
                            Some((_, q)) => c as f64 * (1.0 - q),
                            None => f64::INFINITY,
                        };
                        let lag =
                            quantile.map(|(qi, _)| reference.lag[qi].unwrap_or(0.0).max(now.lag[qi].unwrap_or(0.0)));
                        let j = judge(
                            &Evidence {
                                kind: *kind,
                                baseline: b,
                                new: n,
                                samples,
                                tail: tail(reference.count).min(tail(now.count)),
                                lag,
                            },
                            &self.r.options,
                        );
                        Judged {
                            baseline: Some(b),
                            new: Some(n),
                            change: j.rel_change,
                            verdict: j.verdict,
                            method: j.method,
                            p_value: j.p_value,
                        }
                    }
                    // Nothing measured on one side: nothing to judge.
                    _ => Judged {
                        baseline: b,
                        new: n,
                        method: Method::TooFewSamples,
                        ..Judged::default()
                    },
                };
            }
            self.record(i, &row, elapsed);
        }
        let next =
            start + self.r.window * ((elapsed - start).as_nanos() / self.r.window.as_nanos().max(1)).max(1) as u32;
        self.window_start = next;
        let k = (next.as_nanos() / self.r.window.as_nanos().max(1)) as usize;
        for i in 0..self.tracks.len() {
            let f = self.reference_of(i, k);
            let g = &mut self.tracks[i].gauges;
            let fresh = gauges_of(&f);
            (g.latency, g.rps, g.error_ratio) = (fresh.latency, fresh.rps, fresh.error_ratio);
        }
        self.sub_start = elapsed;
        self.marked = elapsed;
        self.mark(totals, true);
    }

    /// Keeps a judged window: the gauges, the per-metric states, the
    /// list, and the abort.
    fn record(&mut self, i: usize, row: &WindowRow, elapsed: Duration) {
        let t = &mut self.tracks[i];
        let end = row.t + row.seconds;
        for (m, j) in row.rows.iter().enumerate() {
            t.gauges.verdict[m] = j.verdict.sign();
            t.gauges.change[m] = j.change.unwrap_or(f64::NAN);
            let st = &mut t.states[m];
            st.counts[(j.verdict.sign() + 1) as usize] += 1;
            st.last = Some(*j);
            if j.verdict == Verdict::Worse {
                st.first_worse_at.get_or_insert(row.t);
                let since = *st.worse_since.get_or_insert(row.t);
                if let Some(after) = self.abort_after
                    && self.abort.is_none()
                    && self.r.load_differs.is_empty()
                    && end - since >= after.as_secs_f64()
                {
                    self.abort = Some(format!(
                        "{} of {} worse than the baseline {} for {} ({:+.1}%, windows from {} to {}); stopped by --abort-on-fail/abort_on_fail",
                        METRICS[m].0,
                        self.r.pairs[i].name,
                        self.r.label,
                        humantime::format_duration(Duration::from_secs((end - since).round() as u64)),
                        j.change.unwrap_or(0.0) * 100.0,
                        humantime::format_duration(Duration::from_secs(since.round() as u64)),
                        humantime::format_duration(Duration::from_secs(elapsed.as_secs()))
                    ));
                }
            } else {
                st.worse_since = None;
            }
        }
        if self.windows.len() == MAX_WINDOWS {
            self.windows.pop_front();
            self.dropped += 1;
        }
        self.windows.push_back(*row);
    }

    /// The report's section as it stands.
    pub fn section(&self) -> BaselineSection {
        let name = |i: u16| self.r.pairs.get(i as usize).map_or(String::new(), |p| p.name.clone());
        BaselineSection {
            report: self.r.label.clone(),
            hdr_log: self.r.hdr_log.clone(),
            window_seconds: self.r.window.as_secs_f64(),
            tolerance: self.r.options.tolerance,
            staged: self.r.staged,
            load_differs: self.r.load_differs.clone(),
            pairs: self
                .r
                .pairs
                .iter()
                .map(|p| Pair {
                    workload: p.name.clone(),
                    baseline: p.baseline_name.clone(),
                })
                .collect(),
            metrics: self
                .r
                .pairs
                .iter()
                .zip(&self.tracks)
                .flat_map(|(p, t)| {
                    t.states.iter().zip(METRICS).map(|(st, (metric, ..))| MetricSummary {
                        workload: p.name.clone(),
                        metric: metric.to_string(),
                        better: st.counts[0],
                        same: st.counts[1],
                        worse: st.counts[2],
                        first_worse_at: st.first_worse_at,
                        worse_since: st.worse_since,
                        last: st.last.map(|j| j.verdict),
                        last_change: st.last.and_then(|j| j.change),
                    })
                })
                .collect(),
            windows: self
                .windows
                .iter()
                .map(|w| Window {
                    t: w.t,
                    seconds: w.seconds,
                    workload: name(w.pair),
                    rows: w
                        .rows
                        .iter()
                        .zip(METRICS)
                        .map(|(j, (metric, ..))| Row {
                            metric: metric.to_string(),
                            baseline: j.baseline,
                            new: j.new,
                            change: j.change,
                            verdict: j.verdict,
                            method: j.method,
                            p_value: j.p_value,
                        })
                        .collect(),
                })
                .collect(),
            windows_dropped: self.dropped,
        }
    }

    /// The state as data for a `--state` checkpoint.
    pub fn saved(&self) -> BaselineSaved {
        BaselineSaved {
            windows: self.windows.iter().copied().collect(),
            dropped: self.dropped,
            states: self.tracks.iter().map(|t| t.states).collect(),
            abort: self.abort.clone(),
        }
    }

    /// Continues from a checkpoint: the windows judged and the states
    /// (the window in progress at the restart starts over at its
    /// boundary).
    pub fn restore(&mut self, s: BaselineSaved) {
        self.windows
            .extend(s.windows.into_iter().filter(|w| (w.pair as usize) < self.tracks.len()));
        while self.windows.len() > MAX_WINDOWS {
            self.windows.pop_front();
        }
        self.dropped = s.dropped;
        for (t, st) in self.tracks.iter_mut().zip(s.states) {
            t.states = st;
            for (m, st) in st.iter().enumerate() {
                if let Some(j) = st.last {
                    t.gauges.verdict[m] = j.verdict.sign();
                    t.gauges.change[m] = j.change.unwrap_or(f64::NAN);
                }
            }
        }
        self.abort = s.abort;
        self.resumed = true;
    }

    /// A shared slot the report's section is put in at the end of the run
    /// (the daemon holds its twin while the engine holds the observers).
    pub fn slot() -> Arc<Mutex<Option<BaselineSection>>> {
        Arc::new(Mutex::new(None))
    }
}

/// The baseline's samples of metric `si` for window `k` of pair `i` into
/// `out`: every interval of an unstaged baseline, the ones that started
/// in the window's span of a staged one (past its end, its last window's).
fn base_samples(r: &Reference, i: usize, k: usize, si: usize, out: &mut Vec<f64>) {
    out.clear();
    let p = &r.pairs[i];
    if p.by_window.is_empty() {
        out.extend(p.samples.iter().map(|s| s.values[si]));
        return;
    }
    let w = r.window.as_secs_f64();
    let k = k.min(p.by_window.len() - 1) as f64;
    out.extend(
        p.samples
            .iter()
            .filter(|s| s.start >= k * w && s.start < (k + 1.0) * w)
            .map(|s| s.values[si]),
    );
}

/// The baseline figures of `f` as gauges (verdicts 0, changes NaN).
fn gauges_of(f: &RefFigures) -> BaselineGauges {
    BaselineGauges {
        latency: f.latency.map(|v| v.unwrap_or(f64::NAN)),
        rps: f.rps.unwrap_or(f64::NAN),
        error_ratio: f.error_rate.unwrap_or(f64::NAN),
        ..BaselineGauges::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{Delta, Mailbox};
    use std::sync::Mutex;

    /// A baseline of 1 ms latency at 1,000 requests/s, with `n` samples of
    /// 10 s (none: tolerance only).
    fn reference(n: usize, window: u64, load_differs: bool) -> Reference {
        let whole = RefFigures {
            latency: [Some(0.001), Some(0.0011), Some(0.0012), Some(0.0015)],
            lag: [Some(0.00001); 4],
            count: 600_000,
            rps: Some(1000.0),
            error_rate: Some(0.0),
        };
        Reference {
            label: "base.json".into(),
            hdr_log: None,
            window: Duration::from_secs(window),
            interval: Duration::from_secs(10),
            options: Options::default(),
            staged: false,
            load_differs: if load_differs {
                vec!["connections 10 → 20".into()]
            } else {
                Vec::new()
            },
            pairs: vec![PairRef {
                live: 0,
                name: "api".into(),
                baseline_name: "api".into(),
                whole,
                samples: (0..n)
                    .map(|i| RefSample {
                        start: i as f64 * 10.0,
                        values: [0.001 + (i % 3) as f64 * 1e-5, 0.0012, 0.0015, 1000.0 + (i % 2) as f64],
                    })
                    .collect(),
                by_window: Vec::new(),
            }],
        }
    }

    /// `seconds` of 1,000 responses a second at `latency`, ticked every
    /// second from `from`.
    fn run(live: &mut Live, totals: &mut Totals, mb: &[Mailbox], from: u64, seconds: u64, latency: Duration) {
        for s in from + 1..=from + seconds {
            {
                let mut d = mb[0].lock().unwrap();
                for _ in 0..1000 {
                    crate::stats::record(&mut d.stats[0].latency, latency);
                    crate::stats::record(&mut d.stats[0].lag, Duration::from_micros(10));
                }
                d.stats[0].counters.completed += 1000;
                d.stats[0].counters.sent += 1000;
            }
            totals.collect(mb);
            live.tick(totals, Duration::from_secs(s));
        }
    }

    fn setup() -> (Totals, Vec<Mailbox>) {
        (
            Totals::new(vec!["api".into()], 1, false, false),
            vec![Mutex::new(Delta::new(1))],
        )
    }

    #[test]
    fn a_slower_server_is_worse_from_the_first_window_and_the_same_one_is_not() {
        let (mut totals, mb) = setup();
        let mut live = Live::new(reference(12, 60, false), Some(Duration::from_secs(120)));
        let g = live.gauges();
        assert_eq!(g[0].1.verdict, [0; 5], "0 until the first window");
        assert!((g[0].1.latency[0] - 0.001).abs() < 1e-9);
        run(&mut live, &mut totals, &mb, 0, 60, Duration::from_micros(1000));
        let g = live.gauges()[0].1;
        assert_eq!(g.verdict, [0; 5], "the same server: {:?}", live.section().windows);
        assert_eq!(live.section().windows[0].rows[0].method, Method::RankTest);
        // 3 ms slower from 60 s on: p50 and p99 worse from the second
        // window, and --abort-on-fail 2m stops the run once that held two
        // windows.
        run(&mut live, &mut totals, &mb, 60, 60, Duration::from_micros(4000));
        let g = live.gauges()[0].1;
        assert_eq!(&g.verdict[..3], &[1, 1, 1], "{:?}", live.section().windows[1]);
        assert!((g.change[0] - 3.0).abs() < 0.05, "{:?}", g.change);
        assert!(live.abort.is_none(), "held one window so far");
        run(&mut live, &mut totals, &mb, 120, 60, Duration::from_micros(4000));
        let why = live.abort.clone().expect("held 2m");
        assert!(
            why.contains("p50 of api worse than the baseline base.json for 2m"),
            "{why}"
        );
        let s = live.section();
        let p50 = &s.metrics[0];
        assert_eq!((p50.same, p50.worse, p50.first_worse_at), (1, 2, Some(60.0)));
        assert_eq!(p50.worse_since, Some(60.0));
        let mut text = String::new();
        s.summary(&mut text);
        assert!(text.contains("api p50: regression started at 1m"), "{text}");
    }

    #[test]
    fn a_faster_server_is_better_and_different_loads_never_abort() {
        let (mut totals, mb) = setup();
        let mut live = Live::new(reference(0, 30, true), Some(Duration::from_secs(1)));
        // Without the baseline's intervals: tolerance and floors only.
        run(&mut live, &mut totals, &mb, 0, 30, Duration::from_micros(100));
        assert_eq!(live.gauges()[0].1.verdict[0], 0, "0.9 ms faster: under the 1 ms floor");
        let mut slow = reference(12, 30, false);
        slow.pairs[0].whole.latency = [Some(0.005), Some(0.0055), Some(0.006), Some(0.007)];
        for s in &mut slow.pairs[0].samples {
            s.values[..3].copy_from_slice(&[0.005 + s.start * 1e-6, 0.006, 0.007]);
        }
        let mut live = Live::new(slow, None);
        let (mut totals, mb) = setup();
        run(&mut live, &mut totals, &mb, 0, 30, Duration::from_micros(1000));
        let g = live.gauges()[0].1;
        assert_eq!(&g.verdict[..3], &[-1, -1, -1], "4 ms faster: better");
        assert!(g.change[0] < -0.75, "{:?}", g.change);
        let mut live = Live::new(reference(0, 30, true), Some(Duration::from_secs(1)));
        let (mut totals, mb) = setup();
        run(&mut live, &mut totals, &mb, 0, 30, Duration::from_micros(9000));
        let g = live.gauges()[0].1;
        assert_eq!((g.verdict[0], g.load_matches), (1, false));
        assert_eq!(live.section().windows[0].rows[0].method, Method::Tolerance);
        assert!(live.abort.is_none(), "a comparison of different loads aborts nothing");
    }

    #[test]
    fn the_last_window_counts_only_when_half_long_and_a_restart_keeps_the_windows() {
        let (mut totals, mb) = setup();
        let mut live = Live::new(reference(12, 60, false), None);
        run(&mut live, &mut totals, &mb, 0, 60, Duration::from_micros(4000));
        run(&mut live, &mut totals, &mb, 60, 20, Duration::from_micros(4000));
        live.finish(&totals, Duration::from_secs(80));
        assert_eq!(live.section().windows.len(), 1, "20 s of a 60 s window is not judged");
        run(&mut live, &mut totals, &mb, 80, 20, Duration::from_micros(4000));
        live.finish(&totals, Duration::from_secs(100));
        assert_eq!(live.section().windows.len(), 2, "40 s is");
        // Through the state's JSON and back.
        let saved: BaselineSaved = serde_json::from_str(&serde_json::to_string(&live.saved()).unwrap()).unwrap();
        let mut again = Live::new(reference(12, 60, false), None);
        again.restore(saved);
        assert_eq!(again.gauges()[0].1.verdict[0], 1, "the last verdict stands");
        // The restart at 130 s measures its window from there (the totals
        // were restored at their checkpoint).
        again.tick(&totals, Duration::from_secs(130));
        run(&mut again, &mut totals, &mb, 130, 50, Duration::from_micros(1000));
        let s = again.section();
        assert_eq!(s.windows.len(), 3, "{:?}", s.windows);
        assert_eq!(s.windows[2].t, 130.0);
        assert_eq!(s.metrics[0].worse, 2);
    }
}
