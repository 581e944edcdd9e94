//! HTTP/2 behind the protocol seam: many streams on one connection,
//! responses completing out of order, GOAWAY that loses nothing.
//!
//! The frames are `wire::h2`'s (the codec the built-in target's server
//! shares); this file is the client's state machine over them. It is fed
//! and drained by the loop like HTTP/1.1 (see `protocol.rs`):
//!
//! - **issue** takes a free stream slot (an in-flight entry); the request
//!   is rendered into the output on the next [`H2::prepare`]: the
//!   workload's pre-rendered HEADERS frames copied with their stream id
//!   patched (no allocation: the output buffer keeps its capacity while
//!   small), and a body as DATA frames only as far as both send windows
//!   allow (a stalled body waits for WINDOW_UPDATE; its request timeout
//!   still runs, so a server that never opens its window ends in
//!   `timeout`, with no spinning meanwhile).
//! - **receive** decodes frames from the read buffer (only an incomplete
//!   frame is ever carried, at most 9 + 16 KiB); SETTINGS are applied and
//!   acknowledged, PINGs answered, received DATA is counted and returned
//!   to the server with WINDOW_UPDATE once half a window is consumed.
//! - **depth**: no request goes out before the server's SETTINGS are in,
//!   and never more streams than its SETTINGS_MAX_CONCURRENT_STREAMS.
//! - **GOAWAY**: streams at or below `last_stream_id` complete; the others
//!   are handed back ([`Output::Retry`]), one per call, and the loop sends
//!   them again on the next connection with their original due time; with
//!   nothing left in flight the connection is [`Output::Done`]. A GOAWAY
//!   with an error code hands back the unprocessed streams the same way,
//!   then fails the rest as `goaway_error`. REFUSED_STREAM is retried; any
//!   other RST_STREAM fails that stream only (`stream_reset`).
//!
//! Control frames the server provokes (SETTINGS acks, PING replies) queue
//! in the output; a server that provokes more than [`MAX_CONTROL_OWED`]
//! bytes of them while not reading is a flood (`h2_protocol`), so the
//! output cannot grow without bound. Received header blocks are capped by
//! the frame decoder ([`MAX_HEADER_BLOCK`]) and the HPACK decoder
//! (the header-list size soakd announces).

use std::collections::VecDeque;

use super::H2Rt;
use super::exchange::{AtClose, Cx, Inflight, Output, Response};
use crate::plan::CheckState;
use crate::stats::ErrorKind;
use crate::wire::h2::{
    DEFAULT_MAX_FRAME_SIZE, DEFAULT_WINDOW, ErrorCode, Frame, FrameDecoder, HEADER_LEN, HeaderDecoder, MAX_WINDOW,
    PREFACE, encode_ping, encode_settings, encode_window_update, set_stream_id, setting, write_header,
};

/// Largest header block (all fragments) accepted from the server.
pub(super) const MAX_HEADER_BLOCK: u32 = 64 * 1024;
/// Largest decoded header list accepted (announced as
/// SETTINGS_MAX_HEADER_LIST_SIZE).
const MAX_HEADER_LIST: u32 = 64 * 1024;
/// Bytes of control frames owed to a server that does not read them
/// before its flood of SETTINGS or PINGs counts as an attack.
pub(super) const MAX_CONTROL_OWED: usize = 64 * 1024;
/// Buffers (output, carried input, header block) are given back once they
/// are empty and have grown past this: an idle connection keeps none.
const KEEP_CAPACITY: usize = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum St {
    /// Not in use.
    Free,
    /// Issued; its HEADERS (or the rest of its body) are still owed.
    Owed,
    /// Written whole; the response is awaited.
    Open,
    /// To be handed back (not processed by the server).
    Handback,
}

/// One stream slot (one in-flight entry).
#[derive(Clone, Debug)]
struct Stream {
    st: St,
    /// Its stream id once rendered (0 before).
    id: u32,
    /// The response's status (0 until its final head).
    status: u16,
    /// Body bytes still to send.
    body_left: u32,
    /// What soakd may still send on it.
    send_window: i64,
    /// Received DATA not yet returned with a WINDOW_UPDATE.
    recv_unacked: u32,
    /// Its response's checks.
    check: CheckState,
}

