//! Running totals over all workers, kept by the control thread.
//!
//! Workers never touch these: the control thread drains every worker's
//! mailbox into them a few times a second, and the report, the metrics,
//! the HDR log and the status line read them. They live beside the
//! counters (layer 0) so that every reader depends on the numbers, not on
//! the engine that produces them.

use std::time::{Duration, Instant};

use super::{Delta, Disruptions, EventRecord, Gauges, Mailbox, Outages, Restart, Timeline, WorkloadStats, histogram};

/// Running totals over all workers, per workload. Owned by the control
/// thread; workers never touch it.
#[derive(Debug)]
pub struct Totals {
    /// Workload names, in plan order.
    pub names: Vec<String>,
    /// Per workload: the names of its requests (the `request` label).
    pub requests: Vec<Vec<String>>,
    /// Cumulative counters and histograms.
    pub stats: Vec<WorkloadStats>,
    /// What arrived since [`Totals::take_interval`] was last called; kept
    /// only for a status line ([`Totals::keep_interval`]): a shard of
    /// `soakd run --processes` prints none, and two sets of a workload's
    /// histograms (this and the line's sum) were ~0.4 MB of each of its
    /// processes (issue 41).
    interval: Option<Vec<WorkloadStats>>,
    /// Current connection levels (sum over workers).
    pub gauges: Vec<Gauges>,
    /// Most connections seen open at once (sampled each tick).
    pub peak_open: Vec<u64>,
    /// Time from start until every slot of the workload was first open.
    pub ramp: Vec<Option<Duration>>,
    /// Open connections when the stop began.
    pub open_at_stop: Option<Vec<u64>>,
    /// Fewest connections seen open (each tick) after the workload's ramp
    /// completed and before the stop: the `open_min` threshold. `None`
    /// until the ramp completes.
    pub open_min: Vec<Option<u64>>,
    /// The same over all workloads together, once every one has ramped.
    pub open_min_all: Option<u64>,
    /// Per workload: the run continued from a checkpoint and its
    /// connections are ramping again; `open_min` waits until they are all
    /// open (the restart's ramp is not a low of the server's).
    pub reramping: Vec<bool>,
    /// Restarts that continued the run from a `--state` checkpoint.
    pub resumed: Vec<Restart>,
    /// Per worker: loop iterations seen in its last flush, and when that
    /// count last moved.
    pub heartbeats: Vec<(u64, Instant)>,
    /// Per workload: latency recorded since the metrics' window last took
    /// it (see the metrics observer).
    pub window: Vec<hdrhistogram::Histogram<u64>>,
    /// Per workload: latency since the HDR interval log last took it; only
    /// kept with `--hdr-log`.
    log_interval: Option<Vec<hdrhistogram::Histogram<u64>>>,
    /// Per workload: what arrived since the live thresholds last took it;
    /// only kept with a threshold window.
    recent: Option<Vec<WorkloadStats>>,
    /// The run as a bounded time series (all workloads summed), for the
    /// report; the control loop calls its `tick` after each drain.
    pub timeline: Timeline,
    /// Outages and latency excursions found in the same deltas, per
    /// workload (nothing is watched until the engine sets the rules).
    pub outages: Outages,
    /// The run's events (commands soakd ran, marks from outside), as the
    /// observers record them.
    pub events: Vec<EventRecord>,
    /// The server watch's sources and how their reads went (the series
    /// and their values are the timeline's).
    pub watch_sources: Vec<super::series::SourceStats>,
}

impl Totals {
    /// Empty totals for `names`, fed by `workers` mailboxes; `hdr_log`
    /// keeps the interval histograms the HDR log takes, `recent` what the
    /// windowed thresholds take.
    pub fn new(names: Vec<String>, workers: usize, hdr_log: bool, recent: bool) -> Totals {
        let n = names.len();
        Totals {
            requests: vec![Vec::new(); n],
            names,
            stats: (0..n).map(|_| WorkloadStats::default()).collect(),
            interval: None,
            gauges: vec![Gauges::default(); n],
            peak_open: vec![0; n],
            ramp: vec![None; n],
            open_at_stop: None,
            open_min: vec![None; n],
            open_min_all: None,
            reramping: vec![false; n],
            resumed: Vec::new(),
            heartbeats: vec![(0, Instant::now()); workers],
            window: (0..n).map(|_| super::window_histogram()).collect(),
            log_interval: hdr_log.then(|| (0..n).map(|_| histogram()).collect()),
            recent: recent.then(|| (0..n).map(|_| WorkloadStats::default()).collect()),
            timeline: {
                let mut t = Timeline::new();
                t.reserve(0, n);
                t
            },
            outages: Outages::default(),
            events: Vec::new(),
            watch_sources: Vec::new(),
        }
    }

