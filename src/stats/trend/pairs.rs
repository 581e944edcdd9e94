//! The k-th smallest of the pairwise slopes, without keeping the pairs.
//!
//! Theil–Sen's slope and Sen's interval are ranks among the slopes of
//! every pair of points: half a million of them for a full timeline. Kept
//! in a vector they were 4 MB of every soakd process that judges a trend
//! (and ~40% of one holding a single connection, issue 41), though only
//! three or four ranks are ever read. Here a rank is found by sampling
//! instead, as Floyd and Rivest's selection does: a few thousand pairs
//! drawn at random say where the rank lies, one pass over all the pairs
//! counts those below that window and keeps only those inside it (a few
//! thousand), and the rank is selected among them. The answer is the
//! exact slope the full vector gave (the same division of the same two
//! points); only the memory changes: [`SAMPLE`] values and a window of
//! [`window_cap`] values, ~0.3 MB for a full timeline. When the window
//! misses the rank or overflows (ties, or bad luck once in hundreds of
//! fits), a wider window is tried, then a bisection over the values
//! themselves that counts the pairs at most 64 times: slower, just as
//! exact.
//!
//! The draws are seeded by the pair count, so a fit is a function of its
//! points: the same data gives the same figures.

/// Pairs drawn to place a rank.
pub(super) const SAMPLE: usize = 8192;

/// Pairs with a slope: `i < j` within one span, `x[i] != x[j]`.
pub(super) fn count(x: &[f64], spans: &[(usize, usize)], sorted: &mut Vec<f64>) -> usize {
    let mut m = 0;
    for &(a, b) in spans {
        let n = b - a;
        m += n * n.saturating_sub(1) / 2;
        // Equal times (rare: points are seconds apart) make no slope.
        sorted.clear();
        sorted.extend_from_slice(&x[a..b]);
        sorted.sort_unstable_by(f64::total_cmp);
        let mut i = 0;
        while i < sorted.len() {
            let mut j = i + 1;
            while j < sorted.len() && sorted[j] == sorted[i] {
                j += 1;
            }
            let t = j - i;
            m -= t * (t - 1) / 2;
            i = j;
        }
    }
    m
}

/// Room the window may take for `m` pairs: twice the pairs a window of
/// ±3 standard errors of the sample's quantile holds on average
/// (3m/√[`SAMPLE`]), and never less than a small fit's pairs.
pub(super) fn window_cap(m: usize) -> usize {
    (6.0 * m as f64 / (SAMPLE as f64).sqrt()).ceil().max(4096.0) as usize
}

/// Calls `f` with the slope of every pair of [`count`], in one order.
#[inline]
fn each(x: &[f64], y: &[f64], spans: &[(usize, usize)], mut f: impl FnMut(f64)) {
    for &(a, b) in spans {
        for i in a..b {
            for j in i + 1..b {
                let dx = x[j] - x[i];
                if dx != 0.0 {
                    f((y[j] - y[i]) / dx);
                }
            }
        }
    }
}

/// The `k`-th smallest (from 0) of the `m` pairwise slopes; `sample` and
/// `window` are room (see the module doc), `sample` at least [`SAMPLE`]
/// long and `window` [`window_cap`] for no allocation.
pub(super) fn kth(
    x: &[f64],
    y: &[f64],
    spans: &[(usize, usize)],
    m: usize,
    k: usize,
    sample: &mut Vec<f64>,
    window: &mut Vec<f64>,
) -> f64 {
    debug_assert!(k < m);
    let cap = window_cap(m);
    if m <= cap {
        window.clear();
        each(x, y, spans, |s| window.push(s));
        return *window.select_nth_unstable_by(k, f64::total_cmp).1;
    }
    draw(x, y, spans, m, sample);
    let q = (k as f64 + 0.5) / m as f64;
    let at = q * sample.len() as f64;
    let sd = (sample.len() as f64 * q * (1.0 - q)).sqrt();
    for width in [3.0, 8.0] {
        let d = width * sd + 3.0;
        let lo = if at - d < 0.0 {
            f64::NEG_INFINITY
        } else {
            sample[(at - d) as usize]
        };
        let hi = if at + d >= sample.len() as f64 {
            f64::INFINITY
        } else {
            sample[(at + d) as usize]
        };
        if let Some(s) = within(x, y, spans, k, lo, hi, cap, window) {
            return s;
        }
    }
    bisect(x, y, spans, k)
}

