//! Latency excursions: a target that slowed down without failing (a
//! brownout), judged while no outage is on (see the parent module's doc).

use std::time::Duration;

use super::records::{Excursion, max_secs};
use super::slice::Closed;
use super::{Aftermath, BASE_INTERVAL, Outages, recover};

/// Fewest responses a second needs for its median to start an excursion:
/// half of them beyond it is `soakd compare`'s 10 samples past a quantile
/// (its `MIN_TAIL`), below which a quantile is a handful of events.
pub(super) const MIN_RESPONSES: u64 = 20;

/// A slice this much longer than its second says soakd itself did not run
/// (its drains, every 250 ms, came that late): responses read after such
/// a stall carry soakd's own time, which the schedule lag does not see
/// (it ends at the write). bench/outages.sh measured one on a machine
/// busy with others' builds: slices of 1.6 s and 3.2 s, nothing sent for
/// 1.5 s, then a median of 2.5 s. Such a slice is no evidence about the
/// target: it neither starts nor prolongs an excursion, nor joins the
/// minute before.
pub(super) const STALLED: Duration = Duration::from_millis(500);

/// A slow second waiting for the next one: an excursion is two slow
/// seconds in a row or more. One alone is what a busy machine does to a
/// soak (soakd starved for a second, responses read late: bench/outages.sh
/// measured five such seconds in ten minutes at a load average of 15, none
/// two in a row), not what a brownout does.
#[derive(Clone, Copy, Debug)]
pub(super) struct FirstSlow {
    start: std::time::Duration,
    base_us: u64,
    p50: Option<u64>,
    p99: Option<u64>,
    late: u64,
}

/// A latency excursion not over yet.
#[derive(Debug)]
pub(super) struct Slow {
    pub(super) index: usize,
    pub(super) base_us: u64,
    /// The median came back: since when (the end, once settled), and
    /// the recovery being looked for from there.
    pub(super) settling: Option<Aftermath>,
}

impl Outages {
    /// Latency excursions, while no outage is on.
    pub(super) fn excursion(&mut self, wi: usize, c: &Closed, p99: Option<u64>) {
        let Some(rules) = self.rules else { return };
        if c.end.saturating_sub(c.start) > BASE_INTERVAL + STALLED {
            return;
        }
        let w = &mut self.watches[wi];
        let p50 = c.latency.quantile_us(0.5);
        // The target's share of the median: latency counts from the due
        // time, so soakd's own lateness (a starved generator) is taken
        // out; a slow server that keeps every connection busy is not
        // (its responses still take their time after the write).
        let slow_against = |base: u64| {
            c.completed >= MIN_RESPONSES
                && p50.is_some_and(|m| rules.worse(base, m.saturating_sub(c.lag_p50.unwrap_or(0))))
        };
        match w.slow.as_mut() {
            Some(s) => {
                let e = &mut self.excursions[s.index];
                if s.settling.is_none_or(|a| a.recovering) {
                    e.late += c.latency.count_above_us(rules.bound_us(s.base_us));
                }
                if slow_against(s.base_us) {
                    s.settling = None;
                    e.recovery_seconds = None;
                    e.p50_max = max_secs(e.p50_max, p50);
                    e.p99_max = max_secs(e.p99_max, p99);
                    return;
                }
                let a = s.settling.get_or_insert(Aftermath {
                    index: s.index,
                    end: c.start,
                    base_us: Some(s.base_us),
                    reconnecting: false,
                    recovering: true,
                });
                recover(&mut e.recovery_seconds, &rules, Some(a), c, p99);
                if c.end.saturating_sub(a.end) >= rules.settle {
                    e.end = Some(a.end.as_secs_f64());
                    e.duration_seconds = (a.end.as_secs_f64() - e.start).max(0.0);
                    if a.recovering {
                        w.excursion_after.push(*a);
                    }
                    w.slow = None;
                }
            }
            None => {
                let base = match w.first_slow {
                    Some(f) => Some(f.base_us),
                    None => w.minute_p99(),
                };
                let slow = base.filter(|b| w.armed && slow_against(*b));
                match (slow, w.first_slow.take()) {
                    (Some(base_us), None) => {
                        // Kept out of the minute before, and waiting for
                        // the next second.
                        w.first_slow = Some(FirstSlow {
                            start: c.start,
                            base_us,
                            p50,
                            p99,
                            late: c.latency.count_above_us(rules.bound_us(base_us)),
                        });
                        return;
                    }
                    (Some(base_us), Some(f)) => {
                        let index = self.excursions.len();
                        self.excursions.push(Excursion {
                            workload: w.name.clone(),
                            start: f.start.as_secs_f64(),
                            p50_max: max_secs(max_secs(None, f.p50), p50),
                            p99_max: max_secs(max_secs(None, f.p99), p99),
                            late: f.late + c.latency.count_above_us(rules.bound_us(base_us)),
                            baseline_p99: max_secs(None, Some(base_us)),
                            ..Excursion::default()
                        });
                        w.slow = Some(Slow {
                            index,
                            base_us,
                            settling: None,
                        });
                        return;
                    }
                    // One slow second alone: the machine, not the target.
                    (None, _) => {}
                }
                if !c.latency.is_empty() {
                    w.remember(&c.latency);
                }
            }
        }
    }
}