impl Stream {
    fn free() -> Stream {
        Stream {
            st: St::Free,
            id: 0,
            status: 0,
            body_left: 0,
            send_window: 0,
            recv_unacked: 0,
            check: CheckState::default(),
        }
    }
}

/// One connection's HTTP/2 state.
pub(super) struct H2 {
    rt: std::sync::Arc<H2Rt>,
    dec: FrameDecoder,
    hpack: HeaderDecoder,
    /// An incomplete frame carried to the next read.
    carry: Vec<u8>,
    /// Bytes owed to the server, from `out_off`.
    out: Vec<u8>,
    out_off: usize,
    /// A header block assembled from CONTINUATION frames (rare).
    block: Vec<u8>,
    /// The stream and END_STREAM flag of the block being assembled.
    block_stream: u32,
    block_end: bool,
    streams: Box<[Stream]>,
    /// Entries with bytes owed, in issue order.
    order: VecDeque<u16>,
    next_id: u32,
    in_flight: u16,
    /// The server's SETTINGS arrived (requests may go out).
    settings_seen: bool,
    peer_max_streams: u32,
    peer_initial_window: i64,
    peer_max_frame: u32,
    /// The server's SETTINGS_MAX_HEADER_LIST_SIZE (`u32::MAX`: none).
    peer_max_list: u32,
    send_window: i64,
    recv_unacked: u32,
    /// GOAWAY received: its last stream and code.
    goaway: Option<(u32, ErrorCode)>,
}

impl std::fmt::Debug for H2 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("H2")
            .field("in_flight", &self.in_flight)
            .field("next_id", &self.next_id)
            .field("goaway", &self.goaway)
            .finish_non_exhaustive()
    }
}

impl H2 {
    /// The state of a new connection with `depth` entries; its preface and
    /// SETTINGS are owed at once.
    pub(super) fn new(rt: std::sync::Arc<H2Rt>, depth: usize) -> H2 {
        let mut h = H2 {
            dec: FrameDecoder::new(DEFAULT_MAX_FRAME_SIZE, MAX_HEADER_BLOCK),
            hpack: HeaderDecoder::new(0, MAX_HEADER_LIST as usize),
            carry: Vec::new(),
            out: Vec::new(),
            out_off: 0,
            block: Vec::new(),
            block_stream: 0,
            block_end: false,
            streams: vec![Stream::free(); depth].into_boxed_slice(),
            order: VecDeque::with_capacity(depth),
            next_id: 1,
            in_flight: 0,
            settings_seen: false,
            peer_max_streams: u32::MAX,
            peer_initial_window: DEFAULT_WINDOW as i64,
            peer_max_frame: DEFAULT_MAX_FRAME_SIZE,
            peer_max_list: u32::MAX,
            send_window: DEFAULT_WINDOW as i64,
            recv_unacked: 0,
            goaway: None,
            rt,
        };
        h.reset();
        h
    }

    /// A fresh connection: nothing in flight, the preface owed.
    pub(super) fn reset(&mut self) {
        self.dec.reset();
        self.hpack = HeaderDecoder::new(0, MAX_HEADER_LIST as usize);
        self.carry = Vec::new();
        self.block = Vec::new();
        self.out.clear();
        self.out_off = 0;
        for s in self.streams.iter_mut() {
            *s = Stream::free();
        }
        self.order.clear();
        self.next_id = 1;
        self.in_flight = 0;
        self.settings_seen = false;
        self.peer_max_streams = u32::MAX;
        self.peer_initial_window = DEFAULT_WINDOW as i64;
        self.peer_max_frame = DEFAULT_MAX_FRAME_SIZE;
        self.peer_max_list = u32::MAX;
        self.send_window = DEFAULT_WINDOW as i64;
        self.recv_unacked = 0;
        self.goaway = None;
        // The preface, soakd's SETTINGS (no dynamic table for the server to
        // fill, no push, the window), and the connection window opened to
        // the same size (SETTINGS only set the streams').
        self.out.extend_from_slice(PREFACE);
        encode_settings(
            &mut self.out,
            false,
            &[
                (setting::HEADER_TABLE_SIZE, 0),
                (setting::ENABLE_PUSH, 0),
                (setting::INITIAL_WINDOW_SIZE, self.rt.window),
                (setting::MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST),
            ],
        );
        if self.rt.window > DEFAULT_WINDOW {
            encode_window_update(&mut self.out, 0, self.rt.window - DEFAULT_WINDOW);
        }
    }

