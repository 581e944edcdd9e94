//! The engine: worker threads that hold the connections, and the control
//! loop that steers them.
//!
//! The thread that calls [`run`] becomes the control thread
//! ([`control`]). Workers ([`worker`]) each own a `Poll`, a slab of
//! connection slots and a timer wheel; they count into plain fields and
//! hand deltas over through a mailbox a few times a second. Everything the
//! run shows the world (metrics, logs, the status line, systemd) is fed
//! through one small trait, [`Sink`], so the engine knows none of them, and
//! a reload comes in as a closure that builds a new plan, so the engine
//! knows nothing of config files either.

mod control;
mod deal;
mod reload;
mod stages;
mod worker;
mod workers;

use std::sync::atomic::{AtomicU8, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mio::{Poll, Waker};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1, SIGUSR2};
use signal_hook_mio::v1_0::Signals;

use crate::Error;
use crate::plan::{Plan, Workload};
use crate::stats::{Delta, Totals, TotalsSaved};
use control::{Control, WAKE};
pub use worker::SIZES;
#[doc(hidden)]
pub use worker::fuzzing::drive as fuzz_client_protocols;
use worker::{PHASE_RUN, Shared};
use workers::Workers;

/// Builds a fresh plan when SIGHUP asks for one (the config file read
/// again). Called on a thread of its own, so it may block.
pub type Reload = Arc<dyn Fn() -> Result<Plan, Error> + Send + Sync>;

/// What the control loop tells the world. Every method is called on the
/// control thread, never on a worker's.
pub trait Sink {
    /// The workers are running (systemd: ready).
    fn started(&mut self) {}
    /// New totals, about every 250 ms (and after every event the control
    /// thread handles).
    fn tick(&mut self, totals: &mut Totals, elapsed: Duration);
    /// A line for the operator: a stage began, a reload, a stop.
    fn note(&mut self, msg: &str);
    /// SIGINT/SIGTERM: the drain begins.
    fn stopping(&mut self) {}
    /// SIGUSR1: the summary so far, please.
    fn summary(&mut self, _plan: &Plan, _totals: &Totals, _elapsed: Duration) {}
    /// A reload added a workload.
    fn workload_added(&mut self, _w: &Workload) {}
    /// A reload changed workload `i` (now `w`): its URL may have turned
    /// it into a WebSocket workload, or back into an HTTP one.
    fn workload_changed(&mut self, _i: usize, _w: &Workload) {}
    /// SIGUSR2: an event from outside, now (its name is the sink's to
    /// find: `--event-name-file`).
    fn marked(&mut self) {}
    /// A reload was tried; `ok` says whether it was applied.
    fn reloaded(&mut self, _ok: bool) {}
    /// Whether [`Sink::tick`] reads [`Totals::take_interval`] (a status
    /// line): asked once, before the run.
    fn takes_intervals(&self) -> bool {
        true
    }
    /// The run is over, before [`Sink::finish`]: `complete` when it ended
    /// on its own (its duration, `--requests`, its stages or an abort),
    /// not by a signal or a failure.
    fn ended(&mut self, _complete: bool) {}
    /// The workers are gone and `totals` are final. Returns how long to
    /// keep the run's outputs up (serving the last metrics) before
    /// [`Sink::close`]; a signal cuts it short.
    fn finish(&mut self, totals: &mut Totals, elapsed: Duration) -> Duration;
    /// The run is over; release what is held.
    fn close(&mut self) {}
    /// Why the run should stop early (a threshold failed for too long),
    /// asked after every tick; `None` to go on.
    fn abort(&mut self) -> Option<String> {
        None
    }
}

/// A run whose workers are gone and whose totals are final, before the
/// linger: the moment its outputs (the report, the HTML page) are written,
/// so a user waiting for them does not wait out `--metrics-linger`, and a
/// signal during the linger cannot cost them. [`Ended::linger`] then keeps
/// the final metrics up and releases the sink.
#[must_use = "call linger() to serve the final metrics and release the sink"]
pub struct Ended<'s> {
    control: Control<'s>,
    ran: Duration,
    linger: Duration,
}

