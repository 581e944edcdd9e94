//! The rules that call one figure of a run better, the same or worse than
//! the same figure of a baseline: what `soakd compare` applies to two
//! finished runs and what the live baseline comparison applies to each
//! window of a running soak (`observe::baseline`), so the two verdicts
//! cannot drift apart.
//!
//! A change counts only when it is larger than the tolerance relative to
//! the baseline and larger than an absolute floor (for latencies and the
//! error rate), and, when both sides have per-interval samples, when a
//! Mann–Whitney rank test on them ([`super::rank`]) finds the shift
//! significant in the same direction. A latency change is not judged when
//! soakd's own schedule lag at that quantile is half the change or more
//! (the load generator was late, not the server); without samples, a
//! quantile with fewer than [`MIN_TAIL`] samples beyond it is not judged
//! either. `verdict/mod.rs` explains why each rule exists; the defaults
//! (10%, 1 ms, 0.1 percentage point, p < 0.01) are in `plan/defaults.rs`.
//!
//! Everything here is plain numbers in, a verdict out: no report, no log,
//! no plan, so both layers that judge can use it.

use serde::{Deserialize, Serialize};

use super::rank::{mann_whitney, median};

/// Fewest samples per side for the rank test; with fewer, tolerance only.
pub const MIN_SAMPLES: usize = 5;

/// Samples a quantile needs beyond it (n × (1 − q)) to be judged on the
/// figures alone, without per-interval samples.
pub const MIN_TAIL: f64 = 10.0;

/// What kind of figure is judged: which way is worse, which floor applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A latency in seconds: up is worse; the latency floor applies.
    Latency,
    /// Requests per second: down is worse; no floor.
    Rate,
    /// An error rate (0–1): up is worse; the error-rate floor applies.
    ErrorRate,
}

/// How to judge.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Options {
    /// Smallest relative change that counts (0.1 = 10%).
    pub tolerance: f64,
    /// Smallest latency change that counts, seconds.
    pub min_latency_change: f64,
    /// Smallest error-rate change that counts (a 0–1 ratio).
    pub min_error_rate_change: f64,
    /// Significance level of the rank test.
    pub significance: f64,
}

/// A figure's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Changed for the better beyond noise and tolerance.
    Better,
    /// No change that counts.
    Same,
    /// Changed for the worse beyond noise and tolerance.
    Worse,
}

impl Verdict {
    /// The name the JSON uses.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Better => "better",
            Verdict::Same => "same",
            Verdict::Worse => "worse",
        }
    }

    /// −1 better, 0 same, 1 worse: the value of `soakd_baseline_verdict`.
    pub fn sign(self) -> i8 {
        match self {
            Verdict::Better => -1,
            Verdict::Same => 0,
            Verdict::Worse => 1,
        }
    }
}

/// How a figure was judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Tolerance and floor, plus the rank test on per-interval samples.
    RankTest,
    /// Tolerance and floor on the figures only.
    Tolerance,
    /// Not judged (always `same`): without samples, a quantile with fewer
    /// than [`MIN_TAIL`] samples beyond it is a handful of events (a max
    /// always is one), not a property of the server.
    TooFewSamples,
    /// Not judged (always `same`): soakd's own schedule lag at that
    /// quantile, on one of the sides, is at least half the change: the
    /// load generator was late (starved of CPU, or every connection
    /// busy), so the change is not the server's to answer for.
    GeneratorLag,
}

impl Method {
    /// The name the JSON uses.
    pub fn name(self) -> &'static str {
        match self {
            Method::RankTest => "rank_test",
            Method::Tolerance => "tolerance",
            Method::TooFewSamples => "too_few_samples",
            Method::GeneratorLag => "generator_lag",
        }
    }
}

/// What one figure is judged on.
#[derive(Clone, Copy, Debug)]
pub struct Evidence<'a> {
    /// The kind of figure.
    pub kind: Kind,
    /// The baseline's figure.
    pub baseline: f64,
    /// The new figure.
    pub new: f64,
    /// Per-interval values of the figure, (baseline, new), when both sides
    /// have them.
    pub samples: Option<(&'a [f64], &'a [f64])>,
    /// Samples beyond the quantile, the fewer of the two sides'
    /// (infinite for a figure that is no quantile).
    pub tail: f64,
    /// soakd's own schedule lag at the same quantile, the larger of the
    /// two sides' (latency figures measured from the due time only).
    pub lag: Option<f64>,
}

/// A figure's judgement.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Judged {
    /// The verdict.
    pub verdict: Verdict,
    /// How it was reached.
    pub method: Method,
    /// new − baseline.
    pub abs_change: f64,
    /// (new − baseline) ÷ baseline; `None` when the baseline is 0.
    pub rel_change: Option<f64>,
    /// The rank test's p-value (method `rank_test`).
    pub p_value: Option<f64>,
    /// Samples per side the rank test used, [baseline, new].
    pub samples: Option<[usize; 2]>,
}

