//! What the trends are computed from, as plain numbers: one [`TrendPoint`]
//! per timeline point and the points' per-workload figures in one list.
//! The live trend thresholds fill one [`TrendInput`] made at start every
//! 10 s straight from the timeline's points ([`Timeline::trend_input`]),
//! instead of making the timeline's JSON and dropping it, so their memory
//! does not grow with the timeline (issue 29); a report's trends read the
//! same figures from its JSON ([`TrendInput::of_json`]). Apart from both
//! the timeline's JSON and the trends, which each use it.

use std::time::Duration;

use super::sparse::Sparse;
use super::timeline::{Point, Timeline};
use super::timeline_json::{PointJson, TimelineJson, WorkloadPointJson};

/// What the trends read from one timeline point, with no heap of its own
/// (see [`TrendInput`]): the same figures as the point's JSON,
/// computed the same way (`PointJson::of`), from a point or from JSON.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TrendPoint {
    /// Start, seconds since the run started (to the millisecond).
    pub t: f64,
    /// Length in seconds.
    pub seconds: f64,
    /// `--target-pid` processes sampled in the point.
    pub pids: usize,
    /// Their resident memory, summed, bytes.
    pub target_rss: f64,
    /// Their open descriptors, summed (`None` when one was not readable).
    pub target_fds: Option<f64>,
    /// soakd's own resident memory.
    pub soakd_rss_bytes: Option<u64>,
    /// Latency median, seconds.
    pub p50: Option<f64>,
    /// Latency 99th percentile, seconds.
    pub p99: Option<f64>,
    /// Schedule lag 99th percentile, seconds.
    pub lag_p99: Option<f64>,
    /// Complete responses.
    pub completed: u64,
    /// Errors, all kinds.
    pub errors: u64,
    /// Where its per-workload figures are in the input's list, and how
    /// many ([`TrendInput::push`] sets it).
    pub workloads: (usize, usize),
}

impl TrendPoint {
    /// The trend figures of a report's point.
    pub fn of_json(p: &PointJson) -> TrendPoint {
        TrendPoint {
            t: p.t,
            seconds: p.seconds,
            pids: p.targets.len(),
            target_rss: p.targets.iter().map(|t| t.rss_bytes as f64).sum(),
            target_fds: p.targets.iter().try_fold(0.0, |a, t| t.open_fds.map(|f| a + f as f64)),
            soakd_rss_bytes: p.soakd_rss_bytes,
            p50: p.p50,
            p99: p.p99,
            lag_p99: p.lag_p99,
            completed: p.completed,
            errors: p.errors.values().sum(),
            workloads: (0, 0),
        }
    }

    /// The trend figures of a timeline point, as [`TrendPoint::of_json`]
    /// of its JSON would give them.
    pub(super) fn of_point(p: &Point) -> TrendPoint {
        let secs = |s: &Sparse, q: f64| s.quantile_us(q).map(|us| us as f64 / 1e6);
        let ms = |d: Duration| (d.as_millis() as f64) / 1e3;
        TrendPoint {
            t: ms(p.start),
            seconds: ms(p.length),
            pids: p.resources.targets.len(),
            target_rss: p.resources.targets.iter().map(|t| t.rss_bytes as f64).sum(),
            target_fds: p
                .resources
                .targets
                .iter()
                .try_fold(0.0, |a, t| t.open_fds.map(|f| a + f as f64)),
            soakd_rss_bytes: p.resources.soakd_rss_bytes,
            p50: secs(&p.latency, 0.5),
            p99: secs(&p.latency, 0.99),
            lag_p99: secs(&p.lag, 0.99),
            completed: p.counters.completed,
            errors: p.counters.errors.iter().sum(),
            workloads: (0, 0),
        }
    }
}

/// What the trends are computed from: one [`TrendPoint`] per timeline
/// point, the points' per-workload figures in one list, and the watched
/// series' values (`watch`: `watch_stride` a point, NaN where a point has
/// none). Plain numbers:
/// the live trend thresholds fill one kept from the start every 10 s
/// (`Timeline::trend_input`) instead of making the timeline's JSON, so
/// their memory does not grow with the timeline (issue 29).
#[derive(Clone, Debug, Default)]
pub struct TrendInput {
    /// The points, oldest first.
    pub points: Vec<TrendPoint>,
    /// Every point's per-workload figures, in point order.
    pub workloads: Vec<WorkloadPointJson>,
    /// Every point's watched values, `watch_stride` each (see
    /// [`TrendInput::watch_value`]).
    pub watch: Vec<f64>,
    /// Columns a point has in `watch` (the series known when it was
    /// filled).
    pub watch_stride: usize,
}

