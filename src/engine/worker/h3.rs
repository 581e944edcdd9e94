//! HTTP/3: one QUIC connection's requests, as the protocol seam sees them
//! (see `protocol.rs`).
//!
//! HTTP/3 differs from the other protocols in one way the seam has to
//! know: a QUIC connection has no byte stream of its own. Its packets come
//! and go on the worker's UDP socket, and quinn-proto's [`Connection`]
//! (sans I/O, as quiche's is) turns them into stream events. So this
//! state owns the connection, and the worker's QUIC driver (`quic.rs`)
//! hands it datagrams and timeouts, then asks it for [`Output`]s one at a
//! time ([`H3::poll`]) as the loop asks the byte-stream protocols with
//! `receive`. What a request costs is the same as over HTTP/2: an
//! in-flight entry, a stream, a latency from its due time.
//!
//! Requests are streams with HTTP/2's lifecycle (a stream per request,
//! at most `--streams` at once), written whole from bytes rendered once
//! per workload (`wire::h3::render_request`). The response's field
//! section is decoded with the static QPACK table only (soakd announces a
//! table of 0 bytes), its fields and body fed to the request's checks as
//! they arrive; nothing of a response is kept but its status.
//!
//! Stream credit: quinn-proto says only when a new stream cannot be
//! opened, so one stream is opened ahead (`spare`): a request may be
//! issued exactly when a spare is in hand, and the server's MAX_STREAMS
//! (an `Available` event) refills it.
//!
//! A GOAWAY hands every request on a stream at or above its id back to the
//! loop (sent again on the slot's next connection, with its due time);
//! once nothing is left in flight the connection ends as "sent away", as
//! an HTTP/2 connection does. A stream the server resets with
//! H3_REQUEST_REJECTED is handed back the same way, at most
//! [`MAX_HANDED_BACK`] times.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use quinn_proto::{ConnectionError, ConnectionHandle, Dir, Endpoint, Event, ReadError, StreamEvent, StreamId, VarInt};

use super::exchange::{Cx, Ending, Inflight, Issued, Output, Response, Tally};
use super::h3_ends::{StreamEnd, lost_kind, reset_end};
use super::h3_lanes::Lanes;
use super::h3_response::read_response;
use crate::netio::log_once;
use crate::stats::ErrorKind;
use crate::wire::h3::{self, Frame, FrameReader, H3Request, error, stream_type};

/// A request handed back this often (GOAWAY, H3_REQUEST_REJECTED) fails
/// instead of being sent again: a server that never processes it must not
/// pull it round forever.
const MAX_HANDED_BACK: u8 = 4;

/// Most of the server's unidirectional streams read at once: its control
/// stream and QPACK's two, and room for a few it may grease with.
const MAX_PEER_UNI: usize = 8;

/// An HTTP/3 workload's settings, shared by its connections.
#[derive(Debug)]
pub struct H3Rt {
    /// Every request of the workload, as request stream bytes.
    pub requests: Vec<H3Request>,
    /// Streams in flight per connection (`--streams`).
    pub streams: u16,
    /// quinn-proto's client configuration: rustls (TLS 1.3, ALPN `h3`)
    /// and the transport settings (`quic.rs`, `client_config`).
    pub quic: quinn_proto::ClientConfig,
    /// The name sent and verified.
    pub server_name: String,
    /// `--h3-keepalive`.
    pub keepalive: Keepalive,
    /// The idle timeout soakd announces (ns; 0: none).
    pub idle_timeout: u64,
    /// `--h3-0rtt`: requests go out as 0-RTT data on a resumed session.
    pub zero_rtt: bool,
}

/// How a connection is kept alive (`--h3-keepalive`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keepalive {
    /// Not at all: a connection idle past the negotiated idle timeout
    /// ends (`quic_idle_timeout`).
    Off,
    /// A PING after half the negotiated idle timeout without a packet
    /// from the server (the default).
    Auto,
    /// A PING after this long (ns) without a packet from the server.
    Every(u64),
}

impl PartialEq for H3Rt {
    /// The same requests and streams on the same TLS settings (the TLS
    /// part is compared by the workload's `tls` field).
    fn eq(&self, o: &H3Rt) -> bool {
        self.requests == o.requests && self.streams == o.streams && self.server_name == o.server_name
    }
}

