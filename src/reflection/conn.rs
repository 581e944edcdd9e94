//! A blocking gRPC client of one call at a time, for what soakd asks a
//! server before a run starts (its reflection service): a plain or TLS
//! socket with a deadline, HTTP/2 from `wire::h2` (frames, HPACK) and
//! gRPC from `wire::grpc` (messages, status). It runs once per plan, so
//! it is simple where the engine is frugal: it allocates freely, reads
//! with socket timeouts, and keeps one stream open at a time.
//!
//! The connection's frame-level rules (SETTINGS, PING, the connection's
//! windows, header blocks, what the server's first frame must be) are
//! `wire::h2::Core`'s, as for the engine's client and the built-in
//! target's server; this file keeps its one call's stream. Flow control is
//! honoured both ways: this side announces a 16 MiB window (a schema's
//! descriptors come in one message of a few hundred KiB) and returns every
//! DATA byte it reads at once; what it sends waits for the server's
//! windows.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::netio::ClientTls;
use crate::plan::grpc::MetadataEntry;
use crate::plan::tls::Tls;
use crate::wire::grpc::{
    Block, BlockFields, CONTENT_TYPE, CallStatus, MessageDecoder, ResponseHeads, decode_message, render_timeout,
};
use crate::wire::h2::{
    Core, DEFAULT_MAX_FRAME_SIZE, DEFAULT_WINDOW, ErrorCode, Event, HeaderDecoder, PREFACE, RecvWindow, Role,
    SendWindow, encode_block, encode_data, encode_headers, encode_rst_stream, encode_settings, encode_window_update,
    setting,
};

/// The window this side announces for each stream and the connection.
const WINDOW: u32 = 16 * 1024 * 1024;
/// The largest header block and response message accepted.
const MAX_HEADER_BLOCK: u32 = 256 * 1024;
/// The largest response message accepted (a big schema's file set).
pub const MAX_MESSAGE: u32 = 64 * 1024 * 1024;

/// Where to connect, and how.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// The server's address.
    pub addr: SocketAddr,
    /// `:authority` (the URL's host and port).
    pub authority: String,
    /// TLS (`grpcs://`), with ALPN h2; `None` for h2c (`grpc://`).
    pub tls: Option<Tls>,
    /// The local address to connect from, if one is set.
    pub source: Option<IpAddr>,
}

/// Why a call could not be made or completed.
#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    /// The TCP connection failed.
    #[error("cannot connect: {0}")]
    Connect(io::Error),
    /// The TLS handshake failed, or the server would not speak h2.
    #[error("TLS: {0}")]
    Tls(String),
    /// Reading or writing failed.
    #[error("{0}")]
    Io(io::Error),
    /// The deadline passed.
    #[error("no answer within the deadline")]
    Timeout,
    /// The server closed the connection.
    #[error("the server closed the connection")]
    Closed,
    /// The server broke HTTP/2 or gRPC framing.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The server sent GOAWAY before the call completed.
    #[error("the server sent GOAWAY ({code:?}{})", if debug.is_empty() { String::new() } else { format!(": {debug}") })]
    GoAway {
        /// Its error code.
        code: ErrorCode,
        /// Its debug text.
        debug: String,
    },
}

/// How a call ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallEnd {
    /// With a gRPC status and its (decoded) message.
    Status {
        /// The status.
        status: CallStatus,
        /// `grpc-message`, percent-decoded.
        message: String,
    },
    /// The server reset the stream.
    Reset(ErrorCode),
}

/// What [`Conn::recv`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Next {
    /// A response message (unframed).
    Message(Vec<u8>),
    /// The call ended.
    End(CallEnd),
}

enum Io {
    Plain(TcpStream),
    Tls(Box<ClientTls<TcpStream>>),
}

impl Io {
    fn tcp(&self) -> &TcpStream {
        match self {
            Io::Plain(s) => s,
            Io::Tls(t) => t.sock(),
        }
    }
}

/// The stream of the call in progress.
struct Call {
    id: u32,
    /// The server's credit for this stream, and ours for it.
    send: SendWindow,
    recv: RecvWindow,
    heads: ResponseHeads,
    decoder: MessageDecoder,
    carry: Vec<u8>,
    messages: VecDeque<Vec<u8>>,
    end: Option<CallEnd>,
    /// `grpc-message`'s raw bytes from the last block.
    message: Vec<u8>,
}

