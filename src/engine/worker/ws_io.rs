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
use super::{HEALTHY_NS, PHASE_RUN, Worker};
use crate::plan::defaults;
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
                if let Some(gap) = c.proto.ws_mut().and_then(|w| w.note_push(now)) {
                    stats::record_ns(&mut st.silence, gap);
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
            if w.start_close(deadline) {
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

    /// Before a connection closes: one fewer closing handshake to wait for.
    pub(super) fn ws_closed(&mut self, key: usize) {
        if self.conns[key].proto.ws_mut().is_some_and(|w| w.is_closing()) {
            self.ws_closing -= 1;
        }
    }
}
