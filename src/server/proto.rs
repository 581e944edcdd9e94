//! The built-in target's protocol seam, the server-side counterpart of the
//! engine's `engine/worker/protocol.rs`: what a connection speaks is one
//! [`Proto`] value, and every place that depends on it is here.
//!
//! The thread's loop (`worker.rs`) owns the sockets, the listener and the
//! one timer scheme (`timer::Deadlines`); it hands this file readiness
//! ([`Responder::on_event`]) and due times ([`Responder::pop_due`],
//! [`Responder::on_due`]), and asks after each turn where the thread's
//! queues stand ([`Responder::arm`]). This file reads and writes through
//! the connection ([`Conn`]) and hands the bytes to the protocol the
//! connection speaks:
//!
//! - [`Proto::Sniff`] (with `--h2`): its first bytes are compared with the
//!   HTTP/2 preface, then it is one of the others;
//! - [`Proto::Http1`]: requests to responses (`responder.rs`), until a
//!   request for a WebSocket route upgrades it ([`Stop::Switched`]);
//! - [`Proto::Ws`]: frames (`ws.rs`), echoes and pushes;
//! - [`Proto::H2`]: frames and streams (`h2.rs`, `h2_conn.rs`).
//!
//! Each protocol's per-thread state (the delay queue and trickles of
//! HTTP/1, the push ticks of WebSocket, HTTP/2's delayed streams and
//! floods) is a queue in due order; each queue is one id in the thread's
//! deadlines, armed for its front.

use std::io;
use std::time::{Duration, Instant};

use mio::Token;
use mio::event::Event;

use super::TargetConfig;
use super::conn::{Conn, ConnFault, Proto, Stop};
use super::h2::H2Thread;
use super::h2_conn::H2Conn;
use super::responder::Responder;
use super::ws::Tick;
use super::ws_socket::WsConn;
use crate::netio::{Got, read_some};
use crate::timer::Deadlines;
use crate::wire::request_head::MAX_HEAD;

impl Proto {
    /// True while the first bytes are still compared with the HTTP/2
    /// preface.
    pub(super) fn sniffing(&self) -> bool {
        matches!(self, Proto::Sniff)
    }

    /// The HTTP/2 state, if the connection speaks HTTP/2.
    pub(super) fn h2_mut(&mut self) -> Option<&mut H2Conn> {
        match self {
            Proto::H2(h) => Some(h),
            _ => None,
        }
    }

    /// The WebSocket state, if the connection was upgraded.
    pub(super) fn ws_mut(&mut self) -> Option<&mut WsConn> {
        match self {
            Proto::Ws(ws) => Some(ws),
            _ => None,
        }
    }
}

/// The deadline ids of the thread's queues (connections have none of
/// their own: everything timed is in a queue). Small: ids index the
/// wheel's table.
pub(super) const DELAYED: u32 = 0;
pub(super) const TRICKLES: u32 = 1;
pub(super) const WS_TICKS: u32 = 2;
pub(super) const H2_DELAYED: u32 = 3;
pub(super) const H2_FLOODS: u32 = 4;
/// `--max-connection-age`: connections to age out, then to close.
pub(super) const H2_AGES: u32 = 5;
/// `--grpc`: `Subscribe` streams' pushes.
pub(super) const H2_PUSHES: u32 = 6;

/// What a queue has due for a connection.
#[derive(Debug, Clone, Copy)]
pub(super) enum Due {
    /// HTTP/1: a delayed response (its table index).
    Response(u16),
    /// HTTP/1: the next byte of a trickled response.
    Trickle,
    /// WebSocket: a push or a burst of pings, the socket's interval and
    /// when it was due.
    Tick(Tick, Duration, Instant),
    /// HTTP/2: a delayed stream's response.
    Stream(u32),
    /// HTTP/2: this turn's share of a SETTINGS flood.
    Flood,
    /// HTTP/2 `--max-connection-age`: the connection born then is old
    /// (GOAWAY), or its grace is over (close).
    Age(Instant, bool),
    /// HTTP/2 `--grpc`: a push of stream `.0` of the connection born at
    /// `.1`, every `.2`, due at `.3`.
    Push(u32, Instant, Duration, Instant),
}

impl Responder {
    /// The thread's state for every protocol the target speaks: HTTP/1 and
    /// WebSocket always, HTTP/2 with `--h2`; the brownouts of
    /// `--brownout-every` delay HTTP/1's and HTTP/2's responses alike.
    pub(super) fn speaking(mut self, cfg: &TargetConfig) -> Responder {
        self.outage = cfg.outage;
        if cfg.h2 {
            self.h2 = Some(H2Thread::new(cfg.delay, cfg.degrade, cfg.fault, cfg.outage, cfg.grpc));
        }
        self
    }

    /// What a new connection speaks first.
    pub(super) fn first_proto(&self) -> Proto {
        if self.h2.is_some() { Proto::Sniff } else { Proto::Http1 }
    }

