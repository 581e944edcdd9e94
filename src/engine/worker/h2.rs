//! HTTP/2 behind the protocol seam: many streams on one connection,
//! responses completing out of order, GOAWAY that loses nothing.
//!
//! The frames are `wire::h2`'s (the codec the built-in target's server
//! shares), and so are the connection's frame-level rules (`wire::h2::Core`
//! in the client role: SETTINGS and PING answered, the connection's
//! windows, header blocks assembled, the server's first frame checked) and
//! the streams' windows (`wire::h2::flow`); this file is the client's
//! state machine over what the core hands it.
//! It is fed and drained by the loop like HTTP/1.1 (see `protocol.rs`):
//!
//! - **issue** takes a free stream slot (an in-flight entry, from a free
//!   list) and its stream id; the request is rendered into the output when
//!   the loop asks for bytes: the workload's pre-rendered HEADERS frames
//!   copied with the stream id patched (no allocation: the output is a
//!   pooled buffer), and a body as DATA frames only as far as both send
//!   windows allow (a stalled body waits for WINDOW_UPDATE; its request
//!   timeout still runs, so a server that never opens its window ends in
//!   `timeout`, with no spinning meanwhile).
//! - **receive** decodes frames from the read buffer (only an incomplete
//!   frame is ever carried, at most 9 + 16 KiB); SETTINGS are applied and
//!   acknowledged, PINGs answered, received DATA is counted and returned to
//!   the server with WINDOW_UPDATE once half a window is consumed.
//! - **capacity**: no request goes out before the server's SETTINGS are in,
//!   and never more streams than its SETTINGS_MAX_CONCURRENT_STREAMS.
//! - **GOAWAY**: streams at or below `last_stream_id` complete; the others
//!   are handed back ([`Output::Retry`]), one per call, and the loop sends
//!   them again on the next connection with their original due time; with
//!   nothing left in flight the connection ends ([`Ending::SentAway`]). A
//!   GOAWAY with an error code hands back the unprocessed streams the same
//!   way, then fails the rest as `goaway_error`. REFUSED_STREAM is retried;
//!   any other RST_STREAM fails that stream only (`stream_reset`). A
//!   request handed back [`MAX_HANDBACKS`] times fails instead
//!   (`h2_retries_exhausted`). A connection whose stream ids run out (2^30
//!   requests) ends the same graceful way, and the slot reconnects.
//!
//! Every per-frame step is `O(1)`, whatever `--streams` (up to 1024): the
//! streams are a table found by entry, by id and oldest first
//! (`h2_streams.rs`), and the streams owed bytes are a queue in issue order
//! whose finished entries are skipped when they come up.
//!
//! Control frames the server provokes (SETTINGS acks, PING replies) queue
//! in the output; a server that provokes more than [`MAX_CONTROL_OWED`]
//! bytes of them while not reading is a flood (`h2_protocol`), so the
//! output cannot grow without bound. Received header blocks are capped by
//! the frame decoder ([`MAX_HEADER_BLOCK`]) and the HPACK decoder (the
//! header-list size soakd announces). What only HTTP/2 counts (GOAWAYs and
//! resets by code, retries, the server's stream limit) goes into the
//! workload's HTTP/2 stats through the [`Tally`].

use std::collections::VecDeque;
use std::sync::Arc;

use super::exchange::{AtClose, Cx, Ending, Inflight, Issued, Output, Response, Tally};
use super::h2_streams::{St, Streams};
use crate::netio::pool;
use crate::stats::ErrorKind;
use crate::wire::h2::{
    Core, CoreError, DEFAULT_MAX_FRAME_SIZE, DEFAULT_WINDOW, ErrorCode, Event, H2Request, HeaderDecoder, PREFACE,
    Replies, Role, encode_ping, encode_settings, encode_window_update, setting, write_header,
};
use hold::{Hold, put_headers};

#[path = "h2_hold.rs"]
mod hold;

mod grpc_call;
mod keepalive;

/// Largest header block (all fragments) accepted from the server.
pub(super) const MAX_HEADER_BLOCK: u32 = 64 * 1024;
/// Largest decoded header list accepted (announced as
/// SETTINGS_MAX_HEADER_LIST_SIZE).
const MAX_HEADER_LIST: u32 = 64 * 1024;
/// Bytes owed to a server that does not read them before its flood of
/// SETTINGS or PINGs counts as an attack.
pub(super) const MAX_CONTROL_OWED: usize = 64 * 1024;
/// How often one request may be handed back unprocessed (GOAWAY,
/// REFUSED_STREAM) and sent again; the next time it fails. Three retries
/// ride out a graceful GOAWAY or a brief overload; a server that refuses
/// every stream gets each request four times, not endlessly.
const MAX_HANDBACKS: u8 = 3;

/// A workload's HTTP/2 settings and requests, rendered once.
#[derive(Debug, PartialEq)]
pub struct H2Rt {
    /// HTTP/2 is required (`--http 2`): a server that will not speak it is
    /// an error; on `http://`, connections start with the h2c preface.
    pub required: bool,
    /// On `http://` (h2c with prior knowledge).
    pub cleartext: bool,
    /// Streams per connection (`--streams`).
    pub streams: u16,
    /// soakd's receive window (`--h2-window`).
    pub window: u32,
    /// Each request of the workload as HEADERS frames on stream 0.
    pub requests: Box<[H2Request]>,
    /// The requests are gRPC calls: a response ends with its
    /// `grpc-status` (trailers, or a trailers-only response), counted by
    /// code; a status other than OK fails the call (`grpc_status`).
    pub grpc: bool,
    /// `--h2-ping`: a PING every this many ns on each connection (0: off).
    pub ping: u64,
    /// gRPC `--stream subscribe`: each stream slot holds a server-streaming
    /// call open (`h2_hold.rs`) instead of sending requests.
    pub hold: Option<crate::plan::grpc::Hold>,
}