/// One of the server's unidirectional streams.
#[derive(Debug)]
struct PeerUni {
    id: StreamId,
    /// Its type, once read.
    kind: Option<u64>,
    /// The control stream's frames.
    reader: FrameReader,
}

/// One QUIC connection speaking HTTP/3.
#[derive(Debug)]
pub(super) struct H3 {
    rt: Arc<H3Rt>,
    /// The connection, from the connect until it is dropped (closed,
    /// failed, or gone at the stop).
    conn: Option<Box<quinn_proto::Connection>>,
    /// Its handle in the worker's endpoint.
    pub(super) handle: ConnectionHandle,
    /// The worker's UDP socket it sends on (`quic.rs`).
    pub(super) sock: u8,
    /// quinn said the connection is drained (and the endpoint was told).
    pub(super) drained: bool,
    /// Keep-alive: a PING after this long without a packet from the
    /// server (ns; 0: none), and when the next is due.
    ping_every: u64,
    next_ping: u64,
    /// The keep-alive's grid, as a mask: a PING falls due on a multiple of
    /// a power of two of ns, about a sixteenth of the interval (at most
    /// ~1 s), so that the PINGs of idle connections due within one step
    /// go out in one wakeup and one batch of sends, at most one step late.
    ping_grid: u64,
    /// The handshake is done, or 0-RTT lets requests go before it is.
    connected: bool,
    /// Requests went out as 0-RTT data; the handshake is still to finish.
    early: bool,
    /// When the connect started (ns), for the handshake's time.
    pub(super) started: u64,
    /// A stream opened ahead for the next request (see the module doc).
    spare: Option<StreamId>,
    /// Per in-flight entry: its stream and response, found by stream.
    lanes: Lanes,
    /// Entries in flight, in the order written (the first times out first).
    order: VecDeque<u16>,
    /// The server's GOAWAY id: no request goes out on this connection any
    /// more.
    goaway: Option<u64>,
    /// The server's unidirectional streams.
    peer_uni: Vec<PeerUni>,
    /// Entries handed back and not yet given to the loop.
    handed: Vec<u16>,
    /// Entries failed by the stream alone and not yet given to the loop.
    failed: Vec<(u16, ErrorKind)>,
    /// quinn's next timer, ns since the run started (`u64::MAX`: none).
    pub(super) timer_ns: u64,
    /// Packets may be owed (something was written, read or timed).
    pub(super) owed: bool,
    /// In the worker's list of connections to drive after a read.
    pub(super) queued: bool,
}

impl H3 {
    /// The state for a connection not yet made.
    pub(super) fn new(rt: Arc<H3Rt>, depth: usize) -> H3 {
        H3 {
            rt,
            conn: None,
            handle: ConnectionHandle(usize::MAX),
            sock: 0,
            drained: false,
            ping_every: 0,
            next_ping: u64::MAX,
            ping_grid: 0,
            connected: false,
            early: false,
            started: 0,
            spare: None,
            lanes: Lanes::new(depth),
            order: VecDeque::new(),
            goaway: None,
            peer_uni: Vec::new(),
            handed: Vec::new(),
            failed: Vec::new(),
            timer_ns: u64::MAX,
            owed: false,
            queued: false,
        }
    }

    /// Takes a connection just made by the endpoint.
    pub(super) fn attach(&mut self, handle: ConnectionHandle, conn: quinn_proto::Connection, sock: u8, now: u64) {
        self.handle = handle;
        self.started = now;
        self.early = false;
        self.sock = sock;
        self.drained = false;
        self.ping_every = 0;
        self.next_ping = u64::MAX;
        self.conn = Some(Box::new(conn));
        self.connected = false;
        self.goaway = None;
        self.spare = None;
        self.peer_uni.clear();
        self.owed = true;
    }

    /// The connection, if one is made.
    pub(super) fn conn(&mut self) -> Option<&mut quinn_proto::Connection> {
        self.conn.as_deref_mut()
    }

    /// Drops the connection: the worker tells the endpoint it is gone.
    pub(super) fn take_conn(&mut self) -> Option<Box<quinn_proto::Connection>> {
        self.connected = false;
        self.early = false;
        self.spare = None;
        self.timer_ns = u64::MAX;
        self.owed = false;
        self.conn.take()
    }

