//! One HTTP/2 connection of the built-in target, sans I/O: bytes in,
//! frames out, with the per-thread state it answers from ([`Serving`]:
//! the responses rendered at start, the delay queue, the fault's count).
//!
//! Kept apart from `h2.rs`, which ties it to the target's connections
//! and event loop, so that it can be driven by the unit tests below with
//! the codec's own encoder as the client.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use mio::Token;

use super::fault::{Every, FaultLayer};
use super::grpc::{self, GrpcServing};
use super::h2_responses::{self, BAD_REQUEST, Response, TOO_LARGE, render_table};
use super::outage::Schedule;
use super::responses::Route;
use super::ticks::Ticks;
use super::{Degrade, Fault, FaultMode, MAX_HEAD};
use crate::netio::pool;
use crate::wire::h2::{
    Core, DEFAULT_MAX_FRAME_SIZE, DEFAULT_WINDOW, ErrorCode, Event, HeaderDecoder, HpackError, RecvWindow, Role,
    SendWindow, encode_data, encode_goaway, encode_headers, encode_rst_stream, encode_settings, encode_window_update,
    setting,
};

#[path = "h2_grpc.rs"]
mod calls;

/// Streams one connection may have open at once (advertised as
/// SETTINGS_MAX_CONCURRENT_STREAMS; `max-streams=K` lowers it).
pub(super) const MAX_STREAMS: u32 = 128;
/// The stream window advertised under `window-stall`.
pub(super) const STALL_WINDOW: u32 = 1024;
/// Largest header block accepted (HEADERS and CONTINUATION together).
const MAX_HEADER_BLOCK: u32 = 64 * 1024;
/// HPACK dynamic table the client may use (the protocol's default).
const HPACK_TABLE: usize = 4096;

/// What a stream is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The request is still arriving (its body).
    Receiving,
    /// The request is whole; its response waits for the delay.
    Waiting,
    /// This many body bytes are out; the rest waits for window.
    Sending(u32),
    /// A gRPC stream the server writes on its own time (`Subscribe`'s
    /// pushes, `Chat`'s echoes): nothing to pump.
    Streaming,
}

/// One open stream.
#[derive(Debug, Clone, Copy)]
struct StreamState {
    id: u32,
    /// A gRPC call (`--grpc`): 0 not one, else its method (`grpc::UNARY`
    /// and the others).
    grpc: u8,
    /// A gRPC stream's response head is out.
    opened: bool,
    /// Index into the response table.
    response: u16,
    phase: Phase,
    /// What the client lets us send on it.
    send: SendWindow,
    /// What we let the client send on it.
    recv: RecvWindow,
}

/// A response due at `due` on stream `stream` of connection `token`.
pub(super) struct Due {
    pub(super) due: Instant,
    pub(super) token: Token,
    pub(super) stream: u32,
}

/// Per-thread state every HTTP/2 connection of the thread answers from.
pub(super) struct Serving {
    table: Vec<Response>,
    delay: Duration,
    degrade: Degrade,
    started: Instant,
    fault: Option<Fault>,
    /// Streams since `rst-stream` last hit (per thread, as the HTTP/1
    /// faults count).
    fault_count: Every,
    /// Delayed responses in due order (all delays are equal or grow with
    /// time, so arrival order is due order; one that a brownout's end
    /// would put first waits for those before it).
    pub(super) queue: VecDeque<Due>,
    /// `--brownout-every`: the extra delay of a response now.
    pub(super) brownouts: Schedule,
    /// `--grpc`: the gRPC service (`grpc.rs`).
    pub(super) grpc: Option<GrpcServing>,
    /// `Subscribe`'s pushes due: stream, and the connection's birth.
    pub(super) pushes: Ticks<(u32, Instant)>,
}

impl Serving {
    pub(super) fn new(delay: Duration, degrade: Degrade, fault: Option<Fault>) -> Serving {
        Serving {
            table: render_table(crate::wire::h2::encode_block),
            delay,
            degrade,
            started: Instant::now(),
            fault: fault.filter(|f| f.mode.layer() == FaultLayer::H2),
            fault_count: Every::default(),
            queue: VecDeque::new(),
            brownouts: Schedule::default(),
            grpc: None,
            pushes: Ticks::default(),
        }
    }

    /// The HTTP/2 fault, if any.
    pub(super) fn fault(&self) -> Option<Fault> {
        self.fault
    }
}

