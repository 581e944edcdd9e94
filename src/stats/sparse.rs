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
    /// The buckets of `h` (a `point_histogram`) in a list of their own
    /// size, for figures made once a second and dropped (the outage
    /// finder's); the timeline's points [`fill`](Self::fill) reserved room.
    pub(super) fn of(h: &Histogram<u64>) -> Sparse {
        let mut s = Sparse::default();
        s.fill(h);
        s
    }

    /// Room for [`MAX_BUCKETS`] buckets, written once so its pages are
    /// the process's now (a timeline's points are made at start).
    pub(super) fn reserved() -> Sparse {
        let mut s = Sparse {
            index: vec![u16::MAX; MAX_BUCKETS],
            counts: vec![u32::MAX; MAX_BUCKETS],
        };
        s.index.clear();
        s.counts.clear();
        s
    }

    /// Room for the merge of two lists ([`merge_using`](Self::merge_using)'s
    /// `out`), written once like [`reserved`](Self::reserved).
    pub(super) fn reserved_for_merges() -> Sparse {
        let mut s = Sparse {
            index: vec![u16::MAX; 2 * MAX_BUCKETS],
            counts: vec![u32::MAX; 2 * MAX_BUCKETS],
        };
        s.clear();
        s
    }

    /// Empties the list; its room stays.
    pub(super) fn clear(&mut self) {
        self.index.clear();
        self.counts.clear();
    }

    /// Makes `self` a copy of `other` in the room it has (grown only when
    /// `other` holds more).
    pub(super) fn copy_from(&mut self, other: &Sparse) {
        self.index.clone_from(&other.index);
        self.counts.clone_from(&other.counts);
    }

    /// Makes `self` the buckets of `h` (a `point_histogram`): each HDR
    /// bucket's count goes to the log bucket of its middle value. In the
    /// room it has: the lowest buckets past [`MAX_BUCKETS`] are folded as
    /// they come, so it never holds more (and never grows a reserved
    /// one).
    pub(super) fn fill(&mut self, h: &Histogram<u64>) {
        self.index.clear();
        self.counts.clear();
        let each = || {
            h.iter_recorded().map(|v| {
                (
                    bucket_of(h.median_equivalent(v.value_iterated_to())),
                    v.count_at_value().min(u64::from(u32::MAX)) as u32,
                )
            })
        };
        // First the distinct buckets, to know how many low ones fold.
        let mut distinct = 0usize;
        let mut last = None;
        for (b, _) in each() {
            if last != Some(b) {
                distinct += 1;
                last = Some(b);
            }
        }
        let cut = distinct.saturating_sub(MAX_BUCKETS);
        let mut seen = 0usize;
        for (b, c) in each() {
            if self.index.last() == Some(&b) {
                let last = self.counts.last_mut().expect("index and counts have one length");
                *last = last.saturating_add(c);
                continue;
            }
            seen += 1;
            if seen <= cut + 1 && !self.index.is_empty() {
                // Folded into the lowest bucket kept (the (cut+1)-th).
                self.index[0] = b;
                self.counts[0] = self.counts[0].saturating_add(c);
            } else {
                self.index.push(b);
                self.counts.push(c);
            }
        }
    }

    /// Folds the lowest buckets into the lowest one kept until at most
    /// [`MAX_BUCKETS`] are left (the room is kept).
    pub(super) fn cap(&mut self) {
        if self.index.len() > MAX_BUCKETS {
            let cut = self.index.len() - MAX_BUCKETS;
            let folded = self.counts[..=cut].iter().fold(0u32, |a, c| a.saturating_add(*c));
            self.index.drain(..cut);
            self.counts.drain(..cut);
            self.counts[0] = folded;
        }
    }

    /// Samples in the distribution.
    pub fn len(&self) -> u64 {
        self.counts.iter().map(|c| u64::from(*c)).sum()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Merges `other` into `self`, with a list of its own for the work
    /// (tests; soakd merges with [`merge_using`](Self::merge_using), in
    /// room it keeps).
    #[cfg(test)]
    pub(super) fn merge(&mut self, other: &Sparse) {
        let mut out = Sparse::default();
        self.merge_using(other, &mut out);
    }

    /// Merges `other` into `self` (sorted merge of the two bucket lists)
    /// through `out`, room for both lists that the timeline keeps (so a
    /// merge takes no memory); `self` keeps its own room.
    pub(super) fn merge_using(&mut self, other: &Sparse, out: &mut Sparse) {
        if other.is_empty() {
            return;
        }
        out.index.clear();
        out.counts.clear();
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
        self.index.clear();
        self.index.extend_from_slice(&out.index);
        self.counts.clear();
        self.counts.extend_from_slice(&out.counts);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// [`Sparse::fill`] folds the low end as it goes, in the room a
    /// reserved list has, and gives what collecting every bucket and then
    /// folding gives.
    #[test]
    fn filling_in_place_folds_as_collecting_then_capping_does() {
        for (seed, decades) in [(1u64, 1.0), (2, 4.0), (3, 9.0)] {
            let mut rng = fastrand::Rng::with_seed(seed);
            let mut h: Histogram<u64> = Histogram::new_with_bounds(1, super::super::HIST_MAX_US, 2).unwrap();
            for _ in 0..20_000 {
                h.record(10f64.powf(decades * rng.f64()) as u64 + 1).unwrap();
            }
            let mut all = Sparse::default();
            for v in h.iter_recorded() {
                let b = bucket_of(h.median_equivalent(v.value_iterated_to()));
                let c = v.count_at_value() as u32;
                if all.index.last() == Some(&b) {
                    *all.counts.last_mut().unwrap() += c;
                } else {
                    all.index.push(b);
                    all.counts.push(c);
                }
            }
            all.cap();
            let mut filled = Sparse::reserved();
            let room = filled.heap_bytes();
            filled.fill(&h);
            assert_eq!(filled, all, "seed {seed}");
            assert_eq!(filled.heap_bytes(), room, "no room added");
            assert!(filled.index.len() <= MAX_BUCKETS);
            if decades > 8.0 {
                assert_eq!(filled.index.len(), MAX_BUCKETS, "nine decades fold");
            }
        }
    }
}
