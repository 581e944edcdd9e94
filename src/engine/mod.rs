//! The engine: spawns the workers, runs the control loop, and aggregates.
//!
//! The thread that calls [`run`] becomes the control thread. It owns no
//! connection; it waits on signals (a signal-hook-mio source in its own
//! `Poll`), drains the workers' mailboxes every 250 ms into [`Totals`],
//! drives the status line, and decides when the run stops: duration over,
//! `--requests` done, or SIGINT/SIGTERM. Stopping has two phases so that
//! responses already owed are still measured: *drain* (no new requests or
//! connections, up to the drain timeout) and *exit* (close everything).
//!
//! Connection slots are dealt to workers round-robin by slot index, which
//! keeps each worker's share of every workload (and of the schedule's phases)
//! even.

mod socket;
pub mod worker;

use std::io::Write as _;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token, Waker};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};
use signal_hook_mio::v1_0::Signals;

use crate::exporter::{Exporter, Handler, Reply};
use crate::hdrlog::HdrLog;
use crate::metrics::Metrics;
use crate::notify::Notifier;
use crate::plan::Plan;
use crate::report::Report;
use crate::stats::{Delta, Gauges, WorkloadStats};
use crate::status::StatusLine;
use crate::{Error, preflight};
use worker::{Command, PHASE_DRAIN, PHASE_EXIT, PHASE_RUN, Shared, StageCmd, WAKER, Worker, WorkerSpec, WorkloadRt};

const TICK: Duration = Duration::from_millis(250);

/// Running totals over all workers, per workload. Owned by the control
/// thread; workers never touch it.
#[derive(Debug)]
pub struct Totals {
    /// Workload names, in plan order.
    pub names: Vec<String>,
    /// Cumulative counters and histograms.
    pub stats: Vec<WorkloadStats>,
    /// What arrived since [`Totals::take_interval`] was last called.
    pub interval: Vec<WorkloadStats>,
    /// Current connection levels (sum over workers).
    pub gauges: Vec<Gauges>,
    /// Most connections seen open at once (sampled each tick).
    pub peak_open: Vec<u64>,
    /// Time from start until every slot of the workload was first open.
    pub ramp: Vec<Option<Duration>>,
    /// Open connections when the stop began.
    pub open_at_stop: Option<Vec<u64>>,
    /// Per worker: loop iterations seen in its last flush, and when that
    /// count last moved.
    pub heartbeats: Vec<(u64, Instant)>,
    /// Per workload: latency recorded since the metrics' window last took
    /// it (see [`crate::metrics::Metrics::update`]).
    pub window: Vec<hdrhistogram::Histogram<u64>>,
    /// Per workload: latency since the HDR interval log last took it; only
    /// kept with `--hdr-log`.
    log_interval: Option<Vec<hdrhistogram::Histogram<u64>>>,
}

impl Totals {
    fn new(names: Vec<String>, workers: usize, hdr_log: bool) -> Totals {
        let n = names.len();
        Totals {
            names,
            stats: (0..n).map(|_| WorkloadStats::default()).collect(),
            interval: (0..n).map(|_| WorkloadStats::default()).collect(),
            gauges: vec![Gauges::default(); n],
            peak_open: vec![0; n],
            ramp: vec![None; n],
            open_at_stop: None,
            heartbeats: vec![(0, Instant::now()); workers],
            window: (0..n).map(|_| crate::stats::histogram()).collect(),
            log_interval: hdr_log.then(|| (0..n).map(|_| crate::stats::histogram()).collect()),
        }
    }

