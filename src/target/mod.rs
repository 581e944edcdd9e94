//! The built-in HTTP/1.1 target behind `soakd target`.
//!
//! A soak test needs something to point at that is predictable, cheap and
//! never the bottleneck: the demo and most integration tests run soakd
//! against this server. It answers `pong` on keep-alive connections and has
//! a few extra routes that exercise the client's HTTP handling (chunked
//! bodies with trailers, close-delimited bodies, `100 Continue`, any status
//! code, bodies larger than one read, an optional fixed response delay).
//!
//! It has to hold tens of thousands of idle connections on one core, so it
//! is built for that rather than for generality:
//!
//! * one `mio::Poll` per thread, edge-triggered, and each thread owns its own
//!   `SO_REUSEPORT` listener so the kernel spreads connections and threads
//!   share nothing but the read-only response table;
//! * every response's bytes are rendered once at startup, so the hot path
//!   neither formats nor allocates;
//! * all reads go through one per-thread buffer. A connection only owns heap
//!   memory while a request head is split across reads or while the socket
//!   will not take our output, and gives it back afterwards, so an idle
//!   connection costs a socket plus a struct of about a hundred bytes.
//!
//! For hardening tests it can also misbehave on purpose: with a [`Fault`]
//! (`soakd target --fault MODE[@N]`) every connection, or only every N-th
//! request, gets a broken answer (a close mid-response, a reset, silence, a
//! trickle, a huge or malformed head, …) or the listener stops accepting.
//! Fault responses are rendered at startup like all others, and without a
//! fault the hot path is the same as before but for one branch.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::event::Event;
use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token, Waker};
use slab::Slab;
use socket2::{Domain, Socket, Type};

mod fault;
mod responses;
pub mod tls;

pub use fault::{Fault, FaultMode, fault_help};
use responses::*;

use crate::Error;
use crate::netio::{self, AcceptFailure, AcceptPause, Generations, LISTENER, Stream, TlsStream, WAKER};
use crate::wire::headers;

/// Settings for the built-in target.
#[derive(Debug, Clone)]
pub struct TargetConfig {
    /// Address to listen on; port 0 picks a free port (see
    /// [`TargetHandle::local_addr`]).
    pub listen: SocketAddr,
    /// Number of server threads, each with its own poll and listener.
    /// Must be at least 1.
    pub threads: usize,
    /// How long after its request arrived each response is sent; zero
    /// answers at once.
    pub delay: Duration,
    /// Misbehave on purpose (see [`Fault`]); `None`, the default, serves
    /// every request correctly.
    pub fault: Option<Fault>,
    /// Serve TLS with this configuration (`--tls`).
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

/// A running target; dropping it does not stop it, call [`TargetHandle::stop`].
#[derive(Debug)]
pub struct TargetHandle {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    threads: Vec<(Waker, JoinHandle<()>)>,
}

impl TargetHandle {
    /// The address the target actually listens on (port 0 resolved).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops every server thread and waits for them; all listeners and
    /// connections are closed when this returns.
    ///
    /// A panic in a server thread is re-raised here once all threads have
    /// been joined, so tests cannot miss it.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Release);
        for (waker, _) in &self.threads {
            // A failed wake leaves nothing better to do than join anyway;
            // eventfd writes do not fail in practice.
            let _ = waker.wake();
        }
        let mut panic = None;
        for (_, thread) in self.threads {
            if let Err(payload) = thread.join() {
                panic.get_or_insert(payload);
            }
        }
        if let Some(payload) = panic {
            std::panic::resume_unwind(payload);
        }
    }
}

/// Binds (before returning, so errors are synchronous) and starts
/// `cfg.threads` server threads.
///
/// Fails with [`Error::Usage`] for zero threads, [`Error::Preflight`] when
/// the address cannot be bound, and [`Error::Io`] when a poll or thread
/// cannot be created.
pub fn spawn(cfg: &TargetConfig) -> Result<TargetHandle, Error> {
    if cfg.threads == 0 {
        return Err(Error::Usage("the target needs at least 1 thread".to_string()));
    }
    if let Some(fault) = &cfg.fault {
        fault.validate().map_err(Error::Usage)?;
        if matches!(fault.mode, FaultMode::HandshakeStall | FaultMode::CloseNoNotify) && cfg.tls.is_none() {
            return Err(Error::Usage(format!("the {} fault needs --tls", fault.mode.name())));
        }
        if fault.mode == FaultMode::Trickle && !cfg.delay.is_zero() {
            return Err(Error::Usage(
                "the trickle fault cannot be combined with --delay".to_string(),
            ));
        }
    }
    let stop_accepting = cfg.fault.is_some_and(|f| f.mode == FaultMode::StopAccepting);
    // A listener that is never accepted from: the smallest backlog, so that
    // it fills after a connection or two.
    let backlog = if stop_accepting { 1 } else { BACKLOG };
    // SO_REUSEPORT only when several of our own listeners must share the
    // port: on a lone listener it would let another process silently steal
    // half of the connections.
    let reuse_port = cfg.threads > 1;
    let first = bind(cfg.listen, reuse_port, backlog)?;
    let addr = first
        .local_addr()
        .map_err(|e| Error::io("reading the target's bound address", e))?;
    let mut listeners = vec![first];
    for _ in 1..cfg.threads {
        listeners.push(bind(addr, reuse_port, backlog)?);
    }

    let responses = Arc::new(Responses::build(cfg.fault.map(|f| f.mode)));
    let mut handle = TargetHandle {
        addr,
        stop: Arc::new(AtomicBool::new(false)),
        threads: Vec::with_capacity(cfg.threads),
    };
    for (index, listener) in listeners.into_iter().enumerate() {
        match start_thread(index, listener, cfg, &responses, &handle.stop) {
            Ok(thread) => handle.threads.push(thread),
            Err(err) => {
                handle.stop();
                return Err(err);
            }
        }
    }
    Ok(handle)
}

