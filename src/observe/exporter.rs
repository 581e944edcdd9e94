//! The Prometheus endpoint's HTTP listener, on a thread of its own.
//!
//! Operators scrape it for days, so it is built to survive clients that are
//! slow, broken or hostile without ever touching the load-generating workers:
//! it shares nothing with them, and the [`Handler`] it calls only reads a
//! snapshot that the aggregator publishes.
//!
//! One mio `Poll`, edge-triggered: every readiness edge is drained until
//! `WouldBlock`, and a connection remembers that its socket may still hold
//! unread bytes while it is busy writing a response, so no edge is lost.
//! Connections live in `netio`'s [`ConnTable`], whose tokens carry a
//! generation as well as the slot, so an event queued for a connection that
//! was closed earlier in the same batch is recognised and ignored even if
//! the slot was reused. The listener, the keep-alive rule and the pending
//! output are the same ones the built-in target uses (`netio`, `wire`).
//!
//! HTTP/1.1 with keep-alive and HTTP/1.0 (keep-alive on request) are spoken,
//! with pipelined requests answered in order, one response in flight per
//! connection. Only `GET` and `HEAD` reach the handler; every other method
//! gets `405`. Requests with a body, oversized heads and garbage get an
//! error response and the connection is closed (after a short lingering
//! close, so the client can read the error before the socket goes away).
//!
//! Limits keep a flood of idle or slow clients from locking Prometheus out:
//! at most [`MAX_CONNECTIONS`] connections; when another arrives beyond that
//! the longest-waiting idle or slow connection is closed to make room
//! (connections that never completed a request go first, so a kept-alive
//! scraper connection outlives a flood of silent ones). Deadlines (see the
//! constants) are checked on every loop turn; with at most
//! [`MAX_CONNECTIONS`] connections a linear sweep is cheap.

use std::io;
use std::net::{Shutdown, SocketAddr};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::event::Event;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};

use crate::Error;
use crate::netio::{Accepted, Acceptor, ConnTable, LISTENER, Pending, Slot, WAKER};
use crate::timer::Deadlines;
use crate::wire::headers::{self, Persist};
use crate::wire::request_head::{self, MAX_HEADERS, Refused};

/// Largest request head accepted (request line plus headers): the one
/// limit of both servers (`wire::request_head`). Prometheus sends a few
/// hundred bytes; anything past this gets `431` and is closed. It is also
/// the cap on each connection's input buffer.
pub use crate::wire::request_head::MAX_HEAD;

/// Time a connection has to deliver a complete request head, counted from
/// accept, from its previous response when pipelined bytes are already
/// waiting, or from the first byte of a new request on a kept-alive
/// connection. Defeats slowloris clients that trickle a head byte by byte.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);

/// Time a response may take to be written out, counted from when it was
/// queued. A client that never reads its response is closed after this.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// A kept-alive connection with no request in progress is closed after this
/// long. Prometheus scrapes every 15-60 s and reconnects if needed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Most connections held open at once. A new connection beyond this evicts
/// the longest-waiting idle or slow one, or is closed at once if every
/// connection is busy writing a response.
pub const MAX_CONNECTIONS: usize = 64;

/// Most connections accepted in one loop turn, so a connection flood cannot
/// starve the connections already open.
const MAX_ACCEPTS_PER_TURN: usize = 64;

/// After an error response with `Connection: close`, the write side is shut
/// down and the input discarded for up to this long (or until the client
/// closes) so that closing with unread input does not send a reset that
/// destroys the response before the client has read it.
const LINGER_TIMEOUT: Duration = Duration::from_secs(1);

/// Most input bytes discarded during a lingering close before giving up.
const LINGER_MAX_BYTES: usize = 64 * 1024;

/// Poll events handled per `poll` call.
const EVENTS_CAPACITY: usize = 128;

/// What a handler returns for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// HTTP status code (200, 404, 503, ...). Codes outside 200-599 are
    /// replaced by 500, since 1xx would be taken as an interim response.
    pub status: u16,
    /// The `Content-Type` header value.
    pub content_type: &'static str,
    /// The response body; left out (but still counted in
    /// `Content-Length`) for `HEAD`.
    pub body: Vec<u8>,
}

/// Called on the exporter thread for each complete GET/HEAD request with the
/// path (query string stripped).
pub type Handler = Arc<dyn Fn(&str) -> Reply + Send + Sync>;

