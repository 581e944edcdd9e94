//! One worker thread: a mio `Poll`, a slab of connection slots, a timer
//! wheel, and plain counters.
//!
//! Each slot holds at most one connection at a time and keeps its place in
//! the schedule across reconnects. A slot moves through
//! `Waiting` (for a ramp token) → `Connecting` → (https) `Handshaking` →
//! `Open` → (on error) `Backoff` → `Waiting` …; a graceful close (server
//! `Connection: close`, planned churn) goes straight back to `Connecting`,
//! and a stop leaves every slot `Idle`.
//!
//! What a connection speaks lives behind one seam, [`protocol::Protocol`]
//! (HTTP/1.1, HTTP/2, WebSocket, and HTTP/3 over the worker's QUIC sockets,
//! `quic.rs`): the loop hands it due requests, write room and bytes
//! that arrived, and it answers with bytes to send and responses that name
//! the in-flight entry they complete. The loop keeps the socket, the
//! schedule, the timer wheel and the counters, so a new protocol touches
//! none of them.
//!
//! Hot path rules: readiness is drained (edge-triggered), reads go into one
//! per-thread buffer and only a split response head is ever kept per
//! connection, request bytes are written from the workload's pre-rendered
//! buffer, stats are plain fields flushed to the mailbox a few times a
//! second, and every deadline is one `O(1)` wheel entry per connection,
//! armed exactly for its earliest deadline whenever that changes (see
//! `io.rs`, `arm`): a timer left early would cost a wake-up for nothing.

mod commands;
mod conn;
mod exchange;
#[doc(hidden)]
pub mod fuzzing;
mod h2;
mod h2_streams;
mod h3;
mod h3_ends;
mod h3_lanes;
mod h3_response;
mod http1;
mod io;
mod lifecycle;
mod linger;
mod probe;
mod protocol;
mod quic;
pub(super) mod socket;
mod transport;
mod ws;

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mio::Poll;
use slab::Slab;

use crate::stats::{CloseReason, Delta, Gauges, Mailbox, WorkloadStats};
use crate::timer::Wheel;
use conn::{Conn, Inflight, Ramp, State};
use socket::PortPicker;
use transport::TlsClient;

pub use protocol::ProtoRt;

/// Workers run normally.
pub const PHASE_RUN: u8 = 0;
/// Stop sending and reconnecting; finish responses in flight.
pub const PHASE_DRAIN: u8 = 1;
/// Close everything and return.
pub const PHASE_EXIT: u8 = 2;

/// The waker's token; connection tokens never reach it (keys are < 2^32).
pub use crate::netio::WAKER;

/// The timer wheel's tick. Fine enough that a paced request waits at most
/// this long for its tick; the wait (`netio::Waiter`: a timeout in
/// nanoseconds, within the kernel's 50 us slack) ends at that tick, and
/// every request due by then goes out in that one wake-up.
const TICK_NS: u64 = 100_000;
const FLUSH_EVERY_NS: u64 = 250_000_000;
/// The interval of a protocol's per-interval figures (WebSocket subscribe
/// silences, see `ProtoRt::walks`); the timeline's first interval, so a
/// point's figures are its own (a walk runs at the first flush after each
/// boundary).
const WALK_INTERVAL: u64 = crate::stats::BASE_INTERVAL.as_nanos() as u64;
const BACKSTOP: Duration = Duration::from_secs(1);
const BACKOFF_FIRST_MS: u32 = 100;
const BACKOFF_MAX_MS: u32 = 10_000;
const READ_BUF: usize = 64 * 1024;
/// A connection open this long with a response behind it counts as a
/// success for the backoff.
const HEALTHY_NS: u64 = 1_000_000_000;

/// Bytes of one connection slot ([`Conn`]) and of one in-flight request
/// entry, pinned by `tests/size.rs`: tens of thousands of slots live at
/// once, and "kept small" should stay true by test, not by comment.
#[doc(hidden)]
pub const SIZES: (usize, usize) = (std::mem::size_of::<Conn>(), std::mem::size_of::<Inflight>());

