//! The hot path, in one file: readiness in, requests out, responses
//! counted.
//!
//! Everything a request costs happens here or in the connection's protocol
//! (`protocol.rs`, the seam; `http1.rs` today): issuing due requests and
//! writing the bytes owed (`pump`, `write_out`), reading until the socket
//! is drained (`on_readable`), handing the bytes to the protocol
//! (`on_bytes`) and accounting each response it completes (`on_response`).
//! No allocation, lock or shared atomic per request: counters are plain
//! fields of the worker, the bytes written are one shared buffer, and only
//! a split response head is ever copied (into the slot, capped by the
//! framer).
//!
//! Per response the clock is read once, after the read that brought it in
//! (that time ends its latency and starts the next request's timeout). A
//! read stops at the first one that leaves the socket drained, TLS
//! included (`Transport::drained`), so a response costs one read, not a
//! second that only says `WouldBlock`.
//!
//! A workload of one request pays nothing for mixes and checks beyond a
//! branch on `cycle` and one on the request's `checks`. A mix picks its
//! next request by stepping a per-slot index through a precomputed cycle
//! and writes that request's own bytes; checks are fed by the framer as it
//! walks the response (body bytes only when a check needs them) and judged
//! when the response completes.

use std::io;

use super::conn::{Inflight, State, tick_ceil};
use super::protocol::{AtClose, Cx, Output, Response};
use super::{PHASE_RUN, Worker, socket};
use crate::stats::{self, CloseReason, ErrorKind};

/// Refused requests (never sent, see `Protocol::refuses`) one closed-loop
/// pump may count before the slot backs off instead of spinning.
const MAX_REFUSED_PER_PUMP: usize = 64;

/// How often one HTTP/2 request may be handed back unprocessed (GOAWAY,
/// REFUSED_STREAM) and sent again; the next time it fails. Three retries
/// ride out a graceful GOAWAY or a brief overload; a server that refuses
/// every stream gets each request four times, not endlessly.
const MAX_HANDBACKS: u8 = 3;

