//! The baseline metric families (`soakd_baseline_*`): an earlier run's
//! figures beside the live ones, and the verdict of each window against
//! them (`observe::baseline` computes them; `--baseline`). Every target
//! that pairs with a workload of the baseline has them from the first
//! scrape; without `--baseline` there are none.

use prometheus::proto::MetricType;

use super::{Family, Fill, value};

/// The quantile label values of `soakd_baseline_latency_seconds`, in
/// [`BaselineGauges::latency`] order.
pub const QUANTILES: [&str; 4] = ["0.5", "0.9", "0.99", "0.999"];

/// The `metric` label values of the verdict and change families, in
/// [`BaselineGauges::verdict`] order.
pub const METRICS: [&str; 5] = ["p50", "p99", "p999", "rps", "error_rate"];

/// One target's baseline gauges as of the last update.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BaselineGauges {
    /// The baseline's latency at [`QUANTILES`], seconds: over its whole
    /// run, or at the same elapsed time when it has stages (NaN when it
    /// measured none).
    pub latency: [f64; 4],
    /// The baseline's completed requests per second, the same way.
    pub rps: f64,
    /// The baseline's error ratio (the target's errors ÷ attempts).
    pub error_ratio: f64,
    /// The last window's verdict per [`METRICS`]: −1 better, 0 same, 1
    /// worse (0 until the first window is judged).
    pub verdict: [i8; 5],
    /// The last window's (new − baseline) ÷ baseline per [`METRICS`] (NaN
    /// until judged, or when the baseline is 0).
    pub change: [f64; 5],
    /// The baseline's load matches this run's (else a verdict is not a
    /// regression verdict: the alerts leave it out).
    pub load_matches: bool,
}

impl Default for BaselineGauges {
    fn default() -> BaselineGauges {
        BaselineGauges {
            latency: [f64::NAN; 4],
            rps: f64::NAN,
            error_ratio: f64::NAN,
            verdict: [0; 5],
            change: [f64::NAN; 5],
            load_matches: true,
        }
    }
}

/// The baseline families, after the others.
pub(super) const FAMILIES: &[Family] = &[
    Family {
        name: "soakd_baseline_latency_seconds",
        help: "The --baseline run's request latency at the quantile: over its whole run, or at the same elapsed time when it had stages.",
        kind: MetricType::GAUGE,
        labels: &["target", "quantile"],
        fill: Fill::Target(|x, out| {
            if let Some(b) = &x.w.baseline {
                for (q, v) in QUANTILES.iter().zip(b.latency) {
                    out.push(value(x.kind, &[("target", x.t), ("quantile", q)], v));
                }
            }
        }),
    },
    Family {
        name: "soakd_baseline_requests_per_second",
        help: "The --baseline run's completed requests per second (whole run, or at the same elapsed time when it had stages).",
        kind: MetricType::GAUGE,
        labels: &["target"],
        fill: Fill::Target(|x, out| {
            if let Some(b) = &x.w.baseline {
                out.push(value(x.kind, &[("target", x.t)], b.rps));
            }
        }),
    },
    Family {
        name: "soakd_baseline_error_ratio",
        help: "The --baseline run's error ratio: the target's errors / (completed + those errors), host limits left out.",
        kind: MetricType::GAUGE,
        labels: &["target"],
        fill: Fill::Target(|x, out| {
            if let Some(b) = &x.w.baseline {
                out.push(value(x.kind, &[("target", x.t)], b.error_ratio));
            }
        }),
    },
    Family {
        name: "soakd_baseline_verdict",
        help: "The last --baseline-window judged against the baseline with soakd compare's rules: -1 better, 0 same, 1 worse (0 until the first window is judged).",
        kind: MetricType::GAUGE,
        labels: &["target", "metric"],
        fill: Fill::Target(|x, out| {
            if let Some(b) = &x.w.baseline {
                for (m, v) in METRICS.iter().zip(b.verdict) {
                    out.push(value(x.kind, &[("target", x.t), ("metric", m)], f64::from(v)));
                }
            }
        }),
    },
    Family {
        name: "soakd_baseline_change_ratio",
        help: "The last --baseline-window's change against the baseline, (new - baseline) / baseline (NaN until judged, or when the baseline is 0).",
        kind: MetricType::GAUGE,
        labels: &["target", "metric"],
        fill: Fill::Target(|x, out| {
            if let Some(b) = &x.w.baseline {
                for (m, v) in METRICS.iter().zip(b.change) {
                    out.push(value(x.kind, &[("target", x.t), ("metric", m)], v));
                }
            }
        }),
    },
    Family {
        name: "soakd_baseline_load_matches",
        help: "1 when the baseline ran the same load as this run (connections, pace, pipeline, streams, protocol, stages); 0 when it did not, and its verdicts are not regression verdicts.",
        kind: MetricType::GAUGE,
        labels: &["target"],
        fill: Fill::Target(|x, out| {
            if let Some(b) = &x.w.baseline {
                out.push(value(x.kind, &[("target", x.t)], f64::from(u8::from(b.load_matches))));
            }
        }),
    },
];
