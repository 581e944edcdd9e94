//! soakd's figures in Prometheus's protobuf form: the histogram buckets
//! every latency metric shares, and the samples a collector returns.
//!
//! Kept apart from `metrics.rs` (which declares every family and fills it)
//! so that file stays the one table of what is exported, not how a sample
//! is encoded.

use hdrhistogram::Histogram;
use prometheus::proto::{self, MetricType};

/// Bucket upper bounds in seconds: ten per decade (the R10 series, steps
/// of ~26%) from 10 µs to 1 s, so that a `histogram_quantile` over many
/// shards is within about 10% of the exact value wherever a loopback or
/// LAN latency falls (with three bounds below 1 ms a p50 of 72 µs read as
/// "under 100 µs"; issue 41); then 2.5, 5, 10, 30, 60 s. Exact boundaries
/// at 10, 20, 25, 50, 100, 200, 250 and 500 µs, 1, 5, 10, 25, 50, 100,
/// 250, 500 ms and 1, 2.5, 5, 10 s. 56 bounds and `+Inf`: a histogram is
/// 59 series (with `_sum` and `_count`), 17 more than with three bounds
/// below 1 ms.
pub const BUCKETS: [f64; 56] = [
    0.00001, 0.0000125, 0.000016, 0.00002, 0.000025, 0.0000315, 0.00004, 0.00005, 0.000063, 0.00008, 0.0001, 0.000125,
    0.00016, 0.0002, 0.00025, 0.000315, 0.0004, 0.0005, 0.00063, 0.0008, 0.001, 0.00125, 0.0016, 0.002, 0.0025,
    0.00315, 0.004, 0.005, 0.0063, 0.008, 0.01, 0.0125, 0.016, 0.02, 0.025, 0.0315, 0.04, 0.05, 0.063, 0.08, 0.1,
    0.125, 0.16, 0.2, 0.25, 0.315, 0.4, 0.5, 0.63, 0.8, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// A histogram in Prometheus form.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Buckets {
    /// Cumulative counts per bound of [`BUCKETS`].
    pub cumulative: Vec<u64>,
    /// All samples.
    pub count: u64,
    /// Sum of the samples in seconds (HDR-precise: within 0.1%).
    pub sum: f64,
}

impl Buckets {
    /// No samples: what [`Buckets::from_hdr`] gives for an empty histogram.
    pub fn zero() -> Buckets {
        Buckets {
            cumulative: vec![0; BUCKETS.len()],
            count: 0,
            sum: 0.0,
        }
    }

    /// Converts a µs HdrHistogram. A sample counts in a bucket when the low
    /// end of its HDR cell is within the bound, so a value recorded exactly
    /// at a boundary stays in that boundary's bucket.
    pub fn from_hdr(h: &Histogram<u64>) -> Buckets {
        let mut per = vec![0u64; BUCKETS.len()];
        for v in h.iter_recorded() {
            let secs = h.lowest_equivalent(v.value_iterated_to()) as f64 / 1e6;
            let i = BUCKETS.partition_point(|b| *b < secs);
            if i < per.len() {
                per[i] += v.count_at_value();
            }
        }
        let mut acc = 0;
        let cumulative = per
            .into_iter()
            .map(|c| {
                acc += c;
                acc
            })
            .collect();
        Buckets {
            cumulative,
            count: h.len(),
            sum: h.mean() * h.len() as f64 / 1e6,
        }
    }
}

/// Label pairs in protobuf form.
pub(super) fn labels(pairs: &[(&str, &str)]) -> Vec<proto::LabelPair> {
    pairs
        .iter()
        .map(|(n, v)| {
            let mut l = proto::LabelPair::default();
            l.set_name(n.to_string());
            l.set_value(v.to_string());
            l
        })
        .collect()
}

/// A counter or gauge sample.
pub(super) fn value(kind: MetricType, pairs: &[(&str, &str)], v: f64) -> proto::Metric {
    let mut m = proto::Metric::from_label(labels(pairs));
    if kind == MetricType::COUNTER {
        let mut c = proto::Counter::default();
        c.set_value(v);
        m.set_counter(c);
    } else {
        let mut g = proto::Gauge::default();
        g.set_value(v);
        m.set_gauge(g);
    }
    m
}

/// A classic histogram sample over [`BUCKETS`].
pub(super) fn histogram(pairs: &[(&str, &str)], b: &Buckets) -> proto::Metric {
    let mut m = proto::Metric::from_label(labels(pairs));
    let mut h = proto::Histogram::default();
    h.set_sample_count(b.count);
    h.set_sample_sum(b.sum);
    h.set_bucket(
        BUCKETS
            .iter()
            .zip(&b.cumulative)
            .map(|(bound, count)| {
                let mut bucket = proto::Bucket::default();
                bucket.set_upper_bound(*bound);
                bucket.set_cumulative_count(*count);
                bucket
            })
            .collect(),
    );
    m.set_histogram(h);
    m
}