/// State shared between the control thread and the workers. Workers read
/// `phase` once per loop iteration and touch their mailbox once per flush.
pub struct Shared {
    /// One of the `PHASE_*` values.
    pub phase: AtomicU8,
    /// One per worker.
    pub mailboxes: Vec<Mailbox>,
    /// The run's time zero.
    pub start: Instant,
    /// Stage changes waiting for each worker; `commands_sent` moves when
    /// there are new ones, so a worker looks at its queue only then.
    pub commands: Vec<std::sync::Mutex<Vec<Command>>>,
    /// Bumped by the control thread after queueing commands.
    pub commands_sent: std::sync::atomic::AtomicU64,
    /// Wakes the control thread: a worker that has nothing left in flight
    /// after a stop says so at once, so the drain ends without polling.
    pub control: Arc<mio::Waker>,
    /// Per workload (bit `wi`, see `probe::bit`): an outage is on and the
    /// server has not answered since; workers read it once per loop
    /// iteration, as `phase` (see `probe.rs`).
    pub outage: AtomicU64,
}

/// Per-workload settings the workers need, computed from the plan. Each
/// worker has its own copy, which stage changes update; the request bytes
/// in it are shared, not copied.
#[derive(Clone, Debug)]
pub struct WorkloadRt {
    /// Where to connect.
    pub addr: SocketAddr,
    /// Local addresses to bind, spread by slot.
    pub sources: Vec<IpAddr>,
    /// `--tcp-keepalive`: the idle time before the kernel probes.
    pub keepalive: Option<std::time::Duration>,
    /// The request bytes repeated a few times (see [`WorkloadRt::of`]), so
    /// a burst of pipelined requests goes out in one write.
    pub wire: Arc<[u8]>,
    /// Length of one request.
    pub req_len: usize,
    /// HEAD requests: responses have no body.
    pub head: bool,
    /// Every request of the workload (shared, never copied). With one
    /// request, `wire` is what is sent and this only holds its checks.
    pub requests: Arc<[crate::plan::Request]>,
    /// A mix's selection order (see `plan::mix`), walked by each slot from
    /// an offset of its own; `None` for a workload of one request, whose
    /// hot path is then exactly what it was before mixes existed.
    pub cycle: Option<Arc<[u8]>>,
    /// https: how connections speak TLS.
    pub tls: Option<TlsClient>,
    /// How the workload is paced (set with [`WorkloadRt::set_load`], which
    /// derives the two steps below from it).
    pub model: crate::plan::LoadModel,
    /// Per-connection schedule interval (paced / open loop), ns: the step
    /// of a connection's schedule.
    pub interval_ns: Option<u64>,
    /// The step of a connection that carries several lanes (an HTTP/2
    /// connection's `--streams`), ns. With `-i` each lane is paced as a
    /// connection is, so the connection steps by interval/lanes; with `-r`
    /// the rate is the workload's total and lanes only let more requests be
    /// in flight.
    pub lane_step_ns: Option<u64>,
    /// Connections of the workload (for schedule phases).
    pub connections: u32,
    /// Requests in flight per connection.
    pub pipeline: u16,
    /// Planned churn by request count; `Some(1)` without jitter for `--close`.
    pub max_requests: Option<u32>,
    /// `--close`: exactly one request per connection.
    pub close: bool,
    /// `--close-with-reset`: planned closes are resets (no TIME_WAIT).
    pub close_with_reset: bool,
    /// Planned churn by age, ns.
    pub max_lifetime_ns: Option<u64>,
    /// Connect timeout, ns.
    pub connect_timeout_ns: u64,
    /// Request timeout, ns.
    pub request_timeout_ns: u64,
    /// New connections per second for the whole workload (`--ramp`).
    pub ramp: u32,
    /// What the connections speak (see `protocol.rs`).
    pub proto: ProtoRt,
}

impl WorkloadRt {
    /// In-flight entries a slot of this workload may need: the pipeline
    /// depth or the protocol's (HTTP/2's streams), whichever is deeper.
    pub fn depth(&self) -> usize {
        self.pipeline.max(self.proto.depth()) as usize
    }

