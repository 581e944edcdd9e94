//! One HTTP/3 connection of the built-in target, over a quinn-proto
//! [`Connection`]: its request streams, the client's unidirectional
//! streams, our control stream, and the faults that act on it; plus the
//! per-thread state every connection answers from ([`Serving`]).
//!
//! Kept apart from the QUIC loop (`h3.rs`) because this is the HTTP/3
//! part: it sees quinn-proto's application events (streams opened,
//! readable, writable, acknowledged) and never a socket or a datagram.
//!
//! Why it is shaped like this:
//!
//! * Responses are whole request-stream contents rendered at start (the
//!   HEADERS frame, DATA, a trailer HEADERS for `/chunked`) held as
//!   [`Bytes`], so answering a stream hands quinn a reference-counted
//!   clone: no formatting, no copy, no allocation of ours.
//! * A request is answered once it has arrived whole (the stream's FIN),
//!   after `--delay` like the other protocols; its body is read and
//!   dropped.
//! * An answered stream is kept until quinn says the client acknowledged
//!   all of it (`StreamEvent::Finished`): a `goaway@N` connection closes
//!   only then, since `Connection::close` abandons data not yet delivered.
//! * Stream credit follows use: quinn-proto recycles a finished request
//!   stream's receive state (its `Recv` and reassembly buffer, ~370
//!   bytes) onto the stream id its credit grants next, and never frees
//!   it, so a connection keeps one for every stream it may have open,
//!   used or not. Granting 100 cost ~36 KiB a connection once a paced
//!   client had sent 100 requests. The handshake grants
//!   [`INITIAL_REQUESTS`] (what one open stream gets); each connection
//!   then grants twice the most it had open plus [`HEADROOM`]
//!   ([`stream_credit`]), up to [`MAX_REQUESTS`], raised as soon as more
//!   are open. A grant is never lowered: quinn would keep the recycled
//!   states of the streams given back in its free list anyway.
//! * An idle connection holds quinn's state and this struct with empty
//!   vectors but for the client's two or three unidirectional streams.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use quinn_proto::{Connection, Dir, Event, ReadError, StreamEvent, StreamId, VarInt, WriteError};

use super::fault::Every;
use super::h2_responses::{self, BAD_REQUEST, TOO_LARGE};
use super::outage::Schedule;
use super::responses::Route;
use super::{Degrade, Fault, FaultMode};
use crate::wire::h3::{self, Frame, FrameError, FrameReader, error, stream_type};

/// The faults HTTP/3 acts out (`spawn` refuses the others with `--h3`).
pub(super) const H3_FAULTS: [FaultMode; 2] = [FaultMode::Goaway, FaultMode::NeverAnswer];

/// Concurrent request streams a client may open, at most: each connection
/// grants what its client uses ([`stream_credit`]), up to this.
pub(super) const MAX_REQUESTS: u32 = 100;
/// The request streams the handshake grants ([`stream_credit`] of one
/// open): quinn keeps a recycled receive state on every stream id it has
/// granted, and a grant is never taken back.
pub(super) const INITIAL_REQUESTS: u32 = 18;

/// Request streams granted beyond twice the most a connection had open:
/// room for a burst within a round trip before our MAX_STREAMS arrives.
const HEADROOM: u32 = 16;

/// The concurrent request streams a connection whose client had at most
/// `peak` open at once is granted (at most what the handshake granted).
fn stream_credit(peak: u32) -> u32 {
    peak.saturating_mul(2).saturating_add(HEADROOM).min(MAX_REQUESTS)
}

/// A response due at `due` on stream `stream` of the connection with
/// handle `handle` and serial `serial` (a handle is reused once its
/// connection is gone; the serial tells the connections apart).
pub(super) struct Due {
    pub(super) due: Instant,
    pub(super) handle: usize,
    pub(super) serial: u64,
    pub(super) stream: StreamId,
}

