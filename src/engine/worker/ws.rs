//! WebSocket behind the protocol seam: the upgrade, then messages, pings
//! and the closing handshake, driven sans I/O over [`crate::wire::ws`].
//!
//! The connection is open for the loop once TCP (and TLS) is up; the
//! upgrade is this protocol's first state, with the connect timeout as its
//! deadline ([`Ws::deadline`]). In request mode a message is a request: it
//! takes an in-flight entry (a FIFO ring, as HTTP/1.1's) when due, and the
//! next data message received completes the oldest entry as a
//! [`Response`], so latency from the due time, timeouts, budgets and churn
//! are the loop's as for HTTP. Everything else the loop must count or act
//! on comes back as a [`WsNote`].
//!
//! **Nothing is kept per socket while idle.** Bytes owed (the upgrade, a
//! masked message, a pong, a close) and bytes carried between reads (a
//! split handshake answer, frame head or control frame) live in buffers
//! borrowed from a per-thread pool while they are needed and given back
//! when drained: an idle held socket keeps only this state, and a busy
//! worker reuses the same few buffers, so nothing is allocated per message.
//! (A thread-local pool rather than a buffer lent through the seam's `Cx`,
//! which the other protocols share: a `RefCell` borrow, no lock or atomic.)

use std::cell::RefCell;
use std::sync::Arc;

use super::exchange::{AtClose, Cx, Inflight, Output, Response, WsNote};
use crate::plan::{WsMode, WsPlan};
use crate::stats::{CheckKind, ErrorKind};
use crate::wire::ws::{self, Decoder, Event, HandshakeError, MAX_CONTROL_PAYLOAD, MAX_HEAD, Opcode, Role};

/// Largest buffer kept in the pool: one that grew for a big message is
/// dropped rather than kept.
const POOL_KEEP_BYTES: usize = 64 * 1024;
/// Buffers kept in the pool at most.
const POOL_KEEP: usize = 256;

// Buffers are boxed `Vec`s: a handle in the connection costs 8 bytes, not
// a `Vec`'s 24 (tens of thousands of connections hold two handles each).
thread_local! {
    /// Free byte buffers of this worker thread.
    #[allow(clippy::vec_box)]
    static POOL: RefCell<Vec<Box<Vec<u8>>>> = const { RefCell::new(Vec::new()) };
}

/// A buffer from this thread's pool (empty), or a new one.
#[allow(clippy::box_collection)]
fn take_buf() -> Box<Vec<u8>> {
    POOL.with(|p| p.borrow_mut().pop()).unwrap_or_default()
}

/// Gives a buffer back to this thread's pool.
#[allow(clippy::box_collection)]
fn give_buf(mut b: Box<Vec<u8>>) {
    if b.capacity() > POOL_KEEP_BYTES {
        return;
    }
    b.clear();
    POOL.with(|p| {
        let mut p = p.borrow_mut();
        if p.len() < POOL_KEEP {
            p.push(b);
        }
    });
}

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

/// What a timer of the connection did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Timed {
    /// Nothing was due.
    Nothing,
    /// A ping is owed.
    Pinged,
    /// The upgrade ran out of time.
    HandshakeTimeout,
    /// Our close got no answer in time.
    CloseWaitOver,
    /// A ping got no pong within the ping timeout (a close 1011 is owed).
    PingTimeout,
}

