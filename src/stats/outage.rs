//! Outages found in the data: when a target stopped answering, what that
//! cost, and how long it took to come back.
//!
//! A week-long soak is never quiet (deploys, fail-overs, a network that
//! drops for ten seconds), and what an operator needs afterwards is not the
//! week's p99 but what each disruption cost. soakd sees every request, so
//! it finds them itself, on the same drained deltas the timeline is built
//! from, per workload:
//!
//! - **Slices.** The deltas are summed into one-second slices
//!   ([`BASE_INTERVAL`], the timeline's first interval, whatever the
//!   timeline's points have coarsened to). A slice is *bad* when errors
//!   exceed [`Rules::errors`] of its attempts (completed + errors; the
//!   host's own limits, [`ErrorKind::HOST`], are not the target's) or when
//!   open connections fell below [`Rules::open`] of those expected (the
//!   workload's desired connections, but never more than were open since
//!   the desired count last changed: a stage that adds connections ramps,
//!   it does not lose them), unless nothing failed while connections
//!   opened and responses came (soakd reconnecting at its ramp's pace: the
//!   server answers again, and the reconnect time measures the rest). A
//!   slice with no attempt and its connections
//!   up is *silent*: no evidence either way. Judging whole slices, not
//!   single requests, is what keeps a healthy soak on a noisy machine at
//!   zero outages.
//! - **Start and end.** An outage starts with the first bad slice of an
//!   armed workload (its ramp done, the run not stopping) and ends where
//!   both figures came back, once they stayed back for [`Rules::settle`]:
//!   the duration is the downtime, not the downtime plus the settle. Both
//!   boundaries are placed at the drain (250 ms) in which they were seen:
//!   the start at the beginning of the slice's first bad drain, the end at
//!   the end of the last bad one.
//! - **What it cost.** Requests failed by kind, requests missed, late
//!   responses (slower than the minute before's p99 allows, from the start
//!   until recovery), connections lost (closed by an error or the server),
//!   the fewest open. **Reconnect time**: from the end until every desired
//!   connection was open again (drain resolution). **Time to recover**:
//!   from the end until a second's p99 is back within `soakd compare`'s
//!   tolerance ([`rank::beyond_tolerance`]) of the p99 of the minute
//!   before the outage (slice resolution); `None` when the run ended
//!   first.
//! - **Latency excursions.** A slowdown with neither errors nor closes (a
//!   brownout) is not an outage: it is an [`Excursion`], found when a
//!   second's median (of at least 20 responses, `excursion::MIN_RESPONSES`),
//!   and the next second's too, is worse,
//!   by the same tolerance rule, than the minute before's p99 once soakd's
//!   own schedule lag is taken out of it (so a starved generator is not
//!   blamed on the server, as `compare` does not; a second in which soakd
//!   did not run at all, its slice stretched by half a second or more, is
//!   no evidence either way, `excursion::STALLED`); it ends when the
//!   median stayed back for the settle, and has a time to recover like an
//!   outage.
//!
//! While an outage is on, [`Outages::active_mask`] says so; the control
//! loop hands it to the workers, whose probing slots then find the
//! server's return within a fraction of a second, instead of at the next
//! step of a backoff that may be seconds long.

use std::collections::VecDeque;
use std::time::Duration;

mod excursion;
mod records;
mod slice;

pub use records::{Excursion, Outage};

use excursion::{FirstSlow, Slow};
use records::{BY_CONNECTIONS, BY_ERRORS, Figures, cause_names, fill};
use slice::{Closed, Drain, MAX_DRAINS, Slice, Verdict};

use super::rank::beyond_tolerance;
use super::sparse::Sparse;
use super::{BASE_INTERVAL, CloseReason, ErrorKind, WorkloadStats};

/// Seconds of latency "the minute before" holds.
const MINUTE: usize = 60;
/// How outages are told from noise (`--outage-errors`, `--outage-open`,
/// `--outage-settle`, and `soakd compare`'s tolerance rule).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rules {
    /// A slice is bad when errors exceed this share of its attempts.
    pub errors: f64,
    /// A slice is bad when open connections fall below this share of
    /// those expected.
    pub open: f64,
    /// How long both must stay back for an outage to end.
    pub settle: Duration,
    /// `soakd compare`'s tolerance (0.1 = 10%).
    pub tolerance: f64,
    /// `soakd compare`'s smallest latency change that counts, seconds.
    pub min_latency_change: f64,
}

impl Rules {
    /// The slowest p99 (µs) still within tolerance of `base`.
    fn bound_us(&self, base: u64) -> u64 {
        let b = base as f64;
        (b * (1.0 + self.tolerance)).max(b + self.min_latency_change * 1e6) as u64
    }

    /// `new` µs is worse than `base` µs beyond the tolerance rule.
    fn worse(&self, base: u64, new: u64) -> bool {
        new > base
            && beyond_tolerance(
                base as f64 / 1e6,
                new as f64 / 1e6,
                self.tolerance,
                self.min_latency_change,
            )
    }
}

