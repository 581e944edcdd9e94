//! The server watch's families (`soakd_watch_*`): each watched series'
//! latest value and its slope over the steady part, so Grafana shows the
//! server's side beside soakd's on one row and the mixin can alert on a
//! leak (`SoakdServerLeak`); and each source's reads, failures by reason,
//! restarts and whether it answers. The sources and their failure reasons
//! are known at start, so those series exist from the first scrape; a
//! series of values exists once it was read (a pod that appears later is
//! a series that appears later), and is left out while its source is
//! stale rather than shown with an old value.

use prometheus::proto::MetricType;

use super::{Family, Fill, value};
use crate::stats::watch::{FAILURE_REASONS, SeriesTable, SeriesTrend, SourceStats};

/// One series as the last update saw it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SeriesSnapshot {
    /// The `watch` label.
    pub watch: String,
    /// The `series` label: the source and its labels.
    pub series: String,
    /// The latest value (NaN: stale, or not read yet).
    pub value: f64,
    /// The slope per second, once computed.
    pub slope: Option<f64>,
    /// Whether the slope is significant.
    pub significant: bool,
}

/// The watch's figures as of the last update.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WatchSnapshot {
    /// Every series kept.
    pub series: Vec<SeriesSnapshot>,
    /// Series not kept (past the cap).
    pub dropped: u64,
    /// The sources.
    pub sources: Vec<SourceStats>,
}

impl WatchSnapshot {
    /// The series of `table` with their latest values and, where
    /// computed, their trends; the sources' counts.
    pub fn of(table: &SeriesTable, latest: &[f64], trends: &[SeriesTrend], sources: &[SourceStats]) -> WatchSnapshot {
        WatchSnapshot {
            series: table
                .series
                .iter()
                .enumerate()
                .map(|(i, s)| SeriesSnapshot {
                    watch: s.watch.clone(),
                    series: s.series_label(),
                    value: latest.get(i).copied().unwrap_or(f64::NAN),
                    slope: trends.get(i).and_then(|t| t.slope.slope),
                    significant: trends.get(i).is_some_and(|t| t.slope.significant),
                })
                .collect(),
            dropped: table.dropped,
            sources: sources.to_vec(),
        }
    }
}

pub(super) const FAMILIES: &[Family] = &[
    Family {
        name: "soakd_watch_value",
        help: "The latest value of a watched series of the server (--target-metrics, --prometheus, --target-pidfile, --target-cgroup), in its own unit (bytes for memory); absent while its source is stale.",
        kind: MetricType::GAUGE,
        labels: &["watch", "series"],
        fill: Fill::Global(|kind, snap, out| {
            for s in snap.watch.series.iter().filter(|s| !s.value.is_nan()) {
                out.push(value(kind, &[("watch", &s.watch), ("series", &s.series)], s.value));
            }
        }),
    },
    Family {
        name: "soakd_watch_slope_per_second",
        help: "Theil-Sen slope of a watched series after the ramp and the warmup (within the spans between server restarts), in its unit per second (bytes per second for memory); recomputed every 10 s.",
        kind: MetricType::GAUGE,
        labels: &["watch", "series"],
        fill: Fill::Global(|kind, snap, out| {
            for s in &snap.watch.series {
                if let Some(v) = s.slope {
                    out.push(value(kind, &[("watch", &s.watch), ("series", &s.series)], v));
                }
            }
        }),
    },
    Family {
        name: "soakd_watch_slope_significant",
        help: "1 when that slope is significant (Mann-Kendall, corrected for autocorrelation): a trend, not noise; else 0.",
        kind: MetricType::GAUGE,
        labels: &["watch", "series"],
        fill: Fill::Global(|kind, snap, out| {
            for s in snap.watch.series.iter().filter(|s| s.slope.is_some()) {
                let v = if s.significant { 1.0 } else { 0.0 };
                out.push(value(kind, &[("watch", &s.watch), ("series", &s.series)], v));
            }
        }),
    },
    Family {
        name: "soakd_watch_scrapes_total",
        help: "Reads of a watch source (scrapes, Prometheus queries, /proc and cgroup reads), failed or not.",
        kind: MetricType::COUNTER,
        labels: &["source"],
        fill: Fill::Global(|kind, snap, out| {
            for s in &snap.watch.sources {
                out.push(value(kind, &[("source", &s.source)], s.reads as f64));
            }
        }),
    },
    Family {
        name: "soakd_watch_scrape_failures_total",
        help: "Failed reads of a watch source by reason: refused, timeout, tls, status (not 200), too_large (over 16 MiB), malformed (not an exposition or API answer), io, query (Prometheus refused it), token (bearer file), gone (pid file or process or cgroup missing).",
        kind: MetricType::COUNTER,
        labels: &["source", "reason"],
        fill: Fill::Global(|kind, snap, out| {
            for s in &snap.watch.sources {
                for r in FAILURE_REASONS {
                    let n = s.failures.get(r).copied().unwrap_or(0);
                    out.push(value(kind, &[("source", &s.source), ("reason", r)], n as f64));
                }
            }
        }),
    },
    Family {
        name: "soakd_watch_source_up",
        help: "1 when a watch source's last read succeeded, 0 while it is stale.",
        kind: MetricType::GAUGE,
        labels: &["source"],
        fill: Fill::Global(|kind, snap, out| {
            for s in &snap.watch.sources {
                out.push(value(kind, &[("source", &s.source)], if s.stale { 0.0 } else { 1.0 }));
            }
        }),
    },
    Family {
        name: "soakd_watch_restarts_total",
        help: "Restarts of the server seen at a watch source (process_start_time_seconds changed, a counter reset, a pod replaced, a new PID, every process of a cgroup replaced).",
        kind: MetricType::COUNTER,
        labels: &["source"],
        fill: Fill::Global(|kind, snap, out| {
            for s in &snap.watch.sources {
                out.push(value(kind, &[("source", &s.source)], s.restarts as f64));
            }
        }),
    },
    Family {
        name: "soakd_watch_series_dropped_total",
        help: "Watched series not kept: the watch keeps 64 (narrow the --watch queries).",
        kind: MetricType::COUNTER,
        labels: &[],
        fill: Fill::Global(|kind, snap, out| {
            if !snap.watch.sources.is_empty() {
                out.push(value(kind, &[], snap.watch.dropped as f64));
            }
        }),
    },
];
