//! WebSocket behind the protocol seam: the upgrade, then messages, pings
//! and the closing handshake, driven sans I/O over [`crate::wire::ws`].
//!
//! The connection is open for the loop once TCP (and TLS) is up; the
//! upgrade is this protocol's first state, with the connect timeout as its
//! deadline ([`Ws::deadline`]). In request mode a message is a request: it
//! takes an in-flight entry (a FIFO ring, as HTTP/1.1's) when due, and the
//! next data message received completes the oldest entry as a
//! [`Response`], so latency from the due time, timeouts, budgets and churn
//! are the loop's as for HTTP. What only WebSocket counts (upgrades,
//! messages, pings and pongs, close codes, silences) it counts itself into
//! the workload's WebSocket stats through the [`Tally`]; what the loop must
//! act on comes back as a generic [`Output`]: [`Output::Opened`] once
//! upgraded, [`Output::Ready`] when a pong or ping is owed, an
//! [`Ending`] or an error when the socket ends.
//!
//! **Nothing is kept per socket while idle.** Bytes owed (the upgrade, a
//! masked message, a pong, a close) and bytes carried between reads (a
//! split handshake answer, frame head or control frame) live in buffers
//! borrowed from the thread's pool (`netio::pool`) while they are needed
//! and given back when drained: an idle held socket keeps only this state,
//! and a busy worker reuses the same few buffers, so nothing is allocated
//! per message.
//!
//! **What a peer that does not read can make soakd hold is bounded.** A
//! server ping is answered with a pong, but while earlier bytes are still
//! owed (the peer is not reading them) only the latest ping's pong is kept
//! (RFC 6455 §5.5.3 allows answering only the most recent), so a ping
//! flood costs one pong, not one per ping. A message due while more than
//! [`MAX_OWED`] bytes are owed is not queued: it is refused
//! (`send_stalled`, counted missed) and the socket's ping timeout or the
//! request timeout then ends a peer that stopped reading for good.

use std::sync::Arc;

use super::exchange::{AtClose, Cx, Ending, Inflight, Issued, Output, Response, Tally};
use crate::netio::pool;
use crate::plan::{WsMode, WsPlan};
use crate::stats::{self, CheckKind, ErrorKind};
use crate::wire::ws::{self, CloseName, Decoder, Event, HandshakeError, MAX_CONTROL_PAYLOAD, MAX_HEAD, Opcode, Role};

/// Bytes owed to the server past which a new message is refused: a
/// server that stops reading costs at most this (and one message) per
/// socket.
pub(super) const MAX_OWED: usize = 64 * 1024;

/// Where the connection is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// No connection yet.
    Idle,
    /// The upgrade request is out; waiting for the 101.
    Upgrading,
    /// Messages flow.
    Open,
    /// We sent a close; waiting for the server's.
    Closing,
    /// The server closed (its close frame arrived).
    Closed,
}

/// One connection's WebSocket state.
#[derive(Debug)]
pub(super) struct Ws {
    plan: Arc<WsPlan>,
    decoder: Decoder,
    /// Bytes owed to the server (whole frames, queued in order), from the
    /// pool; during the upgrade, the request (its key is read back from it
    /// to check the answer).
    out: Option<pool::Buf>,
    /// The pong for the latest server ping, kept aside while other bytes
    /// are owed (a newer ping replaces it); joins `out` when it drains.
    pong: Option<pool::Buf>,
    /// An incomplete handshake answer, frame head or control frame.
    carry: Option<pool::Buf>,
    /// Bytes of `out` already written.
    out_off: u32,
    /// Request messages in flight; the oldest is at `head`.
    inflight: u16,
    head: u16,
    phase: Phase,
    /// The current reply has the expected text (request mode).
    found: bool,
    /// How much of the expected text the reply's last bytes match.
    matched: u16,
    /// Upgrading: its deadline; open: the next ping; closing: the end of
    /// the wait (ns; `u64::MAX`: none).
    timer: u64,
    /// Subscribe mode: when the last push (or the upgrade) was, ns.
    last_push: u64,
    /// Subscribe mode: the longest silence that ended in the current
    /// interval, ns (see [`Ws::walk`]).
    silence_max: u64,
    /// When the oldest ping still unanswered must have its pong (ns;
    /// `u64::MAX`: none outstanding, or no timeout).
    pong_due: u64,
    /// When the latest ping was sent (ns): a pong carrying this time
    /// answers every ping outstanding.
    ping_newest: u64,
    /// We started the closing handshake (the run is stopping).
    we_closed: bool,
}