/// A running exporter.
///
/// Dropping it stops the thread too; [`Exporter::stop`] makes that explicit.
pub struct Exporter {
    addr: SocketAddr,
    waker: Waker,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Exporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exporter")
            .field("addr", &self.addr)
            .field("running", &self.thread.is_some())
            .finish()
    }
}

impl Exporter {
    /// Binds `addr` now (so a bind failure is reported before the run
    /// starts) and starts the thread.
    ///
    /// A bind failure is an [`Error::Preflight`] naming `--metrics-listen`;
    /// failing to create the poll or the thread is an [`Error::Io`].
    pub fn start(addr: SocketAddr, handler: Handler) -> Result<Exporter, Error> {
        let listener = TcpListener::bind(addr).map_err(|err| {
            Error::Preflight(format!(
                "--metrics-listen {addr}: cannot listen ({err}); pick a free address or use --metrics-listen off"
            ))
        })?;
        let mut acceptor = Acceptor::new(listener);
        let local = acceptor
            .local_addr()
            .map_err(|e| Error::io("metrics exporter: reading the listening address", e))?;
        let poll = Poll::new().map_err(|e| Error::io("metrics exporter: creating a poll", e))?;
        acceptor
            .register(poll.registry(), LISTENER)
            .map_err(|e| Error::io("metrics exporter: registering the listener", e))?;
        let waker =
            Waker::new(poll.registry(), WAKER).map_err(|e| Error::io("metrics exporter: creating a waker", e))?;
        let server = Server {
            poll,
            acceptor,
            handler,
            conns: ConnTable::with_capacity(MAX_CONNECTIONS),
            deadlines: Deadlines::new(),
        };
        let thread = std::thread::Builder::new()
            .name("soakd-exporter".into())
            .spawn(move || server.run())
            .map_err(|e| Error::io("metrics exporter: starting its thread", e))?;
        Ok(Exporter {
            addr: local,
            waker,
            thread: Some(thread),
        })
    }

    /// The address actually bound (with the real port when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops the thread (mio Waker), closes every connection and the
    /// listener, and joins.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        if let Err(err) = self.waker.wake() {
            // Cannot happen short of a broken eventfd; joining would hang.
            eprintln!("soakd: metrics exporter: cannot stop its thread: {err}");
            return;
        }
        if thread.join().is_err() {
            eprintln!("soakd: metrics exporter: its thread panicked");
        }
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The exporter thread's state.
struct Server {
    poll: Poll,
    acceptor: Acceptor,
    handler: Handler,
    conns: ConnTable<Conn>,
    /// Each connection's deadline, by slab key (the servers' one timer
    /// scheme, `timer::Deadlines`).
    deadlines: Deadlines,
}

impl Server {
    fn run(mut self) {
        let mut events = Events::with_capacity(EVENTS_CAPACITY);
        loop {
            let timeout = self.poll_timeout(Instant::now());
            if let Err(err) = self.poll.poll(&mut events, timeout) {
                if err.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                eprintln!("soakd: metrics exporter stopped: poll failed: {err}");
                return;
            }
            let now = Instant::now();
            for event in events.iter() {
                match event.token() {
                    WAKER => return,
                    LISTENER => self.acceptor.readable(),
                    token => self.connection_event(token, event, now),
                }
            }
            let now = Instant::now();
            self.expire(now);
            self.accept(now);
        }
    }