    /// Requests that may be in flight now: `--streams` while a stream is
    /// in hand and no GOAWAY came, else only those already out.
    #[inline]
    pub(super) fn capacity(&self) -> u16 {
        if self.connected && self.goaway.is_none() && self.spare.is_some() {
            self.rt.streams.max(1).min(self.lanes.len() as u16)
        } else {
            self.in_flight()
        }
    }

    /// Requests issued and not yet answered.
    #[inline]
    pub(super) fn in_flight(&self) -> u16 {
        self.order.len() as u16
    }

    /// The entry written first, if any is in flight.
    #[inline]
    pub(super) fn oldest(&self) -> Option<u16> {
        self.order.front().copied()
    }

    /// quinn's next timer, or the next keep-alive PING.
    #[inline]
    pub(super) fn deadline(&self) -> Option<u64> {
        let d = self.timer_ns.min(self.next_ping);
        (d != u64::MAX).then_some(d)
    }

    /// Something arrived from the server at `now`: the next keep-alive
    /// PING moves on.
    #[inline]
    pub(super) fn heard(&mut self, now: u64) {
        if self.ping_every != 0 {
            self.next_ping = self.ping_after(now);
        }
    }

    /// When the keep-alive is due if nothing is heard after `now`: the
    /// interval on, rounded up to the grid.
    #[inline]
    fn ping_after(&self, now: u64) -> u64 {
        (now + self.ping_every + self.ping_grid) & !self.ping_grid
    }

    /// The keep-alive is due at `now`: a PING goes out (acknowledged, it
    /// keeps both sides' idle timers from running out).
    pub(super) fn keepalive(&mut self, now: u64) {
        if self.ping_every != 0
            && now >= self.next_ping
            && let Some(conn) = self.conn.as_deref_mut()
        {
            conn.ping();
            self.owed = true;
            self.next_ping = self.ping_after(now);
        }
    }

    /// Forgets the requests (the loop counted those in flight); the
    /// connection itself is the worker's to drop (`quic.rs`).
    pub(super) fn reset(&mut self) {
        self.lanes.reset();
        self.order.clear();
        self.handed.clear();
        self.failed.clear();
    }

    /// Sends request `req` on the spare stream, taking a free entry.
    pub(super) fn issue(&mut self, req: u8) -> Issued {
        let (Some(id), Some(conn)) = (self.spare.take(), self.conn.as_deref_mut()) else {
            return Issued::Refused(ErrorKind::SendStalled);
        };
        let Some(e) = self.lanes.take(id).map(usize::from) else {
            self.spare = Some(id);
            return Issued::Refused(ErrorKind::SendStalled);
        };
        let frames = &self.rt.requests[req as usize].frames;
        let mut s = conn.send_stream(id);
        let n = s.write(frames).unwrap_or(0);
        if n == frames.len() {
            let _ = s.finish();
        }
        self.lanes[e].unsent = (frames.len() - n) as u32;
        self.order.push_back(e as u16);
        self.spare = conn.streams().open(Dir::Bi);
        self.owed = true;
        Issued::Entry(e as u16)
    }

    /// Entry `e` timed out: its stream is reset (H3_REQUEST_CANCELLED) and
    /// it fails alone; the connection stays (quinn's idle timeout ends one
    /// that went silent).
    pub(super) fn cancel(&mut self, e: u16) -> Output {
        if let Some(id) = self.lanes[e as usize].id
            && let Some(conn) = self.conn.as_deref_mut()
        {
            let code = VarInt::from_u64(error::REQUEST_CANCELLED).expect("a small code");
            let _ = conn.send_stream(id).reset(code);
            let _ = conn.recv_stream(id).stop(code);
            self.owed = true;
        }
        self.free(e);
        Output::Failed {
            entry: e,
            kind: ErrorKind::Timeout,
        }
    }

    /// Closes the connection with application error `code`: its
    /// CONNECTION_CLOSE is owed.
    pub(super) fn close(&mut self, now: Instant, code: u64) {
        if let Some(conn) = self.conn.as_deref_mut() {
            let code = VarInt::from_u64(code).expect("a small code");
            conn.close(now, code, bytes::Bytes::new());
            self.owed = true;
        }
    }

    fn free(&mut self, e: u16) {
        self.lanes.release(e);
        // Usually the front: responses mostly come in the order written.
        if let Some(i) = self.order.iter().position(|&x| x == e) {
            self.order.remove(i);
        }
    }