impl TrendInput {
    /// Room for `points` points of `workloads` workloads each, written
    /// once so the pages are the process's now.
    pub fn with_room(points: usize, workloads: usize) -> TrendInput {
        let mut t = TrendInput {
            points: vec![TrendPoint::default(); points],
            workloads: vec![WorkloadPointJson::default(); points * workloads],
            watch: Vec::new(),
            watch_stride: 0,
        };
        t.clear();
        t
    }

    /// Room for `series` watched values in each of `points` points, made
    /// now (the live trends fill it every 10 s without growing the heap).
    pub fn reserve_watch(&mut self, points: usize, series: usize) {
        let n = points * series;
        if self.watch.capacity() < n {
            self.watch = vec![0.0; n];
            self.watch.clear();
        }
    }

    /// Empties it, keeping the room.
    pub fn clear(&mut self) {
        self.points.clear();
        self.workloads.clear();
        self.watch.clear();
        self.watch_stride = 0;
    }

    /// Adds a point with its watched values (`None`: no value in the
    /// point).
    pub fn push_watch(
        &mut self,
        p: TrendPoint,
        workloads: impl IntoIterator<Item = WorkloadPointJson>,
        values: &[Option<f64>],
    ) {
        self.push(p, workloads);
        self.push_values(values.iter().map(|v| v.unwrap_or(f64::NAN)), values.len());
    }

    /// The last pushed point's watched values (`n` of them). The stride
    /// is the widest row so far: earlier points have no value for a
    /// series found later.
    fn push_values(&mut self, values: impl Iterator<Item = f64>, n: usize) {
        let rows = self.points.len() - 1;
        if n > self.watch_stride && rows == 0 {
            self.watch_stride = n;
        } else if n > self.watch_stride {
            // Widen the rows written so far (rare: a series found later
            // in a report's points).
            let old = std::mem::take(&mut self.watch);
            let mut wide = Vec::with_capacity(old.capacity().max((rows + 1) * n));
            for r in 0..rows {
                wide.extend_from_slice(&old[r * self.watch_stride..(r + 1) * self.watch_stride]);
                wide.extend(std::iter::repeat_n(f64::NAN, n - self.watch_stride));
            }
            self.watch = wide;
            self.watch_stride = n;
        }
        let before = self.watch.len();
        self.watch.extend(values.take(self.watch_stride));
        let short = self.watch_stride - (self.watch.len() - before);
        self.watch.extend(std::iter::repeat_n(f64::NAN, short));
    }

    /// Point `i`'s value of series `col`, if it has one.
    pub fn watch_value(&self, i: usize, col: usize) -> Option<f64> {
        if col >= self.watch_stride {
            return None;
        }
        self.watch
            .get(i * self.watch_stride + col)
            .copied()
            .filter(|v| !v.is_nan())
    }

    /// Adds a point and its per-workload figures.
    pub fn push(&mut self, mut p: TrendPoint, workloads: impl IntoIterator<Item = WorkloadPointJson>) {
        let from = self.workloads.len();
        self.workloads.extend(workloads);
        p.workloads = (from, self.workloads.len() - from);
        self.points.push(p);
    }

    /// The input of a report's timeline.
    pub fn of_json(t: &TimelineJson) -> TrendInput {
        let mut out = TrendInput::default();
        for p in &t.points {
            out.push_watch(TrendPoint::of_json(p), p.workloads.iter().copied(), &p.watch);
        }
        out
    }

    /// Point `p`'s figures of workload `i`, if it has them.
    pub(super) fn workload(&self, p: &TrendPoint, i: usize) -> Option<&WorkloadPointJson> {
        let (from, n) = p.workloads;
        (i < n).then(|| self.workloads.get(from + i)).flatten()
    }
}

impl Timeline {
    /// The trends' input of the timeline so far (its closed points and
    /// the one being filled, as [`Timeline::points`] gives them), written
    /// into `into` in the room it has: what the live trend thresholds
    /// analyze every 10 s without making the timeline's JSON.
    pub fn trend_input(&mut self, into: &mut TrendInput) {
        into.clear();
        let stride = self.series().series.len();
        for p in self.closed() {
            into.push(TrendPoint::of_point(p), p.workloads.iter().map(WorkloadPointJson::of));
            into.push_values(p.watch.iter().copied(), stride);
        }
        if let Some(p) = self.partial() {
            into.push(TrendPoint::of_point(p), p.workloads.iter().map(WorkloadPointJson::of));
            into.push_values(p.watch.iter().copied(), stride);
        }
    }
}