    /// Drains every mailbox. Returns (all workers idle, all budgets done).
    fn collect(&mut self, shared: &Shared) -> (bool, bool) {
        let n = self.names.len();
        let mut gauges = vec![Gauges::default(); n];
        let mut ramp_done: Vec<Option<Duration>> = vec![Some(Duration::ZERO); n];
        let mut at_stop: Option<Vec<u64>> = None;
        let mut reported = 0;
        let (mut all_idle, mut all_budget) = (true, true);
        for (i, mb) in shared.mailboxes.iter().enumerate() {
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
                self.interval[wi].add(&stats[wi]);
                if !stats[wi].latency.is_empty() {
                    self.window[wi]
                        .add(&stats[wi].latency)
                        .expect("histograms share bounds");
                    if let Some(log) = self.log_interval.as_mut() {
                        log[wi].add(&stats[wi].latency).expect("histograms share bounds");
                    }
                }
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
        for wi in 0..n {
            self.peak_open[wi] = self.peak_open[wi].max(gauges[wi].open);
            if self.ramp[wi].is_none() && gauges[wi].desired > 0 {
                self.ramp[wi] = ramp_done[wi];
            }
        }
        self.gauges = gauges;
        // Only once every worker has recorded its count at the stop: a sum
        // over some of them would be taken for the whole.
        if self.open_at_stop.is_none() && reported == shared.mailboxes.len() {
            self.open_at_stop = at_stop;
        }
        (all_idle, all_budget)
    }

    /// Room for a workload a reload added.
    fn add_workload(&mut self, name: String) {
        self.names.push(name);
        self.stats.push(WorkloadStats::default());
        self.interval.push(WorkloadStats::default());
        self.gauges.push(Gauges::default());
        self.peak_open.push(0);
        self.ramp.push(None);
        self.window.push(crate::stats::histogram());
        if let Some(log) = self.log_interval.as_mut() {
            log.push(crate::stats::histogram());
        }
    }

    /// True when every worker loop checked in within `within`: what
    /// /healthz, `soakd_healthy` and the systemd watchdog report.
    pub fn all_alive(&self, within: Duration) -> bool {
        self.heartbeats.iter().all(|(_, t)| t.elapsed() < within)
    }

    /// Latency per workload since the last call (for the HDR interval log).
    pub fn take_log_interval(&mut self) -> Vec<hdrhistogram::Histogram<u64>> {
        match self.log_interval.as_mut() {
            Some(log) => log
                .iter_mut()
                .map(|h| std::mem::replace(h, crate::stats::histogram()))
                .collect(),
            None => Vec::new(),
        }
    }

    /// Everything that arrived since the last call, merged over workloads,
    /// and the interval restarted.
    pub fn take_interval(&mut self) -> WorkloadStats {
        let mut sum = WorkloadStats::default();
        for s in &mut self.interval {
            sum.add(s);
            s.clear();
        }
        sum
    }
}

/// The settings the workers need for one workload.
fn runtime_of(w: &crate::plan::Workload) -> WorkloadRt {
    let req = &w.target.request;
    WorkloadRt {
        addr: w.target.addr,
        sources: w.source_addrs.clone(),
        wire: req.repeat(w.pipeline as usize),
        req_len: req.len(),
        head: w.target.head,
        interval_ns: w
            .model
            .per_connection_interval(w.connections)
            .map(|d| d.as_nanos() as u64),
        connections: w.connections,
        pipeline: w.pipeline,
        max_requests: if w.close { Some(1) } else { w.max_requests_per_conn },
        close: w.close,
        max_lifetime_ns: w.max_conn_lifetime.map(|d| d.as_nanos() as u64),
        connect_timeout_ns: w.connect_timeout.as_nanos() as u64,
        request_timeout_ns: w.request_timeout.as_nanos() as u64,
        ramp: w.ramp,
    }
}

/// One worker's part of the plan.
struct Share {
    slots: Vec<(u16, u32)>,
    budget: Option<u64>,
    ramp: Vec<f64>,
}

/// Deals the slots of every workload to `threads` workers and splits the
/// request budget and ramp rates in proportion.
fn deal(plan: &Plan, threads: usize) -> Vec<Share> {
    let mut slots: Vec<Vec<(u16, u32)>> = vec![Vec::new(); threads];
    for (wi, w) in plan.workloads.iter().enumerate() {
        for s in 0..w.connections {
            slots[s as usize % threads].push((wi as u16, s));
        }
    }
    let total: u64 = slots.iter().map(|s| s.len() as u64).sum();
    let mut budgets: Vec<Option<u64>> = vec![None; threads];
    if let Some(n) = plan.max_requests {
        let mut given = 0;
        for (i, b) in budgets.iter_mut().enumerate() {
            let share = if i + 1 == threads {
                n - given
            } else {
                n * slots[i].len() as u64 / total.max(1)
            };
            given += share;
            *b = Some(share);
        }
    }
    slots
        .into_iter()
        .zip(budgets)
        .map(|(slots, budget)| {
            let ramp = plan
                .workloads
                .iter()
                .enumerate()
                .map(|(wi, w)| {
                    let mine = slots.iter().filter(|(x, _)| *x as usize == wi).count() as f64;
                    w.ramp as f64 * mine / w.connections.max(1) as f64
                })
                .collect();
            Share { slots, budget, ramp }
        })
        .collect()
}

/// Where a workload is in its stages.
struct StageRun {
    workload: usize,
    index: usize,
    ends_at: Duration,
}

/// Moves workloads whose stage is over to their next one and queues the
/// change for every worker. Returns true when commands were queued (the
/// caller wakes the workers).
fn advance_stages(
    plan: &Plan,
    runs: &mut [StageRun],
    elapsed: Duration,
    shared: &Shared,
    status: &mut StatusLine,
) -> bool {
    let mut sent = false;
    for r in runs.iter_mut() {
        let w = &plan.workloads[r.workload];
        while elapsed >= r.ends_at && r.index + 1 < w.stages.len() {
            r.index += 1;
            let st = w.stages[r.index];
            r.ends_at += st.hold;
            let cmd = StageCmd {
                workload: r.workload as u16,
                connections: st.connections,
                interval_ns: st
                    .model
                    .per_connection_interval(st.connections)
                    .map(|d| d.as_nanos() as u64),
            };
            for q in &shared.commands {
                q.lock().unwrap_or_else(|p| p.into_inner()).push(Command::Stage(cmd));
            }
            status.note(&format!(
                "{}: stage {} of {}: {} connections, {}",
                w.name,
                r.index + 1,
                w.stages.len(),
                st.connections,
                st.model
            ));
            sent = true;
        }
    }
    if sent {
        shared.commands_sent.fetch_add(1, Ordering::Release);
    }
    sent
}

/// SIGHUP: re-reads the config file and applies the difference to the
/// running plan. Workloads are matched by name: an unchanged one is left
/// alone (its connections stay up), a changed one gets new settings and
/// load, a new one is added, a missing one drains (its slots retire). An
/// invalid file changes nothing. Returns what changed, for the log.
fn reload(
    plan: &mut Plan,
    shared: &Shared,
    totals: &mut Totals,
    mut metrics: Option<&mut Metrics>,
    stages: &mut Vec<StageRun>,
    elapsed: Duration,
) -> Result<String, Error> {
    let Some((path, over)) = plan.config.clone() else {
        return Err(Error::Usage(
            "soakd run was not started with --config: nothing to reload".into(),
        ));
    };
    let new = crate::config::load(&path, over)?;
    preflight::verdict(&new)?;
    let mut cmds: Vec<Command> = Vec::new();
    let mut changes: Vec<String> = Vec::new();
    let mut kept = vec![false; plan.workloads.len()];
    let restart_stages = |stages: &mut Vec<StageRun>, wi: usize, w: &crate::plan::Workload| {
        stages.retain(|r| r.workload != wi);
        if let Some(first) = w.stages.first() {
            stages.push(StageRun {
                workload: wi,
                index: 0,
                ends_at: elapsed + first.hold,
            });
        }
    };
    for nw in new.workloads {
        let stage = |wi: usize| {
            Command::Stage(StageCmd {
                workload: wi as u16,
                connections: nw.connections,
                interval_ns: nw
                    .model
                    .per_connection_interval(nw.connections)
                    .map(|d| d.as_nanos() as u64),
            })
        };
        match plan.workloads.iter().position(|w| w.name == nw.name) {
            Some(wi) => {
                kept[wi] = true;
                let ow = &plan.workloads[wi];
                let mut rest = nw.clone();
                rest.connections = ow.connections;
                rest.model = ow.model;
                rest.stages.clone_from(&ow.stages);
                rest.then_stop = ow.then_stop;
                let settings = rest != *ow;
                let load = ow.connections != nw.connections || ow.model != nw.model;
                let staged = ow.stages != nw.stages || ow.then_stop != nw.then_stop;
                if !(settings || load || staged) {
                    continue;
                }
                if settings {
                    cmds.push(Command::Settings(wi as u16, Box::new(runtime_of(&nw))));
                }
                cmds.push(stage(wi));
                if staged {
                    restart_stages(stages, wi, &nw);
                }
                changes.push(format!("{} changed", nw.name));
                plan.workloads[wi] = nw;
            }
            None => {
                let wi = plan.workloads.len();
                for mb in &shared.mailboxes {
                    mb.lock().unwrap_or_else(|p| p.into_inner()).add_workload();
                }
                totals.add_workload(nw.name.clone());
                if let Some(m) = metrics.as_deref_mut() {
                    m.add_workload(&nw.name, nw.target_pids.clone());
                }
                cmds.push(Command::Add(Box::new(runtime_of(&nw))));
                restart_stages(stages, wi, &nw);
                changes.push(format!("{} added", nw.name));
                kept.push(true);
                plan.workloads.push(nw);
            }
        }
    }
    for (wi, kept) in kept.into_iter().enumerate() {
        let w = &mut plan.workloads[wi];
        if kept || (w.connections == 0 && w.stages.is_empty()) {
            continue;
        }
        cmds.push(Command::Stage(StageCmd {
            workload: wi as u16,
            connections: 0,
            interval_ns: None,
        }));
        w.connections = 0;
        w.stages.clear();
        stages.retain(|r| r.workload != wi);
        changes.push(format!("{} removed (draining)", w.name));
    }
    if new.threads != plan.threads || new.metrics_listen != plan.metrics_listen || new.hdr_log != plan.hdr_log {
        changes.push("threads, metrics_listen and hdr_log take effect at the next start".into());
    }
    if !cmds.is_empty() {
        for q in &shared.commands {
            q.lock().unwrap_or_else(|p| p.into_inner()).extend(cmds.iter().cloned());
        }
        shared.commands_sent.fetch_add(1, Ordering::Release);
    }
    Ok(if changes.is_empty() {
        "no change".into()
    } else {
        changes.join("; ")
    })
}

/// True when SIGINT or SIGTERM arrived since the last look.
fn exit_now_requested(signals: &mut Signals) -> bool {
    signals.pending().any(|s| s == SIGINT || s == SIGTERM)
}

/// Serves `/metrics` from the registry and `/healthz` from the snapshot's
/// worker check-ins; everything else is 404.
fn scrape_handler(metrics: &Metrics) -> Handler {
    let registry = metrics.registry().clone();
    let snapshot = metrics.snapshot();
    Arc::new(move |path: &str| match path {
        "/metrics" => Reply {
            status: 200,
            content_type: "text/plain; version=0.0.4; charset=utf-8",
            body: crate::metrics::render(&registry),
        },
        "/healthz" => {
            if snapshot.lock().unwrap_or_else(|p| p.into_inner()).healthy {
                Reply {
                    status: 200,
                    content_type: "text/plain; charset=utf-8",
                    body: b"ok\n".to_vec(),
                }
            } else {
                Reply {
                    status: 503,
                    content_type: "text/plain; charset=utf-8",
                    body: b"a worker loop has not checked in for 5 s\n".to_vec(),
                }
            }
        }
        _ => Reply {
            status: 404,
            content_type: "text/plain; charset=utf-8",
            body: b"not found: try /metrics or /healthz\n".to_vec(),
        },
    })
}

/// Runs a plan to the end. See [`crate::run`].
pub fn run(mut plan: Plan) -> Result<Report, Error> {
    preflight::check(&plan)?;
    let total = plan.total_connections().max(1);
    let threads = plan.threads.clamp(1, total as usize);
    let names: Vec<String> = plan.workloads.iter().map(|w| w.name.clone()).collect();
    let wl: Vec<WorkloadRt> = plan.workloads.iter().map(runtime_of).collect();

    let mut control = Poll::new().map_err(|e| Error::io("creating the control poll", e))?;
    let mut signals =
        Signals::new([SIGINT, SIGTERM, SIGUSR1, SIGHUP]).map_err(|e| Error::io("installing signal handlers", e))?;
    control
        .registry()
        .register(&mut signals, Token(0), Interest::READABLE)
        .map_err(|e| Error::io("registering signals", e))?;

    // Bound before any connection is opened: a port that cannot be had is
    // a preflight failure (exit 2), not a surprise an hour in.
    let mut metrics = None;
    let exporter = match plan.metrics_listen {
        Some(addr) => {
            let pids = plan.workloads.iter().map(|w| w.target_pids.clone()).collect();
            let m = Metrics::new(&names, pids);
            let e = Exporter::start(addr, scrape_handler(&m))?;
            eprintln!("soakd: metrics on http://{}/metrics", e.local_addr());
            metrics = Some(m);
            Some(e)
        }
        None => None,
    };
    let mut hdr_log = match &plan.hdr_log {
        Some(path) => Some(HdrLog::create(path)?),
        None => None,
    };

    let shared = Arc::new(Shared {
        phase: AtomicU8::new(PHASE_RUN),
        mailboxes: (0..threads).map(|_| Mutex::new(Delta::new(names.len()))).collect(),
        start: Instant::now(),
        commands: (0..threads).map(|_| Mutex::new(Vec::new())).collect(),
        commands_sent: std::sync::atomic::AtomicU64::new(0),
    });
    let mut wakers = Vec::with_capacity(threads);
    let mut handles: Vec<JoinHandle<std::io::Result<()>>> = Vec::with_capacity(threads);
    for (index, Share { slots, budget, ramp }) in deal(&plan, threads).into_iter().enumerate() {
        // The mailbox knows the worker's share before its first flush, so an
        // early aggregation never takes a worker for one without slots (and
        // its ramp as done).
        {
            let mut mb = shared.mailboxes[index].lock().unwrap_or_else(|p| p.into_inner());
            for &(wi, _) in &slots {
                mb.gauges[wi as usize].desired += 1;
                mb.gauges[wi as usize].backoff += 1;
            }
        }
        let poll = Poll::new().map_err(|e| Error::io("creating a worker poll", e))?;
        wakers.push(Waker::new(poll.registry(), WAKER).map_err(|e| Error::io("creating a waker", e))?);
        let start = fastrand::u32(..);
        let ports = preflight::local_port_range()
            .and_then(|(lo, hi)| socket::PortPicker::new(lo, hi, index, threads, start))
            .map(|mut p| {
                p.reserve(preflight::reserved_ports());
                p
            });
        let spec = WorkerSpec {
            index,
            poll,
            slots,
            budget,
            ramp,
            ports,
            threads,
        };
        let worker = Worker::new(spec, shared.clone(), wl.clone()).map_err(|e| Error::io("setting up a worker", e))?;
        let handle = std::thread::Builder::new()
            .name(format!("soakd-worker-{index}"))
            .spawn(move || worker.run())
            .map_err(|e| Error::io("starting a worker thread", e))?;
        handles.push(handle);
    }

    let mut totals = Totals::new(names, threads, plan.hdr_log.is_some());
    // systemd: ready once preflight passed, the metrics port is bound and
    // the workers run; a status line every 10 s; watchdog pings only while
    // every worker loop checks in, so a stuck loop gets soakd restarted.
    let notifier = Notifier::from_env();
    notifier.ready();
    let mut last_status = Duration::ZERO;
    let mut last_ping = Instant::now();
    let mut completed_at_status = 0u64;
    let mut status = StatusLine::new();
    let deadline = plan.duration.map(|d| shared.start + d);
    let mut stop_at: Option<Instant> = None;
    let mut events = Events::with_capacity(8);
    let mut stages: Vec<StageRun> = plan
        .workloads
        .iter()
        .enumerate()
        .filter(|(_, w)| !w.stages.is_empty())
        .map(|(wi, w)| StageRun {
            workload: wi,
            index: 0,
            ends_at: w.stages[0].hold,
        })
        .collect();
    let set_phase = |phase: u8| {
        shared.phase.store(phase, Ordering::Release);
        for w in &wakers {
            let _ = w.wake();
        }
    };
    loop {
        let now = Instant::now();
        let mut timeout = TICK;
        if let (Some(d), None) = (deadline, stop_at) {
            timeout = timeout.min(d.saturating_duration_since(now));
        }
        if stop_at.is_some() {
            timeout = timeout.min(Duration::from_millis(20));
        }
        if let Err(e) = control.poll(&mut events, Some(timeout))
            && e.kind() != std::io::ErrorKind::Interrupted
        {
            return Err(Error::io("waiting for signals", e));
        }
        let mut exit_now = false;
        for sig in signals.pending() {
            match sig {
                SIGINT | SIGTERM if stop_at.is_none() => {
                    notifier.stopping();
                    status.note("stopping: finishing requests in flight (signal again to exit at once)");
                    stop_at = Some(Instant::now());
                    set_phase(PHASE_DRAIN);
                }
                SIGINT | SIGTERM => exit_now = true,
                SIGUSR1 => {
                    let report = Report::build(&plan, &totals, shared.start.elapsed());
                    status.clear();
                    let _ = std::io::stderr().write_all(report.summary().as_bytes());
                }
                SIGHUP => {
                    let result = reload(
                        &mut plan,
                        &shared,
                        &mut totals,
                        metrics.as_mut(),
                        &mut stages,
                        shared.start.elapsed(),
                    );
                    if let Some(m) = metrics.as_mut() {
                        m.reloaded(result.is_ok());
                    }
                    match result {
                        Ok(what) => {
                            status.note(&format!("config reloaded: {what}"));
                            for w in &wakers {
                                let _ = w.wake();
                            }
                        }
                        Err(e) => status.note(&format!("config reload failed, keeping the running plan: {e}")),
                    }
                }
                _ => {}
            }
        }
        let (idle, budget_done) = totals.collect(&shared);
        let elapsed = shared.start.elapsed();
        if let Some(m) = metrics.as_mut() {
            m.update(&mut totals);
        }
        if let Some(log) = hdr_log.as_mut() {
            log.tick(&mut totals, elapsed);
        }
        status.tick(&mut totals, elapsed);
        if notifier.enabled() {
            if let Some(every) = notifier.watchdog_interval()
                && last_ping.elapsed() >= every / 2
                && totals.all_alive(crate::metrics::STALL_AFTER)
            {
                notifier.watchdog();
                last_ping = Instant::now();
            }
            if elapsed >= last_status + Duration::from_secs(10) {
                let completed: u64 = totals.stats.iter().map(|s| s.counters.completed).sum();
                let errors: u64 = totals.stats.iter().map(|s| s.counters.total_errors()).sum();
                let (open, desired) = totals
                    .gauges
                    .iter()
                    .fold((0, 0), |(o, d), g| (o + g.open, d + g.desired));
                let rate = (completed - completed_at_status) as f64 / (elapsed - last_status).as_secs_f64();
                notifier.status(&format!(
                    "open {open}/{desired}, {rate:.1} req/s, {completed} completed, {errors} errors"
                ));
                completed_at_status = completed;
                last_status = elapsed;
            }
        }
        if stop_at.is_none() && advance_stages(&plan, &mut stages, elapsed, &shared, &mut status) {
            for w in &wakers {
                let _ = w.wake();
            }
        }
        if stop_at.is_none() {
            let timed_out = deadline.is_some_and(|d| Instant::now() >= d);
            let counted = plan.max_requests.is_some() && budget_done;
            let staged_out = stages.iter().any(|r| plan.workloads[r.workload].then_stop)
                && stages
                    .iter()
                    .filter(|r| plan.workloads[r.workload].then_stop)
                    .all(|r| r.index + 1 == plan.workloads[r.workload].stages.len() && elapsed >= r.ends_at);
            if timed_out || counted || staged_out {
                stop_at = Some(Instant::now());
                set_phase(PHASE_DRAIN);
            }
        }
        if handles.iter().any(|h| h.is_finished()) {
            // A worker only returns on its own when it failed.
            exit_now = true;
        }
        if let Some(t) = stop_at
            && (exit_now || idle || t.elapsed() >= plan.drain_timeout)
        {
            break;
        }
        if exit_now {
            stop_at.get_or_insert_with(Instant::now);
            break;
        }
    }
    let stopped = stop_at.map_or_else(|| shared.start.elapsed(), |t| t.duration_since(shared.start));
    set_phase(PHASE_EXIT);
    let mut failure = None;
    for h in handles {
        match h.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failure = Some(Error::io("worker event loop", e)),
            Err(_) => failure = Some(Error::Internal("a worker thread panicked".into())),
        }
    }
    totals.collect(&shared);
    if let Some(m) = metrics.as_mut() {
        m.update(&mut totals);
    }
    if let Some(log) = hdr_log.as_mut() {
        log.finish(&mut totals, shared.start.elapsed());
    }
    if let Some(e) = exporter {
        if !plan.metrics_linger.is_zero() && !exit_now_requested(&mut signals) {
            status.note(&format!(
                "run over; serving the final metrics for {} (signal to stop)",
                humantime::format_duration(plan.metrics_linger)
            ));
            let until = Instant::now() + plan.metrics_linger;
            while Instant::now() < until && !exit_now_requested(&mut signals) {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        e.stop();
    }
    status.finish();
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(Report::build(&plan, &totals, stopped))
}
