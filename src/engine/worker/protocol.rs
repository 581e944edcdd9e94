//! The protocol seam: what a connection speaks, behind one type the hot
//! path calls, so the loop never knows HTTP/1.1 from what comes next.
//!
//! The loop (`io.rs`, `lifecycle.rs`) owns the socket, the schedule (when
//! a request is due and which one of a mix), the timer wheel, the counters
//! and the in-flight entries' storage (one stretch of `max_pipeline`
//! [`Inflight`] entries per slot, in one per-worker vector). A
//! [`Protocol`] owns everything about how requests and responses map onto
//! the byte stream, and is driven sans I/O (quiche's `Connection` driven
//! from mio is the model): the loop tells it
//!
//! - **due request**: [`Protocol::issue`] picks the in-flight entry the
//!   request takes (the loop fills in its due time and request);
//! - **may write**: [`Protocol::to_send`] / [`Protocol::sent`] hand out the
//!   bytes owed, from the workload's pre-rendered buffers or the protocol's
//!   own, until the socket is full;
//! - **bytes arrived**: [`Protocol::receive`] takes what was read and
//!   answers with one [`Output`] at a time: a completed [`Response`] naming
//!   the entry it completes (status, checks failed, whether the connection
//!   stays), an error kind, or "all taken";
//! - **closed**: [`Protocol::at_close`] says whether the peer's close ended
//!   a response, cut one short, or came between responses.
//!
//! The loop asks back only [`Protocol::in_flight`], [`Protocol::oldest`]
//! (the entry whose request timeout runs out first) and
//! [`Protocol::has_output`] (bytes owed: the write side wants WRITABLE).
//!
//! HTTP/1.1 ([`Http1`]) and WebSocket ([`Ws`], `ws.rs`) are the protocols
//! today. HTTP/1.1's entries are a FIFO ring, its output the requests in
//! order, its input the response framer. WebSocket adds three calls the
//! loop makes for any protocol: [`Protocol::open`] (the connection is up:
//! start the upgrade), [`Protocol::may_issue`] (messages only once
//! upgraded, in request mode) and [`Protocol::deadline`] (its own timer:
//! the upgrade's deadline, the next ping, the close wait); what else it
//! sees comes back as `Output::Ws` notes the loop accounts (`ws_io.rs`).
//! What the seam leaves room for, without touching schedule, wheel, stats or
//! observers:
//!
//! - HTTP/2: [`Protocol::issue`] takes a free stream slot, not the ring's
//!   tail, and [`Response::entry`] names the stream's slot, so responses
//!   complete out of order; SETTINGS acks and PING replies are bytes
//!   [`Protocol::to_send`] hands out with no request behind them (the
//!   protocol buffers them; [`Protocol::has_output`] turns true); flow
//!   control only withholds bytes from `to_send`; a GOAWAY adds an
//!   [`Output`] variant that hands back an entry never processed, which the
//!   loop re-issues on the next connection with its original due time; a
//!   stream reset is an [`Output::Error`] of a new kind for that entry only.
//!   [`Protocol::oldest`] becomes the entry written first, a walk over at
//!   most `pipeline` entries.
//! - WebSocket: the upgrade handshake is a state before requests flow (like
//!   the TLS handshake, after connect); a message is a request, its echo or
//!   answer the response; pongs and the close handshake are protocol-owned
//!   output like HTTP/2's control frames; close code 1000 is
//!   [`AtClose::Idle`], not an error.
//!
//! A new protocol is one more variant of [`Protocol`] and one module like
//! `http1.rs`: dispatch is a `match` per event, no trait object, and
//! nothing is allocated per request.

use super::WorkloadRt;
pub(super) use super::exchange::{AtClose, Cx, Inflight, Output, Response};
use super::h2::H2;
use super::http1::Http1;
use super::ws::Ws;