impl Ws {
    pub(super) fn new(plan: &Arc<WsPlan>) -> Ws {
        Ws {
            plan: plan.clone(),
            decoder: Decoder::new(Role::Client, plan.max_message as u64),
            out: None,
            pong: None,
            carry: None,
            out_off: 0,
            inflight: 0,
            head: 0,
            phase: Phase::Idle,
            found: false,
            matched: 0,
            timer: u64::MAX,
            last_push: 0,
            silence_max: 0,
            pong_due: u64::MAX,
            ping_newest: 0,
            we_closed: false,
        }
    }

    pub(super) fn reset(&mut self) {
        pool::release(&mut self.out);
        pool::release(&mut self.pong);
        pool::release(&mut self.carry);
        self.decoder.reset();
        self.out_off = 0;
        self.inflight = 0;
        self.head = 0;
        self.phase = Phase::Idle;
        self.found = false;
        self.matched = 0;
        self.timer = u64::MAX;
        self.last_push = 0;
        self.silence_max = 0;
        self.pong_due = u64::MAX;
        self.ping_newest = 0;
        self.we_closed = false;
    }

    /// The connection is up: the upgrade request is owed, with a fresh key,
    /// and must be answered by `deadline`.
    pub(super) fn open(&mut self, deadline: u64) {
        let key = ws::new_key(&mut fastrand::Rng::with_seed(fastrand::u64(..)));
        let out = pool::get(&mut self.out);
        out.extend_from_slice(self.plan.upgrade.prefix());
        out.extend_from_slice(&key);
        out.extend_from_slice(ws::Upgrade::SUFFIX);
        self.phase = Phase::Upgrading;
        self.timer = deadline;
    }

    /// Messages that may be in flight now: the pipeline once upgraded in
    /// request mode, else none.
    #[inline]
    pub(super) fn capacity(&self, pipeline: u16) -> u16 {
        if self.phase == Phase::Open && self.plan.mode == WsMode::Request {
            pipeline
        } else {
            0
        }
    }

    /// The time the connection's own timer is due (ns), if any: the
    /// earlier of its phase's timer and the pong owed.
    #[inline]
    pub(super) fn deadline(&self) -> Option<u64> {
        let t = self.timer.min(self.pong_due);
        (t != u64::MAX).then_some(t)
    }

    #[inline]
    pub(super) fn in_flight(&self) -> u16 {
        self.inflight
    }

    #[inline]
    pub(super) fn oldest(&self) -> Option<u16> {
        (self.inflight > 0).then_some(self.head)
    }

    /// Bytes owed and not yet written.
    fn owed(&self) -> usize {
        self.out.as_ref().map_or(0, |o| o.len() - self.out_off as usize)
    }

    /// Queues a frame (masked with a fresh key from the system's
    /// generator, see `ws::mask_key`) after what is owed.
    fn queue(&mut self, op: Opcode, payload: &[u8]) {
        put_frame(pool::get(&mut self.out), op, payload);
    }

    /// Queues the workload's message (a request, or the subscription).
    fn queue_message(&mut self) {
        let op = if self.plan.binary { Opcode::Binary } else { Opcode::Text };
        let plan = self.plan.clone();
        self.queue(op, &plan.message);
    }

    /// A message is due: it takes an entry (request mode with replies) or
    /// goes out untimed (`--ws-reply none`: nothing times it out), unless
    /// the server has stopped reading what it is owed.
    #[inline]
    pub(super) fn issue(&mut self, t: &mut Tally<'_>, depth: usize) -> Issued {
        if self.owed() > MAX_OWED {
            return Issued::Refused(ErrorKind::SendStalled);
        }
        self.queue_message();
        t.st.ws.sent += 1;
        if !self.plan.reply {
            return Issued::Untimed;
        }
        let at = self.head as usize + self.inflight as usize;
        let at = if at >= depth { at - depth } else { at };
        self.inflight += 1;
        Issued::Entry(at as u16)
    }

    /// The upgrade is done: subscribe, schedule the first ping (at a random
    /// point of the first interval, so a crowd of sockets opened together
    /// does not ping in step).
    fn upgraded(&mut self, t: &mut Tally<'_>) {
        self.phase = Phase::Open;
        self.timer = match self.plan.ping {
            Some(p) => t.now + (p.as_nanos() as u64).saturating_mul(fastrand::u64(50..=100)) / 100,
            None => u64::MAX,
        };
        self.last_push = t.now;
        t.st.ws.upgrades += 1;
        if self.plan.mode == WsMode::Subscribe {
            self.queue_message();
            t.st.ws.sent += 1;
        }
    }