/// What the HTTP/3 thread has done, shared with [`super::TargetHandle`]
/// (relaxed counters: each is written by the one thread, read any time).
#[derive(Debug, Default)]
pub(super) struct H3Counters {
    answered: AtomicU64,
    rejected: AtomicU64,
    goaways: AtomicU64,
}

impl H3Counters {
    pub(super) fn snapshot(&self) -> H3Counts {
        H3Counts {
            answered: self.answered.load(Ordering::Relaxed),
            rejected: self.rejected.load(Ordering::Relaxed),
            goaways: self.goaways.load(Ordering::Relaxed),
        }
    }
}

/// What the target's HTTP/3 has done so far (see
/// [`super::TargetHandle::h3_counts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct H3Counts {
    /// Requests whose whole response was handed to QUIC, its stream
    /// finished.
    pub answered: u64,
    /// Request streams refused with H3_REQUEST_REJECTED (opened above a
    /// GOAWAY, or on a connection closing): never processed.
    pub rejected: u64,
    /// GOAWAY frames sent (`goaway@N`).
    pub goaways: u64,
}

/// What every HTTP/3 connection of the thread answers from.
pub(super) struct Serving {
    /// Every response's whole stream content, indexed as
    /// `h2_responses`' table (route × 2 + HEAD, then 400 and 431).
    table: Vec<Bytes>,
    /// Our control stream's first bytes (type and SETTINGS).
    preamble: Bytes,
    delay: Duration,
    degrade: Degrade,
    started: Instant,
    /// `--brownout-every`: the extra delay of a response now.
    brownouts: Schedule,
    /// `goaway` or `never-answer`, if given.
    fault: Option<Fault>,
    /// Requests since `never-answer@N` last hit (per thread, as the
    /// HTTP/1 faults count).
    fault_count: Every,
    /// Delayed responses in due order: all delays are equal (or grow with
    /// time under `--slowdown`), so arrival order is due order and a FIFO
    /// is the whole timer (one deadline: its front).
    pub(super) queue: VecDeque<Due>,
    /// Huffman-decoded QPACK strings (reused, see `decode_block`).
    scratch: Vec<u8>,
    /// The serial of the next connection.
    next_serial: u64,
    /// Answers, refusals and GOAWAYs, for `TargetHandle::h3_counts`.
    counts: Arc<H3Counters>,
}

impl Serving {
    /// Renders the responses; only runs at start.
    pub(super) fn new(
        delay: Duration,
        degrade: Degrade,
        fault: Option<Fault>,
        brownouts: Schedule,
        counts: Arc<H3Counters>,
    ) -> Serving {
        let table = h2_responses::render_table(h3::encode_block)
            .into_iter()
            .map(|r| {
                let mut out = Vec::new();
                if let Some(info) = &r.info {
                    h3::encode_headers(&mut out, info);
                }
                h3::encode_headers(&mut out, &r.head);
                if !r.body.is_empty() {
                    h3::encode_data(&mut out, r.body);
                }
                if let Some(trailers) = &r.trailers {
                    h3::encode_headers(&mut out, trailers);
                }
                Bytes::from(out)
            })
            .collect();
        Serving {
            table,
            preamble: Bytes::from(h3::control_preamble()),
            delay,
            degrade,
            started: Instant::now(),
            brownouts,
            fault: fault.filter(|f| H3_FAULTS.contains(&f.mode)),
            fault_count: Every::default(),
            queue: VecDeque::new(),
            scratch: Vec::new(),
            next_serial: 0,
            counts,
        }
    }

    /// When the next delayed response is due.
    pub(super) fn next_due(&self) -> Option<Instant> {
        self.queue.front().map(|d| d.due)
    }

    /// Pops the next delayed response due by `now`.
    pub(super) fn pop_due(&mut self, now: Instant) -> Option<Due> {
        self.queue.pop_front_if(|d| d.due <= now)
    }

