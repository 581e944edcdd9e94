//! HTTP/2 in the built-in target (`soakd target --h2`): h2c with prior
//! knowledge on the plain port, h2 by ALPN over `--tls`, and the HTTP/2
//! faults.
//!
//! Why the target speaks HTTP/2 at all: soakd's own HTTP/2 client needs a
//! server that is predictable, cheap and can misbehave on demand (GOAWAY
//! after N streams, resets, a refused stream, a window that never opens, a
//! SETTINGS flood), as the HTTP/1 faults do for HTTP/1. The frames and
//! HPACK are `wire::h2`'s, the same codec the client uses; this module is
//! the server's state per connection and nothing else.
//!
//! How a connection becomes HTTP/2: with `--h2`, the first bytes of every
//! connection are compared with the client preface. A connection that
//! starts with it speaks HTTP/2 (h2c with prior knowledge, or h2 after an
//! ALPN of `h2` over TLS); any other is HTTP/1.1 as before, so one port
//! serves both, and a TLS client that offers only `http/1.1` still gets
//! HTTP/1.1. Sniffing rather than reading the ALPN result keeps TLS and
//! plain connections on one path: an HTTP/1 request can never start with
//! `PRI * HTTP/2.0`.
//!
//! Responses are the HTTP/1 target's routes (status, sizes, `/big`,
//! trailers for `/chunked`, a `100` first for `/continue`), with the
//! header blocks rendered once per thread at start, so answering a stream
//! formats and allocates nothing. A request is answered once it has
//! arrived whole (END_STREAM), after the delay (and `--slowdown`) like an
//! HTTP/1 one; the body goes out as the client's connection and stream
//! windows allow, and what does not fit waits for its WINDOW_UPDATE.
//!
//! Files: this one (sniffing, the delay queue and floods on the target's
//! connections and loop) and `h2_conn.rs` (one connection, sans I/O: the
//! streams, windows, responses and faults).
//!
//! Memory per connection is bounded: at most [`MAX_STREAMS`] streams
//! (beyond them a stream is refused with REFUSED_STREAM), a partial frame
//! of at most 9 + 16 KiB, a header block capped by the frame decoder, and
//! HPACK's 4 KiB table. An idle connection keeps only its boxed state and
//! that table: the partial-frame and header-block buffers are given back.
//!
//! Ending a connection (GOAWAY, graceful or not) shuts down our sending
//! side once the output is out and then discards input until the client
//! closes: closing a socket with unread input would send an RST, which may
//! overtake the last responses on their way.

use std::collections::VecDeque;
use std::io;
use std::net::Shutdown;
use std::time::{Duration, Instant};

use mio::Token;

use super::conn::{Conn, Proto};
use super::grpc::{GrpcService, GrpcServing};
use super::h2_conn::{Cx, H2Conn, Serving};
use super::outage::Schedule;
use super::{Degrade, Fault};
use crate::netio::Stream as NetStream;
use crate::wire::h2::{PREFACE, encode_settings};

/// Empty SETTINGS frames per write of the `settings-flood` fault.
const FLOOD_FRAMES: usize = 1024;
/// Flood writes per turn of the event loop, so one flooded client that
/// reads as fast as we write cannot hold the thread.
const FLOOD_WRITES_PER_TURN: usize = 16;

/// Per-thread HTTP/2 state: what the connections answer from, and the
/// floods under way.
pub(super) struct H2Thread {
    serving: Serving,
    /// `--max-connection-age` (`grpc.rs`): connections by birth, to age
    /// out (GOAWAY), then by GOAWAY, to close after the grace. One age
    /// and one grace for all keep each queue in due order.
    ages: VecDeque<(Instant, Token, Instant)>,
    closes: VecDeque<(Instant, Token, Instant)>,
    max_age: Option<(Duration, Duration)>,
    /// `settings-flood` connections to write to on the next turn.
    floods: VecDeque<Token>,
    /// Those to write to on this turn (taken from `floods` as the turn
    /// begins, so a connection queued again waits for the next one).
    flooding: VecDeque<Token>,
    /// `FLOOD_FRAMES` empty SETTINGS frames, rendered once.
    flood_bytes: Box<[u8]>,
}

