//! The run as a time series of bounded size: what the report's `timeline`
//! and the HTML report's charts are drawn from.
//!
//! The control thread drains the workers' deltas a few times a second; the
//! timeline adds each drained delta (all workloads summed) into the point
//! being filled and closes that point once its interval is over. Points
//! start 1 s long ([`BASE_INTERVAL`]), so a 10 s run has ten of them. When
//! more than [`MAX_POINTS`] are closed, adjacent points merge pairwise
//! (counts add, histograms merge, the later point's connection level
//! stays) and the interval doubles, so the timeline always holds between
//! `MAX_POINTS / 2` and `MAX_POINTS` points of equal length (the last one
//! may be partial). A week-long soak ends with points of 1024 s; its memory
//! and its report are the size of a 20-minute run's.
//!
//! Histograms: a point keeps its latency and schedule-lag distributions as
//! sparse lists of log-spaced buckets (2.2% wide, coarser when the
//! latencies spread wide, [`Sparse`]), at most
//! [`MAX_BUCKETS`](super::sparse::MAX_BUCKETS) each, rather than as full histograms. A full 3-digit
//! histogram of soakd's range (1 µs to 1 h) is ~200 KB; even a sparse
//! 2-digit HdrHistogram list cost ~26 KiB a point under churn (a spread of
//! connect and request latencies), so a full timeline was ~26 MB, more
//! than 15,000 held connections. Now a point, with everything it holds, is
//! under [`POINT_BYTES`] (2.6 KiB, and half a KiB more for a server
//! watch's values) whatever its latencies, so a full timeline stays
//! under 3.2 MB, 2.1 MB of it without a watch (`a_week_stays_small`,
//! `the_worst_point_fits`). Merging two lists is exact at the coarser
//! one's resolution, so the median and the tail after any number of
//! merges are those of the whole interval to ±1.1% while its latencies
//! span 16×, ±2.2% to 256×, ±4.4% to 65,536×; the run's own histograms
//! (the report's percentiles, `soakd merge`) stay full and exact.
//!
//! Each point also keeps the last sample of the processes in its interval
//! ([`Resources`]: the `--target-pid` processes' memory, CPU and
//! descriptors, and soakd's own memory), which the observer takes once a
//! point, and the last value the server watch read of each watched series
//! in it (`watch`, one column per series of the timeline's
//! [`SeriesTable`]); the report's trends are computed from them.
//!
//! The timeline is summed over workloads (one series per chart). With
//! several workloads, a point also carries each one's counts and latency
//! median and p99 ([`WorkloadPoint`], 24 bytes; the first
//! [`MAX_WORKLOADS`] workloads), so the trends can say which workload
//! drifted. Those are quantiles, not histograms: when points merge, a
//! workload's quantiles become the completed-weighted mean of the two
//! (close enough for a drift, which compares window medians; the
//! run-wide quantiles stay exact to the bucket).

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::WorkloadStats;
use super::point_counts::PointCounts;
pub use super::resources::{ProcSample, Resources};
use super::series::{MAX_SERIES, SeriesTable};
pub use super::sparse::Sparse;

/// Length of a point until the first coarsening.
pub const BASE_INTERVAL: Duration = Duration::from_secs(1);
/// Most points the timeline keeps; past it neighbours merge pairwise.
pub const MAX_POINTS: usize = 1000;
/// Significant digits of the histograms a point is filled in (converted
/// to [`Sparse`] buckets when it closes).
const POINT_DIGITS: u8 = 2;
/// The bound on a point's memory, the point itself and its heap
/// (`a_week_stays_small`, `the_worst_point_fits`): 2,624 bytes (the worst
/// point is 2,568, two full bucket lists 1,536 of them), and the server
/// watch's column per series (`MAX_SERIES` values of 8 bytes and the
/// list's own 24).
pub const POINT_BYTES: usize = 2624 + MAX_SERIES * 8 + 24;
/// Most workloads a point carries its own figures for (16 × 24 bytes of
/// a point); later workloads are in the run-wide figures only.
pub const MAX_WORKLOADS: usize = 16;

/// A histogram at the points' resolution (2 digits, growing like
/// [`super::histogram`]'s).
fn point_histogram() -> Histogram<u64> {
    super::sized(POINT_DIGITS)
}

/// One workload's share of a point (runs with several workloads).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkloadPoint {
    /// Complete responses.
    pub completed: u64,
    /// Errors, all kinds.
    pub errors: u64,
    /// Latency median, µs (`None`: nothing completed; never 0, so the
    /// `Option` costs no space).
    pub p50_us: Option<NonZeroU32>,
    /// Latency 99th percentile, µs.
    pub p99_us: Option<NonZeroU32>,
}

impl WorkloadPoint {
    /// Merges the following point's share `next` into `self`: counts
    /// add, quantiles are weighted by the completed responses.
    fn absorb(&mut self, next: &WorkloadPoint) {
        let (a, b) = (self.completed as f64, next.completed as f64);
        let mix = |x: Option<NonZeroU32>, y: Option<NonZeroU32>| match (x, y) {
            (Some(x), Some(y)) if a + b > 0.0 => {
                NonZeroU32::new(((f64::from(x.get()) * a + f64::from(y.get()) * b) / (a + b)).round() as u32)
            }
            (x, y) => x.or(y),
        };
        self.p50_us = mix(self.p50_us, next.p50_us);
        self.p99_us = mix(self.p99_us, next.p99_us);
        self.completed += next.completed;
        self.errors += next.errors;
    }
}