/// One connection's HTTP/2 state.
pub(super) struct H2 {
    rt: Arc<H2Rt>,
    /// The connection's frame-level rules, in the client role.
    core: Core,
    hpack: HeaderDecoder,
    /// An incomplete frame carried to the next read (pooled; none between
    /// frames).
    carry: Option<pool::Buf>,
    /// Bytes owed to the server, from `out_off` (pooled; none when all
    /// is written).
    out: Option<pool::Buf>,
    out_off: usize,
    /// The streams: by entry, by id, oldest first (`h2_streams.rs`).
    streams: Streams,
    /// Entries with bytes owed, in issue order, with their `seq` (entries
    /// that stopped being owed are skipped when they come up).
    order: VecDeque<(u16, u32)>,
    /// Entries to hand back after a GOAWAY.
    handback: Vec<u16>,
    /// GOAWAY received: its last stream and code.
    goaway: Option<(u32, ErrorCode)>,
    /// Input changed what may go out (see [`Output::Ready`]).
    ready: bool,
    /// When the server last sent anything (ns; 0: nothing yet): a request
    /// timing out on a connection that spoke since it was written cancels
    /// its stream only (`h2/keepalive.rs`).
    last_rx: u64,
    /// gRPC replies kept for `expect_grpc_message` (`h2/grpc_call.rs`).
    replies: grpc_call::Replies,
    /// `--h2-ping`: when the next PING is due (ns; `u64::MAX`: none).
    ping_at: u64,
    /// When the PING still waiting for its ACK was sent (ns; 0: none).
    /// Its payload is this time, so the ACK brings it back.
    ping_sent: u64,
    /// The GOAWAY was ENHANCE_YOUR_CALM "too_many_pings".
    calm_pings: bool,
    /// Held server streams (`--stream subscribe`; `h2_hold.rs`).
    hold: Option<Box<Hold>>,
    /// A held stream was answered on this connection (its first response
    /// headers: the connection works, see [`Output::Opened`]).
    answered: bool,
}

impl std::fmt::Debug for H2 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("H2")
            .field("in_flight", &self.streams.in_flight())
            .field("goaway", &self.goaway)
            .finish_non_exhaustive()
    }
}

/// The connection's output as the core's [`Replies`]: a pooled buffer
/// taken only when a reply is written, so a connection that owes nothing
/// holds none.
struct Owed<'a>(&'a mut Option<pool::Buf>);

impl Replies for Owed<'_> {
    fn buf(&mut self) -> &mut Vec<u8> {
        pool::get(self.0)
    }
}

impl H2 {
    /// The state of a new connection with `depth` entries.
    pub(super) fn new(rt: Arc<H2Rt>, depth: usize) -> H2 {
        let mut h = H2 {
            core: Core::new(Role::Client, DEFAULT_MAX_FRAME_SIZE, MAX_HEADER_BLOCK, rt.window),
            hpack: HeaderDecoder::new(0, MAX_HEADER_LIST as usize),
            carry: None,
            out: None,
            out_off: 0,
            streams: Streams::new(depth),
            order: VecDeque::with_capacity(depth),
            handback: Vec::new(),
            goaway: None,
            ready: false,
            last_rx: 0,
            replies: grpc_call::Replies::default(),
            ping_at: u64::MAX,
            ping_sent: 0,
            calm_pings: false,
            hold: rt.hold.as_ref().map(|h| Box::new(Hold::new(h, rt.streams, depth))),
            answered: false,
            rt,
        };
        h.reset();
        h
    }

    /// Forgets the connection: nothing in flight, nothing owed or carried.
    pub(super) fn reset(&mut self) {
        self.core.reset();
        self.hpack = HeaderDecoder::new(0, MAX_HEADER_LIST as usize);
        pool::release(&mut self.carry);
        pool::release(&mut self.out);
        self.out_off = 0;
        self.streams.reset();
        self.order.clear();
        self.handback.clear();
        self.goaway = None;
        self.ready = false;
        self.replies.reset();
        self.last_rx = 0;
        self.ping_at = u64::MAX;
        self.ping_sent = 0;
        self.calm_pings = false;
        self.answered = false;
        if let Some(h) = self.hold.as_deref_mut() {
            h.reset();
        }
    }

    /// The connection is up: the preface, soakd's SETTINGS (no dynamic
    /// table for the server to fill, no push, the window), and the
    /// connection window opened to the same size (SETTINGS only set the
    /// streams') are owed.
    pub(super) fn open(&mut self) {
        let out = pool::get(&mut self.out);
        out.extend_from_slice(PREFACE);
        encode_settings(
            out,
            false,
            &[
                (setting::HEADER_TABLE_SIZE, 0),
                (setting::ENABLE_PUSH, 0),
                (setting::INITIAL_WINDOW_SIZE, self.rt.window),
                (setting::MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST),
            ],
        );
        if self.rt.window > DEFAULT_WINDOW {
            encode_window_update(out, 0, self.rt.window - DEFAULT_WINDOW);
        }
    }

    /// Requests in flight (held streams are not requests: see
    /// `h2_hold.rs`).
    #[inline]
    pub(super) fn in_flight(&self) -> u16 {
        if let Some(h) = self.hold.as_deref() {
            // Bidirectional messages awaiting their reply.
            return h.awaiting;
        }
        self.streams.in_flight()
    }

    /// How many requests may be in flight now (none when the streams are
    /// held: they open themselves).
    #[inline]
    pub(super) fn capacity(&self, paced: bool) -> u16 {
        if self.hold.is_some() {
            return self.held_capacity(paced);
        }
        if !self.core.settings_seen() || self.goaway.is_some() || self.streams.exhausted() {
            return 0;
        }
        (self.rt.streams as u32)
            .min(self.core.peer.max_streams)
            .min(self.streams.len() as u32) as u16
    }

    /// The entry written first among those in flight (its timeout runs
    /// out first).
    #[inline]
    pub(super) fn oldest(&self) -> Option<u16> {
        if self.hold.is_some() {
            return None;
        }
        self.streams.oldest()
    }

    /// Takes an entry and a stream id for request `req`, unless its header
    /// list is larger than the server's SETTINGS_MAX_HEADER_LIST_SIZE (RFC
    /// 9113 §6.5.2: a server may answer such a request with 431 or reset
    /// it; it would be sent only to be refused).
    #[inline]
    pub(super) fn issue(&mut self, t: &mut Tally<'_>, req: u8) -> Issued {
        if self.hold.is_some() {
            return self.held_issue(t);
        }
        if self.rt.requests[req as usize].list_size > self.core.peer.max_header_list {
            return Issued::Refused(ErrorKind::H2HeaderListTooLarge);
        }
        let e = self.streams.open(self.core.peer.initial_window, self.rt.window);
        self.replies.clear(e as usize);
        self.order.push_back((e, self.streams[e as usize].seq));
        Issued::Entry(e)
    }

    #[inline]
    pub(super) fn has_output(&self) -> bool {
        self.out.as_ref().is_some_and(|o| self.out_off < o.len()) || self.owed_front().is_some_and(|e| self.can_send(e))
    }

    /// The first entry still owed bytes (stale queue entries aside).
    fn owed_front(&self) -> Option<usize> {
        self.order
            .iter()
            .find(|&&(e, q)| self.streams.is(e, q) && self.streams[e as usize].st == St::Owed)
            .map(|&(e, _)| e as usize)
    }

    /// True when the owed entry `e` can make progress now.
    fn can_send(&self, e: usize) -> bool {
        let s = &self.streams[e];
        !s.rendered || (self.core.send.room() > 0 && s.send.room() > 0)
    }