/// What a call into a connection needs besides the connection.
pub(super) struct Cx<'a> {
    pub(super) th: &'a mut Serving,
    pub(super) token: Token,
    pub(super) now: Instant,
    pub(super) out: &'a mut Vec<u8>,
    /// The connection's count of responses in the delay queue.
    pub(super) in_flight: &'a mut u32,
}

/// One HTTP/2 connection's state.
pub(super) struct H2Conn {
    /// The connection's frame-level rules, in the server role
    /// (`wire::h2::Core`): the client's SETTINGS, the connection's windows
    /// (its receive window credited back after each read, unless
    /// `window-stall`), header blocks.
    core: Core,
    hpack: HeaderDecoder,
    /// A frame not yet whole (empty, and unallocated, between frames).
    input: Vec<u8>,
    streams: Vec<StreamState>,
    /// The stream window we advertised.
    our_window: u32,
    /// The highest stream the client opened, and the highest answered.
    last_stream: u32,
    last_answered: u32,
    /// Streams the client opened (for `goaway@N`).
    opened: u32,
    max_streams: u32,
    /// The last_stream_id of the GOAWAY we sent, if any.
    goaway: Option<u32>,
    /// Nothing more will be answered: once the output is out, our side
    /// shuts down and input is discarded.
    pub(super) done: bool,
    pub(super) shut: bool,
    /// `settings-flood`: SETTINGS frames go out whenever the socket
    /// takes them.
    pub(super) flooding: bool,
    stall: bool,
    /// gRPC calls' request bodies while they arrive, and replies while
    /// they go out, by stream (empty without `--grpc`).
    /// Both are the thread's pooled buffers (`netio::pool`): a call
    /// allocates nothing once the pool holds a few.
    grpc_in: Vec<(u32, pool::Buf)>,
    grpc_out: Vec<(u32, pool::Buf)>,
    /// `Subscribe` streams: replies left (0: without end), the next `seq`,
    /// the template echoed.
    subs: Vec<(u32, u32, u64, Vec<u8>)>,
    /// When the connection started speaking HTTP/2 (`--max-connection-age`
    /// tells it from a younger one on the same token).
    pub(super) born: Instant,
}

impl H2Conn {
    pub(super) fn new(fault: Option<Fault>) -> H2Conn {
        let mode = fault.map(|f| f.mode);
        let stall = mode == Some(FaultMode::WindowStall);
        let our_window = if stall { STALL_WINDOW } else { DEFAULT_WINDOW };
        H2Conn {
            core: Core::new(Role::Server, DEFAULT_MAX_FRAME_SIZE, MAX_HEADER_BLOCK, DEFAULT_WINDOW),
            hpack: HeaderDecoder::new(HPACK_TABLE, MAX_HEAD),
            input: Vec::new(),
            streams: Vec::new(),
            our_window,
            last_stream: 0,
            last_answered: 0,
            opened: 0,
            max_streams: match fault {
                Some(Fault {
                    mode: FaultMode::MaxStreams,
                    every,
                }) => every,
                _ => MAX_STREAMS,
            },
            goaway: None,
            done: false,
            shut: false,
            flooding: mode == Some(FaultMode::SettingsFlood),
            stall,
            grpc_in: Vec::new(),
            grpc_out: Vec::new(),
            subs: Vec::new(),
            born: Instant::now(),
        }
    }

    /// Streams open now (the fuzzer's check of the limit).
    pub(super) fn streams_open(&self) -> usize {
        self.streams.len()
    }

    /// Our SETTINGS, the first frame a server sends.
    pub(super) fn greet(&self, out: &mut Vec<u8>) {
        let mut params = vec![
            (setting::MAX_CONCURRENT_STREAMS, self.max_streams),
            (setting::MAX_HEADER_LIST_SIZE, MAX_HEAD as u32),
        ];
        if self.stall {
            params.push((setting::INITIAL_WINDOW_SIZE, STALL_WINDOW));
        }
        encode_settings(out, false, &params);
    }

    fn find(&self, id: u32) -> Option<usize> {
        self.streams.iter().position(|s| s.id == id)
    }

    /// Sends the response of `stream` whose delay is over, unless the
    /// stream or the connection is gone meanwhile.
    pub(super) fn deliver(&mut self, cx: &mut Cx<'_>, stream: u32) {
        if let Some(i) = self.find(stream)
            && self.streams[i].phase == Phase::Waiting
            && !self.done
        {
            self.start(cx, i);
        }
    }

