//! One worker thread: a mio `Poll`, a slab of connection slots, a timer
//! wheel, and plain counters.
//!
//! Each slot holds at most one connection at a time and keeps its place in
//! the schedule across reconnects. A slot moves through
//! `Waiting` (for a ramp token) → `Connecting` → `Open` → (on error)
//! `Backoff` → `Waiting` …; a graceful close (server `Connection: close`,
//! planned churn) goes straight back to `Connecting`.
//!
//! Hot path rules: readiness is drained (edge-triggered), reads go into one
//! per-thread buffer and only a split response head is ever kept per
//! connection, request bytes are written from the workload's pre-rendered
//! buffer, stats are plain fields flushed to the mailbox a few times a
//! second, and every deadline is one `O(1)` wheel entry per connection that
//! is re-armed lazily (an early timer is left in place and re-checked when
//! it fires).

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token};
use slab::Slab;

use super::socket::{self, Connecting, PortPicker};
use crate::http::{AtEof, Framed, Framer};
use crate::stats::{self, CloseReason, Delta, ErrorKind, Gauges, Mailbox, WorkloadStats};
use crate::timer::Wheel;

/// Workers run normally.
pub const PHASE_RUN: u8 = 0;
/// Stop sending and reconnecting; finish responses in flight.
pub const PHASE_DRAIN: u8 = 1;
/// Close everything and return.
pub const PHASE_EXIT: u8 = 2;

/// The waker's token; connection tokens never reach it (keys are < 2^32).
pub const WAKER: Token = Token(usize::MAX);
/// The timerfd's token.
const TIMER: Token = Token(usize::MAX - 1);

/// The timer wheel's tick. Fine enough that a paced request waits at most
/// this long for its tick; the timerfd wakes the loop at that tick.
const TICK_NS: u64 = 100_000;
const FLUSH_EVERY_NS: u64 = 250_000_000;
const BACKSTOP: Duration = Duration::from_secs(1);
const BACKOFF_FIRST_MS: u32 = 100;
const BACKOFF_MAX_MS: u32 = 10_000;
const READ_BUF: usize = 64 * 1024;
/// A connection open this long with a response behind it counts as a
/// success for the backoff.
const HEALTHY_NS: u64 = 1_000_000_000;

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
}

/// Per-workload settings the workers need, computed from the plan. Each
/// worker has its own copy, which stage changes update.
#[derive(Clone, Debug)]
pub struct WorkloadRt {
    /// Where to connect.
    pub addr: SocketAddr,
    /// Local addresses to bind, spread by slot.
    pub sources: Vec<IpAddr>,
    /// The request bytes repeated `pipeline` times, so any run of issued
    /// requests is one contiguous slice.
    pub wire: Vec<u8>,
    /// Length of one request.
    pub req_len: usize,
    /// HEAD requests: responses have no body.
    pub head: bool,
    /// Per-connection schedule interval (paced / open loop), ns.
    pub interval_ns: Option<u64>,
    /// Connections of the workload (for schedule phases).
    pub connections: u32,
    /// Requests in flight per connection.
    pub pipeline: u16,
    /// Planned churn by request count; `Some(1)` without jitter for `--close`.
    pub max_requests: Option<u32>,
    /// `--close`: exactly one request per connection.
    pub close: bool,
    /// Planned churn by age, ns.
    pub max_lifetime_ns: Option<u64>,
    /// Connect timeout, ns.
    pub connect_timeout_ns: u64,
    /// Request timeout, ns.
    pub request_timeout_ns: u64,
    /// New connections per second for the whole workload (`--ramp`).
    pub ramp: u32,
}

/// What the control thread can ask of a running worker.
#[derive(Clone, Debug)]
pub enum Command {
    /// A workload's connections or pace change (a stage, or a reload).
    Stage(StageCmd),
    /// A reload changed a workload's other settings (request, timeouts,
    /// churn, target). Its connections and pace follow in a `Stage`.
    Settings(u16, Box<WorkloadRt>),
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
    /// The per-connection interval from now on (`None`: closed loop).
    pub interval_ns: Option<u64>,
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
    /// Worker threads in all (slot `s` belongs to worker `s % threads`).
    pub threads: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// In the ramp queue, waiting for a connect token.
    Waiting,
    /// Waiting out a backoff after an error.
    Backoff,
    Connecting,
    Open,
    /// Stopped: the run is ending.
    Idle,
}

