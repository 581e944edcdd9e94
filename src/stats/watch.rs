//! The server's own figures as the watch read them (`--target-metrics`,
//! `--prometheus`, `--target-pidfile`, `--target-cgroup`): the series
//! table, and each series' trend over the steady part.
//!
//! A watched series is one line of what a source answers (one pod's
//! memory, one endpoint's descriptors), identified by its watch's name and
//! its labels. The timeline keeps its values point by point beside the
//! run's own figures ([`super::timeline`]: a value per series per point,
//! the last one read in the point, room made at start for [`MAX_SERIES`]),
//! and this table says what each column is. Past [`MAX_SERIES`] a new
//! series is not kept (the report says how many were dropped): a query
//! whose answer grows without bound must not grow soakd.
//!
//! A server that restarts is a new process, not a drop in one process's
//! memory: its series' restarts are kept here, and its slope is fitted
//! only between them ([`super::trend::theil_sen_segments`]: the pairs of
//! points on both sides of a restart are left out), so a deploy in the
//! middle of a week-long soak neither hides a leak nor fakes one. A pod
//! replaced by another is a new series (its labels differ).

use serde::{Deserialize, Serialize};

pub use super::series::{FAILURE_REASONS, MAX_SERIES, SeriesInfo, SeriesTable, SourceStats};
use super::trend::theil_sen_segments;
use super::trends::{Drift, Settings, Slope, TrendInput, drift_of_values};

/// One series' figures over the run and its trend over the steady part.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SeriesTrend {
    /// Values read (points that have one).
    pub samples: usize,
    /// The first value read.
    pub first: Option<f64>,
    /// The last value read.
    pub last: Option<f64>,
    /// The smallest.
    pub min: Option<f64>,
    /// The largest.
    pub max: Option<f64>,
    /// The mean.
    pub mean: Option<f64>,
    /// The largest after the ramp and the warmup (what `max(NAME)`
    /// judges).
    pub steady_max: Option<f64>,
    /// Theil–Sen slope over the steady part, within the spans between
    /// restarts (unit: the series' unit per second).
    pub slope: Slope,
    /// From the first quarter of the steady part to the last.
    pub drift: Drift,
}

/// Each series' trend (in the table's order) from `t`'s points.
pub fn analyze(t: &TrendInput, table: &SeriesTable, s: &Settings) -> Vec<SeriesTrend> {
    let mut xs = Vec::new();
    let mut ys = Vec::new();
    let mut seg = Vec::new();
    let mut windows = Vec::new();
    table
        .series
        .iter()
        .enumerate()
        .map(|(col, info)| {
            let mut out = SeriesTrend::default();
            let (mut sum, mut n) = (0.0, 0usize);
            xs.clear();
            ys.clear();
            seg.clear();
            windows.clear();
            for (i, p) in t.points.iter().enumerate() {
                let Some(v) = t.watch_value(i, col) else { continue };
                sum += v;
                n += 1;
                out.first.get_or_insert(v);
                out.last = Some(v);
                out.min = Some(out.min.map_or(v, |m: f64| m.min(v)));
                out.max = Some(out.max.map_or(v, |m: f64| m.max(v)));
                let steady = p.t >= s.steady_from - 1e-6 && p.t < s.until;
                if steady {
                    out.steady_max = Some(out.steady_max.map_or(v, |m: f64| m.max(v)));
                    let end = p.t + p.seconds;
                    xs.push(end);
                    ys.push(v);
                    seg.push(info.segment(end));
                    windows.push((p.t, p.seconds, v));
                }
            }
            out.samples = n;
            out.mean = (n > 0).then(|| sum / n as f64);
            let metric = format!("slope({})", info.watch);
            // bytes → bytes/s; 1 → 1/s; a rate's slope, bytes/s/s.
            let unit = format!("{}/s", info.unit);
            out.slope = slope_of(&metric, &unit, &xs, &ys, &seg, s);
            let drift_name = format!("drift({})", info.watch);
            out.drift = drift_of_values(&drift_name, &info.unit, &windows, s);
            out
        })
        .collect()
}

