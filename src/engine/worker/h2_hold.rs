//! Held server streams (`--stream subscribe`) on one HTTP/2 connection:
//! each of the workload's stream slots (a *lane*) holds one
//! server-streaming call open, counts its messages without decoding them,
//! and opens a new one when the call ends.
//!
//! The loop never sees these calls: they are not requests (nothing is due,
//! nothing times out, the connection's capacity for requests is 0), so the
//! HTTP/2 client (`h2.rs`) opens them itself once the server's SETTINGS are
//! in, and this file keeps what each lane needs between two frames: the
//! message decoder (at most a 5-byte prefix and a count, never a message),
//! when the stream opened and must end, when its last message came and
//! the longest silence of the interval. No buffer is held per stream: an
//! idle held stream is its HTTP/2 entry and its lane, ~100 bytes.
//!
//! A lane's stream ends in one of four ways:
//! - **the server ends it** with a status (trailers): counted by code with
//!   the other calls (`grpc_calls`; non-OK is a `grpc_status` error), and
//!   opened again after the loop's jittered backoff step (100 ms doubling
//!   to 10 s, half random; back to the first step after a stream that
//!   lived a second), so a server ending every stream at once is not
//!   answered by a burst;
//! - **its lifetime ends** (`--stream-lifetime`, jittered ±10% so streams
//!   opened together do not end together): soakd cancels it (RST_STREAM
//!   CANCEL) and opens the next one at once;
//! - **its connection goes away** (a GOAWAY above its id, the server's
//!   close after the GOAWAY's grace, any connection loss): counted as a
//!   **restart**, not an error of the stream, and opened on the slot's
//!   next connection;
//! - the run stops: nothing is counted.
//!
//! Timers (a lifetime's end, a reopen after a backoff) are kept as one
//! earliest time, recomputed over the lanes only when one of them changes
//! (a stream opening or ending), never per frame.

use std::collections::VecDeque;
use std::sync::Arc;

use super::super::exchange::{AtClose, Issued, Output, Response, Tally};
use super::super::{BACKOFF_FIRST_MS, BACKOFF_MAX_MS, HEALTHY_NS};
use super::H2;
use crate::netio::pool;
use crate::stats::{self, ErrorKind, GrpcStreamStats};
use crate::wire::grpc::{Code, MessageDecoder, MessageError};
use crate::wire::h2::{ErrorCode, HEADER_LEN, encode_rst_stream, kind, set_stream_id, write_header};

/// The largest message a held stream accepts (gRPC's default receive
/// limit): a larger prefix fails the stream before a byte is counted.
pub(super) const MAX_MESSAGE: u32 = 4 * 1024 * 1024;
/// A lane or entry that is none.
const NONE: u16 = u16::MAX;

/// One lane: a stream slot holding (or about to hold) a call.
#[derive(Clone, Debug)]
struct Lane {
    /// The HTTP/2 entry of its open stream, or [`NONE`].
    entry: u16,
    dec: MessageDecoder,
    /// When its stream opened, ns.
    opened: u64,
    /// When its stream's lifetime ends (ns; `u64::MAX`: never).
    end_at: u64,
    /// Without a stream: when it may open one (ns; 0: as soon as the
    /// connection allows).
    reopen_at: u64,
    /// Its last message (or the stream's opening), ns.
    last: u64,
    /// The longest silence a message ended in the current interval, ns.
    silence_max: u64,
    /// Its backoff step, ms (0: none).
    backoff_ms: u32,
    /// Its stream has had a message (the next one ends a gap).
    got: bool,
    /// Client and bidirectional streams: it is in the turn of lanes that
    /// may send (possibly stale: checked when its turn comes).
    queued: bool,
    /// Bidirectional: a message of it awaits its reply (a loop request).
    awaiting: bool,
    /// Client streaming: its lifetime ended and it half-closed; the
    /// server's answer ends it.
    closing: bool,
}

impl Lane {
    /// It may send a message now.
    fn sendable(&self) -> bool {
        self.entry != NONE && !self.awaiting && !self.closing
    }
}