    /// Drains every mailbox. Returns (all workers idle, all budgets done).
    pub fn collect(&mut self, mailboxes: &[Mailbox]) -> (bool, bool) {
        let n = self.names.len();
        let mut gauges = vec![Gauges::default(); n];
        let mut ramp_done: Vec<Option<Duration>> = vec![Some(Duration::ZERO); n];
        let mut at_stop: Option<Vec<u64>> = None;
        let mut reported = 0;
        let (mut all_idle, mut all_budget) = (true, true);
        for (i, mb) in mailboxes.iter().enumerate() {
            let mut d = mb.lock().unwrap_or_else(|p| p.into_inner());
            let Delta {
                stats,
                gauges: g,
                full_at,
                open_at_stop,
                idle,
                budget_done,
                heartbeat,
            } = &mut *d;
            for wi in 0..n {
                self.stats[wi].add(&stats[wi]);
                if let Some(i) = self.interval.as_mut() {
                    i[wi].add(&stats[wi]);
                }
                if let Some(r) = self.recent.as_mut() {
                    r[wi].add(&stats[wi]);
                }
                if !stats[wi].latency.is_empty() {
                    self.window[wi]
                        .add(&stats[wi].latency)
                        .expect("histograms share bounds");
                    if let Some(log) = self.log_interval.as_mut() {
                        log[wi].add(&stats[wi].latency).expect("histograms share bounds");
                    }
                }
                self.timeline.add(wi, &stats[wi]);
                self.outages.add(wi, &stats[wi]);
                stats[wi].clear();
                gauges[wi].add(&g[wi]);
                if g[wi].desired > 0 {
                    ramp_done[wi] = match (ramp_done[wi], full_at[wi]) {
                        (Some(a), Some(b)) => Some(a.max(b)),
                        _ => None,
                    };
                }
            }
            if let Some(v) = open_at_stop {
                reported += 1;
                let acc = at_stop.get_or_insert_with(|| vec![0; n]);
                for (a, b) in acc.iter_mut().zip(v.iter()) {
                    *a += b;
                }
            }
            all_idle &= *idle;
            all_budget &= *budget_done;
            if self.heartbeats[i].0 != *heartbeat {
                self.heartbeats[i] = (*heartbeat, Instant::now());
            }
        }
        // A stop closes connections on purpose: those are not lows.
        let running = at_stop.is_none() && self.open_at_stop.is_none();
        for wi in 0..n {
            self.peak_open[wi] = self.peak_open[wi].max(gauges[wi].open);
            if self.ramp[wi].is_none() && gauges[wi].desired > 0 {
                self.ramp[wi] = ramp_done[wi];
            }
            if self.reramping[wi] && gauges[wi].desired > 0 && ramp_done[wi].is_some() {
                self.reramping[wi] = false;
            }
            if running && self.ramp[wi].is_some() && !self.reramping[wi] {
                let open = gauges[wi].open;
                self.open_min[wi] = Some(self.open_min[wi].map_or(open, |m| m.min(open)));
            }
        }
        if running && n > 0 && self.ramp.iter().all(Option::is_some) && !self.reramping.contains(&true) {
            let open: u64 = gauges.iter().map(|g| g.open).sum();
            self.open_min_all = Some(self.open_min_all.map_or(open, |m| m.min(open)));
        }
        self.timeline.level(gauges.iter().map(|g| g.open).sum());
        for (wi, g) in gauges.iter().enumerate() {
            let armed = self.ramp[wi].is_some() && !self.reramping[wi];
            self.outages.level(wi, g.open, g.desired, armed, running);
        }
        self.gauges = gauges;
        // Only once every worker has recorded its count at the stop: a sum
        // over some of them would be taken for the whole.
        if self.open_at_stop.is_none() && reported == mailboxes.len() {
            self.open_at_stop = at_stop;
        }
        (all_idle, all_budget)
    }

    /// After each drain, with the run time: the timeline and the outage
    /// watch close what is over.
    pub fn tick(&mut self, elapsed: Duration) {
        self.timeline.tick(elapsed);
        self.outages.tick(elapsed);
    }

    /// The outages, excursions and events so far (a copy).
    pub fn disruptions(&self) -> Disruptions {
        Disruptions {
            outages: self.outages.outages().to_vec(),
            excursions: self.outages.excursions().to_vec(),
            events: self.events.clone(),
        }
    }