/// One closed interval.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Start, since the run started.
    pub start: Duration,
    /// Length.
    pub length: Duration,
    /// Counts summed over the interval (all workloads).
    pub counters: PointCounts,
    /// Connections open at the interval's end.
    pub open: u64,
    /// Fewest connections open at any drain in the interval.
    pub open_min: u64,
    /// Request latency.
    pub latency: Sparse,
    /// Schedule lag.
    pub lag: Sparse,
    /// The processes, as last sampled in the interval.
    pub resources: Resources,
    /// The interval holds time when soakd was not running (killed, then
    /// continued from a `--state` checkpoint): its figures miss that time.
    #[serde(default)]
    pub gap: bool,
    /// Each workload's share, in the plan's order (empty with one
    /// workload; at most [`MAX_WORKLOADS`]).
    #[serde(default)]
    pub workloads: Vec<WorkloadPoint>,
    /// The last value of each watched series read in the interval, by
    /// column (NaN: none read; empty without a server watch).
    #[serde(default, with = "nan_as_null")]
    pub watch: Vec<f64>,
}

/// Watched values in a checkpoint: NaN (no value) written as `null`,
/// which JSON has and NaN is not.
mod nan_as_null {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(v: &[f64], s: S) -> Result<S::Ok, S::Error> {
        let opts: Vec<Option<f64>> = v.iter().map(|x| (!x.is_nan()).then_some(*x)).collect();
        opts.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
        let opts = Vec::<Option<f64>>::deserialize(d)?;
        Ok(opts.into_iter().map(|x| x.unwrap_or(f64::NAN)).collect())
    }
}

/// Writes `from`'s values over `to`'s where `from` has one (a later
/// point's, or a newer read), keeping `to`'s room.
fn overlay(to: &mut Vec<f64>, from: &[f64]) {
    if to.len() < from.len() {
        to.resize(from.len(), f64::NAN);
    }
    for (t, f) in to.iter_mut().zip(from) {
        if !f.is_nan() {
            *t = *f;
        }
    }
}

impl Point {
    /// Merges the following point `next` into `self` (`scratch`: room
    /// for two bucket lists).
    fn absorb(&mut self, next: &Point, scratch: &mut Sparse) {
        self.length = next.start + next.length - self.start;
        self.counters.add(&next.counters);
        self.open = next.open;
        self.open_min = self.open_min.min(next.open_min);
        self.latency.merge_using(&next.latency, scratch);
        self.lag.merge_using(&next.lag, scratch);
        if next.resources != Resources::default() {
            self.resources.copy_from(&next.resources);
        }
        self.gap |= next.gap;
        overlay(&mut self.watch, &next.watch);
        if self.workloads.len() < next.workloads.len() {
            self.workloads.resize(next.workloads.len(), WorkloadPoint::default());
        }
        for (a, b) in self.workloads.iter_mut().zip(&next.workloads) {
            a.absorb(b);
        }
    }

    /// An empty point; `room`: its bucket lists have room for the most
    /// buckets a point keeps ([`Sparse::reserved`]).
    fn blank(room: bool) -> Point {
        let list = || if room { Sparse::reserved() } else { Sparse::default() };
        Point {
            start: Duration::ZERO,
            length: Duration::ZERO,
            counters: PointCounts::default(),
            open: 0,
            open_min: 0,
            lag: list(),
            latency: list(),
            resources: Resources::default(),
            gap: false,
            workloads: Vec::new(),
            watch: Vec::new(),
        }
    }

    /// Bytes the point holds, itself and its heap.
    fn bytes(&self) -> usize {
        std::mem::size_of::<Point>()
            + self.latency.heap_bytes()
            + self.lag.heap_bytes()
            + self.resources.targets.capacity() * std::mem::size_of::<ProcSample>()
            + self.workloads.capacity() * std::mem::size_of::<WorkloadPoint>()
            + self.watch.capacity() * std::mem::size_of::<f64>()
    }
}

/// The point being filled: full histograms, so adding a drained delta is
/// a plain histogram addition.
#[derive(Debug)]
struct Filling {
    start: Duration,
    counters: PointCounts,
    open: u64,
    open_min: Option<u64>,
    latency: Histogram<u64>,
    lag: Histogram<u64>,
    resources: Resources,
    /// Per workload (up to [`MAX_WORKLOADS`], made as workloads report):
    /// completed, errors, latency.
    workloads: Vec<(u64, u64, Histogram<u64>)>,
    /// The watched values read so far in the interval, by column.
    watch: Vec<f64>,
}

impl Filling {
    fn new(start: Duration) -> Filling {
        Filling {
            start,
            counters: PointCounts::default(),
            open: 0,
            open_min: None,
            latency: point_histogram(),
            lag: point_histogram(),
            resources: Resources::default(),
            workloads: Vec::new(),
            watch: Vec::new(),
        }
    }