    /// Renders what the owed streams may send now into the output.
    fn prepare(&mut self, cx: &Cx<'_>) {
        while let Some(&(e, q)) = self.order.front() {
            if !self.streams.is(e, q) || self.streams[e as usize].st != St::Owed {
                self.order.pop_front();
                continue;
            }
            let s = &mut self.streams[e as usize];
            let req = cx.entries[e as usize].req as usize;
            let out = self.out.get_or_insert_with(pool::take);
            if !s.rendered {
                let r = &self.rt.requests[req];
                s.rendered = true;
                s.body_left = (cx.w.requests[req].bytes.len() - r.body_at) as u32;
                put_headers(out, &r.frames, s.id);
            }
            while s.body_left > 0 {
                let room = self.core.send.room().min(s.send.room()).min(self.core.peer.max_frame);
                if room == 0 {
                    return;
                }
                let bytes = &cx.w.requests[req].bytes;
                let from = bytes.len() - s.body_left as usize;
                let n = s.body_left.min(room);
                let last = n == s.body_left;
                write_header(out, n as usize, crate::wire::h2::kind::DATA, u8::from(last), s.id);
                out.extend_from_slice(&bytes[from..from + n as usize]);
                s.body_left -= n;
                s.send.spend(n);
                self.core.send.spend(n);
            }
            s.st = St::Open;
            self.order.pop_front();
        }
    }

    /// The bytes owed now (rendering what the owed streams may send).
    #[inline]
    pub(super) fn outgoing(&mut self, cx: &Cx<'_>) -> &[u8] {
        if !self.order.is_empty() {
            self.prepare(cx);
        }
        match &self.out {
            Some(o) => &o[self.out_off..],
            None => &[],
        }
    }

    #[inline]
    pub(super) fn sent(&mut self, n: usize) {
        self.out_off += n;
        if self.out.as_ref().is_some_and(|o| self.out_off == o.len()) {
            self.out_off = 0;
            pool::release(&mut self.out);
        }
    }

    /// The next output owed without new bytes: a stream to hand back, an
    /// error after a GOAWAY with one, or the end.
    fn pending(&mut self, cx: &Cx<'_>, t: &mut Tally<'_>) -> Option<Output> {
        if let Some(e) = self.hold.as_deref_mut().and_then(|h| h.retry.pop()) {
            t.st.h2_mut().retried += 1;
            return Some(Output::Retry(e));
        }
        if let Some(e) = self.handback.pop() {
            return Some(self.hand_back(cx, t, e as usize));
        }
        let code = match self.goaway {
            Some((_, code)) => code,
            None if self.streams.exhausted() => ErrorCode::NoError,
            None => return None,
        };
        if code != ErrorCode::NoError {
            return Some(Output::Error(if self.calm_pings {
                ErrorKind::TooManyPings
            } else {
                ErrorKind::GoawayError
            }));
        }
        (self.streams.in_flight() == 0).then_some(Output::End(Ending::SentAway))
    }

    /// Entry `e` was not processed: sent again elsewhere, unless it was
    /// handed back too often already.
    fn hand_back(&mut self, cx: &Cx<'_>, t: &mut Tally<'_>, e: usize) -> Output {
        self.streams.close(e);
        if cx.entries[e].handed_back >= MAX_HANDBACKS {
            return Output::Failed {
                entry: e as u16,
                kind: ErrorKind::H2RetriesExhausted,
            };
        }
        t.st.h2_mut().retried += 1;
        Output::Retry(e as u16)
    }

    pub(super) fn receive(&mut self, cx: &Cx<'_>, t: &mut Tally<'_>, fresh: &[u8]) -> (usize, Output) {
        if !fresh.is_empty() {
            self.last_rx = t.now;
        }
        if let Some(out) = self.pending(cx, t) {
            return (0, out);
        }
        let Some(mut carry) = self.carry.take() else {
            let mut pos = 0;
            loop {
                match self.core.next(&fresh[pos..], &mut Owed(&mut self.out)) {
                    Err(e) => return (fresh.len(), Output::Error(self.broken(e))),
                    Ok(None) => {
                        if pos < fresh.len() {
                            pool::get(&mut self.carry).extend_from_slice(&fresh[pos..]);
                        }
                        return (fresh.len(), self.settled());
                    }
                    Ok(Some((n, event))) => {
                        pos += n;
                        if let Some(out) = event.and_then(|ev| self.on_event(cx, t, ev)) {
                            return (pos, out);
                        }
                    }
                }
            }
        };
        // An incomplete frame was carried: add the read and go on from
        // the carried bytes (the loop calls again with nothing new after an
        // output, and the rest is taken from here).
        carry.extend_from_slice(fresh);
        let mut pos = 0;
        let out = loop {
            match self.core.next(&carry[pos..], &mut Owed(&mut self.out)) {
                Err(e) => break Output::Error(self.broken(e)),
                Ok(None) => break self.settled(),
                Ok(Some((n, event))) => {
                    pos += n;
                    if let Some(out) = event.and_then(|ev| self.on_event(cx, t, ev)) {
                        break out;
                    }
                }
            }
        };
        carry.drain(..pos);
        if carry.is_empty() {
            pool::give(carry);
        } else {
            self.carry = Some(carry);
        }
        (fresh.len(), out)
    }

    /// All input is taken: [`Output::Ready`] when it changed what may go
    /// out, else [`Output::Taken`].
    fn settled(&mut self) -> Output {
        if std::mem::take(&mut self.ready) {
            Output::Ready
        } else {
            Output::Taken
        }
    }

    /// The kind of a connection that broke HTTP/2's rules: before the
    /// server's first SETTINGS (or instead of them), it never spoke HTTP/2
    /// at all.
    fn broken(&self, e: CoreError) -> ErrorKind {
        if self.core.settings_seen() && e != CoreError::NotSettings {
            ErrorKind::H2Protocol
        } else {
            ErrorKind::H2NotNegotiated
        }
    }

