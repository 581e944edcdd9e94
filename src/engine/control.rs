//! The control loop: the thread that owns no connection but decides
//! everything else.
//!
//! It waits on one `Poll` for signals, for workers that went idle in a
//! drain, and for a reload loaded off-thread; every 250 ms it drains the
//! workers' mailboxes into [`Totals`] and hands them to the [`Sink`]. It
//! decides when the run stops (duration, `--requests`, stages, a signal)
//! and stops it in two phases so that responses already owed are still
//! measured: *drain* (no new requests or connections, up to the drain
//! timeout) and *exit* (close everything). Each of those is a small method
//! here; none of them sleeps.

use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token, Waker};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1, SIGUSR2};
use signal_hook_mio::v1_0::Signals;

use super::reload::{Change, diff};
use super::stages::{self, StageRun, load_command};
use super::worker::{Command, PHASE_DRAIN, WorkloadRt};
use super::workers::Workers;
use super::{Reload, Sink};
use crate::plan::{LoadModel, Plan};
use crate::stats::Totals;
use crate::{Error, preflight};

/// How often the totals are refreshed and handed to the sink.
const TICK: Duration = Duration::from_millis(250);
const SIGNALS: Token = Token(0);
/// A worker idle in the drain, or a reload that finished loading.
pub(super) const WAKE: Token = Token(1);

/// A reload being loaded on its own thread.
struct Loading {
    result: mpsc::Receiver<Result<Plan, Error>>,
    /// Another SIGHUP came while loading: load once more afterwards, so the
    /// file's latest state is what runs.
    again: bool,
}

/// The control thread's state for one run.
pub(super) struct Control<'s> {
    pub(super) plan: Plan,
    pub(super) totals: Totals,
    pub(super) workers: Workers,
    sink: &'s mut dyn Sink,
    poll: Poll,
    events: Events,
    signals: Signals,
    waker: Arc<Waker>,
    reload: Option<Reload>,
    loading: Option<Loading>,
    stages: Vec<StageRun>,
    start: Instant,
    /// Run time at `start`: zero, or where a run continued from its
    /// `--state` checkpoint picked up (its run time counts from the
    /// original start, so `-d` and the stages continue).
    offset: Duration,
    deadline: Option<Instant>,
    /// When the stop began (drain), once it has.
    pub(super) stop_at: Option<Instant>,
    /// Why the sink stopped the run early (`--abort-on-fail`).
    pub(super) aborted: Option<String>,
    /// The run stopped on its own (duration, `--requests`, stages, an
    /// abort), not by a signal.
    pub(super) complete: bool,
    /// The outage mask the workers were last given.
    outage_mask: u64,
}