    /// The point up to `end`, made anew (the partial last point a report
    /// or a checkpoint shows).
    fn point(&self, end: Duration) -> Point {
        let mut p = Point::blank(false);
        self.close_into(end, &mut p);
        p.latency.index.shrink_to_fit();
        p.latency.counts.shrink_to_fit();
        p.lag.index.shrink_to_fit();
        p.lag.counts.shrink_to_fit();
        p
    }

    /// Writes the point up to `end` into `p`, in the room `p` has (a
    /// point of the timeline's spare ones: nothing is allocated).
    fn close_into(&self, end: Duration, p: &mut Point) {
        p.start = self.start;
        p.length = end.saturating_sub(self.start);
        p.counters = self.counters;
        p.open = self.open;
        p.open_min = self.open_min.unwrap_or(self.open);
        p.latency.fill(&self.latency);
        p.lag.fill(&self.lag);
        p.resources.copy_from(&self.resources);
        p.watch.clear();
        p.watch.extend_from_slice(&self.watch);
        p.gap = false;
        p.workloads.clear();
        if self.workloads.len() > 1 {
            let us = |h: &Histogram<u64>, q: f64| {
                NonZeroU32::new(h.value_at_quantile(q).clamp(1, u64::from(u32::MAX)) as u32).filter(|_| !h.is_empty())
            };
            p.workloads
                .extend(self.workloads.iter().map(|(completed, errors, h)| WorkloadPoint {
                    completed: *completed,
                    errors: *errors,
                    p50_us: us(h, 0.5),
                    p99_us: us(h, 0.99),
                }));
        }
    }

    fn restart(&mut self, start: Duration) {
        self.start = start;
        self.counters = PointCounts::default();
        self.open_min = None;
        self.resources = Resources::default();
        self.watch.iter_mut().for_each(|v| *v = f64::NAN);
        for h in [&mut self.latency, &mut self.lag] {
            if !h.is_empty() {
                h.reset();
            }
        }
        for (completed, errors, h) in &mut self.workloads {
            (*completed, *errors) = (0, 0);
            if !h.is_empty() {
                h.reset();
            }
        }
    }
}

/// The run's timeline. See the module doc.
#[derive(Debug)]
pub struct Timeline {
    started_at: SystemTime,
    interval: Duration,
    max_points: usize,
    /// Closed points, shared: a `--state` checkpoint takes the list by
    /// reference counts (a week's 580 points copied on the control thread
    /// cost 2.4 ms, on a core the workers share); the rare coarsening
    /// copies a point only while a checkpoint still holds it.
    points: Vec<Arc<Point>>,
    filling: Filling,
    /// Run time at the last [`Timeline::tick`].
    last_tick: Duration,
    /// The points' storage not in use, made at start (see
    /// [`Timeline::with_bounds`]): a closing point takes one, a point
    /// merged away gives its own back (when no checkpoint still holds
    /// it). Each is unshared.
    spare: Vec<Arc<Point>>,
    /// The second list a coarsening fills, kept for the next one.
    merged: Vec<Arc<Point>>,
    /// Room for a merge of two bucket lists.
    scratch: Sparse,
    /// `--target-pid` samples every spare point has room for.
    room_for_targets: usize,
    /// Room for the point being filled, closed where it stands (the live
    /// trends' last point).
    partial: Point,
    /// What each column of the points' `watch` is (the server watch).
    series: SeriesTable,
}

impl Timeline {
    /// An empty timeline whose run starts now.
    pub fn new() -> Timeline {
        Timeline::with_bounds(BASE_INTERVAL, MAX_POINTS)
    }

    /// An empty timeline with its own base interval and bound (tests).
    ///
    /// Every point it will hold is made here, with room for the most
    /// buckets a point keeps, and written once: the timeline's memory
    /// (its bound, [`POINT_BYTES`] a point) is the process's before the
    /// ramp, instead of growing for the quarter of an hour it takes to
    /// fill (a soak's RSS then reads as a leak to `soakd_rss_slope`; issue
    /// 29). Points are used again as they merge.
    pub fn with_bounds(interval: Duration, max_points: usize) -> Timeline {
        let max_points = max_points.max(2);
        Timeline {
            started_at: SystemTime::now(),
            interval,
            max_points,
            points: Vec::with_capacity(max_points + 1),
            filling: Filling::new(Duration::ZERO),
            last_tick: Duration::ZERO,
            spare: (0..max_points + 2).map(|_| Arc::new(Point::blank(true))).collect(),
            merged: Vec::with_capacity(max_points + 1),
            scratch: Sparse {
                index: Vec::with_capacity(2 * super::sparse::MAX_BUCKETS),
                counts: Vec::with_capacity(2 * super::sparse::MAX_BUCKETS),
                level: 0,
            },
            room_for_targets: 0,
            partial: Point::blank(true),
            series: SeriesTable::default(),
        }
    }

    /// Makes room in every point for `targets` `--target-pid` samples
    /// and `workloads` workloads' figures (called when they are known,
    /// before the ramp).
    pub fn reserve(&mut self, targets: usize, workloads: usize) {
        self.room_for_targets = self.room_for_targets.max(targets);
        let workloads = if workloads > 1 { workloads.min(MAX_WORKLOADS) } else { 0 };
        let spare = self.spare.iter_mut().filter_map(Arc::get_mut);
        for p in spare.chain(std::iter::once(&mut self.partial)) {
            p.resources
                .targets
                .reserve(targets.saturating_sub(p.resources.targets.len()));
            p.workloads.reserve(workloads.saturating_sub(p.workloads.len()));
        }
    }

