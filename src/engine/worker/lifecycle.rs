//! A slot's life: connect, open, close, fail, back off, reconnect, retire;
//! and the timers and ramp tokens that pace it.
//!
//! Failures are classified here (one error per request lost, or one per
//! failed connect) and every reconnect after an error goes through a
//! jittered backoff and a ramp token, so a dead target never sees a storm.

use std::time::Duration;

use super::conn::{State, grid_due, jitter, tick_ceil};
use super::probe;
use super::protocol::{Output, Protocol, Tally};
use super::socket::{self, Connecting};
use super::transport::Transport;
use super::{BACKOFF_FIRST_MS, BACKOFF_MAX_MS, HEALTHY_NS, PHASE_RUN, TICK_NS, WALK_INTERVAL, Worker};
use crate::netio::token;
use crate::plan::defaults;
use crate::stats::{self, CloseReason, ErrorKind};

impl Worker {
    pub(super) fn set_state(&mut self, key: usize, to: State) {
        let c = &mut self.conns[key];
        let g = &mut self.gauges[c.workload as usize];
        // By the HTTP version spoken: a connection's protocol is settled
        // before it opens and stays until it is closed.
        let version = crate::stats::Gauges::http_index(c.proto.version());
        match c.state {
            State::Open => {
                g.open -= 1;
                g.http_open[version] -= 1;
            }
            State::Connecting | State::Handshaking => g.connecting -= 1,
            State::Waiting | State::Backoff => g.backoff -= 1,
            State::Idle => {}
        }
        match to {
            State::Open => {
                g.open += 1;
                g.http_open[version] += 1;
            }
            State::Connecting | State::Handshaking => g.connecting += 1,
            State::Waiting | State::Backoff => g.backoff += 1,
            State::Idle => {}
        }
        c.state = to;
    }

    pub(super) fn start_connect(&mut self, key: usize, now: u64) {
        let c = &mut self.conns[key];
        let w = &self.wl[c.workload as usize];
        let source = (!w.sources.is_empty()).then(|| w.sources[self.shard.local(c.slot) as usize % w.sources.len()]);
        let (addr, w_keepalive) = (w.addr, w.keepalive);
        self.local[c.workload as usize].counters.connects_started += 1;
        c.generation = self.generations.next();
        c.since = now;
        c.draining = false;
        c.answered = false;
        c.proto = Protocol::new(&self.wl[c.workload as usize]);
        let tok = token(key, c.generation);
        self.set_state(key, State::Connecting);
        if self.wl[self.conns[key].workload as usize].proto.is_quic() {
            return self.start_quic(key, now);
        }
        let (tcp, done) = match socket::connect(addr, source, w_keepalive, self.ports.as_mut()) {
            Ok(Connecting::InProgress(s)) => (s, false),
            Ok(Connecting::Done(s)) => (s, true),
            Err(kind) => return self.fail(key, kind, now),
        };
        let mut stream = match Transport::new(tcp, self.wl[self.conns[key].workload as usize].tls.as_ref()) {
            Ok(s) => s,
            Err(kind) => return self.fail(key, kind, now),
        };
        if let Err(e) = stream.register(self.poll.registry(), tok) {
            return self.fail(key, socket::classify_connect(&e), now);
        }
        let c = &mut self.conns[key];
        c.stream = Some(stream);
        if done {
            self.on_tcp_connected(key, now);
        } else {
            let deadline = now + self.wl[c.workload as usize].connect_timeout_ns;
            self.wheel.schedule(key as u32, tick_ceil(deadline));
        }
    }

    /// The TCP connection is up: count its connect time, then open it, or
    /// for TLS start the handshake (the connection is open only after it).
    pub(super) fn on_tcp_connected(&mut self, key: usize, now: u64) {
        let c = &mut self.conns[key];
        let wi = c.workload as usize;
        stats::record_ns(&mut self.local[wi].connect, now - c.since);
        c.since = now;
        if c.stream.as_ref().is_some_and(|s| s.is_tls()) {
            self.set_state(key, State::Handshaking);
            let deadline = now + self.wl[wi].connect_timeout_ns;
            self.wheel.schedule(key as u32, tick_ceil(deadline));
            self.drive_handshake(key, now);
        } else {
            self.on_connected(key, now);
        }
    }

