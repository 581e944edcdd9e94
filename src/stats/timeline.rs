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
//! sparse lists of HdrHistogram buckets at 2 significant digits (1%
//! resolution, enough for a chart) rather than as full histograms. A full
//! 3-digit histogram of soakd's range (1 µs to 1 h) is ~200 KB, so a
//! thousand of them would be ~400 MB; a sparse 2-digit one is a few
//! hundred buckets in practice and at most ~3,300 (the range's 2-digit
//! bucket count) of 8 bytes. That bounds the timeline at ~50 MB in the
//! worst case (every bucket of the range filled in every point); a week
//! whose latencies spread evenly over four decades, filling every bucket
//! there, holds ~15 MB (12.8 MB after its first day; `a_week_stays_small`), and ordinary latencies
//! (a decade or two) a few MB. Merging two
//! sparse lists is exact at that resolution, so quantiles after any number
//! of merges are those of the whole interval.
//!
//! The timeline is summed over workloads (one series per chart); the
//! per-workload split stays in the report's `workloads` and the metrics.

use std::time::{Duration, SystemTime};

use hdrhistogram::Histogram;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Counters, ErrorKind, HIST_MAX_US, StatusClass, WorkloadStats};

/// Length of a point until the first coarsening.
pub const BASE_INTERVAL: Duration = Duration::from_secs(1);
/// Most points the timeline keeps; past it neighbours merge pairwise.
pub const MAX_POINTS: usize = 1000;
/// Significant digits of the per-point histograms.
const POINT_DIGITS: u8 = 2;

/// A latency distribution as HdrHistogram buckets: each bucket's highest
/// equivalent value (µs) and its count, ascending by value, no zero counts.
/// Counts are u32 (8 bytes a bucket with its value) and saturate: 4·10⁹
/// samples in one 1%-wide bucket of one point would take a million
/// requests per second into that bucket for over an hour.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sparse {
    values: Vec<u32>,
    counts: Vec<u32>,
}

impl Sparse {
    /// The buckets of `h` (a [`point_histogram`]).
    fn of(h: &Histogram<u64>) -> Sparse {
        let mut s = Sparse::default();
        for v in h.iter_recorded() {
            // Values are clamped to 1 h (3.6e9 µs), which fits in u32.
            s.values.push(v.value_iterated_to().min(u64::from(u32::MAX)) as u32);
            s.counts.push(v.count_at_value().min(u64::from(u32::MAX)) as u32);
        }
        s
    }

    /// Samples in the distribution.
    pub fn len(&self) -> u64 {
        self.counts.iter().map(|c| u64::from(*c)).sum()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Merges `other` into `self` (sorted merge of the two bucket lists).
    fn merge(&mut self, other: &Sparse) {
        if other.is_empty() {
            return;
        }
        let mut out = Sparse {
            values: Vec::with_capacity(self.values.len() + other.values.len()),
            counts: Vec::with_capacity(self.values.len() + other.values.len()),
        };
        let (mut i, mut j) = (0, 0);
        while i < self.values.len() || j < other.values.len() {
            let a = self.values.get(i).copied().unwrap_or(u32::MAX);
            let b = other.values.get(j).copied().unwrap_or(u32::MAX);
            let take_a = i < self.values.len() && (j >= other.values.len() || a <= b);
            let take_b = j < other.values.len() && (i >= self.values.len() || b <= a);
            let mut count = 0u32;
            if take_a {
                count = count.saturating_add(self.counts[i]);
                i += 1;
            }
            if take_b {
                count = count.saturating_add(other.counts[j]);
                j += 1;
            }
            out.values.push(if take_a { a } else { b });
            out.counts.push(count);
        }
        out.values.shrink_to_fit();
        out.counts.shrink_to_fit();
        *self = out;
    }

    /// The value at quantile `q` in µs, as HdrHistogram computes it (the
    /// bucket holding the ⌈q·n⌉-th sample); `None` when empty.
    pub fn quantile_us(&self, q: f64) -> Option<u64> {
        let n = self.len();
        if n == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (v, c) in self.values.iter().zip(&self.counts) {
            seen += u64::from(*c);
            if seen >= rank {
                return Some(u64::from(*v));
            }
        }
        self.values.last().map(|v| u64::from(*v))
    }

    /// Heap bytes held.
    fn heap_bytes(&self) -> usize {
        self.values.capacity() * 4 + self.counts.capacity() * 4
    }
}

/// A histogram at the points' resolution (1 µs to 1 h, 2 digits).
fn point_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_US, POINT_DIGITS).expect("valid histogram bounds")
}

/// One closed interval.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Point {
    /// Start, since the run started.
    pub start: Duration,
    /// Length.
    pub length: Duration,
    /// Counters summed over the interval (all workloads).
    pub counters: Counters,
    /// Connections open at the interval's end.
    pub open: u64,
    /// Fewest connections open at any drain in the interval.
    pub open_min: u64,
    /// Request latency.
    pub latency: Sparse,
    /// Schedule lag.
    pub lag: Sparse,
}