    /// Makes room in every point for the most watched series
    /// ([`MAX_SERIES`]), when the run has a server watch (called before
    /// the ramp: the room is the process's from the start).
    pub fn reserve_watch(&mut self) {
        let spare = self.spare.iter_mut().filter_map(Arc::get_mut);
        for p in spare.chain(std::iter::once(&mut self.partial)) {
            p.watch.reserve(MAX_SERIES.saturating_sub(p.watch.len()));
        }
        self.filling.watch.reserve(MAX_SERIES);
    }

    /// What each watched column is.
    pub fn series(&self) -> &SeriesTable {
        &self.series
    }

    /// The series table, to add series and restarts to.
    pub fn series_mut(&mut self) -> &mut SeriesTable {
        &mut self.series
    }

    /// The value of watched column `col` read now (the point keeps the
    /// last of its interval).
    pub fn watched(&mut self, col: usize, value: f64) {
        let w = &mut self.filling.watch;
        if w.len() <= col {
            w.resize(col + 1, f64::NAN);
        }
        w[col] = value;
    }

    /// A point's storage back to the spares, when nothing else holds it.
    fn recycle(&mut self, p: Arc<Point>) {
        if Arc::strong_count(&p) == 1 && Arc::weak_count(&p) == 0 && self.spare.len() < self.max_points + 2 {
            self.spare.push(p);
        }
    }

    /// Adds one drained delta (workload `workload` of one worker).
    pub fn add(&mut self, workload: usize, s: &WorkloadStats) {
        if workload < MAX_WORKLOADS {
            let ws = &mut self.filling.workloads;
            while ws.len() <= workload {
                ws.push((0, 0, point_histogram()));
            }
            let (completed, errors, h) = &mut ws[workload];
            *completed += s.counters.completed;
            *errors += s.counters.total_errors();
            if !s.latency.is_empty() {
                h.add(&s.latency).expect("histograms share the upper bound");
            }
        }
        self.filling.counters.count(&s.counters);
        for (to, from) in [(&mut self.filling.latency, &s.latency), (&mut self.filling.lag, &s.lag)] {
            if !from.is_empty() {
                // The point histograms share the upper bound of the source.
                to.add(from).expect("histograms share the upper bound");
            }
        }
    }

    /// The connections open after a drain (all workloads).
    pub fn level(&mut self, open: u64) {
        self.filling.open = open;
        self.filling.open_min = Some(self.filling.open_min.map_or(open, |m| m.min(open)));
    }

    /// True when the point being filled has no process sample yet: the
    /// observer samples /proc once a point, not on every drain.
    pub fn wants_sample(&self) -> bool {
        self.filling.resources == Resources::default()
    }

    /// The processes as sampled now; the point keeps the last sample of
    /// its interval.
    pub fn sample(&mut self, r: Resources) {
        // The first sample says how many processes are watched: every
        // point gets room for them now, not as it is first used.
        if r.targets.len() > self.room_for_targets {
            self.reserve(r.targets.len(), 0);
        }
        self.filling.resources = r;
    }

    /// Called after each drain with the run time: closes the point being
    /// filled once its interval is over, coarsening when past the bound.
    pub fn tick(&mut self, elapsed: Duration) {
        self.last_tick = elapsed;
        if elapsed < self.filling.start + self.interval {
            return;
        }
        let mut point = self.spare.pop().unwrap_or_else(|| Arc::new(Point::blank(true)));
        match Arc::get_mut(&mut point) {
            Some(p) => self.filling.close_into(elapsed, p),
            None => point = Arc::new(self.filling.point(elapsed)),
        }
        self.push(point);
        self.filling.restart(elapsed);
    }

    fn push(&mut self, point: Arc<Point>) {
        debug_assert!(point.bytes() <= POINT_BYTES, "{} bytes", point.bytes());
        self.points.push(point);
        if self.points.len() > self.max_points {
            self.coarsen();
        }
    }

    /// Merges neighbours pairwise and doubles the interval. An odd last
    /// point stays alone (it is the most recent; the next merge pairs it).
    /// The merged-away points' storage goes back to the spares.
    fn coarsen(&mut self) {
        let mut old = std::mem::take(&mut self.points);
        let mut merged = std::mem::take(&mut self.merged);
        merged.clear();
        let mut it = old.drain(..);
        while let Some(mut a) = it.next() {
            if let Some(b) = it.next() {
                Arc::make_mut(&mut a).absorb(&b, &mut self.scratch);
                self.recycle(b);
            }
            merged.push(a);
        }
        drop(it);
        self.points = merged;
        self.merged = old;
        self.interval *= 2;
    }

    /// Wall-clock time at which the run started.
    pub fn started_at(&self) -> SystemTime {
        self.started_at
    }

    /// Most points kept before neighbours merge.
    pub fn max_points(&self) -> usize {
        self.max_points
    }

    /// Current length of a point.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// The closed points and, when it holds anything, the one being filled
    /// up to the last tick.
    pub fn points(&self) -> Vec<Arc<Point>> {
        self.saved().points
    }

