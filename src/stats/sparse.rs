//! A latency distribution in a few kilobytes: log-spaced buckets that a
//! timeline point keeps instead of a full histogram (see `timeline.rs` for
//! why a point must stay under 4 KiB). Merging two is exact at the bucket's
//! resolution, so quantiles after any number of merges stay within ±1.1%.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Buckets of a [`Sparse`] per doubling of the value: each is 2^(1/32)
/// wide (2.2%), so a quantile read at its geometric middle is within
/// ±1.1% of the true value.
const PER_DOUBLING: f64 = 32.0;
/// Most buckets a [`Sparse`] keeps: 256 buckets span a factor of 256
/// (8 doublings) at full resolution; beyond that the lowest buckets fold
/// into the lowest one kept, so the median and the tail stay exact to the
/// bucket and only the far low end (under a 256th of the maximum) reads
/// high. With two distributions that is at most 3 KiB of buckets a point.
/// (It was cut to 224 while a point carried the whole `Counters`, HTTP/2's
/// codes included; a point now keeps only the [`PointCounts`] the
/// timeline reads, 216 bytes where that was 560, and the worst point is
/// 4,048 bytes.)
pub const MAX_BUCKETS: usize = 256;

/// A latency distribution as log-spaced buckets: each bucket's index
/// (⌈log₂(µs)·32⌉, so 0 ..= 1,016 for 1 µs .. 1 h) and its count,
/// ascending by index, no zero counts, at most [`MAX_BUCKETS`]. 6 bytes a
/// bucket. Counts saturate at u32: 4·10⁹ samples in one 2%-wide bucket of
/// one point would take a million requests per second into that bucket
/// for over an hour.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sparse {
    pub(super) index: Vec<u16>,
    pub(super) counts: Vec<u32>,
}

/// The bucket index of `us` microseconds.
fn bucket_of(us: u64) -> u16 {
    ((us.max(1) as f64).log2() * PER_DOUBLING).ceil() as u16
}

impl Sparse {
    /// The buckets of `h` (a [`point_histogram`]): each HDR bucket's
    /// count goes to the log bucket of its middle value.
    pub(super) fn of(h: &Histogram<u64>) -> Sparse {
        let mut s = Sparse::default();
        for v in h.iter_recorded() {
            let b = bucket_of(h.median_equivalent(v.value_iterated_to()));
            let c = v.count_at_value().min(u64::from(u32::MAX)) as u32;
            if s.index.last() == Some(&b) {
                let last = s.counts.last_mut().expect("index and counts have one length");
                *last = last.saturating_add(c);
            } else {
                s.index.push(b);
                s.counts.push(c);
            }
        }
        s.cap();
        s
    }

    /// Folds the lowest buckets into the lowest one kept until at most
    /// [`MAX_BUCKETS`] are left, and frees the spare capacity.
    pub(super) fn cap(&mut self) {
        if self.index.len() > MAX_BUCKETS {
            let cut = self.index.len() - MAX_BUCKETS;
            let folded = self.counts[..=cut].iter().fold(0u32, |a, c| a.saturating_add(*c));
            self.index.drain(..cut);
            self.counts.drain(..cut);
            self.counts[0] = folded;
        }
        self.index.shrink_to_fit();
        self.counts.shrink_to_fit();
    }

    /// Samples in the distribution.
    pub fn len(&self) -> u64 {
        self.counts.iter().map(|c| u64::from(*c)).sum()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Merges `other` into `self` (sorted merge of the two bucket lists).
    pub(super) fn merge(&mut self, other: &Sparse) {
        if other.is_empty() {
            return;
        }
        let mut out = Sparse {
            index: Vec::with_capacity(self.index.len() + other.index.len()),
            counts: Vec::with_capacity(self.index.len() + other.index.len()),
        };
        let (mut i, mut j) = (0, 0);
        while i < self.index.len() || j < other.index.len() {
            let a = self.index.get(i).copied().unwrap_or(u16::MAX);
            let b = other.index.get(j).copied().unwrap_or(u16::MAX);
            let take_a = i < self.index.len() && (j >= other.index.len() || a <= b);
            let take_b = j < other.index.len() && (i >= self.index.len() || b <= a);
            let mut count = 0u32;
            if take_a {
                count = count.saturating_add(self.counts[i]);
                i += 1;
            }
            if take_b {
                count = count.saturating_add(other.counts[j]);
                j += 1;
            }
            out.index.push(if take_a { a } else { b });
            out.counts.push(count);
        }
        out.cap();
        *self = out;
    }

    /// The value at quantile `q` in µs: the geometric middle of the bucket
    /// holding the ⌈q·n⌉-th sample (as HdrHistogram picks the sample);
    /// `None` when empty.
    pub fn quantile_us(&self, q: f64) -> Option<u64> {
        let n = self.len();
        if n == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        let mid = |b: u16| {
            if b == 0 {
                1
            } else {
                2f64.powf((f64::from(b) - 0.5) / PER_DOUBLING).round() as u64
            }
        };
        for (b, c) in self.index.iter().zip(&self.counts) {
            seen += u64::from(*c);
            if seen >= rank {
                return Some(mid(*b));
            }
        }
        self.index.last().map(|b| mid(*b))
    }

    /// Samples whose bucket lies wholly above `us` µs (a bucket is 2.2%
    /// wide: samples within that much of `us` are not counted).
    pub(super) fn count_above_us(&self, us: u64) -> u64 {
        let above = bucket_of(us.saturating_add(1));
        self.index
            .iter()
            .zip(&self.counts)
            .filter(|(b, _)| **b > above)
            .map(|(_, c)| u64::from(*c))
            .sum()
    }

    /// Heap bytes held.
    pub(super) fn heap_bytes(&self) -> usize {
        self.index.capacity() * 2 + self.counts.capacity() * 4
    }
}