/// One HTTP/2 connection making calls one after another.
pub struct Conn {
    io: Io,
    tls: bool,
    authority: String,
    deadline: Instant,
    input: Vec<u8>,
    core: Core,
    hpack: HeaderDecoder,
    next_id: u32,
    call: Option<Call>,
}

impl Conn {
    /// Connects (TCP, TLS with ALPN h2 when the endpoint has TLS) and
    /// sends the HTTP/2 preface; everything must be done by `deadline`.
    pub fn open(ep: &Endpoint, deadline: Instant) -> Result<Conn, ConnError> {
        let left = remaining(deadline)?;
        let sock = socket2::Socket::new(
            socket2::Domain::for_address(ep.addr),
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )
        .map_err(ConnError::Connect)?;
        if let Some(src) = ep.source {
            sock.bind(&SocketAddr::new(src, 0).into()).map_err(ConnError::Connect)?;
        }
        sock.connect_timeout(&ep.addr.into(), left).map_err(|e| {
            if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::TimedOut {
                ConnError::Timeout
            } else {
                ConnError::Connect(e)
            }
        })?;
        let tcp: TcpStream = sock.into();
        tcp.set_nodelay(true).map_err(ConnError::Io)?;
        let io = match &ep.tls {
            None => Io::Plain(tcp),
            Some(tls) => {
                let mut config = (*tls.config).clone();
                config.alpn_protocols = vec![b"h2".to_vec()];
                let mut t = ClientTls::new(tcp, std::sync::Arc::new(config), tls.server_name.clone())
                    .map_err(|e| ConnError::Tls(e.to_string()))?;
                loop {
                    t.sock()
                        .set_read_timeout(Some(remaining(deadline)?))
                        .map_err(ConnError::Io)?;
                    match t.handshake() {
                        Ok(Some(session)) if session.h2 => break,
                        Ok(Some(_)) => {
                            return Err(ConnError::Tls(
                                "the server did not agree to HTTP/2 (ALPN h2); gRPC needs it".into(),
                            ));
                        }
                        Ok(None) => {}
                        Err(e) if e.kind() == io::ErrorKind::InvalidData => return Err(ConnError::Tls(e.to_string())),
                        Err(e) => return Err(ConnError::Io(e)),
                    }
                }
                Io::Tls(Box::new(t))
            }
        };
        let mut conn = Conn {
            tls: ep.tls.is_some(),
            io,
            authority: ep.authority.clone(),
            deadline,
            input: Vec::new(),
            core: Core::new(Role::Client, DEFAULT_MAX_FRAME_SIZE, MAX_HEADER_BLOCK, WINDOW),
            hpack: HeaderDecoder::new(4096, MAX_HEADER_BLOCK as usize),
            next_id: 1,
            call: None,
        };
        let mut out = PREFACE.to_vec();
        encode_settings(
            &mut out,
            false,
            &[(setting::ENABLE_PUSH, 0), (setting::INITIAL_WINDOW_SIZE, WINDOW)],
        );
        encode_window_update(&mut out, 0, WINDOW - DEFAULT_WINDOW);
        conn.write(&out)?;
        Ok(conn)
    }

