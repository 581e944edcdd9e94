//! Per-interval samples from an HDR interval log, and the rank test that
//! compares two sets of them.
//!
//! A run's report gives one p99 per workload: one number, which cannot say
//! whether another run's p99 differs by more than chance. The interval log
//! gives one histogram per workload per interval, so each quantile comes
//! as a series of samples, one per interval; two runs' series can be
//! tested against each other. Mann–Whitney's U is used because it assumes
//! nothing about the samples' distribution (latency quantiles are skewed
//! and spiky) and a single extreme interval moves it by one rank only.

use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};

use crate::Error;
pub(crate) use crate::observe::tag_of;

/// What one interval of one workload measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interval {
    /// Length in seconds.
    pub seconds: f64,
    /// Latency quantiles in seconds: p50, p90, p99, p99.9, max.
    pub quantiles: [f64; 5],
    /// Responses per second.
    pub rps: f64,
}

/// The quantiles [`Interval::quantiles`] holds.
pub const QUANTILES: [f64; 4] = [0.5, 0.9, 0.99, 0.999];

/// Samples per log tag (the workload name, with `,` and spaces as `_`).
pub type Samples = BTreeMap<String, Vec<Interval>>;

/// Reads an interval log written by `--hdr-log`. Intervals with no
/// response and a last interval shorter than half the usual length (the
/// partial one at the stop) are left out: they measure the edges of the
/// run, not the server.
pub fn read_log(path: &Path, what: &str) -> Result<Samples, Error> {
    let bytes = std::fs::read(path).map_err(|e| {
        Error::Usage(format!(
            "{what} {}: cannot read it ({e}); give the file `soakd run --hdr-log` wrote",
            path.display()
        ))
    })?;
    let bad = |why: String| {
        Error::Usage(format!(
            "{what} {}: not an HdrHistogram interval log ({why}); give the file `soakd run --hdr-log` wrote",
            path.display()
        ))
    };
    let mut out: Samples = BTreeMap::new();
    let mut de = Deserializer::new();
    for entry in IntervalLogIterator::new(&bytes) {
        let entry = entry.map_err(|e| bad(format!("{e:?}")))?;
        let LogEntry::Interval(h) = entry else { continue };
        let raw = base64::engine::general_purpose::STANDARD
            .decode(h.encoded_histogram())
            .map_err(|e| bad(e.to_string()))?;
        let hist: Histogram<u64> = de.deserialize(&mut raw.as_slice()).map_err(|e| bad(format!("{e:?}")))?;
        let seconds = h.duration().as_secs_f64();
        if hist.is_empty() || seconds <= 0.0 {
            continue;
        }
        let q = |q: f64| hist.value_at_quantile(q) as f64 / 1e6;
        out.entry(h.tag().map_or(String::new(), |t| t.as_str().to_string()))
            .or_default()
            .push(Interval {
                seconds,
                quantiles: [q(0.5), q(0.9), q(0.99), q(0.999), hist.max() as f64 / 1e6],
                rps: hist.len() as f64 / seconds,
            });
    }
    for v in out.values_mut() {
        let mut lengths: Vec<f64> = v.iter().map(|i| i.seconds).collect();
        lengths.sort_by(f64::total_cmp);
        let usual = lengths[lengths.len() / 2];
        if v.len() > 1 && v.last().is_some_and(|i| i.seconds < usual / 2.0) {
            v.pop();
        }
    }
    Ok(out)
}

/// Two-sided p-value of the Mann–Whitney U test of `a` against `b`
/// (normal approximation with a tie correction and a continuity
/// correction; fine from about 5 samples a side, which is all it is used
/// for).
pub fn mann_whitney(a: &[f64], b: &[f64]) -> f64 {
    let (n1, n2) = (a.len() as f64, b.len() as f64);
    if a.is_empty() || b.is_empty() {
        return 1.0;
    }
    let mut all: Vec<(f64, bool)> = a
        .iter()
        .map(|&v| (v, true))
        .chain(b.iter().map(|&v| (v, false)))
        .collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    // Average ranks over ties; sum the tie-group sizes' t³ − t.
    let mut rank_a = 0.0;
    let mut ties = 0.0;
    let mut i = 0;
    while i < all.len() {
        let mut j = i;
        while j + 1 < all.len() && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0 + 1.0;
        let t = (j - i + 1) as f64;
        ties += t * t * t - t;
        rank_a += all[i..=j].iter().filter(|(_, in_a)| *in_a).count() as f64 * avg;
        i = j + 1;
    }
    let u = rank_a - n1 * (n1 + 1.0) / 2.0;
    let mean = n1 * n2 / 2.0;
    let n = n1 + n2;
    let var = n1 * n2 / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)));
    if var <= 0.0 {
        return 1.0;
    }
    let z = ((u - mean).abs() - 0.5).max(0.0) / var.sqrt();
    (2.0 * normal_upper_tail(z)).min(1.0)
}

