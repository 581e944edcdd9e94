//! A latency distribution in a kilobyte and a half: log-spaced buckets
//! that a timeline point keeps instead of a full histogram (see
//! `timeline.rs` for why a point must stay small). Merging two is exact at
//! the coarser one's resolution, so quantiles after any number of merges
//! stay within half a bucket.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Buckets of a [`Sparse`] per doubling of the value at its finest
/// resolution (level 0): each is 2^(1/32) wide (2.2%), so a quantile read
/// at its geometric middle is within ±1.1% of the true value.
const PER_DOUBLING: f64 = 32.0;
/// Most buckets a [`Sparse`] keeps. A distribution with more distinct
/// buckets is kept at a coarser level instead: each level halves the
/// buckets per doubling, so 128 buckets hold a spread of 16× at level 0
/// (±1.1%), 256× at level 1 (±2.2%), 65,536× at level 2 (±4.4%) and the
/// whole 1 µs–1 h at level 3 (±8.8%). Nothing is folded or dropped: the
/// median and the tail are read at the same resolution.
///
/// It was 256 at level 0 with the far low end folded: two lists a point,
/// 3 KiB, so a timeline's room was 3 MB of a process, most of soakd's base
/// when a million connections are held as 67 processes (issue 41). The
/// points' latencies are read for charts and drifts; the report's
/// percentiles come from the run's full histograms.
pub const MAX_BUCKETS: usize = 128;
/// The coarsest level: 4 buckets a doubling, 127 for soakd's whole range
/// (index 0 ..= 1,016), so a list of [`MAX_BUCKETS`] always fits.
const MAX_LEVEL: u8 = 3;

/// A latency distribution as log-spaced buckets: each bucket's index and
/// its count, ascending by index, no zero counts, at most [`MAX_BUCKETS`].
/// An index is ⌈log₂(µs)·32⌉ rounded up to a multiple of 2^`level` (so
/// 0 ..= 1,016 for 1 µs .. 1 h at every level): a bucket of level L covers
/// the 2^L finest buckets below its index. 6 bytes a bucket. Counts
/// saturate at u32: 4·10⁹ samples in one bucket of one point would take a
/// million requests per second into that bucket for over an hour.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sparse {
    pub(super) index: Vec<u16>,
    pub(super) counts: Vec<u32>,
    /// Resolution: 0 is the finest (lists written before levels existed
    /// are level 0).
    #[serde(default)]
    pub(super) level: u8,
}

/// The finest bucket index of `us` microseconds.
fn bucket_of(us: u64) -> u16 {
    ((us.max(1) as f64).log2() * PER_DOUBLING).ceil() as u16
}