    /// Acts on what a frame meant for the streams (the connection's part
    /// is the core's).
    fn on_event(&mut self, cx: &Cx<'_>, t: &mut Tally<'_>, event: Event<'_>) -> Option<Output> {
        match event {
            Event::Settings { shift, first } => {
                if shift != 0 {
                    for (_, s) in self.streams.iter_mut().filter(|(_, s)| s.st != St::Free) {
                        s.send.shift(shift);
                    }
                }
                let limit = self.core.peer.streams_limit();
                if limit != 0 {
                    let g = &mut t.g.h2_streams_limit;
                    *g = if *g == 0 { limit } else { (*g).min(limit) };
                }
                if first && self.rt.ping > 0 {
                    // The first PING at a random point of the first
                    // interval, so connections opened together do not
                    // ping in step.
                    self.ping_at = t.now + self.rt.ping.saturating_mul(fastrand::u64(50..=100)) / 100;
                }
                let out = self.replied();
                self.open_held(t);
                out
            }
            Event::Pinged => self.replied(),
            Event::PingAck(data) => {
                self.on_ping_ack(t, data);
                None
            }
            Event::Window => {
                self.ready = true;
                None
            }
            Event::StreamWindow { stream, increment } => {
                let e = self.streams.entry_of(stream)?;
                self.ready = true;
                self.streams[e]
                    .send
                    .grow(increment)
                    .err()
                    .map(|_| Output::Error(ErrorKind::H2Protocol))
            }
            Event::Headers {
                stream,
                end_stream,
                block,
            } => self.on_block(cx, t, stream, end_stream, &block),
            Event::Data {
                stream,
                end_stream,
                data,
                flow_len,
            } => self.on_data(cx, t, stream, end_stream, data, flow_len),
            Event::Reset { stream, code } => {
                let e = self.streams.entry_of(stream)?;
                t.st.h2_mut().resets[code as usize] += 1;
                if self.held(e) {
                    return Some(self.held_reset(t, e, code));
                }
                if code == ErrorCode::RefusedStream {
                    return Some(self.hand_back(cx, t, e));
                }
                self.streams.close(e);
                Some(Output::Failed {
                    entry: e as u16,
                    kind: ErrorKind::StreamReset,
                })
            }
            Event::GoAway {
                last_stream,
                code,
                debug,
            } => {
                t.st.h2_mut().goaways[code as usize] += 1;
                self.calm_pings = keepalive::too_many_pings(code, debug, self.rt.ping);
                self.goaway = Some((last_stream, code));
                if self.hold.is_some() {
                    self.held_goaway(t, last_stream);
                    return Some(Output::Ready);
                }
                // Pushed from the last entry so that they come out first
                // to last.
                for (e, s) in self.streams.iter_mut().rev() {
                    if s.st != St::Free && s.st != St::Handback && (!s.rendered || s.id > last_stream) {
                        s.st = St::Handback;
                        self.handback.push(e as u16);
                    }
                }
                self.order.clear();
                // The handbacks (or the end) follow on the next calls.
                Some(Output::Ready)
            }
        }
    }

    /// The core wrote a reply (a SETTINGS or PING acknowledgement): it is
    /// owed; a server that keeps asking without reading is a flood.
    fn replied(&mut self) -> Option<Output> {
        self.ready = true;
        let owed = self.out.as_ref().map_or(0, |o| o.len() - self.out_off);
        (owed > MAX_CONTROL_OWED).then_some(Output::Error(ErrorKind::H2Protocol))
    }

    /// Queues a control frame of soakd's own (a PING), under the same
    /// bound.
    fn control(&mut self, write: impl FnOnce(&mut Vec<u8>)) -> Option<Output> {
        write(pool::get(&mut self.out));
        self.replied()
    }

    /// A whole header block on `stream`.
    ///
    /// Fields are judged as the decoder hands them over (the status, and
    /// the header checks one field at a time): nothing of the block is
    /// copied or kept.
    fn on_block(
        &mut self,
        cx: &Cx<'_>,
        t: &mut Tally<'_>,
        stream: u32,
        end_stream: bool,
        block: &[u8],
    ) -> Option<Output> {
        if self.rt.grpc {
            return self.on_grpc_block(cx, t, stream, end_stream, block);
        }
        let e = self.streams.entry_of(stream);
        let checks = e
            .and_then(|e| cx.w.requests[cx.entries[e].req as usize].checks.as_deref())
            .filter(|c| c.wants_fields());
        let mut status = 0u16;
        let mut seen = 0u64;
        let decoded = self.hpack.decode(block, |n, v| {
            if n == b":status" {
                status = std::str::from_utf8(v).ok().and_then(|s| s.parse().ok()).unwrap_or(0);
            } else if let Some(checks) = checks
                && !n.starts_with(b":")
            {
                checks.on_field(&mut seen, n, v);
            }
        });
        if decoded.is_err() {
            // The table may be out of step with the server's: the
            // connection cannot go on.
            return Some(Output::Error(ErrorKind::H2Protocol));
        }
        let e = e?;
        if (100..200).contains(&status) && !end_stream {
            // An interim head: the final one follows.
            return None;
        }
        if self.streams[e].status == 0 {
            self.streams[e].status = status;
            if let Some(checks) = checks {
                checks.end_fields(&mut self.streams[e].check, seen);
            }
        }
        end_stream.then(|| self.complete(cx, t, e))
    }

    fn on_data(
        &mut self,
        cx: &Cx<'_>,
        t: &mut Tally<'_>,
        stream: u32,
        end_stream: bool,
        data: &[u8],
        flow_len: u32,
    ) -> Option<Output> {
        // The core counted it against the connection's window.
        let half = self.rt.window / 2;
        if self.core.credit(half, &mut Owed(&mut self.out)) {
            self.ready = true;
        }
        let e = self.streams.entry_of(stream)?;
        if let Some(checks) = cx.w.requests[cx.entries[e].req as usize].checks.as_deref() {
            if checks.wants_body() && !data.is_empty() {
                checks.on_body(&mut self.streams[e].check, data);
            }
            if checks.grpc_message.is_some() {
                self.replies.keep(e, data);
            }
        }
        // A held stream's messages: counted; a reply on a bidirectional
        // one answers its message (returned once the window is kept).
        let held = if data.is_empty() {
            None
        } else {
            self.held_data(t, e, data)
        };
        if held.is_some_and(|o| !matches!(o, Output::Response(_))) {
            // The stream failed and is gone.
            return held;
        }
        if end_stream {
            return Some(self.complete(cx, t, e));
        }
        let s = &mut self.streams[e];
        if s.recv.take(flow_len).is_err() {
            return Some(Output::Error(ErrorKind::H2Protocol));
        }
        if let Some(n) = s.recv.credit(half) {
            encode_window_update(pool::get(&mut self.out), stream, n);
            self.ready = true;
        }
        held
    }

    /// The response on entry `e` is complete: judge it, free the entry.
    fn complete(&mut self, cx: &Cx<'_>, t: &mut Tally<'_>, e: usize) -> Output {
        if self.rt.grpc {
            return self.end_call(cx, t, e);
        }
        let req = &cx.w.requests[cx.entries[e].req as usize];
        let status = self.streams[e].status;
        let failed_checks = match req.checks.as_deref() {
            None => 0,
            Some(checks) => checks.finish(&mut self.streams[e].check, status),
        };
        // A response before the body was all sent (allowed): the rest is
        // not owed any more (its queue entry is skipped once freed).
        self.streams.close(e);
        Output::Response(Response {
            entry: e as u16,
            status,
            keep_alive: true,
            failed_checks,
        })
    }

    pub(super) fn at_close(&mut self) -> AtClose {
        if !self.core.settings_seen() {
            // Closed before its SETTINGS: not an HTTP/2 server (an
            // HTTP/1.1-only one closes on the h2c preface).
            return AtClose::Failed(ErrorKind::H2NotNegotiated);
        }
        if self.hold.is_some() {
            return self.held_at_close();
        }
        if self.streams.in_flight() == 0 {
            AtClose::Idle
        } else {
            AtClose::Truncated
        }
    }