impl<'s> Control<'s> {
    /// Sets up the control loop of a run whose workers already started.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        plan: Plan,
        totals: Totals,
        workers: Workers,
        sink: &'s mut dyn Sink,
        poll: Poll,
        signals: Signals,
        waker: Arc<Waker>,
        reload: Option<Reload>,
        offset: Duration,
    ) -> Control<'s> {
        let start = workers.shared.start;
        let stages = plan
            .workloads
            .iter()
            .enumerate()
            .filter_map(|(wi, w)| StageRun::start(wi, w, Duration::ZERO))
            .collect();
        Control {
            deadline: plan.duration.map(|d| start + d.saturating_sub(offset)),
            plan,
            totals,
            workers,
            sink,
            poll,
            events: Events::with_capacity(16),
            signals,
            waker,
            reload,
            loading: None,
            stages,
            start,
            offset,
            stop_at: None,
            aborted: None,
            complete: false,
            outage_mask: 0,
        }
    }

    /// Run time since the run's (original) start.
    fn elapsed(&self) -> Duration {
        self.offset + self.start.elapsed()
    }

    /// Registers the signal source on the control poll.
    pub(super) fn register(poll: &Poll, signals: &mut Signals) -> Result<(), Error> {
        poll.registry()
            .register(signals, SIGNALS, Interest::READABLE)
            .map_err(|e| Error::io("registering signals", e))
    }

    /// Runs until the stop is over; returns the run time until the stop
    /// began.
    pub(super) fn run(&mut self) -> Result<Duration, Error> {
        self.sink.started();
        loop {
            self.wait()?;
            let exit_now = self.on_signals();
            self.take_reload();
            let (idle, budget_done) = self.totals.collect(&self.workers.shared.mailboxes);
            let elapsed = self.elapsed();
            self.totals.tick(elapsed);
            let mask = self.totals.outages.active_mask();
            if mask != self.outage_mask {
                self.outage_mask = mask;
                self.workers.set_outage(mask);
            }
            self.sink.tick(&mut self.totals, elapsed);
            if self.stop_at.is_none() {
                self.advance_stages(elapsed);
                self.maybe_stop(budget_done, elapsed);
            }
            // A worker only returns on its own when it failed.
            let exit_now = exit_now || self.workers.any_finished();
            if let Some(t) = self.stop_at
                && (exit_now || idle || t.elapsed() >= self.plan.drain_timeout)
            {
                break;
            }
            if exit_now {
                self.stop_at.get_or_insert_with(Instant::now);
                break;
            }
        }
        Ok(self
            .stop_at
            .map_or_else(|| self.elapsed(), |t| t.duration_since(self.start) + self.offset))
    }

    /// Waits for a signal, a wake-up or the next tick, whichever is first;
    /// never past the run's deadline or the drain's end.
    fn wait(&mut self) -> Result<(), Error> {
        let now = Instant::now();
        let mut until = now + TICK;
        match self.stop_at {
            None => {
                if let Some(d) = self.deadline {
                    until = until.min(d);
                }
            }
            Some(t) => until = until.min(t + self.plan.drain_timeout),
        }
        match self
            .poll
            .poll(&mut self.events, Some(until.saturating_duration_since(now)))
        {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Ok(()),
            Err(e) => Err(Error::io("waiting for signals", e)),
        }
    }

    /// Handles the signals that arrived; true when the run must end now
    /// (a second SIGINT/SIGTERM).
    fn on_signals(&mut self) -> bool {
        let mut exit_now = false;
        let pending: Vec<i32> = self.signals.pending().collect();
        for sig in pending {
            match sig {
                SIGINT | SIGTERM if self.stop_at.is_none() => {
                    self.sink.stopping();
                    self.sink
                        .note("stopping: finishing requests in flight (signal again to exit at once)");
                    self.begin_stop();
                }
                SIGINT | SIGTERM => exit_now = true,
                SIGUSR1 => self.sink.summary(&self.plan, &self.totals, self.elapsed()),
                SIGHUP => self.start_reload(),
                SIGUSR2 => self.sink.marked(),
                _ => {}
            }
        }
        exit_now
    }

    fn begin_stop(&mut self) {
        self.stop_at = Some(Instant::now());
        self.workers.set_phase(PHASE_DRAIN);
    }

    /// Stops when the duration is over, `--requests` are done, or the
    /// workloads that stop after their stages have finished them.
    fn maybe_stop(&mut self, budget_done: bool, elapsed: Duration) {
        let timed_out = self.deadline.is_some_and(|d| Instant::now() >= d);
        let counted = self.plan.max_requests.is_some() && budget_done;
        if timed_out || counted || stages::all_stopped(&self.plan, &self.stages, elapsed) {
            self.complete = true;
            self.begin_stop();
        } else if let Some(why) = self.sink.abort() {
            self.complete = true;
            // Drained like a SIGTERM, so the responses owed still count.
            self.sink.stopping();
            self.sink.note(&format!("stopping: {why}"));
            self.aborted = Some(why);
            self.begin_stop();
        }
    }

    fn advance_stages(&mut self, elapsed: Duration) {
        let (cmds, notes) = stages::due(&self.plan, &mut self.stages, elapsed);
        for n in notes {
            self.sink.note(&n);
        }
        self.workers.send(&cmds);
    }

    /// SIGHUP: loads the file on a thread of its own, so reading it (a slow
    /// disk, a FIFO) and resolving its host names never stall aggregation,
    /// the metrics or the watchdog.
    fn start_reload(&mut self) {
        let Some(reload) = self.reload.clone() else {
            self.sink.reloaded(false);
            self.sink
                .note("config reload failed: soakd run was not started with --config: nothing to reload");
            return;
        };
        if let Some(l) = self.loading.as_mut() {
            l.again = true;
            return;
        }
        let (tx, rx) = mpsc::channel();
        let waker = self.waker.clone();
        let spawned = std::thread::Builder::new().name("soakd-reload".into()).spawn(move || {
            let result = reload().and_then(|plan| preflight::verdict(&plan).map(|_| plan));
            let _ = tx.send(result);
            let _ = waker.wake();
        });
        match spawned {
            Ok(_) => {
                self.loading = Some(Loading {
                    result: rx,
                    again: false,
                })
            }
            Err(e) => {
                self.sink.reloaded(false);
                self.sink
                    .note(&format!("config reload failed: cannot start a thread: {e}"));
            }
        }
    }

    /// Applies a reload that finished loading, if one did.
    fn take_reload(&mut self) {
        let Some(l) = self.loading.as_ref() else { return };
        let result = match l.result.try_recv() {
            Ok(r) => r,
            Err(mpsc::TryRecvError::Empty) => return,
            Err(mpsc::TryRecvError::Disconnected) => Err(Error::Internal("the reload thread died".into())),
        };
        let again = l.again;
        self.loading = None;
        match result {
            Ok(new) => {
                let what = self.apply_reload(new);
                self.sink.reloaded(true);
                self.sink.note(&format!("config reloaded: {what}"));
            }
            Err(e) => {
                self.sink.reloaded(false);
                self.sink
                    .note(&format!("config reload failed, keeping the running plan: {e}"));
            }
        }
        if again {
            self.start_reload();
        }
    }

    /// Applies the difference between the running plan and `new`; returns
    /// what changed, for the log.
    fn apply_reload(&mut self, new: Plan) -> String {
        let d = diff(&self.plan, &new);
        let elapsed = self.elapsed();
        let mut cmds: Vec<Command> = Vec::new();
        let mut said: Vec<String> = Vec::new();
        for change in d.changes {
            match change {
                Change::Changed {
                    old,
                    new: ni,
                    settings,
                    staged,
                    recycle,
                } => {
                    let nw = new.workloads[ni].clone();
                    if settings {
                        cmds.push(Command::Settings(old as u16, Box::new(WorkloadRt::of(&nw)), recycle));
                    }
                    cmds.push(load_command(old, nw.connections, nw.model));
                    if staged {
                        self.stages.retain(|r| r.workload != old);
                        self.stages.extend(StageRun::start(old, &nw, elapsed));
                    }
                    said.push(format!("{} changed", nw.name));
                    self.totals.set_requests(old, nw.request_names());
                    self.totals.outages.check_open(old, !nw.conn.close);
                    self.sink.workload_changed(old, &nw);
                    self.plan.workloads[old] = nw;
                }
                Change::Added { new: ni } => {
                    let nw = new.workloads[ni].clone();
                    let wi = self.plan.workloads.len();
                    for mb in &self.workers.shared.mailboxes {
                        mb.lock().unwrap_or_else(|p| p.into_inner()).add_workload();
                    }
                    self.totals.add_workload(nw.name.clone());
                    self.totals.set_requests(wi, nw.request_names());
                    self.totals.outages.check_open(wi, !nw.conn.close);
                    self.sink.workload_added(&nw);
                    cmds.push(Command::Add(Box::new(WorkloadRt::of(&nw))));
                    self.stages.extend(StageRun::start(wi, &nw, elapsed));
                    said.push(format!("{} added", nw.name));
                    self.plan.workloads.push(nw);
                }
                Change::Removed { old } => {
                    cmds.push(load_command(old, 0, LoadModel::Closed));
                    let w = &mut self.plan.workloads[old];
                    w.connections = 0;
                    w.stages.clear();
                    self.stages.retain(|r| r.workload != old);
                    said.push(format!("{} removed (draining)", w.name));
                }
            }
        }
        if d.needs_restart {
            said.push(
                "threads, metrics_listen, hdr_log, shard, thresholds, the baseline, outage and event settings take effect at the next start"
                    .into(),
            );
        }
        self.workers.send(&cmds);
        if said.is_empty() {
            "no change".into()
        } else {
            said.join("; ")
        }
    }

    /// After the workers are gone: the last totals, handed to the sink
    /// (`failed`: a worker failed, so the run did not end on its own);
    /// returns how long the sink wants to linger.
    pub(super) fn final_totals(&mut self, failed: bool) -> Duration {
        self.totals.collect(&self.workers.shared.mailboxes);
        self.sink.ended(self.complete && !failed);
        let elapsed = self.elapsed();
        self.sink.finish(&mut self.totals, elapsed)
    }

    /// The sink's linger (serving the final metrics) until it is over or a
    /// signal ends it, then the sink's close. The run's outputs are written
    /// before this (see `engine::Ended`), so a signal here loses nothing.
    pub(super) fn linger(&mut self, linger: Duration) -> Result<(), Error> {
        let waited = self.wait_linger(linger);
        self.sink.close();
        waited
    }

    fn wait_linger(&mut self, linger: Duration) -> Result<(), Error> {
        if linger.is_zero() || self.exit_requested() {
            return Ok(());
        }
        self.sink.note(&format!(
            "run over; serving the final metrics for {} (signal to stop)",
            humantime::format_duration(linger)
        ));
        let until = Instant::now() + linger;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            match self.poll.poll(&mut self.events, Some(left)) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io("waiting for signals", e)),
            }
            if self.exit_requested() {
                return Ok(());
            }
        }
    }

    /// True when SIGINT or SIGTERM arrived since the last look.
    fn exit_requested(&mut self) -> bool {
        self.signals.pending().any(|s| s == SIGINT || s == SIGTERM)
    }
}