    /// Starts the closing handshake (code 1000) at `now` with a wait until
    /// `deadline`; false when the connection is not open.
    pub(super) fn start_close(&mut self, now: u64, deadline: u64) -> bool {
        if self.phase != Phase::Open {
            return false;
        }
        // Subscribe mode: the silence ends with the stream, at our close,
        // not when the server gets round to answering it (a server owes
        // no data after a close, and may take the whole wait to answer).
        self.silence_max = self.silence_max.max(now.saturating_sub(self.last_push));
        self.queue_close(Some(1000));
        self.phase = Phase::Closing;
        self.we_closed = true;
        self.timer = deadline;
        true
    }

    fn queue_close(&mut self, code: Option<u16>) {
        let mut p = [0u8; MAX_CONTROL_PAYLOAD];
        let n = match code {
            Some(c) => ws::close_payload(&mut p, c, ""),
            None => 0,
        };
        self.queue(Opcode::Close, &p[..n]);
    }

    /// The connection's timer fired: a ping owed, the upgrade or a pong
    /// late (errors), or our closing handshake's wait over.
    pub(super) fn on_time(&mut self, t: &mut Tally<'_>) -> Output {
        let now = t.now;
        if now >= self.pong_due && self.phase == Phase::Open {
            // _Fail the WebSocket Connection_ (RFC 6455 7.1.7): our close
            // says why, and the TCP connection ends without waiting for
            // an answer a server that drops pings would not send either.
            self.pong_due = u64::MAX;
            self.queue_close(Some(1011));
            crate::netio::log_once("ws-ping-timeout", || {
                "WebSocket ping unanswered within --ws-ping-timeout: the socket is closed (1011) and reconnects"
                    .to_string()
            });
            return Output::Error(ErrorKind::WsPingTimeout);
        }
        if now < self.timer {
            return Output::Taken;
        }
        match self.phase {
            Phase::Upgrading => Output::Error(ErrorKind::WsHandshake),
            Phase::Closing => Output::End(Ending::Stopped),
            Phase::Open => {
                let Some(every) = self.plan.ping else {
                    self.timer = u64::MAX;
                    return Output::Taken;
                };
                // The payload is the send time: the pong brings it back, so
                // no ping needs remembering.
                self.queue(Opcode::Ping, &now.to_be_bytes());
                t.st.ws.pings += 1;
                self.ping_newest = now;
                if self.pong_due == u64::MAX
                    && let Some(timeout) = self.plan.ping_timeout
                {
                    self.pong_due = now + timeout.as_nanos() as u64;
                }
                let every = every.as_nanos() as u64;
                self.timer = if self.timer + every > now {
                    self.timer + every
                } else {
                    now + every
                };
                Output::Ready
            }
            Phase::Idle | Phase::Closed => {
                self.timer = u64::MAX;
                Output::Taken
            }
        }
    }

    /// Subscribe mode: a push arrived at `now`; the silence it ended
    /// (since the previous push, or the upgrade) joins the interval's
    /// longest. O(1): nothing is recorded per message.
    #[inline]
    fn note_push(&mut self, now: u64) {
        // After our close the stream is over (see `start_close`).
        if self.plan.mode != WsMode::Subscribe || self.we_closed {
            return;
        }
        let gap = now.saturating_sub(self.last_push);
        self.silence_max = self.silence_max.max(gap);
        self.last_push = now;
    }

    /// The once-an-interval walk (subscribe mode): this socket's longest
    /// silence of the interval that ends at `t.now` into the histogram —
    /// the longest that a push ended, or the one still running (since the
    /// last push, however long ago), whichever is longer; then a new
    /// interval begins. A socket that went silent shows a growing silence
    /// each interval, though no message ends it.
    pub(super) fn walk(&mut self, t: &mut Tally<'_>) {
        if let Some(v) = self.interval_silence(t.now) {
            stats::record_ns(&mut t.st.ws.silence, v);
        }
    }

    /// The silence [`Ws::walk`] records; `None` when not an upgraded
    /// subscribe socket.
    fn interval_silence(&mut self, now: u64) -> Option<u64> {
        if self.plan.mode != WsMode::Subscribe || self.phase != Phase::Open {
            return None;
        }
        let v = self.silence_max.max(now.saturating_sub(self.last_push));
        self.silence_max = 0;
        Some(v)
    }

    /// The socket closes at `t.now` for whatever reason (the server's
    /// close, an error, churn, the stop): in subscribe mode the sample of
    /// its last, partial interval, which no walk will take — the longest
    /// silence a push ended since the last walk, or the one the close ends
    /// (up to our own close frame at the stop), whichever is longer.
    /// Without it a stream that went quiet and then closed would lose the
    /// very silence that came before the close. True when our closing
    /// handshake was under way. Once [`Ws::reset`] ran it does nothing.
    pub(super) fn closed(&mut self, t: &mut Tally<'_>) -> bool {
        if let Some(v) = self.closing_silence(t.now) {
            stats::record_ns(&mut t.st.ws.silence, v);
        }
        self.we_closed
    }