    /// A serial for a new connection.
    pub(super) fn serial(&mut self) -> u64 {
        self.next_serial += 1;
        self.next_serial
    }
}

/// What a call into a connection needs besides the connection.
pub(super) struct Cx<'a> {
    pub(super) th: &'a mut Serving,
    /// The connection's handle (for the delay queue).
    pub(super) handle: usize,
    pub(super) now: Instant,
}

/// Where a request stream is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Its request is arriving.
    Receiving,
    /// Arrived whole, its response waits for the delay.
    Waiting,
    /// This many bytes of its response are with quinn.
    Sending(u32),
    /// All of it is with quinn and the stream finished; kept until the
    /// client acknowledged it.
    Sent,
}

/// A request stream the client opened.
struct Request {
    id: StreamId,
    frames: FrameReader,
    /// The response (index into the table), known at the HEADERS frame.
    response: Option<u16>,
    phase: Phase,
}

/// What a unidirectional stream of the client's is.
enum UniKind {
    /// Its type has not arrived whole yet: the bytes so far.
    Type([u8; 8], u8),
    /// The client's control stream: its frames are read (and SETTINGS
    /// ignored: with a QPACK table of 0 on our side there is nothing in
    /// them we act on).
    Control(FrameReader),
    /// QPACK's encoder or decoder stream: with no dynamic table there is
    /// nothing on them for us; read and dropped.
    Discard,
}

struct Uni {
    id: StreamId,
    kind: UniKind,
}

/// Why reading a stream stopped short.
enum Problem {
    /// A connection error with this HTTP/3 code.
    Connection(u64),
    /// The request's header section is over the limit: answer 431.
    TooLarge,
}

/// One HTTP/3 connection.
pub(super) struct H3Conn {
    pub(super) conn: Connection,
    pub(super) serial: u64,
    /// Queued to be driven this turn (`h3.rs`'s dirty list).
    pub(super) dirty: bool,
    /// Our control stream, opened once the handshake is done.
    control: Option<StreamId>,
    requests: Vec<Request>,
    uni: Vec<Uni>,
    /// Request streams the client opened (for `goaway@N`).
    opened: u32,
    /// The concurrent request streams granted since the handshake
    /// ([`stream_credit`] of the most open; 0: none yet, the handshake's
    /// [`INITIAL_REQUESTS`] hold).
    credit: u32,
    /// The stream id of the GOAWAY we sent: streams from it on are
    /// refused; the connection closes once those below are answered.
    goaway: Option<u64>,
    /// `never-answer`: nothing on this connection is answered any more.
    muted: bool,
    /// We closed the connection (it drains, then `h3.rs` drops it).
    closed: bool,
}

impl H3Conn {
    pub(super) fn new(conn: Connection, serial: u64) -> H3Conn {
        H3Conn {
            conn,
            serial,
            dirty: false,
            control: None,
            requests: Vec::new(),
            uni: Vec::new(),
            opened: 0,
            credit: 0,
            goaway: None,
            muted: false,
            closed: false,
        }
    }

    /// Acts on one of quinn's application events.
    pub(super) fn on_event(&mut self, cx: &mut Cx<'_>, event: Event) {
        match event {
            Event::Connected => self.open_control(cx),
            Event::Stream(StreamEvent::Opened { dir: Dir::Bi }) => self.accept_requests(cx),
            Event::Stream(StreamEvent::Opened { dir: Dir::Uni }) => self.accept_uni(cx),
            Event::Stream(StreamEvent::Readable { id }) => {
                if id.dir() == Dir::Bi {
                    if let Some(i) = self.find(id) {
                        self.read_request(cx, i);
                    }
                } else if let Some(i) = self.uni.iter().position(|u| u.id == id) {
                    self.read_uni(cx, i);
                }
            }
            Event::Stream(StreamEvent::Writable { id }) => {
                if let Some(i) = self.find(id) {
                    self.pump(cx, i);
                }
            }
            // All of an answered stream is acknowledged.
            Event::Stream(StreamEvent::Finished { id }) => {
                if let Some(i) = self.find(id) {
                    self.requests.swap_remove(i);
                }
            }
            // The client wants no more of a response: RESET_STREAM, as
            // the peer of a STOP_SENDING must.
            Event::Stream(StreamEvent::Stopped { id, error_code }) => {
                let _ = self.conn.send_stream(id).reset(error_code);
                if let Some(i) = self.find(id) {
                    self.requests.swap_remove(i);
                }
            }
            // Stream credit, handshake progress, datagrams (none are
            // enabled), the loss of the connection (`h3.rs` drops it once
            // drained): nothing to do.
            Event::Stream(StreamEvent::Available { .. })
            | Event::HandshakeDataReady
            | Event::ConnectionLost { .. }
            | Event::DatagramReceived
            | Event::DatagramsUnblocked => {}
        }
    }