/// One connection slot. Kept small: tens of thousands live at once.
struct Conn {
    stream: Option<mio::net::TcpStream>,
    /// Bumped for each new socket so events for an old one are dropped.
    generation: u32,
    workload: u16,
    state: State,
    /// Close after the requests in flight (planned churn).
    draining: bool,
    /// The current connection completed at least one response.
    answered: bool,
    /// The slot is gone from the plan (a stage lowered the connections): it
    /// closes after its requests in flight and is removed.
    retiring: bool,
    inflight: u16,
    inflight_head: u16,
    backoff_ms: u32,
    /// Requests this connection may still issue (planned churn).
    reqs_left: u32,
    /// Bytes of issued requests not yet written.
    unwritten: u32,
    /// Offset of the next byte to write within one request.
    write_off: u32,
    /// Global slot index within the workload: the schedule's phase.
    slot: u32,
    /// Connect start while connecting; open time while open.
    since: u64,
    /// Next scheduled due time (paced / open loop), ns; 0 before the first.
    next_due: u64,
    /// Planned churn by age, ns.
    lifetime_end: u64,
    framer: Framer,
    /// An incomplete response head carried over to the next read; empty
    /// (and unallocated) otherwise.
    partial: Vec<u8>,
}

impl Conn {
    /// A slot waiting for its first connection.
    fn new(workload: u16, slot: u32, head: bool) -> Conn {
        Conn {
            stream: None,
            generation: 0,
            workload,
            state: State::Waiting,
            draining: false,
            answered: false,
            retiring: false,
            inflight: 0,
            inflight_head: 0,
            backoff_ms: 0,
            reqs_left: u32::MAX,
            unwritten: 0,
            write_off: 0,
            slot,
            since: 0,
            next_due: 0,
            lifetime_end: u64::MAX,
            framer: Framer::new(head),
            partial: Vec::new(),
        }
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Inflight {
    /// When the request was due (latency starts here).
    due: u64,
    /// When it was written (timeouts start here).
    written: u64,
}

struct Ramp {
    queue: VecDeque<u32>,
    rate: f64,
    tokens: f64,
    last: u64,
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
    next_generation: u32,
    threads: usize,
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
    /// epoll_wait's timeout is whole milliseconds (rounded up), which would
    /// add up to a millisecond of schedule lag to paced requests. A timerfd
    /// armed for the next deadline wakes the loop on time instead.
    timerfd: timerfd::TimerFd,
    /// The deadline the timerfd is armed for (ns), `u64::MAX` when not armed.
    timer_armed: u64,
    ports: Option<PortPicker>,
}

fn token(key: usize, generation: u32) -> Token {
    Token(key | ((generation as usize) << 32))
}

/// The first wheel tick at or after `ns`: a timer never fires early.
fn tick_ceil(ns: u64) -> u64 {
    ns.div_ceil(TICK_NS)
}

/// The first due time at or after `now` of slot `slot` on the grid of a
/// workload with `connections` slots and interval `iv`: slot j is due at
/// j/connections of the interval, so the requests of all slots are spread
/// evenly in time. (Grouping a few requests per due time would save loop
/// wake-ups, but the bursts queue at servers with few workers and bias the
/// very latency soakd measures: tried and rejected.)
fn grid_due(slot: u32, connections: u32, iv: u64, now: u64) -> u64 {
    let phase = (slot as u128 * iv as u128 / connections.max(1) as u128) as u64;
    if now <= phase {
        phase
    } else {
        phase + (now - phase).div_ceil(iv) * iv
    }
}

/// ±10% around `v`.
fn jitter(rng: &mut fastrand::Rng, v: u64) -> u64 {
    let f = 0.9 + rng.f64() * 0.2;
    ((v as f64 * f) as u64).max(1)
}

impl Worker {
    /// Builds a worker; nothing is opened until [`Worker::run`].
    pub fn new(spec: WorkerSpec, shared: Arc<Shared>, wl: Vec<WorkloadRt>) -> io::Result<Worker> {
        let timerfd = timerfd::TimerFd::new_custom(timerfd::ClockId::Monotonic, true, true)?;
        {
            use std::os::fd::AsRawFd;
            spec.poll.registry().register(
                &mut mio::unix::SourceFd(&timerfd.as_raw_fd()),
                TIMER,
                Interest::READABLE,
            )?;
        }
        let n = wl.len();
        let max_pipeline = wl.iter().map(|w| w.pipeline as usize).max().unwrap_or(1);
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
            let key = conns.insert(Conn::new(w, slot, wl[w as usize].head));
            ramp[w as usize].queue.push_back(key as u32);
            gauges[w as usize].desired += 1;
            gauges[w as usize].backoff += 1;
        }
        Ok(Worker {
            next_generation: 0,
            threads: spec.threads,
            commands_seen: 0,
            ports: spec.ports,
            timerfd,
            timer_armed: u64::MAX,
            index: spec.index,
            poll: spec.poll,
            inflight: vec![Inflight::default(); conns.capacity().max(1) * max_pipeline],
            max_pipeline,
            conns,
            wheel: Wheel::new(),
            fired: Vec::new(),
            rbuf: vec![0; READ_BUF],
            ramp,
            local: (0..n).map(|_| WorkloadStats::default()).collect(),
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
            shared,
            wl,
        })
    }

    fn now(&self) -> u64 {
        self.shared.start.elapsed().as_nanos() as u64
    }

    /// The event loop; returns when the control thread says exit.
    pub fn run(mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        loop {
            let now = self.now();
            let next = self.next_wakeup();
            // Re-arm only for an earlier deadline: a timerfd left armed for
            // a deadline that moved later costs one early wake-up, while
            // re-arming on every change costs a syscall (and on a VM a timer
            // reprogramming) per loop iteration.
            if next > now && next < self.timer_armed {
                let wait = Duration::from_nanos(next - now);
                self.timerfd
                    .set_state(timerfd::TimerState::Oneshot(wait), timerfd::SetTimeFlags::Default);
                self.timer_armed = next;
            }
            // The timerfd is the precise wake-up; epoll's own timeout is only
            // a backstop, kept long so it does not program a second timer.
            let timeout = if next <= now { Duration::ZERO } else { BACKSTOP };
            match self.poll.poll(&mut events, Some(timeout)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
            self.heartbeat += 1;
            for ev in events.iter() {
                match ev.token() {
                    WAKER => {}
                    // No read: re-arming the timerfd resets its count, and
                    // every expiry raises a new edge.
                    TIMER => self.timer_armed = u64::MAX,
                    _ => self.on_event(ev),
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
            self.expire_timers(now);
            self.run_ramp(now);
            if now >= self.next_flush {
                self.flush(now);
            }
        }
        self.shutdown();
        Ok(())
    }

    /// When the loop must wake next (ns): a timer, a ramp token or a flush.
    fn next_wakeup(&self) -> u64 {
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

    fn on_event(&mut self, ev: &mio::event::Event) {
        let raw = ev.token().0;
        let key = raw & 0xffff_ffff;
        let generation = (raw >> 32) as u32;
        let Some(c) = self.conns.get(key) else { return };
        if c.generation != generation {
            return;
        }
        let now = self.now();
        match c.state {
            State::Connecting => {
                let Some(stream) = c.stream.as_ref() else { return };
                match socket::finish_connect(stream) {
                    Ok(true) => {
                        self.on_connected(key, now);
                        // The same event may already carry the server's
                        // close (a server that accepts and closes at once):
                        // read it now, no later edge would report it.
                        if (ev.is_read_closed() || ev.is_error())
                            && self
                                .conns
                                .get(key)
                                .is_some_and(|c| c.generation == generation && c.state == State::Open)
                        {
                            let mut rbuf = std::mem::take(&mut self.rbuf);
                            self.on_readable(key, &mut rbuf, true, now);
                            self.rbuf = rbuf;
                        }
                    }
                    Ok(false) => {}
                    Err(kind) => self.fail(key, kind, now),
                }
            }
            State::Open => {
                if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                    // With a FIN or an error pending, a short read does not
                    // mean drained: read on until the EOF or error shows, or
                    // no new edge would ever report it.
                    let to_the_end = ev.is_read_closed() || ev.is_error();
                    let mut rbuf = std::mem::take(&mut self.rbuf);
                    self.on_readable(key, &mut rbuf, to_the_end, now);
                    self.rbuf = rbuf;
                }
                let Some(c) = self.conns.get(key) else { return };
                if ev.is_writable()
                    && c.generation == generation
                    && c.state == State::Open
                    && c.unwritten > 0
                    && self.write_out(key, now)
                {
                    self.arm(key);
                }
            }
            _ => {}
        }
    }

    fn set_state(&mut self, key: usize, to: State) {
        let c = &mut self.conns[key];
        let g = &mut self.gauges[c.workload as usize];
        match c.state {
            State::Open => g.open -= 1,
            State::Connecting => g.connecting -= 1,
            State::Waiting | State::Backoff => g.backoff -= 1,
            State::Idle => {}
        }
        match to {
            State::Open => g.open += 1,
            State::Connecting => g.connecting += 1,
            State::Waiting | State::Backoff => g.backoff += 1,
            State::Idle => {}
        }
        c.state = to;
    }

    fn start_connect(&mut self, key: usize, now: u64) {
        let c = &mut self.conns[key];
        let w = &self.wl[c.workload as usize];
        let source = (!w.sources.is_empty()).then(|| w.sources[c.slot as usize % w.sources.len()]);
        let addr = w.addr;
        self.local[c.workload as usize].counters.connects_started += 1;
        self.next_generation = self.next_generation.wrapping_add(1);
        c.generation = self.next_generation;
        c.since = now;
        c.draining = false;
        c.answered = false;
        c.framer = Framer::new(self.wl[c.workload as usize].head);
        c.partial = Vec::new();
        let tok = token(key, c.generation);
        self.set_state(key, State::Connecting);
        let (mut stream, done) = match socket::connect(addr, source, self.ports.as_mut()) {
            Ok(Connecting::InProgress(s)) => (s, false),
            Ok(Connecting::Done(s)) => (s, true),
            Err(kind) => return self.fail(key, kind, now),
        };
        if let Err(e) = self
            .poll
            .registry()
            .register(&mut stream, tok, Interest::READABLE | Interest::WRITABLE)
        {
            return self.fail(key, socket::classify_connect(&e), now);
        }
        let c = &mut self.conns[key];
        c.stream = Some(stream);
        if done {
            self.on_connected(key, now);
        } else {
            let deadline = now + self.wl[c.workload as usize].connect_timeout_ns;
            self.wheel.schedule(key as u32, tick_ceil(deadline));
        }
    }

    fn on_connected(&mut self, key: usize, now: u64) {
        self.set_state(key, State::Open);
        let c = &mut self.conns[key];
        let wi = c.workload as usize;
        let w = &self.wl[wi];
        let st = &mut self.local[wi];
        st.counters.opened += 1;
        stats::record_ns(&mut st.connect, now - c.since);
        c.since = now;
        c.inflight = 0;
        c.inflight_head = 0;
        c.unwritten = 0;
        c.write_off = 0;
        c.lifetime_end = w.max_lifetime_ns.map_or(u64::MAX, |l| now + jitter(&mut self.rng, l));
        c.reqs_left = match w.max_requests {
            None => u32::MAX,
            Some(_) if w.close => 1,
            Some(n) => jitter(&mut self.rng, n as u64).min(u32::MAX as u64) as u32,
        };
        if let Some(iv) = w.interval_ns {
            if c.next_due == 0 {
                c.next_due = grid_due(c.slot, w.connections, iv, now);
            } else if c.next_due + w.request_timeout_ns < now {
                // Requests that fell due while the slot had no connection and
                // are already older than the request timeout are dropped as
                // missed; the rest go out at once, late, with their latency
                // counted from when they were due.
                let stale = (now - w.request_timeout_ns - c.next_due) / iv + 1;
                c.next_due += stale * iv;
                st.counters.missed += stale;
            }
        }
        let g = &self.gauges[wi];
        if self.full_at[wi].is_none() && g.open == g.desired {
            self.full_at[wi] = Some(Duration::from_nanos(now));
        }
        if self.pump(key, now) {
            self.arm(key);
        }
    }

    /// Issues every request the load model allows now and writes them.
    /// Returns false when the connection failed while writing.
    fn pump(&mut self, key: usize, now: u64) -> bool {
        let Worker {
            conns,
            wl,
            local,
            inflight,
            max_pipeline,
            budget_left,
            has_budget,
            phase,
            ..
        } = self;
        let c = &mut conns[key];
        let w = &wl[c.workload as usize];
        let st = &mut local[c.workload as usize];
        let base = key * *max_pipeline;
        if inflight.len() < base + *max_pipeline {
            inflight.resize(base + *max_pipeline, Inflight::default());
        }
        let mut issued = 0u64;
        while c.inflight < w.pipeline && !c.draining && *phase == PHASE_RUN && *budget_left > 0 && c.reqs_left > 0 {
            let due = match w.interval_ns {
                None => now,
                Some(iv) => {
                    if c.next_due > now {
                        break;
                    }
                    let d = c.next_due;
                    c.next_due += iv;
                    stats::record_ns(&mut st.lag, now - d);
                    d
                }
            };
            let at = (c.inflight_head as usize + c.inflight as usize) % *max_pipeline;
            inflight[base + at] = Inflight { due, written: now };
            c.inflight += 1;
            c.unwritten += w.req_len as u32;
            if *has_budget {
                *budget_left -= 1;
            }
            if c.reqs_left != u32::MAX {
                c.reqs_left -= 1;
            }
            issued += 1;
        }
        if issued == 0 {
            return true;
        }
        st.counters.sent += issued;
        self.inflight_total += issued;
        self.gauges[self.conns[key].workload as usize].in_flight += issued;
        self.write_out(key, now)
    }

    /// Writes issued request bytes until done or the socket is full.
    /// Returns false when the connection failed.
    fn write_out(&mut self, key: usize, now: u64) -> bool {
        let c = &mut self.conns[key];
        let w = &self.wl[c.workload as usize];
        let Some(stream) = c.stream.as_mut() else { return false };
        let mut written = 0u64;
        let mut failure = None;
        while c.unwritten > 0 {
            let off = c.write_off as usize;
            let end = (off + c.unwritten as usize).min(w.wire.len());
            match stream.write(&w.wire[off..end]) {
                Ok(0) => {
                    failure = Some(ErrorKind::Reset);
                    break;
                }
                Ok(n) => {
                    written += n as u64;
                    c.unwritten -= n as u32;
                    c.write_off = ((off + n) % w.req_len) as u32;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    failure = Some(socket::classify_established(&e));
                    break;
                }
            }
        }
        self.local[c.workload as usize].counters.bytes_sent += written;
        match failure {
            Some(kind) => {
                self.fail(key, kind, now);
                false
            }
            None => true,
        }
    }

    fn on_readable(&mut self, key: usize, rbuf: &mut [u8], to_the_end: bool, now: u64) {
        loop {
            let c = &mut self.conns[key];
            let Some(stream) = c.stream.as_mut() else { return };
            match stream.read(rbuf) {
                Ok(0) => return self.on_eof(key, now),
                Ok(n) => {
                    self.local[c.workload as usize].counters.bytes_received += n as u64;
                    // Latency ends when the bytes are in, not after parsing
                    // whatever else arrived in the same batch of events.
                    let now = self.now();
                    if !self.on_bytes(key, &rbuf[..n], now) {
                        return;
                    }
                    // A short read drained the socket; the next arrival
                    // raises a new edge.
                    if n < rbuf.len() && !to_the_end {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.fail(key, socket::classify_established(&e), now),
            }
        }
    }

    /// Frames bytes that arrived. Returns false when the connection was
    /// closed or replaced while handling them.
    fn on_bytes(&mut self, key: usize, fresh: &[u8], now: u64) -> bool {
        let generation = self.conns[key].generation;
        let mut carried = std::mem::take(&mut self.conns[key].partial);
        let data: &[u8] = if carried.is_empty() {
            fresh
        } else {
            carried.extend_from_slice(fresh);
            &carried
        };
        let mut pos = 0;
        while pos < data.len() {
            let c = &mut self.conns[key];
            if c.inflight == 0 {
                // Bytes nobody asked for: the stream is out of step.
                self.fail(key, ErrorKind::Protocol, now);
                return false;
            }
            match c.framer.feed(&data[pos..]) {
                Err(_) => {
                    self.fail(key, ErrorKind::Protocol, now);
                    return false;
                }
                Ok(Framed::Partial { consumed }) => {
                    pos += consumed;
                    break;
                }
                Ok(Framed::Complete {
                    consumed,
                    status,
                    keep_alive,
                }) => {
                    pos += consumed;
                    if !self.on_response(key, status, keep_alive, now) {
                        return false;
                    }
                }
            }
        }
        let c = &mut self.conns[key];
        if c.generation == generation && c.state == State::Open && pos < data.len() {
            // Only an incomplete head is ever carried; it is capped by the
            // framer at 64 KiB.
            c.partial = data[pos..].to_vec();
        }
        true
    }

    /// Accounts one complete response. Returns false when the connection is
    /// gone afterwards (closed, or replaced by a new one).
    fn on_response(&mut self, key: usize, status: u16, keep_alive: bool, now: u64) -> bool {
        let c = &mut self.conns[key];
        let wi = c.workload as usize;
        let slot = self.inflight[key * self.max_pipeline + c.inflight_head as usize];
        c.inflight_head = ((c.inflight_head as usize + 1) % self.max_pipeline) as u16;
        c.inflight -= 1;
        c.answered = true;
        self.inflight_total -= 1;
        self.gauges[wi].in_flight -= 1;
        let st = &mut self.local[wi];
        st.counters.completed += 1;
        st.counters.response(status);
        stats::record_ns(&mut st.latency, now.saturating_sub(slot.due));
        let churn_done = c.reqs_left == 0 || c.draining;
        if churn_done && c.inflight == 0 {
            self.close(key, CloseReason::Churn, now);
            self.reconnect(key, now);
            return false;
        }
        if !keep_alive {
            self.close(key, CloseReason::ServerClose, now);
            self.reconnect(key, now);
            return false;
        }
        if self.pump(key, now) {
            self.arm(key);
            true
        } else {
            false
        }
    }

    fn on_eof(&mut self, key: usize, now: u64) {
        let c = &mut self.conns[key];
        match c.framer.eof(c.partial.len()) {
            AtEof::Complete { status } => {
                // The close ends the body: a complete response, and then a
                // server close (handled by `on_response`).
                self.on_response(key, status, false, now);
            }
            AtEof::Idle if c.inflight == 0 && c.answered => {
                self.close(key, CloseReason::ServerClose, now);
                self.reconnect(key, now);
            }
            AtEof::Idle if c.inflight == 0 => {
                // Closed before it ever answered: not an error (nothing was
                // owed), but reconnecting at once would let a server that
                // accepts and closes every connection pull a reconnect storm.
                self.close(key, CloseReason::ServerClose, now);
                if self.conns[key].retiring {
                    self.remove_slot(key);
                } else if self.phase == PHASE_RUN {
                    self.back_off(key, false, now);
                }
            }
            AtEof::Idle | AtEof::Truncated => self.fail(key, ErrorKind::Eof, now),
        }
    }

    /// Closes an established connection. Requests still in flight cannot be
    /// answered any more: they count as failed with `eof`.
    fn close(&mut self, key: usize, reason: CloseReason, _now: u64) {
        let c = &mut self.conns[key];
        let wi = c.workload as usize;
        if let Some(mut s) = c.stream.take() {
            let _ = self.poll.registry().deregister(&mut s);
        }
        let lost = c.inflight as u64;
        c.inflight = 0;
        c.inflight_head = 0;
        c.unwritten = 0;
        c.write_off = 0;
        c.partial = Vec::new();
        c.framer.reset();
        // A graceful close of a connection that worked starts the backoff
        // over; one that never answered keeps it growing (see `on_eof`).
        if reason != CloseReason::Error && c.answered {
            c.backoff_ms = 0;
        }
        let st = &mut self.local[wi].counters;
        st.closed[reason as usize] += 1;
        if lost > 0 && reason != CloseReason::Shutdown {
            st.failed += lost;
            st.error(ErrorKind::Eof, lost);
            self.lose(wi, lost);
        }
        self.wheel.cancel(key as u32);
        self.set_state(key, State::Idle);
    }

    /// Requests that failed go back into the `--requests` budget, so the run
    /// still ends with exactly that many completed.
    fn lose(&mut self, wi: usize, lost: u64) {
        self.inflight_total -= lost;
        self.gauges[wi].in_flight -= lost;
        if self.has_budget {
            self.budget_left += lost;
        }
    }

    /// After a graceful close: a new connection at once (no backoff, no ramp
    /// token), unless the run is stopping.
    fn reconnect(&mut self, key: usize, now: u64) {
        if self.conns[key].retiring {
            self.remove_slot(key);
        } else if self.phase == PHASE_RUN {
            self.start_connect(key, now);
        }
    }

    /// Takes a slot out of the worker for good.
    fn remove_slot(&mut self, key: usize) {
        if let Some(mut s) = self.conns[key].stream.take() {
            let _ = self.poll.registry().deregister(&mut s);
        }
        self.wheel.cancel(key as u32);
        self.set_state(key, State::Idle);
        let wi = self.conns[key].workload as usize;
        self.gauges[wi].desired -= 1;
        self.conns.remove(key);
    }

    /// Applies the stage changes the control thread queued.
    fn apply_commands(&mut self, now: u64) {
        let cmds: Vec<Command> = {
            let mut q = self.shared.commands[self.index]
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            std::mem::take(&mut *q)
        };
        for cmd in cmds {
            match cmd {
                Command::Stage(stage) => self.apply_stage(stage, now),
                Command::Settings(wi, rt) => self.apply_settings(wi as usize, *rt, now),
                Command::Add(rt) => self.add_workload(*rt, now),
            }
        }
    }

    /// New settings for a workload. Connections whose requests would mix
    /// old and new bytes, or that go to a target that changed, are recycled
    /// after their requests in flight (as churn); the others carry on.
    fn apply_settings(&mut self, wi: usize, mut rt: WorkloadRt, now: u64) {
        let old = &self.wl[wi];
        let recycle = old.addr != rt.addr || old.sources != rt.sources || old.head != rt.head || old.wire != rt.wire;
        rt.connections = old.connections;
        rt.interval_ns = old.interval_ns;
        let deeper = rt.pipeline as usize > self.max_pipeline;
        self.wl[wi] = rt;
        if deeper {
            self.grow_pipeline(self.wl[wi].pipeline as usize, now);
            return;
        }
        if !recycle {
            return;
        }
        let keys: Vec<usize> = self
            .conns
            .iter()
            .filter(|(_, c)| c.workload as usize == wi && !c.retiring && c.state == State::Open)
            .map(|(k, _)| k)
            .collect();
        for key in keys {
            let c = &mut self.conns[key];
            c.draining = true;
            if c.inflight == 0 {
                self.close(key, CloseReason::Churn, now);
                self.reconnect(key, now);
            }
        }
    }

    /// Re-sizes the in-flight ring for a deeper pipeline. Its entries are
    /// laid out by the old depth, so every open connection starts afresh;
    /// requests in flight on them are counted as lost (`eof`) rather than
    /// matched to the wrong answers.
    fn grow_pipeline(&mut self, depth: usize, now: u64) {
        let keys: Vec<usize> = self.conns.iter().map(|(k, _)| k).collect();
        for key in keys {
            if self.conns[key].state != State::Open {
                continue;
            }
            if self.conns[key].inflight > 0 {
                self.fail(key, ErrorKind::Eof, now);
            } else {
                self.close(key, CloseReason::Churn, now);
                self.reconnect(key, now);
            }
        }
        self.max_pipeline = depth;
        self.inflight = vec![Inflight::default(); self.conns.capacity().max(1) * depth];
    }

    /// A workload added by a reload: it takes the next index everywhere.
    fn add_workload(&mut self, mut rt: WorkloadRt, now: u64) {
        let connections = rt.connections;
        let interval_ns = rt.interval_ns;
        rt.connections = 0;
        let deeper = rt.pipeline as usize > self.max_pipeline;
        let depth = rt.pipeline as usize;
        self.wl.push(rt);
        if deeper {
            self.grow_pipeline(depth, now);
        }
        self.local.push(WorkloadStats::default());
        self.gauges.push(Gauges::default());
        self.full_at.push(None);
        self.ramp.push(Ramp {
            queue: VecDeque::new(),
            rate: 0.001,
            tokens: 1.0,
            last: now,
        });
        let workload = (self.wl.len() - 1) as u16;
        self.apply_stage(
            StageCmd {
                workload,
                connections,
                interval_ns,
            },
            now,
        );
    }

    /// A workload's connections or pacing changed. Slots past the new count
    /// retire (after their requests in flight), new slots join the ramp
    /// queue, and every remaining slot re-joins the schedule's grid.
    fn apply_stage(&mut self, cmd: StageCmd, now: u64) {
        let wi = cmd.workload as usize;
        let old = self.wl[wi].connections;
        self.wl[wi].connections = cmd.connections;
        self.wl[wi].interval_ns = cmd.interval_ns;
        let keys: Vec<usize> = self
            .conns
            .iter()
            .filter(|(_, c)| c.workload as usize == wi && !c.retiring)
            .map(|(k, _)| k)
            .collect();
        let mut mine = 0u64;
        for key in keys {
            let c = &mut self.conns[key];
            if c.slot >= cmd.connections {
                self.retire(key, now);
                continue;
            }
            mine += 1;
            c.next_due = 0;
            if c.state == State::Open {
                if let Some(iv) = cmd.interval_ns {
                    c.next_due = grid_due(c.slot, cmd.connections, iv, now);
                }
                if self.pump(key, now) {
                    self.arm(key);
                }
            }
        }
        let head = self.wl[wi].head;
        for slot in old..cmd.connections {
            if slot as usize % self.threads != self.index {
                continue;
            }
            mine += 1;
            let key = self.conns.insert(Conn::new(cmd.workload, slot, head));
            self.ramp[wi].queue.push_back(key as u32);
            self.gauges[wi].desired += 1;
            self.gauges[wi].backoff += 1;
        }
        let rate = self.wl[wi].ramp as f64 * mine as f64 / cmd.connections.max(1) as f64;
        self.ramp[wi].rate = rate.max(0.001);
    }

    /// Retires a slot: at once when it has nothing in flight, otherwise
    /// after its last response (see `reconnect`).
    fn retire(&mut self, key: usize, now: u64) {
        let c = &mut self.conns[key];
        c.retiring = true;
        match c.state {
            State::Open if c.inflight > 0 => c.draining = true,
            State::Open => {
                self.close(key, CloseReason::Churn, now);
                self.remove_slot(key);
            }
            _ => self.remove_slot(key),
        }
    }

    /// Records a failure of the slot's connection and backs off.
    fn fail(&mut self, key: usize, kind: ErrorKind, now: u64) {
        let c = &mut self.conns[key];
        let wi = c.workload as usize;
        let was_open = c.state == State::Open;
        // The backoff starts over only after a connection that worked for a
        // while. Resetting it on any response would let a server that answers
        // once and then breaks the connection pull 10 reconnects a second
        // from every slot.
        let healthy = was_open && c.answered && now.saturating_sub(c.since) >= HEALTHY_NS;
        let lost = c.inflight as u64;
        if was_open {
            c.inflight = 0;
            self.close(key, CloseReason::Error, now);
        } else if let Some(mut s) = c.stream.take() {
            let _ = self.poll.registry().deregister(&mut s);
        }
        let st = &mut self.local[wi].counters;
        // One error per request lost, or one for the connection when no
        // request was owed (a failed connect, a reset while idle).
        st.error(kind, lost.max(1));
        if lost > 0 {
            st.failed += lost;
            self.lose(wi, lost);
        }
        if self.conns[key].retiring {
            return self.remove_slot(key);
        }
        if self.phase != PHASE_RUN {
            self.wheel.cancel(key as u32);
            self.set_state(key, State::Idle);
            return;
        }
        self.back_off(key, healthy, now);
    }

    /// Waits out the slot's next backoff step (100 ms doubling to 10 s, half
    /// jittered) before it reconnects; `reset` starts over at 100 ms.
    fn back_off(&mut self, key: usize, reset: bool, now: u64) {
        let c = &mut self.conns[key];
        if reset {
            c.backoff_ms = 0;
        }
        c.backoff_ms = if c.backoff_ms == 0 {
            BACKOFF_FIRST_MS
        } else {
            (c.backoff_ms * 2).min(BACKOFF_MAX_MS)
        };
        // Half fixed, half random: spreads a crowd of failed slots over time
        // so a recovering target is not hit by all of them at once.
        let delay_ns = (c.backoff_ms as f64 * (0.5 + 0.5 * self.rng.f64()) * 1e6) as u64;
        self.set_state(key, State::Backoff);
        self.wheel.schedule(key as u32, tick_ceil(now + delay_ns));
    }

    fn expire_timers(&mut self, now: u64) {
        let mut fired = std::mem::take(&mut self.fired);
        self.wheel.poll(now / TICK_NS, &mut fired);
        for &id in &fired {
            self.on_timer(id as usize, now);
        }
        fired.clear();
        self.fired = fired;
    }

    fn on_timer(&mut self, key: usize, now: u64) {
        let Some(c) = self.conns.get_mut(key) else { return };
        let w = &self.wl[c.workload as usize];
        match c.state {
            State::Backoff => {
                self.set_state(key, State::Waiting);
                let wi = self.conns[key].workload as usize;
                self.ramp[wi].queue.push_back(key as u32);
            }
            State::Connecting => {
                if now >= c.since + w.connect_timeout_ns {
                    self.fail(key, ErrorKind::ConnectTimeout, now);
                } else {
                    self.wheel
                        .schedule(key as u32, tick_ceil(c.since + w.connect_timeout_ns));
                }
            }
            State::Open => {
                if c.inflight > 0 {
                    let oldest = self.inflight[key * self.max_pipeline + c.inflight_head as usize];
                    if now >= oldest.written + w.request_timeout_ns {
                        return self.fail(key, ErrorKind::Timeout, now);
                    }
                }
                if now >= c.lifetime_end && !c.draining {
                    c.draining = true;
                    if c.inflight == 0 {
                        self.close(key, CloseReason::Churn, now);
                        return self.reconnect(key, now);
                    }
                }
                if self.pump(key, now) {
                    self.arm(key);
                }
            }
            State::Waiting | State::Idle => {}
        }
    }

    /// Arms the open connection's timer for its earliest deadline. Exact
    /// (re-arming is `O(1)` and syscall-free): a stale early timer, such as
    /// the timeout of a request already answered, would cost the loop a
    /// wake-up for nothing.
    fn arm(&mut self, key: usize) {
        let c = &self.conns[key];
        if c.state != State::Open {
            return;
        }
        let w = &self.wl[c.workload as usize];
        let mut deadline = u64::MAX;
        if c.inflight > 0 {
            let oldest = self.inflight[key * self.max_pipeline + c.inflight_head as usize];
            deadline = oldest.written + w.request_timeout_ns;
        }
        if !c.draining {
            deadline = deadline.min(c.lifetime_end);
            if let Some(_iv) = w.interval_ns
                && c.inflight < w.pipeline
                && c.reqs_left > 0
                && self.phase == PHASE_RUN
            {
                deadline = deadline.min(c.next_due);
            }
        }
        if deadline == u64::MAX {
            self.wheel.cancel(key as u32);
            return;
        }
        let tick = tick_ceil(deadline);
        if self.wheel.deadline(key as u32) != Some(tick) {
            self.wheel.schedule(key as u32, tick);
        }
    }

    fn run_ramp(&mut self, now: u64) {
        if self.phase != PHASE_RUN {
            return;
        }
        for wi in 0..self.ramp.len() {
            let r = &mut self.ramp[wi];
            if r.queue.is_empty() {
                r.last = now;
                continue;
            }
            // A burst of at most 1 ms worth of tokens: connects are spread
            // over the second instead of stalling the loop (and the paced
            // requests it owes) for a batch.
            let cap = (r.rate / 1000.0).max(1.0);
            r.tokens = (r.tokens + (now.saturating_sub(r.last)) as f64 * r.rate / 1e9).min(cap);
            r.last = now;
            while self.ramp[wi].tokens >= 1.0 {
                let Some(key) = self.ramp[wi].queue.pop_front() else {
                    break;
                };
                self.ramp[wi].tokens -= 1.0;
                if self.conns.get(key as usize).is_some_and(|c| c.state == State::Waiting) {
                    self.start_connect(key as usize, now);
                }
            }
        }
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
                State::Connecting => {
                    if let Some(mut s) = self.conns[key].stream.take() {
                        let _ = self.poll.registry().deregister(&mut s);
                    }
                    self.wheel.cancel(key as u32);
                    self.set_state(key, State::Idle);
                }
                State::Open | State::Idle => {}
            }
        }
        self.flush(now);
    }

    /// Closes every connection at exit. Requests still in flight stay
    /// counted as in flight (the report shows them), not as failures.
    fn shutdown(&mut self) {
        let keys: Vec<usize> = self.conns.iter().map(|(k, _)| k).collect();
        for key in keys {
            if self.conns[key].state == State::Open {
                // The in-flight gauge keeps these: the report shows them.
                self.close(key, CloseReason::Shutdown, 0);
            } else if self.conns[key].state != State::Idle {
                if let Some(mut s) = self.conns[key].stream.take() {
                    let _ = self.poll.registry().deregister(&mut s);
                }
                self.set_state(key, State::Idle);
            }
        }
        let now = self.now();
        self.flush(now);
    }

    fn flush(&mut self, now: u64) {
        self.next_flush = now + FLUSH_EVERY_NS;
        let idle = self.phase != PHASE_RUN && self.inflight_total == 0;
        let budget_done = self.has_budget && self.budget_left == 0 && self.inflight_total == 0;
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