    /// Handles bytes that arrived (after the preface).
    pub(super) fn receive(&mut self, cx: &mut Cx<'_>, data: &[u8]) {
        if self.done {
            return;
        }
        if self.input.is_empty() {
            let used = self.frames_in(cx, data);
            if !self.done && used < data.len() {
                self.input = data[used..].to_vec();
            }
        } else {
            let mut buf = std::mem::take(&mut self.input);
            buf.extend_from_slice(data);
            let used = self.frames_in(cx, &buf);
            if !self.done && used < buf.len() {
                buf.drain(..used);
                self.input = buf;
            }
        }
        if !self.stall && !self.done {
            self.core.credit(1, cx.out);
        }
    }

    /// Handles every whole frame in `buf`; says how many bytes they took.
    fn frames_in(&mut self, cx: &mut Cx<'_>, buf: &[u8]) -> usize {
        let mut pos = 0;
        while !self.done {
            match self.core.next(&buf[pos..], cx.out) {
                Ok(None) => break,
                Ok(Some((n, event))) => {
                    pos += n;
                    if let Some(event) = event {
                        self.event(cx, event);
                    }
                }
                Err(e) => {
                    self.fail(cx, e.code());
                    break;
                }
            }
        }
        pos
    }

    /// A connection error: GOAWAY with `code`, and nothing more.
    fn fail(&mut self, cx: &mut Cx<'_>, code: ErrorCode) {
        encode_goaway(cx.out, self.last_stream, code, b"");
        self.end();
    }

    /// Nothing more is answered on this connection.
    fn end(&mut self) {
        self.done = true;
        self.flooding = false;
        self.streams = Vec::new();
        self.input = Vec::new();
        self.grpc_in = Vec::new();
        self.grpc_out = Vec::new();
        self.subs = Vec::new();
    }

    /// `--max-connection-age`: the connection is old: a GOAWAY naming the
    /// last stream it opened (those are still answered); the caller closes
    /// it after the grace.
    pub(super) fn age_out(&mut self, cx: &mut Cx<'_>) {
        if self.done || self.goaway.is_some() {
            return;
        }
        encode_goaway(cx.out, self.last_stream, ErrorCode::NoError, b"max_age");
        self.goaway = Some(self.last_stream);
        if self.streams.is_empty() {
            self.end();
        }
    }

    /// What a frame meant for the streams (the connection's part is the
    /// core's).
    fn event(&mut self, cx: &mut Cx<'_>, event: Event<'_>) {
        match event {
            Event::Data {
                stream,
                end_stream,
                flow_len,
                data,
            } => self.data(cx, stream, end_stream, data, flow_len),
            Event::Headers {
                stream,
                end_stream,
                block,
            } => self.header_block(cx, stream, end_stream, &block),
            Event::Settings { shift, .. } => {
                for s in &mut self.streams {
                    s.send.shift(shift);
                }
                self.pump_all(cx);
            }
            // The client is leaving: it opens nothing more and closes when
            // it is done, which ends the connection.
            Event::GoAway { .. } | Event::Pinged | Event::PingAck(_) => {}
            Event::Reset { stream, .. } => {
                if let Some(i) = self.find(stream) {
                    self.streams.swap_remove(i);
                    self.forget_call(stream);
                    self.after_stream(cx);
                }
            }
            Event::Window => self.pump_all(cx),
            Event::StreamWindow { stream, increment } => {
                if let Some(i) = self.find(stream) {
                    if self.streams[i].send.grow(increment).is_err() {
                        encode_rst_stream(cx.out, stream, ErrorCode::FlowControlError);
                        self.streams.swap_remove(i);
                        self.after_stream(cx);
                    } else {
                        self.pump(cx, i);
                    }
                }
            }
        }
    }

    /// A DATA frame (already counted against the connection's window):
    /// counted against its stream's (and credited back, unless
    /// `window-stall`); END_STREAM completes the request.
    fn data(&mut self, cx: &mut Cx<'_>, stream: u32, end_stream: bool, data: &[u8], flow_len: u32) {
        let Some(i) = self.find(stream).filter(|&i| self.streams[i].phase == Phase::Receiving) else {
            if stream > self.last_stream {
                return self.fail(cx, ErrorCode::ProtocolError);
            }
            return; // a stream we reset or ignored: dropped
        };
        if self.streams[i].grpc != 0 && !data.is_empty() {
            self.keep_request(stream, data);
            if self.streams[i].grpc == grpc::CHAT {
                self.chat(cx, i);
            }
        }
        let s = &mut self.streams[i];
        if let Err(code) = s.recv.take(flow_len) {
            encode_rst_stream(cx.out, stream, code);
            self.streams.swap_remove(i);
            return self.after_stream(cx);
        }
        if end_stream {
            self.complete(cx, i);
        } else if !self.stall
            && let Some(n) = s.recv.credit(1)
        {
            encode_window_update(cx.out, stream, n);
        }
    }