    /// Time until the nearest deadline or the end of an accept pause
    /// (`None`: nothing to wait for, so an idle exporter sleeps).
    fn poll_timeout(&self, now: Instant) -> Option<Duration> {
        let pause = self.acceptor.wake_at(now).map(|at| at.saturating_duration_since(now));
        match (self.deadlines.timeout(now), pause) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn connection_event(&mut self, token: Token, event: &Event, now: Instant) {
        let Some(conn) = self.conns.get_mut(token) else {
            return; // stale: the connection it was for is gone
        };
        if event.is_readable() || event.is_read_closed() || event.is_error() {
            conn.readable = true;
        }
        if conn.drive(&self.handler, now) {
            self.deadlines.set(key_of(token), Some(conn.deadline()));
        } else {
            self.conns.remove(token);
            self.deadlines.set(key_of(token), None);
        }
    }

    /// Closes every connection whose deadline has passed.
    fn expire(&mut self, now: Instant) {
        let Server { deadlines, conns, .. } = self;
        let due: Vec<u32> = deadlines.expired(now).collect();
        for key in due {
            let Some(conn) = conns.at_key_mut(key as usize) else {
                continue;
            };
            // The deadline may have moved on since it was set.
            let deadline = conn.deadline();
            if now < deadline {
                deadlines.set(key, Some(deadline));
            } else {
                let token = conn.token;
                conns.remove(token);
            }
        }
    }

    /// Accepts waiting connections unless paused, at most
    /// [`MAX_ACCEPTS_PER_TURN`] at a time.
    fn accept(&mut self, now: Instant) {
        let (conns, poll, handler, deadlines) = (&mut self.conns, &self.poll, &self.handler, &mut self.deadlines);
        self.acceptor
            .accept(now, MAX_ACCEPTS_PER_TURN, |accepted| match accepted {
                Accepted::Conn(stream) => {
                    if let Some((key, at)) = admit(conns, poll, handler, stream, now) {
                        deadlines.set(key, Some(at));
                    }
                    true
                }
                // Out of descriptors (the workers share the process limit):
                // give up an idle or slow connection for the newcomer, as when
                // over MAX_CONNECTIONS; with none to give up, the acceptor
                // pauses.
                Accepted::OutOfFds => match eviction_candidate(conns) {
                    Some(token) => conns.remove(token).is_some(),
                    None => false,
                },
            });
    }
}

/// The timer id of a connection: its slab key.
fn key_of(token: Token) -> u32 {
    crate::netio::split(token).0 as u32
}

/// Takes a newly accepted connection in, making room if needed; its timer
/// id and deadline when it stays.
fn admit(
    conns: &mut ConnTable<Conn>,
    poll: &Poll,
    handler: &Handler,
    mut stream: TcpStream,
    now: Instant,
) -> Option<(u32, Instant)> {
    if conns.len() >= MAX_CONNECTIONS {
        match eviction_candidate(conns) {
            // Its deadline may fire for the newcomer in its slot: the
            // newcomer's own deadline is checked then.
            Some(token) => drop(conns.remove(token)),
            None => return None, // everyone is busy: close the newcomer
        }
    }
    let _ = stream.set_nodelay(true);
    let admitted = conns.admit(|token| {
        poll.registry()
            .register(&mut stream, token, Interest::READABLE | Interest::WRITABLE)
            .ok()?;
        Some(Conn::new(stream, token, now))
    });
    // The request is often there already; registration reports it too,
    // but there is no need to wait for that.
    let conn = admitted?;
    let token = conn.token;
    if conn.drive(handler, now) {
        return Some((key_of(token), conn.deadline()));
    }
    conns.remove(token);
    None
}

/// The connection to close to make room: the one that has waited longest
/// among those not writing a response, preferring those closing anyway,
/// then those that never completed a request.
fn eviction_candidate(conns: &ConnTable<Conn>) -> Option<Token> {
    conns
        .iter()
        .filter_map(|conn| {
            let class = match conn.phase {
                Phase::Write => return None,
                Phase::Linger => 0,
                Phase::Head if !conn.served => 1,
                Phase::Head | Phase::Idle => 2,
            };
            Some(((class, conn.since), conn.token))
        })
        .min()
        .map(|(_, token)| token)
}

/// Where a connection is in its life; each phase has its own deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for (the rest of) a request head: [`HEAD_TIMEOUT`].
    Head,
    /// Kept alive after a response, nothing buffered: [`IDLE_TIMEOUT`].
    Idle,
    /// A response is being written: [`WRITE_TIMEOUT`].
    Write,
    /// Closing: write side shut, input discarded: [`LINGER_TIMEOUT`].
    Linger,
}

/// One client connection.
struct Conn {
    stream: TcpStream,
    token: Token,
    phase: Phase,
    /// When the current phase began.
    since: Instant,
    /// At least one response has been written in full.
    served: bool,
    /// Request bytes received and not yet handled; at most [`MAX_HEAD`].
    input: Vec<u8>,
    /// The response being written (what the socket has not taken yet).
    out: Pending,
    /// Close once `out` is written.
    close_after: bool,
    /// The socket may hold unread bytes (a readable edge not yet drained).
    readable: bool,
    /// The client has shut down its write side (read returned 0).
    peer_closed: bool,
    /// Bytes discarded while lingering.
    discarded: usize,
}

impl Slot for Conn {
    fn token(&self) -> Token {
        self.token
    }
}

impl Conn {
    fn new(stream: TcpStream, token: Token, now: Instant) -> Conn {
        Conn {
            stream,
            token,
            phase: Phase::Head,
            since: now,
            served: false,
            input: Vec::new(),
            out: Pending::default(),
            close_after: false,
            readable: true,
            peer_closed: false,
            discarded: 0,
        }
    }

