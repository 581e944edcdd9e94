//! Turning a target connection's requests into responses: parsing the
//! requests (pipelined, split across reads, with bodies to skip), picking
//! each one's pre-rendered response, delaying it, and acting out faults.
//!
//! Sans sockets as far as it can be: it writes only through
//! [`Conn::send`], and the worker hands it events and due times.

use std::collections::VecDeque;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::Token;
use mio::event::Event;

use super::conn::{Conn, ConnFault, Proto, Stop};
use super::h2::H2Thread;
use super::responses::*;
use super::ws::{self, WsThread};
use super::{Degrade, FLUSH_AT, Fault, FaultMode, MAX_HEAD, MAX_HEADERS};
use crate::wire::headers;

/// A response waiting for its due time.
pub(super) struct Delayed {
    pub(super) due: Instant,
    pub(super) token: Token,
    id: u16,
}

/// A connection whose trickled response sends its next byte at `due`.
pub(super) struct Trickle {
    pub(super) due: Instant,
    pub(super) token: Token,
}

/// Time between two bytes of a trickled response.
pub(super) const TRICKLE_STEP: Duration = Duration::from_millis(100);

/// Per-thread state for turning requests into responses.
pub(super) struct Responder {
    responses: Arc<Responses>,
    delay: Duration,
    /// How the delay grows with time (`--slowdown`), from `started`.
    degrade: Degrade,
    started: Instant,
    /// Responses produced by one read, written with one syscall.
    pub(super) batch: Vec<u8>,
    /// Delayed responses in arrival order. All delays are equal (or grow
    /// with time, under `--slowdown`), so arrival order is due order and a FIFO is all the timer this needs.
    pub(super) queue: VecDeque<Delayed>,
    /// The fault to act out, if any.
    fault: Option<Fault>,
    /// Requests (or, for `close-after-accept`, connections) since the fault
    /// last hit.
    fault_count: u32,
    /// Trickled responses waiting for their next byte; every step is
    /// [`TRICKLE_STEP`], so this is a FIFO too.
    pub(super) trickles: VecDeque<Trickle>,
    /// Upgraded sockets' timers and faults.
    pub(super) ws: WsThread,
    /// HTTP/2 (`--h2`): its responses, delay queue and faults.
    pub(super) h2: Option<H2Thread>,
    /// `--brownout-*`: the extra delay of responses now (`outage.rs`).
    pub(super) outage: super::OutageSchedule,
}

