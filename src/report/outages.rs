//! The report's outages, latency excursions and events: the outage
//! thresholds (`outages`, `outage_max`, `recovery_max`, `downtime`)
//! measured on them, and their lines in the text summary.

use std::fmt::Write as _;

use super::{Report, human};
use crate::plan::Metric;
use crate::stats::Outage;

/// What an outage threshold measured on `outages` of `workload` (`None`:
/// every workload) in a run of `secs` seconds so far, and a note when it
/// could not be measured. An outage not over yet counts up to `secs`.
///
/// - `outages`: how many there were;
/// - `outage_max`: the longest, seconds (0 without any);
/// - `recovery_max`: the longest time to recover (0 without any; nothing,
///   which fails, when one had not recovered when the run ended);
/// - `downtime`: the time in an outage as a share of the run (for all
///   workloads, the time any of them was in one).
pub fn measure_outages(
    metric: Metric,
    outages: &[Outage],
    workload: Option<&str>,
    secs: f64,
) -> (Option<f64>, Option<String>) {
    let mine: Vec<&Outage> = outages
        .iter()
        .filter(|o| workload.is_none_or(|w| o.workload == w))
        .collect();
    let span = |o: &Outage| {
        let end = o.end.unwrap_or_else(|| secs.max(o.start + o.duration_seconds));
        (o.start, end.max(o.start))
    };
    match metric {
        Metric::Outages => (Some(mine.len() as f64), None),
        Metric::OutageMax => (
            Some(mine.iter().map(|o| span(o).1 - span(o).0).fold(0.0, f64::max)),
            None,
        ),
        Metric::RecoveryMax => {
            if let Some(o) = mine
                .iter()
                .find(|o| o.recovery_seconds.is_none() && o.baseline_p99.is_some())
            {
                return (
                    None,
                    Some(format!(
                        "the outage of {} at {:.1} s had not recovered when the run ended",
                        o.workload, o.start
                    )),
                );
            }
            (
                Some(mine.iter().filter_map(|o| o.recovery_seconds).fold(0.0, f64::max)),
                None,
            )
        }
        Metric::Downtime => {
            // The union of the outages' spans: two workloads down at once
            // are one downtime.
            let mut spans: Vec<(f64, f64)> = mine.iter().map(|o| span(o)).collect();
            spans.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut total = 0.0;
            let mut cur: Option<(f64, f64)> = None;
            for (a, b) in spans {
                cur = match cur {
                    Some((ca, cb)) if a <= cb => Some((ca, cb.max(b))),
                    Some((ca, cb)) => {
                        total += cb - ca;
                        Some((a, b))
                    }
                    None => Some((a, b)),
                };
            }
            total += cur.map_or(0.0, |(a, b)| b - a);
            ((secs > 0.0).then(|| (total / secs).min(1.0)), None)
        }
        _ => (None, None),
    }
}

