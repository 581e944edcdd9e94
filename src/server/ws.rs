//! WebSocket on the built-in target: `/ws` echoes every message, and
//! `/ws/push?every=DUR` pushes one every DUR; pings are answered, the
//! closing handshake is honoured, and the `ws-*` faults misbehave on the
//! upgraded sockets.
//!
//! soakd's WebSocket soaks need a server as predictable and cheap as the
//! HTTP one, held by the same event loop: an upgrade is one more request
//! the responder answers (with 101, from `wire::ws`'s handshake half), and
//! afterwards the connection's bytes come here instead of to the HTTP
//! parser. The frame codec is `wire::ws`'s streaming [`Decoder`] (the one
//! the engine reads with), so an echoed message is never buffered: each
//! chunk of it is written back as it arrives, in the client's own frames
//! (a frame's head, whose length the client's frame gives, goes out with
//! its first chunk; see the `Event::Data` arm of `consume`), and an idle socket
//! keeps only its [`WsConn`] of a few words, boxed so that HTTP
//! connections do not pay for it. Pushes and ping floods are the only
//! timers: one FIFO per interval ([`Ticks`]), O(1) per tick, so idle echo
//! sockets cost no CPU.
//!
//! The echo is not delayed by `--delay` (that delays HTTP responses); the
//! coordinated-omission proof stalls the whole target instead (SIGSTOP).

use std::io;
use std::time::{Duration, Instant};

use super::conn::{Conn, Proto, Stop};
use super::fault::{Every, FaultLayer};
use super::ticks::Ticks;
use super::ws_socket::WsConn;
pub(super) use super::ws_socket::WsRoute;
use super::{FLUSH_AT, Fault, FaultMode};
use crate::wire::request_head::RequestHead;
use crate::wire::ws::{self as codec, Decoder, Event, MessageKind, Opcode, Role, UpgradeRefused};

/// The largest message the echo takes (over it: close 1009). The echo
/// streams, so this bounds nothing in memory; it only keeps a runaway
/// client from holding a message open for ever.
pub(super) const MAX_MESSAGE: u64 = 64 << 20;
/// `/ws/push` without `every=`.
pub(super) const DEFAULT_PUSH: Duration = Duration::from_secs(1);
/// Push intervals allowed.
const PUSH_MIN: Duration = Duration::from_millis(1);
const PUSH_MAX: Duration = Duration::from_secs(3600);
/// `ws-ping-flood`: this many pings at once ...
pub(super) const FLOOD_BURST: usize = 100;
/// ... every this long, while the client reads them.
pub(super) const FLOOD_STEP: Duration = Duration::from_millis(100);
/// `ws-oversize`: the payload of the message sent, one byte over a
/// client's default limit of 1 MiB.
pub(super) const OVERSIZE: usize = (1 << 20) + 1;
/// What `/ws/push` sends.
pub(super) const PUSH_TEXT: &[u8] = b"push";
/// `ws-bad-frame`: a final frame with opcode 3, which RFC 6455 reserves.
pub(super) const BAD_FRAME: &[u8] = &[0x83, 3, b'b', b'a', b'd'];
/// `ws-close`: the code sent.
pub(super) const FAULT_CLOSE: u16 = 1011;

/// The WebSocket route of a request target (query included): `None` for
/// a path that is not a WebSocket route, `Err` for a bad `every=`.
pub(super) fn route(target: &str) -> Option<Result<WsRoute, String>> {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    match path {
        "/ws" => Some(Ok(WsRoute::Echo)),
        "/ws/push" => {
            let every = query.split('&').find_map(|kv| kv.strip_prefix("every="));
            Some(match every {
                None => Ok(WsRoute::Push(DEFAULT_PUSH)),
                Some(text) => match humantime::parse_duration(text) {
                    Ok(d) if (PUSH_MIN..=PUSH_MAX).contains(&d) => Ok(WsRoute::Push(d)),
                    _ => Err(format!(
                        "every={text}: give a push interval from 1ms to 1h, e.g. /ws/push?every=500ms\n"
                    )),
                },
            })
        }
        _ => None,
    }
}

