//! A connection slot and the small pure helpers its schedule uses.
//!
//! A slot holds at most one connection at a time and keeps its place in
//! the schedule across reconnects. It is kept small (`tests/size.rs` pins
//! its size): tens of thousands live at once, and only a split response
//! head is ever stored in one.

use std::collections::VecDeque;

use super::TICK_NS;
use super::WorkloadRt;
pub(super) use super::exchange::Inflight;
use super::protocol::Protocol;
use super::transport::Transport;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum State {
    /// In the ramp queue, waiting for a connect token.
    Waiting,
    /// Waiting out a backoff after an error.
    Backoff,
    /// TCP connect in progress.
    Connecting,
    /// TLS handshake in progress (after the TCP connect); its own state,
    /// with the connect timeout as its deadline.
    Handshaking,
    /// Established (handshake done): requests flow.
    Open,
    /// Stopped: the run is ending.
    Idle,
}

/// One connection slot. Kept small: tens of thousands live at once.
pub(super) struct Conn {
    pub(super) stream: Option<Transport>,
    /// Bumped for each new socket so events for an old one are dropped.
    pub(super) generation: u32,
    pub(super) workload: u16,
    pub(super) state: State,
    /// Close after the requests in flight (planned churn).
    pub(super) draining: bool,
    /// The current connection completed at least one response.
    pub(super) answered: bool,
    /// The slot is gone from the plan (a stage lowered the connections): it
    /// closes after its requests in flight and is removed.
    pub(super) retiring: bool,
    pub(super) backoff_ms: u32,
    /// Requests this connection may still issue (planned churn).
    pub(super) reqs_left: u32,
    /// Global slot index within the workload: the schedule's phase.
    pub(super) slot: u32,
    /// Connect start while connecting; open time while open.
    pub(super) since: u64,
    /// Next scheduled due time (paced / open loop), ns; 0 before the first.
    pub(super) next_due: u64,
    /// Planned churn by age, ns.
    pub(super) lifetime_end: u64,
    /// What the connection speaks: requests in flight, bytes owed, the
    /// response being framed (see `protocol.rs`).
    pub(super) proto: Protocol,
    /// Position in the workload's mix cycle (starts at the slot index,
    /// taken modulo the cycle's length when used).
    pub(super) mix_pos: u32,
}

impl Conn {
    /// A slot waiting for its first connection.
    pub(super) fn new(workload: u16, slot: u32, w: &WorkloadRt) -> Conn {
        Conn {
            stream: None,
            generation: 0,
            workload,
            state: State::Waiting,
            draining: false,
            answered: false,
            retiring: false,
            backoff_ms: 0,
            reqs_left: u32::MAX,
            slot,
            since: 0,
            next_due: 0,
            lifetime_end: u64::MAX,
            proto: Protocol::new(w),
            mix_pos: slot,
        }
    }
}

pub(super) struct Ramp {
    pub(super) queue: VecDeque<u32>,
    pub(super) rate: f64,
    pub(super) tokens: f64,
    pub(super) last: u64,
}

/// The first wheel tick at or after `ns`: a timer never fires early.
pub(super) fn tick_ceil(ns: u64) -> u64 {
    ns.div_ceil(TICK_NS)
}

/// The first due time at or after `now` of slot `slot` on the grid of a
/// workload with `connections` slots and interval `iv`: slot j is due at
/// j/connections of the interval, so the requests of all slots are spread
/// evenly in time. (Grouping a few requests per due time would save loop
/// wake-ups, but the bursts queue at servers with few workers and bias the
/// very latency soakd measures: tried and rejected.)
pub(super) fn grid_due(slot: u32, connections: u32, iv: u64, now: u64) -> u64 {
    let phase = (slot as u128 * iv as u128 / connections.max(1) as u128) as u64;
    if now <= phase {
        phase
    } else {
        phase + (now - phase).div_ceil(iv) * iv
    }
}

/// ±10% around `v`.
pub(super) fn jitter(rng: &mut fastrand::Rng, v: u64) -> u64 {
    let f = 0.9 + rng.f64() * 0.2;
    ((v as f64 * f) as u64).max(1)
}