    /// Handles one readiness event of `conn`: flushes, resumes, reads and
    /// answers. An error means the connection is to be dropped.
    pub(super) fn on_event(&mut self, conn: &mut Conn, buf: &mut [u8], event: &Event) -> io::Result<()> {
        if conn.fault == ConnFault::Stalled {
            // Nothing is read, so the handshake never moves; the client's
            // close still ends the connection.
            return if event.is_read_closed() || event.is_error() {
                Err(io::ErrorKind::ConnectionAborted.into())
            } else {
                Ok(())
            };
        }
        if event.is_error() {
            let err = conn.stream.tcp().take_error()?;
            return Err(err.unwrap_or_else(|| io::Error::other("socket error")));
        }
        if event.is_writable() && conn.stream.wants_write() {
            match conn.stream.flush() {
                Ok(()) => {}
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(err) => return Err(err),
            }
        }
        if event.is_writable() && conn.has_output() {
            conn.write_out()?;
            self.written(conn)?;
            if conn.paused && !conn.blocked() {
                return self.resume(conn, buf);
            }
        }
        if event.is_readable() || event.is_read_closed() || event.is_write_closed() {
            // After the peer's FIN no new edge will come, so read to the end.
            let to_end = event.is_read_closed() || event.is_write_closed();
            self.read(conn, buf, to_end)?;
        }
        Ok(())
    }

    /// After output was written: a protocol that ends or floods once its
    /// output is out does so (HTTP/2).
    fn written(&mut self, conn: &mut Conn) -> io::Result<()> {
        match (&mut self.h2, &conn.proto) {
            (Some(h2), Proto::H2(_)) => h2.settle(conn),
            _ => Ok(()),
        }
    }

