//! The report's `trends` section: where the run was going once it was
//! steady, computed from the timeline's points.
//!
//! Two kinds of figure, both over the points after the ramp and the
//! warmup (the "steady" part) and before the stop:
//!
//! - slopes (Theil–Sen with Mann–Kendall, [`super::trend`]) of the
//!   server's memory and descriptors (`--target-pid`, summed over its
//!   processes) and of soakd's own memory, in bytes (or descriptors) per
//!   second;
//! - drifts of the latency median and p99 and of the error rate: the
//!   relative change from the first steady window to the last one of the
//!   same length (a quarter of the steady part each, so they never
//!   overlap), tested with the same rank test as `soakd compare` on the
//!   points' own values.
//!
//! Each figure says whether it is significant (p below the level given),
//! and one that cannot be computed says why instead. It reads only the
//! points' JSON form, so a merged report or one read back from a file
//! gives the same trends, whatever the points' spacing.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::rank::{mann_whitney, median};
use super::timeline::{PointJson, TimelineJson};
use super::trend::{MIN_POINTS, theil_sen};

/// Fewest points in each drift window.
pub const MIN_WINDOW_POINTS: usize = 5;

/// What the analysis needs from the plan and the run.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// Run time at which the steady part begins (the ramp, then the
    /// warmup), seconds.
    pub steady_from: f64,
    /// Run time at which the stop began, seconds: points after it measure
    /// the drain.
    pub until: f64,
    /// Significance level (p below it is significant).
    pub significance: f64,
    /// Error rates below this count as this much when a relative change is
    /// taken (from 0 errors any change would be infinite).
    pub error_rate_floor: f64,
}

/// A slope over the steady part.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Slope {
    /// The threshold metric it is (`target_rss_slope`, …).
    pub metric: String,
    /// Unit of `slope`, `low` and `high` (`bytes/s`, `1/s`).
    pub unit: String,
    /// Theil–Sen slope; `null` when not computed (see `not_judged`).
    pub slope: Option<f64>,
    /// Lower bound of its 95% confidence interval.
    pub low: Option<f64>,
    /// Upper bound of its 95% confidence interval.
    pub high: Option<f64>,
    /// Two-sided Mann–Kendall p-value.
    pub p_value: Option<f64>,
    /// `p_value` below the significance level.
    pub significant: bool,
    /// Points used.
    pub points: usize,
    /// The span fitted, run seconds.
    pub from_seconds: f64,
    /// End of the span fitted, run seconds.
    pub to_seconds: f64,
    /// Why there is no slope (no `--target-pid`, too few points).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_judged: Option<String>,
}

/// A change from the first steady window to the last.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Drift {
    /// The threshold metric it is (`p99_drift`, …).
    pub metric: String,
    /// Unit of `first` and `last` (`seconds`, `ratio`); `drift` is a
    /// relative change (0.2 = +20%).
    pub unit: String,
    /// The first window, run seconds [from, to).
    pub first_window: [f64; 2],
    /// The last window, run seconds [from, to).
    pub last_window: [f64; 2],
    /// The first window's value (median of its points' values; the error
    /// rate over its requests).
    pub first: Option<f64>,
    /// The last window's value.
    pub last: Option<f64>,
    /// (last − first) / first.
    pub drift: Option<f64>,
    /// Mann–Whitney p-value of the two windows' point values.
    pub p_value: Option<f64>,
    /// `p_value` below the significance level.
    pub significant: bool,
    /// Why there is no drift (too few points).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_judged: Option<String>,
}

/// The report's `trends` object (empty in a report from a soakd before
/// it).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Trends {
    /// Where the steady part began (after the ramp and the warmup), run
    /// seconds.
    pub steady_from_seconds: f64,
    /// The significance level used.
    pub significance: f64,
    /// Slopes: target RSS, target descriptors, soakd's RSS.
    pub slopes: Vec<Slope>,
    /// Drifts: p50, p99, error rate.
    pub drifts: Vec<Drift>,
}

/// A trend figure as a threshold sees it.
#[derive(Clone, Debug, PartialEq)]
pub enum Judged {
    /// The value (a slope per second or a relative change) and whether it
    /// is significant.
    Value(f64, bool),
    /// Cannot be judged, and why.
    NotYet(String),
}