impl H2Thread {
    pub(super) fn new(
        delay: Duration,
        degrade: Degrade,
        fault: Option<Fault>,
        brownouts: Schedule,
        grpc: Option<GrpcService>,
    ) -> H2Thread {
        let mut flood = Vec::with_capacity(FLOOD_FRAMES * 9);
        for _ in 0..FLOOD_FRAMES {
            encode_settings(&mut flood, false, &[]);
        }
        let mut serving = Serving::new(delay, degrade, fault);
        serving.brownouts = brownouts;
        serving.grpc = grpc.map(GrpcServing::new);
        H2Thread {
            serving,
            ages: VecDeque::new(),
            closes: VecDeque::new(),
            max_age: grpc.and_then(|g| g.max_age.map(|a| (a, g.grace))),
            floods: VecDeque::new(),
            flooding: VecDeque::new(),
            flood_bytes: flood.into_boxed_slice(),
        }
    }

    /// When the next delayed response is due.
    pub(super) fn next_stream_due(&self) -> Option<Instant> {
        self.serving.queue.front().map(|d| d.due)
    }

    /// A new turn of the loop: the floods queued so far are this turn's
    /// (true when there are any).
    pub(super) fn start_flood_turn(&mut self) -> bool {
        if self.flooding.is_empty() {
            std::mem::swap(&mut self.flooding, &mut self.floods);
        }
        !self.flooding.is_empty()
    }

    /// The next connection to flood this turn.
    pub(super) fn next_flood(&mut self) -> Option<Token> {
        self.flooding.pop_front()
    }

    /// Takes bytes read from a connection that is not (yet) known to be
    /// HTTP/1. Answers false when it turns out to be HTTP/1: its bytes are
    /// then the HTTP/1 path's (what was held back is in `conn.input`).
    pub(super) fn feed(&mut self, conn: &mut Conn, data: &[u8], now: Instant, out: &mut Vec<u8>) -> io::Result<bool> {
        if conn.proto.sniffing() {
            let have = conn.input.len();
            let n = (PREFACE.len() - have).min(data.len());
            if data[..n] != PREFACE[have..have + n] {
                conn.proto = Proto::Http1;
                return Ok(false);
            }
            if have + n < PREFACE.len() {
                conn.input.extend_from_slice(data);
                return Ok(true);
            }
            conn.input = Vec::new();
            let mut h = H2Conn::new(self.serving.fault());
            h.born = now;
            if let Some((age, _)) = self.max_age {
                self.ages.push_back((now + age, conn.token, now));
            }
            h.greet(out);
            conn.proto = Proto::H2(Box::new(h));
            return self.feed(conn, &data[n..], now, out).map(|_| true);
        }
        let Some(flooding) = self.with_conn(conn, now, out, |h, cx| {
            h.receive(cx, data);
            h.flooding
        }) else {
            return Ok(false);
        };
        if flooding && !self.floods.contains(&conn.token) {
            self.floods.push_back(conn.token);
        }
        Ok(true)
    }

    /// After output was written or the socket drained: ends a connection
    /// that is done, or queues more of a flood.
    pub(super) fn settle(&mut self, conn: &mut Conn) -> io::Result<()> {
        let waiting = conn.has_output() || conn.stream.wants_write();
        let Some(h) = conn.proto.h2_mut() else {
            return Ok(());
        };
        if waiting {
            return Ok(()); // the WRITABLE edge brings it back
        }
        if h.flooding && !self.floods.contains(&conn.token) {
            self.floods.push_back(conn.token);
        }
        if h.done && !h.shut {
            h.shut = true;
            half_close(&mut conn.stream)?;
        }
        Ok(())
    }

    /// Pops the next response that is due: its connection and stream.
    pub(super) fn next_due(&mut self, now: Instant) -> Option<(Token, u32)> {
        let queue = &mut self.serving.queue;
        if queue.front()?.due > now {
            return None;
        }
        let d = queue.pop_front()?;
        Some((d.token, d.stream))
    }

    /// Sends the delayed response of `stream` on `conn` (counted out of
    /// the connection's in-flight responses whether or not the stream is
    /// still there).
    pub(super) fn deliver(&mut self, conn: &mut Conn, stream: u32, now: Instant, out: &mut Vec<u8>) {
        conn.in_flight = conn.in_flight.saturating_sub(1);
        self.with_conn(conn, now, out, |h, cx| h.deliver(cx, stream));
    }