/// What the timer wakes a socket for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tick {
    /// Send the next push (`/ws/push`).
    Push,
    /// Send the next burst of pings (`ws-ping-flood`).
    Flood,
}

/// Per-thread WebSocket state: the timers, the fault, and the scratch
/// buffer frames are unmasked in.
pub(super) struct WsThread {
    fault: Option<Fault>,
    /// Upgraded sockets since a socket-level fault last hit.
    sockets: Every,
    pub(super) ticks: Ticks<Tick>,
    /// Input copied here to be unmasked in place (the read buffer is the
    /// HTTP parser's, borrowed shared); reused, never shrunk below a read.
    scratch: Vec<u8>,
    /// `ws-oversize`'s frame, rendered once.
    oversize: Box<[u8]>,
}

impl WsThread {
    pub(super) fn new(fault: Option<Fault>) -> WsThread {
        let fault = fault.filter(|f| f.mode.layer() == FaultLayer::Ws);
        let mut oversize = Vec::new();
        if fault.is_some_and(|f| f.mode == FaultMode::WsOversize) {
            codec::encode_frame(&mut oversize, true, Opcode::Binary, &vec![b'x'; OVERSIZE], None);
        }
        WsThread {
            fault,
            sockets: Every::default(),
            ticks: Ticks::default(),
            scratch: Vec::new(),
            oversize: oversize.into_boxed_slice(),
        }
    }

    /// Whether the socket-level fault `mode` hits the socket being
    /// upgraded (every N-th per thread).
    fn socket_hit(&mut self, mode: FaultMode) -> bool {
        let Some(fault) = self.fault.filter(|f| f.mode == mode) else {
            return false;
        };
        self.sockets.hit(fault.every)
    }