/// Index `b` at resolution `level`: rounded up to a multiple of 2^level.
fn at_level(b: u16, level: u8) -> u16 {
    let step = 1u16 << level;
    b.div_ceil(step) * step
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
        Sparse::written(MAX_BUCKETS)
    }

    /// Room for the merge of two lists ([`merge_using`](Self::merge_using)'s
    /// `out`), written once like [`reserved`](Self::reserved).
    pub(super) fn reserved_for_merges() -> Sparse {
        Sparse::written(2 * MAX_BUCKETS)
    }

    fn written(room: usize) -> Sparse {
        let mut s = Sparse {
            index: vec![u16::MAX; room],
            counts: vec![u32::MAX; room],
            level: 0,
        };
        s.clear();
        s
    }

    /// Empties the list; its room stays.
    pub(super) fn clear(&mut self) {
        self.index.clear();
        self.counts.clear();
        self.level = 0;
    }

    /// Makes `self` a copy of `other` in the room it has (grown only when
    /// `other` holds more).
    pub(super) fn copy_from(&mut self, other: &Sparse) {
        self.index.clone_from(&other.index);
        self.counts.clone_from(&other.counts);
        self.level = other.level;
    }

    /// Adds `count` at index `b` (not below the last index).
    fn push(&mut self, b: u16, count: u32) {
        match (self.index.last(), self.counts.last_mut()) {
            (Some(last), Some(c)) if *last == b => *c = c.saturating_add(count),
            _ => {
                self.index.push(b);
                self.counts.push(count);
            }
        }
    }

    /// Makes `self` the buckets of `h` (a `point_histogram`): each HDR
    /// bucket's count goes to the log bucket of its middle value, at the
    /// finest level that fits [`MAX_BUCKETS`]. In the room it has: it
    /// never holds more (and never grows a reserved one).
    pub(super) fn fill(&mut self, h: &Histogram<u64>) {
        self.clear();
        let each = || {
            h.iter_recorded().map(|v| {
                (
                    bucket_of(h.median_equivalent(v.value_iterated_to())),
                    v.count_at_value().min(u64::from(u32::MAX)) as u32,
                )
            })
        };
        // First the distinct buckets at each level, to pick the level.
        let distinct = |level: u8| {
            let mut n = 0usize;
            let mut last = None;
            for (b, _) in each() {
                let b = at_level(b, level);
                if last != Some(b) {
                    n += 1;
                    last = Some(b);
                }
            }
            n
        };
        let level = (0..MAX_LEVEL)
            .find(|l| distinct(*l) <= MAX_BUCKETS)
            .unwrap_or(MAX_LEVEL);
        self.level = level;
        for (b, c) in each() {
            self.push(at_level(b, level), c);
        }
    }

    /// Coarsens the list a level at a time, in place, until it holds at
    /// most [`MAX_BUCKETS`] (the room is kept).
    pub(super) fn cap(&mut self) {
        while self.index.len() > MAX_BUCKETS && self.level < MAX_LEVEL {
            self.level += 1;
            let mut kept = 0usize;
            for i in 0..self.index.len() {
                let b = at_level(self.index[i], self.level);
                if kept > 0 && self.index[kept - 1] == b {
                    self.counts[kept - 1] = self.counts[kept - 1].saturating_add(self.counts[i]);
                } else {
                    self.index[kept] = b;
                    self.counts[kept] = self.counts[i];
                    kept += 1;
                }
            }
            self.index.truncate(kept);
            self.counts.truncate(kept);
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

    /// Merges `other` into `self` (sorted merge of the two bucket lists,
    /// both read at the coarser one's level) through `out`, room for both
    /// lists that the timeline keeps (so a merge takes no memory); `self`
    /// keeps its own room.
    pub(super) fn merge_using(&mut self, other: &Sparse, out: &mut Sparse) {
        if other.is_empty() {
            return;
        }
        out.clear();
        out.level = self.level.max(other.level);
        let level = out.level;
        let (mut i, mut j) = (0, 0);
        loop {
            let a = self.index.get(i).map(|b| at_level(*b, level));
            let b = other.index.get(j).map(|b| at_level(*b, level));
            match (a, b) {
                (Some(x), Some(y)) if y < x => {
                    out.push(y, other.counts[j]);
                    j += 1;
                }
                (Some(x), _) => {
                    out.push(x, self.counts[i]);
                    i += 1;
                }
                (None, Some(y)) => {
                    out.push(y, other.counts[j]);
                    j += 1;
                }
                (None, None) => break,
            }
        }
        out.cap();
        self.copy_from(out);
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
        let half = f64::from(1u16 << self.level) / 2.0;
        let mid = |b: u16| {
            if b == 0 {
                1
            } else {
                2f64.powf((f64::from(b) - half) / PER_DOUBLING).round().max(1.0) as u64
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
    /// wide at level 0, twice that a level: samples within that much of
    /// `us` are not counted).
    pub(super) fn count_above_us(&self, us: u64) -> u64 {
        let above = bucket_of(us.saturating_add(1));
        let width = 1u16 << self.level;
        self.index
            .iter()
            .zip(&self.counts)
            .filter(|(b, _)| **b >= above.saturating_add(width))
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

    /// [`Sparse::fill`] picks, in the room a reserved list has, the level
    /// that collecting every bucket and then coarsening reaches.
    #[test]
    fn filling_in_place_coarsens_as_collecting_then_capping_does() {
        for (seed, decades, level) in [(1u64, 1.0, 0u8), (2, 2.0, 1), (3, 4.0, 2), (4, 7.0, 3)] {
            let h = spread(seed, decades, 20_000);
            let mut all = Sparse::default();
            for v in h.iter_recorded() {
                all.push(
                    bucket_of(h.median_equivalent(v.value_iterated_to())),
                    v.count_at_value() as u32,
                );
            }
            all.cap();
            let mut filled = Sparse::reserved();
            let room = filled.heap_bytes();
            filled.fill(&h);
            assert_eq!(filled, all, "seed {seed}");
            assert_eq!(filled.level, level, "{decades} decades");
            assert_eq!(filled.heap_bytes(), room, "no room added");
            assert!(filled.index.len() <= MAX_BUCKETS);
            assert_eq!(filled.len(), h.len(), "nothing dropped");
        }
    }

    /// Samples spread log-uniformly over `decades` from 100 µs.
    fn spread(seed: u64, decades: f64, n: usize) -> Histogram<u64> {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut h = crate::stats::sized(2);
        for _ in 0..n {
            h.record(10f64.powf(2.0 + decades * rng.f64()) as u64).unwrap();
        }
        h
    }

    /// Merging lists of different levels reads every quantile within half
    /// a bucket of the coarser level (and the 2-digit histogram's 1%) of
    /// the exact merged histogram.
    #[test]
    fn merges_across_levels_stay_within_half_a_bucket() {
        let (narrow, wide) = (spread(5, 1.0, 10_000), spread(6, 4.0, 10_000));
        let mut both = narrow.clone();
        both.add(&wide).unwrap();
        let mut merged = Sparse::of(&narrow);
        assert_eq!(merged.level, 0);
        let other = Sparse::of(&wide);
        assert_eq!(other.level, 2);
        let mut out = Sparse::reserved_for_merges();
        merged.merge_using(&other, &mut out);
        assert_eq!(merged.level, 2);
        assert_eq!(merged.len(), 20_000);
        let tolerance = 2f64.powf(f64::from(1u16 << merged.level) / 2.0 / PER_DOUBLING) * 1.01;
        for q in [0.1, 0.5, 0.9, 0.99, 0.999] {
            let exact = both.value_at_quantile(q) as f64;
            let read = merged.quantile_us(q).unwrap() as f64;
            assert!(
                read / exact <= tolerance && exact / read <= tolerance,
                "q{q}: {read} against {exact}"
            );
        }
    }
}