    fn deadline(&self) -> Instant {
        self.since
            + match self.phase {
                Phase::Head => HEAD_TIMEOUT,
                Phase::Idle => IDLE_TIMEOUT,
                Phase::Write => WRITE_TIMEOUT,
                Phase::Linger => LINGER_TIMEOUT,
            }
    }

    /// Makes all the progress possible without blocking: writes pending
    /// output, answers complete requests, reads more. Returns false when the
    /// connection should be closed.
    fn drive(&mut self, handler: &Handler, now: Instant) -> bool {
        loop {
            match self.phase {
                Phase::Linger => return self.linger(),
                Phase::Write => {
                    match self.out.flush(&mut self.stream) {
                        Ok(true) => self.response_done(now),
                        Ok(false) => return true,
                        Err(_) => return false,
                    }
                    continue;
                }
                Phase::Head | Phase::Idle => {}
            }
            if !self.input.is_empty() {
                match parse(&self.input) {
                    Parsed::Partial if self.input.len() < MAX_HEAD => {}
                    Parsed::Partial => {
                        self.queue_error(431, "request head too large\n", now);
                        continue;
                    }
                    Parsed::Bad { status, message } => {
                        self.queue_error(status, message, now);
                        continue;
                    }
                    Parsed::Request(request) => {
                        self.input.drain(..request.len);
                        let connection = request.persist;
                        self.close_after = !connection.keeps();
                        let response = match request.method {
                            Method::Get | Method::Head => {
                                let reply = call(handler, &request.path);
                                render(&reply, request.method == Method::Head, connection, "")
                            }
                            Method::Other => render(
                                &text_reply(405, "method not allowed\n"),
                                false,
                                connection,
                                "Allow: GET, HEAD\r\n",
                            ),
                        };
                        self.start_write(response, now);
                        continue;
                    }
                }
            }
            if self.peer_closed {
                return false; // nothing more will come; nothing left to send
            }
            if !self.readable {
                return true;
            }
            let start = self.input.len();
            self.input.resize(MAX_HEAD, 0);
            // Read until WouldBlock (`to_end`): the exporter reads no
            // event's FIN flag, so a short read proves nothing here.
            let result = crate::netio::read_some(&mut self.stream, &mut self.input[start..], true);
            let got = match result {
                Ok(crate::netio::Got::Data { n, .. }) => n,
                _ => 0,
            };
            self.input.truncate(start + got);
            match result {
                Ok(crate::netio::Got::Eof) => self.peer_closed = true,
                Ok(crate::netio::Got::Data { .. }) => {
                    if self.phase == Phase::Idle {
                        self.phase = Phase::Head;
                        self.since = now;
                    }
                }
                Ok(crate::netio::Got::Empty) => self.readable = false,
                Err(_) => return false,
            }
        }
    }

    /// Queues an error response and marks the connection for closing; the
    /// rest of the input is dropped unread.
    fn queue_error(&mut self, status: u16, message: &'static str, now: Instant) {
        self.input = Vec::new();
        self.close_after = true;
        let response = render(&text_reply(status, message), false, Persist::Close, "");
        self.start_write(response, now);
    }

    /// Queues `response`; the write phase sends it.
    fn start_write(&mut self, response: Vec<u8>, now: Instant) {
        self.out.queue(response);
        self.phase = Phase::Write;
        self.since = now;
    }

    /// A response has been written in full (and its buffer given back).
    fn response_done(&mut self, now: Instant) {
        self.since = now;
        if self.close_after {
            let _ = self.stream.shutdown(Shutdown::Write);
            self.phase = Phase::Linger;
        } else {
            self.served = true;
            self.phase = if self.input.is_empty() {
                Phase::Idle
            } else {
                Phase::Head
            };
        }
    }

    /// Discards input until the client closes; false once it is time to
    /// close the socket.
    fn linger(&mut self) -> bool {
        if self.peer_closed {
            return false;
        }
        let mut scratch = [0u8; 4096];
        while self.readable {
            match crate::netio::read_some(&mut self.stream, &mut scratch, true) {
                Ok(crate::netio::Got::Eof) | Err(_) => return false,
                Ok(crate::netio::Got::Data { n, .. }) => {
                    self.discarded += n;
                    if self.discarded > LINGER_MAX_BYTES {
                        return false;
                    }
                }
                Ok(crate::netio::Got::Empty) => self.readable = false,
            }
        }
        true
    }
}