    /// The closed points.
    pub(super) fn closed(&self) -> &[Arc<Point>] {
        &self.points
    }

    /// The point being filled, closed at the last tick into the room kept
    /// for it; `None` when it holds nothing yet.
    pub(super) fn partial(&mut self) -> Option<&Point> {
        let f = &self.filling;
        if self.last_tick > f.start || f.counters != PointCounts::default() {
            f.close_into(self.last_tick.max(f.start), &mut self.partial);
            Some(&self.partial)
        } else {
            None
        }
    }

    /// Heap bytes the closed points and the spare ones hold (for the
    /// memory test).
    pub fn heap_bytes(&self) -> usize {
        (self.points.capacity() + self.merged.capacity() + self.spare.capacity()) * std::mem::size_of::<Arc<Point>>()
            + self.scratch.heap_bytes()
            + self.points.iter().chain(&self.spare).map(|p| p.bytes()).sum::<usize>()
    }

    /// The most bytes one closed point holds.
    pub fn largest_point_bytes(&self) -> usize {
        self.points.iter().map(|p| p.bytes()).max().unwrap_or(0)
    }

    /// The timeline as data for a `--state` checkpoint: the closed points
    /// and the one being filled, closed at the last tick.
    pub fn saved(&self) -> TimelineSaved {
        let mut s = TimelineSaved {
            started_at: self.started_at,
            interval: self.interval,
            max_points: self.max_points,
            points: Vec::new(),
            series: SeriesTable::default(),
        };
        self.save_into(&mut s);
        s
    }

    /// The timeline as checkpoint data, written into `s` (a checkpoint the
    /// writer gave back). Its list of points gets room for the bound once
    /// and keeps it: a new list a checkpoint, each a little longer than
    /// the last, never fit the hole the last one left and crept up the
    /// top of soakd's heap for as long as the timeline filled (issue 29).
    pub fn save_into(&self, s: &mut TimelineSaved) {
        s.started_at = self.started_at;
        s.interval = self.interval;
        s.max_points = self.max_points;
        s.points.clear();
        s.points.reserve(self.max_points + 2);
        s.points.extend(self.points.iter().cloned());
        s.series.clone_from(&self.series);
        let f = &self.filling;
        if self.last_tick > f.start || f.counters != PointCounts::default() {
            s.points.push(Arc::new(f.point(self.last_tick.max(f.start))));
        }
    }

    /// Continues from `s` with the run now at `now` (since its original
    /// start): the points saved, then one point flagged `gap` for the time
    /// no soakd measured (from the last saved point's end to `now`), then
    /// a new point filling from `now`.
    pub fn restore(&mut self, s: TimelineSaved, now: Duration) {
        self.started_at = s.started_at;
        self.interval = s.interval;
        self.max_points = s.max_points.max(2);
        self.points.clear();
        self.points.extend(s.points);
        self.series = s.series;
        let from = self.points.last().map_or(Duration::ZERO, |p| p.start + p.length);
        if now > from {
            self.push(Arc::new(Point {
                start: from,
                length: now - from,
                counters: PointCounts::default(),
                open: 0,
                open_min: 0,
                latency: Sparse::default(),
                lag: Sparse::default(),
                resources: Resources::default(),
                gap: true,
                workloads: Vec::new(),
                watch: Vec::new(),
            }));
        }
        while self.points.len() > self.max_points {
            self.coarsen();
        }
        self.filling = Filling::new(now.max(from));
        self.last_tick = now.max(from);
    }
}

impl Default for Timeline {
    fn default() -> Self {
        Timeline::new()
    }
}

/// The timeline in a `--state` checkpoint ([`Timeline::saved`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TimelineSaved {
    /// Wall-clock start of the run.
    pub started_at: SystemTime,
    /// Length of a point.
    pub interval: Duration,
    /// Most points kept.
    pub max_points: usize,
    /// The points, the last one possibly partial (shared with the
    /// timeline: see [`Timeline`]'s `points`).
    pub points: Vec<Arc<Point>>,
    /// What the points' watched columns are.
    #[serde(default)]
    pub series: SeriesTable,
}

#[cfg(test)]
mod tests {
    use super::super::ErrorKind;
    use super::super::sparse::MAX_BUCKETS;
    use super::super::timeline_json::PointJson;
    use super::*;
    use proptest::prelude::*;

    fn delta(completed: u64, latencies_us: &[u64], err: Option<ErrorKind>) -> WorkloadStats {
        let mut s = WorkloadStats::default();
        s.counters.completed = completed;
        s.counters.sent = completed;
        for _ in 0..completed {
            s.counters.response(200);
        }
        if let Some(k) = err {
            s.counters.error(k, 1);
        }
        for us in latencies_us {
            s.latency.record(*us).unwrap();
        }
        s
    }

    /// A checkpoint copies the points into the list of the last one,
    /// which has room for the bound from the first: the list never moves
    /// as the timeline fills, nor after it coarsens (issue 29).
    #[test]
    fn checkpoints_copy_the_points_into_one_list() {
        let mut t = Timeline::with_bounds(Duration::from_secs(1), 50);
        let mut saved = t.saved();
        assert!(saved.points.capacity() >= 52);
        let list = saved.points.as_ptr();
        for s in 1..=200u64 {
            t.add(0, &delta(5, &[1_000], None));
            t.tick(Duration::from_secs(s));
            t.save_into(&mut saved);
            assert_eq!(saved.points.as_ptr(), list, "the list moved at {s} s");
            // The closed points and the one filling, as `points()` has them.
            assert_eq!(saved.points.len(), t.points().len());
            saved.points.clear();
        }
        assert!(t.interval() > Duration::from_secs(1), "the timeline coarsened");
    }

