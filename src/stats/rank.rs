//! The rank test that says whether two sets of per-interval values differ
//! by more than chance: `soakd compare` tests two runs' interval samples
//! with it, and the drift figures of the report's trends test a run's
//! first steady window against its last.
//!
//! Mann–Whitney's U is used because it assumes nothing about the samples'
//! distribution (latency quantiles are skewed and spiky) and a single
//! extreme interval moves it by one rank only. It lives here, below both
//! users, so the two verdicts are the same test.
//!
//! So does the tolerance rule ([`beyond_tolerance`]): what `soakd compare`
//! calls a change, and what the outage detector calls "back to normal"
//! (a second's p99 within it of the minute before an outage).

/// Two-sided p-value of the Mann–Whitney U test of `a` against `b`
/// (normal approximation with a tie correction and a continuity
/// correction; fine from about 5 samples a side, which is all it is used
/// for).
pub fn mann_whitney(a: &[f64], b: &[f64]) -> f64 {
    mann_whitney_dependent(a, b, 1.0)
}

/// [`mann_whitney`] for values that are not independent: U's variance is
/// multiplied by `inflation` (≥ 1), so the samples count as fewer. A
/// series whose neighbours are correlated (lag-1 autocorrelation ρ, as
/// a timeline's points are while a shared machine's load comes and goes)
/// holds about n (1 − ρ)/(1 + ρ) independent values: `inflation` is
/// (1 + ρ)/(1 − ρ).
pub fn mann_whitney_dependent(a: &[f64], b: &[f64], inflation: f64) -> f64 {
    mann_whitney_dependent_in(a, b, inflation, &mut Vec::new())
}

/// [`mann_whitney_dependent`] pooling the samples in `all`, room the
/// caller keeps from call to call (the live trend analysis: see
/// `trends::reserve`).
pub fn mann_whitney_dependent_in(a: &[f64], b: &[f64], inflation: f64, all: &mut Vec<(f64, bool)>) -> f64 {
    let (n1, n2) = (a.len() as f64, b.len() as f64);
    if a.is_empty() || b.is_empty() {
        return 1.0;
    }
    all.clear();
    all.extend(a.iter().map(|&v| (v, true)).chain(b.iter().map(|&v| (v, false))));
    all.sort_unstable_by(|x, y| x.0.total_cmp(&y.0));
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
    let var = n1 * n2 / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0))) * inflation.max(1.0);
    if var <= 0.0 {
        return 1.0;
    }
    let z = ((u - mean).abs() - 0.5).max(0.0) / var.sqrt();
    (2.0 * normal_upper_tail(z)).min(1.0)
}

/// Whether `new` differs from `base` by more than `compare`'s tolerance
/// rule lets pass: by more than `tolerance` relative to `base` (any
/// change of a zero base counts) and by at least `floor` in absolute
/// terms (1 ms for latencies: relative changes of tiny values mean
/// nothing). Symmetric: better and worse alike.
pub fn beyond_tolerance(base: f64, new: f64, tolerance: f64, floor: f64) -> bool {
    let abs = new - base;
    let rel = (base != 0.0).then(|| abs / base);
    abs != 0.0 && rel.is_none_or(|r| r.abs() > tolerance) && abs.abs() >= floor
}

/// P(Z > z) for a standard normal Z, via erfc (Numerical Recipes'
/// Chebyshev fit, relative error below 1.2e-7).
pub fn normal_upper_tail(z: f64) -> f64 {
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
    median_in(v, &mut Vec::new())
}

/// [`median`], sorting a copy of `v` in `s`, room the caller keeps.
pub fn median_in(v: &[f64], s: &mut Vec<f64>) -> f64 {
    s.clear();
    s.extend_from_slice(v);
    s.sort_unstable_by(f64::total_cmp);
    let m = s.len() / 2;
    if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    }
}

/// The ranks of `v` from 1, ties averaged, written into `out`; `order`
/// is room for their ordering (the caller keeps both from call to call).
pub fn ranks_into(v: &[f64], order: &mut Vec<usize>, out: &mut Vec<f64>) {
    order.clear();
    order.extend(0..v.len());
    // Unstable sorts (here, in the median and in the U test): ties are
    // averaged whatever their order, and a stable sort allocates a buffer
    // of its own.
    order.sort_unstable_by(|a, b| v[*a].total_cmp(&v[*b]));
    out.clear();
    out.resize(v.len(), 0.0);
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && v[order[j + 1]] == v[order[i]] {
            j += 1;
        }
        for k in &order[i..=j] {
            out[*k] = (i + j) as f64 / 2.0 + 1.0;
        }
        i = j + 1;
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
    fn the_tolerance_rule() {
        // 10% and 1 ms, as `soakd compare` judges latencies.
        assert!(!beyond_tolerance(0.010, 0.0109, 0.1, 0.001), "9%");
        assert!(beyond_tolerance(0.010, 0.0115, 0.1, 0.001), "15%, 1.5 ms");
        assert!(!beyond_tolerance(0.0001, 0.0009, 0.1, 0.001), "9x, but 0.8 ms");
        assert!(beyond_tolerance(0.0, 0.002, 0.1, 0.001), "from zero");
        assert!(beyond_tolerance(0.010, 0.008, 0.1, 0.001), "better counts too");
        assert!(!beyond_tolerance(0.5, 0.5, 0.0, 0.0), "no change");
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