/// Why a lane's stream ended (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ended {
    /// The server ended it (with a status, or a reset).
    ByServer,
    /// Its lifetime ran out and soakd cancelled it.
    Lifetime,
    /// Its connection went away under it.
    Restart,
    /// The run stopped.
    Stop,
}

/// The held streams of one connection slot.
#[derive(Debug)]
pub(super) struct Hold {
    lifetime_ns: Option<u64>,
    lanes: Box<[Lane]>,
    /// The lane of each HTTP/2 entry ([`NONE`]: not a held stream).
    lane_of: Box<[u16]>,
    /// The earliest lane timer, ns (`u64::MAX`: none).
    next: u64,
    /// The run is stopping: nothing opens, nothing ending is a restart.
    pub(super) stopping: bool,
    /// Client and bidirectional streams: the framed message each sends.
    message: Option<Arc<[u8]>>,
    /// Bidirectional: each message awaits the next reply.
    replies: bool,
    /// Lanes that may send, in turn (O(1) to take the next).
    turn: VecDeque<u16>,
    /// Lanes that may send now.
    sendable: u16,
    /// Bidirectional messages awaiting their reply: the loop's requests
    /// in flight on this connection.
    pub(super) awaiting: u16,
    /// Entries whose message goes back to the loop unanswered (its stream
    /// went away under a GOAWAY), one per call.
    pub(super) retry: Vec<u16>,
}

impl Hold {
    /// `lanes` held streams over `depth` HTTP/2 entries.
    pub(super) fn new(hold: &crate::plan::grpc::Hold, lanes: u16, depth: usize) -> Hold {
        let lane = Lane {
            entry: NONE,
            dec: MessageDecoder::new(MAX_MESSAGE),
            opened: 0,
            end_at: u64::MAX,
            reopen_at: 0,
            last: 0,
            silence_max: 0,
            backoff_ms: 0,
            got: false,
            queued: false,
            awaiting: false,
            closing: false,
        };
        Hold {
            lifetime_ns: hold.lifetime.map(|d| d.as_nanos() as u64),
            lanes: vec![lane; lanes as usize].into_boxed_slice(),
            lane_of: vec![NONE; depth].into_boxed_slice(),
            next: u64::MAX,
            stopping: false,
            message: hold.message.clone(),
            replies: hold.replies,
            turn: VecDeque::with_capacity(lanes as usize),
            sendable: 0,
            awaiting: 0,
            retry: Vec::new(),
        }
    }

    /// A new connection: nothing awaits, no lane has a stream (the last
    /// connection's were detached when it closed).
    pub(super) fn reset(&mut self) {
        for l in self.lanes.iter_mut() {
            l.entry = NONE;
            l.queued = false;
            l.awaiting = false;
            l.closing = false;
        }
        self.lane_of.fill(NONE);
        self.turn.clear();
        self.sendable = 0;
        self.awaiting = 0;
        self.retry.clear();
    }

    /// Messages that may be in flight now (the loop's capacity): the
    /// bidirectional ones awaiting replies and the lanes that may send.
    /// Client streams, whose messages are untimed, send only on a
    /// schedule (`paced`): in closed loop nothing would ever hold them.
    pub(super) fn capacity(&self, paced: bool) -> u16 {
        match &self.message {
            Some(_) if !self.stopping && (self.replies || paced) => self.awaiting + self.sendable,
            _ => 0,
        }
    }

    /// Lane `lane` may send again: in its turn.
    fn make_sendable(&mut self, lane: usize) {
        if self.message.is_none() || !self.lanes[lane].sendable() {
            return;
        }
        self.sendable += 1;
        if !std::mem::replace(&mut self.lanes[lane].queued, true) {
            self.turn.push_back(lane as u16);
        }
    }

    /// The next lane whose turn it is to send, taken from the turn.
    fn next_sender(&mut self) -> Option<usize> {
        while let Some(lane) = self.turn.pop_front() {
            let l = &mut self.lanes[lane as usize];
            l.queued = false;
            if l.sendable() {
                return Some(lane as usize);
            }
        }
        None
    }

    /// Held streams open now.
    pub(super) fn live(&self) -> u16 {
        self.lanes.iter().filter(|l| l.entry != NONE).count() as u16
    }