    /// After a batch of events: a connection under a GOAWAY closes
    /// gracefully once every stream below it is answered and acknowledged.
    pub(super) fn settle(&mut self, cx: &mut Cx<'_>) {
        if self.goaway.is_some() && self.requests.is_empty() && !self.closed {
            self.close(cx, error::NO_ERROR);
        }
    }

    /// Closes the connection with an HTTP/3 code.
    fn close(&mut self, cx: &mut Cx<'_>, code: u64) {
        self.closed = true;
        self.conn
            .close(cx.now, VarInt::from_u64(code).unwrap_or(VarInt::MAX), Bytes::new());
    }

    fn find(&self, id: StreamId) -> Option<usize> {
        self.requests.iter().position(|r| r.id == id)
    }

    /// Opens our control stream and writes its preamble (once).
    fn open_control(&mut self, cx: &mut Cx<'_>) {
        if self.control.is_some() {
            return;
        }
        let Some(id) = self.conn.streams().open(Dir::Uni) else {
            // The client allows us no unidirectional stream: HTTP/3 cannot
            // work (RFC 9114 §6.2.1 needs three).
            return self.close(cx, error::STREAM_CREATION_ERROR);
        };
        self.control = Some(id);
        self.grant(1);
        // A few bytes into a new stream's send buffer: always taken whole.
        let _ = self.conn.send_stream(id).write_chunks(&mut [cx.th.preamble.clone()]);
    }