/// Calls the handler, turning a panic into a 500 so that one bad scrape
/// does not take the endpoint down for the rest of the run.
fn call(handler: &Handler, path: &str) -> Reply {
    let reply = match catch_unwind(AssertUnwindSafe(|| handler(path))) {
        Ok(reply) => reply,
        Err(_) => return text_reply(500, "metrics handler failed\n"),
    };
    if (200..=599).contains(&reply.status) {
        reply
    } else {
        text_reply(500, "metrics handler returned an invalid status\n")
    }
}

fn text_reply(status: u16, message: &str) -> Reply {
    Reply {
        status,
        content_type: "text/plain; charset=utf-8",
        body: message.as_bytes().to_vec(),
    }
}

/// Serialises a response; `head_only` leaves the body out but keeps its
/// `Content-Length`. `extra` is more header lines, each ending in CRLF.
fn render(reply: &Reply, head_only: bool, connection: Persist, extra: &str) -> Vec<u8> {
    let connection = connection.header();
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{extra}{connection}\r\n",
        reply.status,
        headers::reason(reply.status),
        reply.content_type,
        reply.body.len(),
    );
    let mut out = Vec::with_capacity(head.len() + if head_only { 0 } else { reply.body.len() });
    out.extend_from_slice(head.as_bytes());
    if !head_only {
        out.extend_from_slice(&reply.body);
    }
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Get,
    Head,
    Other,
}

/// A complete, acceptable request head.
#[derive(Debug)]
struct Request {
    /// Bytes of input the head took.
    len: usize,
    method: Method,
    /// The path, query string stripped.
    path: String,
    /// What the connection does after the answer.
    persist: Persist,
}