impl Report {
    /// The summary's lines for outages, excursions and events (nothing
    /// when the run had none).
    pub(super) fn outage_lines(&self, s: &mut String) {
        if !self.disruptions.outages.is_empty() {
            let (down, _) = measure_outages(Metric::Downtime, &self.disruptions.outages, None, self.duration_seconds);
            let _ = writeln!(
                s,
                "  outages       {} (down {:.2}% of the run)",
                self.disruptions.outages.len(),
                down.unwrap_or(0.0) * 100.0
            );
            for (i, o) in self.disruptions.outages.iter().enumerate() {
                let errors: Vec<String> = o.errors.iter().map(|(k, n)| format!("{k} {n}")).collect();
                let _ = writeln!(
                    s,
                    "    {:>2}  {}  {:.1} s → {}  {:.2} s  ({})  failed {}  missed {}  late {}  connections lost {} ({} desired, fewest open {})  reconnect {}  recovery {}{}",
                    i + 1,
                    o.workload,
                    o.start,
                    o.end.map_or("not over".to_string(), |e| format!("{e:.1} s")),
                    o.duration_seconds,
                    o.cause.join(", "),
                    o.failed,
                    o.missed,
                    o.late,
                    o.connections_lost,
                    o.desired,
                    o.open_min,
                    o.reconnect_seconds.map_or("-".to_string(), |r| format!("{r:.2} s")),
                    match (o.recovery_seconds, o.baseline_p99) {
                        (Some(r), _) => format!("{r:.1} s (p99 back within tolerance of {})", human(o.baseline_p99)),
                        (None, Some(_)) => "not recovered".into(),
                        (None, None) => "- (no latency before it)".into(),
                    },
                    event(&o.event, o.event_offset_seconds),
                );
                if !errors.is_empty() {
                    let _ = writeln!(s, "        errors {}", errors.join("  "));
                }
            }
        }
        if !self.disruptions.excursions.is_empty() {
            let _ = writeln!(
                s,
                "  slowdowns     {} latency excursion(s) without errors",
                self.disruptions.excursions.len()
            );
            for (i, x) in self.disruptions.excursions.iter().enumerate() {
                let _ = writeln!(
                    s,
                    "    {:>2}  {}  {:.1} s → {}  {:.2} s  p50 up to {}, p99 up to {} (p99 before {})  late {}  recovery {}{}",
                    i + 1,
                    x.workload,
                    x.start,
                    x.end.map_or("not over".to_string(), |e| format!("{e:.1} s")),
                    x.duration_seconds,
                    human(x.p50_max),
                    human(x.p99_max),
                    human(x.baseline_p99),
                    x.late,
                    x.recovery_seconds
                        .map_or("not recovered".to_string(), |r| format!("{r:.1} s")),
                    event(&x.event, x.event_offset_seconds),
                );
            }
        }
        if !self.disruptions.events.is_empty() {
            let _ = writeln!(s, "  events");
            for e in &self.disruptions.events {
                let _ = writeln!(
                    s,
                    "    {:<24} at {:.1} s{}  {}  ({}){}",
                    e.name,
                    e.at,
                    e.end.map_or(String::new(), |t| format!(", ended {t:.1} s")),
                    e.status,
                    e.source,
                    e.log.as_ref().map_or(String::new(), |l| format!("  output: {l}"))
                );
            }
        }
    }
}

/// ` event "NAME" (+0.3 s)`, or nothing.
fn event(name: &Option<String>, offset: Option<f64>) -> String {
    match (name, offset) {
        (Some(n), Some(off)) => format!("  event {n:?} ({off:+.1} s)"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(w: &str, start: f64, end: Option<f64>, recovery: Option<f64>) -> Outage {
        Outage {
            workload: w.into(),
            start,
            end,
            duration_seconds: end.map_or(0.0, |e| e - start),
            recovery_seconds: recovery,
            baseline_p99: Some(0.001),
            ..Outage::default()
        }
    }

    #[test]
    fn outage_thresholds_measure_the_list() {
        let list = [
            o("a", 10.0, Some(13.0), Some(1.0)),
            o("b", 12.0, Some(20.0), Some(4.0)),
            o("a", 50.0, Some(51.0), Some(0.0)),
        ];
        let m = |metric, w| measure_outages(metric, &list, w, 100.0).0;
        assert_eq!(m(Metric::Outages, None), Some(3.0));
        assert_eq!(m(Metric::Outages, Some("a")), Some(2.0));
        assert_eq!(m(Metric::OutageMax, None), Some(8.0));
        assert_eq!(m(Metric::OutageMax, Some("a")), Some(3.0));
        assert_eq!(m(Metric::RecoveryMax, None), Some(4.0));
        // 10–20 and 50–51: 11 s of 100, the overlap once.
        assert_eq!(m(Metric::Downtime, None), Some(0.11));
        assert_eq!(m(Metric::Downtime, Some("a")), Some(0.04));
        assert_eq!(m(Metric::OutageMax, Some("c")), Some(0.0), "none: 0");
        // One not over: counted to now, and not recovered.
        let list = [o("a", 90.0, None, None)];
        assert_eq!(measure_outages(Metric::OutageMax, &list, None, 100.0).0, Some(10.0));
        let (v, note) = measure_outages(Metric::RecoveryMax, &list, None, 100.0);
        assert_eq!(v, None);
        assert!(note.unwrap().contains("had not recovered"));
    }
}