    #[test]
    fn a_ten_second_run_has_ten_points() {
        let mut t = Timeline::new();
        for tick in 1..=40u64 {
            t.add(0, &delta(5, &[1_000], None));
            t.level(100);
            t.tick(Duration::from_millis(250 * tick));
        }
        let pts = t.points();
        assert_eq!(pts.len(), 10, "{pts:?}");
        assert_eq!(pts.iter().map(|p| p.counters.completed).sum::<u64>(), 200);
        let j = t.to_json();
        assert_eq!(j.points[3].t, 3.0);
        assert_eq!(j.points[3].completed, 20);
        assert_eq!(j.points[3].open, 100);
        assert!(
            (j.points[3].p50.unwrap() - 0.001).abs() < 0.00002,
            "{:?}",
            j.points[3].p50
        );
        let v = serde_json::to_value(&j).unwrap();
        assert_eq!(v["points"][0]["responses"]["2xx"], 20);
        assert!(v["points"][0]["errors"].as_object().unwrap().is_empty());
        // Pretty-printed, a point takes one line.
        let pretty = serde_json::to_string_pretty(&j).unwrap();
        assert_eq!(pretty.lines().filter(|l| l.contains("\"t\":")).count(), 10, "{pretty}");
        // The points read back as written (the start time's float may
        // differ in its last digit: serde_json parses floats fast, not
        // exactly, without its float_roundtrip feature).
        let back: serde_json::Value = serde_json::from_str(&pretty).unwrap();
        assert_eq!(back["points"], v["points"]);
    }

    #[test]
    fn the_partial_last_point_is_reported() {
        let mut t = Timeline::new();
        t.add(0, &delta(3, &[10], Some(ErrorKind::Reset)));
        t.tick(Duration::from_millis(500));
        let pts = t.points();
        assert_eq!(pts.len(), 1);
        assert_eq!(pts[0].length, Duration::from_millis(500));
        assert_eq!(pts[0].counters.errors_of(ErrorKind::Reset), 1);
    }

    #[test]
    fn merged_quantiles_are_those_of_the_whole() {
        // 1 ms in one point, 100 ms in the next: after the merge the median
        // is 1 ms and p99 100 ms, which no average of quantiles would give.
        let mut t = Timeline::with_bounds(Duration::from_secs(1), 2);
        t.add(0, &delta(60, &[1_000; 60], None));
        t.tick(Duration::from_secs(1));
        t.add(0, &delta(40, &[100_000; 40], None));
        t.tick(Duration::from_secs(2));
        t.add(0, &delta(1, &[5], None));
        t.tick(Duration::from_secs(3));
        assert_eq!(t.interval(), Duration::from_secs(2));
        let p = &t.points()[0];
        assert_eq!(p.length, Duration::from_secs(2));
        assert_eq!(p.latency.len(), 100);
        let p50 = p.latency.quantile_us(0.5).unwrap();
        let p99 = p.latency.quantile_us(0.99).unwrap();
        assert!((989..=1_011).contains(&p50), "{p50}");
        assert!((98_900..=101_100).contains(&p99), "{p99}");
    }

    /// A week with latencies spread evenly over four decades, enough of
    /// them that a point fills nearly every 2-digit bucket there (the
    /// worst case short of filling the whole 1 µs – 1 h range): the points
    /// stay within the bound, memory stops growing once the buckets are
    /// full (a day in), the JSON stays small. One drain every 2 s keeps the
    /// test quick; the control loop drains every 250 ms.
    #[test]
    fn a_week_stays_small() {
        let mut t = Timeline::new();
        let mut h = WorkloadStats::default();
        let mut bytes_at_day = 0;
        let mut rng = fastrand::Rng::with_seed(7);
        let step = 2u64;
        let ticks = 7 * 24 * 3600 / step;
        for tick in 1..=ticks {
            for _ in 0..30 {
                let us = 10f64.powf(2.0 + 4.0 * rng.f64()) as u64;
                h.latency.record(us).unwrap();
                h.lag.record(us / 10 + 1).unwrap();
            }
            h.counters.completed = 30;
            t.add(0, &h);
            h.clear();
            t.level(1000);
            t.tick(Duration::from_secs(step * tick));
            if tick == 24 * 3600 / step {
                bytes_at_day = t.heap_bytes();
            }
        }
        assert!(t.points().len() <= MAX_POINTS);
        assert!(t.points().len() >= MAX_POINTS / 2);
        assert_eq!(t.points().iter().map(|p| p.counters.completed).sum::<u64>(), 30 * ticks);
        let bytes = t.heap_bytes();
        assert!(
            bytes * 2 < bytes_at_day * 3,
            "{bytes} bytes after a week vs {bytes_at_day} after a day"
        );
        eprintln!(
            "a week: {bytes_at_day} bytes after a day, {bytes} after the week, largest point {} bytes",
            t.largest_point_bytes()
        );
        // Every point within the bound, so 1,000 of them within 3.2 MB.
        assert!(t.largest_point_bytes() <= POINT_BYTES, "{}", t.largest_point_bytes());
        assert!(bytes <= MAX_POINTS * POINT_BYTES, "{bytes} bytes");
        // Four decades are more than level 0 spans: the list is kept at
        // level 2, and the median (10 ms) and the tail stay within half
        // of its bucket (4.4%).
        let p = &t.points()[0];
        assert_eq!(p.latency.level, 2);
        for (q, want) in [(0.5, 1e4), (0.99, 10f64.powf(2.0 + 4.0 * 0.99))] {
            let got = p.latency.quantile_us(q).unwrap() as f64;
            assert!((got / want - 1.0).abs() < 0.045, "q{q}: {got} vs {want}");
        }
        let json = serde_json::to_string_pretty(&t.to_json()).unwrap();
        assert!(json.len() < 1 << 20, "{} bytes of JSON", json.len());
    }