    /// Moves a TLS handshake on after readiness; opens the connection when
    /// it is done, fails the slot when it failed.
    pub(super) fn drive_handshake(&mut self, key: usize, now: u64) {
        let c = &mut self.conns[key];
        let Some(stream) = c.stream.as_mut() else { return };
        match stream.handshake() {
            Ok(None) => {}
            Ok(Some(session)) => {
                let wi = c.workload as usize;
                let st = &mut self.local[wi];
                stats::record_ns(&mut st.tls_handshake, now - c.since);
                st.counters.tls_handshakes[usize::from(session.resumed)] += 1;
                let g = &mut self.gauges[wi];
                g.tls_version = session.version;
                g.tls_suite = session.suite;
                match Protocol::negotiated(&self.wl[wi], session.h2) {
                    Ok(proto) => self.conns[key].proto = proto,
                    Err(kind) => return self.fail(key, kind, now),
                }
                self.on_connected(key, now);
            }
            Err(kind) => self.fail(key, kind, now),
        }
    }

    /// The connection is established (and its handshake done): requests
    /// may flow.
    pub(super) fn on_connected(&mut self, key: usize, now: u64) {
        self.set_state(key, State::Open);
        let wi = self.conns[key].workload as usize;
        if self.outage != 0 {
            self.opened_in_outage(wi);
        }
        let c = &mut self.conns[key];
        let w = &self.wl[wi];
        let st = &mut self.local[wi];
        st.counters.opened += 1;
        c.since = now;
        c.proto.reset();
        self.gauges[wi].http_version = c.proto.version();
        c.proto.open(now + w.connect_timeout_ns);
        c.lifetime_end = w.max_lifetime_ns.map_or(u64::MAX, |l| now + jitter(&mut self.rng, l));
        c.reqs_left = match w.max_requests {
            None => u32::MAX,
            Some(_) if w.close => 1,
            Some(n) => jitter(&mut self.rng, n as u64).min(u32::MAX as u64) as u32,
        };
        // A connection of several lanes (HTTP/2's streams) with `-i` steps
        // by interval/lanes: on the grid with that step, the C × lanes
        // slots of the workload are due evenly spread, as C connections
        // are over HTTP/1.1.
        if let Some(iv) = c.proto.step(w) {
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
        // What the protocol says first (a preface, an upgrade) is owed even
        // when no request is: `serve` writes it, with the first requests.
        self.serve(key, now);
    }

    /// Closes an established connection. Requests still in flight cannot be
    /// answered any more: they count as failed with `eof`.
    pub(super) fn close(&mut self, key: usize, reason: CloseReason, now: u64) {
        self.proto_closed(key, now);
        // A QUIC connection says why it ends.
        self.quic_forget(key, reason == CloseReason::Error);
        let c = &mut self.conns[key];
        let wi = c.workload as usize;
        if let Some(mut s) = c.stream.take() {
            if reason != CloseReason::Error {
                s.close_notify();
            }
            if self.wl[wi].close_with_reset && matches!(reason, CloseReason::Churn | CloseReason::Shutdown) {
                s.linger_zero();
            }
            s.deregister(self.poll.registry());
        }
        let lost = c.proto.in_flight() as u64;
        c.proto.reset();
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
    pub(super) fn lose(&mut self, wi: usize, lost: u64) {
        self.inflight_total -= lost;
        self.gauges[wi].in_flight -= lost;
        if self.has_budget {
            self.budget_left += lost;
        }
    }

    /// After a graceful close: a new connection at once (no backoff, no ramp
    /// token), unless the run is stopping.
    pub(super) fn reconnect(&mut self, key: usize, now: u64) {
        if self.conns[key].retiring {
            self.remove_slot(key);
        } else if self.phase == PHASE_RUN {
            self.start_connect(key, now);
        }
    }

    /// A connection the server sent away (an HTTP/2 GOAWAY) with nothing
    /// left in flight: closed gracefully, and the slot reconnects through
    /// the ramp, so a fleet told to go at once does not reconnect at once.
    pub(super) fn sent_away(&mut self, key: usize, now: u64) {
        self.close(key, CloseReason::ServerClose, now);
        if self.conns[key].retiring {
            return self.remove_slot(key);
        }
        if self.phase == PHASE_RUN {
            self.set_state(key, State::Waiting);
            let wi = self.conns[key].workload as usize;
            self.ramp[wi].queue.push_back(key as u32);
        }
    }

    /// Lets go of slot `key`'s socket or QUIC connection, if any (a QUIC
    /// one says so, see `quic_forget`; `failed` picks its code).
    pub(super) fn drop_transport(&mut self, key: usize, failed: bool) {
        if let Some(mut s) = self.conns[key].stream.take() {
            s.deregister(self.poll.registry());
        }
        self.quic_forget(key, failed);
    }

    /// Takes a slot out of the worker for good.
    pub(super) fn remove_slot(&mut self, key: usize) {
        self.drop_transport(key, false);
        self.wheel.cancel(key as u32);
        self.set_state(key, State::Idle);
        let wi = self.conns[key].workload as usize;
        self.gauges[wi].desired -= 1;
        self.conns.remove(key);
        self.rehome_handed_back(key, wi);
    }

    /// Requests a server handed back to a slot that is now gone (a reload
    /// shrank `-c`) go to another slot of the same workload; with none
    /// left on this worker they stay what they are, sent and unanswered:
    /// counted in flight, shown at the end as in flight. Never left under a
    /// key a new slot (of any workload) could take over.
    fn rehome_handed_back(&mut self, key: usize, wi: usize) {
        if !self.handed_back.iter().any(|r| r.0 == key as u32) {
            return;
        }
        let heir = self
            .conns
            .iter()
            .find(|(_, c)| c.workload as usize == wi && !c.retiring)
            .map(|(k, _)| k as u32);
        match heir {
            Some(h) => self
                .handed_back
                .iter_mut()
                .filter(|r| r.0 == key as u32)
                .for_each(|r| r.0 = h),
            None => self.handed_back.retain(|r| r.0 != key as u32),
        }
    }

    /// Retires a slot: at once when it has nothing in flight, otherwise
    /// after its last response (see `reconnect`).
    pub(super) fn retire(&mut self, key: usize, now: u64) {
        let c = &mut self.conns[key];
        c.retiring = true;
        match c.state {
            State::Open if c.proto.in_flight() > 0 => c.draining = true,
            State::Open => {
                self.close(key, CloseReason::Churn, now);
                self.remove_slot(key);
            }
            _ => self.remove_slot(key),
        }
    }

    /// Records a failure of the slot's connection and backs off.
    pub(super) fn fail(&mut self, key: usize, kind: ErrorKind, now: u64) {
        let c = &mut self.conns[key];
        let wi = c.workload as usize;
        let was_open = c.state == State::Open;
        // The backoff starts over only after a connection that worked for a
        // while. Resetting it on any response would let a server that answers
        // once and then breaks the connection pull 10 reconnects a second
        // from every slot.
        let healthy = was_open && c.answered && now.saturating_sub(c.since) >= HEALTHY_NS;
        let lost = c.proto.in_flight() as u64;
        if was_open {
            // Counted here, not again by `close`; the protocol's last
            // figures (a closing handshake, a silence) before the reset
            // wipes them.
            self.proto_closed(key, now);
            self.conns[key].proto.reset();
            self.close(key, CloseReason::Error, now);
        } else {
            self.drop_transport(key, true);
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
        if self.outage != 0 && !was_open {
            self.failed_in_outage(wi);
        }
        self.back_off(key, healthy, now);
    }

    /// Waits out the slot's next backoff step (100 ms doubling to 10 s, half
    /// jittered) before it reconnects; `reset` starts over at 100 ms. A
    /// probe slot in an outage waits a probe's wait instead (`probe.rs`).
    pub(super) fn back_off(&mut self, key: usize, reset: bool, now: u64) {
        let probing = self.outage != 0 && self.probing(key);
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
        let wait_ms = probe::retry_ms(c.backoff_ms, probing);
        let delay_ns = (wait_ms as f64 * (0.5 + 0.5 * self.rng.f64()) * 1e6) as u64;
        self.set_state(key, State::Backoff);
        self.wheel.schedule(key as u32, tick_ceil(now + delay_ns));
    }

    pub(super) fn expire_timers(&mut self, now: u64) {
        let mut fired = std::mem::take(&mut self.fired);
        self.wheel.poll(now / TICK_NS, &mut fired);
        for &id in &fired {
            self.on_timer(id as usize, now);
        }
        fired.clear();
        self.fired = fired;
    }

    pub(super) fn on_timer(&mut self, key: usize, now: u64) {
        let Some(c) = self.conns.get_mut(key) else { return };
        let w = &self.wl[c.workload as usize];
        match c.state {
            State::Backoff => {
                self.set_state(key, State::Waiting);
                let wi = self.conns[key].workload as usize;
                self.ramp[wi].queue.push_back(key as u32);
            }
            State::Handshaking if w.proto.is_quic() => {
                // QUIC's handshake is transport and TLS in one: no answer
                // within the connect timeout is `connect_timeout`.
                if now >= c.since + w.connect_timeout_ns {
                    self.fail(key, ErrorKind::ConnectTimeout, now);
                } else {
                    self.quic_timeout(key, now);
                }
            }
            State::Connecting | State::Handshaking => {
                if now >= c.since + w.connect_timeout_ns {
                    // A handshake has its own deadline (the connect
                    // timeout again, from the TCP connect) and its own kind.
                    let kind = if c.state == State::Handshaking {
                        ErrorKind::TlsHandshake
                    } else {
                        ErrorKind::ConnectTimeout
                    };
                    self.fail(key, kind, now);
                } else {
                    self.wheel
                        .schedule(key as u32, tick_ceil(c.since + w.connect_timeout_ns));
                }
            }
            State::Open => {
                if let Protocol::H3(h) = &mut c.proto
                    && h.deadline().is_some_and(|d| now >= d)
                {
                    h.keepalive(now);
                    if !self.quic_timeout(key, now) {
                        return;
                    }
                } else if c.proto.deadline().is_some_and(|d| now >= d) {
                    // Bytes it made owed (a ping) go out with the requests
                    // due, in the one write of `serve` below.
                    match self.with_proto(key, now, |p, _, t| p.on_time(t)) {
                        Output::Taken | Output::Ready => {}
                        out => {
                            if !self.settle(key, out, now) {
                                return;
                            }
                        }
                    }
                }
                let timeout = self.wl[self.conns[key].workload as usize].request_timeout_ns;
                let mut cancelled = false;
                while let Some(entry) = self.conns[key].proto.oldest() {
                    let written = self.inflight[key * self.max_pipeline + entry as usize].written;
                    if now < written + timeout {
                        break;
                    }
                    match self.conns[key].proto.cancel(entry, written) {
                        // One request failed alone; the connection stays.
                        Some(out) => {
                            self.settle(key, out, now);
                            cancelled = true;
                        }
                        None => return self.fail(key, ErrorKind::Timeout, now),
                    }
                }
                let c = &mut self.conns[key];
                // A connection waiting for its last answers to churn (as a
                // response would end it, see `on_response`).
                if cancelled && (c.reqs_left == 0 || c.draining) && c.proto.in_flight() == 0 {
                    self.close(key, CloseReason::Churn, now);
                    return self.reconnect(key, now);
                }
                let c = &mut self.conns[key];
                if now >= c.lifetime_end && !c.draining {
                    c.draining = true;
                    if c.proto.in_flight() == 0 {
                        self.close(key, CloseReason::Churn, now);
                        return self.reconnect(key, now);
                    }
                }
                self.serve(key, now);
            }
            State::Waiting | State::Idle => {}
        }
    }

    pub(super) fn run_ramp(&mut self, now: u64) {
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

    /// Before a connection closes at `now` (before its protocol state is
    /// reset): the protocol records its last figures, and a closing
    /// handshake the drain waited for is over. Called again after the reset
    /// it does nothing.
    pub(super) fn proto_closed(&mut self, key: usize, now: u64) {
        if self.with_proto(key, now, |p, _, t| p.closed(t)) {
            self.closing -= 1;
        }
    }

    /// The run is stopping: every open connection whose protocol has a
    /// closing handshake (a WebSocket close 1000) starts it, and the drain
    /// waits for the answers at most [`defaults::WS_CLOSE_WAIT`].
    pub(super) fn start_closing(&mut self, now: u64) {
        let deadline = now + defaults::WS_CLOSE_WAIT.as_nanos() as u64;
        let keys: Vec<usize> = self
            .conns
            .iter()
            .filter(|(_, c)| c.state == State::Open)
            .map(|(k, _)| k)
            .collect();
        for key in keys {
            if self.conns[key].proto.start_close(now, deadline) {
                self.closing += 1;
                self.serve(key, now);
            }
        }
    }

    /// Once per [`WALK_INTERVAL`]: each open connection's figure of the
    /// interval (see `ProtoRt::walks`: WebSocket subscribe silences). A
    /// walk over the slots, because a silence still running has no event
    /// of its own; only a worker with such a workload walks, once a second
    /// (15,000 sockets in about 0.5 ms, ~32 ns each on the shared VM:
    /// 0.05% of a core; `ws.rs`'s walk test).
    pub(super) fn walk(&mut self, now: u64) {
        self.next_walk = now - now % WALK_INTERVAL + WALK_INTERVAL;
        if !self.wl.iter().any(|w| w.proto.walks()) {
            return;
        }
        for (_, c) in self.conns.iter_mut() {
            if c.state != State::Open {
                continue;
            }
            let wi = c.workload as usize;
            c.proto.walk(&mut Tally {
                st: &mut self.local[wi],
                g: &mut self.gauges[wi],
                now,
            });
        }
    }
}