/// Draws [`SAMPLE`] pairs at random (uniformly over the pairs of every
/// span) into `sample`, sorted.
fn draw(x: &[f64], y: &[f64], spans: &[(usize, usize)], m: usize, sample: &mut Vec<f64>) {
    let mut rng = fastrand::Rng::with_seed(0x5eed ^ m as u64);
    let all: usize = spans
        .iter()
        .map(|&(a, b)| (b - a) * (b - a).saturating_sub(1) / 2)
        .sum();
    sample.clear();
    // Pairs with equal x are drawn again; bounded, as a span of nothing
    // but equal times has no pair in `m` at all.
    let mut tries = 0;
    while sample.len() < SAMPLE && tries < 4 * SAMPLE {
        tries += 1;
        let mut r = rng.usize(..all);
        let &(a, b) = spans
            .iter()
            .find(|&&(a, b)| {
                let p = (b - a) * (b - a).saturating_sub(1) / 2;
                if r < p {
                    true
                } else {
                    r -= p;
                    false
                }
            })
            .expect("r is below the pairs' sum");
        let n = b - a;
        let i = rng.usize(..n);
        let mut j = rng.usize(..n - 1);
        if j >= i {
            j += 1;
        }
        let (i, j) = (a + i.min(j), a + i.max(j));
        let dx = x[j] - x[i];
        if dx != 0.0 {
            sample.push((y[j] - y[i]) / dx);
        }
    }
    sample.sort_unstable_by(f64::total_cmp);
    if sample.is_empty() {
        // Every draw hit equal times: no window, the bisection decides.
        sample.push(f64::NAN);
    }
}

/// One pass over the pairs: the `k`-th slope if it lies in `[lo, hi]`
/// and the slopes strictly inside fit in `cap`. Slopes equal to `lo` or
/// `hi` are counted, not kept, so ties (a flat series: all slopes 0) cost
/// no room.
#[allow(clippy::too_many_arguments)]
fn within(
    x: &[f64],
    y: &[f64],
    spans: &[(usize, usize)],
    k: usize,
    lo: f64,
    hi: f64,
    cap: usize,
    window: &mut Vec<f64>,
) -> Option<f64> {
    if lo.is_nan() || hi.is_nan() {
        return None;
    }
    let (mut below, mut at_lo, mut inside, mut at_hi) = (0usize, 0usize, 0usize, 0usize);
    window.clear();
    each(x, y, spans, |s| {
        if s < lo {
            below += 1;
        } else if s == lo {
            at_lo += 1;
        } else if s < hi {
            inside += 1;
            if window.len() < cap {
                window.push(s);
            }
        } else if s == hi {
            at_hi += 1;
        }
    });
    let k = k.checked_sub(below)?;
    if k < at_lo {
        return Some(lo);
    }
    let k = k - at_lo;
    if k < inside {
        return (inside == window.len()).then(|| *window.select_nth_unstable_by(k, f64::total_cmp).1);
    }
    (k - inside < at_hi).then_some(hi)
}