    /// The lane of entry `e`, when it is a held stream.
    #[inline]
    pub(super) fn lane_of(&self, e: usize) -> Option<usize> {
        let l = *self.lane_of.get(e)?;
        (l != NONE).then_some(l as usize)
    }

    /// True when lane `lane` has no stream and may open one at `now`.
    fn is_due(&self, lane: usize, now: u64) -> bool {
        let l = &self.lanes[lane];
        l.entry == NONE && l.reopen_at <= now
    }

    /// Lane `lane`'s entry when its stream's lifetime has run out at `now`.
    fn expired(&self, lane: usize, now: u64) -> Option<usize> {
        let l = &self.lanes[lane];
        (l.entry != NONE && !l.awaiting && !l.closing && l.end_at <= now).then_some(l.entry as usize)
    }

    /// Lane `lane`'s new stream took entry `e` at `now`.
    pub(super) fn attach(&mut self, lane: usize, e: u16, now: u64, st: &mut GrpcStreamStats, open: &mut u64) {
        let end_at = match self.lifetime_ns {
            // ±10%, so that streams opened together end apart.
            Some(ns) => now + ((ns as f64 * (0.9 + 0.2 * fastrand::f64())) as u64).max(1),
            None => u64::MAX,
        };
        let l = &mut self.lanes[lane];
        l.entry = e;
        l.dec.reset();
        l.opened = now;
        l.end_at = end_at;
        l.last = now;
        l.silence_max = 0;
        l.got = false;
        if let Some(slot) = self.lane_of.get_mut(e as usize) {
            *slot = lane as u16;
        }
        st.opened += 1;
        *open += 1;
        self.make_sendable(lane);
    }

    /// Bytes of messages on held entry `e` at `now`: each message that
    /// ends is counted and its gap timed; nothing is copied.
    #[inline]
    pub(super) fn on_data(
        &mut self,
        e: usize,
        data: &[u8],
        now: u64,
        st: &mut GrpcStreamStats,
    ) -> Result<u32, MessageError> {
        let Some(lane) = self.lane_of(e) else { return Ok(0) };
        let mut ended = 0;
        let l = &mut self.lanes[lane];
        let Lane {
            dec,
            last,
            silence_max,
            got,
            ..
        } = l;
        dec.skip(data, |_| {
            let gap = now.saturating_sub(*last);
            if std::mem::replace(got, true) {
                // Between two messages (the first one's wait is the
                // stream's start, a silence but not a gap).
                stats::record_ns(&mut st.gap, gap);
            }
            *silence_max = (*silence_max).max(gap);
            *last = now;
            st.messages += 1;
            ended += 1;
        })?;
        Ok(ended)
    }

    /// Held entry `e`'s stream ended at `now`, as `why` says: its last
    /// silence is recorded and its lane waits for its next stream.
    /// True when a bidirectional message of it was awaiting its reply (the
    /// caller settles it with the loop; `awaiting` is not changed here).
    pub(super) fn detach(&mut self, e: usize, now: u64, why: Ended, t: &mut Tally<'_>) -> bool {
        let Some(lane) = self.lane_of(e) else { return false };
        self.lane_of[e] = NONE;
        if self.message.is_some() && self.lanes[lane].sendable() {
            self.sendable -= 1;
        }
        let l = &mut self.lanes[lane];
        let awaiting = std::mem::replace(&mut l.awaiting, false);
        l.closing = false;
        l.entry = NONE;
        let st = t.st.grpc_mut();
        stats::record_ns(&mut st.silence, l.silence_max.max(now.saturating_sub(l.last)));
        l.silence_max = 0;
        t.g.grpc_streams -= 1;
        l.reopen_at = match why {
            Ended::Lifetime => {
                st.lifetime_ends += 1;
                0
            }
            Ended::Restart => {
                st.restarts += 1;
                0
            }
            Ended::Stop => 0,
            Ended::ByServer => {
                if now.saturating_sub(l.opened) >= HEALTHY_NS {
                    l.backoff_ms = 0;
                }
                l.backoff_ms = if l.backoff_ms == 0 {
                    BACKOFF_FIRST_MS
                } else {
                    (l.backoff_ms * 2).min(BACKOFF_MAX_MS)
                };
                // Half fixed, half random, as a connection's backoff.
                let wait = l.backoff_ms as f64 * (0.5 + 0.5 * fastrand::f64()) * 1e6;
                now + wait as u64
            }
        };
        awaiting
    }