/// Request heads longer than this get `431` and the connection is closed.
const MAX_HEAD: usize = 16 * 1024;
/// Most header fields one request may carry; more gets `431`.
const MAX_HEADERS: usize = 64;
/// Size of the per-thread read buffer.
const READ_BUF: usize = 64 * 1024;
/// Pending output is written out once it reaches this size, which bounds
/// the per-thread batch buffer when a read holds many pipelined `/big`s.
const FLUSH_AT: usize = 64 * 1024;
/// Listen backlog; the kernel clamps it to `net.core.somaxconn`, so asking
/// for the most means "as large as this machine allows".
const BACKLOG: i32 = i32::MAX;
/// How long accepting pauses after running out of file descriptors.
/// With a delay, a connection may have this many responses waiting before
/// we stop reading from it, so a client that pipelines without end cannot
/// grow the delay queue without end.
const MAX_IN_FLIGHT: u32 = 1024;
/// Readiness events taken from the poll at once.
const EVENTS: usize = 1024;

/// Opens one non-blocking listening socket on `addr`.
fn bind(addr: SocketAddr, reuse_port: bool, backlog: i32) -> Result<TcpListener, Error> {
    let fail = |err: io::Error| {
        Error::Preflight(format!(
            "cannot listen on {addr}: {err}; pick a free address with --listen"
        ))
    };
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None).map_err(fail)?;
    // Tests kill and restart the target on the same port; without
    // SO_REUSEADDR the old connections in TIME_WAIT would block the bind.
    socket.set_reuse_address(true).map_err(fail)?;
    if reuse_port {
        socket.set_reuse_port(true).map_err(fail)?;
    }
    socket.set_nonblocking(true).map_err(fail)?;
    socket.bind(&addr.into()).map_err(fail)?;
    socket.listen(backlog).map_err(fail)?;
    Ok(TcpListener::from_std(socket.into()))
}

/// Creates a thread's poll and waker and starts the thread.
fn start_thread(
    index: usize,
    mut listener: TcpListener,
    cfg: &TargetConfig,
    responses: &Arc<Responses>,
    stop: &Arc<AtomicBool>,
) -> Result<(Waker, JoinHandle<()>), Error> {
    let poll = Poll::new().map_err(|e| Error::io("creating the target's poll", e))?;
    let waker = Waker::new(poll.registry(), WAKER).map_err(|e| Error::io("creating the target's waker", e))?;
    // The stop-accepting fault keeps the listener (its backlog fills) but
    // never polls it, so nothing is ever accepted.
    if !cfg.fault.is_some_and(|f| f.mode == FaultMode::StopAccepting) {
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)
            .map_err(|e| Error::io("registering the target's listener", e))?;
    }
    let worker = Worker {
        poll,
        listener,
        conns: Slab::new(),
        generations: Generations::default(),
        buf: vec![0; READ_BUF].into_boxed_slice(),
        responder: Responder {
            responses: Arc::clone(responses),
            delay: cfg.delay,
            batch: Vec::new(),
            queue: VecDeque::new(),
            fault: cfg.fault,
            fault_count: 0,
            trickles: VecDeque::new(),
        },
        accept_pause: AcceptPause::default(),
        tls: cfg.tls.clone(),
        stop: Arc::clone(stop),
    };
    let thread = std::thread::Builder::new()
        .name(format!("soakd-target-{index}"))
        .spawn(move || {
            // Nobody joins a target that is never stopped, so an error here
            // can only be reported where an operator will see it.
            if let Err(err) = worker.run() {
                eprintln!("soakd target: thread {index} stopped: {err}");
            }
        })
        .map_err(|e| Error::io("starting a target thread", e))?;
    Ok((waker, thread))
}

/// One server thread: its poll, listener and connections.
struct Worker {
    poll: Poll,
    listener: TcpListener,
    conns: Slab<Conn>,
    /// A generation per accept, carried in the connection's token.
    generations: Generations,
    /// The one buffer every read of this thread goes through.
    buf: Box<[u8]>,
    responder: Responder,
    /// Set after running out of file descriptors: accepting again right
    /// away would only fail again and spin the thread.
    accept_pause: AcceptPause,
    /// `--tls`: every accepted connection speaks TLS with this.
    tls: Option<Arc<rustls::ServerConfig>>,
    stop: Arc<AtomicBool>,
}

impl Worker {
    fn run(mut self) -> Result<(), Error> {
        let mut events = Events::with_capacity(EVENTS);
        loop {
            let timeout = self.timeout(Instant::now());
            if let Err(err) = self.poll.poll(&mut events, timeout) {
                if err.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(Error::io("waiting for target events", err));
            }
            for event in events.iter() {
                match event.token() {
                    WAKER => {
                        if self.stop.load(Ordering::Acquire) {
                            return Ok(());
                        }
                    }
                    LISTENER => self.accept(),
                    _ => self.conn_event(event),
                }
            }
            let now = Instant::now();
            if self.accept_pause.deadline().is_some() && !self.accept_pause.active(now) {
                // Edge-triggered: connections that queued up during the
                // pause will not produce a new event, so go and get them.
                self.accept();
            }
            self.deliver_due(now);
            if !self.responder.trickles.is_empty() {
                self.trickle_due(now);
            }
        }
    }