/// The outcome of parsing the start of a connection's input.
#[derive(Debug)]
enum Parsed {
    /// The head is not complete yet.
    Partial,
    /// A request to answer.
    Request(Request),
    /// A request to refuse with `status`, then close.
    Bad { status: u16, message: &'static str },
}

/// The request head at the start of `input`, read by the servers' one
/// parser (`wire::request_head`); the exporter accepts no body at all.
fn parse(input: &[u8]) -> Parsed {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let head = match request_head::parse(input, &mut fields) {
        request_head::Parsed::Partial => return Parsed::Partial,
        request_head::Parsed::Refused(why) => {
            return Parsed::Bad {
                status: why.status(),
                message: why.message(),
            };
        }
        request_head::Parsed::Request(head) => head,
    };
    if head.body > 0 {
        return Parsed::Bad {
            status: Refused::CodedBody.status(),
            message: "request bodies are not accepted\n",
        };
    }
    let method = match head.method {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        _ => Method::Other,
    };
    Parsed::Request(Request {
        len: head.len,
        method,
        path: request_head::path_of(head.target).to_owned(),
        persist: head.persist,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netio::testing::{Client, PORT_WAIT, Response, connect, with_port};
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicUsize, Ordering};

    const METRICS: &[u8] =
        b"# HELP soakd_requests_total Requests sent.\n# TYPE soakd_requests_total counter\nsoakd_requests_total 42\n";
    const BIG: usize = 32 * 1024 * 1024;

    fn handler() -> Handler {
        Arc::new(|path: &str| match path {
            "/metrics" => Reply {
                status: 200,
                content_type: "text/plain; version=0.0.4; charset=utf-8",
                body: METRICS.to_vec(),
            },
            "/big" => Reply {
                status: 200,
                content_type: "application/octet-stream",
                body: (0..BIG).map(|i| (i % 251) as u8).collect(),
            },
            "/panic" => panic!("handler panics on purpose (test)"),
            "/weird" => Reply {
                status: 42,
                content_type: "text/plain",
                body: Vec::new(),
            },
            _ => Reply {
                status: 404,
                content_type: "text/plain; charset=utf-8",
                body: b"not found\n".to_vec(),
            },
        })
    }

    fn start() -> Exporter {
        start_with(handler())
    }

    /// Starts an exporter on 127.0.0.1:0, waiting for a free port if needed.
    fn start_with(handler: Handler) -> Exporter {
        let deadline = Instant::now() + PORT_WAIT;
        loop {
            match Exporter::start("127.0.0.1:0".parse().unwrap(), Arc::clone(&handler)) {
                Ok(exporter) => return exporter,
                Err(Error::Preflight(_)) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(200)),
                Err(err) => panic!("cannot start the exporter: {err}"),
            }
        }
    }

    fn get(addr: SocketAddr, path: &str) -> Response {
        let mut client = Client::connect(addr);
        client.send(format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").as_bytes());
        client.response(false).unwrap()
    }

    fn assert_metrics(response: &Response) {
        assert_eq!(response.status, 200);
        assert_eq!(response.body, METRICS);
        assert_eq!(
            response.header("content-length"),
            Some(METRICS.len().to_string().as_str())
        );
        assert_eq!(
            response.header("content-type"),
            Some("text/plain; version=0.0.4; charset=utf-8")
        );
    }

    #[test]
    fn get_metrics() {
        let exporter = start();
        let response = get(exporter.local_addr(), "/metrics");
        assert_metrics(&response);
        assert_eq!(response.header("connection"), None);
        assert_metrics(&get(exporter.local_addr(), "/metrics?name[]=x"));
        exporter.stop();
    }

    #[test]
    fn head_returns_headers_only() {
        let exporter = start();
        let mut client = Client::connect(exporter.local_addr());
        client.send(b"HEAD /metrics HTTP/1.1\r\nHost: test\r\n\r\nGET /metrics HTTP/1.1\r\n\r\n");
        let response = client.response(true).unwrap();
        assert_eq!(response.status, 200);
        assert_eq!(
            response.header("content-length"),
            Some(METRICS.len().to_string().as_str())
        );
        // The next bytes are the second response: no body was sent for HEAD.
        assert_metrics(&client.response(false).unwrap());
        exporter.stop();
    }

    #[test]
    fn other_methods_get_405_and_keep_the_connection() {
        let exporter = start();
        let mut client = Client::connect(exporter.local_addr());
        client.send(b"POST /metrics HTTP/1.1\r\nHost: test\r\n\r\n");
        let response = client.response(false).unwrap();
        assert_eq!(response.status, 405);
        assert_eq!(response.header("allow"), Some("GET, HEAD"));
        client.send(b"GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n");
        assert_metrics(&client.response(false).unwrap());
        exporter.stop();
    }

    #[test]
    fn handler_status_passes_through() {
        let exporter = start();
        let response = get(exporter.local_addr(), "/nothing-here");
        assert_eq!(response.status, 404);
        assert_eq!(response.body, b"not found\n");
        assert_eq!(get(exporter.local_addr(), "/weird").status, 500);
        exporter.stop();
    }

    #[test]
    fn handler_panic_is_a_500_and_the_exporter_goes_on() {
        let exporter = start();
        let mut client = Client::connect(exporter.local_addr());
        client.send(b"GET /panic HTTP/1.1\r\n\r\n");
        assert_eq!(client.response(false).unwrap().status, 500);
        client.send(b"GET /metrics HTTP/1.1\r\n\r\n");
        assert_metrics(&client.response(false).unwrap());
        exporter.stop();
    }

    #[test]
    fn keep_alive_serves_several_requests() {
        let exporter = start();
        let mut client = Client::connect(exporter.local_addr());
        for _ in 0..3 {
            client.send(b"GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n");
            assert_metrics(&client.response(false).unwrap());
        }
        client.send(b"GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n");
        let response = client.response(false).unwrap();
        assert_metrics(&response);
        assert_eq!(response.header("connection"), Some("close"));
        assert!(client.closed());
        exporter.stop();
    }

    #[test]
    fn pipelined_requests_are_answered_in_order() {
        let exporter = start();
        let mut client = Client::connect(exporter.local_addr());
        client.send(
            b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\nGET /missing HTTP/1.1\r\nHost: a\r\n\r\n\
              HEAD /metrics HTTP/1.1\r\n\r\nGET /metrics?x HTTP/1.1\r\n\r\n",
        );
        assert_metrics(&client.response(false).unwrap());
        assert_eq!(client.response(false).unwrap().status, 404);
        assert_eq!(client.response(true).unwrap().status, 200);
        assert_metrics(&client.response(false).unwrap());
        exporter.stop();
    }

    #[test]
    fn http10_closes_unless_asked_to_keep_alive() {
        let exporter = start();
        let mut client = Client::connect(exporter.local_addr());
        client.send(b"GET /metrics HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        let response = client.response(false).unwrap();
        assert_metrics(&response);
        assert_eq!(response.header("connection"), Some("keep-alive"));
        client.send(b"GET /metrics HTTP/1.0\r\n\r\n");
        let response = client.response(false).unwrap();
        assert_metrics(&response);
        assert_eq!(response.header("connection"), Some("close"));
        assert!(client.closed());
        exporter.stop();
    }

    #[test]
    fn request_bodies_are_refused() {
        let exporter = start();
        for request in [
            &b"POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"[..],
            b"GET /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            b"GET /metrics HTTP/1.1\r\nContent-Length: x\r\n\r\n",
        ] {
            let mut client = Client::connect(exporter.local_addr());
            client.send(request);
            let response = client.response(false).unwrap();
            assert_eq!(response.status, 400);
            assert_eq!(response.header("connection"), Some("close"));
            assert!(client.closed());
        }
        let mut client = Client::connect(exporter.local_addr());
        client.send(b"GET /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
        assert_metrics(&client.response(false).unwrap());
        exporter.stop();
    }

    #[test]
    fn oversized_head_gets_431() {
        let exporter = start();
        let mut client = Client::connect(exporter.local_addr());
        let mut head = b"GET /metrics HTTP/1.1\r\nX-Long: ".to_vec();
        head.resize(head.len() + MAX_HEAD + 1024, b'a');
        client.send(&head);
        let response = client.response(false).unwrap();
        assert_eq!(response.status, 431);
        assert_eq!(response.header("connection"), Some("close"));
        assert!(client.closed());
        assert_metrics(&get(exporter.local_addr(), "/metrics"));
        exporter.stop();
    }

    #[test]
    fn megabyte_head_is_refused_and_others_still_served() {
        let exporter = start();
        let addr = exporter.local_addr();
        let stream = connect(addr);
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        stream.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut writer = stream.try_clone().unwrap();
        let sender = std::thread::spawn(move || {
            let mut head = b"GET /metrics HTTP/1.1\r\nX-Long: ".to_vec();
            head.resize(1024 * 1024, b'a');
            let _ = writer.write_all(&head); // may fail once the server closes
        });
        let mut client = Client {
            reader: std::io::BufReader::new(stream),
        };
        match client.response(false) {
            Ok(response) => assert_eq!(response.status, 431),
            Err(err) => assert_ne!(err.kind(), io::ErrorKind::WouldBlock, "no answer at all"),
        }
        sender.join().unwrap();
        assert_metrics(&get(addr, "/metrics"));
        exporter.stop();
    }

    #[test]
    fn garbage_gets_400_and_others_still_served() {
        let exporter = start();
        for garbage in [
            &b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n"[..],
            b"hello there\r\n\r\n",
            b"GET /metrics HTTP/2.0\r\n\r\n",
            b"GET /metrics HTTP/1.1\r\nbad header\r\n\r\n",
        ] {
            let mut client = Client::connect(exporter.local_addr());
            client.send(garbage);
            match client.response(false) {
                Ok(response) => assert_eq!(response.status, 400, "for {garbage:?}"),
                Err(err) => assert_ne!(err.kind(), io::ErrorKind::WouldBlock, "no answer to {garbage:?}"),
            }
            assert!(client.closed());
        }
        assert_metrics(&get(exporter.local_addr(), "/metrics"));
        exporter.stop();
    }

    #[test]
    fn idle_flood_does_not_lock_out_scrapes() {
        let exporter = start();
        let addr = exporter.local_addr();
        // A scraper's kept-alive connection, already served once.
        let mut scraper = Client::connect(addr);
        scraper.send(b"GET /metrics HTTP/1.1\r\n\r\n");
        assert_metrics(&scraper.response(false).unwrap());
        let idle: Vec<std::net::TcpStream> = (0..200).map(|_| connect(addr)).collect();
        let began = Instant::now();
        let mut client = Client::connect(addr);
        client
            .reader
            .get_ref()
            .set_read_timeout(Some(Duration::from_secs(3)))
            .unwrap();
        client.send(b"GET /metrics HTTP/1.1\r\n\r\n");
        assert_metrics(&client.response(false).unwrap());
        assert!(began.elapsed() < Duration::from_secs(3));
        // The kept-alive scraper connection was not the one evicted.
        scraper.send(b"GET /metrics HTTP/1.1\r\n\r\n");
        assert_metrics(&scraper.response(false).unwrap());
        drop(idle);
        exporter.stop();
    }

    #[test]
    fn slowloris_is_closed_while_scrapes_go_on() {
        let exporter = start();
        let addr = exporter.local_addr();
        let slow = std::thread::spawn(move || {
            let mut stream = connect(addr);
            stream.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
            let began = Instant::now();
            let head = b"GET /metrics HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
            let mut buf = [0u8; 64];
            for byte in head.iter().cycle() {
                if began.elapsed() > Duration::from_secs(15) {
                    return None;
                }
                if stream.write_all(&[*byte]).is_err() {
                    return Some(began.elapsed());
                }
                // Waits the 500 ms between bytes, noticing a close.
                match stream.read(&mut buf) {
                    Ok(0) => return Some(began.elapsed()),
                    Ok(_) => panic!("slowloris got an answer"),
                    Err(err) if matches!(err.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
                    Err(_) => return Some(began.elapsed()),
                }
            }
            unreachable!()
        });
        std::thread::sleep(Duration::from_secs(1));
        for _ in 0..3 {
            assert_metrics(&get(addr, "/metrics"));
            std::thread::sleep(Duration::from_millis(500));
        }
        let closed_after = slow.join().unwrap().expect("slowloris was never closed");
        eprintln!("slowloris closed after {closed_after:?}");
        assert!(
            closed_after >= Duration::from_secs(4) && closed_after <= Duration::from_secs(8),
            "closed after {closed_after:?}"
        );
        exporter.stop();
    }

    #[test]
    fn large_responses_finish_on_writable() {
        let exporter = start();
        let mut client = Client::connect(exporter.local_addr());
        client.send(b"GET /big HTTP/1.1\r\n\r\nGET /metrics HTTP/1.1\r\n\r\n");
        std::thread::sleep(Duration::from_millis(300));
        let response = client.response(false).unwrap();
        assert_eq!(response.status, 200);
        assert_eq!(response.body.len(), BIG);
        assert!(response.body.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
        assert_metrics(&client.response(false).unwrap());
        exporter.stop();
    }

    #[test]
    fn client_that_never_reads_is_closed() {
        let exporter = start();
        let mut client = Client::connect(exporter.local_addr());
        client.send(b"GET /big HTTP/1.1\r\n\r\n");
        std::thread::sleep(WRITE_TIMEOUT + Duration::from_secs(1));
        let mut received = 0usize;
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match client.reader.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => received += n,
            }
        }
        assert!(received < BIG, "the whole response arrived");
        assert_metrics(&get(exporter.local_addr(), "/metrics"));
        exporter.stop();
    }

    #[test]
    fn stop_is_prompt_and_frees_the_port() {
        let exporter = start();
        let addr = exporter.local_addr();
        let mut client = Client::connect(addr);
        client.send(b"GET /metrics HTTP/1.1\r\n\r\n");
        assert_metrics(&client.response(false).unwrap());
        let _silent = connect(addr);
        std::thread::sleep(Duration::from_millis(100));
        let began = Instant::now();
        exporter.stop();
        assert!(
            began.elapsed() < Duration::from_secs(1),
            "stop took {:?}",
            began.elapsed()
        );
        assert!(client.closed());
        std::net::TcpListener::bind(addr).expect("port still taken after stop");
    }

    #[test]
    fn drop_stops_too() {
        let exporter = start();
        let addr = exporter.local_addr();
        drop(exporter);
        std::net::TcpListener::bind(addr).expect("port still taken after drop");
    }

    #[test]
    fn address_in_use_is_a_preflight_error() {
        let taken = with_port("bind", || std::net::TcpListener::bind("127.0.0.1:0"));
        let addr = taken.local_addr().unwrap();
        match Exporter::start(addr, handler()) {
            Err(Error::Preflight(message)) => {
                assert!(message.contains("--metrics-listen"), "{message}");
                assert!(message.contains(&addr.to_string()), "{message}");
            }
            other => panic!("expected a preflight error, got {other:?}"),
        }
    }

    #[test]
    fn handler_sees_the_path_without_query() {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let calls = Arc::new(AtomicUsize::new(0));
        let handler: Handler = {
            let seen = Arc::clone(&seen);
            let calls = Arc::clone(&calls);
            Arc::new(move |path: &str| {
                calls.fetch_add(1, Ordering::SeqCst);
                seen.lock().unwrap().push(path.to_owned());
                Reply {
                    status: 200,
                    content_type: "text/plain",
                    body: Vec::new(),
                }
            })
        };
        let exporter = start_with(handler);
        let mut client = Client::connect(exporter.local_addr());
        client
            .send(b"GET /metrics?a=b HTTP/1.1\r\n\r\nGET http://host:9/x/y?z HTTP/1.1\r\n\r\nPUT /p HTTP/1.1\r\n\r\n");
        assert_eq!(client.response(false).unwrap().status, 200);
        assert_eq!(client.response(false).unwrap().status, 200);
        assert_eq!(client.response(false).unwrap().status, 405);
        exporter.stop();
        assert_eq!(*seen.lock().unwrap(), ["/metrics", "/x/y"]);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }
}