    /// Recomputes the earliest timer (after a lane changed): lifetimes'
    /// ends, and, when streams `may_open` on the connection, the reopens
    /// after a backoff. A lane waiting for the connection to allow it
    /// (reopen at 0: the next connection's SETTINGS, a stream ending under
    /// the server's limit) has no timer: an event opens it.
    pub(super) fn retime(&mut self, may_open: bool) {
        self.next = self
            .lanes
            .iter()
            .map(|l| match l.entry {
                NONE if may_open && l.reopen_at != 0 => l.reopen_at,
                NONE => u64::MAX,
                // Ends after its reply, or after the server's answer.
                _ if l.awaiting || l.closing => u64::MAX,
                _ => l.end_at,
            })
            .min()
            .unwrap_or(u64::MAX);
    }

    /// The earliest timer, ns.
    #[inline]
    pub(super) fn deadline(&self) -> Option<u64> {
        (self.next != u64::MAX).then_some(self.next)
    }

    /// The once-an-interval walk: each held stream's longest silence of
    /// the interval ending at `now` (one a message ended, or the one still
    /// running), then a new interval.
    pub(super) fn walk(&mut self, now: u64, st: &mut GrpcStreamStats) {
        for l in self.lanes.iter_mut().filter(|l| l.entry != NONE) {
            stats::record_ns(&mut st.silence, l.silence_max.max(now.saturating_sub(l.last)));
            l.silence_max = 0;
        }
    }

    /// Grows the entry map (a reload deepened the storage).
    pub(super) fn grow(&mut self, depth: usize) {
        if depth > self.lane_of.len() {
            let mut v = self.lane_of.to_vec();
            v.resize(depth, NONE);
            self.lane_of = v.into_boxed_slice();
        }
    }
}

/// Copies a request's pre-rendered HEADERS (and CONTINUATION) frames into
/// `out`, every frame header given stream `id`.
pub(super) fn put_headers(out: &mut Vec<u8>, frames: &[u8], id: u32) {
    let at = out.len();
    out.extend_from_slice(frames);
    let mut f = at;
    while f + HEADER_LEN <= out.len() {
        set_stream_id(&mut out[f..], id);
        let len = u32::from_be_bytes([0, out[f], out[f + 1], out[f + 2]]) as usize;
        f += HEADER_LEN + len;
    }
}