/// After an outage's end (or an excursion's): the reconnect and the
/// recovery being looked for.
#[derive(Clone, Copy, Debug)]
struct Aftermath {
    /// Index into the outages (or excursions) list.
    index: usize,
    end: Duration,
    base_us: Option<u64>,
    /// Still looking for every connection open (outages only).
    reconnecting: bool,
    /// Still looking for the p99 back.
    recovering: bool,
}

/// An outage not over yet.
#[derive(Debug)]
struct Down {
    index: usize,
    base_us: Option<u64>,
    figures: Figures,
    cause: u8,
    open_min: u64,
    /// The end of the last bad drain so far.
    last_bad_end: Duration,
    /// The first drain since the last bad one (or that one) at whose end
    /// every desired connection was open.
    full_at: Option<Duration>,
    /// Both figures came back: since when (the first good slice's
    /// start), where it ended, and the figures of the slices since (the
    /// first one, which holds the end, and the later ones).
    settling: Option<Settling>,
}

#[derive(Debug)]
struct Settling {
    good_since: Duration,
    after: Aftermath,
    first: Figures,
    later: Figures,
}

/// One workload's watch.
#[derive(Debug)]
struct Watch {
    name: String,
    /// Judge open connections (not for `--close`, whose slots are open
    /// only while a request is owed).
    check_open: bool,
    slice: Slice,
    /// This drain's counted errors and attempts.
    drain_errors: u64,
    drain_attempts: u64,
    /// This drain's connections opened and responses completed.
    drain_opened: u64,
    drain_completed: u64,
    open: u64,
    desired: u64,
    /// Most connections open since `desired` last changed.
    high_water: u64,
    armed: bool,
    /// The minute before: the last normal seconds' latency. A second
    /// that leaves it is the room the next one is copied into.
    minute: VecDeque<Sparse>,
    /// Room for the minute merged (its p99 is read every second) and for
    /// each merge's work: made once, so the outage watch allocates nothing
    /// a second (issue 29).
    minute_sum: Sparse,
    minute_scratch: Sparse,
    down: Option<Down>,
    slow: Option<Slow>,
    /// A slow second waiting for the next (see `excursion.rs`).
    first_slow: Option<FirstSlow>,
    /// Outages and excursions that ended, still looking for their
    /// reconnect or recovery.
    outage_after: Vec<Aftermath>,
    excursion_after: Vec<Aftermath>,
    /// Outages so far.
    count: u64,
}

impl Watch {
    fn new(name: String, check_open: bool, start: Duration) -> Watch {
        Watch {
            name,
            check_open,
            slice: Slice::new(start),
            drain_errors: 0,
            drain_attempts: 0,
            drain_opened: 0,
            drain_completed: 0,
            open: 0,
            desired: 0,
            high_water: 0,
            armed: false,
            minute: VecDeque::with_capacity(MINUTE + 1),
            minute_sum: Sparse::reserved(),
            minute_scratch: Sparse::reserved_for_merges(),
            down: None,
            slow: None,
            first_slow: None,
            outage_after: Vec::new(),
            excursion_after: Vec::new(),
            count: 0,
        }
    }

    /// Open connections fell below `share` of those expected: the
    /// desired ones, but no more than were open since the desired count
    /// last changed.
    fn lost(&self, share: f64) -> bool {
        let expected = self.desired.min(self.high_water);
        self.check_open && expected > 0 && (self.open as f64) < share * expected as f64
    }

    /// The p99 of the minute before, µs.
    fn minute_p99(&mut self) -> Option<u64> {
        let (all, scratch) = (&mut self.minute_sum, &mut self.minute_scratch);
        all.clear();
        for s in &self.minute {
            all.merge_using(s, scratch);
        }
        all.quantile_us(0.99)
    }

    /// Adds a normal second's latency to the minute before.
    fn remember(&mut self, latency: &Sparse) {
        let mut second = if self.minute.len() >= MINUTE {
            self.minute.pop_front().expect("the minute is full")
        } else {
            Sparse::reserved()
        };
        second.copy_from(latency);
        self.minute.push_back(second);
    }
}

/// Every workload's outages and excursions, and the state that finds
/// them. See the module doc.
#[derive(Debug)]
pub struct Outages {
    /// `None`: nothing is watched (totals made without a plan: tests,
    /// the metrics' first snapshot of a continued run).
    rules: Option<Rules>,
    watches: Vec<Watch>,
    outages: Vec<Outage>,
    excursions: Vec<Excursion>,
    last_tick: Duration,
    /// The run began its stop: nothing more is judged.
    stopped: bool,
    /// The run is stopping; [`Outages::tick`] ends what is open.
    stopping: bool,
}

impl Outages {
    /// Watches `workloads` (name, and whether its open connections are
    /// judged: not with `--close`) under `rules`.
    pub fn new(rules: Rules, workloads: impl IntoIterator<Item = (String, bool)>) -> Outages {
        let mut o = Outages {
            rules: Some(rules),
            ..Outages::default()
        };
        for (name, check_open) in workloads {
            o.watch(name, check_open);
        }
        o
    }

    /// The rules in force (`None`: nothing is watched).
    pub fn rules(&self) -> Option<Rules> {
        self.rules
    }