    /// The silence [`Ws::closed`] records; `None` when not an upgraded
    /// subscribe socket (or once reset).
    fn closing_silence(&mut self, now: u64) -> Option<u64> {
        if self.plan.mode != WsMode::Subscribe || !matches!(self.phase, Phase::Open | Phase::Closing | Phase::Closed) {
            return None;
        }
        let running = if self.we_closed {
            0
        } else {
            now.saturating_sub(self.last_push)
        };
        let v = self.silence_max.max(running);
        self.silence_max = 0;
        Some(v)
    }

    #[inline]
    pub(super) fn has_output(&self) -> bool {
        self.owed() > 0
    }

    #[inline]
    pub(super) fn outgoing(&self) -> &[u8] {
        match &self.out {
            Some(o) => &o[self.out_off as usize..],
            None => &[],
        }
    }

    #[inline]
    pub(super) fn sent(&mut self, n: usize) {
        self.out_off += n as u32;
        // Drained: the buffer goes back, except during the upgrade, when it
        // still holds the key the answer is checked against; a pong kept
        // aside takes its place.
        if self.owed() == 0 && self.phase != Phase::Upgrading {
            self.out_off = 0;
            pool::release(&mut self.out);
            self.out = self.pong.take();
        }
    }

    /// A server ping: its pong is owed. When nothing else is owed it goes
    /// out at once; otherwise it waits aside, replaced by any newer ping's.
    fn pinged(&mut self, t: &mut Tally<'_>, payload: &[u8]) -> Output {
        t.st.ws.server_pings += 1;
        if self.phase != Phase::Open {
            return Output::Taken;
        }
        if self.owed() == 0 {
            self.queue(Opcode::Pong, payload);
            return Output::Ready;
        }
        let pong = pool::get(&mut self.pong);
        pong.clear();
        put_frame(pong, Opcode::Pong, payload);
        Output::Taken
    }

    pub(super) fn receive(&mut self, cx: &Cx<'_>, t: &mut Tally<'_>, fresh: &[u8]) -> (usize, Output) {
        if self.phase == Phase::Upgrading {
            return self.receive_upgrade(t, fresh);
        }
        let Some(mut carried) = self.carry.take() else {
            let (used, out) = self.frames(cx, t, fresh);
            if out == Output::Taken && used < fresh.len() {
                // An incomplete frame head or control frame (at most
                // MAX_CONTROL_FRAME bytes): the one thing ever carried.
                pool::get(&mut self.carry).extend_from_slice(&fresh[used..]);
                return (fresh.len(), Output::Taken);
            }
            return (used, out);
        };
        // Complete the carried frame with exactly the bytes it lacks, then
        // decode it alone; the rest is decoded straight from `fresh`.
        let mut taken = 0;
        loop {
            let need = frame_needs(&carried);
            if carried.len() >= need {
                break;
            }
            let take = (need - carried.len()).min(fresh.len() - taken);
            if take == 0 {
                self.carry = Some(carried);
                return (taken, Output::Taken);
            }
            carried.extend_from_slice(&fresh[taken..taken + take]);
            taken += take;
        }
        let (used, out) = self.frames(cx, t, &carried);
        debug_assert!(out != Output::Taken || used == carried.len());
        pool::give(carried);
        if out == Output::Taken && taken < fresh.len() {
            // "Taken" promises every byte: go on with the rest of the read.
            let (more, out) = self.receive(cx, t, &fresh[taken..]);
            return (taken + more, out);
        }
        (taken, out)
    }

    /// The upgrade's answer (possibly split across reads).
    fn receive_upgrade(&mut self, t: &mut Tally<'_>, fresh: &[u8]) -> (usize, Output) {
        let carried_len = self.carry.as_ref().map_or(0, |c| c.len());
        let (res, buf_len) = match self.carry.take() {
            Some(mut c) => {
                c.extend_from_slice(fresh);
                let r = (self.check_answer(&c), c.len());
                self.carry = Some(c);
                r
            }
            None => (self.check_answer(fresh), fresh.len()),
        };
        match res {
            Ok(None) => {
                if self.carry.is_none() {
                    pool::get(&mut self.carry).extend_from_slice(fresh);
                }
                (fresh.len(), Output::Taken)
            }
            Ok(Some(head_len)) => {
                // Frames may follow the head: give them back.
                let rest = buf_len - head_len;
                let used = fresh.len() - rest;
                debug_assert!(head_len >= carried_len);
                pool::release(&mut self.carry);
                pool::release(&mut self.out);
                self.out_off = 0;
                self.upgraded(t);
                (used, Output::Opened)
            }
            Err(HandshakeError::Status(code)) => {
                t.st.counters.response(code);
                crate::netio::log_once("ws-status", || {
                    format!("WebSocket upgrade refused: the server answered {code}, not 101")
                });
                (fresh.len(), Output::Error(ErrorKind::WsHandshake))
            }
            Err(e) => {
                crate::netio::log_once(handshake_reason(e), || format!("WebSocket upgrade refused: {e}"));
                (fresh.len(), Output::Error(ErrorKind::WsHandshake))
            }
        }
    }