    fn lane_of(&self, id: StreamId) -> Option<u16> {
        self.lanes.of(id)
    }

    /// The next thing the loop must act on, after datagrams or a timeout
    /// were handed to the connection: `Opened` once the handshake is done,
    /// a response, a request failed or handed back, the connection's end,
    /// or `Taken` when nothing is left (`Ready` first if streams became
    /// free). Endpoint events go to `ep` on the way.
    pub(super) fn poll(&mut self, ep: &mut Endpoint, cx: &Cx<'_>, t: &mut Tally<'_>) -> Output {
        if let Some(e) = self.handed.pop() {
            return Output::Retry(e);
        }
        if let Some((entry, kind)) = self.failed.pop() {
            return Output::Failed { entry, kind };
        }
        let handle = self.handle;
        let Some(conn) = self.conn.as_deref_mut() else {
            return Output::Taken;
        };
        while let Some(ev) = conn.poll_endpoint_events() {
            self.drained |= ev.is_drained();
            if let Some(back) = ep.handle_event(handle, ev) {
                conn.handle_event(back);
            }
        }
        let mut ready = false;
        while let Some(ev) = self.conn.as_deref_mut().and_then(|c| c.poll()) {
            let out = match ev {
                Event::Connected => Some(self.on_connected(cx, t)),
                Event::ConnectionLost { reason } => Some(self.lost(&reason)),
                Event::Stream(StreamEvent::Readable { id }) => self.on_readable(cx, t, id),
                Event::Stream(StreamEvent::Opened { dir: Dir::Uni }) => {
                    self.accept_uni();
                    None
                }
                Event::Stream(StreamEvent::Available { dir: Dir::Bi }) => {
                    if self.spare.is_none() {
                        self.spare = self.conn.as_deref_mut().and_then(|c| c.streams().open(Dir::Bi));
                        ready |= self.spare.is_some();
                    }
                    None
                }
                Event::Stream(StreamEvent::Writable { id }) => {
                    self.write_rest(cx, id);
                    None
                }
                Event::Stream(StreamEvent::Stopped { id, error_code }) => self.on_stopped(cx, t, id, error_code),
                _ => None,
            };
            self.owed = true;
            if let Some(out) = out {
                return out;
            }
            if let Some(e) = self.handed.pop() {
                return Output::Retry(e);
            }
        }
        if ready { Output::Ready } else { Output::Taken }
    }

    /// With `--h3-0rtt` and a session to resume: the connection takes
    /// requests now, as 0-RTT data, before its handshake is done. True
    /// when it does.
    pub(super) fn early_open(&mut self) -> bool {
        if !self.rt.zero_rtt || !self.conn.as_deref().is_some_and(|c| c.has_0rtt()) {
            return false;
        }
        self.early = true;
        self.open_streams();
        true
    }

    /// The control stream and its SETTINGS, and a stream opened ahead for
    /// the first request.
    fn open_streams(&mut self) {
        self.connected = true;
        if let Some(conn) = self.conn.as_deref_mut() {
            if let Some(id) = conn.streams().open(Dir::Uni) {
                // A control stream is never finished (RFC 9114 §6.2.1).
                let _ = conn.send_stream(id).write(&h3::control_preamble());
            }
            self.spare = conn.streams().open(Dir::Bi);
            self.owed = true;
        }
    }

    /// The handshake is done. After 0-RTT: the server accepted the early
    /// requests (they stand), or rejected them, and quinn forgot their
    /// streams: every one is handed back and sent again on new streams,
    /// after a new control stream. Otherwise the streams open now.
    fn on_connected(&mut self, cx: &Cx<'_>, t: &mut Tally<'_>) -> Output {
        let now = t.now;
        if self.early {
            self.early = false;
            let accepted = self.conn.as_deref().is_some_and(|c| c.accepted_0rtt());
            t.st.h2_mut().h3_0rtt[usize::from(!accepted)] += 1;
            if !accepted {
                let lost: Vec<u16> = self.order.iter().copied().collect();
                for e in lost {
                    match self.reject(cx, t, e) {
                        Output::Retry(e) => self.handed.push(e),
                        Output::Failed { entry, kind } => self.failed.push((entry, kind)),
                        _ => {}
                    }
                }
                self.spare = None;
                self.open_streams();
            }
        } else {
            self.open_streams();
        }
        if let Some(conn) = self.conn.as_deref_mut() {
            self.ping_every = match self.rt.keepalive {
                Keepalive::Off => 0,
                Keepalive::Every(d) => d,
                Keepalive::Auto => negotiated_idle(conn, self.rt.idle_timeout).map_or(0, |idle| (idle / 2).max(1)),
            };
            if self.ping_every != 0 {
                self.ping_grid = ping_grid(self.ping_every);
                self.next_ping = self.ping_after(now);
            }
        }
        Output::Opened
    }