impl Trends {
    /// The figure of a trend threshold metric; `None` for a name that is
    /// not one.
    pub fn judged(&self, metric: &str) -> Option<Judged> {
        let one = |value: Option<f64>, significant: bool, why: &Option<String>| match value {
            Some(v) => Judged::Value(v, significant),
            None => Judged::NotYet(why.clone().unwrap_or_else(|| "not computed".into())),
        };
        if let Some(s) = self.slopes.iter().find(|s| s.metric == metric) {
            return Some(one(s.slope, s.significant, &s.not_judged));
        }
        self.drifts
            .iter()
            .find(|d| d.metric == metric)
            .map(|d| one(d.drift, d.significant, &d.not_judged))
    }
}

/// A trend value of `unit` (`bytes/s`, `1/s`, `relative`) in a readable
/// unit: `2.00MiB/min`, `-35.00KiB/h`, `12.0/h`, `+18.5%`.
pub fn show(unit: &str, v: f64) -> String {
    match unit {
        "bytes/s" => {
            let (per, secs) = if v.abs() * 60.0 >= 1048576.0 {
                ("min", 60.0)
            } else {
                ("h", 3600.0)
            };
            let x = v * secs;
            let (size, bytes) = [("GiB", 1073741824.0), ("MiB", 1048576.0), ("KiB", 1024.0)]
                .into_iter()
                .find(|(_, b)| x.abs() >= *b)
                .unwrap_or(("B", 1.0));
            format!("{:.2}{size}/{per}", x / bytes)
        }
        "1/s" if v.abs() * 60.0 >= 10.0 => format!("{:.1}/min", v * 60.0),
        "1/s" => format!("{:.1}/h", v * 3600.0),
        _ => format!("{:+.1}%", v * 100.0),
    }
}

/// Seconds as the summary writes latencies.
fn secs(v: f64) -> String {
    if v < 1e-3 {
        format!("{:.0}µs", v * 1e6)
    } else if v < 1.0 {
        format!("{:.2}ms", v * 1e3)
    } else {
        format!("{v:.2}s")
    }
}

impl Trends {
    /// The text summary's `trends` lines: slope or drift, its interval or
    /// windows, p-value, significant or not (nothing without trends).
    pub fn summary(&self) -> String {
        let mut s = String::new();
        if self.slopes.is_empty() && self.drifts.is_empty() {
            return s;
        }
        let _ = writeln!(
            s,
            "  trends (after {:.0} s of ramp and warmup)",
            self.steady_from_seconds
        );
        let sig = |p: Option<f64>, yes: bool| match p {
            Some(p) if yes => format!("p={p:.2e}, significant"),
            Some(p) => format!("p={p:.2}, not significant"),
            None => String::new(),
        };
        for x in &self.slopes {
            let v = |v: Option<f64>| v.map_or("-".into(), |v| show(&x.unit, v));
            let _ = match &x.not_judged {
                Some(why) => writeln!(s, "    {:<20} - ({why})", x.metric),
                None => writeln!(
                    s,
                    "    {:<20} {} (95% {} .. {}) over {} points, {}",
                    x.metric,
                    v(x.slope),
                    v(x.low),
                    v(x.high),
                    x.points,
                    sig(x.p_value, x.significant)
                ),
            };
        }
        for d in &self.drifts {
            let v = |v: Option<f64>| match v {
                None => "-".to_string(),
                Some(v) if d.unit == "seconds" => secs(v),
                Some(v) => format!("{:.3}%", v * 100.0),
            };
            let _ = match &d.not_judged {
                Some(why) => writeln!(s, "    {:<20} - ({why})", d.metric),
                None => writeln!(
                    s,
                    "    {:<20} {} ({} in {:.0}-{:.0} s → {} in {:.0}-{:.0} s), {}",
                    d.metric,
                    d.drift.map_or("-".into(), |x| show("relative", x)),
                    v(d.first),
                    d.first_window[0],
                    d.first_window[1],
                    v(d.last),
                    d.last_window[0],
                    d.last_window[1],
                    sig(d.p_value, d.significant)
                ),
            };
        }
        s
    }
}

