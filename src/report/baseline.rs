//! The report's `baseline` section: the run judged against `--baseline`
//! window by window while it went (`observe::baseline` fills it), so the
//! report says not only whether the run as a whole was worse (`soakd
//! compare`'s verdict, printed at the end) but when it became so.
//!
//! Its size is bounded like the timeline's: the most recent
//! [`MAX_WINDOWS`] windows are listed (a week of 5-minute windows is
//! 2,016; the default keeps three and a half days), and the per-metric
//! summary counts every window however long the run.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::stats::judge::{Method, Verdict};

/// Most windows the section lists (all workloads together).
pub const MAX_WINDOWS: usize = 1000;

/// The `baseline` section.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct BaselineSection {
    /// The baseline's report, as given.
    pub report: String,
    /// The interval log its intervals came from (`null`: none, the
    /// verdicts used tolerance and floors only).
    pub hdr_log: Option<String>,
    /// Length of a window (`--baseline-window`), seconds.
    pub window_seconds: f64,
    /// The smallest relative change that counted.
    pub tolerance: f64,
    /// The baseline had stages: each window was compared with the
    /// baseline at the same elapsed time, not with its whole run.
    pub staged: bool,
    /// Where the baseline's load differs from this run's (empty: the same
    /// load). When not empty the verdicts are information, not a
    /// regression verdict: no abort, no exit code 3 from them.
    pub load_differs: Vec<String>,
    /// Which baseline workload each of this run's workloads was compared
    /// with.
    pub pairs: Vec<Pair>,
    /// Per workload and metric: how many windows were judged which way,
    /// and when the regression started.
    pub metrics: Vec<MetricSummary>,
    /// The windows judged, oldest first (the most recent [`MAX_WINDOWS`]).
    #[serde(serialize_with = "crate::stats::one_line_each")]
    pub windows: Vec<Window>,
    /// Windows judged earlier than the first one listed.
    pub windows_dropped: u64,
}

/// A workload of this run and the baseline's it was compared with.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Pair {
    /// This run's workload.
    pub workload: String,
    /// The baseline's.
    pub baseline: String,
}

/// One workload's metric over the whole run.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct MetricSummary {
    /// The workload.
    pub workload: String,
    /// `p50`, `p99`, `p999`, `rps` or `error_rate`.
    pub metric: String,
    /// Windows judged better.
    pub better: u64,
    /// Windows judged the same.
    pub same: u64,
    /// Windows judged worse.
    pub worse: u64,
    /// Start of the first window judged worse (seconds since the start):
    /// when the regression started. `null` when none was.
    pub first_worse_at: Option<f64>,
    /// When the last window was worse: the start of the run of worse
    /// windows it ends (the regression held from then to the end).
    pub worse_since: Option<f64>,
    /// The last window's verdict.
    pub last: Option<Verdict>,
    /// The last window's change, (new − baseline) ÷ baseline.
    pub last_change: Option<f64>,
}

/// One window of one workload.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Window {
    /// Start, seconds since the run started.
    pub t: f64,
    /// Length in seconds.
    pub seconds: f64,
    /// The workload.
    pub workload: String,
    /// One row per metric.
    pub rows: Vec<Row>,
}

/// One metric of one window.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    /// `p50`, `p99`, `p999`, `rps` or `error_rate`.
    pub metric: String,
    /// The baseline's figure (seconds, requests/s or a 0–1 ratio).
    pub baseline: Option<f64>,
    /// The window's.
    pub new: Option<f64>,
    /// (new − baseline) ÷ baseline.
    pub change: Option<f64>,
    /// The verdict.
    pub verdict: Verdict,
    /// How it was reached (`soakd compare`'s methods).
    pub method: Method,
    /// The rank test's p-value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_value: Option<f64>,
}

/// One metric of one window, as kept until the report is written.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Judged {
    /// The baseline's figure.
    pub baseline: Option<f64>,
    /// The window's.
    pub new: Option<f64>,
    /// (new − baseline) ÷ baseline.
    pub change: Option<f64>,
    /// The verdict.
    pub verdict: Verdict,
    /// How.
    pub method: Method,
    /// The rank test's p-value.
    pub p_value: Option<f64>,
}