/// One connection's WebSocket state.
#[derive(Debug)]
#[allow(clippy::box_collection)]
pub(super) struct Ws {
    plan: Arc<WsPlan>,
    decoder: Decoder,
    /// Bytes owed to the server (whole frames, queued in order), from the
    /// pool; during the upgrade, the request (its key is read back from it
    /// to check the answer).
    out: Option<Box<Vec<u8>>>,
    /// An incomplete handshake answer, frame head or control frame.
    carry: Option<Box<Vec<u8>>>,
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
    /// interval, ns (see [`Ws::interval_silence`]).
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
        if let Some(b) = self.out.take() {
            give_buf(b);
        }
        if let Some(b) = self.carry.take() {
            give_buf(b);
        }
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
        let out = self.out.get_or_insert_with(take_buf);
        out.extend_from_slice(self.plan.upgrade.prefix());
        out.extend_from_slice(&key);
        out.extend_from_slice(ws::Upgrade::SUFFIX);
        self.phase = Phase::Upgrading;
        self.timer = deadline;
    }

    /// Messages may be issued (request mode, upgraded).
    #[inline]
    pub(super) fn may_issue(&self) -> bool {
        self.phase == Phase::Open && self.plan.mode == WsMode::Request
    }

    /// True once we started the closing handshake on this connection.
    pub(super) fn is_closing(&self) -> bool {
        self.we_closed
    }

    /// True before the upgrade is done.
    pub(super) fn is_upgrading(&self) -> bool {
        self.phase == Phase::Upgrading
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

    /// Queues a frame (masked with a fresh key from the system's
    /// generator, see `ws::mask_key`) after what is owed.
    fn queue(&mut self, op: Opcode, payload: &[u8]) {
        let out = self.out.get_or_insert_with(take_buf);
        let mut head = [0u8; MAX_HEAD];
        let key = ws::mask_key();
        let n = ws::encode_head(&mut head, true, op, payload.len() as u64, Some(key));
        out.extend_from_slice(&head[..n]);
        let start = out.len();
        out.extend_from_slice(payload);
        ws::apply_mask(&mut out[start..], key, 0);
    }

    /// Queues the workload's message (a request, or the subscription).
    fn queue_message(&mut self) {
        let op = if self.plan.binary { Opcode::Binary } else { Opcode::Text };
        let plan = self.plan.clone();
        self.queue(op, &plan.message);
    }

    /// Queues a message that is due and expects no reply (`--ws-reply
    /// none`): it takes no in-flight entry, so nothing times it out.
    #[inline]
    pub(super) fn send_untimed(&mut self) {
        self.queue_message();
    }

    /// Takes an entry for a message that is due and queues the message.
    #[inline]
    pub(super) fn issue(&mut self, depth: usize) -> u16 {
        let at = self.head as usize + self.inflight as usize;
        let at = if at >= depth { at - depth } else { at };
        self.inflight += 1;
        self.queue_message();
        at as u16
    }

    /// The upgrade is done: subscribe, schedule the first ping (at a random
    /// point of the first interval, so a crowd of sockets opened together
    /// does not ping in step).
    pub(super) fn upgraded(&mut self, now: u64) {
        self.phase = Phase::Open;
        self.timer = match self.plan.ping {
            Some(p) => now + (p.as_nanos() as u64).saturating_mul(fastrand::u64(50..=100)) / 100,
            None => u64::MAX,
        };
        self.last_push = now;
        if self.plan.mode == WsMode::Subscribe {
            self.queue_message();
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

    /// The connection's timer fired at `now`.
    pub(super) fn on_time(&mut self, now: u64) -> Timed {
        if now >= self.pong_due && self.phase == Phase::Open {
            // _Fail the WebSocket Connection_ (RFC 6455 7.1.7): our close
            // says why, and the TCP connection ends without waiting for
            // an answer a server that drops pings would not send either.
            self.pong_due = u64::MAX;
            self.queue_close(Some(1011));
            return Timed::PingTimeout;
        }
        if now < self.timer {
            return Timed::Nothing;
        }
        match self.phase {
            Phase::Upgrading => Timed::HandshakeTimeout,
            Phase::Closing => Timed::CloseWaitOver,
            Phase::Open => {
                let Some(every) = self.plan.ping else {
                    self.timer = u64::MAX;
                    return Timed::Nothing;
                };
                // The payload is the send time: the pong brings it back, so
                // no ping needs remembering.
                self.queue(Opcode::Ping, &now.to_be_bytes());
                self.ping_newest = now;
                if self.pong_due == u64::MAX
                    && let Some(t) = self.plan.ping_timeout
                {
                    self.pong_due = now + t.as_nanos() as u64;
                }
                let every = every.as_nanos() as u64;
                self.timer = if self.timer + every > now {
                    self.timer + every
                } else {
                    now + every
                };
                Timed::Pinged
            }
            Phase::Idle | Phase::Closed => {
                self.timer = u64::MAX;
                Timed::Nothing
            }
        }
    }

    /// Subscribe mode: a push arrived at `now`; the silence it ended
    /// (since the previous push, or the upgrade) joins the interval's
    /// longest. O(1): nothing is recorded per message.
    #[inline]
    pub(super) fn note_push(&mut self, now: u64) {
        // After our close the stream is over (see `start_close`).
        if self.plan.mode != WsMode::Subscribe || self.we_closed {
            return;
        }
        let gap = now.saturating_sub(self.last_push);
        self.silence_max = self.silence_max.max(gap);
        self.last_push = now;
    }

    /// Subscribe mode, at the end of an interval (`now`): the longest
    /// silence of this socket within it, ns — the longest that a push
    /// ended, or the one still running (since the last push, however long
    /// ago), whichever is longer; then a new interval begins. A socket
    /// that went silent shows a growing silence each interval, though no
    /// message ends it. `None` when not an upgraded subscribe socket.
    pub(super) fn interval_silence(&mut self, now: u64) -> Option<u64> {
        if self.plan.mode != WsMode::Subscribe || self.phase != Phase::Open {
            return None;
        }
        let v = self.silence_max.max(now.saturating_sub(self.last_push));
        self.silence_max = 0;
        Some(v)
    }

    /// Subscribe mode, the socket closing at `now` for whatever reason
    /// (the server's close, an error, churn, the stop): the sample of its
    /// last, partial interval, which no walk will take — the longest
    /// silence a push ended since the last walk, or the one the close
    /// ends (up to our own close frame at the stop), whichever is longer.
    /// Without it a stream that went quiet and then closed would lose the
    /// very silence that came before the close. O(1), as a walk's step;
    /// `None` when not an upgraded subscribe socket (or once [`Ws::reset`]
    /// ran, so a second call records nothing).
    pub(super) fn closing_silence(&mut self, now: u64) -> Option<u64> {
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
        self.out.as_ref().is_some_and(|o| (self.out_off as usize) < o.len())
    }

    #[inline]
    pub(super) fn to_send<'a>(&'a self, _cx: &Cx<'a>) -> &'a [u8] {
        match &self.out {
            Some(o) => &o[self.out_off as usize..],
            None => &[],
        }
    }

    #[inline]
    pub(super) fn sent(&mut self, _cx: &Cx<'_>, n: usize) {
        self.out_off += n as u32;
        // Drained: the buffer goes back, except during the upgrade, when it
        // still holds the key the answer is checked against.
        if !self.has_output() && self.phase != Phase::Upgrading {
            self.out_off = 0;
            if let Some(b) = self.out.take() {
                give_buf(b);
            }
        }
    }

    pub(super) fn receive(&mut self, cx: &Cx<'_>, fresh: &[u8]) -> (usize, Output) {
        if self.phase == Phase::Upgrading {
            return self.receive_upgrade(fresh);
        }
        let Some(mut carried) = self.carry.take() else {
            let (used, out) = self.frames(cx, fresh);
            if out == Output::Taken && used < fresh.len() {
                // An incomplete frame head or control frame (at most
                // MAX_CONTROL_FRAME bytes): the one thing ever carried.
                let mut c = take_buf();
                c.extend_from_slice(&fresh[used..]);
                self.carry = Some(c);
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
        let (used, out) = self.frames(cx, &carried);
        debug_assert!(out != Output::Taken || used == carried.len());
        give_buf(carried);
        if out == Output::Taken && taken < fresh.len() {
            // "Taken" promises every byte: go on with the rest of the read.
            let (more, out) = self.receive(cx, &fresh[taken..]);
            return (taken + more, out);
        }
        (taken, out)
    }

    /// The upgrade's answer (possibly split across reads).
    fn receive_upgrade(&mut self, fresh: &[u8]) -> (usize, Output) {
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
                    let mut c = take_buf();
                    c.extend_from_slice(fresh);
                    self.carry = Some(c);
                }
                (fresh.len(), Output::Taken)
            }
            Ok(Some(head_len)) => {
                // Frames may follow the head: give them back.
                let rest = buf_len - head_len;
                let used = fresh.len() - rest;
                debug_assert!(head_len >= carried_len);
                if let Some(c) = self.carry.take() {
                    give_buf(c);
                }
                if let Some(b) = self.out.take() {
                    give_buf(b);
                }
                self.out_off = 0;
                self.phase = Phase::Open;
                (used, Output::Ws(WsNote::Upgraded))
            }
            Err(HandshakeError::Status(code)) => (fresh.len(), Output::Ws(WsNote::Refused(code))),
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
    fn frames(&mut self, cx: &Cx<'_>, data: &[u8]) -> (usize, Output) {
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
                    if fin {
                        return (pos, self.message_end(cx));
                    }
                }
                Event::Ping(p) => {
                    if self.phase == Phase::Open {
                        self.queue(Opcode::Pong, p);
                    }
                    return (pos, Output::Ws(WsNote::Pinged));
                }
                Event::Pong(p) => {
                    // Only our own pings' pongs carry a send time; an
                    // unsolicited pong (a heartbeat) is allowed and ignored.
                    if let Ok(t) = <[u8; 8]>::try_from(p) {
                        let t = u64::from_be_bytes(t);
                        self.ponged(t);
                        return (pos, Output::Ws(WsNote::Pong(t)));
                    }
                }
                Event::Close { code, .. } => {
                    if self.phase == Phase::Open {
                        // Echo the code (section 5.5.1); none for none.
                        self.queue_close(code);
                    }
                    self.phase = Phase::Closed;
                    self.timer = u64::MAX;
                    return (pos, Output::Ws(WsNote::Closed(code)));
                }
            }
        }
    }

    /// A pong for the ping sent at `sent_at` came: pongs come in the
    /// pings' order (RFC 6455 5.5.3 lets a server answer only the latest,
    /// which is newer still), so every ping up to it is answered. Pings
    /// sent since are owed from the latest one's deadline: only the
    /// oldest's and the latest's send times are kept, so with several
    /// pings out (a timeout longer than the interval) a lost pong between
    /// them is found at most one interval late.
    fn ponged(&mut self, sent_at: u64) {
        if self.pong_due == u64::MAX {
            return;
        }
        self.pong_due = match self.plan.ping_timeout {
            Some(t) if sent_at < self.ping_newest => self.ping_newest + t.as_nanos() as u64,
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
    /// a push.
    fn message_end(&mut self, cx: &Cx<'_>) -> Output {
        if self.inflight == 0 {
            return Output::Ws(WsNote::Pushed);
        }
        let entry = self.head;
        let next = self.head as usize + 1;
        self.head = if next >= cx.entries.len() { 0 } else { next as u16 };
        self.inflight -= 1;
        let failed = self.plan.expect_contains.is_some() && !self.found;
        self.found = false;
        self.matched = 0;
        Output::Response(Response {
            entry,
            status: 200,
            keep_alive: true,
            failed_checks: if failed { 1 << CheckKind::Body as u8 } else { 0 },
        })
    }

    pub(super) fn at_close(&mut self, _cx: &Cx<'_>) -> AtClose {
        if self.inflight > 0 {
            AtClose::Truncated
        } else {
            AtClose::Idle
        }
    }

    pub(super) fn relayout(&mut self, old: &[Inflight], new: &mut [Inflight]) {
        let depth = old.len();
        for (i, slot) in new.iter_mut().enumerate().take(self.inflight as usize) {
            *slot = old[(self.head as usize + i) % depth];
        }
        self.head = 0;
    }
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

    #[test]
    fn needs_of_a_carried_frame_start() {
        assert_eq!(frame_needs(&[0x81]), 2);
        assert_eq!(frame_needs(&[0x81, 0x05]), 2);
        assert_eq!(frame_needs(&[0x89, 0x05]), 7);
        assert_eq!(frame_needs(&[0x82, 0x7e]), 4);
        assert_eq!(frame_needs(&[0x82, 0x7f]), 10);
        assert_eq!(frame_needs(&[0x89, 0x7e]), 4);
    }

    /// An upgraded subscribe socket of a `ws://` workload, opened at 1 s.
    fn subscriber() -> Ws {
        let text = "[[workload]]\nurl = \"ws://127.0.0.1:1/push\"\nws_subscribe = \"go\"\n";
        let plan = crate::config::parse(std::path::Path::new("t.toml"), text, Default::default()).unwrap();
        let mut w = Ws::new(plan.workloads[0].ws.as_ref().unwrap());
        w.open(u64::MAX);
        w.upgraded(SEC);
        w
    }

    const SEC: u64 = 1_000_000_000;

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
        let text = "[[workload]]\nurl = \"ws://127.0.0.1:1/\"\nws_message = \"hi\"\n";
        let plan = crate::config::parse(std::path::Path::new("t.toml"), text, Default::default()).unwrap();
        let mut w = Ws::new(plan.workloads[0].ws.as_ref().unwrap());
        w.open(u64::MAX);
        w.upgraded(SEC);
        assert_eq!(w.closing_silence(5 * SEC), None);
    }

    #[test]
    fn fallback_is_kmps_failure() {
        assert_eq!(fallback(b"abab", 4), 2);
        assert_eq!(fallback(b"aaa", 3), 2);
        assert_eq!(fallback(b"abc", 3), 0);
    }
}
