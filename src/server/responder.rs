//! Turning a target connection's requests into responses: parsing the
//! requests (pipelined, split across reads, with bodies to skip), picking
//! each one's pre-rendered response, delaying it, and acting out faults.
//!
//! Sans sockets as far as it can be: it writes only through
//! [`Conn::send`]. The thread's state every protocol answers from lives
//! here too (the WebSocket and HTTP/2 parts beside the HTTP/1 one); what
//! reaches which is `proto.rs`'s.

use std::collections::VecDeque;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::Token;

use super::conn::{Conn, ConnFault, Stop};
use super::fault::{Every, FaultLayer};
use super::h2::H2Thread;
use super::responses::*;
use super::ws::{self, WsThread};
use super::{Degrade, FLUSH_AT, Fault, FaultMode};
use crate::wire::request_head::{self, MAX_HEADERS, Parsed, Refused, RequestHead};

/// A response waiting for its due time.
pub(super) struct Delayed {
    pub(super) due: Instant,
    pub(super) token: Token,
    pub(super) id: u16,
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
    fault_count: Every,
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
            fault_count: Every::default(),
            trickles: VecDeque::new(),
            ws: WsThread::new(fault),
            h2: None,
            outage: super::OutageSchedule::default(),
        }
    }

    /// Answers every complete request in `data`, in order. Returns how many
    /// bytes were used and why it stopped ([`Stop::Switched`] once a
    /// request upgraded the connection: the rest is WebSocket's).
    pub(super) fn consume_http1(&mut self, conn: &mut Conn, data: &[u8], now: Instant) -> io::Result<(usize, Stop)> {
        let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut pos = 0;
        loop {
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
            let (id, body) = match request_head::parse(&data[pos..], &mut fields) {
                Parsed::Request(req) => {
                    pos += req.len;
                    if let Some(route) = ws::route(req.target) {
                        if self.upgrade(conn, &req, route, now)? {
                            return Ok((pos, Stop::Switched));
                        }
                        continue;
                    }
                    classify(&req)
                }
                Parsed::Partial => return Ok((pos, Stop::NeedMore)),
                Parsed::Refused(Refused::TooLarge) => (TOO_LARGE, 0),
                Parsed::Refused(_) => (BAD_REQUEST, 0),
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
    /// True when the connection is a WebSocket from now on.
    fn upgrade(
        &mut self,
        conn: &mut Conn,
        req: &RequestHead<'_, '_>,
        route: Result<ws::WsRoute, String>,
        now: Instant,
    ) -> io::Result<bool> {
        let pong = response_id(Route::Pong, false, Persist::KeepAlive);
        let id = if self.fault.is_some() { self.faulty(pong) } else { pong };
        if id != pong {
            return self.respond(conn, id, now).map(|()| false);
        }
        if conn.in_flight > 0 {
            return self.respond(conn, BAD_REQUEST, now).map(|()| false);
        }
        Ok(self.ws.upgrade(conn, req, route, now, &mut self.batch))
    }

    /// Counts one request (or accepted connection) towards the fault and
    /// says whether this one is hit by `mode`.
    pub(super) fn fault_hits(&mut self, mode: FaultMode) -> bool {
        let Some(fault) = self.fault.filter(|f| f.mode == mode) else {
            return false;
        };
        self.fault_count.hit(fault.every)
    }

    /// The response for a request that would get `id`, with the fault
    /// applied when this request is hit.
    fn faulty(&mut self, id: u16) -> u16 {
        let Some(fault) = self.fault else { return id };
        if fault.mode.layer() != FaultLayer::Http1 || !self.fault_hits(fault.mode) {
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

    /// Sends the delayed response `first` of `conn`, and the due ones
    /// after it in the queue that belong to `conn` too (consecutive ones go
    /// out in one write).
    pub(super) fn deliver(&mut self, conn: &mut Conn, first: u16, now: Instant, buf: &mut [u8]) -> io::Result<()> {
        let mut next = Some(first);
        while let Some(id) = next {
            next = self
                .queue
                .pop_front_if(|d| d.token == conn.token && d.due <= now)
                .map(|d| d.id);
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

    pub(super) fn flush(&mut self, conn: &mut Conn) -> io::Result<()> {
        let result = conn.send(&self.batch);
        self.batch.clear();
        result
    }
}

/// Picks the response for a request head and the length of its body.
fn classify(req: &RequestHead<'_, '_>) -> (u16, u64) {
    let route = Route::of(req.target);
    (response_id(route, req.method == "HEAD", req.persist), req.body)
}