impl Point {
    /// Merges the following point `next` into `self`.
    fn absorb(&mut self, next: &Point) {
        self.length = next.start + next.length - self.start;
        self.counters.add(&next.counters);
        self.open = next.open;
        self.open_min = self.open_min.min(next.open_min);
        self.latency.merge(&next.latency);
        self.lag.merge(&next.lag);
    }
}

/// The point being filled: full histograms, so adding a drained delta is
/// a plain histogram addition.
#[derive(Debug)]
struct Filling {
    start: Duration,
    counters: Counters,
    open: u64,
    open_min: Option<u64>,
    latency: Histogram<u64>,
    lag: Histogram<u64>,
}

impl Filling {
    fn new(start: Duration) -> Filling {
        Filling {
            start,
            counters: Counters::default(),
            open: 0,
            open_min: None,
            latency: point_histogram(),
            lag: point_histogram(),
        }
    }

    fn point(&self, end: Duration) -> Point {
        Point {
            start: self.start,
            length: end.saturating_sub(self.start),
            counters: self.counters,
            open: self.open,
            open_min: self.open_min.unwrap_or(self.open),
            latency: Sparse::of(&self.latency),
            lag: Sparse::of(&self.lag),
        }
    }

    fn restart(&mut self, start: Duration) {
        self.start = start;
        self.counters = Counters::default();
        self.open_min = None;
        for h in [&mut self.latency, &mut self.lag] {
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
    points: Vec<Point>,
    filling: Filling,
    /// Run time at the last [`Timeline::tick`].
    last_tick: Duration,
}

impl Timeline {
    /// An empty timeline whose run starts now.
    pub fn new() -> Timeline {
        Timeline::with_bounds(BASE_INTERVAL, MAX_POINTS)
    }

    /// An empty timeline with its own base interval and bound (tests).
    pub fn with_bounds(interval: Duration, max_points: usize) -> Timeline {
        Timeline {
            started_at: SystemTime::now(),
            interval,
            max_points: max_points.max(2),
            points: Vec::new(),
            filling: Filling::new(Duration::ZERO),
            last_tick: Duration::ZERO,
        }
    }

    /// Adds one drained delta (one workload of one worker).
    pub fn add(&mut self, s: &WorkloadStats) {
        self.filling.counters.add(&s.counters);
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

    /// Called after each drain with the run time: closes the point being
    /// filled once its interval is over, coarsening when past the bound.
    pub fn tick(&mut self, elapsed: Duration) {
        self.last_tick = elapsed;
        if elapsed < self.filling.start + self.interval {
            return;
        }
        let point = self.filling.point(elapsed);
        self.push(point);
        self.filling.restart(elapsed);
    }

    fn push(&mut self, point: Point) {
        self.points.push(point);
        if self.points.len() > self.max_points {
            self.coarsen();
        }
    }

    /// Merges neighbours pairwise and doubles the interval. An odd last
    /// point stays alone (it is the most recent; the next merge pairs it).
    fn coarsen(&mut self) {
        let old = std::mem::take(&mut self.points);
        let mut merged = Vec::with_capacity(self.max_points);
        let mut it = old.into_iter();
        while let Some(mut a) = it.next() {
            if let Some(b) = it.next() {
                a.absorb(&b);
            }
            merged.push(a);
        }
        self.points = merged;
        self.interval *= 2;
    }

    /// Wall-clock time at which the run started.
    pub fn started_at(&self) -> SystemTime {
        self.started_at
    }

    /// Current length of a point.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// The closed points and, when it holds anything, the one being filled
    /// up to the last tick.
    pub fn points(&self) -> Vec<Point> {
        let mut out = self.points.clone();
        let f = &self.filling;
        if self.last_tick > f.start || f.counters != Counters::default() {
            out.push(f.point(self.last_tick.max(f.start)));
        }
        out
    }

    /// Heap bytes the closed points hold (for the memory test).
    pub fn heap_bytes(&self) -> usize {
        self.points.capacity() * std::mem::size_of::<Point>()
            + self
                .points
                .iter()
                .map(|p| p.latency.heap_bytes() + p.lag.heap_bytes())
                .sum::<usize>()
    }

    /// The JSON form the report embeds.
    pub fn to_json(&self) -> TimelineJson {
        TimelineJson {
            started_at: humantime::format_rfc3339_millis(self.started_at).to_string(),
            started_at_unix_seconds: self
                .started_at
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            interval_seconds: self.interval.as_secs_f64(),
            max_points: self.max_points,
            points: self.points().iter().map(PointJson::of).collect(),
        }
    }
}

impl Default for Timeline {
    fn default() -> Self {
        Timeline::new()
    }
}

/// The report's `timeline` object.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TimelineJson {
    /// Wall-clock start of the run, RFC 3339 UTC (aligns shards of a soak).
    pub started_at: String,
    /// The same as seconds since the Unix epoch.
    pub started_at_unix_seconds: f64,
    /// Length of a point at the end of the run (1 s doubled once per
    /// coarsening).
    pub interval_seconds: f64,
    /// Most points kept.
    pub max_points: usize,
    /// The points, oldest first.
    #[serde(serialize_with = "one_line_each")]
    pub points: Vec<PointJson>,
}

/// A sequence whose elements are each written as compact JSON: the report
/// is pretty-printed, and a point spread over 20 indented lines would
/// triple its size. With this a point is one line. (Reading it back is
/// the plain derived `Deserialize`.)
fn one_line_each<T: Serialize, S: serde::Serializer>(items: &[T], ser: S) -> Result<S::Ok, S::Error> {
    use serde::ser::Error as _;
    let mut raw = Vec::with_capacity(items.len());
    for item in items {
        let text = serde_json::to_string(item).map_err(S::Error::custom)?;
        raw.push(serde_json::value::RawValue::from_string(text).map_err(S::Error::custom)?);
    }
    ser.collect_seq(raw)
}

/// Nonzero counts by name (absent = 0).
pub type NonZero = BTreeMap<String, u64>;

/// One point of the report's timeline. Seconds throughout; latency fields
/// are `null` when the point completed no request.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PointJson {
    /// Start, seconds since the run started.
    pub t: f64,
    /// Length in seconds.
    pub seconds: f64,
    /// Requests sent.
    pub sent: u64,
    /// Complete responses.
    pub completed: u64,
    /// Responses by class (only classes seen).
    pub responses: NonZero,
    /// Errors by kind (only kinds seen).
    pub errors: NonZero,
    /// Connections open at the point's end.
    pub open: u64,
    /// Fewest connections open during the point.
    pub open_min: u64,
    /// Latency median.
    pub p50: Option<f64>,
    /// Latency 90th percentile.
    pub p90: Option<f64>,
    /// Latency 99th percentile.
    pub p99: Option<f64>,
    /// Latency maximum.
    pub max: Option<f64>,
    /// Schedule lag 99th percentile.
    pub lag_p99: Option<f64>,
}

impl PointJson {
    fn of(p: &Point) -> PointJson {
        let secs = |s: &Sparse, q: f64| s.quantile_us(q).map(|us| us as f64 / 1e6);
        let named = |names: &[&'static str], counts: &[u64]| -> NonZero {
            names
                .iter()
                .zip(counts)
                .filter(|(_, c)| **c > 0)
                .map(|(n, c)| (n.to_string(), *c))
                .collect()
        };
        // Rounded to the millisecond: the JSON stays short and nothing
        // finer is meaningful for a point's start.
        let ms = |d: Duration| (d.as_millis() as f64) / 1e3;
        PointJson {
            t: ms(p.start),
            seconds: ms(p.length),
            sent: p.counters.sent,
            completed: p.counters.completed,
            responses: named(&StatusClass::ALL.map(StatusClass::name), &p.counters.responses),
            errors: named(&ErrorKind::ALL.map(ErrorKind::name), &p.counters.errors),
            open: p.open,
            open_min: p.open_min,
            p50: secs(&p.latency, 0.5),
            p90: secs(&p.latency, 0.9),
            p99: secs(&p.latency, 0.99),
            max: secs(&p.latency, 1.0),
            lag_p99: secs(&p.lag, 0.99),
        }
    }
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn a_ten_second_run_has_ten_points() {
        let mut t = Timeline::new();
        for tick in 1..=40u64 {
            t.add(&delta(5, &[1_000], None));
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
        let back: serde_json::Value = serde_json::from_str(&pretty).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn the_partial_last_point_is_reported() {
        let mut t = Timeline::new();
        t.add(&delta(3, &[10], Some(ErrorKind::Reset)));
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
        t.add(&delta(60, &[1_000; 60], None));
        t.tick(Duration::from_secs(1));
        t.add(&delta(40, &[100_000; 40], None));
        t.tick(Duration::from_secs(2));
        t.add(&delta(1, &[5], None));
        t.tick(Duration::from_secs(3));
        assert_eq!(t.interval(), Duration::from_secs(2));
        let p = &t.points()[0];
        assert_eq!(p.length, Duration::from_secs(2));
        assert_eq!(p.latency.len(), 100);
        let p50 = p.latency.quantile_us(0.5).unwrap();
        let p99 = p.latency.quantile_us(0.99).unwrap();
        assert!((990..=1_010).contains(&p50), "{p50}");
        assert!((99_000..=101_000).contains(&p99), "{p99}");
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
            t.add(&h);
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
        // 1,000 points × 2 distributions × ~1,700 buckets (4 decades) × 8 B.
        assert!(bytes < 30 << 20, "{bytes} bytes");
        let json = serde_json::to_string_pretty(&t.to_json()).unwrap();
        assert!(json.len() < 1 << 20, "{} bytes of JSON", json.len());
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
                t.add(&d);
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