impl Worker {
    pub(super) fn on_event(&mut self, ev: &mio::event::Event) {
        let (key, generation) = crate::netio::split(ev.token());
        let Some(c) = self.conns.get(key) else { return };
        if c.generation != generation {
            return;
        }
        match c.state {
            State::Connecting => {
                let Some(stream) = c.stream.as_ref() else { return };
                let now = self.now();
                match stream.finish_connect() {
                    Ok(true) => {
                        self.on_tcp_connected(key, now);
                        self.read_close_now(key, generation, ev);
                    }
                    Ok(false) => {}
                    Err(kind) => self.fail(key, kind, now),
                }
            }
            State::Handshaking => {
                let now = self.now();
                self.drive_handshake(key, now);
                self.read_close_now(key, generation, ev);
            }
            State::Open => {
                // No clock read here: the read below takes the one a
                // response needs, when its bytes are in.
                if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                    // With a FIN or an error pending, a short read does not
                    // mean drained: read on until the EOF or error shows, or
                    // no new edge would ever report it.
                    let to_the_end = ev.is_read_closed() || ev.is_error();
                    let mut rbuf = std::mem::take(&mut self.rbuf);
                    self.on_readable(key, &mut rbuf, to_the_end);
                    self.rbuf = rbuf;
                }
                if !ev.is_writable() {
                    return;
                }
                let Some(c) = self.conns.get_mut(key) else { return };
                if c.generation != generation || c.state != State::Open {
                    return;
                }
                // TLS records a full socket did not take go first.
                if let Some(stream) = c.stream.as_mut()
                    && stream.wants_write()
                {
                    match stream.flush() {
                        Ok(()) => {}
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                        Err(e) => {
                            let now = self.now();
                            return self.fail(key, socket::classify_established(&e), now);
                        }
                    }
                }
                if self.conns[key].proto.has_output() && self.write_out(key) {
                    self.arm(key);
                }
            }
            _ => {}
        }
    }

    /// An event that opened the connection may already carry the server's
    /// close (a server that accepts and closes at once): read it now, no
    /// later edge would report it.
    fn read_close_now(&mut self, key: usize, generation: u32, ev: &mio::event::Event) {
        if (ev.is_read_closed() || ev.is_error())
            && self
                .conns
                .get(key)
                .is_some_and(|c| c.generation == generation && c.state == State::Open)
        {
            let mut rbuf = std::mem::take(&mut self.rbuf);
            self.on_readable(key, &mut rbuf, true);
            self.rbuf = rbuf;
        }
    }

    /// Issues every request the load model allows now and writes them.
    /// A request the protocol refuses (see `Protocol::refuses`) is counted
    /// missed instead.
    /// Returns false when the connection failed while writing.
    pub(super) fn pump(&mut self, key: usize, now: u64) -> bool {
        let Worker {
            conns,
            wl,
            local,
            inflight,
            max_pipeline,
            budget_left,
            has_budget,
            phase,
            retries,
            ..
        } = self;
        let c = &mut conns[key];
        let w = &wl[c.workload as usize];
        let st = &mut local[c.workload as usize];
        let depth = *max_pipeline;
        let base = key * depth;
        if inflight.len() < base + depth {
            inflight.resize(base + depth, Inflight::default());
        }
        // Requests a GOAWAY or REFUSED_STREAM handed back go first, with
        // their original due time (already counted as sent and budgeted).
        let mut reissued = 0u64;
        while !retries.is_empty() && c.proto.in_flight() < c.proto.depth(w) && *phase == PHASE_RUN {
            let Some(i) = retries.iter().position(|r| r.0 == key as u32) else {
                break;
            };
            let (_, e) = retries.swap_remove(i);
            let at = c.proto.issue(depth);
            inflight[base + at as usize] = Inflight { written: now, ..e };
            reissued += 1;
        }
        // `--ws-reply none`: messages go out on the schedule untimed (the
        // plan refuses it in closed loop, where this loop would not stop).
        let untimed = w.ws.as_ref().is_some_and(|p| !p.reply);
        let mut issued = 0u64;
        let mut timed = 0u64;
        let mut refused = 0usize;
        let mut refused_out = None;
        while c.proto.in_flight() < c.proto.depth(w)
            && c.proto.may_issue()
            && !c.draining
            && *phase == PHASE_RUN
            && *budget_left > 0
            && c.reqs_left > 0
        {
            let due = match w.step_ns(c.proto.is_h2()) {
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
            let req = match &w.cycle {
                None => 0,
                Some(cycle) => {
                    let mut p = c.mix_pos as usize;
                    if p >= cycle.len() {
                        p %= cycle.len();
                    }
                    c.mix_pos = (p + 1) as u32;
                    cycle[p]
                }
            };
            if *has_budget {
                *budget_left -= 1;
            }
            if c.reqs_left != u32::MAX {
                c.reqs_left -= 1;
            }
            if let Some(kind) = c.proto.refuses(req as usize) {
                // Never sent (a header list over the server's limit): due
                // and missed, with the kind as the reason; its turn is
                // taken and the next request of the mix may go.
                st.counters.missed += 1;
                st.counters.error(kind, 1);
                refused += 1;
                if refused >= MAX_REFUSED_PER_PUMP && c.proto.in_flight() == 0 && w.interval_ns.is_none() {
                    // Closed loop and nothing this connection may send:
                    // rather than spin, the slot backs off and tries a
                    // new connection (the server's limit may change).
                    refused_out = Some(kind);
                    break;
                }
                continue;
            }
            if untimed {
                if let Some(ws) = c.proto.ws_mut() {
                    ws.send_untimed();
                }
            } else {
                let at = c.proto.issue(depth);
                inflight[base + at as usize] = Inflight {
                    due,
                    written: now,
                    req,
                    handed_back: 0,
                };
                timed += 1;
            }
            issued += 1;
        }
        if let Some(kind) = refused_out {
            self.fail(key, kind, now);
            return false;
        }
        if issued + reissued == 0 {
            // HTTP/2 may owe bytes of its own (the preface, acks, window
            // updates, a body a window held back).
            return !(c.proto.is_h2() && c.proto.has_output()) || self.write_out(key);
        }
        // An untimed message is a WebSocket message sent, not a request
        // owed an answer: the request counters (sent = completed + failed
        // + in flight) do not see it.
        st.counters.sent += timed;
        if w.ws.is_some() {
            st.ws.sent += issued;
        }
        self.inflight_total += timed + reissued;
        // A handed-back request never left the in-flight gauge (see
        // `hand_back`).
        self.gauges[self.conns[key].workload as usize].in_flight += timed;
        self.write_out(key)
    }

    /// Writes the bytes the connection owes until done or the socket is
    /// full. Returns false when the connection failed.
    pub(super) fn write_out(&mut self, key: usize) -> bool {
        let c = &mut self.conns[key];
        let base = key * self.max_pipeline;
        let cx = Cx {
            w: &self.wl[c.workload as usize],
            entries: &self.inflight[base..base + self.max_pipeline],
        };
        c.proto.prepare(&cx);
        let Some(stream) = c.stream.as_mut() else { return false };
        let mut written = 0u64;
        let mut failure = None;
        loop {
            let bytes = c.proto.to_send(&cx);
            if bytes.is_empty() {
                break;
            }
            match stream.write(bytes) {
                Ok(0) => {
                    failure = Some(ErrorKind::Reset);
                    break;
                }
                Ok(n) => {
                    written += n as u64;
                    c.proto.sent(&cx, n);
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
                let now = self.now();
                self.fail(key, kind, now);
                false
            }
            None => true,
        }
    }

    /// Reads until the socket is drained (or the connection is gone). Each
    /// read takes the clock once: latency ends when the bytes are in, not
    /// after parsing whatever else arrived in the same batch of events.
    pub(super) fn on_readable(&mut self, key: usize, rbuf: &mut [u8], to_the_end: bool) {
        loop {
            let c = &mut self.conns[key];
            let Some(stream) = c.stream.as_mut() else { return };
            match stream.read(rbuf) {
                Ok(0) => {
                    let now = self.now();
                    return self.on_eof(key, now);
                }
                Ok(n) => {
                    // Asked before the bytes are handled (which may close
                    // the stream): did this read leave the socket drained?
                    // Then the next arrival raises a new edge, and another
                    // read would only return WouldBlock.
                    let drained = stream.drained(n, rbuf.len()) && !to_the_end;
                    self.local[c.workload as usize].counters.bytes_received += n as u64;
                    let now = self.now();
                    if !self.on_bytes(key, &rbuf[..n], now) || drained {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let kind = read_failure(&e, self.conns[key].answered);
                    let now = self.now();
                    return self.fail(key, kind, now);
                }
            }
        }
    }

    /// Hands bytes that arrived to the connection's protocol and acts on
    /// what it answers. Returns false when the connection was closed or
    /// replaced while handling them.
    pub(super) fn on_bytes(&mut self, key: usize, fresh: &[u8], now: u64) -> bool {
        let mut pos = 0;
        loop {
            let c = &mut self.conns[key];
            let base = key * self.max_pipeline;
            let cx = Cx {
                w: &self.wl[c.workload as usize],
                entries: &self.inflight[base..base + self.max_pipeline],
            };
            let (used, out) = c.proto.receive(&cx, &fresh[pos..]);
            pos += used;
            match out {
                Output::Taken if self.conns[key].proto.is_h2() => {
                    // Input may have let requests go out (SETTINGS, a
                    // window) or owe replies: issue, write, re-arm.
                    let limit = self.conns[key].proto.streams_limit();
                    if limit != 0 {
                        let g = &mut self.gauges[self.conns[key].workload as usize];
                        g.h2_streams_limit = if g.h2_streams_limit == 0 {
                            limit
                        } else {
                            g.h2_streams_limit.min(limit)
                        };
                    }
                    if !self.pump(key, now) {
                        return false;
                    }
                    self.arm(key);
                    return true;
                }
                Output::Taken => return true,
                Output::Retry(entry) => self.hand_back(key, entry),
                Output::Reset { entry, code, retry } => {
                    let wi = self.conns[key].workload as usize;
                    let st = &mut self.local[wi];
                    st.h2_mut().resets[code as usize] += 1;
                    if retry {
                        self.hand_back(key, entry);
                    } else {
                        st.counters.error(ErrorKind::StreamReset, 1);
                        st.counters.failed += 1;
                        self.lose(wi, 1);
                    }
                }
                Output::GoAway(code) => {
                    let wi = self.conns[key].workload as usize;
                    self.local[wi].h2_mut().goaways[code as usize] += 1;
                }
                Output::Done => {
                    self.goaway_done(key, now);
                    return false;
                }
                Output::Response(r) => {
                    let wi = self.conns[key].workload as usize;
                    if self.wl[wi].ws.is_some() {
                        let ws = &mut self.local[wi].ws;
                        ws.received += 1;
                        ws.replies += 1;
                    }
                    if !self.on_response(key, r, now) {
                        return false;
                    }
                }
                Output::Ws(note) => {
                    if !self.on_ws(key, note, now) {
                        return false;
                    }
                }
                Output::Error(kind) => {
                    // A WebSocket owes the close frame that says why.
                    if self.conns[key].proto.ws_mut().is_some() {
                        self.flush_best_effort(key);
                    }
                    self.fail(key, kind, now);
                    return false;
                }
            }
        }
    }

    /// Accounts one complete response. Returns false when the connection is
    /// gone afterwards (closed, or replaced by a new one).
    pub(super) fn on_response(&mut self, key: usize, r: Response, now: u64) -> bool {
        let c = &mut self.conns[key];
        let wi = c.workload as usize;
        let slot = self.inflight[key * self.max_pipeline + r.entry as usize];
        let w = &self.wl[wi];
        let st = &mut self.local[wi];
        let latency = now.saturating_sub(slot.due);
        if r.failed_checks != 0 {
            st.requests[slot.req as usize].failed(r.failed_checks);
        }
        if w.cycle.is_some() {
            let q = &mut st.requests[slot.req as usize];
            q.completed += 1;
            q.responses[stats::StatusClass::of(r.status) as usize] += 1;
            stats::record_ns(&mut q.latency, latency);
        }
        c.answered = true;
        self.inflight_total -= 1;
        self.gauges[wi].in_flight -= 1;
        st.counters.completed += 1;
        st.counters.response(r.status);
        stats::record_ns(&mut st.latency, latency);
        let churn_done = c.reqs_left == 0 || c.draining;
        if churn_done && c.proto.in_flight() == 0 {
            self.close(key, CloseReason::Churn, now);
            self.reconnect(key, now);
            return false;
        }
        if !r.keep_alive {
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

    /// An HTTP/2 request the server did not process leaves its connection:
    /// it waits for the slot's next connection (see `pump`), keeping its
    /// due time, so its latency still counts from then.
    ///
    /// The request stays in the workload's in-flight gauge until it is
    /// answered on another connection: it was sent and is still owed, so a
    /// stop that finds it waiting shows it as in flight at the end, as an
    /// HTTP/1.1 request in flight at stop is (`sent = completed + failed +
    /// in_flight_at_end` holds). Only the worker's own count, which decides
    /// when a draining worker is idle, lets it go: it cannot be sent again
    /// once the run stops.
    ///
    /// A request handed back [`MAX_HANDBACKS`] times fails instead, as
    /// `h2_retries_exhausted`: a server that refuses every stream must not
    /// get the same requests again and again at the speed of its refusals,
    /// nor keep a `--requests` run from ending.
    fn hand_back(&mut self, key: usize, entry: u16) {
        let mut e = self.inflight[key * self.max_pipeline + entry as usize];
        let wi = self.conns[key].workload as usize;
        if e.handed_back >= MAX_HANDBACKS {
            let st = &mut self.local[wi];
            st.counters.error(ErrorKind::H2RetriesExhausted, 1);
            st.counters.failed += 1;
            self.lose(wi, 1);
            return;
        }
        e.handed_back += 1;
        self.retries.push((key as u32, e));
        self.local[wi].h2_mut().retried += 1;
        self.inflight_total -= 1;
    }

    pub(super) fn on_eof(&mut self, key: usize, now: u64) {
        if self.ws_eof(key, now) {
            return;
        }
        let c = &mut self.conns[key];
        let base = key * self.max_pipeline;
        let cx = Cx {
            w: &self.wl[c.workload as usize],
            entries: &self.inflight[base..base + self.max_pipeline],
        };
        match c.proto.at_close(&cx) {
            AtClose::Complete(r) => {
                // The close ends the body: a complete response, and then a
                // server close (handled by `on_response`).
                self.on_response(key, r, now);
            }
            AtClose::Idle if c.proto.in_flight() == 0 && c.answered => {
                self.close(key, CloseReason::ServerClose, now);
                self.reconnect(key, now);
            }
            AtClose::Idle if c.proto.in_flight() == 0 => {
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
            AtClose::Idle | AtClose::Truncated => self.fail(key, ErrorKind::Eof, now),
            AtClose::Failed(kind) => self.fail(key, kind, now),
        }
    }

    /// Arms the open connection's timer for its earliest deadline. Exact
    /// (re-arming is `O(1)` and syscall-free): a stale early timer, such as
    /// the timeout of a request already answered, would cost the loop a
    /// wake-up for nothing.
    pub(super) fn arm(&mut self, key: usize) {
        let c = &self.conns[key];
        if c.state != State::Open {
            return;
        }
        let w = &self.wl[c.workload as usize];
        let mut deadline = u64::MAX;
        if let Some(entry) = c.proto.oldest() {
            let oldest = self.inflight[key * self.max_pipeline + entry as usize];
            deadline = oldest.written + w.request_timeout_ns;
        }
        if let Some(d) = c.proto.deadline() {
            deadline = deadline.min(d);
        }
        if !c.draining {
            deadline = deadline.min(c.lifetime_end);
            if let Some(_iv) = w.interval_ns
                && c.proto.in_flight() < c.proto.depth(w)
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
}

/// The kind of a failed read. With TLS 1.3 the client's handshake is over
/// before the server has checked it, so a server that rejects it (a client
/// certificate it wanted, say) says so with an alert on the first read:
/// before any response that is still the handshake failing, not a broken
/// connection.
fn read_failure(e: &io::Error, answered: bool) -> ErrorKind {
    match crate::netio::tls_error(e) {
        Some(rustls::Error::AlertReceived(_)) if !answered => ErrorKind::TlsHandshake,
        _ => socket::classify_established(e),
    }
}