    /// Watches one more workload (in plan order; a reload added it);
    /// `check_open`: judge its open connections too.
    pub fn watch(&mut self, name: String, check_open: bool) {
        if self.rules.is_some() {
            self.watches.push(Watch::new(name, check_open, self.last_tick));
        }
    }
}

impl Default for Outages {
    /// Watching nothing.
    fn default() -> Outages {
        Outages {
            rules: None,
            watches: Vec::new(),
            outages: Vec::new(),
            excursions: Vec::new(),
            last_tick: Duration::ZERO,
            stopped: false,
            stopping: false,
        }
    }
}

impl Outages {
    /// Whether workload `wi`'s open connections are judged (a reload may
    /// turn `--close` on or off).
    pub fn check_open(&mut self, wi: usize, on: bool) {
        if let Some(w) = self.watches.get_mut(wi) {
            w.check_open = on;
        }
    }

    /// Adds one drained delta of workload `wi`.
    pub fn add(&mut self, wi: usize, s: &WorkloadStats) {
        let Some(w) = self.watches.get_mut(wi) else { return };
        let c = &s.counters;
        let counted: u64 = ErrorKind::ALL
            .iter()
            .filter(|k| !ErrorKind::HOST.contains(k))
            .map(|k| c.errors_of(*k))
            .sum();
        w.drain_errors += counted;
        w.drain_attempts += counted + c.completed;
        w.drain_opened += c.opened;
        w.drain_completed += c.completed;
        let f = &mut w.slice.figures;
        for (a, b) in f.errors.iter_mut().zip(c.errors) {
            *a += b;
        }
        f.failed += c.failed;
        f.missed += c.missed;
        f.lost += c.closed[CloseReason::Error as usize] + c.closed[CloseReason::ServerClose as usize];
        w.slice.completed += c.completed;
        w.slice.errors += counted;
        for (to, from) in [(&mut w.slice.latency, &s.latency), (&mut w.slice.lag, &s.lag)] {
            if !from.is_empty() {
                to.add(from).expect("histograms share the upper bound");
            }
        }
    }

    /// Workload `wi`'s connections after a drain; `armed`: its ramp is
    /// done (outages may start); `running`: the run is not stopping.
    pub fn level(&mut self, wi: usize, open: u64, desired: u64, armed: bool, running: bool) {
        if !running {
            self.stopping = true;
        }
        let Some(w) = self.watches.get_mut(wi) else { return };
        if desired != w.desired {
            w.desired = desired;
            w.high_water = open;
        } else {
            w.high_water = w.high_water.max(open);
        }
        w.open = open;
        w.armed = armed;
    }

    /// Called after each drain with the run time: closes the drain, and
    /// the slice once its second is over.
    pub fn tick(&mut self, elapsed: Duration) {
        if self.stopped {
            return;
        }
        let from = self.last_tick;
        self.last_tick = elapsed;
        if self.stopping {
            self.stop(from);
            return;
        }
        let Some(rules) = self.rules else { return };
        for wi in 0..self.watches.len() {
            let w = &mut self.watches[wi];
            let errors_bad = w.drain_attempts > 0 && w.drain_errors as f64 > rules.errors * w.drain_attempts as f64;
            // Connections short while nothing fails, new ones open and
            // responses come: soakd reconnecting (paced by its ramp), not
            // the target losing them. The outage ends when the server
            // answers again; the reconnect time says how long the rest took.
            let reconnecting = w.drain_errors == 0 && w.drain_opened > 0 && w.drain_completed > 0;
            let lost = w.lost(rules.open) && !reconnecting;
            let full = w.check_open && w.open >= w.desired;
            if w.slice.drains.len() < MAX_DRAINS {
                w.slice.drains.push(Drain {
                    from,
                    to: elapsed,
                    bad: errors_bad || lost,
                    full,
                });
            }
            w.slice.open_min = Some(w.slice.open_min.map_or(w.open, |m| m.min(w.open)));
            if lost {
                w.slice.cause |= BY_CONNECTIONS;
            }
            (w.drain_errors, w.drain_attempts, w.drain_opened, w.drain_completed) = (0, 0, 0, 0);
            if let Some(d) = w.down.as_mut().filter(|d| d.settling.is_none()) {
                if errors_bad || lost {
                    d.full_at = full.then_some(elapsed);
                } else if full && d.full_at.is_none() {
                    d.full_at = Some(elapsed);
                }
            }
            // Reconnects are looked for drain by drain.
            let to = elapsed;
            if full {
                let mut found = Vec::new();
                for a in w.outage_after.iter_mut().filter(|a| a.reconnecting && to >= a.end) {
                    a.reconnecting = false;
                    found.push((a.index, to - a.end));
                }
                if let Some(s) = w.down.as_mut().and_then(|d| d.settling.as_mut())
                    && s.after.reconnecting
                    && to >= s.after.end
                {
                    s.after.reconnecting = false;
                    found.push((s.after.index, to - s.after.end));
                }
                for (i, d) in found {
                    self.outages[i].reconnect_seconds = Some(d.as_secs_f64());
                }
            }
            let w = &mut self.watches[wi];
            w.outage_after.retain(|a| a.reconnecting || a.recovering);
            if elapsed >= w.slice.start + BASE_INTERVAL {
                self.close_slice(wi, elapsed);
            }
        }
    }