    /// Entries keep their index in a deeper layout.
    pub(super) fn relayout(&mut self, old: &[Inflight], new: &mut [Inflight]) {
        new[..old.len()].copy_from_slice(old);
        self.streams.grow(new.len());
        if let Some(h) = self.hold.as_deref_mut() {
            h.grow(new.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::worker::{ProtoRt, WorkloadRt};
    use crate::stats::{Gauges, WorkloadStats};
    use crate::wire::h2::{self, Frame, FrameDecoder, encode_data, encode_goaway, encode_headers, encode_rst_stream};

    const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";

    fn workload(streams: u16) -> WorkloadRt {
        WorkloadRt::test(
            GET,
            1,
            ProtoRt::H2(Arc::new(H2Rt {
                required: true,
                cleartext: true,
                streams,
                window: 1 << 20,
                requests: vec![h2::render_request(GET, false).unwrap()].into(),
                grpc: false,
                ping: 0,
                hold: None,
            })),
        )
    }

    fn rt(w: &WorkloadRt) -> Arc<H2Rt> {
        match &w.proto {
            ProtoRt::H2(h) => h.clone(),
            _ => unreachable!("an HTTP/2 workload"),
        }
    }

    /// A connection of `w` with its preface written and its counts.
    struct Conn {
        h: H2,
        st: WorkloadStats,
        g: Gauges,
        /// The loop's clock for the next calls, ns.
        now: u64,
    }

    impl Conn {
        fn new(w: &WorkloadRt, depth: usize) -> Conn {
            let mut h = H2::new(rt(w), depth);
            h.open();
            Conn {
                h,
                st: WorkloadStats::default(),
                g: Gauges::default(),
                now: 0,
            }
        }

        /// The protocol's timer fired at `self.now`.
        fn on_time(&mut self) -> Output {
            let mut t = Tally {
                st: &mut self.st,
                g: &mut self.g,
                now: self.now,
            };
            self.h.on_time(&mut t)
        }

        /// Feeds `bytes` the way the loop does; every output until taken
        /// (`Ready` only says to write: not listed).
        fn feed(&mut self, cx: &Cx<'_>, bytes: &[u8]) -> Vec<Output> {
            let mut outs = Vec::new();
            let mut pos = 0;
            loop {
                let mut t = Tally {
                    st: &mut self.st,
                    g: &mut self.g,
                    now: self.now,
                };
                let (n, out) = self.h.receive(cx, &mut t, &bytes[pos..]);
                pos += n;
                match out {
                    Output::Taken => return outs,
                    Output::Ready => continue,
                    Output::Error(_) | Output::End(_) => {
                        outs.push(out);
                        return outs;
                    }
                    out => outs.push(out),
                }
            }
        }

        fn issue(&mut self) -> u16 {
            let mut t = Tally {
                st: &mut self.st,
                g: &mut self.g,
                now: 0,
            };
            match self.h.issue(&mut t, 0) {
                Issued::Entry(e) => e,
                other => panic!("{other:?}"),
            }
        }

        /// The stream ids written to the server, in order.
        fn written_streams(&mut self, cx: &Cx<'_>) -> Vec<u32> {
            let out = self.h.outgoing(cx).to_vec();
            self.h.sent(out.len());
            let mut at = if out.starts_with(PREFACE) { PREFACE.len() } else { 0 };
            let mut ids = Vec::new();
            let mut d = FrameDecoder::new(1 << 20, 1 << 20);
            while let Some((f, n)) = d.decode(&out[at..]).unwrap() {
                if let Frame::Headers { stream, .. } = f {
                    ids.push(stream);
                }
                at += n;
            }
            ids
        }
    }

    /// `-i` puts every stream slot on the grid: 4 connections × 5 streams
    /// at 100 ms step by 20 ms each, and their 20 due times in an interval
    /// are 5 ms apart; `-r` keeps the total rate (streams only deepen).
    #[test]
    fn interval_paces_each_stream_slot_rate_the_total() {
        use crate::engine::worker::conn::grid_due;
        use crate::plan::LoadModel;
        use std::time::Duration;
        let mut w = workload(5);
        w.set_load(4, LoadModel::Interval(Duration::from_millis(100)));
        assert_eq!(w.interval_ns, Some(100_000_000));
        assert_eq!(w.lane_step_ns, Some(20_000_000));
        let mut due: Vec<u64> = (0..4u32)
            .flat_map(|slot| {
                let first = grid_due(slot, 4, w.lane_step_ns.unwrap(), 0);
                (0..5u64).map(move |k| first + k * 20_000_000)
            })
            .collect();
        due.sort_unstable();
        let gaps: Vec<u64> = due.windows(2).map(|p| p[1] - p[0]).collect();
        assert_eq!(due.len(), 20);
        assert!(gaps.iter().all(|&g| g == 5_000_000), "{due:?}");
        // 100 req/s over 4 connections: 40 ms each, HTTP/2 or not.
        w.set_load(4, LoadModel::Rate(100.0));
        assert_eq!(w.lane_step_ns, Some(40_000_000));
        assert_eq!(w.interval_ns, Some(40_000_000));
        w.set_load(4, LoadModel::Closed);
        assert_eq!(w.lane_step_ns, None);
    }

    fn settings(max_streams: u32) -> Vec<u8> {
        let mut b = Vec::new();
        h2::encode_settings(&mut b, false, &[(setting::MAX_CONCURRENT_STREAMS, max_streams)]);
        b
    }

    fn response(stream: u32, status_index: u8) -> Vec<u8> {
        let mut b = Vec::new();
        encode_headers(&mut b, stream, &[status_index], false, 16_384);
        encode_data(&mut b, stream, b"ok", true, 16_384);
        b
    }

    fn ok(entry: u16, status: u16) -> Output {
        Output::Response(Response {
            entry,
            status,
            keep_alive: true,
            failed_checks: 0,
        })
    }

    #[test]
    fn requests_wait_for_settings_and_respect_max_streams() {
        let w = workload(10);
        let entries = vec![Inflight::default(); 10];
        let cx = Cx::of(&w, &entries, 0, entries.len());
        let mut c = Conn::new(&w, 10);
        assert!(c.h.has_output(), "the preface is owed");
        assert_eq!(c.h.capacity(false), 0, "nothing before the server's SETTINGS");
        assert!(c.feed(&cx, &settings(3)).is_empty());
        assert_eq!(c.h.capacity(false), 3);
        assert_eq!(c.g.h2_streams_limit, 3);
        for _ in 0..3 {
            c.issue();
        }
        assert_eq!(c.written_streams(&cx), [1, 3, 5]);
        // Out of order: stream 3 completes first, then 1.
        let outs = c.feed(&cx, &[response(3, 0x88), response(1, 0x8d)].concat());
        assert_eq!(outs, [ok(1, 200), ok(0, 404)]);
        assert_eq!(c.h.in_flight(), 1);
        assert_eq!(c.h.oldest(), Some(2));
    }

    #[test]
    fn goaway_completes_below_last_and_hands_back_above() {
        let w = workload(4);
        let entries = vec![Inflight::default(); 4];
        let cx = Cx::of(&w, &entries, 0, entries.len());
        let mut c = Conn::new(&w, 4);
        c.feed(&cx, &settings(100));
        for _ in 0..4 {
            c.issue();
        }
        assert_eq!(c.written_streams(&cx), [1, 3, 5, 7]);
        let mut b = Vec::new();
        encode_goaway(&mut b, 3, ErrorCode::NoError, b"");
        let outs = c.feed(&cx, &b);
        assert_eq!(outs, [Output::Retry(2), Output::Retry(3)]);
        let h2 = c.st.h2.as_deref().unwrap();
        assert_eq!((h2.goaways[ErrorCode::NoError as usize], h2.retried), (1, 2));
        assert_eq!(c.h.capacity(false), 0, "no new stream after GOAWAY");
        let outs = c.feed(&cx, &[response(1, 0x88), response(3, 0x88)].concat());
        assert_eq!(outs, [ok(0, 200), ok(1, 200), Output::End(Ending::SentAway)]);
    }

    #[test]
    fn refused_is_retried_and_a_reset_fails_its_stream_only() {
        let w = workload(2);
        let mut entries = vec![Inflight::default(); 2];
        let cx = Cx::of(&w, &entries, 0, entries.len());
        let mut c = Conn::new(&w, 2);
        c.feed(&cx, &settings(100));
        c.issue();
        c.issue();
        c.written_streams(&cx);
        let mut b = Vec::new();
        encode_rst_stream(&mut b, 1, ErrorCode::RefusedStream);
        encode_rst_stream(&mut b, 3, ErrorCode::Cancel);
        let outs = c.feed(&cx, &b);
        assert_eq!(
            outs,
            [
                Output::Retry(0),
                Output::Failed {
                    entry: 1,
                    kind: ErrorKind::StreamReset
                },
            ]
        );
        assert_eq!(c.h.in_flight(), 0);
        // A request handed back three times already fails instead.
        entries.iter_mut().for_each(|e| e.handed_back = MAX_HANDBACKS);
        let cx = Cx::of(&w, &entries, 0, entries.len());
        let e = c.issue();
        c.written_streams(&cx);
        let mut b = Vec::new();
        encode_rst_stream(&mut b, 5, ErrorCode::RefusedStream);
        assert_eq!(
            c.feed(&cx, &b),
            [Output::Failed {
                entry: e,
                kind: ErrorKind::H2RetriesExhausted
            }]
        );
        let h2 = c.st.h2.as_deref().unwrap();
        assert_eq!((h2.resets[ErrorCode::RefusedStream as usize], h2.retried), (2, 1));
    }

    /// A request that times out on a connection that has spoken since it
    /// was written is cancelled alone: RST_STREAM CANCEL, `timeout`, the
    /// stream's late answer ignored; on a silent connection, nothing is
    /// cancelled (the loop fails the connection).
    #[test]
    fn a_timeout_cancels_its_stream_only_while_the_server_talks() {
        let w = workload(2);
        let entries = vec![Inflight::default(); 2];
        let cx = Cx::of(&w, &entries, 0, entries.len());
        let mut c = Conn::new(&w, 2);
        c.now = 10;
        c.feed(&cx, &settings(100));
        c.now = 20;
        let (a, b) = (c.issue(), c.issue());
        assert_eq!(c.written_streams(&cx), [1, 3]);
        assert_eq!(c.h.cancel(a, 20), None, "silent since it was written");
        c.now = 30;
        assert_eq!(c.feed(&cx, &response(3, 0x88)), [ok(b, 200)]);
        assert_eq!(
            c.h.cancel(a, 20),
            Some(Output::Failed {
                entry: a,
                kind: ErrorKind::Timeout
            })
        );
        assert_eq!(c.h.in_flight(), 0);
        let out = c.h.outgoing(&cx).to_vec();
        let mut d = FrameDecoder::new(1 << 20, 1 << 20);
        let mut at = 0;
        let mut resets = Vec::new();
        while let Some((f, n)) = d.decode(&out[at..]).unwrap() {
            if let Frame::RstStream { stream, code } = f {
                resets.push((stream, code));
            }
            at += n;
        }
        assert_eq!(resets, [(1, ErrorCode::Cancel)]);
        // The cancelled stream's late answer is not a response.
        assert_eq!(c.feed(&cx, &response(1, 0x88)), []);
    }

    #[test]
    fn pings_and_settings_are_answered_and_a_flood_is_an_error() {
        let w = workload(1);
        let entries = vec![Inflight::default(); 1];
        let cx = Cx::of(&w, &entries, 0, entries.len());
        let mut c = Conn::new(&w, 1);
        let preface = c.h.outgoing(&cx).len();
        c.h.sent(preface);
        let mut b = settings(1);
        h2::encode_ping(&mut b, false, *b"abcdefgh");
        assert!(c.feed(&cx, &b).is_empty());
        let mut want = Vec::new();
        h2::encode_settings(&mut want, true, &[]);
        h2::encode_ping(&mut want, true, *b"abcdefgh");
        assert_eq!(c.h.outgoing(&cx), &want[..]);
        let mut flood = Vec::new();
        for _ in 0..5000 {
            h2::encode_ping(&mut flood, false, [0; 8]);
        }
        assert_eq!(c.feed(&cx, &flood), [Output::Error(ErrorKind::H2Protocol)]);
    }

    /// `--h2-ping`: the first PING within the first interval, its payload
    /// the send time, the ACK's round trip recorded; one PING at a time;
    /// an ACK 20 s late fails the connection; GOAWAY ENHANCE_YOUR_CALM
    /// "too_many_pings" is its own kind.
    #[test]
    fn h2_pings_are_timed_one_at_a_time_and_classified() {
        const MS: u64 = 1_000_000;
        let mut w = workload(1);
        if let ProtoRt::H2(h) = &mut w.proto {
            Arc::get_mut(h).unwrap().ping = 100 * MS;
        }
        let entries = vec![Inflight::default(); 1];
        let cx = Cx::of(&w, &entries, 0, entries.len());
        let mut c = Conn::new(&w, 1);
        let preface = c.h.outgoing(&cx).len();
        c.h.sent(preface);
        assert_eq!(c.h.deadline(), None, "nothing before the server's SETTINGS");
        c.now = 1_000 * MS;
        assert!(c.feed(&cx, &settings(1)).is_empty());
        let owed = c.h.outgoing(&cx).len();
        c.h.sent(owed);
        let due = c.h.deadline().expect("a PING scheduled");
        assert!((1_050 * MS..=1_100 * MS).contains(&due), "{due}");
        c.now = due - 1;
        assert_eq!(c.on_time(), Output::Taken, "not yet");
        c.now = due;
        assert_eq!(c.on_time(), Output::Ready);
        let mut want = Vec::new();
        h2::encode_ping(&mut want, false, due.to_be_bytes());
        assert_eq!(c.h.outgoing(&cx), &want[..]);
        c.h.sent(want.len());
        // Another PING's ACK, and a server's own PING, are not ours.
        c.now = due + 3 * MS;
        let mut b = Vec::new();
        h2::encode_ping(&mut b, true, *b"abcdefgh");
        assert!(c.feed(&cx, &b).is_empty());
        assert_eq!(c.st.ws.ping_rtt.len(), 0);
        let mut ack = Vec::new();
        h2::encode_ping(&mut ack, true, due.to_be_bytes());
        assert!(c.feed(&cx, &ack).is_empty());
        assert_eq!((c.st.ws.pings, c.st.ws.pongs, c.st.ws.ping_rtt.len()), (1, 1, 1));
        let rtt = c.st.ws.ping_rtt.max();
        assert!(
            (2_990..=3_010).contains(&rtt),
            "3 ms in µs, to the histogram's precision: {rtt}"
        );
        // The next PING 100 ms after the first; unanswered, the one after
        // it is skipped, and 20 s after it was sent the connection fails.
        c.now = due + 100 * MS;
        assert_eq!(c.h.deadline(), Some(c.now));
        assert_eq!(c.on_time(), Output::Ready);
        let sent = c.now;
        let owed = c.h.outgoing(&cx).len();
        c.h.sent(owed);
        c.now = sent + 100 * MS;
        assert_eq!(c.on_time(), Output::Taken, "one PING at a time");
        assert_eq!(c.st.ws.pings, 2);
        c.now = sent + crate::plan::defaults::H2_PING_TIMEOUT.as_nanos() as u64;
        assert_eq!(c.on_time(), Output::Error(ErrorKind::H2PingTimeout));
        // too_many_pings: once nothing is left to hand back, its own kind.
        let mut c = Conn::new(&w, 1);
        let mut b = settings(1);
        h2::encode_goaway(&mut b, 0, ErrorCode::EnhanceYourCalm, b"too_many_pings");
        assert_eq!(c.feed(&cx, &b), [Output::Error(ErrorKind::TooManyPings)]);
        let mut c = Conn::new(&w, 1);
        let mut b = settings(1);
        h2::encode_goaway(&mut b, 0, ErrorCode::EnhanceYourCalm, b"flood");
        assert_eq!(c.feed(&cx, &b), [Output::Error(ErrorKind::GoawayError)]);
    }

    #[test]
    fn a_server_that_is_not_http2_is_not_negotiated() {
        let w = workload(1);
        let entries = vec![Inflight::default(); 1];
        let cx = Cx::of(&w, &entries, 0, entries.len());
        let mut c = Conn::new(&w, 1);
        let outs = c.feed(&cx, b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(outs, [Output::Error(ErrorKind::H2NotNegotiated)]);
        // A server that closes without a word is not one either; after its
        // SETTINGS, a close with nothing owed is just a close.
        let mut c = Conn::new(&w, 1);
        assert_eq!(c.h.at_close(), AtClose::Failed(ErrorKind::H2NotNegotiated));
        c.feed(&cx, &settings(1));
        assert_eq!(c.h.at_close(), AtClose::Idle);
    }

    #[test]
    fn split_frames_are_carried_and_the_window_is_returned() {
        let w = workload(1);
        let entries = vec![Inflight::default(); 1];
        let cx = Cx::of(&w, &entries, 0, entries.len());
        let mut c = Conn::new(&w, 1);
        c.feed(&cx, &settings(1));
        c.issue();
        c.written_streams(&cx);
        let mut b = Vec::new();
        encode_headers(&mut b, 1, &[0x88], false, 16_384);
        // 600 KiB of DATA in 16 KiB frames: more than half the 1 MiB window.
        encode_data(&mut b, 1, &vec![b'x'; 600 * 1024], true, 16_384);
        let mut outs = Vec::new();
        for chunk in b.chunks(1000) {
            outs.extend(c.feed(&cx, chunk));
        }
        assert_eq!(outs, [ok(0, 200)]);
        assert!(c.h.carry.is_none());
        let mut d = FrameDecoder::new(1 << 20, 1 << 20);
        let (f, _) = d.decode(c.h.outgoing(&cx)).unwrap().unwrap();
        assert!(matches!(f, Frame::WindowUpdate { stream: 0, .. }), "{f:?}");
    }

    /// A stream that lives while many others come and go keeps its place
    /// in the id ring: the id that would take it is skipped, every
    /// response still finds its entry, the oldest stays the long-lived
    /// one, and the issue-order queue stays bounded.
    #[test]
    fn a_long_lived_stream_keeps_its_place_and_lookups_stay_exact() {
        let w = workload(2);
        let entries = vec![Inflight::default(); 2];
        let cx = Cx::of(&w, &entries, 0, entries.len());
        let mut c = Conn::new(&w, 2);
        assert_eq!(c.h.streams.index.len(), 4);
        c.feed(&cx, &settings(100));
        assert_eq!(c.issue(), 0);
        let mut ids = c.written_streams(&cx);
        for _ in 0..1000 {
            let e = c.issue();
            assert_eq!(e, 1);
            let id = c.written_streams(&cx)[0];
            ids.push(id);
            assert_eq!(c.feed(&cx, &response(id, 0x88)), [ok(1, 200)]);
            assert_eq!(c.h.oldest(), Some(0), "stream 1 is still the oldest");
            assert!(c.h.streams.by_seq.len() <= 5, "{}", c.h.streams.by_seq.len());
        }
        assert_eq!(&ids[..6], [1, 3, 5, 7, 11, 13], "9 would sit where 1 lives");
        assert!(ids.windows(2).all(|p| p[1] > p[0]));
        assert!(ids.iter().all(|id| (id >> 1) & 3 != 0 || *id == 1));
        assert_eq!(c.feed(&cx, &response(1, 0x88)), [ok(0, 200)]);
        assert_eq!((c.h.oldest(), c.h.in_flight()), (None, 0));
    }

    /// gRPC calls end with their `grpc-status`: trailers after the
    /// messages, or a trailers-only response; each is counted by code, OK
    /// is a response, any other code fails its call alone (`grpc_status`),
    /// and a stream ended by DATA without trailers is UNKNOWN.
    #[test]
    fn grpc_calls_end_with_their_status_counted_by_code() {
        use crate::wire::grpc::Code;
        let mut w = workload(4);
        if let ProtoRt::H2(h) = &mut w.proto {
            Arc::get_mut(h).unwrap().grpc = true;
        }
        let entries = vec![Inflight::default(); 4];
        let cx = Cx::of(&w, &entries, 0, entries.len());
        let mut c = Conn::new(&w, 4);
        c.feed(&cx, &settings(100));
        for _ in 0..3 {
            c.issue();
        }
        assert_eq!(c.written_streams(&cx), [1, 3, 5]);
        let block = |f: &[(&[u8], &[u8])]| h2::encode_block(f);
        let head = block(&[(b":status", b"200"), (b"content-type", b"application/grpc")]);
        let mut b = Vec::new();
        // Stream 1: headers, a message, trailers with OK.
        encode_headers(&mut b, 1, &head, false, 16_384);
        encode_data(&mut b, 1, &[0, 0, 0, 0, 2, 8, 1], false, 16_384);
        encode_headers(&mut b, 1, &block(&[(b"grpc-status", b"0")]), true, 16_384);
        // Stream 3: trailers-only UNAVAILABLE.
        let only = block(&[
            (b":status", b"200"),
            (b"content-type", b"application/grpc"),
            (b"grpc-status", b"14"),
            (b"grpc-message", b"down"),
        ]);
        encode_headers(&mut b, 3, &only, true, 16_384);
        // Stream 5: the stream ends on DATA, no trailers.
        encode_headers(&mut b, 5, &head, false, 16_384);
        encode_data(&mut b, 5, &[], true, 16_384);
        let failed = |entry| Output::Failed {
            entry,
            kind: ErrorKind::GrpcStatus,
        };
        assert_eq!(c.feed(&cx, &b), [ok(0, 200), failed(1), failed(2)]);
        let calls = c.st.h2.as_deref().unwrap().grpc_calls;
        assert_eq!(calls[Code::Ok as usize], 1);
        assert_eq!(calls[Code::Unavailable as usize], 1);
        assert_eq!(calls[Code::Unknown as usize], 1);
        assert_eq!(calls.iter().sum::<u64>(), 3);
        assert_eq!(c.h.in_flight(), 0);
    }

    /// Held server streams (`--stream subscribe`): opened on the server's
    /// SETTINGS, never requests; messages split anywhere are counted
    /// without a copy; after a GOAWAY the stream above its last id is a
    /// restart at once, UNAVAILABLE on the one below is the drain (a
    /// restart, counted under its code, not an error), and a close with a
    /// held stream still open is the end of the grace, not `eof`.
    #[test]
    fn held_streams_count_messages_and_ride_a_goaway_as_restarts() {
        use crate::wire::grpc::Code;
        let mut w = workload(3);
        if let ProtoRt::H2(h) = &mut w.proto {
            let h = Arc::get_mut(h).unwrap();
            h.grpc = true;
            h.hold = Some(crate::plan::grpc::Hold::default());
        }
        let entries = vec![Inflight::default(); 3];
        let cx = Cx::of(&w, &entries, 0, entries.len());
        let mut c = Conn::new(&w, 3);
        assert!(c.feed(&cx, &settings(2)).is_empty());
        assert_eq!(
            (c.h.capacity(false), c.h.in_flight(), c.h.oldest()),
            (0, 0, None),
            "not requests"
        );
        assert_eq!(c.written_streams(&cx), [1, 3], "the server allows 2 of the 3 lanes");
        assert_eq!(c.g.grpc_streams, 2);
        let block = |f: &[(&[u8], &[u8])]| h2::encode_block(f);
        let head = block(&[(b":status", b"200"), (b"content-type", b"application/grpc")]);
        let mut b = Vec::new();
        encode_headers(&mut b, 1, &head, false, 16_384);
        encode_headers(&mut b, 3, &head, false, 16_384);
        // Three messages on stream 1, the second split over two frames.
        encode_data(&mut b, 1, &[0, 0, 0, 0, 1, 7, 0, 0, 0], false, 16_384);
        encode_data(&mut b, 1, &[0, 2, 8, 9, 0, 0, 0, 0, 0], false, 16_384);
        let mut outs = Vec::new();
        for chunk in b.chunks(7) {
            outs.extend(c.feed(&cx, chunk));
        }
        assert_eq!(
            outs,
            [Output::Opened],
            "the first held answer says the connection works"
        );
        let g = c.st.grpc.as_deref().unwrap();
        assert_eq!((g.opened, g.messages), (2, 3));
        let mut b = Vec::new();
        encode_goaway(&mut b, 1, ErrorCode::NoError, b"max_age");
        assert_eq!(c.feed(&cx, &b), [], "stream 3 restarts; stream 1 lives on");
        let only = block(&[(b"grpc-status", b"14"), (b"grpc-message", b"max_age")]);
        let mut b = Vec::new();
        encode_headers(&mut b, 1, &only, true, 16_384);
        assert_eq!(c.feed(&cx, &b), [Output::End(Ending::SentAway)]);
        let g = c.st.grpc.as_deref().unwrap();
        assert_eq!(g.restarts, 2);
        assert_eq!(c.st.h2.as_deref().unwrap().grpc_calls[Code::Unavailable as usize], 1);
        assert_eq!(c.st.counters.total_errors(), 0);
        assert_eq!(c.g.grpc_streams, 0);

        // A new connection: every lane the server allows opens again; a
        // close after a GOAWAY with a held stream open is SentAway.
        c.h.reset();
        c.h.open();
        c.feed(&cx, &settings(100));
        assert_eq!(c.written_streams(&cx).len(), 3);
        let mut b = Vec::new();
        encode_goaway(&mut b, 1, ErrorCode::NoError, b"");
        c.feed(&cx, &b);
        assert_eq!(c.h.at_close(), AtClose::SentAway);
        let mut t = Tally {
            st: &mut c.st,
            g: &mut c.g,
            now: 0,
        };
        c.h.closed(&mut t);
        assert_eq!((c.st.grpc.as_deref().unwrap().restarts, c.g.grpc_streams), (5, 0));
    }

    /// Stream ids run out after 2^30 requests on one connection: no new
    /// stream is opened past the limit, and once the streams in flight are
    /// answered the connection ends gracefully, to be opened anew.
    #[test]
    fn a_connection_whose_ids_run_out_ends_gracefully() {
        let w = workload(2);
        let entries = vec![Inflight::default(); 2];
        let cx = Cx::of(&w, &entries, 0, entries.len());
        let mut c = Conn::new(&w, 2);
        c.feed(&cx, &settings(100));
        c.h.streams.id_limit = 5;
        c.issue();
        c.issue();
        assert_eq!(c.written_streams(&cx), [1, 3]);
        assert_eq!(c.h.capacity(false), 0, "id 5 is past the limit");
        assert_eq!(c.feed(&cx, &response(3, 0x88)), [ok(1, 200)]);
        assert_eq!(
            c.feed(&cx, &response(1, 0x88)),
            [ok(0, 200), Output::End(Ending::SentAway)]
        );
    }
}