/// The slope of `ys` over `xs` within their segments, or why there is
/// none.
fn slope_of(metric: &str, unit: &str, xs: &[f64], ys: &[f64], seg: &[u32], s: &Settings) -> Slope {
    let mut out = Slope::over(metric, unit, xs, s);
    out.fill(
        theil_sen_segments(xs, ys, seg),
        s,
        format!(
            "too few values after the ramp and the warmup ({}; need {} within the spans between restarts)",
            xs.len(),
            super::trend::MIN_POINTS
        ),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::trends::TrendPoint;

    fn settings() -> Settings {
        Settings {
            steady_from: 10.0,
            until: 1e9,
            significance: 0.01,
            error_rate_floor: 1e-3,
        }
    }

    /// 200 one-second points; series 0 grows 1000 B/s, restarted at 100 s
    /// (back to 0 there); series 1 is flat with noise and has a value
    /// only every 10th point.
    fn input() -> (TrendInput, SeriesTable) {
        let mut table = SeriesTable::default();
        let labels = [("instance".to_string(), "a:1".to_string())];
        assert_eq!(table.column("rss", "http://a:1/metrics", &labels, "bytes"), Some(0));
        assert_eq!(table.column("fds", "http://a:1/metrics", &labels, "1"), Some(1));
        assert_eq!(table.column("rss", "http://a:1/metrics", &labels, "bytes"), Some(0));
        table.series[0].restarts.push(100.5);
        let mut t = TrendInput::default();
        let mut rng = 7u64;
        for i in 0..200 {
            let x = f64::from(i);
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let noise = (rng >> 33) as f64 / (1u64 << 31) as f64;
            let rss = 5e6 + 1000.0 * if i < 100 { x + 1.0 } else { x - 99.0 };
            let fds = (i % 10 == 0).then_some(100.0 + noise);
            t.push_watch(
                TrendPoint {
                    t: x,
                    seconds: 1.0,
                    ..TrendPoint::default()
                },
                [],
                &[Some(rss), fds],
            );
        }
        (t, table)
    }

    #[test]
    fn a_restart_splits_the_fit_and_flat_noise_is_not_a_trend() {
        let (t, table) = input();
        let trends = analyze(&t, &table, &settings());
        let rss = &trends[0];
        let slope = rss.slope.slope.unwrap();
        assert!((slope - 1000.0).abs() < 1.0, "{:#?}", rss.slope);
        assert!(rss.slope.significant);
        assert_eq!(rss.slope.metric, "slope(rss)");
        assert_eq!(rss.slope.unit, "bytes/s");
        assert_eq!(rss.samples, 200);
        assert_eq!(rss.steady_max, Some(5e6 + 1000.0 * 100.0));
        let fds = &trends[1];
        assert_eq!(fds.samples, 20);
        assert!(!fds.slope.significant, "{:#?}", fds.slope);
        assert_eq!(fds.slope.unit, "1/s");
        assert_eq!(crate::stats::trends_text::show("bytes/s/s", 2.0), "120.00B/s/min");
        // Fitted across the restart as one process, the same points
        // would say the memory does not grow at all.
        let (xs, ys): (Vec<f64>, Vec<f64>) = (10..200)
            .map(|i| {
                let x = f64::from(i);
                (x + 1.0, 5e6 + 1000.0 * if i < 100 { x + 1.0 } else { x - 99.0 })
            })
            .unzip();
        let whole = crate::stats::trend::theil_sen(&xs, &ys).unwrap();
        assert!(whole.slope < 600.0, "{whole:?}");
    }

    #[test]
    fn the_table_is_capped() {
        let mut table = SeriesTable::default();
        for i in 0..MAX_SERIES + 3 {
            let labels = [("pod".to_string(), format!("api-{i}"))];
            let col = table.column("mem", "prometheus", &labels, "bytes");
            assert_eq!(col.is_some(), i < MAX_SERIES);
        }
        assert_eq!(table.dropped, 3);
        assert_eq!(table.series[1].name(), "mem{pod=\"api-1\"}");
    }
}
