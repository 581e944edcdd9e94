//! `soakd compare`'s rows of the server watch: each watched series of the
//! new run against the baseline's (by watch and labels; a watch with one
//! series on each side pairs whatever its labels, as one workload pairs
//! with one), judged on its slope and its last value. So "this build
//! leaks, the last one did not" is a verdict too: a significant rise where
//! the baseline had none is `worse`, whatever the values.

use super::{Comparison, Options, Row};
use crate::report::Report;
use crate::report::server::SeriesReport;
use crate::stats::judge::{Method, Verdict};

/// The pairs of series of `base` and `new`, and the series of either
/// left alone (named for `unmatched`).
fn pair<'a>(
    base: &'a [SeriesReport],
    new: &'a [SeriesReport],
) -> (Vec<(&'a SeriesReport, &'a SeriesReport)>, Vec<String>) {
    let mut out = Vec::new();
    let mut alone = Vec::new();
    for n in new {
        let same_watch = |s: &&SeriesReport| s.info.watch == n.info.watch;
        let found = base
            .iter()
            .find(|b| same_watch(b) && b.info.labels == n.info.labels)
            .or_else(|| {
                // One series of the watch on each side: the same one (the
                // server on another port, another pod name).
                let (bs, ns) = (
                    base.iter().filter(same_watch).count(),
                    new.iter().filter(same_watch).count(),
                );
                (bs == 1 && ns == 1).then(|| base.iter().find(same_watch)).flatten()
            });
        match found {
            Some(b) => out.push((b, n)),
            None => alone.push(format!("server {} (only in the new run)", n.info.name())),
        }
    }
    for b in base {
        if !out.iter().any(|(x, _)| std::ptr::eq(*x, b)) {
            alone.push(format!("server {} (only in the baseline)", b.info.name()));
        }
    }
    (out, alone)
}

/// A rising slope's verdict: significant and rising where the other run's
/// was not is worse (better the other way round); both rising, by the
/// tolerance on the slopes.
fn slope_verdict(b: &SeriesReport, n: &SeriesReport, tolerance: f64) -> Option<(f64, f64, Verdict)> {
    let (bs, ns) = (&b.trend.slope, &n.trend.slope);
    let (bv, nv) = (bs.slope?, ns.slope?);
    let rising = |s: &crate::stats::trends::Slope, v: f64| s.significant && v > 0.0;
    let verdict = match (rising(bs, bv), rising(ns, nv)) {
        (false, true) => Verdict::Worse,
        (true, false) => Verdict::Better,
        (false, false) => Verdict::Same,
        (true, true) if nv > bv * (1.0 + tolerance) => Verdict::Worse,
        (true, true) if nv < bv * (1.0 - tolerance) => Verdict::Better,
        (true, true) => Verdict::Same,
    };
    Some((bv, nv, verdict))
}

/// The rows of the server watch (none when neither report has one).
pub(super) fn rows(base: &Report, new: &Report, opts: &Options, into: &mut Comparison) {
    let none = Vec::new();
    let bs = base.server.as_ref().map_or(&none, |s| &s.series);
    let ns = new.server.as_ref().map_or(&none, |s| &s.series);
    if bs.is_empty() && ns.is_empty() {
        return;
    }
    let (pairs, alone) = pair(bs, ns);
    into.unmatched.extend(alone);
    for (b, n) in pairs {
        let workload = format!("server {}", n.info.name());
        let row = |metric: &'static str, bv: f64, nv: f64, verdict: Verdict, unit: String| Row {
            workload: workload.clone(),
            metric,
            baseline: bv,
            new: nv,
            abs_change: nv - bv,
            rel_change: (bv != 0.0).then(|| (nv - bv) / bv.abs()),
            verdict,
            method: Method::Tolerance,
            p_value: n.trend.slope.p_value.filter(|_| metric == "slope"),
            samples: None,
            lag: None,
            unit: Some(unit),
        };
        if let Some((bv, nv, verdict)) = slope_verdict(b, n, opts.tolerance) {
            into.rows
                .push(row("slope", bv, nv, verdict, n.trend.slope.unit.clone()));
        }
        if let (Some(bv), Some(nv)) = (b.trend.last, n.trend.last) {
            let verdict = if nv > bv * (1.0 + opts.tolerance) && nv - bv > 0.0 {
                Verdict::Worse
            } else if nv < bv * (1.0 - opts.tolerance) {
                Verdict::Better
            } else {
                Verdict::Same
            };
            into.rows.push(row("last", bv, nv, verdict, n.info.unit.clone()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::Run;

    fn report(slope: f64, significant: bool, last: f64, pod: &str) -> Report {
        serde_json::from_value(serde_json::json!({
            "workloads": [],
            "server": {"series": [{
                "watch": "rss", "source": "prometheus", "labels": {"pod": pod}, "unit": "bytes",
                "last": last,
                "slope": {"metric": "slope(rss)", "unit": "bytes/s", "slope": slope, "significant": significant, "points": 30,
                          "from_seconds": 0.0, "to_seconds": 100.0},
                "drift": {"metric": "drift(rss)", "unit": "bytes", "first_window": [0.0, 1.0], "last_window": [2.0, 3.0], "significant": false}
            }]}
        }))
        .unwrap()
    }

    fn cmp(a: Report, b: Report) -> Comparison {
        let (a, b) = (Run::of(a, None, "a.json"), Run::of(b, None, "b.json"));
        super::super::compare(&a, &b, &Options::default())
    }

    #[test]
    fn a_build_that_leaks_is_worse_than_one_that_did_not() {
        let c = cmp(report(3.0, false, 1e8, "api-1"), report(3000.0, true, 1.3e8, "api-7"));
        let slope = c.rows.iter().find(|r| r.metric == "slope").unwrap();
        assert_eq!(
            (slope.verdict, slope.workload.as_str()),
            (Verdict::Worse, "server rss{pod=\"api-7\"}")
        );
        let last = c.rows.iter().find(|r| r.metric == "last").unwrap();
        assert_eq!(last.verdict, Verdict::Worse);
        assert!(c.verdict().is_err());
        let text = c.text(&Options::default());
        assert!(text.contains("server rss") && text.contains("MiB"), "{text}");
        // The other way round: better; the same leak twice: same.
        let c = cmp(report(3000.0, true, 1.3e8, "a"), report(3.0, false, 1e8, "a"));
        assert!(c.rows.iter().all(|r| r.verdict == Verdict::Better), "{:?}", c.rows);
        let c = cmp(report(3000.0, true, 1e8, "a"), report(3100.0, true, 1.05e8, "a"));
        assert!(c.rows.iter().all(|r| r.verdict == Verdict::Same), "{:?}", c.rows);
    }
}