impl Ended<'_> {
    /// The plan, with every reload applied.
    pub fn plan(&self) -> &Plan {
        &self.control.plan
    }

    /// Final totals.
    pub fn totals(&self) -> &Totals {
        &self.control.totals
    }

    /// Run time until the stop began.
    pub fn ran(&self) -> Duration {
        self.ran
    }

    /// Why the sink stopped the run early, if it did.
    pub fn aborted(&self) -> Option<&str> {
        self.control.aborted.as_deref()
    }

    /// Serves the final metrics for the sink's linger (a SIGINT/SIGTERM
    /// cuts it short), then closes the sink.
    pub fn linger(mut self) -> Result<(), Error> {
        self.control.linger(self.linger)
    }
}

/// A run that continues from its `--state` checkpoint.
#[derive(Debug)]
pub struct Resume {
    /// The totals as checkpointed.
    pub totals: TotalsSaved,
    /// Run time of the checkpoint.
    pub checkpoint_at: Duration,
    /// Run time now, since the original start: where this process's run
    /// time begins.
    pub now: Duration,
}

/// Runs `plan` until it stops and its workers are gone. The caller has
/// passed preflight and set up its sink (which binds the metrics port)
/// before anything connects; it writes what it must from the [`Ended`]
/// run, then calls [`Ended::linger`]. With `resume` the run continues a
/// checkpointed one: its totals continue and its run time counts from the
/// original start (the connections themselves start over).
pub fn run(
    plan: Plan,
    reload: Option<Reload>,
    sink: &mut dyn Sink,
    resume: Option<Resume>,
) -> Result<Ended<'_>, Error> {
    let total = plan.total_connections().max(1);
    let threads = plan.threads.clamp(1, total as usize);
    let names: Vec<String> = plan.workloads.iter().map(|w| w.name.clone()).collect();

    let poll = Poll::new().map_err(|e| Error::io("creating the control poll", e))?;
    let mut signals = Signals::new([SIGINT, SIGTERM, SIGUSR1, SIGUSR2, SIGHUP])
        .map_err(|e| Error::io("installing signal handlers", e))?;
    Control::register(&poll, &mut signals)?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKE).map_err(|e| Error::io("creating a waker", e))?);
    let shared = Arc::new(Shared {
        phase: AtomicU8::new(PHASE_RUN),
        mailboxes: (0..threads).map(|_| Mutex::new(Delta::new(names.len()))).collect(),
        start: Instant::now(),
        commands: (0..threads).map(|_| Mutex::new(Vec::new())).collect(),
        commands_sent: AtomicU64::new(0),
        control: waker.clone(),
        outage: AtomicU64::new(0),
    });
    // From here on an error return drops `workers`, which stops and joins
    // every thread already started.
    let workers = Workers::spawn(&plan, threads, shared)?;
    let mut totals = Totals::new(names, threads, plan.hdr_log.is_some(), plan.threshold_window.is_some());
    for (wi, w) in plan.workloads.iter().enumerate() {
        totals.set_requests(wi, w.request_names());
    }
    if sink.takes_intervals() {
        totals.keep_interval();
    }
    // A `--close` workload holds no connection between its requests: only
    // its errors make outages.
    totals.outages = crate::stats::Outages::new(
        plan.outage_rules(),
        plan.workloads.iter().map(|w| (w.name.clone(), !w.conn.close)),
    );
    let offset = match resume {
        Some(r) => {
            totals.restore(r.totals, r.checkpoint_at, r.now);
            r.now
        }
        None => Duration::ZERO,
    };
    let mut control = Control::new(plan, totals, workers, sink, poll, signals, waker, reload, offset);
    let ran = control.run()?;
    let joined = control.workers.join();
    let linger = control.final_totals(joined.is_err());
    if let Err(e) = joined {
        // A worker failed: there is no report to write, but the metrics
        // stay up for their last scrape as after any run.
        control.linger(linger)?;
        return Err(e);
    }
    Ok(Ended { control, ran, linger })
}