    /// Reads and answers until the socket is drained or output blocks.
    fn read(&mut self, conn: &mut Conn, buf: &mut [u8], to_would_block: bool) -> io::Result<()> {
        if conn.blocked() {
            conn.paused = true;
            return Ok(());
        }
        while !conn.eof {
            let (n, drained) = match read_some(&mut conn.stream, buf, to_would_block)? {
                Got::Eof => {
                    conn.eof = true;
                    conn.input = Vec::new();
                    return Ok(());
                }
                Got::Data { n, drained } => (n, drained),
                Got::Empty => return Ok(()),
            };
            self.feed(conn, &buf[..n], Instant::now())?;
            self.flush(conn)?;
            if conn.blocked() {
                conn.paused = true;
                return Ok(());
            }
            // Asking again would only return WouldBlock; new data brings a
            // new edge.
            if drained {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Continues a connection whose output has drained: first the input
    /// set aside, then the socket.
    pub(super) fn resume(&mut self, conn: &mut Conn, buf: &mut [u8]) -> io::Result<()> {
        conn.paused = false;
        if !conn.input.is_empty() {
            let input = std::mem::take(&mut conn.input);
            let (used, stop) = self.consume(conn, &input, Instant::now())?;
            self.flush(conn)?;
            if stop != Stop::Discard && used < input.len() {
                conn.input = input[used..].to_vec();
            }
        }
        self.read(conn, buf, true)
    }

    /// Handles freshly read bytes by what the connection speaks.
    fn feed(&mut self, conn: &mut Conn, data: &[u8], now: Instant) -> io::Result<()> {
        if conn.discarding() {
            return Ok(());
        }
        if let (Some(h2), Proto::Sniff | Proto::H2(_)) = (&mut self.h2, &conn.proto)
            && h2.feed(conn, data, now, &mut self.batch)?
        {
            return self.send_h2(conn);
        }
        self.feed_carried(conn, data, now)
    }

    /// HTTP/1 and WebSocket bytes, joined to an incomplete head (a request
    /// head, or a frame head or control frame) kept from earlier reads.
    fn feed_carried(&mut self, conn: &mut Conn, data: &[u8], now: Instant) -> io::Result<()> {
        let mut data = data;
        if !conn.input.is_empty() {
            // Only an incomplete head can be kept while we read, and a head
            // may not outgrow MAX_HEAD, so copy no more than that.
            let mut head = std::mem::take(&mut conn.input);
            let had = head.len();
            let take = data.len().min((MAX_HEAD + 1).saturating_sub(had));
            head.extend_from_slice(&data[..take]);
            let (used, stop) = self.consume(conn, &head, now)?;
            if used < had {
                if stop != Stop::Discard {
                    head.drain(..used);
                    head.extend_from_slice(&data[take..]);
                    conn.input = head;
                }
                return Ok(());
            }
            // The kept head is complete; everything after it is in `data`
            // too, and parsing it from there avoids copying the rest.
            data = &data[used - had..];
            if stop != Stop::NeedMore {
                set_aside(conn, data, stop);
                return Ok(());
            }
        }
        let (used, stop) = self.consume(conn, data, now)?;
        set_aside(conn, &data[used..], stop);
        Ok(())
    }

    /// Answers what `data` holds by what the connection speaks, going on
    /// with the rest when a request switched it to WebSocket.
    fn consume(&mut self, conn: &mut Conn, data: &[u8], now: Instant) -> io::Result<(usize, Stop)> {
        let mut pos = 0;
        loop {
            let (used, stop) = match conn.proto {
                Proto::Ws(_) => self.ws.consume(conn, &data[pos..], &mut self.batch)?,
                _ => self.consume_http1(conn, &data[pos..], now)?,
            };
            pos += used;
            if stop != Stop::Switched {
                return Ok((pos, stop));
            }
        }
    }

    /// Where the thread's queues stand after a turn: each queue's id is
    /// armed for its front (or cleared when it is empty).
    pub(super) fn arm(&mut self, deadlines: &mut Deadlines, now: Instant) {
        deadlines.set(DELAYED, self.queue.front().map(|d| d.due));
        deadlines.set(TRICKLES, self.trickles.front().map(|t| t.due));
        deadlines.set(WS_TICKS, self.ws.ticks.next_due());
        if let Some(h2) = &mut self.h2 {
            deadlines.set(H2_DELAYED, h2.next_stream_due());
            deadlines.set(H2_FLOODS, h2.start_flood_turn().then_some(now));
            deadlines.set(H2_AGES, h2.next_age());
            deadlines.set(H2_PUSHES, h2.next_push());
        }
    }

    /// The next thing due by `now` in the queue `id`, taken from it: its
    /// connection and what is due.
    pub(super) fn pop_due(&mut self, id: u32, now: Instant) -> Option<(Token, Due)> {
        match id {
            DELAYED => {
                let d = self.queue.pop_front_if(|d| d.due <= now)?;
                Some((d.token, Due::Response(d.id)))
            }
            TRICKLES => {
                let t = self.trickles.pop_front_if(|t| t.due <= now)?;
                Some((t.token, Due::Trickle))
            }
            WS_TICKS => {
                let (token, tick, every, due) = self.ws.ticks.pop_due(now)?;
                Some((token, Due::Tick(tick, every, due)))
            }
            H2_DELAYED => {
                let (token, stream) = self.h2.as_mut()?.next_due(now)?;
                Some((token, Due::Stream(stream)))
            }
            H2_FLOODS => Some((self.h2.as_mut()?.next_flood()?, Due::Flood)),
            H2_PUSHES => {
                let (token, (stream, born), every, due) = self.h2.as_mut()?.pop_push(now)?;
                Some((token, Due::Push(stream, born, every, due)))
            }
            H2_AGES => {
                let (token, born, closing) = self.h2.as_mut()?.pop_age(now)?;
                Some((token, Due::Age(born, closing)))
            }
            _ => None,
        }
    }

    /// Acts on what was due for `conn` (see [`Responder::pop_due`]).
    pub(super) fn on_due(&mut self, conn: &mut Conn, due: Due, now: Instant, buf: &mut [u8]) -> io::Result<()> {
        match due {
            Due::Response(id) => self.deliver(conn, id, now, buf),
            Due::Trickle => self.trickle(conn, now, buf),
            Due::Tick(tick, every, at) => self.ws.tick(conn, tick, every, at, now, &mut self.batch),
            Due::Stream(stream) => {
                let Some(h2) = self.h2.as_mut() else { return Ok(()) };
                h2.deliver(conn, stream, now, &mut self.batch);
                self.send_h2(conn)
            }
            Due::Flood => match self.h2.as_mut() {
                Some(h2) => h2.flood(conn),
                None => Ok(()),
            },
            Due::Push(stream, born, every, due) => {
                let Some(h2) = self.h2.as_mut() else { return Ok(()) };
                h2.push(conn, (stream, born), (every, due), now, &mut self.batch);
                self.send_h2(conn)
            }
            Due::Age(born, closing) => {
                let Some(h2) = self.h2.as_mut() else { return Ok(()) };
                let close = h2.age(conn, born, closing, now, &mut self.batch);
                self.send_h2(conn)?;
                if close {
                    return Err(io::ErrorKind::ConnectionAborted.into());
                }
                Ok(())
            }
        }
    }

    /// Sends what HTTP/2 wrote into the thread's batch for `conn` (in one
    /// write), then lets it settle: a connection that is done ends once
    /// its output is out, a flood queues its next turn.
    fn send_h2(&mut self, conn: &mut Conn) -> io::Result<()> {
        let sent = conn.send(&self.batch);
        self.batch.clear();
        sent?;
        match self.h2.as_mut() {
            Some(h2) => h2.settle(conn),
            None => Ok(()),
        }
    }
}

/// Keeps the input `consume` did not use, unless it is to be dropped.
fn set_aside(conn: &mut Conn, rest: &[u8], stop: Stop) {
    if stop != Stop::Discard && !rest.is_empty() {
        conn.input = rest.to_vec();
    }
}