    /// The worst point: every bucket of the whole range filled in both
    /// distributions, and a process sample for four target PIDs.
    #[test]
    fn each_workload_has_its_share_of_a_point() {
        let mut t = Timeline::new();
        // One workload: nothing per workload (the point's own figures are
        // its).
        t.add(0, &delta(10, &[1_000; 10], None));
        t.tick(Duration::from_secs(1));
        assert!(t.points()[0].workloads.is_empty());
        // Two: each its own counts and quantiles.
        let mut t = Timeline::with_bounds(Duration::from_secs(1), 2);
        for s in 1..=3u64 {
            t.add(0, &delta(10, &[1_000 * s; 10], None));
            t.add(1, &delta(30, &[50_000; 30], Some(ErrorKind::Reset)));
            t.tick(Duration::from_secs(s));
        }
        let pts = t.points();
        // Three points past a bound of 2: the first two merged.
        assert_eq!(pts.len(), 2);
        let (merged, last) = (pts[0].workloads[0], pts[1].workloads[0]);
        assert_eq!((merged.completed, merged.errors), (20, 0));
        // Quantiles of a merge: weighted by completed (1 ms and 2 ms).
        let p50 = f64::from(merged.p50_us.unwrap().get());
        assert!((1_480.0..=1_520.0).contains(&p50), "{p50}");
        assert!((2_970..=3_030).contains(&last.p50_us.unwrap().get()), "{last:?}");
        assert_eq!((pts[1].workloads[1].completed, pts[1].workloads[1].errors), (30, 1));
        let j = t.to_json();
        let w = &j.points[1].workloads[1];
        assert_eq!((w.completed, w.errors), (30, 1));
        assert!((w.p99.unwrap() - 0.050).abs() < 0.001, "{w:?}");
        let v = serde_json::to_value(&j).unwrap();
        assert_eq!(v["points"][1]["workloads"][0]["completed"], 10);
        // A one-workload point writes no `workloads`.
        let mut one = Timeline::new();
        one.add(0, &delta(1, &[1_000], None));
        one.tick(Duration::from_secs(1));
        let v = serde_json::to_value(one.to_json()).unwrap();
        assert!(v["points"][0].get("workloads").is_none(), "{v}");
    }

    /// Issue 29: the timeline's memory is taken at start and used again,
    /// so soakd's RSS does not grow for the quarter of an hour the points
    /// take to fill. Every point ever closed is one of those made at
    /// start, through three coarsenings, with a checkpoint's copy taken
    /// and let go between them; and the trends' input made from the
    /// points is the one their JSON gives.
    #[test]
    fn the_points_are_made_at_start_and_used_again() {
        let mut t = Timeline::with_bounds(Duration::from_secs(1), 100);
        t.reserve(1, 1);
        let made: std::collections::HashSet<*const Point> = t.spare.iter().map(Arc::as_ptr).collect();
        assert_eq!(made.len(), 102);
        let room = t.heap_bytes();
        let mut rng = fastrand::Rng::with_seed(3);
        let mut held = None;
        for tick in 1..=450u64 {
            let mut h = WorkloadStats::default();
            for _ in 0..200 {
                h.latency.record(10f64.powf(2.0 + 3.0 * rng.f64()) as u64).unwrap();
            }
            h.counters.completed = 200;
            t.add(0, &h);
            t.sample(Resources {
                targets: vec![ProcSample {
                    pid: 1,
                    rss_bytes: tick,
                    ..Default::default()
                }],
                soakd_rss_bytes: Some(tick),
            });
            t.tick(Duration::from_secs(tick));
            // A checkpoint takes the points now and then, and lets go.
            if tick % 30 == 0 {
                held = Some(t.saved());
            } else if tick % 30 == 5 {
                held = None;
            }
            for p in t.closed() {
                assert!(
                    made.contains(&Arc::as_ptr(p)),
                    "point at {:?} was made after the start",
                    p.start
                );
            }
        }
        drop(held);
        assert_eq!(t.interval(), Duration::from_secs(8), "coarsened three times");
        assert_eq!(t.heap_bytes(), room, "no room was added");
        let mut input = crate::stats::trends::TrendInput::with_room(101, 1);
        t.trend_input(&mut input);
        let json = crate::stats::trends::TrendInput::of_json(&t.to_json());
        assert_eq!(input.points, json.points);
        assert_eq!(input.points.last().map(|p| p.target_rss), Some(450.0));
    }