    /// The run stopped at `at`: what is still open ends here (an outage
    /// not over yet stays without an end; one that was settling ended
    /// where its figures came back).
    fn stop(&mut self, at: Duration) {
        self.stopped = true;
        for wi in 0..self.watches.len() {
            let w = &mut self.watches[wi];
            if let Some(d) = w.down.take() {
                let o = &mut self.outages[d.index];
                match d.settling {
                    Some(s) => {
                        let mut f = d.figures;
                        f.add(&s.first);
                        o.end = Some(s.after.end.as_secs_f64());
                        o.duration_seconds = (s.after.end.as_secs_f64() - o.start).max(0.0);
                        fill(o, &f, d.cause, d.open_min);
                    }
                    None => {
                        o.duration_seconds = (at.as_secs_f64() - o.start).max(0.0);
                        fill(o, &d.figures, d.cause, d.open_min);
                    }
                }
            }
            if let Some(s) = w.slow.take() {
                let e = &mut self.excursions[s.index];
                let back = s.settling.map(|a| a.end);
                e.end = back.map(|b| b.as_secs_f64());
                e.duration_seconds = (back.unwrap_or(at).as_secs_f64() - e.start).max(0.0);
            }
            w.outage_after.clear();
            w.excursion_after.clear();
        }
    }

    /// Judges the slice of workload `wi` that ended at `end` and starts
    /// the next.
    fn close_slice(&mut self, wi: usize, end: Duration) {
        let Some(rules) = self.rules else { return };
        let w = &mut self.watches[wi];
        let attempts = w.slice.errors + w.slice.completed;
        let errors_bad = attempts > 0 && w.slice.errors as f64 > rules.errors * attempts as f64;
        let mut cause = w.slice.cause;
        if errors_bad {
            cause |= BY_ERRORS;
        }
        let verdict = if cause != 0 {
            Verdict::Bad
        } else if attempts == 0 {
            Verdict::Silent
        } else {
            Verdict::Good
        };
        let lag = Sparse::of(&w.slice.lag);
        let c = Closed {
            start: w.slice.start,
            end,
            verdict,
            cause,
            figures: w.slice.figures,
            completed: w.slice.completed,
            open_min: w.slice.open_min.unwrap_or(w.open),
            latency: Sparse::of(&w.slice.latency),
            lag_p50: lag.quantile_us(0.5),
            drains: std::mem::take(&mut w.slice.drains),
        };
        w.slice.restart(end);
        self.judge(wi, c);
    }

