//! What crosses the protocol seam (see `protocol.rs`): the in-flight entry
//! the loop keeps per request, what the loop lends a protocol for a call,
//! and what a protocol answers. A file of its own so the protocols
//! (`http1.rs`, `h2.rs`, `ws.rs`) and the dispatch over them depend on
//! these types, not on each other.
//!
//! Every type here is protocol-neutral: an answer says what the loop must
//! do (account a response, fail one request or the connection, send a
//! request again elsewhere, close and reconnect one way or another), never
//! which protocol frame caused it. What only one protocol counts (GOAWAY
//! codes, pongs, close codes) it counts itself, through [`Tally`], into its
//! own section of the workload's stats.

use super::WorkloadRt;
use crate::stats::{ErrorKind, Gauges, WorkloadStats};

/// One request in flight: when it was due and written, and which it is.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Inflight {
    /// When the request was due (latency starts here).
    pub(super) due: u64,
    /// When it was written (timeouts start here).
    pub(super) written: u64,
    /// Which request of the workload it is.
    pub(super) req: u8,
    /// How often a server handed it back unprocessed (see
    /// `Worker::hand_back`; in the entry's padding, no bigger).
    pub(super) handed_back: u8,
}

/// What the loop lends a protocol for a call that sends: the workload
/// (requests, checks, pre-rendered bytes) and the slot's in-flight entries.
pub(super) struct Cx<'a> {
    pub(super) w: &'a WorkloadRt,
    /// The slot's stretch of the worker's in-flight storage; its length is
    /// the slot's capacity (the worker's deepest pipeline).
    pub(super) entries: &'a [Inflight],
}

impl<'a> Cx<'a> {
    /// What slot `key`'s protocol is lent, from the worker's storage of
    /// `depth` entries per slot.
    #[inline]
    pub(super) fn of(w: &'a WorkloadRt, inflight: &'a [Inflight], key: usize, depth: usize) -> Cx<'a> {
        Cx {
            w,
            entries: &inflight[key * depth..(key + 1) * depth],
        }
    }
}

/// What the loop lends a protocol for a call that may count: the
/// workload's counters and gauges on this worker (plain fields, flushed to
/// the mailbox a few times a second), and the time of the call.
pub(super) struct Tally<'a> {
    pub(super) st: &'a mut WorkloadStats,
    pub(super) g: &'a mut Gauges,
    /// Now, ns since the run started (the loop's one clock read).
    pub(super) now: u64,
}

/// A response that completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Response {
    /// The in-flight entry it answers (its request, due and write times).
    /// The entry is free again from now on.
    pub(super) entry: u16,
    /// Final status code.
    pub(super) status: u16,
    /// The connection stays open after it.
    pub(super) keep_alive: bool,
    /// The request's checks that failed, as a bit set (see
    /// `plan::Checks::finish`); 0 without checks.
    pub(super) failed_checks: u8,
}

/// What became of a request that was due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Issued {
    /// It took this in-flight entry; its bytes are owed from now on.
    Entry(u16),
    /// It went out untimed (a WebSocket message that expects no reply):
    /// no entry, nothing owed back, not a request the counters see.
    Untimed,
    /// It must not be sent on this connection (an HTTP/2 header list over
    /// the server's limit): due and missed, with this kind as the reason.
    Refused(ErrorKind),
}

/// One answer to bytes that arrived, or to the protocol's own timer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Output {
    /// Every byte handed in was used (or kept, when a head is split):
    /// nothing for the loop.
    Taken,
    /// What may go out changed (requests may be issued, or bytes are owed:
    /// an acknowledgement, a pong, a window opened): the loop issues and
    /// writes. Call again with the rest.
    Ready,
    /// The protocol's own handshake is done (a WebSocket upgrade): the
    /// connection has answered, requests may flow. Call again with the
    /// rest.
    Opened,
    /// A response completed; call again with the bytes after it.
    Response(Response),
    /// One request failed alone (its stream was reset, or it was handed
    /// back too often); its entry is free, the connection stays.
    Failed {
        /// The entry.
        entry: u16,
        /// Why.
        kind: ErrorKind,
    },
    /// The entry's request was not processed (above a GOAWAY's last
    /// stream, REFUSED_STREAM): it leaves this connection and is sent
    /// again, on this slot's next connection, with its original due time.
    Retry(u16),
    /// The connection is unusable: every request in flight fails with it.
    Error(ErrorKind),
    /// The connection ends gracefully, nothing lost.
    End(Ending),
}

/// How a connection ends when nothing was lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ending {
    /// The closing handshake soakd started at the stop is complete (or
    /// its wait ran out).
    Stopped,
    /// The server sent the connection away and nothing is left in flight
    /// (an HTTP/2 GOAWAY, or a connection whose stream ids ran out): the
    /// slot reconnects through the ramp, so a fleet told to go at once
    /// does not come back at once.
    SentAway,
    /// The server closed normally (a WebSocket close 1000 or 1001): the
    /// slot reconnects after a backoff step and a ramp token, so a server
    /// shedding sockets is not hit by a reconnect storm.
    Closed,
}

/// What the peer's close meant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AtClose {
    /// Between responses: nothing had arrived of one.
    Idle,
    /// The close ended a response (a close-delimited body); the connection
    /// does not stay (`keep_alive` is false).
    Complete(Response),
    /// The close cut a response short.
    Truncated,
    /// The close itself says what went wrong: an HTTP/2 server that closes
    /// before its SETTINGS never spoke HTTP/2 (`h2_not_negotiated`, not
    /// `eof`: an HTTP/1.1-only server closing on the h2c preface); a
    /// WebSocket closed without a close frame (`ws_closed`).
    Failed(ErrorKind),
    /// The close ended the closing handshake soakd started at the stop.
    Stopped,
    /// The close ends a connection the server sent away (an HTTP/2 GOAWAY,
    /// then its close at the end of the grace) while held streams were
    /// still open on it: they are restarts, not lost (`h2_hold.rs`); the
    /// slot reconnects through the ramp, as after any GOAWAY.
    SentAway,
}