    /// Starts a call of `path` (a new stream; the previous one is
    /// forgotten), sending its headers and `metadata`.
    pub fn start(&mut self, path: &str, metadata: &[MetadataEntry]) -> Result<(), ConnError> {
        if let Some(old) = self.call.take()
            && old.end.is_none()
        {
            let mut out = Vec::new();
            encode_rst_stream(&mut out, old.id, ErrorCode::Cancel);
            self.write(&out)?;
        }
        let id = self.next_id;
        self.next_id += 2;
        let timeout = render_timeout(remaining(self.deadline)?);
        let scheme: &[u8] = if self.tls { b"https" } else { b"http" };
        let agent = concat!("soakd/", env!("CARGO_PKG_VERSION"));
        let mut fields: Vec<(&[u8], &[u8])> = vec![
            (b":method", b"POST"),
            (b":scheme", scheme),
            (b":path", path.as_bytes()),
            (b":authority", self.authority.as_bytes()),
        ];
        if let Some(t) = &timeout {
            fields.push((b"grpc-timeout", t.as_bytes()));
        }
        fields.extend([
            (&b"content-type"[..], CONTENT_TYPE.as_bytes()),
            (b"te", b"trailers"),
            (b"user-agent", agent.as_bytes()),
        ]);
        fields.extend(metadata.iter().map(|m| (m.name.as_bytes(), m.wire_value.as_bytes())));
        let mut out = Vec::new();
        encode_headers(&mut out, id, &encode_block(&fields), false, self.core.peer.max_frame);
        self.write(&out)?;
        self.call = Some(Call {
            id,
            send: SendWindow::new(self.core.peer.initial_window),
            recv: RecvWindow::new(WINDOW),
            heads: ResponseHeads::default(),
            decoder: MessageDecoder::new(MAX_MESSAGE),
            carry: Vec::new(),
            messages: VecDeque::new(),
            end: None,
            message: Vec::new(),
        });
        Ok(())
    }

    /// Sends `framed` (whole gRPC messages, prefixes included) on the
    /// call, and ends this side of it when `end_stream`, as the windows
    /// allow.
    pub fn send(&mut self, framed: &[u8], end_stream: bool) -> Result<(), ConnError> {
        let mut rest = framed;
        loop {
            let call = self.call.as_ref().expect("a call was started");
            if call.end.is_some() {
                // The server ended the call: what was not sent is moot.
                return Ok(());
            }
            let room = self.core.send.room().min(call.send.room()) as usize;
            let n = rest.len().min(room);
            if n > 0 || rest.is_empty() {
                let last = n == rest.len();
                let mut out = Vec::new();
                encode_data(
                    &mut out,
                    call.id,
                    &rest[..n],
                    last && end_stream,
                    self.core.peer.max_frame,
                );
                self.core.send.spend(n as u32);
                self.call.as_mut().expect("a call").send.spend(n as u32);
                self.write(&out)?;
                rest = &rest[n..];
                if last {
                    return Ok(());
                }
            }
            self.read_frames()?;
        }
    }

    /// The next response message of the call, or its end.
    pub fn recv(&mut self) -> Result<Next, ConnError> {
        loop {
            let call = self.call.as_mut().expect("a call was started");
            if let Some(m) = call.messages.pop_front() {
                return Ok(Next::Message(m));
            }
            if let Some(end) = &call.end {
                return Ok(Next::End(end.clone()));
            }
            self.read_frames()?;
        }
    }