    /// How long the poll may sleep: until the next delayed response (or
    /// trickled byte) or the end of an accept pause, or forever, so idle
    /// connections cost no CPU.
    fn timeout(&self, now: Instant) -> Option<Duration> {
        let due = match (self.responder.queue.front(), self.responder.trickles.front()) {
            (Some(a), Some(b)) => Some(a.due.min(b.due)),
            (a, b) => a.map(|d| d.due).or(b.map(|t| t.due)),
        };
        let deadline = match (due, self.accept_pause.deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        deadline.map(|d| d.saturating_duration_since(now))
    }

    fn accept(&mut self) {
        if self.accept_pause.deadline().is_some() {
            return;
        }
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if self.responder.fault_hits(FaultMode::CloseAfterAccept) {
                        drop(stream);
                        continue;
                    }
                    let key = self.conns.vacant_key();
                    if key >= netio::KEY_LIMIT {
                        continue; // dropping it refuses the connection
                    }
                    // Responses are written whole; Nagle would only hold back
                    // the next one until the previous one is acknowledged.
                    let _ = stream.set_nodelay(true);
                    let token = netio::token(key, self.generations.next());
                    let mut stream = match &self.tls {
                        None => Stream::Plain(stream),
                        Some(config) => match TlsStream::server(stream, config.clone()) {
                            Ok(t) => Stream::Tls(Box::new(t)),
                            Err(_) => continue,
                        },
                    };
                    // Registered for both directions once: with edge
                    // triggering a spare writable edge is cheaper than a
                    // reregister syscall each time a write would block.
                    if stream.register(self.poll.registry(), token).is_ok() {
                        let mut conn = Conn::new(stream, token);
                        if self.tls.is_some() && self.responder.fault_hits(FaultMode::HandshakeStall) {
                            conn.fault = ConnFault::Stalled;
                        }
                        self.conns.insert(conn);
                    }
                }
                Err(err) => match netio::accept_failure(&err) {
                    AcceptFailure::Drained => return,
                    // The peer gave up before we got to it; others may wait.
                    AcceptFailure::Retry => {}
                    // EMFILE, ENFILE, ENOBUFS and anything unexpected: retrying
                    // at once would fail the same way, so back off.
                    AcceptFailure::OutOfFds | AcceptFailure::Other => {
                        self.accept_pause.pause(Instant::now());
                        return;
                    }
                },
            }
        }
    }

    fn conn_event(&mut self, event: &Event) {
        let token = event.token();
        let key = netio::split(token).0;
        let Some(conn) = self.conns.get_mut(key) else {
            return;
        };
        if conn.token != token {
            return; // stale: the slot belongs to a newer connection
        }
        let result = self.responder.on_event(conn, &mut self.buf, event);
        // On error the batch may hold output for this connection only.
        self.responder.batch.clear();
        if result.is_err() {
            self.conns.remove(key);
        } else if conn.finished() {
            self.conns.remove(key).end();
        }
    }

    /// Sends the next byte of every trickled response that is due.
    fn trickle_due(&mut self, now: Instant) {
        while let Some(front) = self.responder.trickles.front() {
            if front.due > now {
                break;
            }
            let token = front.token;
            self.responder.trickles.pop_front();
            let key = netio::split(token).0;
            let conn = match self.conns.get_mut(key) {
                Some(conn) if conn.token == token => conn,
                _ => continue, // the connection is gone
            };
            let result = self.responder.trickle(conn, now, &mut self.buf);
            self.responder.batch.clear();
            if result.is_err() {
                self.conns.remove(key);
            } else if conn.finished() {
                self.conns.remove(key).end();
            }
        }
    }

    /// Sends every delayed response that is due.
    fn deliver_due(&mut self, now: Instant) {
        while let Some(front) = self.responder.queue.front() {
            if front.due > now {
                break;
            }
            let token = front.token;
            let key = netio::split(token).0;
            let conn = match self.conns.get_mut(key) {
                Some(conn) if conn.token == token => conn,
                _ => {
                    // The connection is gone; its responses go with it.
                    self.responder.queue.pop_front();
                    continue;
                }
            };
            let result = self.responder.deliver(conn, now, &mut self.buf);
            self.responder.batch.clear();
            if result.is_err() {
                self.conns.remove(key);
            } else if conn.finished() {
                self.conns.remove(key).end();
            }
        }
    }
}

/// A fault acted out on one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ConnFault {
    /// None: the normal case.
    None,
    /// `never-answer`: input is read and dropped, nothing is sent.
    Muted,
    /// `trickle`: this many bytes of the trickle response are out; reading
    /// waits until all are.
    Trickle { sent: u32 },
    /// `handshake-stall`: nothing is read, so the TLS handshake never
    /// finishes; the connection ends when the client closes it.
    Stalled,
    /// `close-no-notify`: the connection closes after its response without
    /// a TLS close_notify.
    NoNotify,
}

/// One client connection. Kept small on purpose: an idle plain connection
/// owns no heap memory (a TLS one its session and rustls's receive buffer).
struct Conn {
    stream: Stream,
    token: Token,
    /// Request body bytes still to be skipped.
    body_left: u64,
    /// Output the socket would not take yet; written on WRITABLE.
    out: Vec<u8>,
    /// How much of `out` has been written.
    out_pos: usize,
    /// Received bytes not handled yet: an incomplete request head, or input
    /// set aside while our output is blocked.
    input: Vec<u8>,
    /// Responses of this connection waiting in the delay queue.
    in_flight: u32,
    /// A response that ends the connection has been produced; later input
    /// is discarded.
    closing: bool,
    /// The peer has shut down its sending side.
    eof: bool,
    /// A fault being acted out; [`ConnFault::None`] normally.
    fault: ConnFault,
    /// Reading stopped because output was blocked. No new edge will come
    /// for data already in the socket, so reading is resumed by hand.
    paused: bool,
}

impl Conn {
    fn new(stream: Stream, token: Token) -> Conn {
        Conn {
            stream,
            token,
            body_left: 0,
            out: Vec::new(),
            out_pos: 0,
            input: Vec::new(),
            in_flight: 0,
            closing: false,
            eof: false,
            fault: ConnFault::None,
            paused: false,
        }
    }

    /// Whether to stop taking requests until output drains: the peer is
    /// not reading what it asked for (or a trickled response is still
    /// going out, and later responses must wait for it).
    fn blocked(&self) -> bool {
        !self.out.is_empty() || self.in_flight >= MAX_IN_FLIGHT || matches!(self.fault, ConnFault::Trickle { .. })
    }

    /// Whether input is dropped unread: the connection is closing, or
    /// muted by the `never-answer` fault.
    fn discarding(&self) -> bool {
        self.closing || self.fault == ConnFault::Muted
    }