    /// Names workload `wi`'s requests (at start, and when a reload changes
    /// them); counts of requests a reload removed are dropped.
    pub fn set_requests(&mut self, wi: usize, names: Vec<String>) {
        if !self.requests[wi].is_empty() && self.requests[wi] != names {
            // Counts are kept by position: a changed list starts over, so
            // no count lands under another request's name.
            self.stats[wi].requests.clear();
            if let Some(i) = self.interval.as_mut() {
                i[wi].requests.clear();
            }
        }
        self.stats[wi].set_requests(names.len());
        if let Some(i) = self.interval.as_mut() {
            i[wi].set_requests(names.len());
        }
        self.requests[wi] = names;
    }

    /// Room for a workload a reload added.
    pub fn add_workload(&mut self, name: String) {
        self.outages.watch(name.clone(), true);
        self.names.push(name);
        self.requests.push(Vec::new());
        self.stats.push(WorkloadStats::default());
        if let Some(i) = self.interval.as_mut() {
            i.push(WorkloadStats::default());
        }
        self.gauges.push(Gauges::default());
        self.peak_open.push(0);
        self.ramp.push(None);
        self.open_min.push(None);
        self.reramping.push(false);
        self.window.push(super::window_histogram());
        if let Some(log) = self.log_interval.as_mut() {
            log.push(histogram());
        }
        if let Some(r) = self.recent.as_mut() {
            r.push(WorkloadStats::default());
        }
    }

    /// Adds what arrived per workload since the last call into `into`
    /// (grown to fit), and starts over; nothing without a threshold window.
    pub fn take_recent(&mut self, into: &mut Vec<WorkloadStats>) {
        if let Some(r) = self.recent.as_mut() {
            into.resize_with(r.len(), WorkloadStats::default);
            for (i, s) in r.iter_mut().enumerate() {
                into[i].add(s);
                s.clear();
            }
        }
    }

    /// True when every worker loop checked in within `within`: what
    /// /healthz, `soakd_healthy` and the systemd watchdog report.
    pub fn all_alive(&self, within: Duration) -> bool {
        self.heartbeats.iter().all(|(_, t)| t.elapsed() < within)
    }

    /// Latency per workload since the last call (for the HDR interval
    /// log), swapped into `into`, whose histograms (the log writer's, back
    /// from an earlier interval) are cleared and become the next
    /// interval's: none is made once the log runs (each is ~180 KB; issue
    /// 29).
    pub fn take_log_interval(&mut self, into: &mut Vec<hdrhistogram::Histogram<u64>>) {
        let Some(log) = self.log_interval.as_mut() else {
            into.clear();
            return;
        };
        into.truncate(log.len());
        while into.len() < log.len() {
            into.push(histogram());
        }
        for (h, mine) in into.iter_mut().zip(log.iter_mut()) {
            if !h.is_empty() {
                h.reset();
            }
            std::mem::swap(h, mine);
        }
    }

    /// Keeps what arrives from now on for [`Totals::take_interval`] (a
    /// status line; made once, before the run).
    pub fn keep_interval(&mut self) {
        let requests = &self.requests;
        self.interval.get_or_insert_with(|| {
            requests
                .iter()
                .map(|names| {
                    let mut s = WorkloadStats::default();
                    s.set_requests(names.len());
                    s
                })
                .collect()
        });
    }

    /// Everything that arrived since the last call, merged over workloads
    /// into `sum` (cleared first), and the interval restarted. The caller
    /// keeps `sum` from call to call: a new one is four full histograms
    /// (~750 KB), and making and dropping one every 10 s grew soakd's heap
    /// in steps (glibc's dynamic mmap threshold; bench/README.md).
    pub fn take_interval(&mut self, sum: &mut WorkloadStats) {
        sum.clear();
        for s in self.interval.iter_mut().flatten() {
            sum.add(s);
            s.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The HDR log's intervals go out in the histograms the log writer
    /// gave back: after the first interval none is made (issue 29).
    #[test]
    fn log_intervals_reuse_the_writers_histograms() {
        let mut totals = Totals::new(vec!["a".into(), "b".into()], 1, true, false);
        let mut out = Vec::new();
        let mut large = Vec::new();
        for i in 1..=5u64 {
            for h in totals.log_interval.as_mut().unwrap() {
                h.record(i * 100).unwrap();
            }
            let before = crate::test_alloc::large_allocations();
            totals.take_log_interval(&mut out);
            large.push(crate::test_alloc::large_allocations() - before);
            // What the interval holds is this interval's alone.
            assert_eq!(out.len(), 2);
            assert!(
                out.iter()
                    .all(|h| h.len() == 1 && h.max() == h.highest_equivalent(i * 100))
            );
        }
        assert_eq!(large, [2, 0, 0, 0, 0]);
    }
}