    /// The rest of a request a stream's window did not take at first.
    fn write_rest(&mut self, cx: &Cx<'_>, id: StreamId) {
        let Some(e) = self.lane_of(id) else { return };
        let lane = &mut self.lanes[e as usize];
        if lane.unsent == 0 {
            return;
        }
        let frames = &self.rt.requests[cx.entries[e as usize].req as usize].frames;
        let Some(conn) = self.conn.as_deref_mut() else { return };
        let mut s = conn.send_stream(id);
        let from = frames.len() - lane.unsent as usize;
        let n = s.write(&frames[from..]).unwrap_or(0);
        lane.unsent -= n as u32;
        if lane.unsent == 0 {
            let _ = s.finish();
        }
    }

    /// The server stopped reading a request stream: rejected, the request
    /// is handed back; otherwise its answer (or reset) still decides.
    fn on_stopped(&mut self, cx: &Cx<'_>, t: &mut Tally<'_>, id: StreamId, code: VarInt) -> Option<Output> {
        let e = self.lane_of(id)?;
        (code.into_inner() == error::REQUEST_REJECTED).then(|| self.reject(cx, t, e))
    }

    /// Entry `e` was not processed: handed back, unless it was too often.
    fn reject(&mut self, cx: &Cx<'_>, t: &mut Tally<'_>, e: u16) -> Output {
        self.free(e);
        if cx.entries[e as usize].handed_back + 1 >= MAX_HANDED_BACK {
            Output::Failed {
                entry: e,
                kind: ErrorKind::StreamReset,
            }
        } else {
            t.st.h2_mut().retried += 1;
            Output::Retry(e)
        }
    }

    fn accept_uni(&mut self) {
        let Some(conn) = self.conn.as_deref_mut() else { return };
        while let Some(id) = conn.streams().accept(Dir::Uni) {
            if self.peer_uni.len() < MAX_PEER_UNI {
                self.peer_uni.push(PeerUni {
                    id,
                    kind: None,
                    reader: FrameReader::new(),
                });
            } else {
                let code = VarInt::from_u64(error::STREAM_CREATION_ERROR).expect("a small code");
                let _ = conn.recv_stream(id).stop(code);
            }
        }
    }

    fn on_readable(&mut self, cx: &Cx<'_>, t: &mut Tally<'_>, id: StreamId) -> Option<Output> {
        if id.dir() == Dir::Uni {
            return self.on_peer_uni(cx, t, id);
        }
        let e = self.lane_of(id)?;
        let conn = self.conn.as_deref_mut()?;
        let mut rs = conn.recv_stream(id);
        let Ok(mut chunks) = rs.read(true) else {
            return None;
        };
        let req = &cx.w.requests[cx.entries[e as usize].req as usize];
        let checks = req.checks.as_deref();
        let lane = &mut self.lanes[e as usize];
        let mut end = None;
        loop {
            match chunks.next(usize::MAX) {
                Ok(Some(chunk)) => {
                    if let Err(kind) = read_response(lane, checks, &chunk.bytes) {
                        end = Some(StreamEnd::Failed(kind));
                        break;
                    }
                }
                Ok(None) => {
                    end = Some(if lane.status == 0 || !lane.reader.at_boundary() {
                        StreamEnd::Failed(ErrorKind::H3Protocol)
                    } else {
                        StreamEnd::Complete(lane.status)
                    });
                    break;
                }
                Err(ReadError::Blocked) => break,
                Err(ReadError::Reset(code)) => {
                    t.st.h2_mut().h3_resets[h3::ErrorCode::from_u64(code.into_inner()) as usize] += 1;
                    end = Some(reset_end(code));
                    break;
                }
            }
        }
        let _ = chunks.finalize();
        match end? {
            StreamEnd::Complete(status) => {
                let lane = &mut self.lanes[e as usize];
                let failed_checks = checks.map_or(0, |c| c.finish(&mut lane.check, status));
                self.free(e);
                Some(Output::Response(Response {
                    entry: e,
                    status,
                    keep_alive: true,
                    failed_checks,
                }))
            }
            StreamEnd::Rejected => Some(self.reject(cx, t, e)),
            StreamEnd::Failed(kind) => {
                if kind == ErrorKind::H3Protocol
                    && let Some(conn) = self.conn.as_deref_mut()
                {
                    let code = VarInt::from_u64(error::MESSAGE_ERROR).expect("a small code");
                    let _ = conn.recv_stream(id).stop(code);
                }
                self.free(e);
                Some(Output::Failed { entry: e, kind })
            }
        }
    }