/// The points of the steady part: started at or after `from`, ended by
/// `until` (the last, partial point at the stop is kept when it started
/// before it).
fn steady<'a>(t: &'a TimelineJson, s: &Settings) -> Vec<&'a PointJson> {
    t.points
        .iter()
        .filter(|p| p.t >= s.steady_from - 1e-6 && p.t < s.until)
        .collect()
}

/// Computes the trends of a timeline.
pub fn analyze(t: &TimelineJson, s: &Settings) -> Trends {
    let pts = steady(t, s);
    // The most PIDs any point sampled: points where one was missing (it
    // exited, /proc unreadable) would make the sum jump.
    let pids = pts.iter().map(|p| p.targets.len()).max().unwrap_or(0);
    let full: Vec<&PointJson> = pts
        .iter()
        .copied()
        .filter(|p| pids > 0 && p.targets.len() == pids)
        .collect();
    let fds: Vec<&PointJson> = full
        .iter()
        .copied()
        .filter(|p| p.targets.iter().all(|t| t.open_fds.is_some()))
        .collect();
    let no_pid = (pids == 0).then(|| "no --target-pid was sampled in the steady part".to_string());
    let slopes = vec![
        slope("target_rss_slope", "bytes/s", &full, no_pid.clone(), s, |p| {
            Some(p.targets.iter().map(|t| t.rss_bytes as f64).sum())
        }),
        slope(
            "target_fds_slope",
            "1/s",
            &fds,
            no_pid.or_else(|| {
                fds.is_empty()
                    .then(|| "/proc/PID/fd of the target is not readable".into())
            }),
            s,
            |p| Some(p.targets.iter().filter_map(|t| t.open_fds).sum::<u64>() as f64),
        ),
        slope("soakd_rss_slope", "bytes/s", &pts, None, s, |p| {
            p.soakd_rss_bytes.map(|b| b as f64)
        }),
    ];
    let drifts = vec![
        drift("p50_drift", "seconds", &pts, s, Window::Median(|p| p.p50)),
        drift("p99_drift", "seconds", &pts, s, Window::Median(|p| p.p99)),
        drift("error_rate_drift", "ratio", &pts, s, Window::ErrorRate),
    ];
    Trends {
        steady_from_seconds: s.steady_from,
        significance: s.significance,
        slopes,
        drifts,
    }
}

fn slope(
    metric: &str,
    unit: &str,
    pts: &[&PointJson],
    why: Option<String>,
    s: &Settings,
    y: impl Fn(&PointJson) -> Option<f64>,
) -> Slope {
    let (xs, ys): (Vec<f64>, Vec<f64>) = pts.iter().filter_map(|p| Some((p.t + p.seconds, y(p)?))).unzip();
    let mut out = Slope {
        metric: metric.into(),
        unit: unit.into(),
        points: xs.len(),
        from_seconds: xs.first().copied().unwrap_or(s.steady_from),
        to_seconds: xs.last().copied().unwrap_or(s.steady_from),
        ..Slope::default()
    };
    if let Some(why) = why {
        out.not_judged = Some(why);
        return out;
    }
    match theil_sen(&xs, &ys) {
        Some(f) => {
            out.slope = Some(f.slope);
            out.low = Some(f.low);
            out.high = Some(f.high);
            out.p_value = Some(f.p);
            out.significant = f.p < s.significance;
        }
        None => {
            out.not_judged = Some(format!(
                "too few points after the ramp and the warmup ({}; need {MIN_POINTS})",
                xs.len()
            ));
        }
    }
    out
}

/// How a window's value is taken.
enum Window {
    /// The median of a per-point value.
    Median(fn(&PointJson) -> Option<f64>),
    /// Errors over attempts (completed + errors).
    ErrorRate,
}

fn errors_of(p: &PointJson) -> (f64, f64) {
    let errors: u64 = p.errors.values().sum();
    (errors as f64, (p.completed + errors) as f64)
}