    /// Runs `f` on `conn`'s HTTP/2 state with the thread's (`None`: the
    /// connection does not speak HTTP/2).
    fn with_conn<R>(
        &mut self,
        conn: &mut Conn,
        now: Instant,
        out: &mut Vec<u8>,
        f: impl FnOnce(&mut H2Conn, &mut Cx<'_>) -> R,
    ) -> Option<R> {
        let h = conn.proto.h2_mut()?;
        let mut cx = Cx {
            th: &mut self.serving,
            token: conn.token,
            now,
            out,
            in_flight: &mut conn.in_flight,
        };
        Some(f(h, &mut cx))
    }

    /// When the next `Subscribe` push is due.
    pub(super) fn next_push(&self) -> Option<Instant> {
        self.serving.pushes.next_due()
    }

    /// The earliest push due by `now`.
    pub(super) fn pop_push(&mut self, now: Instant) -> Option<(Token, (u32, Instant), Duration, Instant)> {
        self.serving.pushes.pop_due(now)
    }

    /// Sends `conn`'s push of `stream` (its connection born at the
    /// instant given) and schedules the next one interval after this
    /// one's due time (the cadence kept, not drifting with the loop).
    pub(super) fn push(
        &mut self,
        conn: &mut Conn,
        (stream, born): (u32, Instant),
        (every, due): (Duration, Instant),
        now: Instant,
        out: &mut Vec<u8>,
    ) {
        if self.with_conn(conn, now, out, |h, cx| h.push(cx, stream, born)) == Some(true) {
            // Late by more than an interval (a stalled loop): from now.
            let next = if due + every > now { due + every } else { now + every };
            self.serving.pushes.schedule(every, next, conn.token, (stream, born));
        }
    }

    /// When the next connection ages out or closes.
    pub(super) fn next_age(&self) -> Option<Instant> {
        let a = self.ages.front().map(|a| a.0);
        let c = self.closes.front().map(|c| c.0);
        a.into_iter().chain(c).min()
    }

    /// A connection due to age out (`false`) or to close (`true`), with
    /// its birth (a token taken by a younger connection is not it).
    pub(super) fn pop_age(&mut self, now: Instant) -> Option<(Token, Instant, bool)> {
        if let Some(&(due, token, born)) = self.closes.front()
            && due <= now
        {
            self.closes.pop_front();
            return Some((token, born, true));
        }
        let &(due, token, born) = self.ages.front()?;
        (due <= now).then(|| {
            self.ages.pop_front();
            (token, born, false)
        })
    }

    /// Ages `conn` out (GOAWAY; its close queued after the grace) or says
    /// it is to be closed now, if it is the connection born at `born`.
    pub(super) fn age(
        &mut self,
        conn: &mut Conn,
        born: Instant,
        closing: bool,
        now: Instant,
        out: &mut Vec<u8>,
    ) -> bool {
        let Some(h) = conn.proto.h2_mut() else { return false };
        if h.born != born {
            return false;
        }
        if closing {
            return true;
        }
        self.with_conn(conn, now, out, |h, cx| h.age_out(cx));
        if let Some((_, grace)) = self.max_age {
            self.closes.push_back((now + grace, conn.token, born));
        }
        false
    }

    /// Writes SETTINGS frames to a flooded connection until its socket is
    /// full or this turn's share is out; queues it again if it could take
    /// more.
    pub(super) fn flood(&mut self, conn: &mut Conn) -> io::Result<()> {
        for _ in 0..FLOOD_WRITES_PER_TURN {
            if conn.has_output() {
                return Ok(()); // the WRITABLE edge brings it back
            }
            conn.send(&self.flood_bytes)?;
        }
        if !conn.has_output() && !self.floods.contains(&conn.token) {
            self.floods.push_back(conn.token);
        }
        Ok(())
    }
}

/// Ends our sending side: TLS says close_notify first.
fn half_close(stream: &mut NetStream) -> io::Result<()> {
    if let NetStream::Tls(t) = stream {
        t.close_notify();
    }
    match stream.tcp().shutdown(Shutdown::Write) {
        Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(()),
        r => r,
    }
}