impl Default for Judged {
    fn default() -> Judged {
        Judged {
            baseline: None,
            new: None,
            change: None,
            verdict: Verdict::Same,
            method: Method::Tolerance,
            p_value: None,
        }
    }
}

/// One judged window of one workload.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WindowRow {
    /// Start, run time in seconds.
    pub t: f64,
    /// Length, seconds.
    pub seconds: f64,
    /// Which pair ([`Reference::pairs`] index).
    pub pair: u16,
    /// One per metric: p50, p99, p999, rps, error_rate.
    pub rows: [Judged; 5],
}

/// One metric of one workload over the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MetricState {
    /// Windows judged [better, same, worse].
    pub counts: [u64; 3],
    /// Start of the first window judged worse.
    pub first_worse_at: Option<f64>,
    /// Start of the run of worse windows the last one belongs to.
    pub worse_since: Option<f64>,
    /// The last window's judgement.
    pub last: Option<Judged>,
}

impl BaselineSection {
    /// The summary's lines about the baseline.
    pub fn summary(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "  baseline      {}: {} window(s) of {}{}",
            self.report,
            self.metrics
                .iter()
                .map(|m| m.better + m.same + m.worse)
                .max()
                .unwrap_or(0),
            humantime::format_duration(std::time::Duration::from_millis((self.window_seconds * 1e3) as u64)),
            if self.staged {
                ", each against the baseline at the same elapsed time"
            } else {
                ""
            }
        );
        if !self.load_differs.is_empty() {
            let _ = writeln!(
                s,
                "                the loads differ ({}): a comparison, not a regression verdict",
                self.load_differs.join("; ")
            );
        }
        let mut quiet = true;
        for m in &self.metrics {
            let Some(first) = m.first_worse_at else { continue };
            quiet = false;
            let held = match m.worse_since {
                Some(since) => format!(", worse since {} to the end", clock(since)),
                None => ", not worse at the end".into(),
            };
            let _ = writeln!(
                s,
                "                {} {}: regression started at {} ({} of {} windows worse{held}; last change {})",
                m.workload,
                m.metric,
                clock(first),
                m.worse,
                m.better + m.same + m.worse,
                m.last_change.map_or("-".into(), |c| format!("{:+.1}%", c * 100.0))
            );
        }
        if quiet {
            let better: Vec<String> = self
                .metrics
                .iter()
                .filter(|m| m.better > 0)
                .map(|m| format!("{} {} ({} windows)", m.workload, m.metric, m.better))
                .collect();
            let _ = writeln!(
                s,
                "                no window worse than the baseline{}",
                if better.is_empty() {
                    String::new()
                } else {
                    format!("; better: {}", better.join(", "))
                }
            );
        }
    }
}

/// Seconds since the start as `1m 30s` (the summary and the HTML page).
pub fn clock(secs: f64) -> String {
    humantime::format_duration(std::time::Duration::from_secs(secs.max(0.0).round() as u64)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_says_when_a_regression_started() {
        let mut b = BaselineSection {
            report: "base.json".into(),
            window_seconds: 60.0,
            metrics: vec![
                MetricSummary {
                    workload: "api".into(),
                    metric: "p99".into(),
                    same: 1,
                    worse: 9,
                    first_worse_at: Some(60.0),
                    worse_since: Some(60.0),
                    last: Some(Verdict::Worse),
                    last_change: Some(0.85),
                    ..MetricSummary::default()
                },
                MetricSummary {
                    workload: "api".into(),
                    metric: "p50".into(),
                    same: 10,
                    ..MetricSummary::default()
                },
            ],
            ..BaselineSection::default()
        };
        let mut s = String::new();
        b.summary(&mut s);
        assert!(s.contains("base.json: 10 window(s) of 1m"), "{s}");
        assert!(
            s.contains("api p99: regression started at 1m (9 of 10 windows worse, worse since 1m to the end; last change +85.0%)"),
            "{s}"
        );
        b.metrics.remove(0);
        b.load_differs = vec!["connections 100 → 200".into()];
        let mut s = String::new();
        b.summary(&mut s);
        assert!(
            s.contains("no window worse") && s.contains("not a regression verdict"),
            "{s}"
        );
        let json = serde_json::to_string_pretty(&b).unwrap();
        let back: BaselineSection = serde_json::from_str(&json).unwrap();
        assert_eq!(back.metrics.len(), 1);
    }
}