    /// Checks the handshake answer against the key sent.
    fn check_answer(&self, buf: &[u8]) -> Result<Option<usize>, HandshakeError> {
        let out = self.out.as_ref().expect("the upgrade request is kept until answered");
        let at = self.plan.upgrade.prefix().len();
        let accept = ws::accept_key(&out[at..at + ws::KEY_LEN]);
        ws::check_response(buf, &accept, self.plan.subprotocol.as_deref())
    }

    /// Decodes frames from `data` until something for the loop.
    fn frames(&mut self, cx: &Cx<'_>, t: &mut Tally<'_>, data: &[u8]) -> (usize, Output) {
        let mut pos = 0;
        loop {
            let (used, ev) = match self.decoder.decode(&data[pos..]) {
                Ok(x) => x,
                Err(e) => {
                    if matches!(self.phase, Phase::Open | Phase::Closing) {
                        self.queue_close(Some(e.close_code()));
                    }
                    crate::netio::log_once(ws_error_reason(e), || format!("WebSocket protocol error: {e}"));
                    return (pos, Output::Error(ErrorKind::WsProtocol));
                }
            };
            pos += used;
            match ev {
                Event::NeedMore => return (pos, Output::Taken),
                Event::Data { payload, fin, .. } => {
                    if self.inflight > 0 {
                        self.inspect(payload);
                    }
                    if fin && let Some(out) = self.message_end(cx, t) {
                        return (pos, out);
                    }
                }
                Event::Ping(p) => {
                    let out = self.pinged(t, p);
                    if out != Output::Taken {
                        return (pos, out);
                    }
                }
                Event::Pong(p) => {
                    // Only our own pings' pongs carry a send time; an
                    // unsolicited pong (a heartbeat) is allowed and ignored.
                    if let Ok(sent) = <[u8; 8]>::try_from(p) {
                        self.ponged(t, u64::from_be_bytes(sent));
                    }
                }
                Event::Close { code, .. } => return (pos, self.server_closed(t, code)),
            }
        }
    }

    /// The server's close frame arrived with `code`.
    fn server_closed(&mut self, t: &mut Tally<'_>, code: Option<u16>) -> Output {
        if self.we_closed {
            // The answer to our own close (the stop): not the server's
            // doing, not counted.
            self.phase = Phase::Closed;
            self.timer = u64::MAX;
            return Output::End(Ending::Stopped);
        }
        t.st.ws.closes[CloseName::of(code) as usize] += 1;
        if self.phase == Phase::Open {
            // Echo the code (section 5.5.1); none for none. It goes out
            // (best effort) before the socket closes.
            self.queue_close(code);
        }
        self.phase = Phase::Closed;
        self.timer = u64::MAX;
        if matches!(code, Some(1000 | 1001)) && self.inflight == 0 {
            Output::End(Ending::Closed)
        } else {
            Output::Error(ErrorKind::WsClosed)
        }
    }

    /// A pong for the ping sent at `sent_at` came (at `t.now`): pongs come
    /// in the pings' order (RFC 6455 5.5.3 lets a server answer only the
    /// latest, which is newer still), so every ping up to it is answered.
    /// Pings sent since are owed from the latest one's deadline: only the
    /// oldest's and the latest's send times are kept, so with several
    /// pings out (a timeout longer than the interval) a lost pong between
    /// them is found at most one interval late.
    fn ponged(&mut self, t: &mut Tally<'_>, sent_at: u64) {
        t.st.ws.pongs += 1;
        if sent_at <= t.now {
            stats::record_ns(&mut t.st.ws.ping_rtt, t.now - sent_at);
        }
        if self.pong_due == u64::MAX {
            return;
        }
        self.pong_due = match self.plan.ping_timeout {
            Some(timeout) if sent_at < self.ping_newest => self.ping_newest + timeout.as_nanos() as u64,
            _ => u64::MAX,
        };
    }

    /// A reply's bytes against the expected text (a streaming match).
    fn inspect(&mut self, payload: &[u8]) {
        let Some(needle) = self.plan.expect_contains.as_deref() else {
            return;
        };
        if self.found || needle.is_empty() {
            self.found = true;
            return;
        }
        let mut m = self.matched as usize;
        for &b in payload {
            while m > 0 && needle[m] != b {
                m = fallback(needle, m);
            }
            if needle[m] == b {
                m += 1;
            }
            if m == needle.len() {
                self.found = true;
                return;
            }
        }
        self.matched = m as u16;
    }

