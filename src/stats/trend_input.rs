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
/// point, and the points' per-workload figures in one list. Plain numbers:
/// the live trend thresholds fill one kept from the start every 10 s
/// (`Timeline::trend_input`) instead of making the timeline's JSON, so
/// their memory does not grow with the timeline (issue 29).
#[derive(Clone, Debug, Default)]
pub struct TrendInput {
    /// The points, oldest first.
    pub points: Vec<TrendPoint>,
    /// Every point's per-workload figures, in point order.
    pub workloads: Vec<WorkloadPointJson>,
}

impl TrendInput {
    /// Room for `points` points of `workloads` workloads each, written
    /// once so the pages are the process's now.
    pub fn with_room(points: usize, workloads: usize) -> TrendInput {
        let mut t = TrendInput {
            points: vec![TrendPoint::default(); points],
            workloads: vec![WorkloadPointJson::default(); points * workloads],
        };
        t.clear();
        t
    }

    /// Empties it, keeping the room.
    pub fn clear(&mut self) {
        self.points.clear();
        self.workloads.clear();
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
            out.push(TrendPoint::of_json(p), p.workloads.iter().copied());
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
        for p in self.closed() {
            into.push(TrendPoint::of_point(p), p.workloads.iter().map(WorkloadPointJson::of));
        }
        if let Some(p) = self.partial() {
            into.push(TrendPoint::of_point(p), p.workloads.iter().map(WorkloadPointJson::of));
        }
    }
}
