//! The hot path, in one file: readiness in, requests out, responses
//! counted.
//!
//! Everything a request costs happens here or in the connection's protocol
//! (`protocol.rs`, the seam): issuing due requests (`pump`) and writing the
//! bytes owed (`write_out`), reading until the socket is drained
//! (`on_readable`), handing the bytes to the protocol (`on_bytes`) and
//! acting on what it answers (`settle`): accounting each response
//! (`on_response`), failing one request or the connection, sending a
//! request again elsewhere (`hand_back`), ending the connection gracefully
//! (`end`). No allocation, lock or shared atomic per request: counters are
//! plain fields of the worker, the bytes written are one shared buffer (or
//! a pooled one the protocol keeps), and only a split response head or
//! frame is ever carried (in a pooled buffer, capped by the protocol).
//!
//! Per response the clock is read once, after the read that brought it in
//! (that time ends its latency and starts the next request's timeout). A
//! read stops at the first one that leaves the socket drained, TLS
//! included (`Transport::drained`), so a response costs one read, not a
//! second that only says `WouldBlock`.
//!
//! One write per wakeup: issuing a request only makes its bytes owed;
//! everything a read made owed (the requests its responses freed room for,
//! an acknowledgement, a pong, a window) leaves in one write once the read
//! is handled, and everything a timer or a schedule slot made owed once
//! that connection's handling ends (`serve`). A write per request would
//! cost a system call per request (at 100 connections x 10 streams, ten
//! times what the reads cost) where h2load gathers a wakeup's frames.
//!
//! A workload of one request pays nothing for mixes and checks beyond a
//! branch on `cycle` and one on the request's `checks`. A mix picks its
//! next request by stepping a per-slot index through a precomputed cycle
//! and writes that request's own bytes; checks are fed by the protocol as
//! it walks the response (body bytes only when a check needs them) and
//! judged when the response completes.

use std::io;

use super::conn::{Inflight, State, tick_ceil};
use super::exchange::Ending;
use super::protocol::{AtClose, Cx, Issued, Output, Protocol, Response, Tally};
use super::{HEALTHY_NS, PHASE_RUN, Worker, socket};
use crate::netio::Got;
use crate::stats::{self, CloseReason, ErrorKind};

/// Refused requests (never sent, see [`Issued::Refused`]) one closed-loop
/// pump may count before the slot backs off instead of spinning.
const MAX_REFUSED_PER_PUMP: usize = 64;