    /// Bytes on one of the server's unidirectional streams: the control
    /// stream's frames are read (a GOAWAY acts), QPACK's streams are
    /// drained (with a table of 0 bytes they carry nothing soakd needs),
    /// any other type is refused.
    fn on_peer_uni(&mut self, cx: &Cx<'_>, t: &mut Tally<'_>, id: StreamId) -> Option<Output> {
        let i = self.peer_uni.iter().position(|p| p.id == id)?;
        let conn = self.conn.as_deref_mut()?;
        let mut rs = conn.recv_stream(id);
        let Ok(mut chunks) = rs.read(true) else {
            return None;
        };
        let mut goaway = None;
        let mut broken = false;
        let mut refuse = false;
        while let Ok(Some(chunk)) = chunks.next(usize::MAX) {
            let p = &mut self.peer_uni[i];
            let mut b: &[u8] = &chunk.bytes;
            if p.kind.is_none() {
                // A type split across chunks is not expected of a stream's
                // first byte or two; read as malformed it would end the
                // connection, so it is refused like an unknown type.
                match h3::get_varint(b) {
                    Some((k, n)) => {
                        p.kind = Some(k);
                        b = &b[n..];
                    }
                    None => {
                        refuse = true;
                        break;
                    }
                }
            }
            match p.kind {
                Some(stream_type::CONTROL) => {
                    while !b.is_empty() {
                        match p.reader.next(b) {
                            Ok((used, frame)) => {
                                if let Some(Frame::Goaway(id)) = frame {
                                    goaway = Some(id);
                                }
                                b = &b[used..];
                            }
                            Err(_) => {
                                broken = true;
                                break;
                            }
                        }
                    }
                }
                Some(stream_type::QPACK_ENCODER | stream_type::QPACK_DECODER) => {}
                _ => {
                    refuse = true;
                    break;
                }
            }
            if broken {
                break;
            }
        }
        let _ = chunks.finalize();
        if refuse {
            let code = VarInt::from_u64(error::STREAM_CREATION_ERROR).expect("a small code");
            let _ = conn.recv_stream(id).stop(code);
        }
        if broken {
            log_once("h3_control_frame", || {
                "HTTP/3: the server's control stream does not parse as frames; the connection is closed with H3_FRAME_ERROR".into()
            });
            return Some(Output::Error(ErrorKind::H3Protocol));
        }
        goaway.and_then(|id| self.on_goaway(cx, t, id))
    }

    /// A GOAWAY: no new request on this connection; those on streams at or
    /// above `id` were not processed and are handed back; once nothing is
    /// in flight the connection ends.
    fn on_goaway(&mut self, cx: &Cx<'_>, t: &mut Tally<'_>, id: u64) -> Option<Output> {
        t.st.h2_mut().h3_goaways += 1;
        self.goaway = Some(self.goaway.map_or(id, |g| g.min(id)));
        let above: Vec<u16> = self
            .order
            .iter()
            .copied()
            .filter(|&e| {
                self.lanes[e as usize]
                    .id
                    .is_some_and(|s| VarInt::from(s).into_inner() >= id)
            })
            .collect();
        for e in above {
            match self.reject(cx, t, e) {
                Output::Retry(e) => self.handed.push(e),
                Output::Failed { entry, kind } => self.failed.push((entry, kind)),
                _ => {}
            }
        }
        if self.order.is_empty() && self.handed.is_empty() && self.failed.is_empty() {
            return Some(Output::End(Ending::SentAway));
        }
        Some(Output::Ready)
    }