    /// Takes the request streams the client opened.
    fn accept_requests(&mut self, cx: &mut Cx<'_>) {
        while let Some(id) = self.conn.streams().accept(Dir::Bi) {
            if self.closed || self.goaway.is_some_and(|g| u64::from(id) >= g) {
                // Above the GOAWAY: never processed, the client may send it
                // again elsewhere (RFC 9114 §5.2).
                let code = VarInt::from_u32(error::REQUEST_REJECTED as u32);
                let _ = self.conn.send_stream(id).reset(code);
                let _ = self.conn.recv_stream(id).stop(code);
                cx.th.counts.rejected.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            if self.muted {
                continue; // never answered, never read: silence
            }
            self.opened += 1;
            self.requests.push(Request {
                id,
                frames: FrameReader::new(),
                response: None,
                phase: Phase::Receiving,
            });
            if let Some(Fault {
                mode: FaultMode::Goaway,
                every,
            }) = cx.th.fault
                && self.opened == every
            {
                // This stream is the last processed; the GOAWAY names the
                // next client-initiated bidirectional one.
                self.send_goaway(cx, u64::from(id) + 4);
            }
            self.grant(self.requests.len() as u32);
            // Its first bytes may have come with the frame that opened it.
            let i = self.requests.len() - 1;
            self.read_request(cx, i);
        }
    }

    /// Grants the client the request streams [`stream_credit`] gives `open`
    /// streams open at once, if that is more than it has (never less:
    /// credit follows the peak); quinn sends the MAX_STREAMS.
    fn grant(&mut self, open: u32) {
        let credit = stream_credit(open);
        if credit > self.credit {
            self.credit = credit;
            self.conn.set_max_concurrent_streams(Dir::Bi, VarInt::from_u32(credit));
        }
    }

    /// Writes a GOAWAY naming `id` on our control stream.
    fn send_goaway(&mut self, cx: &mut Cx<'_>, id: u64) {
        self.open_control(cx);
        let Some(control) = self.control else { return };
        let mut frame = Vec::with_capacity(10);
        h3::encode_goaway(&mut frame, id);
        let _ = self.conn.send_stream(control).write(&frame);
        self.goaway = Some(id);
        cx.th.counts.goaways.fetch_add(1, Ordering::Relaxed);
    }

    /// Reads what arrived on request stream `i`; answers it once whole.
    fn read_request(&mut self, cx: &mut Cx<'_>, i: usize) {
        let req = &mut self.requests[i];
        let id = req.id;
        let mut stream = self.conn.recv_stream(id);
        let Ok(mut chunks) = stream.read(true) else {
            return; // already finished or stopped
        };
        let (mut fin, mut reset, mut problem) = (false, false, None);
        loop {
            match chunks.next(usize::MAX) {
                Ok(Some(chunk)) => {
                    if let Err(p) = feed_request(req, &chunk.bytes, &mut cx.th.scratch) {
                        problem = Some(p);
                        break;
                    }
                }
                Ok(None) => {
                    fin = true;
                    break;
                }
                Err(ReadError::Blocked) => break,
                Err(ReadError::Reset(_)) => {
                    reset = true;
                    break;
                }
            }
        }
        // Whether it asks for a transmit does not matter: `h3.rs` polls
        // for transmits after every batch of events.
        let _ = chunks.finalize();
        if fin && !req.frames.at_boundary() {
            problem = Some(Problem::Connection(error::FRAME_ERROR));
        }
        match problem {
            Some(Problem::Connection(code)) => return self.close(cx, code),
            Some(Problem::TooLarge) => {
                // Answered before the request is whole, then the rest is
                // refused (RFC 9114 §4.1: STOP_SENDING with H3_NO_ERROR).
                let _ = self.conn.recv_stream(id).stop(VarInt::from_u32(error::NO_ERROR as u32));
                self.requests[i].response = Some(TOO_LARGE as u16);
                return self.complete(cx, i);
            }
            None => {}
        }
        if reset {
            // The client cancelled it: nothing of ours goes on it.
            let code = VarInt::from_u32(error::REQUEST_CANCELLED as u32);
            let _ = self.conn.send_stream(id).reset(code);
            self.requests.swap_remove(i);
            return;
        }
        if fin && self.requests[i].phase == Phase::Receiving {
            self.complete(cx, i);
        }
    }

    /// Request `i` arrived whole: answer it now or after the delay.
    fn complete(&mut self, cx: &mut Cx<'_>, i: usize) {
        let req = &mut self.requests[i];
        // Gives the reader's memory back: the request has no more frames.
        req.frames.reset();
        let never = cx.th.fault.is_some_and(|f| f.mode == FaultMode::NeverAnswer);
        if never && (self.muted || cx.th.fault_count.hit(cx.th.fault.map_or(1, |f| f.every))) {
            // `never-answer`: this request and every later one on the
            // connection stay unanswered; the connection stays open.
            self.muted = true;
            self.requests.swap_remove(i);
            return;
        }
        req.response.get_or_insert(BAD_REQUEST as u16);
        let extra = cx.th.brownouts.extra_delay(cx.now);
        if cx.th.delay.is_zero() && extra.is_zero() {
            req.phase = Phase::Sending(0);
            return self.pump(cx, i);
        }
        req.phase = Phase::Waiting;
        let due = cx.now + cx.th.degrade.delay_at(cx.th.delay, cx.now - cx.th.started) + extra;
        let queue = &mut cx.th.queue;
        queue.push_back(Due {
            due: queue.back().map_or(due, |last| due.max(last.due)),
            handle: cx.handle,
            serial: self.serial,
            stream: req.id,
        });
    }

    /// The delayed response of `stream` is due.
    pub(super) fn deliver(&mut self, cx: &mut Cx<'_>, stream: StreamId) {
        let Some(i) = self.find(stream) else { return };
        if self.requests[i].phase == Phase::Waiting {
            self.requests[i].phase = Phase::Sending(0);
            self.pump(cx, i);
        }
    }

    /// Hands quinn what its send buffer takes of request `i`'s response;
    /// finishes the stream when all of it is in.
    fn pump(&mut self, cx: &mut Cx<'_>, i: usize) {
        let req = &mut self.requests[i];
        let Phase::Sending(sent) = req.phase else { return };
        let bytes = &cx.th.table[usize::from(req.response.unwrap_or(BAD_REQUEST as u16))];
        let mut sent = sent as usize;
        let mut stream = self.conn.send_stream(req.id);
        while sent < bytes.len() {
            // A reference-counted slice of the table's bytes: no copy.
            match stream.write_chunks(&mut [bytes.slice(sent..)]) {
                Ok(w) if w.bytes > 0 => sent += w.bytes,
                Ok(_) | Err(WriteError::Blocked) => break, // `Writable` brings it back
                Err(WriteError::Stopped(_) | WriteError::ClosedStream) => {
                    self.requests.swap_remove(i);
                    return;
                }
            }
        }
        if sent < bytes.len() {
            req.phase = Phase::Sending(sent as u32);
            return;
        }
        req.phase = Phase::Sent;
        if stream.finish().is_err() {
            self.requests.swap_remove(i);
        } else {
            cx.th.counts.answered.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Takes the unidirectional streams the client opened.
    fn accept_uni(&mut self, cx: &mut Cx<'_>) {
        while let Some(id) = self.conn.streams().accept(Dir::Uni) {
            self.uni.push(Uni {
                id,
                kind: UniKind::Type([0; 8], 0),
            });
            let i = self.uni.len() - 1;
            self.read_uni(cx, i);
        }
    }

    /// Reads what arrived on the client's unidirectional stream `i`.
    fn read_uni(&mut self, cx: &mut Cx<'_>, i: usize) {
        let uni = &mut self.uni[i];
        let id = uni.id;
        let mut stream = self.conn.recv_stream(id);
        let Ok(mut chunks) = stream.read(true) else {
            return;
        };
        let (mut end, mut problem) = (false, None);
        loop {
            match chunks.next(usize::MAX) {
                Ok(Some(chunk)) => {
                    if let Err(code) = feed_uni(&mut uni.kind, &chunk.bytes) {
                        problem = Some(code);
                        break;
                    }
                }
                Ok(None) | Err(ReadError::Reset(_)) => {
                    end = true;
                    break;
                }
                Err(ReadError::Blocked) => break,
            }
        }
        let _ = chunks.finalize();
        let control = matches!(uni.kind, UniKind::Control(_));
        match problem {
            // A stream type we do not take (a push stream, which a client
            // must not open, or an unknown one): refused, the connection
            // goes on (RFC 9114 §6.2: unknown types are ignored this way).
            Some(error::STREAM_CREATION_ERROR) => {
                let code = VarInt::from_u32(error::STREAM_CREATION_ERROR as u32);
                let _ = self.conn.recv_stream(id).stop(code);
                self.uni.swap_remove(i);
            }
            Some(code) => self.close(cx, code),
            None if end && control => self.close(cx, error::CLOSED_CRITICAL_STREAM),
            None if end => {
                self.uni.swap_remove(i);
            }
            None => {}
        }
    }
}

/// Feeds a request stream's bytes to its frame reader: the first HEADERS
/// frame picks the response (by `h2_responses`' one route mapping);
/// DATA and trailers are dropped.
fn feed_request(req: &mut Request, mut data: &[u8], scratch: &mut Vec<u8>) -> Result<(), Problem> {
    while !data.is_empty() {
        let (used, frame) = match req.frames.next(data) {
            Ok(next) => next,
            Err(FrameError::TooLarge) => return Err(Problem::TooLarge),
            Err(e) => return Err(Problem::Connection(e.code())),
        };
        data = &data[used..];
        match frame {
            Some(Frame::Headers(block)) if req.response.is_none() => {
                let (mut method, mut head, mut route) = (false, false, None);
                h3::decode_block(block, scratch, |name, value| match name {
                    b":method" => {
                        method = true;
                        head = value == b"HEAD";
                    }
                    b":path" => route = std::str::from_utf8(value).ok().map(Route::of),
                    _ => {}
                })
                .map_err(|_| Problem::Connection(error::QPACK_DECOMPRESSION_FAILED))?;
                let response = match route.filter(|_| method) {
                    Some(route) => h2_responses::index(route, head),
                    None => BAD_REQUEST,
                };
                req.response = Some(response as u16);
            }
            // Control-stream frames have no place on a request stream.
            Some(Frame::Settings(_) | Frame::Goaway(_)) => {
                return Err(Problem::Connection(error::FRAME_UNEXPECTED));
            }
            // Trailers, the body, unknown frames: nothing to answer from.
            Some(Frame::Headers(_) | Frame::Data(_) | Frame::Other(_)) | None => {}
        }
        if used == 0 {
            break; // cannot happen (see `FrameReader::next`); never spin
        }
    }
    Ok(())
}

/// Feeds a unidirectional stream's bytes: its type first, then, on the
/// control stream, frames. The error is an HTTP/3 code;
/// `STREAM_CREATION_ERROR` refuses only the stream.
fn feed_uni(kind: &mut UniKind, mut data: &[u8]) -> Result<(), u64> {
    if let UniKind::Type(buf, len) = kind {
        let had = usize::from(*len);
        let n = (8 - had).min(data.len());
        buf[had..had + n].copy_from_slice(&data[..n]);
        let Some((t, size)) = h3::get_varint(&buf[..had + n]) else {
            *len = (had + n) as u8;
            return Ok(());
        };
        data = &data[size - had..];
        *kind = match t {
            stream_type::CONTROL => UniKind::Control(FrameReader::new()),
            stream_type::QPACK_ENCODER | stream_type::QPACK_DECODER => UniKind::Discard,
            _ => return Err(error::STREAM_CREATION_ERROR),
        };
    }
    let UniKind::Control(frames) = kind else {
        return Ok(()); // dropped
    };
    while !data.is_empty() {
        let (used, frame) = frames.next(data).map_err(FrameError::code)?;
        data = &data[used..];
        if let Some(Frame::Headers(_) | Frame::Data(_)) = frame {
            return Err(error::FRAME_UNEXPECTED);
        }
        // SETTINGS: nothing in them changes what we send (no dynamic
        // table, no push); the client's GOAWAY: it opens no more
        // streams, and those it has are answered as usual.
        if used == 0 {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A paced client (one stream open at a time) is granted a few
    /// streams, not the handshake's 100: quinn keeps a recycled receive
    /// state on every granted stream id. A client with more open is
    /// granted twice that plus headroom, never more than the handshake.
    #[test]
    fn stream_credit_follows_the_most_open() {
        assert_eq!(stream_credit(1), 2 + HEADROOM);
        assert_eq!(stream_credit(1), INITIAL_REQUESTS);
        assert!(stream_credit(1) < MAX_REQUESTS / 4);
        assert_eq!(stream_credit(10), 20 + HEADROOM);
        assert_eq!(stream_credit(50), MAX_REQUESTS);
        assert_eq!(stream_credit(u32::MAX), MAX_REQUESTS);
        assert!((0..200).all(|n| stream_credit(n + 1) >= stream_credit(n)));
    }
}