impl Worker {
    pub(super) fn on_event(&mut self, ev: &crate::netio::Ready) {
        let (key, generation) = crate::netio::split(ev.token());
        if key == super::linger::LINGER_KEY {
            let registry = self.poll.registry();
            return self.lingering.on_event(registry, generation as usize, &mut self.rbuf);
        }
        if key == super::quic::QUIC_KEY {
            return self.on_quic(generation as usize);
        }
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
    fn read_close_now(&mut self, key: usize, generation: u32, ev: &crate::netio::Ready) {
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

    /// Ends a connection's handling outside a read (a timer, its opening,
    /// a stage change): issues what is due, writes everything owed in one
    /// go, and arms its timer. Returns false when the connection is gone.
    pub(super) fn serve(&mut self, key: usize, now: u64) -> bool {
        if self.pump(key, now) && self.write_owed(key) {
            self.arm(key);
            true
        } else {
            false
        }
    }

    /// Issues every request the load model allows now, without writing
    /// them: what a read, a timer or a schedule slot makes owed leaves in
    /// one write when the connection's handling ends (`serve`, or the end
    /// of a read in `on_readable`), not one write per request. A request
    /// the protocol refuses is counted missed instead. Returns false when
    /// the connection failed (refused so often that the slot backs off).
    pub(super) fn pump(&mut self, key: usize, now: u64) -> bool {
        let Worker {
            conns,
            wl,
            local,
            gauges,
            inflight,
            max_pipeline,
            budget_left,
            has_budget,
            phase,
            handed_back,
            ..
        } = self;
        let c = &mut conns[key];
        let wi = c.workload as usize;
        let w = &wl[wi];
        let mut t = Tally {
            st: &mut local[wi],
            g: &mut gauges[wi],
            now,
        };
        let depth = *max_pipeline;
        let base = key * depth;
        if inflight.len() < base + depth {
            inflight.resize(base + depth, Inflight::default());
        }
        // Requests a server handed back go first, with their original due
        // time (already counted as sent and budgeted).
        let mut reissued = 0u64;
        let mut lost = 0u64;
        while !handed_back.is_empty() && c.proto.in_flight() < c.proto.capacity(w) && *phase == PHASE_RUN {
            let Some(i) = handed_back.iter().position(|r| r.0 == key as u32) else {
                break;
            };
            let (_, e) = handed_back.swap_remove(i);
            match c.proto.issue(&mut t, e.req, depth) {
                Issued::Entry(at) => {
                    inflight[base + at as usize] = Inflight { written: now, ..e };
                    reissued += 1;
                }
                // Sent once already: refused here, it fails.
                Issued::Refused(kind) => {
                    t.st.counters.error(kind, 1);
                    t.st.counters.failed += 1;
                    lost += 1;
                }
                Issued::Untimed => {}
            }
        }
        let mut timed = 0u64;
        let mut refused = 0usize;
        let mut refused_out = None;
        while c.proto.in_flight() < c.proto.capacity(w)
            && !c.draining
            && *phase == PHASE_RUN
            && *budget_left > 0
            && c.reqs_left > 0
        {
            let due = match c.proto.step(w) {
                None => now,
                Some(iv) => {
                    if c.next_due > now {
                        break;
                    }
                    let d = c.next_due;
                    c.next_due += iv;
                    stats::record_ns(&mut t.st.lag, now - d);
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
            match c.proto.issue(&mut t, req, depth) {
                Issued::Entry(at) => {
                    inflight[base + at as usize] = Inflight {
                        due,
                        written: now,
                        req,
                        handed_back: 0,
                    };
                    timed += 1;
                }
                // Not a request owed an answer: the request counters (sent
                // = completed + failed + in flight) do not see it.
                Issued::Untimed => {}
                Issued::Refused(kind) => {
                    // Never sent: due and missed, with the kind as the
                    // reason; its turn is taken and the next request of the
                    // mix may go.
                    t.st.counters.missed += 1;
                    t.st.counters.error(kind, 1);
                    refused += 1;
                    if refused >= MAX_REFUSED_PER_PUMP && c.proto.in_flight() == 0 && w.interval_ns.is_none() {
                        // Closed loop and nothing this connection may send:
                        // rather than spin, the slot backs off and tries a
                        // new connection (the server's limit may change).
                        refused_out = Some(kind);
                        break;
                    }
                }
            }
        }
        t.st.counters.sent += timed;
        t.g.in_flight += timed;
        // A handed-back request never left the in-flight gauge (see
        // `hand_back`).
        self.inflight_total += timed + reissued;
        if lost > 0 {
            self.lose(wi, lost);
        }
        if let Some(kind) = refused_out {
            self.fail(key, kind, now);
            return false;
        }
        true
    }

    /// Writes what the connection owes, if anything (see `write_out`).
    /// Returns false when the connection failed.
    #[inline]
    pub(super) fn write_owed(&mut self, key: usize) -> bool {
        !self.conns[key].proto.has_output() || self.write_out(key)
    }

    /// Writes the bytes the connection owes until done or the socket is
    /// full (the one write loop, `netio::until_blocked`). Returns false
    /// when the connection failed.
    pub(super) fn write_out(&mut self, key: usize) -> bool {
        if matches!(self.conns[key].proto, Protocol::H3(_)) {
            return self.quic_transmit(key);
        }
        let c = &mut self.conns[key];
        let cx = Cx::of(&self.wl[c.workload as usize], &self.inflight, key, self.max_pipeline);
        let Some(stream) = c.stream.as_mut() else { return false };
        let proto = &mut c.proto;
        let mut written = 0u64;
        let done = crate::netio::until_blocked(|| {
            let bytes = proto.outgoing(&cx);
            if bytes.is_empty() {
                return None;
            }
            let n = stream.write(bytes);
            if let Ok(n) = n {
                written += n as u64;
                proto.sent(&cx, n);
            }
            Some(n)
        });
        self.local[c.workload as usize].counters.bytes_sent += written;
        match done {
            Ok(_) => true,
            Err(e) => {
                let kind = if e.kind() == io::ErrorKind::WriteZero {
                    ErrorKind::Reset
                } else {
                    socket::classify_established(&e)
                };
                let now = self.now();
                self.fail(key, kind, now);
                false
            }
        }
    }

    /// Writes what is owed once, best effort, on a connection about to end
    /// (a close frame that says why); whatever happens, the caller closes
    /// it. True when there was something to say (the server should be
    /// given the time to read it: see `linger.rs`).
    pub(super) fn farewell(&mut self, key: usize) -> bool {
        let c = &mut self.conns[key];
        if !c.proto.farewell() {
            return false;
        }
        let cx = Cx::of(&self.wl[c.workload as usize], &self.inflight, key, self.max_pipeline);
        let Some(stream) = c.stream.as_mut() else { return false };
        let proto = &mut c.proto;
        // A few writes at most: a peer that does not read gets no more.
        let mut left = 4;
        let _ = crate::netio::until_blocked(|| {
            left -= 1;
            let bytes = proto.outgoing(&cx);
            if left == 0 || bytes.is_empty() {
                return None;
            }
            let n = stream.write(bytes);
            if let Ok(n) = n {
                proto.sent(&cx, n);
            }
            Some(n)
        });
        let _ = stream.flush();
        true
    }

    /// Reads until the socket is drained (or the connection is gone). Each
    /// read takes the clock once: latency ends when the bytes are in, not
    /// after parsing whatever else arrived in the same batch of events.
    pub(super) fn on_readable(&mut self, key: usize, rbuf: &mut [u8], to_the_end: bool) {
        loop {
            let c = &mut self.conns[key];
            let Some(stream) = c.stream.as_mut() else { return };
            // `drained` is known before the bytes are handled (which may
            // close the stream): the next arrival raises a new edge, and
            // another read would only return WouldBlock.
            match crate::netio::read_some(stream, rbuf, to_the_end) {
                Ok(Got::Eof) => {
                    let now = self.now();
                    return self.on_eof(key, now);
                }
                Ok(Got::Data { n, drained }) => {
                    self.local[c.workload as usize].counters.bytes_received += n as u64;
                    let now = self.now();
                    // Everything the read made owed (the requests its
                    // responses freed room for, acknowledgements, pongs)
                    // leaves in one write once it is handled: one write
                    // per read, not per response. A read that did not
                    // drain the socket writes before the next, so what is
                    // owed stays within the protocols' bounds.
                    if !self.on_bytes(key, &rbuf[..n], now) || !self.write_owed(key) || drained {
                        return;
                    }
                }
                Ok(Got::Empty) => return,
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
        // Something became owed or sendable: issue and write once the read
        // is handled, not once per frame (a flood of pings costs one write).
        let mut ready = false;
        loop {
            let (used, out) = self.with_proto(key, now, |p, cx, t| p.receive(cx, t, &fresh[pos..]));
            pos += used;
            match out {
                Output::Taken => return !ready || self.settle(key, Output::Ready, now),
                out => {
                    if !self.settle_deferred(key, out, now, &mut ready) {
                        return false;
                    }
                }
            }
        }
    }

    /// Acts on one answer while a loop drains the protocol's answers (to
    /// bytes read, to QUIC datagrams): a place freed or handed back only
    /// sets `ready`, so the loop issues and writes once at its end rather
    /// than per answer. Returns false when the connection is gone.
    pub(super) fn settle_deferred(&mut self, key: usize, out: Output, now: u64, ready: &mut bool) -> bool {
        match out {
            Output::Ready => {
                *ready = true;
                true
            }
            // A request freed or handed back: its place may take the next
            // one.
            Output::Failed { .. } | Output::Retry(_) => {
                *ready = true;
                self.settle(key, out, now);
                true
            }
            out => self.settle(key, out, now),
        }
    }

    /// Acts on one answer of the connection's protocol (to bytes, or to
    /// its timer). Returns false when the connection is gone afterwards.
    pub(super) fn settle(&mut self, key: usize, out: Output, now: u64) -> bool {
        match out {
            Output::Taken => true,
            Output::Ready => {
                if self.pump(key, now) {
                    self.arm(key);
                    true
                } else {
                    false
                }
            }
            Output::Opened => {
                self.conns[key].answered = true;
                self.settle(key, Output::Ready, now)
            }
            Output::Response(r) => self.on_response(key, r, now),
            Output::Failed { kind, .. } => {
                let wi = self.conns[key].workload as usize;
                let st = &mut self.local[wi].counters;
                st.error(kind, 1);
                st.failed += 1;
                self.lose(wi, 1);
                true
            }
            Output::Retry(entry) => {
                self.hand_back(key, entry);
                true
            }
            Output::Error(kind) => {
                if self.farewell(key) {
                    // A close frame went out: the socket waits apart for
                    // the server's close (see `linger.rs`).
                    if let Some(mut s) = self.conns[key].stream.take() {
                        s.deregister(self.poll.registry());
                        self.lingering.add(self.poll.registry(), s, now);
                    }
                }
                self.fail(key, kind, now);
                false
            }
            Output::End(ending) => {
                self.end(key, ending, now);
                false
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

    /// A request the server did not process leaves its connection: it
    /// waits for the slot's next connection (see `pump`), keeping its due
    /// time, so its latency still counts from then. (The protocol decides
    /// when a request was handed back too often: it fails it instead.)
    ///
    /// The request stays in the workload's in-flight gauge until it is
    /// answered on another connection: it was sent and is still owed, so a
    /// stop that finds it waiting shows it as in flight at the end, as an
    /// HTTP/1.1 request in flight at stop is (`sent = completed + failed +
    /// in_flight_at_end` holds). Only the worker's own count, which decides
    /// when a draining worker is idle, lets it go: it cannot be sent again
    /// once the run stops.
    fn hand_back(&mut self, key: usize, entry: u16) {
        let mut e = self.inflight[key * self.max_pipeline + entry as usize];
        e.handed_back = e.handed_back.saturating_add(1);
        self.handed_back.push((key as u32, e));
        self.inflight_total -= 1;
    }

    /// The connection ends gracefully, nothing lost (see [`Ending`]).
    fn end(&mut self, key: usize, ending: Ending, now: u64) {
        self.farewell(key);
        match ending {
            Ending::Stopped => self.close(key, CloseReason::Shutdown, now),
            Ending::SentAway => self.sent_away(key, now),
            Ending::Closed if self.phase != PHASE_RUN => self.close(key, CloseReason::Shutdown, now),
            Ending::Closed => {
                let healthy = now.saturating_sub(self.conns[key].since) >= HEALTHY_NS;
                self.close(key, CloseReason::ServerClose, now);
                if self.conns[key].retiring {
                    self.remove_slot(key);
                } else {
                    self.back_off(key, healthy, now);
                }
            }
        }
    }

    pub(super) fn on_eof(&mut self, key: usize, now: u64) {
        let at_close = self.with_proto(key, now, |p, cx, t| p.at_close(cx, t));
        let c = &self.conns[key];
        match at_close {
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
            AtClose::Stopped => self.close(key, CloseReason::Shutdown, now),
            AtClose::SentAway => self.sent_away(key, now),
        }
    }

    /// Calls slot `key`'s protocol with what it is lent: the workload and
    /// the slot's in-flight entries, and the workload's counters at `now`.
    #[inline]
    pub(super) fn with_proto<R>(
        &mut self,
        key: usize,
        now: u64,
        f: impl FnOnce(&mut Protocol, &Cx<'_>, &mut Tally<'_>) -> R,
    ) -> R {
        let c = &mut self.conns[key];
        let wi = c.workload as usize;
        let cx = Cx::of(&self.wl[wi], &self.inflight, key, self.max_pipeline);
        let mut t = Tally {
            st: &mut self.local[wi],
            g: &mut self.gauges[wi],
            now,
        };
        f(&mut c.proto, &cx, &mut t)
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
                && c.proto.in_flight() < c.proto.capacity(w)
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