    /// Answers an upgrade request for `route` on `conn`: the 101 and the
    /// socket's state, or a refusal that closes the connection.
    pub(super) fn upgrade(
        &mut self,
        conn: &mut Conn,
        req: &RequestHead<'_, '_>,
        route: Result<WsRoute, String>,
        now: Instant,
        batch: &mut Vec<u8>,
    ) -> bool {
        let accepted = codec::accept_request(req.method, req.headers);
        let route = match (accepted, route) {
            (Ok(_), Err(why)) => return refuse(conn, batch, "400 Bad Request", &why),
            (Ok(_), Ok(WsRoute::Push(every))) if !self.ticks.has_room(every) => {
                return refuse(
                    conn,
                    batch,
                    "400 Bad Request",
                    "this target keeps at most 32 distinct push intervals per thread\n",
                );
            }
            (Err(UpgradeRefused::Version), _) => {
                return refuse(
                    conn,
                    batch,
                    "426 Upgrade Required",
                    "only WebSocket version 13 is spoken here\n",
                );
            }
            (Err(why), _) => return refuse(conn, batch, "400 Bad Request", &format!("{why}\n")),
            (Ok(_), Ok(route)) => route,
        };
        let accept = accepted.expect("checked above");
        // Any subprotocol offered is fine with an echo: the first is chosen.
        let subprotocol = req
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("sec-websocket-protocol"))
            .and_then(|h| std::str::from_utf8(h.value).ok())
            .and_then(|v| v.split(',').map(str::trim).find(|p| !p.is_empty()));
        codec::render_accept(batch, &accept, subprotocol);
        let no_pong = self.socket_hit(FaultMode::WsNoPong);
        if self.socket_hit(FaultMode::WsPingFlood) {
            self.ticks.schedule(FLOOD_STEP, now, conn.token, Tick::Flood);
        }
        if let WsRoute::Push(every) = route {
            self.ticks.schedule(every, now + every, conn.token, Tick::Push);
        }
        conn.proto = Proto::Ws(Box::new(WsConn {
            decoder: Decoder::new(Role::Server, MAX_MESSAGE),
            route,
            messages: 0,
            in_message: false,
            echoing: false,
            echo_left: 0,
            no_pong,
            close_sent: false,
            broken: false,
        }));
        true
    }

    /// Handles the frames in `data` from an upgraded `conn`, answering into
    /// `batch`; how much was used and why it stopped, as the HTTP parser
    /// says it (what is left is an incomplete frame head or control frame,
    /// which comes back in front of the next read).
    pub(super) fn consume(&mut self, conn: &mut Conn, data: &[u8], batch: &mut Vec<u8>) -> io::Result<(usize, Stop)> {
        self.scratch.clear();
        self.scratch.extend_from_slice(data);
        let mut pos = 0;
        loop {
            if conn.closing {
                return Ok((data.len(), Stop::Discard));
            }
            if conn.blocked() {
                return Ok((pos, Stop::Blocked));
            }
            let Some(ws) = conn.proto.ws_mut() else {
                unreachable!("frames are consumed on an upgraded connection")
            };
            let (used, event) = match ws.decoder.decode_mut(&mut self.scratch[pos..]) {
                Ok(step) => step,
                Err(err) => {
                    // Fail the connection as the RFC says: our close with
                    // the error's code, then the TCP close (only the TCP
                    // close inside an echo frame, where a close frame
                    // would read as payload).
                    if !ws.close_sent && ws.echo_left == 0 {
                        close(batch, err.close_code());
                    }
                    conn.closing = true;
                    continue;
                }
            };
            pos += used;
            match event {
                Event::NeedMore => return Ok((pos, Stop::NeedMore)),
                Event::Ping(payload) => {
                    if !ws.no_pong && !ws.close_sent {
                        codec::encode_frame(batch, true, Opcode::Pong, payload, None);
                    }
                }
                Event::Pong(_) => {}
                Event::Close { code, .. } => {
                    // Our answer ends the closing handshake; the server
                    // closes the TCP connection first (section 7.1.1).
                    if !ws.close_sent {
                        match code {
                            Some(code) => close(batch, code),
                            None => codec::encode_frame(batch, true, Opcode::Close, &[], None),
                        }
                    }
                    conn.closing = true;
                }
                Event::Data { payload, kind, fin } => {
                    let first = !ws.in_message;
                    ws.in_message = !fin;
                    if ws.close_sent || ws.broken || ws.route != WsRoute::Echo {
                        continue;
                    }
                    if first {
                        ws.messages = ws.messages.wrapping_add(1);
                        ws.echoing = !message_fault(self.fault, &self.oversize, ws, batch);
                    }
                    if ws.echoing {
                        // The echo mirrors the client's frames: a frame's
                        // head (its whole length is known from the
                        // client's) goes out with its first chunk, later
                        // chunks follow as payload. One frame per read
                        // instead made a message come back in as many
                        // frames as reads, and a client that stops reading
                        // past a number of queued frames (PyPI websockets'
                        // max_queue, 16) while it still sends deadlocked
                        // with this target's backpressure.
                        if ws.echo_left == 0 {
                            let (left, last) = ws.decoder.frame_left();
                            let opcode = match (first, kind) {
                                (false, _) => Opcode::Continuation,
                                (true, MessageKind::Text) => Opcode::Text,
                                (true, MessageKind::Binary) => Opcode::Binary,
                            };
                            let len = payload.len() as u64 + left;
                            let mut head = [0u8; codec::MAX_HEAD];
                            let n = codec::encode_head(&mut head, if left > 0 { last } else { fin }, opcode, len, None);
                            batch.extend_from_slice(&head[..n]);
                            ws.echo_left = len;
                        }
                        batch.extend_from_slice(payload);
                        ws.echo_left -= payload.len() as u64;
                    }
                }
            }
            if batch.len() >= FLUSH_AT {
                flush(conn, batch)?;
            }
        }
    }

    /// A push or a flood burst is due on `conn`: sends it (unless the
    /// client is not reading what it got) and schedules the next.
    pub(super) fn tick(
        &mut self,
        conn: &mut Conn,
        tick: Tick,
        every: Duration,
        due: Instant,
        now: Instant,
        batch: &mut Vec<u8>,
    ) -> io::Result<()> {
        let output_blocked = conn.blocked();
        let Some(ws) = conn.proto.ws_mut() else {
            return Ok(());
        };
        if conn.closing || ws.close_sent {
            return Ok(()); // the socket is ending: no more ticks
        }
        // Behind (a stalled thread): the next tick from now, not a burst
        // of catching up.
        let next = if due + every > now { due + every } else { now + every };
        self.ticks.schedule(every, next, conn.token, tick);
        // A client that does not read gets no more: its socket's output
        // is bounded by what was already pending.
        if output_blocked {
            return Ok(());
        }
        match tick {
            Tick::Push => {
                ws.messages = ws.messages.wrapping_add(1);
                if !message_fault(self.fault, &self.oversize, ws, batch) && !ws.broken {
                    codec::encode_frame(batch, true, Opcode::Text, PUSH_TEXT, None);
                }
            }
            Tick::Flood => {
                for _ in 0..FLOOD_BURST {
                    codec::encode_frame(batch, true, Opcode::Ping, b"flood", None);
                }
            }
        }
        flush(conn, batch)
    }
}