impl Responder {
    pub(super) fn new(responses: Arc<Responses>, delay: Duration, degrade: Degrade, fault: Option<Fault>) -> Responder {
        Responder {
            responses,
            delay,
            degrade,
            started: Instant::now(),
            batch: Vec::new(),
            queue: VecDeque::new(),
            fault,
            fault_count: 0,
            trickles: VecDeque::new(),
            ws: WsThread::new(fault),
            h2: None,
            outage: super::OutageSchedule::default(),
        }
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
            if let Some(h2) = &mut self.h2 {
                h2.settle(conn)?;
            }
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

    /// Reads and answers until the socket is drained or output blocks.
    fn read(&mut self, conn: &mut Conn, buf: &mut [u8], to_would_block: bool) -> io::Result<()> {
        if conn.blocked() {
            conn.paused = true;
            return Ok(());
        }
        while !conn.eof {
            let n = match conn.stream.read(buf) {
                Ok(0) => {
                    conn.eof = true;
                    conn.input = Vec::new();
                    return Ok(());
                }
                Ok(n) => n,
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => return Err(err),
            };
            self.feed(conn, &buf[..n], Instant::now())?;
            self.flush(conn)?;
            if conn.blocked() {
                conn.paused = true;
                return Ok(());
            }
            // A short read emptied the socket; asking again would only
            // return WouldBlock, and new data brings a new edge. (Not so for
            // TLS, whose records may still be inside rustls.)
            if conn.stream.short_read_drains() && n < buf.len() && !to_would_block {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Continues a connection whose output has drained: first the input
    /// set aside, then the socket.
    fn resume(&mut self, conn: &mut Conn, buf: &mut [u8]) -> io::Result<()> {
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

    /// Handles freshly read bytes, joining them to an incomplete head kept
    /// from earlier reads.
    fn feed(&mut self, conn: &mut Conn, data: &[u8], now: Instant) -> io::Result<()> {
        if conn.discarding() {
            return Ok(());
        }
        if let Some(h2) = &mut self.h2
            && !matches!(conn.proto, Proto::Http1)
            && h2.feed(conn, data, now, &mut self.batch)?
        {
            let sent = conn.send(&self.batch);
            self.batch.clear();
            sent?;
            return h2.settle(conn);
        }
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

    /// Answers every complete request in `data`, in order. Returns how many
    /// bytes were used and why it stopped.
    fn consume(&mut self, conn: &mut Conn, data: &[u8], now: Instant) -> io::Result<(usize, Stop)> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut pos = 0;
        loop {
            if conn.ws.is_some() {
                // Upgraded (perhaps by the request just answered): frames.
                let (used, stop) = self.ws.consume(conn, &data[pos..], &mut self.batch)?;
                return Ok((pos + used, stop));
            }
            if conn.discarding() {
                return Ok((data.len(), Stop::Discard));
            }
            if conn.body_left > 0 {
                let skip = conn.body_left.min((data.len() - pos) as u64);
                pos += skip as usize;
                conn.body_left -= skip;
                if conn.body_left > 0 {
                    return Ok((pos, Stop::NeedMore));
                }
            }
            if pos == data.len() {
                return Ok((pos, Stop::NeedMore));
            }
            if conn.blocked() {
                return Ok((pos, Stop::Blocked));
            }
            let mut req = httparse::Request::new(&mut headers);
            let (id, body) = match req.parse(&data[pos..]) {
                Ok(httparse::Status::Complete(n)) if n <= MAX_HEAD => {
                    pos += n;
                    if let Some(route) = ws::route(req.path.unwrap_or("/")) {
                        self.upgrade(conn, &req, route, now)?;
                        continue;
                    }
                    classify(&req)
                }
                Ok(httparse::Status::Partial) if data.len() - pos <= MAX_HEAD => {
                    return Ok((pos, Stop::NeedMore));
                }
                Ok(_) | Err(httparse::Error::TooManyHeaders) => (TOO_LARGE, 0),
                Err(_) => (BAD_REQUEST, 0),
            };
            conn.body_left = body;
            let id = if self.fault.is_some() && id < BAD_REQUEST {
                self.faulty(id)
            } else {
                id
            };
            self.respond(conn, id, now)?;
        }
    }

    /// Answers a request for a WebSocket route: like any request it may be
    /// hit by an HTTP fault (so clients see refused handshakes), and it
    /// waits behind delayed responses, which a 101 cannot (refused: 400).
    fn upgrade(
        &mut self,
        conn: &mut Conn,
        req: &httparse::Request<'_, '_>,
        route: Result<ws::WsRoute, String>,
        now: Instant,
    ) -> io::Result<()> {
        let pong = response_id(Route::Pong, false, Persist::KeepAlive);
        let id = if self.fault.is_some() { self.faulty(pong) } else { pong };
        if id != pong {
            return self.respond(conn, id, now);
        }
        if conn.in_flight > 0 {
            return self.respond(conn, BAD_REQUEST, now);
        }
        self.ws.upgrade(conn, req, route, now, &mut self.batch);
        Ok(())
    }

    /// Counts one request (or accepted connection) towards the fault and
    /// says whether this one is hit by `mode`.
    pub(super) fn fault_hits(&mut self, mode: FaultMode) -> bool {
        let Some(fault) = self.fault.filter(|f| f.mode == mode) else {
            return false;
        };
        self.fault_count += 1;
        if self.fault_count < fault.every {
            return false;
        }
        self.fault_count = 0;
        true
    }

    /// The response for a request that would get `id`, with the fault
    /// applied when this request is hit.
    fn faulty(&mut self, id: u16) -> u16 {
        let Some(fault) = self.fault else { return id };
        if fault.mode.before_protocol() || fault.mode.is_h2() || fault.mode.is_ws() || !self.fault_hits(fault.mode) {
            return id;
        }
        // The route's rendering for the same method and persistence.
        let variant = usize::from(id) % VARIANTS;
        let head = variant >= 3;
        let persist = match variant % 3 {
            0 => Persist::Default,
            1 => Persist::KeepAlive,
            _ => Persist::Close,
        };
        match fault.mode {
            FaultMode::Continue => response_id(Route::Continue, head, persist),
            FaultMode::Http10NoLength => response_id(Route::Http10, head, persist),
            _ => FAULT,
        }
    }

    /// Acts out the fault response `FAULT` on `conn` when it is due (at
    /// once without a delay): output so far is flushed first, in order.
    fn act(&mut self, conn: &mut Conn, action: Action, now: Instant) -> io::Result<()> {
        match action {
            Action::Respond => Ok(()),
            Action::Reset => {
                self.flush(conn)?;
                socket2::SockRef::from(conn.stream.tcp()).set_linger(Some(Duration::ZERO))?;
                // The caller drops the connection on error: with a zero
                // linger the close is an RST.
                Err(io::Error::new(io::ErrorKind::ConnectionReset, "reset by the fault"))
            }
            Action::Mute => {
                conn.fault = ConnFault::Muted;
                Ok(())
            }
            Action::Trickle => {
                // The first byte goes out with the batch, the rest one per
                // step; reading pauses until the last one.
                let first = self.responses.table[usize::from(FAULT)].bytes[0];
                self.batch.push(first);
                conn.fault = ConnFault::Trickle { sent: 1 };
                self.trickles.push_back(Trickle {
                    due: now + TRICKLE_STEP,
                    token: conn.token,
                });
                Ok(())
            }
        }
    }

    /// Sends the next byte of `conn`'s trickled response.
    pub(super) fn trickle(&mut self, conn: &mut Conn, now: Instant, buf: &mut [u8]) -> io::Result<()> {
        let ConnFault::Trickle { sent } = conn.fault else {
            return Ok(());
        };
        let bytes = &self.responses.table[usize::from(FAULT)].bytes;
        let sent = sent as usize;
        let byte = bytes[sent];
        let done = sent + 1 == bytes.len();
        conn.send(&[byte])?;
        if !done {
            conn.fault = ConnFault::Trickle { sent: sent as u32 + 1 };
            self.trickles.push_back(Trickle {
                due: now + TRICKLE_STEP,
                token: conn.token,
            });
            return Ok(());
        }
        conn.fault = ConnFault::None;
        if conn.paused && !conn.blocked() {
            self.resume(conn, buf)?;
        }
        Ok(())
    }

    /// Sends (or schedules) response `id` on `conn`.
    fn respond(&mut self, conn: &mut Conn, id: u16, now: Instant) -> io::Result<()> {
        let response = &self.responses.table[usize::from(id)];
        conn.closing |= response.close;
        if id == FAULT && self.fault.is_some_and(|f| f.mode == FaultMode::CloseNoNotify) {
            conn.fault = ConnFault::NoNotify;
        }
        if response.action != Action::Respond {
            // Silence and trickles start at once; a reset waits its turn
            // behind a delay like any response.
            if response.action != Action::Reset || self.delay.is_zero() {
                return self.act(conn, response.action, now);
            }
        }
        // A brownout's extra delay; responses still queued when it ends go
        // out first, in order (the queue stays in due order).
        let extra = self.outage.extra_delay(now);
        if self.delay.is_zero() && extra.is_zero() && conn.in_flight == 0 {
            self.batch.extend_from_slice(&response.bytes);
            if self.batch.len() >= FLUSH_AT {
                self.flush(conn)?;
            }
        } else {
            let due = now + self.degrade.delay_at(self.delay, now - self.started) + extra;
            self.queue.push_back(Delayed {
                due: self.queue.back().map_or(due, |last| due.max(last.due)),
                token: conn.token,
                id,
            });
            conn.in_flight += 1;
        }
        Ok(())
    }

    /// Sends the due responses at the front of the queue that belong to
    /// `conn` (consecutive ones go out in one write).
    pub(super) fn deliver(&mut self, conn: &mut Conn, now: Instant, buf: &mut [u8]) -> io::Result<()> {
        while let Some(next) = self.queue.front() {
            if next.token != conn.token || next.due > now {
                break;
            }
            let id = next.id;
            self.queue.pop_front();
            conn.in_flight -= 1;
            let response = &self.responses.table[usize::from(id)];
            if response.action != Action::Respond {
                return self.act(conn, response.action, now);
            }
            self.batch.extend_from_slice(&response.bytes);
            if self.batch.len() >= FLUSH_AT {
                self.flush(conn)?;
            }
        }
        self.flush(conn)?;
        if conn.paused && !conn.blocked() {
            self.resume(conn, buf)?;
        }
        Ok(())
    }

    fn flush(&mut self, conn: &mut Conn) -> io::Result<()> {
        let result = conn.send(&self.batch);
        self.batch.clear();
        result
    }
}

/// Keeps the input `consume` did not use, unless it is to be dropped.
fn set_aside(conn: &mut Conn, rest: &[u8], stop: Stop) {
    if stop != Stop::Discard && !rest.is_empty() {
        conn.input = rest.to_vec();
    }
}

/// Picks the response for a parsed request and the length of its body.
fn classify(req: &httparse::Request<'_, '_>) -> (u16, u64) {
    let Ok(f) = headers::scan(req.headers) else {
        return (BAD_REQUEST, 0);
    };
    // Chunked request bodies are not needed by anything that talks to the
    // target; refusing them beats misreading the stream.
    if f.chunked || f.other_coding {
        return (BAD_REQUEST, 0);
    }
    let persist = f.persist(req.version != Some(1));
    let head = req.method == Some("HEAD");
    let route = Route::of(req.path.unwrap_or("/"));
    (response_id(route, head, persist), f.content_length.unwrap_or(0))
}