/// A connection's protocol state; one per slot, reset for each connection.
#[derive(Debug)]
pub(super) enum Protocol {
    /// HTTP/1.1 keep-alive, pipelined in order.
    Http1(Http1),
    /// HTTP/2: streams on one connection (boxed: its state is larger than
    /// HTTP/1.1's, and a slot pays one pointer for it).
    H2(Box<H2>),
    /// WebSocket: the upgrade, then messages (see `ws.rs`).
    Ws(Ws),
}

impl Protocol {
    /// The state for a new connection of workload `w`.
    pub(super) fn new(w: &WorkloadRt) -> Protocol {
        match (&w.ws, &w.h2) {
            (Some(plan), _) => Protocol::Ws(Ws::new(plan)),
            // h2c with prior knowledge: HTTP/2 from the first byte.
            (None, Some(h)) if h.cleartext => Protocol::H2(Box::new(H2::new(h.clone(), w.depth()))),
            _ => Protocol::Http1(Http1::new(w.head)),
        }
    }

    /// The state for a TLS connection whose handshake picked HTTP/2
    /// (ALPN `h2`) or not.
    pub(super) fn negotiated(w: &WorkloadRt, h2: bool) -> Protocol {
        if let Some(plan) = &w.ws {
            return Protocol::Ws(Ws::new(plan));
        }
        match &w.h2 {
            Some(h) if h2 => Protocol::H2(Box::new(H2::new(h.clone(), w.depth()))),
            _ => Protocol::Http1(Http1::new(w.head)),
        }
    }

    /// True for HTTP/2, whose input may let requests go out (SETTINGS, a
    /// window opened) and provoke output of its own (acks, replies).
    #[inline]
    pub(super) fn is_h2(&self) -> bool {
        matches!(self, Protocol::H2(_))
    }

    /// Requests that may be in flight at once now: the pipeline depth, or
    /// the streams the server allows (none before its SETTINGS or after a
    /// GOAWAY).
    #[inline]
    pub(super) fn depth(&self, w: &WorkloadRt) -> u16 {
        match self {
            Protocol::Http1(_) | Protocol::Ws(_) => w.pipeline,
            Protocol::H2(h) => h.depth(),
        }
    }

    /// HTTP/2: the server's stream limit (0: none seen, or HTTP/1.1).
    pub(super) fn streams_limit(&self) -> u32 {
        match self {
            Protocol::Http1(_) | Protocol::Ws(_) => 0,
            Protocol::H2(h) => h.streams_limit(),
        }
    }

    /// Renders what the requests issued may send now into the output
    /// (HTTP/2 copies frames with their stream ids; HTTP/1.1 writes from
    /// the shared buffers and needs nothing).
    #[inline]
    pub(super) fn prepare(&mut self, cx: &Cx<'_>) {
        match self {
            Protocol::Http1(_) | Protocol::Ws(_) => {}
            Protocol::H2(h) => h.prepare(cx),
        }
    }

    /// The WebSocket state, for a WebSocket connection.
    #[inline]
    pub(super) fn ws_mut(&mut self) -> Option<&mut Ws> {
        match self {
            Protocol::Ws(w) => Some(w),
            _ => None,
        }
    }

    /// The connection is up (after TLS): a protocol with a handshake of its
    /// own starts it, to be done by `deadline` (ns).
    #[inline]
    pub(super) fn open(&mut self, deadline: u64) {
        if let Protocol::Ws(w) = self {
            w.open(deadline);
        }
    }

    /// Requests may be issued now (a WebSocket only once upgraded, and only
    /// in request mode).
    #[inline]
    pub(super) fn may_issue(&self) -> bool {
        match self {
            Protocol::Ws(w) => w.may_issue(),
            _ => true,
        }
    }

    /// The protocol's own timer (a handshake's deadline, the next ping),
    /// ns, if any.
    #[inline]
    pub(super) fn deadline(&self) -> Option<u64> {
        match self {
            Protocol::Ws(w) => w.deadline(),
            _ => None,
        }
    }

    /// Forgets the connection (closed or failed): nothing in flight, no
    /// bytes owed or carried. The requests that were in flight are the
    /// loop's to count, before it calls this.
    #[inline]
    pub(super) fn reset(&mut self) {
        match self {
            Protocol::Http1(h) => h.reset(),
            Protocol::H2(h) => h.reset(),
            Protocol::Ws(w) => w.reset(),
        }
    }