fn drift(metric: &str, unit: &str, pts: &[&PointJson], s: &Settings, how: Window) -> Drift {
    let from = pts.first().map_or(s.steady_from, |p| p.t);
    let end = pts.last().map_or(from, |p| (p.t + p.seconds).min(s.until.max(p.t)));
    let w = (end - from) / 4.0;
    let first: Vec<&PointJson> = pts.iter().copied().filter(|p| p.t < from + w).collect();
    let last: Vec<&PointJson> = pts.iter().copied().filter(|p| p.t + p.seconds > end - w).collect();
    let mut out = Drift {
        metric: metric.into(),
        unit: unit.into(),
        first_window: [from, from + w],
        last_window: [end - w, end],
        ..Drift::default()
    };
    let values = |ps: &[&PointJson]| -> Vec<f64> {
        ps.iter()
            .filter_map(|p| match how {
                Window::Median(f) => f(p),
                Window::ErrorRate => {
                    let (e, n) = errors_of(p);
                    (n > 0.0).then(|| e / n)
                }
            })
            .collect()
    };
    let (a, b) = (values(&first), values(&last));
    if a.len() < MIN_WINDOW_POINTS || b.len() < MIN_WINDOW_POINTS {
        out.not_judged = Some(format!(
            "too few points after the ramp and the warmup ({} and {} in the first and last quarter; need {MIN_WINDOW_POINTS} each)",
            a.len(),
            b.len()
        ));
        return out;
    }
    let (va, vb, base) = match how {
        Window::Median(_) => {
            let (va, vb) = (median(&a), median(&b));
            (va, vb, va)
        }
        Window::ErrorRate => {
            let rate = |ps: &[&PointJson]| {
                let (e, n) = ps.iter().fold((0.0, 0.0), |(e, n), p| {
                    let (pe, pn) = errors_of(p);
                    (e + pe, n + pn)
                });
                e / n
            };
            let (va, vb) = (rate(&first), rate(&last));
            (va, vb, va.max(s.error_rate_floor))
        }
    };
    out.first = Some(va);
    out.last = Some(vb);
    out.drift = Some(if base > 0.0 { (vb - va) / base } else { 0.0 });
    let p = mann_whitney(&a, &b);
    out.p_value = Some(p);
    out.significant = p < s.significance;
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::ProcSample;

    fn settings() -> Settings {
        Settings {
            steady_from: 10.0,
            until: 200.0,
            significance: 0.01,
            error_rate_floor: 0.001,
        }
    }

    /// 200 one-second points: target RSS growing `leak` bytes/s, p99
    /// `p99(t)`, one error in `err_every` requests of 100.
    fn timeline(leak: f64, p99: impl Fn(f64) -> f64, seed: u64) -> TimelineJson {
        let mut rng = fastrand::Rng::with_seed(seed);
        let points = (0..200)
            .map(|i| {
                let t = f64::from(i);
                let jitter = 0.9 + 0.2 * rng.f64();
                PointJson {
                    t,
                    seconds: 1.0,
                    completed: 100,
                    p50: Some(0.001 * jitter),
                    p99: Some(p99(t) * jitter),
                    targets: vec![ProcSample {
                        pid: 1,
                        rss_bytes: (50e6 + leak * t + 300e3 * rng.f64()) as u64,
                        cpu_ms: i as u64 * 10,
                        open_fds: Some(100 + rng.u64(0..3)),
                    }],
                    soakd_rss_bytes: Some(20_000_000 + rng.u64(0..100_000)),
                    ..PointJson::default()
                }
            })
            .collect();
        TimelineJson {
            points,
            ..TimelineJson::default()
        }
    }

    #[test]
    fn a_leak_and_a_creep_are_found_and_noise_is_not() {
        let leak = 2.0 * 1024.0 * 1024.0 / 60.0;
        let tr = analyze(&timeline(leak, |t| 0.010 * (1.0 + t / 100.0), 1), &settings());
        let Some(Judged::Value(v, true)) = tr.judged("target_rss_slope") else {
            panic!("{tr:?}")
        };
        assert!((v / leak - 1.0).abs() < 0.05, "{v} vs {leak}");
        assert_eq!(tr.slopes[0].points, 190);
        assert_eq!(tr.slopes[0].from_seconds, 11.0);
        // p99 from ~13.5 ms in [10, 57.5) to ~28.4 ms in [152.5, 200).
        let Some(Judged::Value(d, true)) = tr.judged("p99_drift") else {
            panic!("{tr:?}")
        };
        assert!((0.9..1.3).contains(&d), "{d}");
        assert_eq!(tr.drifts[1].first_window, [10.0, 57.5]);
        assert!(
            matches!(tr.judged("p50_drift"), Some(Judged::Value(_, false))),
            "{tr:?}"
        );
        assert!(
            matches!(tr.judged("soakd_rss_slope"), Some(Judged::Value(_, false))),
            "{tr:?}"
        );
        assert!(
            matches!(tr.judged("target_fds_slope"), Some(Judged::Value(_, false))),
            "{tr:?}"
        );
        // No errors at all: no drift, not significant.
        assert_eq!(tr.judged("error_rate_drift"), Some(Judged::Value(0.0, false)));
        assert_eq!(tr.judged("p99"), None);
        let text = tr.summary();
        assert!(
            text.contains("target_rss_slope     2.0") && text.contains("MiB/min"),
            "{text}"
        );
        assert!(text.contains("p99_drift") && text.contains("10-58 s"), "{text}");
        assert_eq!(Trends::default().summary(), "");
    }

    #[test]
    fn steady_runs_give_no_false_positive() {
        // At p < 0.01 about 1% of the figures of steady runs come out
        // significant by chance; none is also over a limit a soak would
        // set (10 MiB/h, 10 descriptors an hour, a 10% drift), which is
        // what fails a threshold.
        let (mut significant, mut failing) = (0, 0);
        for seed in 0..200 {
            let tr = analyze(&timeline(0.0, |_| 0.010, seed), &settings());
            for s in &tr.slopes {
                let limit = if s.unit == "1/s" {
                    10.0 / 3600.0
                } else {
                    10.0 * 1024.0 * 1024.0 / 3600.0
                };
                significant += usize::from(s.significant);
                failing += usize::from(s.significant && s.slope.unwrap() > limit);
            }
            for d in &tr.drifts {
                significant += usize::from(d.significant);
                failing += usize::from(d.significant && d.drift.unwrap() > 0.10);
            }
        }
        assert!(significant < 24, "{significant} significant of 1,200 figures");
        assert_eq!(failing, 0);
    }

    #[test]
    fn what_cannot_be_judged_says_why() {
        let mut t = timeline(0.0, |_| 0.01, 3);
        for p in &mut t.points {
            p.targets.clear();
        }
        let tr = analyze(&t, &settings());
        let Some(Judged::NotYet(why)) = tr.judged("target_rss_slope") else {
            panic!("{tr:?}")
        };
        assert!(why.contains("--target-pid"), "{why}");
        t.points.truncate(16);
        let tr = analyze(&t, &settings());
        let Some(Judged::NotYet(why)) = tr.judged("soakd_rss_slope") else {
            panic!("{tr:?}")
        };
        assert!(why.contains("too few points") && why.contains("(6; need 10)"), "{why}");
        assert!(matches!(tr.judged("p99_drift"), Some(Judged::NotYet(_))));
        // Read back from JSON, the same.
        let back: Trends = serde_json::from_str(&serde_json::to_string(&tr).unwrap()).unwrap();
        assert_eq!(back, tr);
    }

    #[test]
    fn merged_points_of_uneven_length_still_give_the_slope() {
        // The first half at 1 s, the second merged into 4 s points.
        let leak = 10_000.0;
        let t = timeline(leak, |_| 0.01, 4);
        let mut points: Vec<PointJson> = t.points[..100].to_vec();
        for c in t.points[100..].chunks(4) {
            let mut p = c[3].clone();
            p.t = c[0].t;
            p.seconds = 4.0;
            points.push(p);
        }
        let tr = analyze(&TimelineJson { points, ..t }, &settings());
        let Some(Judged::Value(v, true)) = tr.judged("target_rss_slope") else {
            panic!("{tr:?}")
        };
        assert!((v / leak - 1.0).abs() < 0.05, "{v}");
    }

    #[test]
    fn error_rate_drift_from_zero_uses_the_floor() {
        let mut t = timeline(0.0, |_| 0.01, 5);
        for p in &mut t.points[150..] {
            p.errors.insert("reset".into(), 2);
        }
        let tr = analyze(&t, &settings());
        let Some(Judged::Value(d, true)) = tr.judged("error_rate_drift") else {
            panic!("{tr:?}")
        };
        // 0 → 2/102 ≈ 1.96%, relative to the 0.1% floor: +1,860%.
        assert!((d - 0.0196 / 0.001).abs() < 0.5, "{d}");
    }
}
