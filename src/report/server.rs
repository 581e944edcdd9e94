//! The report's `server` section: each watched series of the server (its
//! memory, descriptors, GC time…) with its values' summary, its slope and
//! drift over the steady part, and its restarts; the sources and how
//! their reads went. And the verdict of a watch's threshold
//! (`slope(rss)<=1MiB/h`, `drift(heap)<=20%`, `max(rss)<=2GiB`), the same
//! at the end and live ([`judge`]): per series, failing when any series
//! fails, and saying which.

use serde::{Deserialize, Serialize};

use super::ThresholdResult;
use crate::plan::{Metric, Threshold};
use crate::stats::trends::{Settings, TrendInput};
use crate::stats::watch::{SeriesInfo, SeriesTable, SeriesTrend, SourceStats};

/// The report's `server` object.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerSection {
    /// Where the steady part began (after the ramp and the warmup), run
    /// seconds: what the slopes and drifts are over.
    pub steady_from_seconds: f64,
    /// The sources, with their reads and failures.
    pub sources: Vec<SourceStats>,
    /// Every series, in the timeline's column order.
    pub series: Vec<SeriesReport>,
    /// Series not kept (past the cap).
    #[serde(skip_serializing_if = "is_zero")]
    pub dropped_series: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One series: what it is and what it did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SeriesReport {
    /// The series.
    #[serde(flatten)]
    pub info: SeriesInfo,
    /// Its figures and trend.
    #[serde(flatten)]
    pub trend: SeriesTrend,
}

impl ServerSection {
    /// The section of a run's timeline (`t`, its columns `table`) and
    /// sources, judged by `s`; `None` for a run without a watch.
    pub fn build(t: &TrendInput, table: &SeriesTable, sources: &[SourceStats], s: &Settings) -> Option<ServerSection> {
        if table.is_empty() && sources.is_empty() {
            return None;
        }
        let trends = crate::stats::watch::analyze(t, table, s);
        Some(ServerSection {
            steady_from_seconds: s.steady_from,
            sources: sources.to_vec(),
            series: table
                .series
                .iter()
                .cloned()
                .zip(trends)
                .map(|(info, trend)| SeriesReport { info, trend })
                .collect(),
            dropped_series: table.dropped,
        })
    }
}