    /// Sets the workload's connections and pace, and the schedule steps
    /// they imply (the one place that derives them).
    pub fn set_load(&mut self, connections: u32, model: crate::plan::LoadModel) {
        self.connections = connections;
        self.model = model;
        self.interval_ns = model.per_connection_interval(connections).map(|d| d.as_nanos() as u64);
        let lanes = match model {
            crate::plan::LoadModel::Interval(_) => self.proto.lanes(),
            _ => 1,
        };
        self.lane_step_ns = self.interval_ns.map(|iv| (iv / lanes as u64).max(1));
    }
}

impl WorkloadRt {
    /// A workload of one request `req` (closed loop, one connection) for
    /// the protocols' unit tests and the fuzzer (`fuzzing.rs`).
    pub(super) fn test(req: &[u8], pipeline: u16, proto: ProtoRt) -> WorkloadRt {
        let bytes: Arc<[u8]> = Arc::from(req);
        WorkloadRt {
            addr: "127.0.0.1:1".parse().expect("an address"),
            sources: Vec::new(),
            keepalive: None,
            wire: bytes.repeat(pipeline.max(1) as usize).into(),
            req_len: bytes.len(),
            head: false,
            requests: vec![crate::plan::Request {
                name: "r".into(),
                bytes,
                head: false,
                weight: 1,
                checks: None,
            }]
            .into(),
            cycle: None,
            tls: None,
            model: crate::plan::LoadModel::Closed,
            interval_ns: None,
            lane_step_ns: None,
            connections: 1,
            pipeline,
            max_requests: None,
            close: false,
            close_with_reset: false,
            max_lifetime_ns: None,
            connect_timeout_ns: 1,
            request_timeout_ns: 1,
            ramp: 1,
            proto,
        }
    }
}

/// Most bytes of request copies kept in [`WorkloadRt::wire`]: enough for a
/// burst of small pipelined requests to be one write, never a copy of a
/// large body per pipeline slot.
const WIRE_COPIES_BYTES: usize = 64 * 1024;

impl WorkloadRt {
    /// The settings of `w` as the workers use them. The request is
    /// repeated up to its pipeline depth, but only as far as 64 KiB, so a
    /// deep pipeline of large bodies costs one copy, not `pipeline` of them.
    pub fn of(w: &crate::plan::Workload) -> WorkloadRt {
        let req = &w.target.requests[0].bytes;
        let weights: Vec<u32> = w.target.requests.iter().map(|r| r.weight).collect();
        let copies = (WIRE_COPIES_BYTES / req.len().max(1)).clamp(1, w.conn.pipeline.max(1) as usize);
        let mut rt = WorkloadRt {
            addr: w.target.addr,
            sources: w.conn.source_addrs.clone(),
            keepalive: w.conn.tcp_keepalive,
            wire: if copies == 1 {
                req.clone()
            } else {
                req.repeat(copies).into()
            },
            req_len: req.len(),
            head: w.target.requests[0].head,
            requests: w.target.requests.clone().into(),
            cycle: (weights.len() > 1).then(|| crate::plan::mix::cycle(&weights).into()),
            tls: w.target.tls.as_ref().map(|t| TlsClient {
                config: t.config.clone(),
                name: t.server_name.clone(),
            }),
            model: w.model,
            interval_ns: None,
            lane_step_ns: None,
            connections: w.connections,
            pipeline: w.conn.pipeline,
            max_requests: if w.conn.close {
                Some(1)
            } else {
                w.conn.max_requests_per_conn
            },
            close: w.conn.close,
            close_with_reset: w.conn.close_with_reset,
            max_lifetime_ns: w.conn.max_conn_lifetime.map(|d| d.as_nanos() as u64),
            connect_timeout_ns: w.conn.connect_timeout.as_nanos() as u64,
            request_timeout_ns: w.conn.request_timeout.as_nanos() as u64,
            ramp: w.ramp,
            proto: ProtoRt::of(w),
        };
        rt.set_load(w.connections, w.model);
        rt
    }
}