    /// The state machine, one closed slice at a time.
    fn judge(&mut self, wi: usize, c: Closed) {
        let Some(rules) = self.rules else { return };
        let p99 = c.latency.quantile_us(0.99);
        // Recoveries and late responses of what already ended.
        self.aftermaths(wi, &c, p99);
        let w = &mut self.watches[wi];
        match w.down.as_mut() {
            None if w.armed && c.verdict == Verdict::Bad => {
                let base_us = w.minute_p99();
                let start = c.first_bad().unwrap_or(c.start);
                let index = self.outages.len();
                self.outages.push(Outage {
                    workload: w.name.clone(),
                    start: start.as_secs_f64(),
                    desired: w.desired,
                    cause: cause_names(c.cause),
                    baseline_p99: base_us.map(|b| b as f64 / 1e6),
                    late: base_us.map_or(0, |b| c.latency.count_above_us(rules.bound_us(b))),
                    ..Outage::default()
                });
                w.count += 1;
                w.first_slow = None;
                // An excursion the outage overtakes ends where its median
                // came back, or where the outage begins.
                if let Some(s) = w.slow.take() {
                    let e = &mut self.excursions[s.index];
                    let end = s.settling.map_or(start, |a| a.end.min(start));
                    e.end = Some(end.as_secs_f64());
                    e.duration_seconds = (end.as_secs_f64() - e.start).max(0.0);
                }
                w.down = Some(Down {
                    index,
                    base_us,
                    figures: c.figures,
                    cause: c.cause,
                    open_min: c.open_min,
                    last_bad_end: c.last_bad_end().unwrap_or(c.end),
                    full_at: c.drains.last().filter(|d| d.full).map(|d| d.to),
                    settling: None,
                });
                return;
            }
            None => {
                self.excursion(wi, &c, p99);
                return;
            }
            Some(_) => {}
        }
        let d = w.down.as_mut().expect("matched above");
        if d.base_us.is_some() {
            self.outages[d.index].late += d.base_us.map_or(0, |b| c.latency.count_above_us(rules.bound_us(b)));
        }
        match (c.verdict, d.settling.as_mut()) {
            (Verdict::Bad, settling) => {
                // Not over after all: what came since counts.
                if let Some(s) = settling.map(|s| (s.first, s.later)) {
                    d.figures.add(&s.0);
                    d.figures.add(&s.1);
                }
                d.settling = None;
                let o = &mut self.outages[d.index];
                (o.reconnect_seconds, o.recovery_seconds) = (None, None);
                d.figures.add(&c.figures);
                d.cause |= c.cause;
                d.open_min = d.open_min.min(c.open_min);
                d.last_bad_end = c.last_bad_end().unwrap_or(c.end);
            }
            (Verdict::Silent, None) => {
                // No evidence the target is back.
                d.figures.add(&c.figures);
                d.open_min = d.open_min.min(c.open_min);
            }
            (Verdict::Good, None) => {
                let end = c.last_bad_end().unwrap_or(d.last_bad_end);
                let mut after = Aftermath {
                    index: d.index,
                    end,
                    base_us: d.base_us,
                    reconnecting: w.check_open,
                    recovering: true,
                };
                // Reconnected already (drains are judged as they come)?
                if after.reconnecting
                    && let Some(t) = d.full_at.filter(|t| *t >= end)
                {
                    after.reconnecting = false;
                    self.outages[d.index].reconnect_seconds = Some((t - end).as_secs_f64());
                }
                let holds_end = c.last_bad_end().is_some();
                d.settling = Some(Settling {
                    good_since: c.start,
                    after,
                    first: if holds_end { c.figures } else { Figures::default() },
                    later: Figures::default(),
                });
                recover(
                    &mut self.outages[d.index].recovery_seconds,
                    &rules,
                    d.settling.as_mut().map(|s| &mut s.after),
                    &c,
                    p99,
                );
            }
            (Verdict::Good | Verdict::Silent, Some(s)) => {
                s.later.add(&c.figures);
                recover(
                    &mut self.outages[d.index].recovery_seconds,
                    &rules,
                    Some(&mut s.after),
                    &c,
                    p99,
                );
            }
        }
        let settled = d
            .settling
            .as_ref()
            .is_some_and(|s| c.end.saturating_sub(s.good_since) >= rules.settle);
        if settled {
            let d = w.down.take().expect("an outage is on");
            let s = d.settling.expect("settled");
            let mut f = d.figures;
            f.add(&s.first);
            let o = &mut self.outages[d.index];
            o.end = Some(s.after.end.as_secs_f64());
            o.duration_seconds = (s.after.end.as_secs_f64() - o.start).max(0.0);
            fill(o, &f, d.cause, d.open_min);
            if s.after.reconnecting || s.after.recovering {
                w.outage_after.push(s.after);
            }
        }
    }

    /// Recoveries (and late responses until them) of outages and
    /// excursions that ended.
    fn aftermaths(&mut self, wi: usize, c: &Closed, p99: Option<u64>) {
        let Some(rules) = self.rules else { return };
        let w = &mut self.watches[wi];
        for a in w.outage_after.iter_mut().filter(|a| a.recovering) {
            let o = &mut self.outages[a.index];
            recover(&mut o.recovery_seconds, &rules, Some(a), c, p99);
            if a.recovering {
                o.late += a.base_us.map_or(0, |b| c.latency.count_above_us(rules.bound_us(b)));
            }
        }
        w.outage_after.retain(|a| a.reconnecting || a.recovering);
        for a in w.excursion_after.iter_mut() {
            let e = &mut self.excursions[a.index];
            recover(&mut e.recovery_seconds, &rules, Some(a), c, p99);
            if a.recovering {
                e.late += a.base_us.map_or(0, |b| c.latency.count_above_us(rules.bound_us(b)));
            }
        }
        w.excursion_after.retain(|a| a.recovering);
    }

    /// Per workload (bit `wi`, the 64th bit standing for every later
    /// one): an outage is on and the server has not answered since.
    pub fn active_mask(&self) -> u64 {
        let mut mask = 0u64;
        for (wi, w) in self.watches.iter().enumerate() {
            if w.down.as_ref().is_some_and(|d| d.settling.is_none()) {
                mask |= 1 << wi.min(63);
            }
        }
        mask
    }

    /// Whether workload `wi` is in an outage now.
    pub fn active(&self, wi: usize) -> bool {
        self.watches.get(wi).is_some_and(|w| w.down.is_some())
    }

    /// Outages of workload `wi` so far (the one going on included).
    pub fn count(&self, wi: usize) -> u64 {
        self.watches.get(wi).map_or(0, |w| w.count)
    }

    /// Workload `wi`'s last outage that ended.
    pub fn last_ended(&self, wi: usize) -> Option<&Outage> {
        let name = &self.watches.get(wi)?.name;
        self.outages
            .iter()
            .rev()
            .find(|o| &o.workload == name && o.end.is_some())
    }

    /// Every outage so far, in the order they began (one going on has no
    /// end yet).
    pub fn outages(&self) -> &[Outage] {
        &self.outages
    }

    /// Every latency excursion so far.
    pub fn excursions(&self) -> &[Excursion] {
        &self.excursions
    }

    /// The lists as a checkpoint carries them.
    pub fn saved(&self) -> (Vec<Outage>, Vec<Excursion>) {
        (self.outages.clone(), self.excursions.clone())
    }