    /// A data message ended: a reply to the oldest message in flight, or
    /// a push (counted; nothing for the loop).
    fn message_end(&mut self, cx: &Cx<'_>, t: &mut Tally<'_>) -> Option<Output> {
        t.st.ws.received += 1;
        if self.inflight == 0 {
            self.note_push(t.now);
            return None;
        }
        t.st.ws.replies += 1;
        let entry = self.head;
        let next = self.head as usize + 1;
        self.head = if next >= cx.entries.len() { 0 } else { next as u16 };
        self.inflight -= 1;
        let failed = self.plan.expect_contains.is_some() && !self.found;
        self.found = false;
        self.matched = 0;
        Some(Output::Response(Response {
            entry,
            status: 200,
            keep_alive: true,
            failed_checks: if failed { 1 << CheckKind::Body as u8 } else { 0 },
        }))
    }

    /// The peer closed TCP: the end of our closing handshake, or (without
    /// its close frame) an abnormal closure (1006), counted by code: a
    /// `ws_handshake` error before the upgrade was done, else `ws_closed`.
    pub(super) fn at_close(&mut self, t: &mut Tally<'_>) -> AtClose {
        if self.we_closed {
            return AtClose::Stopped;
        }
        if self.phase == Phase::Upgrading {
            return AtClose::Failed(ErrorKind::WsHandshake);
        }
        t.st.ws.closes[CloseName::Abnormal as usize] += 1;
        AtClose::Failed(ErrorKind::WsClosed)
    }

    pub(super) fn relayout(&mut self, old: &[Inflight], new: &mut [Inflight]) {
        let depth = old.len();
        for (i, slot) in new.iter_mut().enumerate().take(self.inflight as usize) {
            *slot = old[(self.head as usize + i) % depth];
        }
        self.head = 0;
    }
}

/// Appends one client frame (masked with a fresh key from the system's
/// generator, see `ws::mask_key`) to `out`.
fn put_frame(out: &mut Vec<u8>, op: Opcode, payload: &[u8]) {
    let mut head = [0u8; MAX_HEAD];
    let key = ws::mask_key();
    let n = ws::encode_head(&mut head, true, op, payload.len() as u64, Some(key));
    out.extend_from_slice(&head[..n]);
    let start = out.len();
    out.extend_from_slice(payload);
    ws::apply_mask(&mut out[start..], key, 0);
}

/// The longest proper prefix of `needle[..m]` that is also its suffix
/// (KMP's failure function, computed when needed: the expected text is
/// short and a mismatch inside a partial match is rare).
fn fallback(needle: &[u8], m: usize) -> usize {
    (1..m).rev().find(|&k| needle[..k] == needle[m - k..m]).unwrap_or(0)
}

/// How many bytes the carried frame start must have before it decodes:
/// the head, and a control frame's whole payload.
fn frame_needs(c: &[u8]) -> usize {
    if c.len() < 2 {
        return 2;
    }
    let ext = match c[1] & 0x7f {
        126 => 2,
        127 => 8,
        _ => 0,
    };
    let head = 2 + ext + if c[1] & 0x80 != 0 { 4 } else { 0 };
    if c[0] & 0x08 != 0 && c[1] & 0x7f < 126 {
        head + (c[1] & 0x7f) as usize
    } else {
        head
    }
}

fn handshake_reason(e: HandshakeError) -> &'static str {
    match e {
        HandshakeError::Status(_) => "ws-status",
        HandshakeError::Malformed => "ws-malformed",
        HandshakeError::NotUpgraded => "ws-not-upgraded",
        HandshakeError::BadAccept => "ws-bad-accept",
        HandshakeError::Subprotocol => "ws-subprotocol",
        HandshakeError::Extension => "ws-extension",
    }
}