/// What the control thread can ask of a running worker.
#[derive(Clone, Debug)]
pub enum Command {
    /// A workload's connections or pace change (a stage, or a reload).
    Stage(StageCmd),
    /// A reload changed a workload's other settings (request, timeouts,
    /// churn, target), and whether the change recycles its connections
    /// (`engine::reload`: derived from each setting's declared class). Its
    /// connections and pace follow in a `Stage`.
    Settings(u16, Box<WorkloadRt>, bool),
    /// A reload added a workload; it gets the next index.
    Add(Box<WorkloadRt>),
}

/// A change of a workload's load, sent by the control thread when a stage
/// begins.
#[derive(Clone, Copy, Debug)]
pub struct StageCmd {
    /// The workload.
    pub workload: u16,
    /// Connections the workload holds from now on.
    pub connections: u32,
    /// Its pace from now on.
    pub model: crate::plan::LoadModel,
}

/// What one worker is given.
pub struct WorkerSpec {
    /// Index of the worker (its mailbox).
    pub index: usize,
    /// Its poll instance (the waker was made from it).
    pub poll: Poll,
    /// Slots it owns: (workload index, global slot index within the workload).
    pub slots: Vec<(u16, u32)>,
    /// Its share of `--requests`.
    pub budget: Option<u64>,
    /// Per workload: new connections per second this worker may open.
    pub ramp: Vec<f64>,
    /// Local ports this worker binds itself (`None`: the kernel picks).
    pub ports: Option<PortPicker>,
    /// Worker threads in all (see [`super::deal::worker_of`]).
    pub threads: usize,
    /// The process's shard of the plan: which slots are its own.
    pub shard: crate::plan::Shard,
}

/// A worker's whole state; lives on its own thread.
pub struct Worker {
    index: usize,
    poll: Poll,
    shared: Arc<Shared>,
    wl: Vec<WorkloadRt>,
    conns: Slab<Conn>,
    /// Connection generations are unique per worker (not per slot), so an
    /// event for a removed slot's socket can never match a new occupant.
    generations: crate::netio::Generations,
    threads: usize,
    shard: crate::plan::Shard,
    commands_seen: u64,
    wheel: Wheel,
    fired: Vec<u32>,
    /// Ring storage for requests in flight: `max_pipeline` entries per slot.
    inflight: Vec<Inflight>,
    max_pipeline: usize,
    rbuf: Vec<u8>,
    ramp: Vec<Ramp>,
    local: Vec<WorkloadStats>,
    gauges: Vec<Gauges>,
    full_at: Vec<Option<Duration>>,
    open_at_stop: Option<Vec<u64>>,
    budget_left: u64,
    has_budget: bool,
    inflight_total: u64,
    rng: fastrand::Rng,
    phase: u8,
    next_flush: u64,
    heartbeat: u64,
    /// This worker has told the control thread it is idle in the drain.
    told_idle: bool,
    ports: Option<PortPicker>,
    /// Requests a server handed back unprocessed (an HTTP/2 GOAWAY or
    /// REFUSED_STREAM), by slot key, waiting for the slot's next connection
    /// (rare: empty but for the moment after a GOAWAY).
    handed_back: Vec<(u32, Inflight)>,
    /// Connections whose closing handshake (at the stop) waits for the
    /// server's answer: the drain waits for them as for responses.
    closing: u64,
    /// When the per-interval walk is next due (ns; see `ProtoRt::walks`).
    next_walk: u64,
    /// The control thread's outage mask as last seen (see `probe.rs`).
    outage: u64,
    /// Workloads whose waiting slots a probe's connection woke in this
    /// outage.
    probe_woken: u64,
    /// Failed sockets waiting for the server's close (see `linger.rs`).
    lingering: linger::Lingering,
    /// UDP sockets and the QUIC endpoint, made at the first QUIC connect
    /// (see `quic.rs`).
    quic: Option<Box<quic::Quic>>,
}