    /// A whole header block: a new request, or trailers ending one.
    fn header_block(&mut self, cx: &mut Cx<'_>, id: u32, end_stream: bool, block: &[u8]) {
        let mut method_head = false;
        let (mut has_method, mut route) = (false, None);
        let (mut grpc_type, mut method) = (false, 0);
        // Decoded even for a stream that is ignored, so the table stays in
        // step with the client's.
        let decoded = self.hpack.decode(block, |name, value| match name {
            b":method" => {
                has_method = true;
                method_head = value == b"HEAD";
            }
            b":path" => {
                route = std::str::from_utf8(value).ok().map(Route::of);
                method = grpc::method_of(value);
            }
            b"content-type" => grpc_type = value.starts_with(b"application/grpc"),
            _ => {}
        });
        let response = match decoded {
            Err(HpackError::Compression) => return self.fail(cx, ErrorCode::CompressionError),
            Err(HpackError::ListTooLarge) => TOO_LARGE,
            Ok(()) => match route.filter(|_| has_method) {
                Some(route) => h2_responses::index(route, method_head),
                None => BAD_REQUEST,
            },
        };
        if let Some(i) = self.find(id) {
            // Trailers: they must end the stream.
            if !end_stream || self.streams[i].phase != Phase::Receiving {
                return self.fail(cx, ErrorCode::ProtocolError);
            }
            return self.complete(cx, i);
        }
        if id <= self.last_stream || id.is_multiple_of(2) {
            // A closed stream or a server's id: the RFC's STREAM_CLOSED or
            // PROTOCOL_ERROR, both connection errors here.
            return self.fail(cx, ErrorCode::ProtocolError);
        }
        self.last_stream = id;
        if self.goaway.is_some() {
            return; // above the GOAWAY's last stream: not processed
        }
        self.opened += 1;
        if self.streams.len() >= self.max_streams as usize {
            return encode_rst_stream(cx.out, id, ErrorCode::RefusedStream);
        }
        let fault = cx.th.fault();
        match fault {
            Some(Fault {
                mode: FaultMode::GoawayError,
                every,
            }) if self.opened == every => {
                encode_goaway(
                    cx.out,
                    self.last_answered,
                    ErrorCode::InternalError,
                    b"goaway-error fault",
                );
                return self.end();
            }
            Some(Fault {
                mode: FaultMode::RstStream,
                every,
            }) if cx.th.fault_count.hit(every) => {
                return encode_rst_stream(cx.out, id, ErrorCode::InternalError);
            }
            Some(Fault {
                mode: FaultMode::Goaway,
                every,
            }) if self.opened == every => {
                encode_goaway(cx.out, id, ErrorCode::NoError, b"goaway fault");
                self.goaway = Some(id);
            }
            _ => {}
        }
        let grpc = if cx.th.grpc.is_some() && grpc_type { method } else { 0 };
        self.streams.push(StreamState {
            id,
            grpc,
            opened: false,
            response: response as u16,
            phase: Phase::Receiving,
            send: SendWindow::new(self.core.peer.initial_window),
            recv: RecvWindow::new(self.our_window),
        });
        if end_stream {
            let i = self.streams.len() - 1;
            self.complete(cx, i);
        }
    }

    /// The request of stream `i` arrived whole: answer it now or after the
    /// delay.
    fn complete(&mut self, cx: &mut Cx<'_>, i: usize) {
        if self.streams[i].grpc == grpc::CHAT {
            return self.end_chat(cx, i);
        }
        let extra = cx.th.brownouts.extra_delay(cx.now);
        if cx.th.delay.is_zero() && extra.is_zero() {
            return self.start(cx, i);
        }
        self.streams[i].phase = Phase::Waiting;
        let due = cx.now + cx.th.degrade.delay_at(cx.th.delay, cx.now - cx.th.started) + extra;
        cx.th.queue.push_back(Due {
            due: cx.th.queue.back().map_or(due, |last| due.max(last.due)),
            token: cx.token,
            stream: self.streams[i].id,
        });
        *cx.in_flight += 1;
    }