impl ServerSection {
    /// The text summary's `server` lines: each series' last value (and
    /// its first and largest), slope and drift, restarts; the sources'
    /// reads and failures.
    pub fn summary(&self, s: &mut String) {
        use crate::stats::trends_text::{show, show_value};
        use std::fmt::Write as _;
        let _ = writeln!(
            s,
            "  server        {} series from {} source(s), trends after {:.0} s{}",
            self.series.len(),
            self.sources.len(),
            self.steady_from_seconds,
            if self.dropped_series > 0 {
                format!(" ({} more not kept: past the cap)", self.dropped_series)
            } else {
                String::new()
            }
        );
        for x in &self.series {
            let (i, t) = (&x.info, &x.trend);
            let v = |v: Option<f64>| v.map_or("-".into(), |v| show_value(&i.unit, v));
            let slope = match (&t.slope.not_judged, t.slope.slope) {
                (Some(why), _) => format!("slope - ({why})"),
                (None, Some(v)) => format!(
                    "slope {} (95% {} .. {}), {}",
                    show(&t.slope.unit, v),
                    t.slope.low.map_or("-".into(), |v| show(&t.slope.unit, v)),
                    t.slope.high.map_or("-".into(), |v| show(&t.slope.unit, v)),
                    if t.slope.significant {
                        "significant"
                    } else {
                        "not significant"
                    }
                ),
                (None, None) => "slope -".into(),
            };
            let drift = match t.drift.drift {
                Some(d) if t.drift.not_judged.is_none() => format!(
                    "drift {}{}",
                    show("relative", d),
                    if t.drift.significant { " (significant)" } else { "" }
                ),
                _ => String::new(),
            };
            let _ = writeln!(
                s,
                "    {:<28} {} (first {}, max {})  {slope}  {drift}{}",
                i.name(),
                v(t.last),
                v(t.first),
                v(t.max),
                match i.restarts.len() {
                    0 => String::new(),
                    n => format!(
                        "  restarts {n} (at {})",
                        i.restarts
                            .iter()
                            .map(|r| format!("{r:.0} s"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                }
            );
        }
        for src in &self.sources {
            let failed: u64 = src.failures.values().sum();
            let _ = writeln!(
                s,
                "    source {}  {} reads, {failed} failed{}{}{}",
                src.source,
                src.reads,
                if failed > 0 {
                    format!(
                        " ({})",
                        src.failures
                            .iter()
                            .map(|(k, v)| format!("{k} {v}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                } else {
                    String::new()
                },
                if src.restarts > 0 {
                    format!(", {} restarts", src.restarts)
                } else {
                    String::new()
                },
                if src.stale { ", stale at the end" } else { "" }
            );
        }
    }
}

/// The verdict of a watch threshold `th` on the series `series` (each
/// series' info and trend): per series, the threshold's metric
/// (a significant slope or drift; the largest steady value); it fails
/// when any series fails, and the note names the first that does.
/// `measured` is the failing series' figure, else the largest one.
pub fn judge<'a>(th: &Threshold, series: impl Iterator<Item = (&'a SeriesInfo, &'a SeriesTrend)>) -> ThresholdResult {
    let mut r = ThresholdResult::of(th, None, None);
    let name = th.watch.as_ref().map_or("", |w| w.name.as_str());
    let mut judged = 0;
    let mut failed: Option<(String, f64)> = None;
    let mut worst: Option<f64> = None;
    let mut why_not = None;
    for (info, t) in series.filter(|(i, _)| i.watch == name) {
        r.unit.get_or_insert_with(|| match th.metric {
            Metric::WatchSlope => format!("{}/s", info.unit),
            Metric::WatchDrift => "relative".into(),
            _ => info.unit.clone(),
        });
        let (value, significant, not_judged) = match th.metric {
            Metric::WatchSlope => (t.slope.slope, t.slope.significant, t.slope.not_judged.clone()),
            Metric::WatchDrift => (t.drift.drift, t.drift.significant, t.drift.not_judged.clone()),
            _ => (
                t.steady_max,
                true,
                Some("no value after the ramp and the warmup".into()),
            ),
        };
        let Some(v) = value else {
            why_not = not_judged;
            continue;
        };
        judged += 1;
        worst = Some(worst.map_or(v, |w: f64| w.max(v)));
        if significant && !th.op.holds(v, th.limit) && failed.is_none() {
            failed = Some((info.name(), v));
        }
    }
    r.pass = failed.is_none() && judged > 0;
    r.measured = failed.as_ref().map(|(_, v)| *v).or(worst);
    r.note = Some(match (&failed, judged) {
        (Some((series, _)), _) => format!("failed by {series}"),
        (None, 0) => format!(
            "not judged: {}",
            why_not.unwrap_or_else(|| format!("no series of {name} was read"))
        ),
        (None, n) if th.metric == Metric::WatchMax => format!("{n} series within it"),
        (None, n) => format!("{n} series: none significantly past it (noise does not fail a run)"),
    });
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::trends::{Drift, Slope};

    fn series(labels: &str, slope: f64, significant: bool, max: f64) -> (SeriesInfo, SeriesTrend) {
        (
            SeriesInfo {
                watch: "rss".into(),
                source: "prometheus".into(),
                labels: [("pod".to_string(), labels.to_string())].into_iter().collect(),
                unit: "bytes".into(),
                restarts: Vec::new(),
            },
            SeriesTrend {
                steady_max: Some(max),
                slope: Slope {
                    slope: Some(slope),
                    significant,
                    ..Slope::default()
                },
                drift: Drift::default(),
                ..SeriesTrend::default()
            },
        )
    }

    #[test]
    fn a_query_fails_if_any_series_fails_and_says_which() {
        let th = Threshold::parse("--threshold", "slope(rss)<=1MiB/h").unwrap();
        let limit = th.limit;
        let all = [
            series("api-1", limit / 2.0, true, 1e6),
            series("api-2", limit * 10.0, true, 2e6),
            series("api-3", limit * 20.0, false, 3e6),
        ];
        let r = judge(&th, all.iter().map(|(i, t)| (i, t)));
        assert!(!r.pass);
        assert_eq!(r.note.as_deref(), Some("failed by rss{pod=\"api-2\"}"));
        assert_eq!(r.measured, Some(limit * 10.0));
        // Only the noisy one past it: not significant, passes.
        let r = judge(&th, [&all[0], &all[2]].into_iter().map(|(i, t)| (i, t)));
        assert!(r.pass, "{r:?}");
        let max = Threshold::parse("--threshold", "max(rss)<=2.5MB").err();
        assert!(max.is_some(), "sizes are KiB, MiB, GiB");
        let max = Threshold::parse("--threshold", "max(rss)<=2500000").unwrap();
        let r = judge(&max, all.iter().map(|(i, t)| (i, t)));
        assert!(!r.pass);
        assert_eq!(r.note.as_deref(), Some("failed by rss{pod=\"api-3\"}"));
        // A watch with no series read is not judged, and fails.
        let none = Threshold::parse("--threshold", "slope(fds)<=1/h").unwrap();
        let r = judge(&none, all.iter().map(|(i, t)| (i, t)));
        assert!(!r.pass && r.note.as_deref().unwrap().starts_with("not judged"), "{r:?}");
    }
}