impl Worker {
    /// Builds a worker; nothing is opened until [`Worker::run`].
    pub fn new(spec: WorkerSpec, shared: Arc<Shared>, wl: Vec<WorkloadRt>) -> std::io::Result<Worker> {
        let n = wl.len();
        let max_pipeline = wl.iter().map(WorkloadRt::depth).max().unwrap_or(1);
        let mut conns = Slab::with_capacity(spec.slots.len());
        let mut ramp: Vec<Ramp> = spec
            .ramp
            .iter()
            .map(|&rate| Ramp {
                queue: VecDeque::new(),
                rate: rate.max(0.001),
                tokens: 1.0,
                last: 0,
            })
            .collect();
        let mut gauges = vec![Gauges::default(); n];
        for &(w, slot) in &spec.slots {
            let key = conns.insert(Conn::new(w, slot, &wl[w as usize]));
            ramp[w as usize].queue.push_back(key as u32);
            gauges[w as usize].desired += 1;
            gauges[w as usize].backoff += 1;
        }
        Ok(Worker {
            generations: Default::default(),
            threads: spec.threads,
            shard: spec.shard,
            commands_seen: 0,
            ports: spec.ports,
            handed_back: Vec::new(),
            index: spec.index,
            poll: spec.poll,
            inflight: vec![Inflight::default(); conns.capacity().max(1) * max_pipeline],
            max_pipeline,
            conns,
            wheel: Wheel::new(),
            fired: Vec::new(),
            rbuf: vec![0; READ_BUF],
            ramp,
            local: wl
                .iter()
                .map(|w| WorkloadStats::with_requests(w.requests.len()))
                .collect(),
            gauges,
            full_at: vec![None; n],
            open_at_stop: None,
            budget_left: spec.budget.unwrap_or(u64::MAX),
            has_budget: spec.budget.is_some(),
            inflight_total: 0,
            rng: fastrand::Rng::with_seed(0x50a6d ^ spec.index as u64),
            phase: PHASE_RUN,
            next_flush: 0,
            heartbeat: 0,
            told_idle: false,
            closing: 0,
            next_walk: WALK_INTERVAL,
            outage: 0,
            probe_woken: 0,
            lingering: Default::default(),
            quic: None,
            shared,
            wl,
        })
    }

    fn now(&self) -> u64 {
        self.shared.start.elapsed().as_nanos() as u64
    }

    /// The event loop; returns when the control thread says exit.
    pub fn run(mut self) -> std::io::Result<()> {
        let mut waiter = crate::netio::Waiter::new(1024);
        loop {
            let now = self.now();
            // The wait itself ends at the next deadline (within the
            // kernel's slack): no timer descriptor to re-arm per paced
            // request, and everything due by then is served in the one
            // wake-up (`expire_timers` below).
            let timeout = Duration::from_nanos(self.next_wakeup().saturating_sub(now)).min(BACKSTOP);
            waiter.wait(&self.poll, Some(timeout))?;
            self.heartbeat += 1;
            for ev in waiter.iter() {
                match ev.token() {
                    WAKER => {}
                    _ => self.on_event(&ev),
                }
            }
            let now = self.now();
            let sent = self.shared.commands_sent.load(Ordering::Acquire);
            if sent != self.commands_seen {
                self.commands_seen = sent;
                self.apply_commands(now);
            }
            let phase = self.shared.phase.load(Ordering::Acquire);
            if phase != self.phase {
                if phase == PHASE_EXIT {
                    break;
                }
                self.begin_drain(now);
            }
            let outage = self.shared.outage.load(Ordering::Acquire);
            if outage != self.outage {
                self.on_outage(outage, now);
            }
            if let Some(i) = self.quic_unread() {
                self.on_quic(i);
            }
            self.expire_timers(now);
            self.run_ramp(now);
            // The datagrams everything above made leave together.
            self.quic_flush();
            if now >= self.next_flush {
                if now >= self.next_walk {
                    self.walk(now);
                }
                self.flush(now);
            }
            // Draining and nothing left in flight: hand that over now and
            // wake the control thread, so the drain ends when the last
            // response is in rather than at its next look.
            if self.phase == PHASE_DRAIN
                && self.inflight_total == 0
                && self.closing == 0
                && self.lingering.is_empty()
                && !self.told_idle
            {
                self.told_idle = true;
                self.flush(now);
                let _ = self.shared.control.wake();
            }
        }
        self.shutdown();
        Ok(())
    }