    /// Requests issued and not yet answered.
    #[inline]
    pub(super) fn in_flight(&self) -> u16 {
        match self {
            Protocol::Http1(h) => h.in_flight(),
            Protocol::H2(h) => h.in_flight(),
            Protocol::Ws(w) => w.in_flight(),
        }
    }

    /// The entry whose request was written first (its timeout runs out
    /// first), if any is in flight.
    #[inline]
    pub(super) fn oldest(&self) -> Option<u16> {
        match self {
            Protocol::Http1(h) => h.oldest(),
            Protocol::H2(h) => h.oldest(),
            Protocol::Ws(w) => w.oldest(),
        }
    }

    /// Why request `req` (an index into the workload's requests) must not
    /// be sent on this connection, if it must not (HTTP/2: a header list
    /// over the server's limit).
    #[inline]
    pub(super) fn refuses(&self, req: usize) -> Option<crate::stats::ErrorKind> {
        match self {
            Protocol::H2(h) => h.refuses(req),
            _ => None,
        }
    }

    /// Takes an entry for a request that is due; the caller has checked
    /// that fewer than its pipeline depth are in flight, `depth` is the
    /// slot's capacity. The request's bytes are owed from now on.
    #[inline]
    pub(super) fn issue(&mut self, depth: usize) -> u16 {
        match self {
            Protocol::Http1(h) => h.issue(depth),
            Protocol::H2(h) => h.issue(),
            Protocol::Ws(w) => w.issue(depth),
        }
    }

    /// True when bytes are owed to the peer.
    #[inline]
    pub(super) fn has_output(&self) -> bool {
        match self {
            Protocol::Http1(h) => h.has_output(),
            Protocol::H2(h) => h.has_output(),
            Protocol::Ws(w) => w.has_output(),
        }
    }

    /// The next bytes owed (empty when none); report what the socket took
    /// with [`Protocol::sent`].
    #[inline]
    pub(super) fn to_send<'a>(&'a self, cx: &Cx<'a>) -> &'a [u8] {
        match self {
            Protocol::Http1(h) => h.to_send(cx),
            Protocol::H2(h) => h.to_send(),
            Protocol::Ws(w) => w.to_send(cx),
        }
    }

    /// The socket took `n` bytes of what [`Protocol::to_send`] gave.
    #[inline]
    pub(super) fn sent(&mut self, cx: &Cx<'_>, n: usize) {
        match self {
            Protocol::Http1(h) => h.sent(cx, n),
            Protocol::H2(h) => h.sent(n),
            Protocol::Ws(w) => w.sent(cx, n),
        }
    }

    /// Feeds bytes that arrived. Returns how many of `fresh` were used and
    /// what they made; after a [`Output::Response`], call again with the
    /// rest (the loop may have closed the connection instead).
    #[inline]
    pub(super) fn receive(&mut self, cx: &Cx<'_>, fresh: &[u8]) -> (usize, Output) {
        match self {
            Protocol::Http1(h) => h.receive(cx, fresh),
            Protocol::H2(h) => h.receive(cx, fresh),
            Protocol::Ws(w) => w.receive(cx, fresh),
        }
    }

    /// The peer closed the connection.
    pub(super) fn at_close(&mut self, cx: &Cx<'_>) -> AtClose {
        match self {
            Protocol::Http1(h) => h.at_close(cx),
            Protocol::H2(h) => h.at_close(),
            Protocol::Ws(w) => w.at_close(cx),
        }
    }

    /// Moves this slot's entries from `old` to `new` (a reload deepened the
    /// pipeline and the storage was laid out again), keeping their order.
    pub(super) fn relayout(&mut self, old: &[Inflight], new: &mut [Inflight]) {
        match self {
            Protocol::Http1(h) => h.relayout(old, new),
            Protocol::H2(h) => h.relayout(old, new),
            Protocol::Ws(w) => w.relayout(old, new),
        }
    }
}