    #[inline]
    pub(super) fn in_flight(&self) -> u16 {
        self.in_flight
    }

    /// How many requests may be in flight now.
    #[inline]
    pub(super) fn depth(&self) -> u16 {
        if !self.settings_seen || self.goaway.is_some() {
            return 0;
        }
        (self.rt.streams as u32)
            .min(self.peer_max_streams)
            .min(self.streams.len() as u32) as u16
    }

    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS (0: none given, or not
    /// yet seen).
    pub(super) fn streams_limit(&self) -> u32 {
        if self.peer_max_streams == u32::MAX {
            0
        } else {
            self.peer_max_streams
        }
    }

    /// The entry written first among those in flight: the one with the
    /// lowest stream id (a stream not yet rendered is newer than any).
    pub(super) fn oldest(&self) -> Option<u16> {
        let mut best: Option<(u32, u16)> = None;
        for (i, s) in self.streams.iter().enumerate() {
            if s.st == St::Free {
                continue;
            }
            let id = if s.id == 0 { u32::MAX } else { s.id };
            if best.is_none_or(|(b, _)| id < b) {
                best = Some((id, i as u16));
            }
        }
        best.map(|(_, i)| i)
    }

    /// Why request `req` must not be sent on this connection: its header
    /// list is larger than the server's SETTINGS_MAX_HEADER_LIST_SIZE
    /// (RFC 9113 §6.5.2; a server may answer such a request with 431 or
    /// reset it, and it would be sent only to be refused).
    #[inline]
    pub(super) fn refuses(&self, req: usize) -> Option<ErrorKind> {
        (self.rt.requests[req].list_size > self.peer_max_list).then_some(ErrorKind::H2HeaderListTooLarge)
    }

    #[inline]
    pub(super) fn issue(&mut self) -> u16 {
        let at = self
            .streams
            .iter()
            .position(|s| s.st == St::Free)
            .expect("issue is called below the depth");
        self.streams[at].st = St::Owed;
        self.order.push_back(at as u16);
        self.in_flight += 1;
        at as u16
    }

    #[inline]
    pub(super) fn has_output(&self) -> bool {
        self.out_off < self.out.len() || self.order.front().is_some_and(|&e| self.can_send(e))
    }

    /// True when the owed entry `e` can make progress now.
    fn can_send(&self, e: u16) -> bool {
        let s = &self.streams[e as usize];
        s.id == 0 || (self.send_window > 0 && s.send_window > 0)
    }

    /// Renders what the owed streams may send now into the output.
    pub(super) fn prepare(&mut self, cx: &Cx<'_>) {
        while let Some(&e) = self.order.front() {
            let req = cx.entries[e as usize].req as usize;
            let s = &mut self.streams[e as usize];
            if s.id == 0 {
                let r = &self.rt.requests[req];
                s.id = self.next_id;
                self.next_id += 2;
                s.send_window = self.peer_initial_window;
                s.body_left = (cx.w.requests[req].bytes.len() - r.body_at) as u32;
                let at = self.out.len();
                self.out.extend_from_slice(&r.frames);
                // Every frame header of the block gets the stream's id.
                let mut f = at;
                while f + HEADER_LEN <= self.out.len() {
                    set_stream_id(&mut self.out[f..], s.id);
                    let len = u32::from_be_bytes([0, self.out[f], self.out[f + 1], self.out[f + 2]]) as usize;
                    f += HEADER_LEN + len;
                }
            }
            while s.body_left > 0 {
                let room = self.send_window.min(s.send_window).min(self.peer_max_frame as i64);
                if room <= 0 {
                    return;
                }
                let bytes = &cx.w.requests[req].bytes;
                let from = bytes.len() - s.body_left as usize;
                let n = (s.body_left as i64).min(room) as usize;
                let last = n == s.body_left as usize;
                write_header(&mut self.out, n, crate::wire::h2::kind::DATA, u8::from(last), s.id);
                self.out.extend_from_slice(&bytes[from..from + n]);
                s.body_left -= n as u32;
                s.send_window -= n as i64;
                self.send_window -= n as i64;
            }
            s.st = St::Open;
            self.order.pop_front();
        }
    }

    #[inline]
    pub(super) fn to_send(&self) -> &[u8] {
        &self.out[self.out_off..]
    }

    #[inline]
    pub(super) fn sent(&mut self, n: usize) {
        self.out_off += n;
        if self.out_off == self.out.len() {
            self.out_off = 0;
            if self.out.capacity() > KEEP_CAPACITY {
                self.out = Vec::new();
            } else {
                self.out.clear();
            }
        }
    }

    /// The next output owed without new bytes: a stream to hand back, or
    /// the end after a GOAWAY.
    fn pending(&mut self) -> Option<Output> {
        let (_, code) = self.goaway?;
        if let Some(e) = self.streams.iter().position(|s| s.st == St::Handback) {
            self.free(e);
            return Some(Output::Retry(e as u16));
        }
        if code != ErrorCode::NoError {
            return Some(Output::Error(ErrorKind::GoawayError));
        }
        (self.in_flight == 0).then_some(Output::Done)
    }

    fn free(&mut self, e: usize) {
        self.streams[e] = Stream::free();
        self.in_flight -= 1;
        self.order.retain(|&o| o as usize != e);
    }

    pub(super) fn receive(&mut self, cx: &Cx<'_>, fresh: &[u8]) -> (usize, Output) {
        if let Some(out) = self.pending() {
            return (0, out);
        }
        if self.carry.is_empty() {
            let mut pos = 0;
            loop {
                match self.dec.decode(&fresh[pos..]) {
                    Err(_) => return (fresh.len(), Output::Error(self.broken())),
                    Ok(None) => {
                        self.carry.extend_from_slice(&fresh[pos..]);
                        return (fresh.len(), Output::Taken);
                    }
                    Ok(Some((f, n))) => {
                        pos += n;
                        if let Some(out) = self.on_frame(cx, f) {
                            return (pos, out);
                        }
                    }
                }
            }
        }
        // An incomplete frame was carried: add the read and go on from
        // the carried bytes (the loop calls again with nothing new after an
        // output, and the rest is taken from here).
        let mut carry = std::mem::take(&mut self.carry);
        carry.extend_from_slice(fresh);
        let mut pos = 0;
        let out = loop {
            match self.dec.decode(&carry[pos..]) {
                Err(_) => break Output::Error(self.broken()),
                Ok(None) => break Output::Taken,
                Ok(Some((f, n))) => {
                    pos += n;
                    if let Some(out) = self.on_frame(cx, f) {
                        break out;
                    }
                }
            }
        };
        carry.drain(..pos);
        if !carry.is_empty() || carry.capacity() <= KEEP_CAPACITY {
            self.carry = carry;
        }
        (fresh.len(), out)
    }

    /// The kind of a connection that broke HTTP/2's rules: before the
    /// server's first SETTINGS, it never spoke HTTP/2 at all.
    fn broken(&self) -> ErrorKind {
        if self.settings_seen {
            ErrorKind::H2Protocol
        } else {
            ErrorKind::H2NotNegotiated
        }
    }

    /// The entry of stream `id`, if it is one of ours in flight.
    fn entry_of(&self, id: u32) -> Option<usize> {
        self.streams.iter().position(|s| s.id == id && s.st != St::Free)
    }

    fn on_frame(&mut self, cx: &Cx<'_>, f: Frame<'_>) -> Option<Output> {
        if !self.settings_seen && !matches!(f, Frame::Settings { ack: false, .. }) {
            // The server's first frame must be its SETTINGS (RFC 9113
            // §3.4): anything else is not an HTTP/2 server.
            return Some(Output::Error(ErrorKind::H2NotNegotiated));
        }
        match f {
            Frame::Settings { ack: true, .. } => None,
            Frame::Settings { ack: false, params } => {
                for (id, v) in params.iter() {
                    match id {
                        setting::MAX_CONCURRENT_STREAMS => self.peer_max_streams = v,
                        setting::INITIAL_WINDOW_SIZE => {
                            let delta = v as i64 - self.peer_initial_window;
                            self.peer_initial_window = v as i64;
                            for s in self.streams.iter_mut().filter(|s| s.id != 0) {
                                s.send_window += delta;
                            }
                        }
                        setting::MAX_FRAME_SIZE => self.peer_max_frame = v,
                        setting::MAX_HEADER_LIST_SIZE => self.peer_max_list = v,
                        _ => {}
                    }
                }
                self.settings_seen = true;
                self.control(|out| encode_settings(out, true, &[]))
            }
            Frame::Ping { ack: false, data } => self.control(|out| encode_ping(out, true, data)),
            Frame::Ping { ack: true, .. } | Frame::Ignored { .. } => None,
            Frame::WindowUpdate { stream: 0, increment } => {
                self.send_window += increment as i64;
                (self.send_window > MAX_WINDOW as i64).then_some(Output::Error(ErrorKind::H2Protocol))
            }
            Frame::WindowUpdate { stream, increment } => {
                let e = self.entry_of(stream)?;
                let s = &mut self.streams[e];
                s.send_window += increment as i64;
                (s.send_window > MAX_WINDOW as i64).then_some(Output::Error(ErrorKind::H2Protocol))
            }
            Frame::Headers {
                stream,
                end_stream,
                end_headers,
                fragment,
            } => {
                if end_headers {
                    return self.on_block(cx, stream, end_stream, fragment);
                }
                self.block.clear();
                self.block.extend_from_slice(fragment);
                self.block_stream = stream;
                self.block_end = end_stream;
                None
            }
            Frame::Continuation {
                end_headers, fragment, ..
            } => {
                self.block.extend_from_slice(fragment);
                if !end_headers {
                    return None;
                }
                let block = std::mem::take(&mut self.block);
                let out = self.on_block(cx, self.block_stream, self.block_end, &block);
                if block.capacity() <= KEEP_CAPACITY {
                    self.block = block;
                    self.block.clear();
                }
                out
            }
            Frame::Data {
                stream,
                end_stream,
                data,
                flow_len,
            } => self.on_data(cx, stream, end_stream, data, flow_len),
            Frame::RstStream { stream, code } => {
                let e = self.entry_of(stream)?;
                self.free(e);
                Some(Output::Reset {
                    entry: e as u16,
                    code,
                    retry: code == ErrorCode::RefusedStream,
                })
            }
            Frame::GoAway { last_stream, code, .. } => {
                self.goaway = Some((last_stream, code));
                for s in self.streams.iter_mut() {
                    if s.st != St::Free && (s.id == 0 || s.id > last_stream) {
                        s.st = St::Handback;
                    }
                }
                self.order.clear();
                // Counted first; the handbacks follow on the next calls.
                Some(Output::GoAway(code))
            }
            // Push was disabled in soakd's SETTINGS.
            Frame::PushPromise { .. } => Some(Output::Error(ErrorKind::H2Protocol)),
        }
    }

    /// Queues a control frame the server asked for; a server that keeps
    /// asking without reading is a flood.
    fn control(&mut self, write: impl FnOnce(&mut Vec<u8>)) -> Option<Output> {
        write(&mut self.out);
        (self.out.len() - self.out_off > MAX_CONTROL_OWED).then_some(Output::Error(ErrorKind::H2Protocol))
    }

    /// A whole header block on `stream`.
    ///
    /// Fields are judged as the decoder hands them over (the status, and
    /// the header checks one field at a time): nothing of the block is
    /// copied or kept.
    fn on_block(&mut self, cx: &Cx<'_>, stream: u32, end_stream: bool, block: &[u8]) -> Option<Output> {
        let e = self.entry_of(stream);
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
        end_stream.then(|| self.complete(cx, e))
    }

    fn on_data(&mut self, cx: &Cx<'_>, stream: u32, end_stream: bool, data: &[u8], flow_len: u32) -> Option<Output> {
        // The connection's window counts every DATA frame, ours or not.
        self.recv_unacked += flow_len;
        if self.recv_unacked >= self.rt.window / 2 {
            let n = std::mem::take(&mut self.recv_unacked);
            encode_window_update(&mut self.out, 0, n);
        }
        let e = self.entry_of(stream)?;
        if let Some(checks) = cx.w.requests[cx.entries[e].req as usize].checks.as_deref()
            && checks.wants_body()
            && !data.is_empty()
        {
            checks.on_body(&mut self.streams[e].check, data);
        }
        if end_stream {
            return Some(self.complete(cx, e));
        }
        let s = &mut self.streams[e];
        s.recv_unacked += flow_len;
        if s.recv_unacked >= self.rt.window / 2 {
            let n = std::mem::take(&mut s.recv_unacked);
            encode_window_update(&mut self.out, stream, n);
        }
        None
    }

    /// The response on entry `e` is complete: judge it, free the entry.
    fn complete(&mut self, cx: &Cx<'_>, e: usize) -> Output {
        let req = &cx.w.requests[cx.entries[e].req as usize];
        let status = self.streams[e].status;
        let failed_checks = match req.checks.as_deref() {
            None => 0,
            Some(checks) => checks.finish(&mut self.streams[e].check, status),
        };
        if self.streams[e].st == St::Owed {
            // The server answered before the body was all sent (allowed):
            // the rest is not owed any more.
            self.order.retain(|&o| o as usize != e);
        }
        self.streams[e] = Stream::free();
        self.in_flight -= 1;
        Output::Response(Response {
            entry: e as u16,
            status,
            keep_alive: true,
            failed_checks,
        })
    }

    pub(super) fn at_close(&mut self) -> AtClose {
        if !self.settings_seen {
            // Closed before its SETTINGS: not an HTTP/2 server (an
            // HTTP/1.1-only one closes on the h2c preface).
            return AtClose::Failed(ErrorKind::H2NotNegotiated);
        }
        if self.in_flight == 0 {
            AtClose::Idle
        } else {
            AtClose::Truncated
        }
    }

    /// Entries keep their index in a deeper layout.
    pub(super) fn relayout(&mut self, old: &[Inflight], new: &mut [Inflight]) {
        new[..old.len()].copy_from_slice(old);
        let mut streams = vec![Stream::free(); new.len()].into_boxed_slice();
        streams[..self.streams.len()].clone_from_slice(&self.streams);
        self.streams = streams;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::worker::WorkloadRt;
    use crate::wire::h2::{self, encode_data, encode_goaway, encode_headers, encode_rst_stream};
    use std::sync::Arc;

    fn workload(streams: u16) -> WorkloadRt {
        let req: Arc<[u8]> = Arc::from(&b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..]);
        WorkloadRt {
            addr: "127.0.0.1:1".parse().unwrap(),
            sources: Vec::new(),
            wire: req.clone(),
            req_len: req.len(),
            head: false,
            requests: vec![crate::plan::Request {
                name: "r".into(),
                bytes: req.clone(),
                head: false,
                weight: 1,
                checks: None,
            }]
            .into(),
            cycle: None,
            tls: None,
            model: crate::plan::LoadModel::Closed,
            interval_ns: None,
            h2_step_ns: None,
            connections: 1,
            pipeline: 1,
            max_requests: None,
            close: false,
            close_with_reset: false,
            max_lifetime_ns: None,
            connect_timeout_ns: 1,
            request_timeout_ns: 1,
            ramp: 1,
            h2: Some(Arc::new(H2Rt {
                required: true,
                cleartext: true,
                streams,
                window: 1 << 20,
                requests: vec![h2::render_request(&req, false).unwrap()].into(),
            })),
            ws: None,
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
        assert_eq!(w.step_ns(false), Some(100_000_000));
        assert_eq!(w.step_ns(true), Some(20_000_000));
        let mut due: Vec<u64> = (0..4u32)
            .flat_map(|slot| {
                let first = grid_due(slot, 4, w.step_ns(true).unwrap(), 0);
                (0..5u64).map(move |k| first + k * 20_000_000)
            })
            .collect();
        due.sort_unstable();
        let gaps: Vec<u64> = due.windows(2).map(|p| p[1] - p[0]).collect();
        assert_eq!(due.len(), 20);
        assert!(gaps.iter().all(|&g| g == 5_000_000), "{due:?}");
        // 100 req/s over 4 connections: 40 ms each, HTTP/2 or not.
        w.set_load(4, LoadModel::Rate(100.0));
        assert_eq!(w.step_ns(true), Some(40_000_000));
        assert_eq!(w.step_ns(false), Some(40_000_000));
        w.set_load(4, LoadModel::Closed);
        assert_eq!(w.step_ns(true), None);
    }

    /// Feeds `bytes` the way the loop does; every output until taken.
    fn feed(h: &mut H2, cx: &Cx<'_>, bytes: &[u8]) -> Vec<Output> {
        let mut outs = Vec::new();
        let mut pos = 0;
        loop {
            let (n, out) = h.receive(cx, &bytes[pos..]);
            pos += n;
            if out == Output::Taken {
                return outs;
            }
            let end = matches!(out, Output::Error(_) | Output::Done);
            outs.push(out);
            if end {
                return outs;
            }
        }
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

    /// The stream ids written to the server, in order.
    fn written_streams(h: &mut H2) -> Vec<u32> {
        let out = h.to_send().to_vec();
        h.sent(out.len());
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

    #[test]
    fn requests_wait_for_settings_and_respect_max_streams() {
        let w = workload(10);
        let entries = vec![Inflight::default(); 10];
        let cx = Cx {
            w: &w,
            entries: &entries,
        };
        let mut h = H2::new(w.h2.clone().unwrap(), 10);
        assert!(h.has_output(), "the preface is owed");
        assert_eq!(h.depth(), 0, "nothing before the server's SETTINGS");
        assert!(feed(&mut h, &cx, &settings(3)).is_empty());
        assert_eq!(h.depth(), 3);
        for _ in 0..3 {
            h.issue();
        }
        h.prepare(&cx);
        assert_eq!(written_streams(&mut h), [1, 3, 5]);
        // Out of order: stream 3 completes first, then 1.
        let outs = feed(&mut h, &cx, &[response(3, 0x88), response(1, 0x8d)].concat());
        assert_eq!(
            outs,
            [
                Output::Response(Response {
                    entry: 1,
                    status: 200,
                    keep_alive: true,
                    failed_checks: 0
                }),
                Output::Response(Response {
                    entry: 0,
                    status: 404,
                    keep_alive: true,
                    failed_checks: 0
                }),
            ]
        );
        assert_eq!(h.in_flight(), 1);
        assert_eq!(h.oldest(), Some(2));
    }

    #[test]
    fn goaway_completes_below_last_and_hands_back_above() {
        let w = workload(4);
        let entries = vec![Inflight::default(); 4];
        let cx = Cx {
            w: &w,
            entries: &entries,
        };
        let mut h = H2::new(w.h2.clone().unwrap(), 4);
        feed(&mut h, &cx, &settings(100));
        for _ in 0..4 {
            h.issue();
        }
        h.prepare(&cx);
        assert_eq!(written_streams(&mut h), [1, 3, 5, 7]);
        let mut b = Vec::new();
        encode_goaway(&mut b, 3, ErrorCode::NoError, b"");
        let outs = feed(&mut h, &cx, &b);
        assert_eq!(
            outs,
            [Output::GoAway(ErrorCode::NoError), Output::Retry(2), Output::Retry(3)]
        );
        assert_eq!(h.depth(), 0, "no new stream after GOAWAY");
        let outs = feed(&mut h, &cx, &[response(1, 0x88), response(3, 0x88)].concat());
        assert_eq!(outs.len(), 3);
        assert_eq!(outs[2], Output::Done);
    }

    #[test]
    fn refused_is_retried_and_a_reset_fails_its_stream_only() {
        let w = workload(2);
        let entries = vec![Inflight::default(); 2];
        let cx = Cx {
            w: &w,
            entries: &entries,
        };
        let mut h = H2::new(w.h2.clone().unwrap(), 2);
        feed(&mut h, &cx, &settings(100));
        h.issue();
        h.issue();
        h.prepare(&cx);
        written_streams(&mut h);
        let mut b = Vec::new();
        encode_rst_stream(&mut b, 1, ErrorCode::RefusedStream);
        encode_rst_stream(&mut b, 3, ErrorCode::Cancel);
        let outs = feed(&mut h, &cx, &b);
        assert_eq!(
            outs,
            [
                Output::Reset {
                    entry: 0,
                    code: ErrorCode::RefusedStream,
                    retry: true
                },
                Output::Reset {
                    entry: 1,
                    code: ErrorCode::Cancel,
                    retry: false
                },
            ]
        );
        assert_eq!(h.in_flight(), 0);
    }

    #[test]
    fn pings_and_settings_are_answered_and_a_flood_is_an_error() {
        let w = workload(1);
        let entries = vec![Inflight::default(); 1];
        let cx = Cx {
            w: &w,
            entries: &entries,
        };
        let mut h = H2::new(w.h2.clone().unwrap(), 1);
        let preface = h.to_send().len();
        h.sent(preface);
        let mut b = settings(1);
        h2::encode_ping(&mut b, false, *b"abcdefgh");
        assert!(feed(&mut h, &cx, &b).is_empty());
        let mut want = Vec::new();
        h2::encode_settings(&mut want, true, &[]);
        h2::encode_ping(&mut want, true, *b"abcdefgh");
        assert_eq!(h.to_send(), &want[..]);
        let mut flood = Vec::new();
        for _ in 0..5000 {
            h2::encode_ping(&mut flood, false, [0; 8]);
        }
        assert_eq!(feed(&mut h, &cx, &flood), [Output::Error(ErrorKind::H2Protocol)]);
    }

    #[test]
    fn a_server_that_is_not_http2_is_not_negotiated() {
        let w = workload(1);
        let entries = vec![Inflight::default(); 1];
        let cx = Cx {
            w: &w,
            entries: &entries,
        };
        let mut h = H2::new(w.h2.clone().unwrap(), 1);
        let outs = feed(&mut h, &cx, b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(outs, [Output::Error(ErrorKind::H2NotNegotiated)]);
        // A server that closes without a word is not one either; after its
        // SETTINGS, a close with nothing owed is just a close.
        let mut h = H2::new(w.h2.clone().unwrap(), 1);
        assert_eq!(h.at_close(), AtClose::Failed(ErrorKind::H2NotNegotiated));
        feed(&mut h, &cx, &settings(1));
        assert_eq!(h.at_close(), AtClose::Idle);
    }

    #[test]
    fn split_frames_are_carried_and_the_window_is_returned() {
        let w = workload(1);
        let entries = vec![Inflight::default(); 1];
        let cx = Cx {
            w: &w,
            entries: &entries,
        };
        let mut h = H2::new(w.h2.clone().unwrap(), 1);
        feed(&mut h, &cx, &settings(1));
        h.issue();
        h.prepare(&cx);
        written_streams(&mut h);
        let mut b = Vec::new();
        encode_headers(&mut b, 1, &[0x88], false, 16_384);
        // 600 KiB of DATA in 16 KiB frames: more than half the 1 MiB window.
        encode_data(&mut b, 1, &vec![b'x'; 600 * 1024], true, 16_384);
        let mut outs = Vec::new();
        for chunk in b.chunks(1000) {
            outs.extend(feed(&mut h, &cx, chunk));
        }
        assert_eq!(outs.len(), 1);
        assert!(matches!(outs[0], Output::Response(r) if r.status == 200));
        assert!(h.carry.is_empty());
        let mut d = FrameDecoder::new(1 << 20, 1 << 20);
        let (f, _) = d.decode(h.to_send()).unwrap().unwrap();
        assert!(matches!(f, Frame::WindowUpdate { stream: 0, .. }), "{f:?}");
    }
}