fn ws_error_reason(e: ws::WsError) -> &'static str {
    use ws::WsError as E;
    match e {
        E::Reserved => "ws-reserved",
        E::UnknownOpcode(_) => "ws-opcode",
        E::FragmentedControl => "ws-fragmented-control",
        E::ControlTooLong => "ws-control-too-long",
        E::Masked => "ws-masked",
        E::Unmasked => "ws-unmasked",
        E::BadLength => "ws-length",
        E::StrayContinuation => "ws-continuation",
        E::Interleaved => "ws-interleaved",
        E::BadClosePayload => "ws-close-payload",
        E::BadCloseCode(_) => "ws-close-code",
        E::InvalidUtf8 => "ws-utf8",
        E::TooBig => "ws-too-big",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::worker::{ProtoRt, WorkloadRt};
    use crate::stats::{Gauges, WorkloadStats};

    #[test]
    fn needs_of_a_carried_frame_start() {
        assert_eq!(frame_needs(&[0x81]), 2);
        assert_eq!(frame_needs(&[0x81, 0x05]), 2);
        assert_eq!(frame_needs(&[0x89, 0x05]), 7);
        assert_eq!(frame_needs(&[0x82, 0x7e]), 4);
        assert_eq!(frame_needs(&[0x82, 0x7f]), 10);
        assert_eq!(frame_needs(&[0x89, 0x7e]), 4);
    }

    const SEC: u64 = 1_000_000_000;

    /// The WebSocket plan of a one-workload config `extra` for `url`.
    fn plan(url: &str, extra: &str) -> Arc<WsPlan> {
        let text = format!("[[workload]]\nurl = \"{url}\"\n{extra}\n");
        let plan = crate::config::parse(std::path::Path::new("t.toml"), &text, Default::default()).unwrap();
        plan.workloads[0].target.ws.clone().unwrap()
    }

    /// A socket of `plan`, upgraded at `now`.
    fn upgraded(plan: &Arc<WsPlan>, st: &mut WorkloadStats, now: u64) -> Ws {
        let mut w = Ws::new(plan);
        w.open(u64::MAX);
        let mut g = Gauges::default();
        w.upgraded(&mut Tally { st, g: &mut g, now });
        pool::release(&mut w.out);
        w
    }

    /// An upgraded subscribe socket of a `ws://` workload, opened at 1 s.
    fn subscriber() -> Ws {
        upgraded(
            &plan("ws://127.0.0.1:1/push", "ws_subscribe = \"go\""),
            &mut WorkloadStats::default(),
            SEC,
        )
    }

    /// A socket that closes mid-interval gives the sample no walk will:
    /// a stream quiet for 5 s since its last push, then closed by the
    /// server, shows a 5 s silence though the last walk saw 4.5 s; a
    /// longer gap a push ended earlier in the interval wins over a
    /// shorter running one; a reset socket gives nothing more.
    #[test]
    fn a_close_records_the_last_partial_interval() {
        let mut w = subscriber();
        w.note_push(2 * SEC);
        assert_eq!(w.interval_silence(6 * SEC + SEC / 2), Some(4 * SEC + SEC / 2));
        w.phase = Phase::Closed; // the server's close frame
        assert_eq!(w.closing_silence(7 * SEC), Some(5 * SEC));
        w.reset();
        assert_eq!(w.closing_silence(8 * SEC), None);

        let mut w = subscriber();
        w.note_push(4 * SEC); // a 3 s gap ended
        w.note_push(4 * SEC + SEC / 2);
        assert_eq!(
            w.closing_silence(5 * SEC),
            Some(3 * SEC),
            "an error or churn while open"
        );

        // Not yet upgraded: no silence to speak of.
        let mut w = subscriber();
        w.reset();
        w.open(u64::MAX);
        assert_eq!(w.closing_silence(9 * SEC), None);
    }

    /// At the stop the silence ends with our close frame: pushes after it
    /// and the wait for the server's answer do not count.
    #[test]
    fn the_stop_ends_the_silence_at_our_close() {
        let mut w = subscriber();
        w.note_push(2 * SEC);
        assert!(w.start_close(3 * SEC, 4 * SEC));
        w.note_push(3 * SEC + SEC / 2);
        assert_eq!(w.closing_silence(4 * SEC), Some(SEC));
        // Request mode records no silences.
        let p = plan("ws://127.0.0.1:1/", "ws_message = \"hi\"");
        let mut w = upgraded(&p, &mut WorkloadStats::default(), SEC);
        assert_eq!(w.closing_silence(5 * SEC), None);
    }

    /// The once-a-second walk over 15,000 subscribe sockets (the bench's
    /// hold count): each gets one sample, the running silence, and the
    /// walk's cost is printed (about 32 ns per socket here; timing is not
    /// asserted on a shared machine).
    #[test]
    fn a_walk_records_each_subscribe_socket_once() {
        let p = plan("ws://127.0.0.1:1/push", "connections = 15000\nws_subscribe = \"go\"");
        let mut st = WorkloadStats::default();
        let mut g = Gauges::default();
        let mut socks: Vec<Ws> = (0..15_000)
            .map(|i| {
                let mut w = upgraded(&p, &mut st, SEC);
                // Half the sockets had a push 0.5 s in, after a 0.5 s silence.
                if i % 2 == 0 {
                    w.note_push(SEC + SEC / 2);
                }
                w
            })
            .collect();
        let mut st = WorkloadStats::default();
        let start = std::time::Instant::now();
        for w in &mut socks {
            w.walk(&mut Tally {
                st: &mut st,
                g: &mut g,
                now: 3 * SEC,
            });
        }
        let took = start.elapsed();
        eprintln!(
            "walk over 15,000 subscribe sockets: {took:?} ({:.1} ns per socket)",
            took.as_nanos() as f64 / 15_000.0
        );
        let h = &st.ws.silence;
        assert_eq!(h.len(), 15_000);
        // Running silences: 2 s since the upgrade, 1.5 s since the push.
        assert_eq!(h.count_between(1_490_000, 1_510_000), 7_500);
        assert_eq!(h.count_between(1_990_000, 2_010_000), 7_500);
        // A new interval: the push's 0.5 s gap is gone, the silence runs on.
        for w in &mut socks {
            w.walk(&mut Tally {
                st: &mut st,
                g: &mut g,
                now: 4 * SEC,
            });
        }
        assert_eq!(st.ws.silence.count_between(2_490_000, 2_510_000), 7_500);
    }

    /// A server ping frame with a 125-byte payload.
    fn ping() -> Vec<u8> {
        let mut f = vec![0x89, 125];
        f.extend_from_slice(&[b'p'; 125]);
        f
    }

    /// A server that pings as fast as it can and never reads: while bytes
    /// are owed only the latest ping's pong is kept, so 100,000 pings cost
    /// one pong; once the socket takes the owed bytes, that one pong follows.
    #[test]
    fn a_ping_flood_owes_one_pong() {
        let p = plan("ws://127.0.0.1:1/", "");
        let w = WorkloadRt::test(b"", 1, ProtoRt::Ws(p.clone()));
        let entries = [Inflight::default()];
        let cx = Cx::of(&w, &entries, 0, entries.len());
        let mut st = WorkloadStats::default();
        let mut g = Gauges::default();
        let mut s = upgraded(&p, &mut st, SEC);
        let flood = ping().repeat(1000);
        let mut t = Tally {
            st: &mut st,
            g: &mut g,
            now: 2 * SEC,
        };
        // The first pong is queued at once: the loop is told to write.
        assert_eq!(s.receive(&cx, &mut t, &ping()), (127, Output::Ready));
        let first = s.owed();
        assert_eq!(first, 2 + 4 + 125, "one masked pong");
        // The socket takes nothing more: every later pong waits aside.
        for _ in 0..100 {
            let (used, out) = s.receive(&cx, &mut t, &flood);
            assert_eq!((used, out), (flood.len(), Output::Taken));
        }
        assert_eq!(s.owed(), first, "nothing more queued");
        assert_eq!(s.pong.as_ref().map(|p| p.len()), Some(first), "one pong aside");
        assert_eq!(t.st.ws.server_pings, 100_001);
        // The socket takes the first pong: the one kept aside follows.
        s.sent(first);
        assert_eq!(s.owed(), first);
        assert!(s.pong.is_none());
        s.sent(first);
        assert!(!s.has_output());
    }

    /// Messages due while more than MAX_OWED bytes are owed are refused
    /// (`send_stalled`), so a server that stops reading cannot grow the
    /// socket's buffer; once it reads again, messages go out.
    #[test]
    fn messages_past_the_owed_bound_are_refused() {
        let p = plan(
            "ws://127.0.0.1:1/",
            "ws_message = \"0123456789\"\nws_reply = \"none\"\ninterval = \"1s\"",
        );
        let mut st = WorkloadStats::default();
        let mut g = Gauges::default();
        let mut s = upgraded(&p, &mut st, SEC);
        let mut t = Tally {
            st: &mut st,
            g: &mut g,
            now: 2 * SEC,
        };
        let mut queued = 0;
        loop {
            match s.issue(&mut t, 1) {
                Issued::Untimed => queued += 1,
                Issued::Refused(kind) => {
                    assert_eq!(kind, ErrorKind::SendStalled);
                    break;
                }
                Issued::Entry(_) => panic!("untimed messages take no entry"),
            }
        }
        assert!(s.owed() <= MAX_OWED + 16, "{}", s.owed());
        assert_eq!(queued, MAX_OWED / 16 + 1);
        assert_eq!(t.st.ws.sent, queued as u64);
        let all = s.owed();
        s.sent(all);
        assert_eq!(s.issue(&mut t, 1), Issued::Untimed);
    }

    #[test]
    fn fallback_is_kmps_failure() {
        assert_eq!(fallback(b"abab", 4), 2);
        assert_eq!(fallback(b"aaa", 3), 2);
        assert_eq!(fallback(b"abc", 3), 0);
    }
}
