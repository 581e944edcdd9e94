//! The report's form of the timeline: seconds, names instead of indices,
//! one compact line per point. Kept apart from the timeline's own types,
//! which hold what a run needs (bucket lists, Arc-shared points), so the
//! JSON can change shape without touching the hot structure.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::resources::ProcSample;
use super::sparse::Sparse;
use super::timeline::{Point, Timeline};
use super::{ErrorKind, StatusClass};

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
    /// What each column of the points' `watch` is: the series the server
    /// watch read (absent without one).
    #[serde(default, skip_serializing_if = "super::series::SeriesTable::is_empty")]
    pub series: super::series::SeriesTable,
}

/// A sequence whose elements are each written as compact JSON: the report
/// is pretty-printed, and a point spread over 20 indented lines would
/// triple its size. With this a point is one line. (Reading it back is
/// the plain derived `Deserialize`.) The report's other long lists (the
/// baseline's windows) use it too.
pub fn one_line_each<T: Serialize, S: serde::Serializer>(items: &[T], ser: S) -> Result<S::Ok, S::Error> {
    use serde::ser::Error as _;
    let mut raw = Vec::with_capacity(items.len());
    for item in items {
        let text = serde_json::to_string(item).map_err(S::Error::custom)?;
        raw.push(serde_json::value::RawValue::from_string(text).map_err(S::Error::custom)?);
    }
    ser.collect_seq(raw)
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Nonzero counts by name (absent = 0).
pub type NonZero = BTreeMap<String, u64>;

/// One point of the report's timeline. Seconds throughout; latency fields
/// are `null` when the point completed no request.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
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
    /// The `--target-pid` processes as last sampled in the point (none
    /// without `--target-pid`, or in a report from a soakd before it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<ProcSample>,
    /// soakd's own resident memory, bytes (`null` when not sampled).
    #[serde(default)]
    pub soakd_rss_bytes: Option<u64>,
    /// The point holds time when soakd was not running (it was killed
    /// and continued from its `--state`): its counts miss that time.
    /// Absent when false.
    #[serde(default, skip_serializing_if = "is_false")]
    pub gap: bool,
    /// Each workload's share, in the report's workload order (only in a
    /// run with several workloads; the first [`MAX_WORKLOADS`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workloads: Vec<WorkloadPointJson>,
    /// The last value of each watched series read in the point, in the
    /// order of the timeline's `series` (`null`: none read in it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub watch: Vec<Option<f64>>,
}

/// One workload's share of a point in the report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkloadPointJson {
    /// Complete responses.
    pub completed: u64,
    /// Errors, all kinds.
    pub errors: u64,
    /// Latency median, seconds.
    pub p50: Option<f64>,
    /// Latency 99th percentile, seconds.
    pub p99: Option<f64>,
}

impl WorkloadPointJson {
    /// A workload's share of a timeline point, in the report's units.
    pub(super) fn of(w: &super::timeline::WorkloadPoint) -> WorkloadPointJson {
        WorkloadPointJson {
            completed: w.completed,
            errors: w.errors,
            p50: w.p50_us.map(|us| f64::from(us.get()) / 1e6),
            p99: w.p99_us.map(|us| f64::from(us.get()) / 1e6),
        }
    }
}

impl PointJson {
    pub(super) fn of(p: &Point) -> PointJson {
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
            targets: p.resources.targets.clone(),
            soakd_rss_bytes: p.resources.soakd_rss_bytes,
            gap: p.gap,
            workloads: p.workloads.iter().map(WorkloadPointJson::of).collect(),
            watch: p.watch.iter().map(|v| (!v.is_nan()).then_some(*v)).collect(),
        }
    }
}

impl Timeline {
    /// The JSON form the report embeds.
    pub fn to_json(&self) -> TimelineJson {
        TimelineJson {
            started_at: humantime::format_rfc3339_millis(self.started_at()).to_string(),
            started_at_unix_seconds: self
                .started_at()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            interval_seconds: self.interval().as_secs_f64(),
            max_points: self.max_points(),
            points: self.points().iter().map(|p| PointJson::of(p)).collect(),
            series: self.series().clone(),
        }
    }
}