/// Judges one figure (see the module doc for the rules).
pub fn judge(e: &Evidence<'_>, opts: &Options) -> Judged {
    let (b, n) = (e.baseline, e.new);
    let abs = n - b;
    let rel = (b != 0.0).then(|| abs / b);
    let floor = match e.kind {
        Kind::Latency => opts.min_latency_change,
        Kind::ErrorRate => opts.min_error_rate_change,
        Kind::Rate => 0.0,
    };
    let large = super::rank::beyond_tolerance(b, n, opts.tolerance, floor);
    let (mut method, p_value, counts, significant) = match e.samples {
        Some((a, c)) if a.len() >= MIN_SAMPLES && c.len() >= MIN_SAMPLES => {
            let p = mann_whitney(a, c);
            let shift = median(c) - median(a);
            let same_way = shift != 0.0 && (shift > 0.0) == (abs > 0.0);
            (
                Method::RankTest,
                Some(p),
                Some([a.len(), c.len()]),
                p < opts.significance && same_way,
            )
        }
        _ => (Method::Tolerance, None, None, true),
    };
    let up_is_worse = e.kind != Kind::Rate;
    let mut verdict = if !(large && significant) {
        Verdict::Same
    } else if (abs > 0.0) == up_is_worse {
        Verdict::Worse
    } else {
        Verdict::Better
    };
    if verdict != Verdict::Same {
        if e.lag.is_some_and(|l| l >= abs.abs() / 2.0) {
            (method, verdict) = (Method::GeneratorLag, Verdict::Same);
        } else if method == Method::Tolerance && e.tail < MIN_TAIL {
            (method, verdict) = (Method::TooFewSamples, Verdict::Same);
        }
    }
    Judged {
        verdict,
        method,
        abs_change: abs,
        rel_change: rel,
        p_value,
        samples: counts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPTS: Options = Options {
        tolerance: 0.1,
        min_latency_change: 0.001,
        min_error_rate_change: 0.001,
        significance: 0.01,
    };

    fn latency(b: f64, n: f64) -> Evidence<'static> {
        Evidence {
            kind: Kind::Latency,
            baseline: b,
            new: n,
            samples: None,
            tail: f64::INFINITY,
            lag: None,
        }
    }

    #[test]
    fn each_rule_in_turn() {
        // Under the floor, over it, faster.
        assert_eq!(judge(&latency(0.0002, 0.0003), &OPTS).verdict, Verdict::Same);
        assert_eq!(judge(&latency(0.0002, 0.0022), &OPTS).verdict, Verdict::Worse);
        assert_eq!(judge(&latency(0.0022, 0.0002), &OPTS).verdict, Verdict::Better);
        // The generator's own lag excuses the change.
        let lagged = judge(
            &Evidence {
                lag: Some(0.0015),
                ..latency(0.0002, 0.0022)
            },
            &OPTS,
        );
        assert_eq!((lagged.verdict, lagged.method), (Verdict::Same, Method::GeneratorLag));
        // A handful of samples beyond the quantile, no intervals.
        let few = judge(
            &Evidence {
                tail: 3.0,
                ..latency(0.0002, 0.0022)
            },
            &OPTS,
        );
        assert_eq!((few.verdict, few.method), (Verdict::Same, Method::TooFewSamples));
        // Requests/s: down is worse, no floor.
        let rate = Evidence {
            kind: Kind::Rate,
            ..latency(1000.0, 850.0)
        };
        assert_eq!(judge(&rate, &OPTS).verdict, Verdict::Worse);
        // The rank test needs a consistent shift the same way.
        let a: Vec<f64> = (0..8).map(|i| 0.002 + f64::from(i) * 1e-5).collect();
        let c: Vec<f64> = a.iter().map(|v| v + 0.002).collect();
        let ranked = judge(
            &Evidence {
                samples: Some((&a, &c)),
                ..latency(0.002, 0.004)
            },
            &OPTS,
        );
        assert_eq!((ranked.verdict, ranked.method), (Verdict::Worse, Method::RankTest));
        assert_eq!(ranked.samples, Some([8, 8]));
        let flat = judge(
            &Evidence {
                samples: Some((&a, &a)),
                ..latency(0.002, 0.004)
            },
            &OPTS,
        );
        assert_eq!((flat.verdict, flat.method), (Verdict::Same, Method::RankTest));
        assert_eq!(Verdict::Worse.sign() - Verdict::Better.sign(), 2);
    }
}