/// Acts out a message fault of `fault` on `ws`'s latest message (received
/// or about to be pushed), if one hits it (every N-th per socket); true
/// when it did, and the message is not to be answered (or pushed).
fn message_fault(fault: Option<Fault>, oversize: &[u8], ws: &mut WsConn, batch: &mut Vec<u8>) -> bool {
    let hit = |mode| fault.is_some_and(|f: Fault| f.mode == mode && ws.messages.is_multiple_of(f.every));
    if hit(FaultMode::WsClose) {
        close(batch, FAULT_CLOSE);
        ws.close_sent = true;
    } else if hit(FaultMode::WsBadFrame) {
        batch.extend_from_slice(BAD_FRAME);
        ws.broken = true;
    } else if hit(FaultMode::WsOversize) {
        batch.extend_from_slice(oversize);
    } else {
        return false;
    }
    true
}

/// Writes `batch` to `conn` and empties it.
fn flush(conn: &mut Conn, batch: &mut Vec<u8>) -> io::Result<()> {
    let result = conn.send(batch);
    batch.clear();
    result
}

/// Appends a close frame with `code` (no reason).
fn close(batch: &mut Vec<u8>, code: u16) {
    codec::encode_frame(batch, true, Opcode::Close, &code.to_be_bytes(), None);
}

/// Refuses an upgrade with `status` and a one-line `why`, closing (false:
/// the connection was not upgraded).
fn refuse(conn: &mut Conn, batch: &mut Vec<u8>, status: &str, why: &str) -> bool {
    let version = if status.starts_with("426") {
        "Sec-WebSocket-Version: 13\r\n"
    } else {
        ""
    };
    batch.extend_from_slice(
        format!(
            "HTTP/1.1 {status}\r\n{version}Content-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{why}",
            why.len()
        )
        .as_bytes(),
    );
    conn.closing = true;
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_and_push_intervals() {
        assert_eq!(route("/ws"), Some(Ok(WsRoute::Echo)));
        assert_eq!(route("/ws?x=1"), Some(Ok(WsRoute::Echo)));
        assert_eq!(route("/ws/push"), Some(Ok(WsRoute::Push(DEFAULT_PUSH))));
        assert_eq!(
            route("/ws/push?a=b&every=250ms"),
            Some(Ok(WsRoute::Push(Duration::from_millis(250))))
        );
        for bad in ["/ws/push?every=0s", "/ws/push?every=2h", "/ws/push?every=soon"] {
            let err = route(bad).unwrap().unwrap_err();
            assert!(err.contains("every=") && err.contains("e.g."), "{bad}: {err}");
        }
        assert_eq!(route("/"), None);
        assert_eq!(route("/wsx"), None);
        assert_eq!(route("/ws/"), None);
    }
}