/// The `k`-th slope by bisection over the values' order (at most 64
/// passes, each counting the slopes at or below a value): the smallest
/// value with more than `k` slopes at or below it is a slope itself.
fn bisect(x: &[f64], y: &[f64], spans: &[(usize, usize)], k: usize) -> f64 {
    let (mut lo, mut hi) = (key(f64::NEG_INFINITY), key(f64::INFINITY));
    // Invariant: at most k slopes at or below value(lo) (or lo is -inf's
    // key, below every slope), more than k at or below value(hi).
    let at_or_below = |t: f64| {
        let mut c = 0usize;
        each(x, y, spans, |s| c += usize::from(s <= t));
        c
    };
    if at_or_below(f64::NEG_INFINITY) > k {
        return f64::NEG_INFINITY;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if at_or_below(value(mid)) > k {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    value(hi)
}

/// `f`'s place in the order of the values (`total_cmp`'s, as an
/// unsigned integer).
fn key(f: f64) -> u64 {
    let b = f.to_bits();
    if b >> 63 == 1 { !b } else { b | 1 << 63 }
}

/// The value at `key`.
fn value(key: u64) -> f64 {
    if key >> 63 == 1 {
        f64::from_bits(key & !(1 << 63))
    } else {
        f64::from_bits(!key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The full vector's answer, as the fits computed it before.
    fn brute(x: &[f64], y: &[f64], spans: &[(usize, usize)], k: usize) -> f64 {
        let mut v = Vec::new();
        each(x, y, spans, |s| v.push(s));
        *v.select_nth_unstable_by(k, f64::total_cmp).1
    }

    fn check(x: &[f64], y: &[f64], spans: &[(usize, usize)]) {
        let m = count(x, spans, &mut Vec::new());
        let mut n = 0;
        each(x, y, spans, |_| n += 1);
        assert_eq!(m, n);
        let (mut sample, mut window) = (Vec::new(), Vec::new());
        for k in [0, m / 40, m / 2 - 1, m / 2, m - m / 40 - 1, m - 1] {
            let got = kth(x, y, spans, m, k, &mut sample, &mut window);
            assert_eq!(got.to_bits(), brute(x, y, spans, k).to_bits(), "k={k} of {m}");
        }
    }

    /// Ranks among 500,000 pairs (past the window's direct case), with
    /// noise, outliers, ties, plateaus, equal times and segments: the
    /// same bits as the full vector's selection.
    #[test]
    fn ranks_are_the_full_vectors() {
        let mut rng = fastrand::Rng::with_seed(7);
        let n = 1000;
        let x: Vec<f64> = (0..n).map(|i| i as f64 * 1.5).collect();
        let noisy: Vec<f64> = x.iter().map(|t| 3.0 * t + rng.f64() * 50.0).collect();
        check(&x, &noisy, &[(0, n)]);
        // Outliers and a plateau (many slopes exactly 0).
        let mut odd = noisy.clone();
        for (i, v) in odd.iter_mut().enumerate() {
            if i % 10 == 0 {
                *v = 1e9;
            } else if (300..700).contains(&i) {
                *v = 42.0;
            }
        }
        check(&x, &odd, &[(0, n)]);
        // Flat, and an exact line: every slope the same value.
        check(&x, &vec![7.0; n], &[(0, n)]);
        let line: Vec<f64> = x.iter().map(|t| 3.0 * t).collect();
        check(&x, &line, &[(0, n)]);
        // Steps (descriptors): few distinct values, many ties.
        let steps: Vec<f64> = (0..n).map(|i| (i / 97) as f64).collect();
        check(&x, &steps, &[(0, n)]);
        // Equal times and three segments (restarts).
        let mut xt = x.clone();
        for i in (0..n - 1).step_by(3) {
            xt[i + 1] = xt[i];
        }
        check(&xt, &noisy, &[(0, 250), (250, 600), (600, n)]);
    }

    #[test]
    fn the_bisection_finds_the_same_slopes() {
        let mut rng = fastrand::Rng::with_seed(3);
        let x: Vec<f64> = (0..60).map(f64::from).collect();
        let y: Vec<f64> = x.iter().map(|t| -2.0 * t + rng.f64()).collect();
        let spans = [(0, 60)];
        let m = count(&x, &spans, &mut Vec::new());
        for k in [0, 7, m / 2, m - 1] {
            assert_eq!(bisect(&x, &y, &spans, k).to_bits(), brute(&x, &y, &spans, k).to_bits());
        }
        for f in [f64::NEG_INFINITY, -1e300, -1.5, -0.0, 0.0, 1e-300, 2.5, f64::INFINITY] {
            assert_eq!(value(key(f)).to_bits(), f.to_bits());
        }
        assert!(key(-0.0) < key(0.0) && key(-1.0) < key(-0.5) && key(1.0) < key(2.0));
    }
}