    /// Continues a checkpointed run's lists (what was going on at the
    /// checkpoint stays without an end), counting its outages again.
    pub fn restore(&mut self, outages: Vec<Outage>, excursions: Vec<Excursion>, now: Duration) {
        for w in &mut self.watches {
            w.count += outages.iter().filter(|o| o.workload == w.name).count() as u64;
            w.slice.restart(now);
        }
        self.outages = outages;
        self.excursions = excursions;
        self.last_tick = now;
    }
}

/// Looks for the recovery in slice `c` (whose p99 is `p99`): the first
/// second with responses whose p99 is within tolerance of the minute
/// before, counted from the end (0 when the second holding the end is).
fn recover(out: &mut Option<f64>, rules: &Rules, after: Option<&mut Aftermath>, c: &Closed, p99: Option<u64>) {
    let Some(a) = after else { return };
    if !a.recovering || c.end <= a.end {
        return;
    }
    let Some(base) = a.base_us else {
        // Nothing measured before: nothing to be back to.
        a.recovering = false;
        return;
    };
    if let Some(p) = p99
        && !rules.worse(base, p)
    {
        a.recovering = false;
        *out = Some(c.start.max(a.end).saturating_sub(a.end).as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DRAIN: Duration = Duration::from_millis(250);

    /// What one drain (250 ms) of one workload brings.
    #[derive(Clone, Copy)]
    struct D {
        completed: u64,
        errors: u64,
        kind: ErrorKind,
        latency_us: u64,
        lag_us: u64,
        open: u64,
        desired: u64,
        lost: u64,
        opened: u64,
    }

    /// 100 connections, 25 responses of 1 ms a drain, nothing wrong.
    const OK: D = D {
        completed: 25,
        errors: 0,
        kind: ErrorKind::ConnectRefused,
        latency_us: 1_000,
        lag_us: 20,
        open: 100,
        desired: 100,
        lost: 0,
        opened: 0,
    };

    fn rules() -> Rules {
        Rules {
            errors: 0.05,
            open: 0.9,
            settle: Duration::from_secs(5),
            tolerance: 0.1,
            min_latency_change: 0.001,
        }
    }

    struct Sim {
        o: Outages,
        t: Duration,
        rng: fastrand::Rng,
        armed: bool,
        running: bool,
    }

    impl Sim {
        fn new(check_open: bool) -> Sim {
            Sim {
                o: Outages::new(rules(), [("api".to_string(), check_open)]),
                t: Duration::ZERO,
                rng: fastrand::Rng::with_seed(3),
                armed: true,
                running: true,
            }
        }

        fn drain(&mut self, d: D) {
            let mut s = WorkloadStats::default();
            s.counters.completed = d.completed;
            s.counters.sent = d.completed;
            s.counters.error(d.kind, d.errors);
            s.counters.closed[CloseReason::Error as usize] = d.lost;
            s.counters.opened = d.opened;
            for _ in 0..d.completed {
                // ±20% around the latency, so quantiles are not all one value.
                let us = (d.latency_us as f64 * (0.8 + 0.4 * self.rng.f64())) as u64;
                s.latency.record(us.max(1)).unwrap();
                s.lag.record(d.lag_us.max(1)).unwrap();
            }
            self.o.add(0, &s);
            self.o.level(0, d.open, d.desired, self.armed, self.running);
            self.t += DRAIN;
            self.o.tick(self.t);
        }

        /// `secs` seconds of `d`.
        fn run(&mut self, secs: f64, d: D) {
            for _ in 0..(secs * 4.0).round() as u64 {
                self.drain(d);
            }
        }

        fn outages(&self) -> &[Outage] {
            self.o.outages()
        }
    }

    fn down() -> D {
        D {
            completed: 0,
            errors: 4,
            open: 0,
            ..OK
        }
    }

    #[test]
    fn a_quiet_noisy_run_has_no_outage() {
        let mut sim = Sim::new(true);
        for i in 0..600u64 {
            // A stray error now and then, latency wandering, a connection
            // or two reconnecting, one slow drain in 50.
            let mut d = OK;
            d.errors = u64::from(i % 7 == 0);
            d.kind = ErrorKind::Reset;
            d.open = 100 - (i % 3);
            if i % 50 == 7 {
                d.latency_us = 30_000;
            }
            sim.drain(d);
        }
        assert!(sim.outages().is_empty(), "{:?}", sim.outages());
        assert!(sim.o.excursions().is_empty(), "{:?}", sim.o.excursions());
        assert_eq!(sim.o.active_mask(), 0);
    }

    #[test]
    fn a_stop_is_one_outage_from_the_first_error_to_the_server_back() {
        let mut sim = Sim::new(true);
        sim.run(30.0, OK);
        // Down at 30 s for 8 s: connections gone, refused connects.
        sim.drain(D { lost: 100, ..down() });
        assert_eq!(sim.o.active_mask(), 0, "judged at the slice's end");
        sim.run(1.0, down());
        assert_eq!(sim.o.active_mask(), 1);
        assert!(sim.o.active(0));
        sim.run(6.75, down());
        // Back: all connections within a drain, late requests for 2 s.
        sim.run(
            2.0,
            D {
                latency_us: 400_000,
                ..OK
            },
        );
        assert_eq!(sim.o.active_mask(), 0, "the server answered: no more probing");
        assert!(sim.o.active(0), "settling");
        sim.run(10.0, OK);
        assert!(!sim.o.active(0));
        let o = &sim.outages()[0];
        assert_eq!(sim.outages().len(), 1);
        assert_eq!((o.start, o.end), (30.0, Some(38.0)), "{o:?}");
        assert_eq!(o.duration_seconds, 8.0);
        assert_eq!(o.cause, ["errors", "connections"]);
        assert_eq!(o.errors["connect_refused"], 32 * 4);
        assert_eq!((o.connections_lost, o.open_min, o.desired), (100, 0, 100));
        assert_eq!(o.reconnect_seconds, Some(0.25));
        assert_eq!(o.recovery_seconds, Some(2.0));
        assert_eq!(o.late, 2 * 100);
        assert!((o.baseline_p99.unwrap() - 0.0012).abs() < 0.0001, "{o:?}");
        assert_eq!(sim.o.count(0), 1);
        assert_eq!(sim.o.last_ended(0), Some(o));
    }

    #[test]
    fn errors_back_within_the_settle_are_the_same_outage() {
        let mut sim = Sim::new(true);
        sim.run(20.0, OK);
        sim.run(3.0, down());
        sim.run(3.0, OK);
        sim.run(2.0, down());
        sim.run(10.0, OK);
        assert_eq!(sim.outages().len(), 1, "{:?}", sim.outages());
        let o = &sim.outages()[0];
        assert_eq!((o.start, o.end), (20.0, Some(28.0)));
        assert_eq!(o.errors["connect_refused"], 5 * 16);
        // Two outages when the gap is longer than the settle.
        let mut sim = Sim::new(true);
        sim.run(20.0, OK);
        sim.run(3.0, down());
        sim.run(6.0, OK);
        sim.run(2.0, down());
        sim.run(10.0, OK);
        let spans: Vec<(f64, Option<f64>)> = sim.outages().iter().map(|o| (o.start, o.end)).collect();
        assert_eq!(spans, [(20.0, Some(23.0)), (29.0, Some(31.0))]);
    }

    #[test]
    fn slow_reconnects_are_the_reconnect_time_not_the_outage() {
        let mut sim = Sim::new(true);
        sim.run(20.0, OK);
        sim.run(4.0, down());
        // The server answers; connections come back over 3 s, the ramp's
        // pace (open reaches 90% after 2.75 s), a last refused connect in
        // the first drain.
        for i in 1..=12u64 {
            let open = (i * 100 / 12).min(100);
            let errors = u64::from(i == 1);
            sim.drain(D {
                open,
                errors,
                opened: 8,
                ..OK
            });
        }
        sim.run(10.0, OK);
        let o = &sim.outages()[0];
        // It ends where the server answered and nothing failed any more
        // (after the drain ending at 24.25 s); every connection is open
        // 2.75 s later.
        assert_eq!((o.start, o.end), (20.0, Some(24.25)), "{o:?}");
        assert_eq!(o.reconnect_seconds, Some(2.75));
        // Connections short without anything opening or answering are
        // lost, not reconnecting: still the outage.
        let mut sim = Sim::new(true);
        sim.run(20.0, OK);
        sim.run(4.0, down());
        sim.run(
            3.0,
            D {
                open: 50,
                completed: 0,
                ..OK
            },
        );
        sim.run(10.0, OK);
        assert_eq!(sim.outages()[0].end, Some(27.0), "{:?}", sim.outages());
    }

    #[test]
    fn the_ramp_a_stage_and_the_stop_are_not_outages() {
        let mut sim = Sim::new(true);
        // The ramp: not armed, connections growing, a few refused.
        sim.armed = false;
        for i in 1..=40u64 {
            sim.drain(D {
                open: i * 2,
                errors: 1,
                ..OK
            });
        }
        sim.armed = true;
        sim.run(20.0, OK);
        // A stage to 300 connections, ramping over 5 s.
        for i in 1..=20u64 {
            sim.drain(D {
                open: 100 + i * 10,
                desired: 300,
                ..OK
            });
        }
        sim.run(
            10.0,
            D {
                open: 300,
                desired: 300,
                ..OK
            },
        );
        // Back down to 100: slots retire.
        sim.run(5.0, OK);
        // The stop closes everything.
        sim.running = false;
        sim.run(2.0, down());
        assert!(sim.outages().is_empty(), "{:?}", sim.outages());
    }

    #[test]
    fn an_outage_going_on_at_the_stop_has_no_end() {
        let mut sim = Sim::new(true);
        sim.run(20.0, OK);
        sim.run(5.0, down());
        sim.running = false;
        sim.run(1.0, down());
        let o = &sim.outages()[0];
        assert_eq!((o.start, o.end), (20.0, None));
        assert_eq!(o.duration_seconds, 5.0);
        assert_eq!((o.reconnect_seconds, o.recovery_seconds), (None, None));
        assert_eq!(o.errors["connect_refused"], 20 * 4);
    }

    #[test]
    fn a_brownout_is_an_excursion_not_an_outage() {
        let mut sim = Sim::new(true);
        sim.run(60.0, OK);
        sim.run(
            5.0,
            D {
                latency_us: 200_000,
                ..OK
            },
        );
        sim.run(20.0, OK);
        assert!(sim.outages().is_empty());
        let e = &sim.o.excursions()[0];
        assert_eq!(sim.o.excursions().len(), 1);
        assert_eq!((e.start, e.end), (60.0, Some(65.0)), "{e:?}");
        assert_eq!(e.recovery_seconds, Some(0.0));
        assert!(e.p50_max.unwrap() > 0.15, "{e:?}");
        assert_eq!(e.late, 5 * 100);
        // One slow second alone (a busy machine): no excursion.
        let mut sim = Sim::new(true);
        sim.run(60.0, OK);
        sim.run(
            1.0,
            D {
                latency_us: 900_000,
                ..OK
            },
        );
        sim.run(10.0, OK);
        sim.run(
            1.0,
            D {
                latency_us: 900_000,
                ..OK
            },
        );
        sim.run(20.0, OK);
        assert!(sim.o.excursions().is_empty(), "{:?}", sim.o.excursions());
        // The same latency when soakd itself was that late (a starved
        // generator): not the target's.
        let mut sim = Sim::new(true);
        sim.run(60.0, OK);
        sim.run(
            5.0,
            D {
                latency_us: 200_000,
                lag_us: 199_500,
                ..OK
            },
        );
        sim.run(20.0, OK);
        assert!(sim.o.excursions().is_empty(), "{:?}", sim.o.excursions());
        // soakd not running for 3 s (its next drain that late, the slice
        // stretched to 3.25 s), responses read after the stall 2.5 s late,
        // and the next second as slow: one slow second that counts, not
        // two. Without the stall the same two seconds are an excursion.
        let late = D {
            latency_us: 2_500_000,
            ..OK
        };
        for stall in [3, 0] {
            let mut sim = Sim::new(true);
            sim.run(60.0, OK);
            sim.t += Duration::from_secs(stall);
            sim.run(if stall > 0 { 0.25 } else { 1.0 }, late);
            sim.run(1.0, late);
            sim.run(20.0, OK);
            assert_eq!(
                sim.o.excursions().len(),
                usize::from(stall == 0),
                "{:?}",
                sim.o.excursions()
            );
        }
    }

    #[test]
    fn a_run_that_only_closes_judges_errors_only() {
        let mut sim = Sim::new(false);
        sim.run(20.0, D { open: 10, ..OK });
        assert!(sim.outages().is_empty());
        sim.run(3.0, down());
        sim.run(10.0, D { open: 10, ..OK });
        let o = &sim.outages()[0];
        assert_eq!((o.start, o.end), (20.0, Some(23.0)));
        assert_eq!(o.cause, ["errors"]);
        assert_eq!(o.reconnect_seconds, None, "nothing held, nothing to reconnect");
    }

    #[test]
    fn silence_does_not_end_an_outage() {
        let mut sim = Sim::new(true);
        sim.run(20.0, OK);
        sim.run(2.0, down());
        // A blackhole with connections still up: nothing answers, nothing
        // fails yet.
        sim.run(4.0, D { completed: 0, ..OK });
        sim.run(2.0, down());
        sim.run(10.0, OK);
        assert_eq!(sim.outages().len(), 1, "{:?}", sim.outages());
        assert_eq!(sim.outages()[0].end, Some(28.0));
    }

    /// The minute before turns over in the room of the seconds that
    /// leave it: once full, its lists are the same ones, a second at a
    /// time (issue 29).
    #[test]
    fn the_minute_before_reuses_its_seconds() {
        let mut sim = Sim::new(true);
        sim.run(70.0, OK);
        let lists = |sim: &Sim| {
            let mut v: Vec<usize> = sim.o.watches[0]
                .minute
                .iter()
                .map(|s| s.index.as_ptr() as usize)
                .collect();
            v.sort_unstable();
            v
        };
        let full = lists(&sim);
        assert_eq!(full.len(), MINUTE);
        sim.run(30.0, OK);
        assert_eq!(lists(&sim), full);
        assert!(sim.o.watches[0].minute_p99().is_some());
        assert!(sim.outages().is_empty());
    }

    #[test]
    fn late_responses_count_above_the_bound() {
        let mut s = Sparse::default();
        let mut h = slice::second_histogram();
        for us in [1_000u64, 1_050, 5_000, 20_000] {
            h.record(us).unwrap();
        }
        s.merge(&Sparse::of(&h));
        let r = rules();
        assert_eq!(r.bound_us(1_000), 2_000, "1 ms over a 1 ms p99");
        assert_eq!(r.bound_us(100_000), 110_000, "10% over 100 ms");
        assert_eq!(s.count_above_us(r.bound_us(1_000)), 2);
        assert!(r.worse(1_000, 2_100) && !r.worse(1_000, 1_900) && !r.worse(5_000, 100));
    }
}