/// P(Z > z) for a standard normal Z, via erfc (Numerical Recipes'
/// Chebyshev fit, relative error below 1.2e-7).
fn normal_upper_tail(z: f64) -> f64 {
    let x = z / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.5 * x.abs());
    let y = t
        * (-x * x - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    let erfc = if x >= 0.0 { y } else { 2.0 - y };
    erfc / 2.0
}

/// The median of `v` (not empty).
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let m = s.len() / 2;
    if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_tail() {
        assert!((normal_upper_tail(0.0) - 0.5).abs() < 1e-7);
        assert!((normal_upper_tail(1.959_964) - 0.025).abs() < 1e-6);
        assert!((normal_upper_tail(-1.959_964) - 0.975).abs() < 1e-6);
        assert!((normal_upper_tail(3.090_232) - 0.001).abs() < 1e-7);
    }

    #[test]
    fn rank_test_separates_shifted_samples_and_not_identical_ones() {
        let a: Vec<f64> = (0..12).map(|i| 1.0 + (i % 5) as f64 * 0.1).collect();
        assert!(mann_whitney(&a, &a) > 0.9, "identical samples");
        let b: Vec<f64> = a.iter().map(|v| v + 2.0).collect();
        let p = mann_whitney(&a, &b);
        assert!(p < 1e-4, "fully separated samples: p = {p}");
        // One wild interval moves U by one rank, not the verdict.
        let mut c = a.clone();
        c[3] = 1000.0;
        assert!(mann_whitney(&a, &c) > 0.3);
        // Worked by hand: U = 0, mean 12.5, variance 25/12 × 11, z =
        // (12.5 − 0.5) / 4.787, p = erfc(z / √2) = 0.0121858 (as SciPy's
        // mannwhitneyu(..., method="asymptotic") gives).
        let p = mann_whitney(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]);
        assert!((p - 0.012_185_8).abs() < 1e-6, "{p}");
        assert_eq!(mann_whitney(&[], &a), 1.0);
        assert_eq!(mann_whitney(&[1.0; 6], &[1.0; 6]), 1.0, "all tied: no evidence");
    }

    #[test]
    fn a_log_reads_back_as_samples_per_tag() {
        use hdrhistogram::serialization::V2DeflateSerializer;
        use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
        use std::time::Duration;
        let mut bytes = Vec::new();
        let mut ser = V2DeflateSerializer::new();
        let mut w = IntervalLogWriterBuilder::new()
            .with_max_value_divisor(1e6)
            .begin_log_with(&mut bytes, &mut ser)
            .unwrap();
        let tag = tag_of("api, v2");
        let mut put = |start: u64, len_ms: u64, values_us: &[u64]| {
            let mut h = crate::stats::histogram();
            for v in values_us {
                h.record(*v).unwrap();
            }
            let (start, len) = (Duration::from_secs(start), Duration::from_millis(len_ms));
            w.write_histogram(&h, start, len, Tag::new(&tag)).unwrap();
        };
        put(0, 1000, &[100; 500]);
        put(1, 1000, &[]);
        put(2, 1000, &[100, 200, 300, 400]);
        put(3, 100, &[5000]);
        drop(w);
        let path = std::env::temp_dir().join(format!("soakd-samples-{}.hlog", std::process::id()));
        std::fs::write(&path, &bytes).unwrap();
        let got = read_log(&path, "--hdr-log").unwrap();
        let _ = std::fs::remove_file(&path);
        let v = &got["api__v2"];
        assert_eq!(
            v.len(),
            2,
            "the empty interval and the short last one are left out: {v:?}"
        );
        assert_eq!(v[0].rps, 500.0);
        assert!((v[0].quantiles[0] - 100e-6).abs() < 1e-6, "{v:?}");
        assert!((v[1].quantiles[4] - 400e-6).abs() < 1e-6, "{v:?}");
        let e = read_log(Path::new("/nonexistent.hlog"), "--hdr-log")
            .unwrap_err()
            .to_string();
        assert!(e.contains("--hdr-log /nonexistent.hlog"), "{e}");
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