    /// Reads from the socket once and handles every whole frame.
    fn read_frames(&mut self) -> Result<(), ConnError> {
        let mut buf = [0u8; 16 * 1024];
        let n = loop {
            let left = remaining(self.deadline)?;
            self.io.tcp().set_read_timeout(Some(left)).map_err(ConnError::Io)?;
            let r = match &mut self.io {
                Io::Plain(s) => s.read(&mut buf),
                Io::Tls(t) => t.read(&mut buf),
            };
            match r {
                Ok(0) => return Err(ConnError::Closed),
                Ok(n) => break n,
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ConnError::Io(e)),
            }
        };
        self.input.extend_from_slice(&buf[..n]);
        let input = std::mem::take(&mut self.input);
        let mut at = 0;
        let mut out = Vec::new();
        let result = loop {
            match self.core.next(&input[at..], &mut out) {
                Err(e) => break Err(ConnError::Protocol(e.to_string())),
                Ok(None) => break Ok(()),
                Ok(Some((used, event))) => {
                    at += used;
                    if let Some(event) = event
                        && let Err(e) = self.event(event, &mut out)
                    {
                        break Err(e);
                    }
                }
            }
        };
        self.input = input[at..].to_vec();
        // Every DATA byte read goes back at once.
        self.core.credit(1, &mut out);
        if !out.is_empty() {
            self.write(&out)?;
        }
        result
    }

    /// Acts on what a frame meant for the call; replies (window updates)
    /// go to `out`.
    fn event(&mut self, event: Event<'_>, out: &mut Vec<u8>) -> Result<(), ConnError> {
        let overflow = || ConnError::Protocol("flow-control window overflowed".into());
        let current = self.call.as_ref().map(|c| c.id);
        match event {
            Event::Settings { shift, .. } => {
                if let Some(c) = self.call.as_mut() {
                    c.send.shift(shift);
                }
            }
            Event::StreamWindow { stream, increment } => {
                if let Some(c) = self.call.as_mut().filter(|c| c.id == stream) {
                    c.send.grow(increment).map_err(|_| overflow())?;
                }
            }
            Event::GoAway {
                last_stream,
                code,
                debug,
            } => {
                if current.is_some_and(|id| id > last_stream) || code != ErrorCode::NoError {
                    return Err(ConnError::GoAway {
                        code,
                        debug: String::from_utf8_lossy(debug).into_owned(),
                    });
                }
            }
            Event::Reset { stream, code } => {
                if let Some(c) = self.call.as_mut().filter(|c| c.id == stream && c.end.is_none()) {
                    c.end = Some(CallEnd::Reset(code));
                }
            }
            Event::Data {
                stream,
                end_stream,
                data,
                flow_len,
            } => {
                let Some(c) = self.call.as_mut().filter(|c| c.id == stream && c.end.is_none()) else {
                    return Ok(());
                };
                c.recv.take(flow_len).map_err(|_| overflow())?;
                if !end_stream && let Some(n) = c.recv.credit(1) {
                    encode_window_update(out, stream, n);
                }
                let Call {
                    decoder,
                    carry,
                    messages,
                    ..
                } = c;
                decoder
                    .for_each_message(data, carry, |_, m| messages.push_back(m.to_vec()))
                    .map_err(|e| ConnError::Protocol(e.to_string()))?;
                if end_stream {
                    c.decoder.finish().map_err(|e| ConnError::Protocol(e.to_string()))?;
                    if let Some(status) = c.heads.on_end_without_trailers() {
                        c.end = Some(CallEnd::Status {
                            status,
                            message: String::new(),
                        });
                    }
                }
            }
            Event::Headers {
                stream,
                end_stream,
                block,
            } => self.header_block(stream, end_stream, &block)?,
            Event::Pinged | Event::PingAck(_) | Event::Window => {}
        }
        Ok(())
    }

    /// A whole header block of `stream`.
    fn header_block(&mut self, stream: u32, end_stream: bool, block: &[u8]) -> Result<(), ConnError> {
        let mut fields = BlockFields::default();
        let mut raw_message = Vec::new();
        self.hpack
            .decode(block, |n, v| fields.field_keeping_message(n, v, &mut raw_message))
            .map_err(|e| ConnError::Protocol(e.to_string()))?;
        let Some(c) = self.call.as_mut().filter(|c| c.id == stream && c.end.is_none()) else {
            return Ok(());
        };
        if fields.has_message {
            c.message = raw_message;
        }
        match c.heads.on_block(&fields, end_stream) {
            Ok(Block::Informational | Block::Headers) => {}
            Ok(Block::End(status)) => {
                c.end = Some(CallEnd::Status {
                    status,
                    message: decode_message(&c.message).into_owned(),
                });
            }
            Err(e) => return Err(ConnError::Protocol(e.to_string())),
        }
        Ok(())
    }

    fn write(&mut self, mut bytes: &[u8]) -> Result<(), ConnError> {
        self.io
            .tcp()
            .set_write_timeout(Some(remaining(self.deadline)?))
            .map_err(ConnError::Io)?;
        while !bytes.is_empty() {
            let r = match &mut self.io {
                Io::Plain(s) => s.write(bytes),
                Io::Tls(t) => t.write(bytes),
            };
            match r {
                Ok(n) => bytes = &bytes[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    remaining(self.deadline)?;
                }
                Err(e) => return Err(ConnError::Io(e)),
            }
        }
        if let Io::Tls(t) = &mut self.io {
            while let Err(e) = t.flush() {
                match e.kind() {
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => {
                        remaining(self.deadline)?;
                    }
                    _ => return Err(ConnError::Io(e)),
                }
            }
        }
        Ok(())
    }
}

/// Time left before `deadline`, or [`ConnError::Timeout`].
fn remaining(deadline: Instant) -> Result<Duration, ConnError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        Err(ConnError::Timeout)
    } else {
        Ok(left)
    }
}
