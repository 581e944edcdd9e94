//! The hot path, in one file: readiness in, requests out, responses framed
//! and counted.
//!
//! Everything a request costs happens here: issuing due requests and
//! writing their pre-rendered bytes (`pump`, `write_out`), reading until
//! the socket is drained (`on_readable`), framing (`on_bytes`) and
//! accounting each response (`on_response`). No allocation, lock or shared
//! atomic per request: counters are plain fields of the worker, the bytes
//! written are one shared buffer, and only a split response head is ever
//! copied (into the slot, capped by the framer).
//!
//! A workload of one request pays nothing for mixes and checks beyond a
//! branch on `cycle` and one on the request's `checks`. A mix picks its
//! next request by stepping a per-slot index through a precomputed cycle
//! and writes that request's own bytes; checks are fed by the framer as it
//! walks the response (body bytes only when a check needs them) and judged
//! when the response completes.

use std::io;

use super::conn::{Inflight, State, tick_ceil};
use super::{PHASE_RUN, Worker, socket};
use crate::plan::Judge;
use crate::stats::{self, CloseReason, ErrorKind};
use crate::wire::{AtEof, Framed};

impl Worker {
    pub(super) fn on_event(&mut self, ev: &mio::event::Event) {
        let (key, generation) = crate::netio::split(ev.token());
        let Some(c) = self.conns.get(key) else { return };
        if c.generation != generation {
            return;
        }
        let now = self.now();
        match c.state {
            State::Connecting => {
                let Some(stream) = c.stream.as_ref() else { return };
                match stream.finish_connect() {
                    Ok(true) => {
                        self.on_tcp_connected(key, now);
                        self.read_close_now(key, generation, ev, now);
                    }
                    Ok(false) => {}
                    Err(kind) => self.fail(key, kind, now),
                }
            }
            State::Handshaking => {
                self.drive_handshake(key, now);
                self.read_close_now(key, generation, ev, now);
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
                        Err(e) => return self.fail(key, socket::classify_established(&e), now),
                    }
                }
                if self.conns[key].unsent > 0 && self.write_out(key, now) {
                    self.arm(key);
                }
            }
            _ => {}
        }
    }

    /// An event that opened the connection may already carry the server's
    /// close (a server that accepts and closes at once): read it now, no
    /// later edge would report it.
    fn read_close_now(&mut self, key: usize, generation: u32, ev: &mio::event::Event, now: u64) {
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

    /// Issues every request the load model allows now and writes them.
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
            let at = (c.inflight_head as usize + c.inflight as usize) % *max_pipeline;
            inflight[base + at] = Inflight { due, written: now, req };
            c.inflight += 1;
            c.unsent += 1;
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
    pub(super) fn write_out(&mut self, key: usize, now: u64) -> bool {
        let c = &mut self.conns[key];
        let w = &self.wl[c.workload as usize];
        let Some(stream) = c.stream.as_mut() else { return false };
        let base = key * self.max_pipeline;
        let mut written = 0u64;
        let mut failure = None;
        while c.unsent > 0 {
            // What to write from: with one request, `wire` holds whole
            // copies of it, so from `off` in the first copy up to its end is
            // one contiguous run of the requests still owed. A mix writes
            // the first request owed from its own bytes, one at a time.
            let (buf, len, units): (&[u8], usize, usize) = match &w.cycle {
                None => (&w.wire, w.req_len, c.unsent as usize),
                Some(_) => {
                    let first_unsent = c.inflight.saturating_sub(c.unsent) as usize;
                    let at = (c.inflight_head as usize + first_unsent) % self.max_pipeline;
                    let bytes = &w.requests[self.inflight[base + at].req as usize].bytes;
                    (bytes, bytes.len(), 1)
                }
            };
            let off = c.write_off as usize;
            let end = (units * len).min(buf.len());
            match stream.write(&buf[off..end]) {
                Ok(0) => {
                    failure = Some(ErrorKind::Reset);
                    break;
                }
                Ok(n) => {
                    written += n as u64;
                    let pos = off + n;
                    c.unsent -= (pos / len) as u16;
                    c.write_off = (pos % len) as u32;
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

    pub(super) fn on_readable(&mut self, key: usize, rbuf: &mut [u8], to_the_end: bool, now: u64) {
        loop {
            let c = &mut self.conns[key];
            let Some(stream) = c.stream.as_mut() else { return };
            let short_read_drains = stream.short_read_drains();
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
                    // raises a new edge. (Not so for TLS: rustls may hold
                    // records it has not handed out yet.)
                    if short_read_drains && n < rbuf.len() && !to_the_end {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let kind = read_failure(&e, self.conns[key].answered);
                    return self.fail(key, kind, now);
                }
            }
        }
    }

    /// Frames bytes that arrived. Returns false when the connection was
    /// closed or replaced while handling them.
    pub(super) fn on_bytes(&mut self, key: usize, fresh: &[u8], now: u64) -> bool {
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
            // The oldest request in flight is the one being answered.
            let w = &self.wl[c.workload as usize];
            let req = &w.requests[self.inflight[key * self.max_pipeline + c.inflight_head as usize].req as usize];
            if w.cycle.is_some() && c.framer.is_idle() {
                c.framer.set_head(req.head);
            }
            let framed = match req.checks.as_deref() {
                None => c.framer.feed(&data[pos..]),
                Some(checks) => c.framer.feed_inspect(
                    &data[pos..],
                    &mut Judge {
                        checks,
                        state: &mut c.check,
                    },
                ),
            };
            match framed {
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
    pub(super) fn on_response(&mut self, key: usize, status: u16, keep_alive: bool, now: u64) -> bool {
        let c = &mut self.conns[key];
        let wi = c.workload as usize;
        let slot = self.inflight[key * self.max_pipeline + c.inflight_head as usize];
        let w = &self.wl[wi];
        let st = &mut self.local[wi];
        let latency = now.saturating_sub(slot.due);
        let req = &w.requests[slot.req as usize];
        if let Some(checks) = req.checks.as_deref() {
            let failed = checks.finish(&mut c.check, status);
            if failed != 0 {
                st.requests[slot.req as usize].failed(failed);
            }
        }
        if w.cycle.is_some() {
            let r = &mut st.requests[slot.req as usize];
            r.completed += 1;
            r.responses[stats::StatusClass::of(status) as usize] += 1;
            stats::record_ns(&mut r.latency, latency);
        }
        c.inflight_head = ((c.inflight_head as usize + 1) % self.max_pipeline) as u16;
        c.inflight -= 1;
        c.answered = true;
        self.inflight_total -= 1;
        self.gauges[wi].in_flight -= 1;
        st.counters.completed += 1;
        st.counters.response(status);
        stats::record_ns(&mut st.latency, latency);
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

    pub(super) fn on_eof(&mut self, key: usize, now: u64) {
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