    /// The connection is gone: what the reason means for the loop.
    fn lost(&mut self, reason: &ConnectionError) -> Output {
        let was_connected = self.connected;
        self.connected = false;
        self.spare = None;
        let graceful = match reason {
            ConnectionError::ApplicationClosed(c) => c.error_code.into_inner() == error::NO_ERROR,
            ConnectionError::ConnectionClosed(c) => u64::from(c.error_code) == 0,
            ConnectionError::LocallyClosed => true,
            _ => false,
        };
        if graceful && was_connected {
            return if self.order.is_empty() {
                Output::End(if self.goaway.is_some() {
                    Ending::SentAway
                } else {
                    Ending::Closed
                })
            } else {
                Output::Error(ErrorKind::Eof)
            };
        }
        Output::Error(lost_kind(reason, was_connected))
    }
}

/// The idle timeout both sides keep (ns): the smaller of the two
/// announced, where 0 means none (RFC 9000 §10.1). quinn-proto keeps the
/// server's transport parameters to itself but will encode them, so the
/// one parameter is read back from their encoding.
/// The keep-alive grid's mask for PINGs every `every` ns (see
/// `H3::ping_grid`): the largest power of two of ns not above a sixteenth
/// of it, from 1 µs to 2^30 ns (~1.07 s), less one.
fn ping_grid(every: u64) -> u64 {
    let step = (every / 16).clamp(1 << 10, 1 << 30);
    (1u64 << (63 - step.leading_zeros())) - 1
}

fn negotiated_idle(conn: &quinn_proto::Connection, ours: u64) -> Option<u64> {
    let theirs = conn
        .crypto_session()
        .transport_parameters()
        .ok()
        .flatten()
        .and_then(|tp| {
            let mut raw = Vec::new();
            tp.write(&mut raw);
            max_idle_ms(&raw)
        })
        .map_or(0, |ms| ms * 1_000_000);
    match (ours, theirs) {
        (0, 0) => None,
        (0, t) => Some(t),
        (o, 0) => Some(o),
        (o, t) => Some(o.min(t)),
    }
}

/// The max_idle_timeout (id 0x01, milliseconds) in encoded transport
/// parameters (RFC 9000 §18: id, length, value, each a varint but the
/// value's own bytes), if present.
fn max_idle_ms(mut raw: &[u8]) -> Option<u64> {
    while !raw.is_empty() {
        let (id, n) = h3::get_varint(raw)?;
        raw = &raw[n..];
        let (len, n) = h3::get_varint(raw)?;
        raw = &raw[n..];
        let len = usize::try_from(len).ok().filter(|&l| l <= raw.len())?;
        if id == 0x01 {
            return h3::get_varint(&raw[..len]).map(|(v, _)| v);
        }
        raw = &raw[len..];
    }
    None
}

/// `now` (ns since the run started) as quinn's clock.
#[inline]
pub(super) fn instant(start: Instant, now: u64) -> Instant {
    start + Duration::from_nanos(now)
}

/// quinn's timer as ns since the run started (`u64::MAX`: none).
#[inline]
pub(super) fn timer_ns(start: Instant, at: Option<Instant>) -> u64 {
    at.map_or(u64::MAX, |at| at.saturating_duration_since(start).as_nanos() as u64)
}

/// Moves entries from `old` to `new` (see `Protocol::relayout`): lanes are
/// indexed by entry, so each in-flight one keeps its index.
pub(super) fn relayout(h: &H3, old: &[Inflight], new: &mut [Inflight]) {
    for &e in &h.order {
        new[e as usize] = old[e as usize];
    }
}

#[cfg(test)]
mod tests {
    use super::ping_grid;

    /// A sixteenth of the interval, down to a power of two of ns, within
    /// 1 µs and ~1 s: 15 s (half a 30 s idle timeout) steps by 537 ms.
    #[test]
    fn the_keepalive_grid_is_a_power_of_two_near_a_sixteenth() {
        assert_eq!(ping_grid(15_000_000_000), (1 << 29) - 1);
        assert_eq!(ping_grid(2_000_000_000), (1 << 26) - 1);
        assert_eq!(ping_grid(1_000), (1 << 10) - 1);
        assert_eq!(ping_grid(u64::MAX / 2), (1 << 30) - 1);
        for every in [3_000_000u64, 999_999_999, 60_000_000_000] {
            let step = ping_grid(every) + 1;
            assert!(
                step.is_power_of_two() && step <= (every / 16).max(1 << 10),
                "{every}: {step}"
            );
        }
    }
}
