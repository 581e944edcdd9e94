//! The loop's side of a WebSocket connection: what it counts and does for
//! each [`WsNote`] the protocol (`ws.rs`) answers, the connection's own
//! timer (handshake deadline, pings, the close wait), the closing
//! handshake at the stop, and what a TCP close means. Kept apart from
//! `io.rs` so the hot path of HTTP stays as it was: it reaches here only
//! through a WebSocket's outputs.

use std::io;

use super::conn::State;
use super::exchange::WsNote;
use super::ws::Timed;
use super::{HEALTHY_NS, PHASE_RUN, SILENCE_INTERVAL, Worker};
use crate::plan::{WsMode, defaults};
use crate::stats::{self, CloseReason, ErrorKind};
use crate::wire::ws::CloseName;

impl Worker {
    /// Acts on what a WebSocket connection saw. Returns false when the
    /// connection is gone afterwards.
    pub(super) fn on_ws(&mut self, key: usize, note: WsNote, now: u64) -> bool {
        let c = &mut self.conns[key];
        let wi = c.workload as usize;
        let st = &mut self.local[wi].ws;
        match note {
            WsNote::Upgraded => {
                st.upgrades += 1;
                c.answered = true;
                let Some(w) = c.proto.ws_mut() else { return true };
                w.upgraded(now);
                if w.has_output() {
                    // The subscription goes out now.
                    st.sent += 1;
                }
                if !self.pump(key, now) {
                    return false;
                }
                self.write_owed(key)
            }
            WsNote::Refused(status) => {
                self.local[wi].counters.response(status);
                crate::netio::log_once("ws-status", || {
                    format!("WebSocket upgrade refused: the server answered {status}, not 101")
                });
                self.fail(key, ErrorKind::WsHandshake, now);
                false
            }
            WsNote::Pushed => {
                st.received += 1;
                if let Some(w) = c.proto.ws_mut() {
                    w.note_push(now);
                }
                true
            }
            WsNote::Pong(sent_at) => {
                st.pongs += 1;
                if sent_at <= now {
                    stats::record_ns(&mut st.ping_rtt, now - sent_at);
                }
                true
            }
            WsNote::Pinged => {
                st.server_pings += 1;
                self.write_owed(key)
            }
            WsNote::Closed(code) => {
                if c.proto.ws_mut().is_some_and(|w| w.is_closing()) {
                    // The answer to our own close (the stop): not the
                    // server's doing, not counted.
                    self.close(key, CloseReason::Shutdown, now);
                    return false;
                }
                st.closes[CloseName::of(code) as usize] += 1;
                // Our answer (the echo) goes out before the socket closes.
                self.flush_best_effort(key);
                let c = &mut self.conns[key];
                if self.phase != PHASE_RUN {
                    self.close(key, CloseReason::Shutdown, now);
                    return false;
                }
                let normal = matches!(code, Some(1000 | 1001));
                if !normal || c.proto.in_flight() > 0 {
                    self.fail(key, ErrorKind::WsClosed, now);
                    return false;
                }
                // A normal close: the slot reconnects through the backoff
                // and a ramp token, so a server shedding sockets is not
                // hit by a reconnect storm.
                let healthy = now.saturating_sub(c.since) >= HEALTHY_NS;
                self.close(key, CloseReason::ServerClose, now);
                if self.conns[key].retiring {
                    self.remove_slot(key);
                } else {
                    self.back_off(key, healthy, now);
                }
                false
            }
        }
    }

    /// Writes what the connection owes, then re-arms its timer. Returns
    /// false when the connection failed.
    fn write_owed(&mut self, key: usize) -> bool {
        if self.conns[key].proto.has_output() && !self.write_out(key) {
            return false;
        }
        self.arm(key);
        true
    }