    /// Whether the connection has nothing left to do and can be closed.
    fn finished(&self) -> bool {
        (self.closing || self.eof) && self.out.is_empty() && self.in_flight == 0 && !self.stream.wants_write()
    }

    /// Ends a finished connection: a TLS one says close_notify first,
    /// unless the `close-no-notify` fault wants it cut.
    fn end(mut self) {
        if self.fault != ConnFault::NoNotify
            && let Stream::Tls(t) = &mut self.stream
        {
            t.close_notify();
        }
    }

    /// Writes `bytes` now, keeping whatever the socket does not take.
    fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        if !self.out.is_empty() {
            // Earlier output is still waiting; keep the order.
            self.out.extend_from_slice(bytes);
            return Ok(());
        }
        let mut done = 0;
        while done < bytes.len() {
            match self.stream.write(&bytes[done..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => done += n,
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                    self.out = bytes[done..].to_vec();
                    self.out_pos = 0;
                    return Ok(());
                }
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }

    /// Writes as much of the kept output as the socket takes.
    fn write_out(&mut self) -> io::Result<()> {
        while self.out_pos < self.out.len() {
            match self.stream.write(&self.out[self.out_pos..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.out_pos += n,
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return Err(err),
            }
        }
        // Give the memory back: this connection may now idle for hours.
        self.out = Vec::new();
        self.out_pos = 0;
        Ok(())
    }
}

/// Why [`Responder::consume`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// All input used; the rest, if any, is an incomplete request head.
    NeedMore,
    /// Output is blocked; the rest waits until it drains.
    Blocked,
    /// The connection is closing; the rest is dropped.
    Discard,
}

/// A response waiting for its due time.
struct Delayed {
    due: Instant,
    token: Token,
    id: u16,
}

/// A connection whose trickled response sends its next byte at `due`.
struct Trickle {
    due: Instant,
    token: Token,
}

/// Time between two bytes of a trickled response.
const TRICKLE_STEP: Duration = Duration::from_millis(100);

/// Per-thread state for turning requests into responses.
struct Responder {
    responses: Arc<Responses>,
    delay: Duration,
    /// Responses produced by one read, written with one syscall.
    batch: Vec<u8>,
    /// Delayed responses in arrival order. All delays are equal, so arrival
    /// order is due order and a FIFO is all the timer this needs.
    queue: VecDeque<Delayed>,
    /// The fault to act out, if any.
    fault: Option<Fault>,
    /// Requests (or, for `close-after-accept`, connections) since the fault
    /// last hit.
    fault_count: u32,
    /// Trickled responses waiting for their next byte; every step is
    /// [`TRICKLE_STEP`], so this is a FIFO too.
    trickles: VecDeque<Trickle>,
}

impl Responder {
    fn on_event(&mut self, conn: &mut Conn, buf: &mut [u8], event: &Event) -> io::Result<()> {
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
        if event.is_writable() && !conn.out.is_empty() {
            conn.write_out()?;
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

    /// Counts one request (or accepted connection) towards the fault and
    /// says whether this one is hit by `mode`.
    fn fault_hits(&mut self, mode: FaultMode) -> bool {
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
        if matches!(
            fault.mode,
            FaultMode::CloseAfterAccept | FaultMode::StopAccepting | FaultMode::HandshakeStall
        ) || !self.fault_hits(fault.mode)
        {
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
    fn trickle(&mut self, conn: &mut Conn, now: Instant, buf: &mut [u8]) -> io::Result<()> {
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
        if self.delay.is_zero() {
            self.batch.extend_from_slice(&response.bytes);
            if self.batch.len() >= FLUSH_AT {
                self.flush(conn)?;
            }
        } else {
            self.queue.push_back(Delayed {
                due: now + self.delay,
                token: conn.token,
                id,
            });
            conn.in_flight += 1;
        }
        Ok(())
    }

    /// Sends the due responses at the front of the queue that belong to
    /// `conn` (consecutive ones go out in one write).
    fn deliver(&mut self, conn: &mut Conn, now: Instant, buf: &mut [u8]) -> io::Result<()> {
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
    let (content_length, close, keep_alive) = (f.content_length, f.close, f.keep_alive);
    let persist = match req.version {
        Some(1) if close => Persist::Close,
        Some(1) => Persist::Default,
        _ if keep_alive && !close => Persist::KeepAlive,
        _ => Persist::Close,
    };
    let head = req.method == Some("HEAD");
    let route = Route::of(req.path.unwrap_or("/"));
    (response_id(route, head, persist), content_length.unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{Shutdown, TcpStream};
    use std::thread;

    const PONG: &str = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Type: text/plain\r\n\r\npong";

    fn start_with(threads: usize, delay: Duration) -> TargetHandle {
        spawn(&TargetConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            threads,
            delay,
            fault: None,
            tls: None,
        })
        .expect("target starts")
    }

    fn start() -> TargetHandle {
        start_with(2, Duration::ZERO)
    }

    fn connect(target: &TargetHandle) -> TcpStream {
        let stream = TcpStream::connect(target.local_addr()).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        stream.set_nodelay(true).unwrap();
        stream
    }

    fn get(path: &str) -> String {
        format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n")
    }

    /// Reads exactly as many bytes as `want` holds and compares.
    fn expect(stream: &mut TcpStream, want: &str) {
        let mut got = vec![0; want.len()];
        stream.read_exact(&mut got).expect("full response");
        assert_eq!(String::from_utf8_lossy(&got), want);
    }

    fn expect_eof(stream: &mut TcpStream) {
        let mut rest = Vec::new();
        stream.read_to_end(&mut rest).expect("clean close");
        assert_eq!(String::from_utf8_lossy(&rest), "", "nothing after the response");
    }

    fn status(code: u16, reason: &str) -> String {
        format!("HTTP/1.1 {code} {reason}\r\nContent-Length: 4\r\nContent-Type: text/plain\r\n\r\npong")
    }

    fn big() -> String {
        format!(
            "HTTP/1.1 200 OK\r\nContent-Length: 65536\r\nContent-Type: text/plain\r\n\r\n{}",
            "x".repeat(BIG_BODY)
        )
    }

    #[test]
    fn pong_on_a_kept_alive_connection() {
        let target = start();
        let mut s = connect(&target);
        for _ in 0..3 {
            s.write_all(get("/").as_bytes()).unwrap();
            expect(&mut s, PONG);
        }
        target.stop();
    }

    #[test]
    fn pipelined_requests_are_answered_in_order() {
        let target = start();
        let mut s = connect(&target);
        let requests = format!("{}{}{}", get("/status/201"), get("/"), get("/status/404"));
        s.write_all(requests.as_bytes()).unwrap();
        expect(
            &mut s,
            &format!("{}{PONG}{}", status(201, "Created"), status(404, "Not Found")),
        );
        target.stop();
    }

    #[test]
    fn request_split_across_writes() {
        let target = start();
        let mut s = connect(&target);
        s.write_all(b"GET /status/202 HT").unwrap();
        thread::sleep(Duration::from_millis(50));
        s.write_all(b"TP/1.1\r\nHost: t\r\n").unwrap();
        thread::sleep(Duration::from_millis(50));
        // The rest of the head plus a whole second request in one write.
        s.write_all(format!("\r\n{}", get("/")).as_bytes()).unwrap();
        expect(&mut s, &format!("{}{PONG}", status(202, "Accepted")));
        target.stop();
    }

    #[test]
    fn request_trickled_byte_by_byte() {
        let target = start();
        let mut s = connect(&target);
        for byte in get("/").bytes() {
            s.write_all(&[byte]).unwrap();
            thread::sleep(Duration::from_millis(2));
        }
        expect(&mut s, PONG);
        target.stop();
    }

    #[test]
    fn request_bodies_are_skipped() {
        let target = start();
        let mut s = connect(&target);
        // Body and the next request in one write.
        let post = "POST /status/201 HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789";
        s.write_all(format!("{post}{}", get("/")).as_bytes()).unwrap();
        expect(&mut s, &format!("{}{PONG}", status(201, "Created")));
        // A body that spans writes and looks like a request itself.
        let body = get("/close");
        s.write_all(format!("PUT / HTTP/1.1\r\nContent-Length: {}\r\n\r\n", body.len()).as_bytes())
            .unwrap();
        thread::sleep(Duration::from_millis(30));
        s.write_all(&body.as_bytes()[..5]).unwrap();
        thread::sleep(Duration::from_millis(30));
        s.write_all(format!("{}{}", &body[5..], get("/status/202")).as_bytes())
            .unwrap();
        expect(&mut s, &format!("{PONG}{}", status(202, "Accepted")));
        // Larger than the read buffer.
        let huge = "y".repeat(3 * READ_BUF + 17);
        s.write_all(format!("POST / HTTP/1.1\r\nContent-Length: {}\r\n\r\n{huge}", huge.len()).as_bytes())
            .unwrap();
        s.write_all(get("/status/201").as_bytes()).unwrap();
        expect(&mut s, &format!("{PONG}{}", status(201, "Created")));
        target.stop();
    }

    #[test]
    fn chunked_route_sends_chunks_and_a_trailer() {
        let target = start();
        let mut s = connect(&target);
        s.write_all(get("/chunked").as_bytes()).unwrap();
        expect(
            &mut s,
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Trailer\r\n\
             Content-Type: text/plain\r\n\r\n2\r\npo\r\n2\r\nng\r\n0\r\nX-Trailer: done\r\n\r\n",
        );
        s.write_all(get("/").as_bytes()).unwrap();
        expect(&mut s, PONG);
        target.stop();
    }

    #[test]
    fn close_route_closes_after_the_response() {
        let target = start();
        let mut s = connect(&target);
        s.write_all(get("/close?x=1").as_bytes()).unwrap();
        expect(
            &mut s,
            "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Type: text/plain\r\n\
             Connection: close\r\n\r\npong",
        );
        expect_eof(&mut s);
        target.stop();
    }

    #[test]
    fn http10_route_is_close_delimited() {
        let target = start();
        let mut s = connect(&target);
        s.write_all(get("/http10").as_bytes()).unwrap();
        expect(&mut s, "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\npong");
        expect_eof(&mut s);
        target.stop();
    }

    #[test]
    fn continue_route_sends_100_then_pong() {
        let target = start();
        let mut s = connect(&target);
        s.write_all(get("/continue").as_bytes()).unwrap();
        expect(&mut s, &format!("HTTP/1.1 100 Continue\r\n\r\n{PONG}"));
        target.stop();
    }

    #[test]
    fn status_route() {
        let target = start();
        let mut s = connect(&target);
        for (code, reason) in [
            (200, "OK"),
            (299, "Success"),
            (404, "Not Found"),
            (503, "Service Unavailable"),
            (599, "Server Error"),
        ] {
            s.write_all(get(&format!("/status/{code}")).as_bytes()).unwrap();
            expect(&mut s, &status(code, reason));
        }
        s.write_all(get("/status/204").as_bytes()).unwrap();
        expect(&mut s, "HTTP/1.1 204 No Content\r\n\r\n");
        s.write_all(get("/status/304").as_bytes()).unwrap();
        expect(&mut s, "HTTP/1.1 304 Not Modified\r\n\r\n");
        // Informational and out-of-range codes are not routes: plain pong.
        for path in ["/status/101", "/status/600", "/status/20", "/status/abc"] {
            s.write_all(get(path).as_bytes()).unwrap();
            expect(&mut s, PONG);
        }
        target.stop();
    }

    #[test]
    fn big_route_spans_many_reads() {
        let target = start();
        let mut s = connect(&target);
        for _ in 0..2 {
            s.write_all(get("/big").as_bytes()).unwrap();
            expect(&mut s, &big());
        }
        target.stop();
    }

    #[test]
    fn head_gets_headers_only() {
        let target = start();
        let mut s = connect(&target);
        s.write_all(b"HEAD / HTTP/1.1\r\n\r\nHEAD /big HTTP/1.1\r\n\r\nHEAD /chunked HTTP/1.1\r\n\r\n")
            .unwrap();
        s.write_all(get("/").as_bytes()).unwrap();
        expect(
            &mut s,
            &format!(
                "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Type: text/plain\r\n\r\n\
                 HTTP/1.1 200 OK\r\nContent-Length: 65536\r\nContent-Type: text/plain\r\n\r\n\
                 HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Trailer\r\n\
                 Content-Type: text/plain\r\n\r\n{PONG}"
            ),
        );
        target.stop();
    }

    #[test]
    fn connection_close_request_is_honoured() {
        let target = start();
        let mut s = connect(&target);
        // The request after the closing one is never answered.
        s.write_all(format!("GET / HTTP/1.1\r\nConnection: Keep-Alive, close\r\n\r\n{}", get("/")).as_bytes())
            .unwrap();
        expect(
            &mut s,
            "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Type: text/plain\r\n\
             Connection: close\r\n\r\npong",
        );
        expect_eof(&mut s);
        target.stop();
    }

    #[test]
    fn http10_requests_close_unless_kept_alive() {
        let target = start();
        let mut s = connect(&target);
        for _ in 0..2 {
            s.write_all(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
                .unwrap();
            expect(
                &mut s,
                "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Type: text/plain\r\n\
                 Connection: keep-alive\r\n\r\npong",
            );
        }
        s.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        expect(
            &mut s,
            "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Type: text/plain\r\n\
             Connection: close\r\n\r\npong",
        );
        expect_eof(&mut s);
        target.stop();
    }

    #[test]
    fn bad_requests_get_400_or_431_and_close() {
        let target = start();
        let bad = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        let large = "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\n\
                     Connection: close\r\n\r\n";
        let many_headers: String = (0..MAX_HEADERS + 1).map(|i| format!("X-{i}: v\r\n")).collect();
        let cases = [
            ("garbage\0\r\n\r\n".to_string(), bad),
            ("GET / HTTP/1.1\r\nContent-Length: ten\r\n\r\n".to_string(), bad),
            ("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".to_string(), bad),
            (format!("GET / HTTP/1.1\r\n{many_headers}\r\n"), large),
            // Incomplete and already too long.
            (format!("GET /{} HTTP/1.1\r\n", "a".repeat(MAX_HEAD)), large),
            // Complete but too long.
            (format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(MAX_HEAD)), large),
        ];
        for (request, want) in cases {
            let mut s = connect(&target);
            s.write_all(request.as_bytes()).unwrap();
            expect(&mut s, want);
            expect_eof(&mut s);
        }
        target.stop();
    }

    #[test]
    fn half_closed_client_still_gets_its_response() {
        let target = start();
        let mut s = connect(&target);
        s.write_all(format!("{}{}", get("/"), get("/big")).as_bytes()).unwrap();
        s.shutdown(Shutdown::Write).unwrap();
        expect(&mut s, &format!("{PONG}{}", big()));
        expect_eof(&mut s);
        target.stop();
    }

    #[test]
    fn slow_reader_gets_every_pipelined_response() {
        let target = start_with(1, Duration::ZERO);
        let mut s = connect(&target);
        let count = 200;
        let requests: String = (0..count).map(|i| get(if i % 2 == 0 { "/big" } else { "/" })).collect();
        s.write_all(requests.as_bytes()).unwrap();
        // Let the server fill the socket buffers and block.
        thread::sleep(Duration::from_millis(200));
        for i in 0..count {
            if i % 2 == 0 {
                expect(&mut s, &big());
            } else {
                expect(&mut s, PONG);
            }
        }
        // Still usable afterwards.
        s.write_all(get("/status/201").as_bytes()).unwrap();
        expect(&mut s, &status(201, "Created"));
        target.stop();
    }

    #[test]
    fn delay_holds_each_response() {
        let delay = Duration::from_millis(100);
        let target = start_with(1, delay);
        let mut s = connect(&target);
        let sent = Instant::now();
        s.write_all(get("/").as_bytes()).unwrap();
        expect(&mut s, PONG);
        assert!(sent.elapsed() >= delay, "answered after {:?}", sent.elapsed());

        // Pipelined requests keep their order, and a close still closes.
        let sent = Instant::now();
        s.write_all(format!("{}{}{}", get("/status/201"), get("/"), get("/close")).as_bytes())
            .unwrap();
        expect(&mut s, &format!("{}{PONG}", status(201, "Created")));
        assert!(sent.elapsed() >= delay, "answered after {:?}", sent.elapsed());
        expect(
            &mut s,
            "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Type: text/plain\r\n\
             Connection: close\r\n\r\npong",
        );
        expect_eof(&mut s);
        target.stop();
    }

    #[test]
    fn delay_with_many_pipelined_requests() {
        let delay = Duration::from_millis(20);
        let target = start_with(1, delay);
        let mut s = connect(&target);
        // More than MAX_IN_FLIGHT, so reading pauses and resumes.
        let count = MAX_IN_FLIGHT as usize * 3;
        let requests: String = (0..count).map(|_| get("/")).collect();
        s.write_all(requests.as_bytes()).unwrap();
        expect(&mut s, &PONG.repeat(count));
        target.stop();
    }

    #[test]
    fn a_thousand_concurrent_connections() {
        let target = start();
        let mut streams: Vec<TcpStream> = (0..1000).map(|_| connect(&target)).collect();
        for s in &mut streams {
            s.write_all(get("/").as_bytes()).unwrap();
        }
        for s in &mut streams {
            expect(s, PONG);
        }
        target.stop();
    }

    #[test]
    fn connection_churn_does_not_confuse_slots() {
        let target = start_with(1, Duration::ZERO);
        let mut keeper = connect(&target);
        for i in 0..300 {
            let mut s = connect(&target);
            s.write_all(get("/close").as_bytes()).unwrap();
            if i % 3 == 0 {
                drop(s); // gone before it is even answered
            } else {
                let mut all = Vec::new();
                s.read_to_end(&mut all).unwrap();
                assert!(all.ends_with(b"pong"));
            }
            keeper.write_all(get("/").as_bytes()).unwrap();
            expect(&mut keeper, PONG);
        }
        target.stop();
    }

    #[test]
    fn stop_is_prompt_and_frees_the_port() {
        let target = start_with(3, Duration::from_secs(60));
        let addr = target.local_addr();
        assert_ne!(addr.port(), 0);
        let mut idle: Vec<TcpStream> = (0..20).map(|_| connect(&target)).collect();
        // One response is waiting on the (long) delay timer.
        idle[0].write_all(get("/").as_bytes()).unwrap();
        thread::sleep(Duration::from_millis(50));
        let began = Instant::now();
        target.stop();
        assert!(
            began.elapsed() < Duration::from_secs(5),
            "stop took {:?}",
            began.elapsed()
        );
        for s in &mut idle {
            let mut rest = Vec::new();
            // Closed either way: a FIN, or a reset for unread input.
            if let Ok(n) = s.read_to_end(&mut rest) {
                assert_eq!(n, 0);
            }
        }
        // Restart on the same port at once, as the tests of soakd do.
        let again = spawn(&TargetConfig {
            listen: addr,
            threads: 3,
            delay: Duration::ZERO,
            fault: None,
            tls: None,
        })
        .expect("rebinds the same port");
        let mut s = connect(&again);
        s.write_all(get("/").as_bytes()).unwrap();
        expect(&mut s, PONG);
        again.stop();
    }

    fn start_faulty(fault: &str, delay: Duration) -> TargetHandle {
        spawn(&TargetConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            threads: 1,
            delay,
            fault: Some(fault.parse().expect("a valid fault")),
            tls: None,
        })
        .expect("target starts")
    }

    /// Everything until the server closes (a reset counts as a close).
    fn read_all(stream: &mut TcpStream) -> Vec<u8> {
        let mut all = Vec::new();
        let mut buf = [0; 64 * 1024];
        loop {
            match stream.read(&mut buf) {
                Ok(0) => return all,
                Ok(n) => all.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return all,
                Err(e) => panic!("read: {e} after {} bytes", all.len()),
            }
        }
    }

    #[test]
    fn fault_names_parse_and_print() {
        for mode in FaultMode::ALL {
            let name = mode.name();
            let fault: Fault = name.parse().unwrap();
            assert_eq!(fault, Fault { mode, every: 1 });
            assert_eq!(fault.to_string(), name);
            if mode != FaultMode::StopAccepting {
                let fault: Fault = format!("{name}@7").parse().unwrap();
                assert_eq!(fault, Fault { mode, every: 7 });
                assert_eq!(fault.to_string(), format!("{name}@7"));
            }
        }
        for bad in [
            "",
            "nope",
            "reset@",
            "reset@0",
            "reset@-1",
            "reset@x",
            "@3",
            "stop-accepting@2",
        ] {
            assert!(bad.parse::<Fault>().is_err(), "{bad:?} parsed");
        }
        let err = spawn(&TargetConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            threads: 1,
            delay: Duration::ZERO,
            fault: Some(Fault {
                mode: FaultMode::Reset,
                every: 0,
            }),
            tls: None,
        })
        .unwrap_err();
        assert!(matches!(err, Error::Usage(_)), "{err:?}");
    }

    #[test]
    fn broken_responses_then_close() {
        let head100 = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nContent-Type: text/plain\r\n\r\n";
        let cases = [
            ("close-mid-head", PONG[..(PONG.len() - 4) / 2].to_string()),
            ("close-mid-body", format!("{head100}{}", "x".repeat(10))),
            ("short-body", format!("{head100}{}", "x".repeat(50))),
            (
                "bad-status",
                "HTTP/1.1 2x0 OK\r\nContent-Length: 4\r\nContent-Type: text/plain\r\n\r\npong".to_string(),
            ),
            (
                "bad-chunk",
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n\
                 zz\r\npong\r\n0\r\n\r\n"
                    .to_string(),
            ),
            (
                "http10-no-length",
                "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\npong".to_string(),
            ),
        ];
        for (fault, want) in cases {
            let target = start_faulty(fault, Duration::ZERO);
            let mut s = connect(&target);
            // A second request in the same write must not be answered.
            s.write_all(format!("{}{}", get("/"), get("/")).as_bytes()).unwrap();
            assert_eq!(String::from_utf8_lossy(&read_all(&mut s)), want, "{fault}");
            target.stop();
        }
    }

    #[test]
    fn every_nth_request_is_faulted_per_thread() {
        let target = start_faulty("continue@3", Duration::ZERO);
        let continued = format!("HTTP/1.1 100 Continue\r\n\r\n{PONG}");
        let mut a = connect(&target);
        let mut b = connect(&target);
        // The count is the thread's, across connections.
        for i in 0..6 {
            let s = if i % 2 == 0 { &mut a } else { &mut b };
            s.write_all(get("/status/201").as_bytes()).unwrap();
            if i % 3 == 2 {
                expect(s, &continued);
            } else {
                expect(s, &status(201, "Created"));
            }
        }
        target.stop();
    }

    #[test]
    fn extra_bytes_and_huge_head_keep_the_connection() {
        let target = start_faulty("extra-bytes@2", Duration::ZERO);
        let mut s = connect(&target);
        s.write_all(get("/").as_bytes()).unwrap();
        expect(&mut s, PONG);
        s.write_all(get("/").as_bytes()).unwrap();
        expect(&mut s, &format!("{PONG}GARBAGE\r\n\r\n"));
        s.write_all(get("/").as_bytes()).unwrap();
        expect(&mut s, PONG);
        target.stop();

        let target = start_faulty("huge-head", Duration::ZERO);
        let mut s = connect(&target);
        for _ in 0..2 {
            s.write_all(get("/").as_bytes()).unwrap();
            let mut got = Vec::new();
            let mut buf = [0; 64 * 1024];
            while !got.ends_with(b"\r\n\r\npong") {
                let n = s.read(&mut buf).unwrap();
                assert!(n > 0, "closed after {} bytes", got.len());
                got.extend_from_slice(&buf[..n]);
            }
            assert!(got.len() > HUGE_HEAD, "{} bytes", got.len());
            assert!(got.starts_with(b"HTTP/1.1 200 OK\r\n"));
        }
        target.stop();
    }

    #[test]
    fn reset_sends_an_rst_after_earlier_responses() {
        for delay in [Duration::ZERO, Duration::from_millis(20)] {
            let target = start_faulty("reset@2", delay);
            let mut s = connect(&target);
            s.write_all(get("/").as_bytes()).unwrap();
            expect(&mut s, PONG);
            s.write_all(get("/").as_bytes()).unwrap();
            let mut buf = [0; 16];
            let err = s.read(&mut buf).expect_err("a reset, not a response");
            assert_eq!(err.kind(), io::ErrorKind::ConnectionReset, "{delay:?}");
            target.stop();
        }
    }

    #[test]
    fn never_answer_keeps_the_connection_silent() {
        let target = start_faulty("never-answer@2", Duration::ZERO);
        let mut s = connect(&target);
        s.write_all(get("/").as_bytes()).unwrap();
        expect(&mut s, PONG);
        s.write_all(get("/").as_bytes()).unwrap();
        s.write_all(get("/").as_bytes()).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
        let mut buf = [0; 16];
        let err = s.read(&mut buf).expect_err("silence");
        assert!(
            matches!(err.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut),
            "{err}"
        );
        // Other connections are served; the count goes on (3rd request).
        let mut other = connect(&target);
        other.write_all(get("/").as_bytes()).unwrap();
        expect(&mut other, PONG);
        // The silent one closes when the client does.
        s.shutdown(Shutdown::Write).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        expect_eof(&mut s);
        target.stop();
    }

    #[test]
    fn trickle_sends_a_byte_per_step_and_holds_later_requests() {
        let target = start_faulty("trickle", Duration::ZERO);
        let mut s = connect(&target);
        let sent = Instant::now();
        // Pipelined: the second response must come after the whole first.
        s.write_all(format!("{}{}", get("/"), get("/")).as_bytes()).unwrap();
        let mut got = [0; 4];
        s.read_exact(&mut got[..1]).unwrap();
        assert!(sent.elapsed() < TRICKLE_STEP, "first byte after {:?}", sent.elapsed());
        for i in 1..4 {
            s.read_exact(&mut got[i..=i]).unwrap();
        }
        let took = sent.elapsed();
        assert!(
            took >= TRICKLE_STEP * 3 - Duration::from_millis(10),
            "4 bytes in {took:?}"
        );
        assert!(took < TRICKLE_STEP * 8, "4 bytes in {took:?}");
        assert_eq!(&got, b"HTTP");
        // The client leaves mid-trickle; the target carries on serving.
        drop(s);
        let mut other = connect(&target);
        other.write_all(b"HEAD / HTTP/1.1\r\n\r\n").unwrap();
        other.read_exact(&mut got[..1]).unwrap();
        target.stop();
    }

    #[test]
    fn close_after_accept_closes_every_nth_connection() {
        let target = start_faulty("close-after-accept@2", Duration::ZERO);
        for i in 0..4 {
            let mut s = connect(&target);
            if i % 2 == 1 {
                // Closed before the request was read: nothing, then EOF
                // (or a reset if the request got there first).
                let _ = s.write_all(get("/").as_bytes());
                assert!(read_all(&mut s).is_empty(), "connection {i}");
            } else {
                s.write_all(get("/").as_bytes()).unwrap();
                expect(&mut s, PONG);
            }
        }
        target.stop();
    }

    #[test]
    fn stop_accepting_fills_the_backlog() {
        let target = start_faulty("stop-accepting", Duration::ZERO);
        let addr = target.local_addr();
        let mut held = Vec::new();
        let mut timed_out = false;
        for _ in 0..8 {
            match std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
                Ok(s) => held.push(s),
                Err(_) => {
                    timed_out = true;
                    break;
                }
            }
        }
        assert!(timed_out, "{} connects went through", held.len());
        // What the backlog took is never answered.
        if let Some(s) = held.first_mut() {
            s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
            s.write_all(get("/").as_bytes()).unwrap();
            let mut buf = [0; 16];
            assert!(
                s.read(&mut buf).is_err(),
                "an answer from a listener that never accepts"
            );
        }
        target.stop();
    }

    #[test]
    fn zero_threads_is_a_usage_error() {
        let err = spawn(&TargetConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            threads: 0,
            delay: Duration::ZERO,
            fault: None,
            tls: None,
        })
        .unwrap_err();
        assert!(matches!(err, Error::Usage(_)), "{err:?}");
    }

    #[test]
    fn busy_address_is_a_preflight_error() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap();
        for threads in [1, 2] {
            let err = spawn(&TargetConfig {
                listen: addr,
                threads,
                delay: Duration::ZERO,
                fault: None,
                tls: None,
            })
            .unwrap_err();
            let Error::Preflight(message) = err else {
                panic!("expected a preflight error, got {err:?}");
            };
            assert!(message.contains(&addr.to_string()), "{message}");
            assert!(message.contains("--listen"), "{message}");
        }
    }

    #[test]
    fn response_table_matches_ids() {
        let responses = Responses::build(None);
        assert_eq!(responses.table.len(), usize::from(TOO_LARGE) + 1);
        for index in 0..ROUTES {
            assert_eq!(Route::from_index(index).index(), index);
        }
        let close = &responses.table[usize::from(response_id(Route::Status(404), true, Persist::Close))];
        assert!(close.close);
        assert_eq!(
            &*close.bytes,
            &b"HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"[..]
        );
        assert_eq!(Route::of("/status/250?x"), Route::Status(250));
        assert_eq!(Route::of("/big?"), Route::Big);
        assert_eq!(Route::of("/bigger"), Route::Pong);
    }
}