/// The held streams' part of the HTTP/2 client (a child module of `h2.rs`,
/// so the client's file stays the table of its frames).
impl H2 {
    /// The connection's own timer: the held streams' (a lifetime's end, a
    /// reopen) or `--h2-ping`'s, whichever is first, ns.
    #[inline]
    pub(in crate::engine::worker) fn deadline(&self) -> Option<u64> {
        let held = self.hold.as_deref().and_then(Hold::deadline);
        match (held, self.ping_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The timer is due (see [`H2::deadline`]): a PING left unanswered
    /// fails the connection; otherwise each part does what is due.
    pub(in crate::engine::worker) fn on_time(&mut self, t: &mut Tally<'_>) -> Output {
        let ping = self.ping_on_time(t);
        if let Output::Error(_) = ping {
            return ping;
        }
        match self.held_on_time(t) {
            Output::Taken if matches!(ping, Output::Ready) => Output::Ready,
            held => held,
        }
    }

    /// The connection closes now: held streams' last figures.
    pub(in crate::engine::worker) fn closed(&mut self, t: &mut Tally<'_>) {
        self.held_closed(t);
    }

    /// The run is stopping: held streams end without being restarts.
    pub(in crate::engine::worker) fn start_close(&mut self) {
        if let Some(h) = self.hold.as_deref_mut() {
            h.stopping = true;
        }
    }

    /// The once-an-interval walk: held streams' silences.
    pub(in crate::engine::worker) fn walk(&mut self, t: &mut Tally<'_>) {
        if let Some(h) = self.hold.as_deref_mut() {
            h.walk(t.now, t.st.grpc_mut());
        }
    }

    /// Opens a stream on every lane that is due, as far as the server's
    /// limit allows, unless the connection may not open any (before the
    /// server's SETTINGS, after a GOAWAY, at the stop). A server stream's
    /// HEADERS and message are rendered in turn like a request's; a
    /// client or bidirectional stream's HEADERS go out at once, without
    /// END_STREAM, so its messages can follow them.
    pub(super) fn open_held(&mut self, t: &mut Tally<'_>) {
        let may = self.core.settings_seen() && self.goaway.is_none() && !self.streams.exhausted();
        let Some(hold) = self.hold.as_deref_mut() else { return };
        let may = may && !hold.stopping;
        if may {
            let room = (self.rt.streams as u32)
                .min(self.core.peer.max_streams)
                .min(self.streams.len() as u32) as u16;
            for lane in 0..hold.lanes.len() {
                if self.streams.in_flight() >= room || self.streams.exhausted() {
                    break;
                }
                if !hold.is_due(lane, t.now) {
                    continue;
                }
                let e = self.streams.open(self.core.peer.initial_window, self.rt.window);
                if hold.message.is_some() {
                    let s = &mut self.streams[e as usize];
                    s.rendered = true;
                    s.st = super::St::Open;
                    put_headers(pool::get(&mut self.out), &self.rt.requests[0].frames, s.id);
                } else {
                    self.order.push_back((e, self.streams[e as usize].seq));
                }
                hold.attach(lane, e, t.now, t.st.grpc_mut(), &mut t.g.grpc_streams);
                self.ready = true;
            }
        }
        hold.retime(may);
    }

    /// Messages that may be in flight now (see [`Hold::capacity`]): none
    /// before the server's SETTINGS, nor after a GOAWAY: a server closing
    /// at the end of its grace with our messages unread resets the
    /// connection (tried: `reset` errors under grpcio's ageing), so the
    /// streams below its last id only await their replies and its end.
    pub(super) fn held_capacity(&self, paced: bool) -> u16 {
        match self.hold.as_deref() {
            Some(h) if self.core.settings_seen() && self.goaway.is_none() => h.capacity(paced),
            _ => 0,
        }
    }

    /// The lane of entry `e` when it is a held stream.
    #[inline]
    pub(super) fn held(&self, e: usize) -> bool {
        self.hold.as_deref().is_some_and(|h| h.lane_of(e).is_some())
    }

    /// A message is due (client and bidirectional streams): it goes out on
    /// the next lane whose turn it is, framed once by the plan and copied
    /// into the output (DATA frames, both windows permitting). A
    /// bidirectional message takes its stream's entry until the next reply
    /// ([`Issued::Entry`]: the loop times it from its due time); a client
    /// stream's is untimed.
    pub(super) fn held_issue(&mut self, t: &mut Tally<'_>) -> Issued {
        let max_frame = self.core.peer.max_frame;
        let Some(h) = self.hold.as_deref_mut() else {
            return Issued::Refused(ErrorKind::SendStalled);
        };
        let (Some(msg), Some(lane)) = (h.message.clone(), h.next_sender()) else {
            return Issued::Refused(ErrorKind::SendStalled);
        };
        let e = h.lanes[lane].entry as usize;
        let s = &mut self.streams[e];
        let n = msg.len() as u32;
        if self.core.send.room() < n || s.send.room() < n {
            // The server does not take it now: missed, the lane keeps its turn.
            h.lanes[lane].queued = true;
            h.turn.push_front(lane as u16);
            return Issued::Refused(ErrorKind::SendStalled);
        }
        let out = pool::get(&mut self.out);
        for chunk in msg.chunks(max_frame.max(1) as usize) {
            write_header(out, chunk.len(), kind::DATA, 0, s.id);
            out.extend_from_slice(chunk);
        }
        s.send.spend(n);
        self.core.send.spend(n);
        t.st.grpc_mut().sent += 1;
        if h.replies {
            h.lanes[lane].awaiting = true;
            h.sendable -= 1;
            h.awaiting += 1;
            return Issued::Entry(e as u16);
        }
        h.lanes[lane].queued = true;
        h.turn.push_back(lane as u16);
        Issued::Untimed
    }

    /// Held entry `e`'s stream ends at `t.now` as `why` says: its entry is
    /// freed, and lanes that are due open their next streams. A
    /// bidirectional message awaiting its reply on it is handed back to
    /// the loop (a restart: sent again on the next connection) or fails
    /// (`failed`: the server ended the stream before the reply).
    fn end_held(&mut self, t: &mut Tally<'_>, e: usize, why: Ended, failed: ErrorKind) -> Output {
        self.streams.close(e);
        let mut awaited = false;
        if let Some(h) = self.hold.as_deref_mut()
            && h.detach(e, t.now, why, t)
        {
            h.awaiting -= 1;
            awaited = true;
        }
        self.open_held(t);
        match (awaited, why) {
            (false, _) => Output::Ready,
            (true, Ended::Restart) => {
                t.st.h2_mut().retried += 1;
                Output::Retry(e as u16)
            }
            (true, _) => Output::Failed {
                entry: e as u16,
                kind: failed,
            },
        }
    }

    /// A held stream's call ended with `code` (its trailers): counted by
    /// code with the other calls. Once the server sent a GOAWAY, an
    /// UNAVAILABLE end is the drain ending the stream (grpcio ends held
    /// calls so at the end of `max_connection_age_grace`): a restart,
    /// opened on the next connection, not an error. Any other non-OK code
    /// is a `grpc_status` error; the lane opens again after a backoff step
    /// (or on the next connection when this one is going). A client
    /// stream that half-closed at the end of its lifetime ends here with
    /// the server's answer, and the next one opens at once.
    pub(super) fn end_held_call(&mut self, t: &mut Tally<'_>, e: usize, code: Code) -> Output {
        t.st.h2_mut().grpc_calls[code as usize] += 1;
        let drained = self.goaway.is_some() && code == Code::Unavailable;
        if code != Code::Ok && !drained {
            t.st.counters.error(ErrorKind::GrpcStatus, 1);
        }
        let closing = self
            .hold
            .as_deref()
            .and_then(|h| h.lane_of(e).map(|l| h.lanes[l].closing))
            .unwrap_or(false);
        let why = match (drained, closing) {
            (true, _) => Ended::Restart,
            (false, true) => Ended::Lifetime,
            (false, false) => Ended::ByServer,
        };
        let failed = if code == Code::Ok {
            ErrorKind::Eof
        } else {
            ErrorKind::GrpcStatus
        };
        self.end_held(t, e, why, failed)
    }

    /// Messages on held entry `e`: counted; on a bidirectional stream, the
    /// first one after a message of ours is its reply ([`Output::Response`],
    /// timed by the loop from the message's due time). A message over the
    /// limit (or a bad prefix) fails that stream alone (`h2_protocol`): it
    /// is cancelled and its lane opens again after a backoff step.
    pub(super) fn held_data(&mut self, t: &mut Tally<'_>, e: usize, data: &[u8]) -> Option<Output> {
        let h = self.hold.as_deref_mut()?;
        match h.on_data(e, data, t.now, t.st.grpc_mut()) {
            Ok(0) => None,
            Ok(_) => {
                let lane = h.lane_of(e)?;
                if !std::mem::replace(&mut h.lanes[lane].awaiting, false) {
                    return None;
                }
                h.awaiting -= 1;
                h.make_sendable(lane);
                // Its lifetime may have run out while it awaited.
                h.retime(self.goaway.is_none());
                Some(Output::Response(Response {
                    entry: e as u16,
                    status: self.streams[e].status,
                    keep_alive: true,
                    failed_checks: 0,
                }))
            }
            Err(_) => {
                t.st.counters.error(ErrorKind::H2Protocol, 1);
                let id = self.streams[e].id;
                encode_rst_stream(pool::get(&mut self.out), id, ErrorCode::Cancel);
                Some(self.end_held(t, e, Ended::ByServer, ErrorKind::H2Protocol))
            }
        }
    }

    /// The server reset held entry `e`: REFUSED_STREAM is retried after a
    /// backoff step, any other code is a `stream_reset` error; once a
    /// GOAWAY came, the stream is a restart (its connection is going).
    pub(super) fn held_reset(&mut self, t: &mut Tally<'_>, e: usize, code: ErrorCode) -> Output {
        let why = if self.goaway.is_some() {
            Ended::Restart
        } else {
            if code != ErrorCode::RefusedStream {
                t.st.counters.error(ErrorKind::StreamReset, 1);
            }
            Ended::ByServer
        };
        self.end_held(t, e, why, ErrorKind::StreamReset)
    }

    /// A GOAWAY: held streams above its last stream (or not yet sent) are
    /// restarts, opened on the next connection (a bidirectional message
    /// awaiting a reply on one is handed back to the loop, see
    /// [`H2::pending`]); the others live until the server ends them or
    /// closes (`at_close`).
    pub(super) fn held_goaway(&mut self, t: &mut Tally<'_>, last_stream: u32) {
        for e in 0..self.streams.len() {
            if !self.held(e) {
                continue;
            }
            let s = &self.streams[e];
            if s.rendered && s.id <= last_stream {
                continue;
            }
            self.streams.close(e);
            if let Some(h) = self.hold.as_deref_mut()
                && h.detach(e, t.now, Ended::Restart, t)
            {
                h.awaiting -= 1;
                h.retry.push(e as u16);
            }
        }
        self.order.clear();
        self.open_held(t);
    }

    /// The connection's timer: streams whose lifetime ran out end (a
    /// server or bidirectional stream is cancelled with RST_STREAM CANCEL
    /// and opened anew at once; a client stream half-closes and the
    /// server's answer ends it); lanes whose backoff ran out open.
    pub(super) fn held_on_time(&mut self, t: &mut Tally<'_>) -> Output {
        let Some(lanes) = self.hold.as_deref().map(|h| h.lanes.len()) else {
            return Output::Taken;
        };
        for lane in 0..lanes {
            let Some(e) = self.hold.as_deref().and_then(|h| h.expired(lane, t.now)) else {
                continue;
            };
            let id = self.streams[e].id;
            self.ready = true;
            if let Some(h) = self.hold.as_deref_mut()
                && h.message.is_some()
                && !h.replies
            {
                write_header(pool::get(&mut self.out), 0, kind::DATA, 1, id);
                h.sendable -= 1;
                h.lanes[lane].closing = true;
                continue;
            }
            encode_rst_stream(pool::get(&mut self.out), id, ErrorCode::Cancel);
            self.streams.close(e);
            if let Some(h) = self.hold.as_deref_mut() {
                h.detach(e, t.now, Ended::Lifetime, t);
            }
        }
        self.open_held(t);
        if std::mem::take(&mut self.ready) {
            Output::Ready
        } else {
            Output::Taken
        }
    }

    /// The connection closes (whoever closed it): its held streams'
    /// last silences are recorded, and they are restarts unless the run is
    /// stopping. Nothing once done (the streams are gone). Bidirectional
    /// messages awaiting replies stay counted: the loop fails them with
    /// the connection.
    pub(super) fn held_closed(&mut self, t: &mut Tally<'_>) {
        let Some(h) = self.hold.as_deref_mut() else { return };
        let why = if h.stopping { Ended::Stop } else { Ended::Restart };
        for lane in 0..h.lanes.len() {
            let e = h.lanes[lane].entry;
            if e != NONE {
                h.detach(e as usize, t.now, why, t);
            }
        }
    }

    /// What the server's close means with held streams: after a GOAWAY it
    /// is the end of its grace (the connection was sent away: the streams
    /// still open are restarts, not `eof`); without one, a close that cuts
    /// held streams is `eof`.
    pub(super) fn held_at_close(&self) -> AtClose {
        match &self.hold {
            Some(h) if self.goaway.is_some() && h.awaiting == 0 => AtClose::SentAway,
            Some(h) if h.live() > 0 || h.awaiting > 0 => AtClose::Truncated,
            _ => AtClose::Idle,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lane is what an idle held stream costs besides its HTTP/2 entry:
    /// kept small (bench/grpc_streams.sh measures ~220-250 bytes in all
    /// per held idle stream).
    #[test]
    fn a_lane_stays_small() {
        assert!(std::mem::size_of::<Lane>() <= 96, "{}", std::mem::size_of::<Lane>());
    }
}