    /// When the loop must wake next (ns): a timer, a ramp token or a flush.
    fn next_wakeup(&self) -> u64 {
        if self.quic_unread().is_some() {
            return 0;
        }
        let mut next = self.next_flush;
        if let Some(tick) = self.wheel.next_deadline() {
            next = next.min(tick * TICK_NS);
        }
        if self.phase == PHASE_RUN {
            for r in &self.ramp {
                if !r.queue.is_empty() {
                    let wait = ((1.0 - r.tokens).max(0.0) / r.rate * 1e9) as u64;
                    next = next.min(r.last + wait);
                }
            }
        }
        next
    }

    fn begin_drain(&mut self, now: u64) {
        self.phase = PHASE_DRAIN;
        self.open_at_stop = Some(self.gauges.iter().map(|g| g.open).collect());
        for r in &mut self.ramp {
            r.queue.clear();
        }
        let keys: Vec<usize> = self.conns.iter().map(|(k, _)| k).collect();
        for key in keys {
            match self.conns[key].state {
                State::Waiting | State::Backoff => {
                    self.wheel.cancel(key as u32);
                    self.set_state(key, State::Idle);
                }
                State::Connecting | State::Handshaking => {
                    self.drop_transport(key, false);
                    self.wheel.cancel(key as u32);
                    self.set_state(key, State::Idle);
                }
                State::Open | State::Idle => {}
            }
        }
        self.start_closing(now);
        self.flush(now);
    }

    /// Closes every connection at exit. Requests still in flight stay
    /// counted as in flight (the report shows them), not as failures.
    fn shutdown(&mut self) {
        // A stop that went straight to exit (a second signal before this
        // worker saw the drain) still records what was open when it began.
        if self.open_at_stop.is_none() {
            self.open_at_stop = Some(self.gauges.iter().map(|g| g.open).collect());
        }
        let keys: Vec<usize> = self.conns.iter().map(|(k, _)| k).collect();
        let now = self.now();
        for key in keys {
            if self.conns[key].state == State::Open {
                // The in-flight gauge keeps these: the report shows them.
                self.close(key, CloseReason::Shutdown, now);
            } else if self.conns[key].state != State::Idle {
                self.drop_transport(key, false);
                self.set_state(key, State::Idle);
            }
        }
        self.lingering.expire(self.poll.registry(), u64::MAX);
        self.quic_flush();
        self.flush(now);
    }

    fn flush(&mut self, now: u64) {
        self.next_flush = now + FLUSH_EVERY_NS;
        self.lingering.expire(self.poll.registry(), now);
        let idle =
            self.phase != PHASE_RUN && self.inflight_total == 0 && self.closing == 0 && self.lingering.is_empty();
        // Requests handed back are out of `inflight_total` but still owed:
        // the budget is done only once they were sent again and answered.
        let budget_done =
            self.has_budget && self.budget_left == 0 && self.inflight_total == 0 && self.handed_back.is_empty();
        let mut mb = self.shared.mailboxes[self.index]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let Delta {
            stats,
            gauges,
            full_at,
            open_at_stop,
            idle: mb_idle,
            budget_done: mb_budget,
            heartbeat,
            ..
        } = &mut *mb;
        for (into, from) in stats.iter_mut().zip(self.local.iter_mut()) {
            into.add(from);
            from.clear();
        }
        // A reload may have grown the mailbox before this worker saw the
        // new workload: fill the prefix this worker knows.
        gauges[..self.gauges.len()].copy_from_slice(&self.gauges);
        full_at[..self.full_at.len()].copy_from_slice(&self.full_at);
        if open_at_stop.is_none() {
            open_at_stop.clone_from(&self.open_at_stop);
        }
        *mb_idle = idle;
        *mb_budget = budget_done;
        *heartbeat = self.heartbeat;
    }
}