    /// Sends stream `i`'s response head, then as much body as the windows
    /// allow.
    fn start(&mut self, cx: &mut Cx<'_>, i: usize) {
        if self.streams[i].grpc != 0 {
            return self.start_call(cx, i);
        }
        let s = &mut self.streams[i];
        let r = &cx.th.table[usize::from(s.response)];
        if let Some(info) = &r.info {
            encode_headers(cx.out, s.id, info, false, self.core.peer.max_frame);
        }
        let ends = r.body.is_empty() && r.trailers.is_none();
        encode_headers(cx.out, s.id, &r.head, ends, self.core.peer.max_frame);
        s.phase = Phase::Sending(0);
        if ends {
            self.finish(cx, i);
        } else {
            self.pump(cx, i);
        }
    }

    /// Sends what the windows allow of stream `i`'s body; finishes the
    /// stream when all of it (and its trailers) is out.
    fn pump(&mut self, cx: &mut Cx<'_>, i: usize) {
        let s = &mut self.streams[i];
        let Phase::Sending(sent) = s.phase else { return };
        // A gRPC call's reply is its own; other bodies are the table's.
        let (body, trailers): (&[u8], Option<&[u8]>) = match (s.grpc, &cx.th.grpc) {
            (0, _) | (_, None) => {
                let r = &cx.th.table[usize::from(s.response)];
                (r.body, r.trailers.as_deref())
            }
            (_, Some(g)) => (
                self.grpc_out
                    .iter()
                    .find(|(id, _)| *id == s.id)
                    .map_or(&[][..], |(_, b)| &b[..]),
                Some(&g.ok_trailers[..]),
            ),
        };
        let mut sent = sent as usize;
        while sent < body.len() {
            let room = s.send.room().min(self.core.send.room()) as usize;
            let n = (body.len() - sent).min(room);
            if n == 0 {
                break;
            }
            let last = sent + n == body.len();
            let chunk = &body[sent..sent + n];
            encode_data(
                cx.out,
                s.id,
                chunk,
                last && trailers.is_none(),
                self.core.peer.max_frame,
            );
            s.send.spend(n as u32);
            self.core.send.spend(n as u32);
            sent += n;
        }
        s.phase = Phase::Sending(sent as u32);
        if sent < body.len() {
            return;
        }
        if let Some(t) = trailers {
            encode_headers(cx.out, s.id, t, true, self.core.peer.max_frame);
        }
        self.finish(cx, i);
    }

    /// Every stream with body left, after a window grew.
    fn pump_all(&mut self, cx: &mut Cx<'_>) {
        let mut i = 0;
        while i < self.streams.len() && self.core.send.room() > 0 {
            let before = self.streams.len();
            if matches!(self.streams[i].phase, Phase::Sending(_)) {
                self.pump(cx, i);
            }
            // A finished stream was swapped out: look at its slot again.
            if self.streams.len() == before {
                i += 1;
            }
        }
    }

    /// Stream `i` is answered whole.
    fn finish(&mut self, cx: &mut Cx<'_>, i: usize) {
        let s = self.streams.swap_remove(i);
        if s.grpc != 0 {
            self.forget_call(s.id);
        }
        self.last_answered = self.last_answered.max(s.id);
        self.after_stream(cx);
    }