    #[test]
    fn the_worst_point_fits() {
        let mut t = Timeline::new();
        let mut h = WorkloadStats::default();
        let mut us = 1u64;
        while us < super::super::HIST_MAX_US {
            h.latency.record(us).unwrap();
            h.lag.record(us).unwrap();
            us += us / 50 + 1;
        }
        // As many workloads as a point carries, and one more it does not.
        for wi in 0..=MAX_WORKLOADS {
            t.add(wi, &h);
        }
        t.sample(Resources {
            targets: (1..=4)
                .map(|pid| ProcSample {
                    pid,
                    ..Default::default()
                })
                .collect(),
            soakd_rss_bytes: Some(1),
        });
        // And every watched series the table keeps.
        t.reserve_watch();
        for col in 0..MAX_SERIES {
            t.watched(col, col as f64);
        }
        t.tick(Duration::from_secs(1));
        let bytes = t.largest_point_bytes();
        eprintln!("the worst point: {bytes} bytes");
        assert!(bytes <= POINT_BYTES, "{bytes} bytes");
        let p = &t.points()[0];
        assert_eq!(p.workloads.len(), MAX_WORKLOADS);
        assert_eq!(p.latency.len(), (MAX_WORKLOADS as u64 + 1) * h.latency.len());
        // 1 µs to 1 h: the coarsest level, nothing dropped, and the top
        // within half of its bucket (2^(8/32), 19%).
        assert!(p.latency.index.len() <= MAX_BUCKETS);
        assert_eq!(p.latency.level, 3);
        let max = p.latency.quantile_us(1.0).unwrap() as f64;
        assert!((max / h.latency.max() as f64 - 1.0).abs() < 0.095, "{max}");
    }

    #[test]
    fn the_last_process_sample_of_a_point_is_kept() {
        let mut t = Timeline::with_bounds(Duration::from_secs(1), 2);
        let at = |rss| Resources {
            targets: vec![ProcSample {
                pid: 7,
                rss_bytes: rss,
                cpu_ms: 1500,
                open_fds: Some(12),
            }],
            soakd_rss_bytes: Some(rss * 2),
        };
        assert!(t.wants_sample());
        t.sample(at(10));
        assert!(!t.wants_sample());
        t.tick(Duration::from_secs(1));
        assert!(t.wants_sample(), "a new point wants its own sample");
        t.tick(Duration::from_secs(2));
        t.sample(at(30));
        t.tick(Duration::from_secs(3));
        // Three points into two: the first two merged, the later (empty)
        // sample does not erase the earlier one.
        let j = t.to_json();
        assert_eq!(j.points[0].targets[0].rss_bytes, 10);
        assert_eq!(j.points[1].targets[0].rss_bytes, 30);
        assert_eq!(j.points[1].soakd_rss_bytes, Some(60));
        let v = serde_json::to_value(&j.points[1]).unwrap();
        assert_eq!(v["targets"][0]["cpu_seconds"], 1.5);
        let back: PointJson = serde_json::from_value(v).unwrap();
        assert_eq!(back.targets[0].cpu_ms, 1500);
        // Without a sample the point has no `targets` key at all.
        let none = serde_json::to_value(&j.points[0]).unwrap();
        assert!(none.get("targets").is_some());
        let plain = PointJson {
            t: 1.0,
            ..Default::default()
        };
        assert!(serde_json::to_value(&plain).unwrap().get("targets").is_none());
    }

    proptest! {
        /// Whatever the ticks and deltas, no count is lost or doubled by
        /// coarsening, points never exceed the bound, and they tile the run.
        #[test]
        fn coarsening_preserves_counts(
            bound in 2usize..12,
            steps in proptest::collection::vec((1u64..4_000, 0u64..50, 0u64..5), 1..400),
        ) {
            let mut t = Timeline::with_bounds(Duration::from_secs(1), bound);
            let mut now = Duration::ZERO;
            let (mut completed, mut errors, mut samples) = (0, 0, 0);
            for (ms, n, e) in steps {
                let lat: Vec<u64> = (0..n).map(|i| 1 + i * 997).collect();
                let mut d = delta(n, &lat, None);
                d.counters.error(ErrorKind::Timeout, e);
                completed += n;
                errors += e;
                samples += n;
                t.add(0, &d);
                now += Duration::from_millis(ms);
                t.tick(now);
                prop_assert!(t.points.len() <= bound);
            }
            let pts = t.points();
            prop_assert!(pts.len() <= bound + 1);
            prop_assert_eq!(pts.iter().map(|p| p.counters.completed).sum::<u64>(), completed);
            prop_assert_eq!(pts.iter().map(|p| p.counters.errors_of(ErrorKind::Timeout)).sum::<u64>(), errors);
            prop_assert_eq!(pts.iter().map(|p| p.latency.len()).sum::<u64>(), samples);
            let mut end = Duration::ZERO;
            for p in &pts {
                prop_assert_eq!(p.start, end);
                end = p.start + p.length;
            }
            prop_assert_eq!(end, now);
        }
    }
}