    /// One attempt to write what is owed (a close frame) on a connection
    /// about to end; whatever happens, the caller closes it.
    pub(super) fn flush_best_effort(&mut self, key: usize) {
        let c = &mut self.conns[key];
        let base = key * self.max_pipeline;
        let cx = super::exchange::Cx {
            w: &self.wl[c.workload as usize],
            entries: &self.inflight[base..base + self.max_pipeline],
        };
        let Some(stream) = c.stream.as_mut() else { return };
        for _ in 0..4 {
            let bytes = c.proto.to_send(&cx);
            if bytes.is_empty() {
                break;
            }
            match stream.write(bytes) {
                Ok(n) if n > 0 => c.proto.sent(&cx, n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                _ => break,
            }
        }
        let _ = stream.flush();
    }

    /// The connection's own timer may be due. Returns false when the
    /// connection is gone afterwards.
    pub(super) fn ws_on_time(&mut self, key: usize, now: u64) -> bool {
        let c = &mut self.conns[key];
        let wi = c.workload as usize;
        let Some(w) = c.proto.ws_mut() else { return true };
        match w.on_time(now) {
            Timed::Nothing => true,
            Timed::Pinged => {
                self.local[wi].ws.pings += 1;
                self.write_owed(key)
            }
            Timed::HandshakeTimeout => {
                self.fail(key, ErrorKind::WsHandshake, now);
                false
            }
            Timed::CloseWaitOver => {
                self.close(key, CloseReason::Shutdown, now);
                false
            }
            Timed::PingTimeout => {
                crate::netio::log_once("ws-ping-timeout", || {
                    "WebSocket ping unanswered within --ws-ping-timeout: the socket is closed (1011) and reconnects"
                        .to_string()
                });
                // The close 1011 goes out once, best effort; the slot backs
                // off and takes a ramp token like after any error.
                self.flush_best_effort(key);
                self.fail(key, ErrorKind::WsPingTimeout, now);
                false
            }
        }
    }

    /// The run is stopping: every open WebSocket starts the closing
    /// handshake (code 1000) and waits for the server's close at most
    /// [`defaults::WS_CLOSE_WAIT`].
    pub(super) fn ws_drain(&mut self, now: u64) {
        if self.wl.iter().all(|w| w.ws.is_none()) {
            return;
        }
        let keys: Vec<usize> = self
            .conns
            .iter()
            .filter(|(_, c)| c.state == State::Open)
            .map(|(k, _)| k)
            .collect();
        let deadline = now + defaults::WS_CLOSE_WAIT.as_nanos() as u64;
        for key in keys {
            let Some(w) = self.conns[key].proto.ws_mut() else {
                continue;
            };
            if w.start_close(now, deadline) {
                self.ws_closing += 1;
                self.write_owed(key);
            }
        }
    }

    /// The peer closed TCP. For a WebSocket that had not seen a close frame
    /// that is an abnormal closure (1006): counted by code, and an error
    /// (`ws_handshake` before the upgrade was done, else `ws_closed`).
    /// Returns false when this is not a WebSocket (the HTTP handling goes
    /// on).
    pub(super) fn ws_eof(&mut self, key: usize, now: u64) -> bool {
        let c = &mut self.conns[key];
        let wi = c.workload as usize;
        let Some(w) = c.proto.ws_mut() else { return false };
        if w.is_closing() {
            self.close(key, CloseReason::Shutdown, now);
            return true;
        }
        let kind = if w.is_upgrading() {
            ErrorKind::WsHandshake
        } else {
            self.local[wi].ws.closes[CloseName::Abnormal as usize] += 1;
            ErrorKind::WsClosed
        };
        self.fail(key, kind, now);
        true
    }

    /// Once per [`SILENCE_INTERVAL`]: each subscribe socket's longest
    /// silence of the interval into its workload's histogram (see
    /// `Ws::interval_silence`). A walk over the slots, because a silence
    /// still running has no event of its own; only worker threads with a
    /// subscribe workload walk, once a second (measured by the unit test below:
    /// 15,000 slots in about 0.5 ms, ~32 ns each, on the shared VM: 0.05% of a core).
    pub(super) fn silence_scan(&mut self, now: u64) {
        self.next_silence = now - now % SILENCE_INTERVAL + SILENCE_INTERVAL;
        if !self
            .wl
            .iter()
            .any(|w| w.ws.as_ref().is_some_and(|p| p.mode == WsMode::Subscribe))
        {
            return;
        }
        record_silences(&mut self.conns, &mut self.local, now);
    }

    /// Before a connection closes at `now` (before its protocol state is
    /// reset): one fewer closing handshake to wait for, and a subscribe
    /// socket's silence of its last, partial interval into its
    /// workload's histogram (see `Ws::closing_silence`). Called again
    /// after the reset it does nothing.
    pub(super) fn ws_closed(&mut self, key: usize, now: u64) {
        let c = &mut self.conns[key];
        let Some(w) = c.proto.ws_mut() else { return };
        if w.is_closing() {
            self.ws_closing -= 1;
        }
        if let Some(v) = w.closing_silence(now) {
            stats::record_ns(&mut self.local[c.workload as usize].ws.silence, v);
        }
    }
}

/// The walk of [`Worker::silence_scan`]: each open subscribe socket's
/// silence of the interval into its workload's histogram. Returns how many
/// were recorded.
fn record_silences(conns: &mut slab::Slab<super::conn::Conn>, local: &mut [stats::WorkloadStats], now: u64) -> usize {
    let mut n = 0;
    for (_, c) in conns.iter_mut() {
        if c.state != State::Open {
            continue;
        }
        if let Some(v) = c.proto.ws_mut().and_then(|w| w.interval_silence(now)) {
            stats::record_ns(&mut local[c.workload as usize].ws.silence, v);
            n += 1;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::super::WorkloadRt;
    use super::super::conn::Conn;
    use super::*;

    /// The once-a-second walk over 15,000 subscribe sockets (the bench's
    /// hold count): each gets one sample, the running silence, and the
    /// walk's cost is printed (about 32 ns per slot here; timing is not
    /// asserted on a shared machine).
    #[test]
    fn a_silence_walk_records_each_subscribe_socket_once() {
        let text = "[[workload]]\nurl = \"ws://127.0.0.1:1/push\"\nconnections = 15000\nws_subscribe = \"go\"\n";
        let plan = crate::config::parse(std::path::Path::new("t.toml"), text, Default::default()).unwrap();
        let rt = WorkloadRt::of(&plan.workloads[0]);
        let mut conns = slab::Slab::new();
        for i in 0..15_000u32 {
            let mut c = Conn::new(0, i, &rt);
            c.state = State::Open;
            let w = c.proto.ws_mut().unwrap();
            w.upgraded(1_000_000_000);
            // Half the sockets had a push 0.5 s in, after a 0.5 s silence.
            if i % 2 == 0 {
                w.note_push(1_500_000_000);
            }
            conns.insert(c);
        }
        let mut local = vec![stats::WorkloadStats::default()];
        let start = std::time::Instant::now();
        let n = record_silences(&mut conns, &mut local, 3_000_000_000);
        let took = start.elapsed();
        eprintln!(
            "silence walk over 15,000 subscribe sockets: {took:?} ({:.1} ns per socket)",
            took.as_nanos() as f64 / 15_000.0
        );
        assert_eq!(n, 15_000);
        let h = &local[0].ws.silence;
        assert_eq!(h.len(), 15_000);
        // Running silences: 2 s since the upgrade, 1.5 s since the push.
        assert_eq!(h.count_between(1_490_000, 1_510_000), 7_500);
        assert_eq!(h.count_between(1_990_000, 2_010_000), 7_500);
        // A new interval: the push's 0.5 s gap is gone, the silence runs on.
        let n = record_silences(&mut conns, &mut local, 4_000_000_000);
        assert_eq!(n, 15_000);
        assert_eq!(local[0].ws.silence.count_between(2_490_000, 2_510_000), 7_500);
    }
}