    /// After a stream closed: a connection under a GOAWAY ends with its
    /// last stream.
    fn after_stream(&mut self, _cx: &mut Cx<'_>) {
        if self.goaway.is_some() && self.streams.is_empty() {
            self.end();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::responses::BIG_BODY;
    use super::*;
    use crate::wire::h2::{
        Frame, FrameDecoder, encode_block, encode_data, encode_headers, encode_ping, flag, kind, write_header,
    };

    /// What the target sent, frame by frame, with header blocks decoded.
    #[derive(Debug, PartialEq)]
    enum Out {
        Headers(u32, String, bool),
        Data(u32, usize, bool),
        Settings(Vec<(u16, u32)>),
        SettingsAck,
        PingAck([u8; 8]),
        GoAway(u32, ErrorCode),
        Rst(u32, ErrorCode),
        Window(u32, u32),
    }

    struct Client {
        th: Serving,
        h: H2Conn,
        in_flight: u32,
        frames: FrameDecoder,
        hpack: HeaderDecoder,
    }

    impl Client {
        fn new(delay: Duration, fault: Option<&str>) -> (Client, Vec<Out>) {
            let fault = fault.map(|f| f.parse::<Fault>().unwrap());
            let mut c = Client {
                th: Serving::new(delay, Degrade::default(), fault),
                h: H2Conn::new(fault),
                in_flight: 0,
                frames: FrameDecoder::new(1 << 20, 1 << 20),
                hpack: HeaderDecoder::new(4096, 1 << 20),
            };
            let mut out = Vec::new();
            c.h.greet(&mut out);
            let greeting = c.decode(&out);
            (c, greeting)
        }

        fn send(&mut self, bytes: &[u8]) -> Vec<Out> {
            let mut out = Vec::new();
            let mut cx = Cx {
                th: &mut self.th,
                token: Token(7),
                now: Instant::now(),
                out: &mut out,
                in_flight: &mut self.in_flight,
            };
            self.h.receive(&mut cx, bytes);
            self.decode(&out)
        }

        fn decode(&mut self, mut bytes: &[u8]) -> Vec<Out> {
            let mut got = Vec::new();
            while let Some((frame, n)) = self.frames.decode(bytes).unwrap() {
                bytes = &bytes[n..];
                got.push(match frame {
                    Frame::Headers {
                        stream,
                        end_stream,
                        fragment,
                        ..
                    } => {
                        let mut status = String::new();
                        self.hpack
                            .decode(fragment, |n, v| {
                                if n == b":status" {
                                    status = String::from_utf8_lossy(v).into_owned();
                                }
                            })
                            .unwrap();
                        Out::Headers(stream, status, end_stream)
                    }
                    Frame::Data {
                        stream,
                        end_stream,
                        data,
                        ..
                    } => Out::Data(stream, data.len(), end_stream),
                    Frame::Settings { ack: true, .. } => Out::SettingsAck,
                    Frame::Settings { params, .. } => Out::Settings(params.iter().collect()),
                    Frame::Ping { data, .. } => Out::PingAck(data),
                    Frame::GoAway { last_stream, code, .. } => Out::GoAway(last_stream, code),
                    Frame::RstStream { stream, code } => Out::Rst(stream, code),
                    Frame::WindowUpdate { stream, increment } => Out::Window(stream, increment),
                    other => panic!("unexpected {other:?}"),
                });
            }
            assert!(bytes.is_empty(), "a partial frame");
            got
        }
    }

    fn get(stream: u32, path: &str) -> Vec<u8> {
        request(stream, "GET", path, true)
    }

    fn request(stream: u32, method: &str, path: &str, end: bool) -> Vec<u8> {
        let block = encode_block(&[
            (b":method", method.as_bytes()),
            (b":path", path.as_bytes()),
            (b":scheme", b"http"),
            (b":authority", b"t"),
        ]);
        let mut out = Vec::new();
        encode_headers(&mut out, stream, &block, end, DEFAULT_MAX_FRAME_SIZE);
        out
    }

    fn data_on(got: &[Out], stream: u32) -> usize {
        got.iter()
            .map(|o| match o {
                Out::Data(s, n, _) if *s == stream => *n,
                _ => 0,
            })
            .sum()
    }

    #[test]
    fn streams_are_answered_and_bodies_wait_for_the_windows() {
        let (mut c, greeting) = Client::new(Duration::ZERO, None);
        assert_eq!(
            greeting,
            [Out::Settings(vec![
                (setting::MAX_CONCURRENT_STREAMS, MAX_STREAMS),
                (setting::MAX_HEADER_LIST_SIZE, MAX_HEAD as u32)
            ])]
        );
        let mut bytes = Vec::new();
        encode_settings(&mut bytes, false, &[(setting::INITIAL_WINDOW_SIZE, 1000)]);
        bytes.extend(get(1, "/big"));
        bytes.extend(get(3, "/status/201"));
        // Split anywhere: a frame across reads is kept until it is whole.
        let (a, b) = bytes.split_at(20);
        let mut got = c.send(a);
        got.extend(c.send(b));
        assert_eq!(got[0], Out::SettingsAck);
        assert_eq!(got[1], Out::Headers(1, "200".into(), false));
        assert_eq!(data_on(&got, 1), 1000, "{got:?}");
        assert!(got.contains(&Out::Headers(3, "201".into(), false)));
        assert!(got.contains(&Out::Data(3, 4, true)));
        // The stream's window opens; the connection's (65,535) limits.
        let mut update = Vec::new();
        encode_window_update(&mut update, 1, 1 << 20);
        let got = c.send(&update);
        assert_eq!(data_on(&got, 1), 65_535 - 1000 - 4);
        assert!(!got.iter().any(|o| matches!(o, Out::Data(1, _, true))));
        let mut update = Vec::new();
        encode_window_update(&mut update, 0, 1 << 20);
        let got = c.send(&update);
        assert_eq!(data_on(&got, 1), BIG_BODY - (65_535 - 4));
        assert!(matches!(got.last(), Some(Out::Data(1, _, true))));
        assert!(c.h.streams.is_empty());
    }

    #[test]
    fn routes_keep_their_http1_meaning() {
        let (mut c, _) = Client::new(Duration::ZERO, None);
        let got = c.send(&get(1, "/continue"));
        assert_eq!(
            got,
            [
                Out::Headers(1, "100".into(), false),
                Out::Headers(1, "200".into(), false),
                Out::Data(1, 4, true)
            ]
        );
        let got = c.send(&get(3, "/chunked"));
        assert_eq!(
            got,
            [
                Out::Headers(3, "200".into(), false),
                Out::Data(3, 4, false),
                Out::Headers(3, String::new(), true)
            ]
        );
        assert_eq!(c.send(&get(5, "/status/204")), [Out::Headers(5, "204".into(), true)]);
        assert_eq!(
            c.send(&request(7, "HEAD", "/big", true)),
            [Out::Headers(7, "200".into(), true)]
        );
        // No :path: the stream gets 400, the connection lives on.
        let mut bytes = Vec::new();
        encode_headers(
            &mut bytes,
            9,
            &encode_block(&[(b":method", b"GET")]),
            true,
            DEFAULT_MAX_FRAME_SIZE,
        );
        assert_eq!(c.send(&bytes), [Out::Headers(9, "400".into(), true)]);
        let mut ping = Vec::new();
        encode_ping(&mut ping, false, *b"12345678");
        assert_eq!(c.send(&ping), [Out::PingAck(*b"12345678")]);
    }

    #[test]
    fn request_bodies_are_credited_back_and_complete_the_request() {
        let (mut c, _) = Client::new(Duration::ZERO, None);
        let mut bytes = request(1, "POST", "/status/202", false);
        encode_data(&mut bytes, 1, &[b'b'; 3000], false, DEFAULT_MAX_FRAME_SIZE);
        let got = c.send(&bytes);
        assert_eq!(got, [Out::Window(1, 3000), Out::Window(0, 3000)]);
        let mut end = Vec::new();
        encode_data(&mut end, 1, b"", true, DEFAULT_MAX_FRAME_SIZE);
        assert_eq!(
            c.send(&end),
            [Out::Headers(1, "202".into(), false), Out::Data(1, 4, true)]
        );
    }

    #[test]
    fn window_stall_advertises_a_small_window_and_never_credits() {
        let (mut c, greeting) = Client::new(Duration::ZERO, Some("window-stall"));
        let Out::Settings(params) = &greeting[0] else { panic!() };
        assert!(params.contains(&(setting::INITIAL_WINDOW_SIZE, STALL_WINDOW)));
        let mut bytes = request(1, "POST", "/", false);
        encode_data(
            &mut bytes,
            1,
            &[b'b'; STALL_WINDOW as usize],
            false,
            DEFAULT_MAX_FRAME_SIZE,
        );
        assert_eq!(c.send(&bytes), []);
        // More than the window: the stream is reset, the connection lives.
        let mut over = Vec::new();
        encode_data(&mut over, 1, b"b", false, DEFAULT_MAX_FRAME_SIZE);
        assert_eq!(c.send(&over), [Out::Rst(1, ErrorCode::FlowControlError)]);
        assert_eq!(c.send(&get(3, "/")).len(), 2);
    }

    #[test]
    fn goaway_after_n_streams_answers_up_to_its_last_stream() {
        let (mut c, _) = Client::new(Duration::ZERO, Some("goaway@2"));
        let bytes: Vec<u8> = [1, 3, 5, 7].iter().flat_map(|&s| get(s, "/")).collect();
        let got = c.send(&bytes);
        assert_eq!(
            got,
            [
                Out::Headers(1, "200".into(), false),
                Out::Data(1, 4, true),
                Out::GoAway(3, ErrorCode::NoError),
                Out::Headers(3, "200".into(), false),
                Out::Data(3, 4, true),
            ]
        );
        assert!(c.h.done, "the connection ends with its last stream");
    }

    #[test]
    fn goaway_waits_for_delayed_streams() {
        let (mut c, _) = Client::new(Duration::from_millis(5), Some("goaway"));
        let got = c.send(&[get(1, "/"), get(3, "/")].concat());
        assert_eq!(got, [Out::GoAway(1, ErrorCode::NoError)]);
        assert_eq!(c.in_flight, 1);
        assert!(!c.h.done, "stream 1 is still owed");
        let due = c.th.queue.pop_front().unwrap();
        assert_eq!(due.stream, 1);
        let mut out = Vec::new();
        let mut cx = Cx {
            th: &mut c.th,
            token: Token(7),
            now: Instant::now(),
            out: &mut out,
            in_flight: &mut c.in_flight,
        };
        c.h.deliver(&mut cx, 1);
        assert!(c.h.done);
        assert_eq!(c.decode(&out).len(), 2);
    }

    #[test]
    fn goaway_error_names_the_last_stream_answered() {
        let (mut c, _) = Client::new(Duration::ZERO, Some("goaway-error@2"));
        assert_eq!(c.send(&get(1, "/")).len(), 2);
        assert_eq!(c.send(&get(3, "/")), [Out::GoAway(1, ErrorCode::InternalError)]);
        assert!(c.h.done);
        assert_eq!(c.send(&get(5, "/")), [], "nothing after the end");
    }

    #[test]
    fn rst_stream_hits_every_nth_stream() {
        let (mut c, _) = Client::new(Duration::ZERO, Some("rst-stream@2"));
        let resets: Vec<u32> = (0..6)
            .flat_map(|i| c.send(&get(2 * i + 1, "/")))
            .filter_map(|o| match o {
                Out::Rst(s, ErrorCode::InternalError) => Some(s),
                _ => None,
            })
            .collect();
        assert_eq!(resets, [3, 7, 11]);
    }

    #[test]
    fn max_streams_refuses_streams_beyond_the_limit() {
        let (mut c, greeting) = Client::new(Duration::from_millis(50), Some("max-streams=1"));
        let Out::Settings(params) = &greeting[0] else { panic!() };
        assert_eq!(params[0], (setting::MAX_CONCURRENT_STREAMS, 1));
        let got = c.send(&[get(1, "/"), get(3, "/")].concat());
        assert_eq!(got, [Out::Rst(3, ErrorCode::RefusedStream)]);
        assert_eq!(c.h.streams.len(), 1);
    }

    #[test]
    fn protocol_errors_end_the_connection_with_a_goaway() {
        for (bytes, code) in [
            // A WINDOW_UPDATE of 0 on the connection.
            (
                {
                    let mut b = Vec::new();
                    write_header(&mut b, 4, kind::WINDOW_UPDATE, 0, 0);
                    b.extend_from_slice(&[0, 0, 0, 0]);
                    b
                },
                ErrorCode::ProtocolError,
            ),
            // A header block that is not HPACK.
            (
                {
                    let mut b = Vec::new();
                    write_header(&mut b, 2, kind::HEADERS, flag::END_HEADERS | flag::END_STREAM, 1);
                    b.extend_from_slice(&[0xff, 0x7f]);
                    b
                },
                ErrorCode::CompressionError,
            ),
            // A stream id going backwards.
            ([get(5, "/"), get(3, "/")].concat(), ErrorCode::ProtocolError),
        ] {
            let (mut c, _) = Client::new(Duration::ZERO, None);
            let got = c.send(&bytes);
            assert!(matches!(got.last(), Some(Out::GoAway(_, c)) if *c == code), "{got:?}");
            assert!(c.h.done && c.h.streams.is_empty() && c.h.input.capacity() == 0);
        }
    }

    #[test]
    fn an_idle_connection_keeps_no_buffers() {
        let (mut c, _) = Client::new(Duration::ZERO, None);
        let bytes = get(1, "/big");
        c.send(&bytes[..5]);
        assert!(c.h.input.capacity() > 0, "a partial frame is kept");
        c.send(&bytes[5..]);
        assert_eq!(c.h.input.capacity(), 0);
        assert_eq!(c.h.core.kept(), 0);
    }
}
