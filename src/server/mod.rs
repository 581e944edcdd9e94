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
//!
//! WebSocket upgrades on `/ws` (echo) and `/ws/push?every=DUR` are one more
//! request the responder answers; the upgraded socket's frames then go to
//! `ws.rs`, on `wire::ws`'s codec, and the `ws-*` faults act there.
//!
//! HTTP/2 (`--h2`) is sniffed on the same TCP connections (`h2.rs`). HTTP/3
//! (`--tls --h3`) is QUIC on a UDP socket at the TCP listener's address
//! and port, served by one thread of its own (`h3.rs`): QUIC is
//! datagrams and timers rather than streams of bytes, so it has its own
//! loop rather than a kind of connection in the workers'.
//!
//! Files: this one (settings, binding, starting and stopping the threads),
//! `worker.rs` (a thread's event loop, on `netio`'s server core shared with
//! the metrics exporter), `conn.rs` (one connection), `responder.rs`
//! (requests to responses, delays, faults), `responses.rs` (the table
//! rendered at start), `fault.rs` (fault modes), `tls.rs` (certificates),
//! `ws.rs` (WebSocket sockets, pushes and their faults), `ws_socket.rs`
//! (one upgraded socket's state), `h2.rs`, `h2_conn.rs` and
//! `h2_responses.rs` (HTTP/2, and the response table HTTP/3 shares),
//! `h3.rs` (the QUIC thread: socket, quinn-proto endpoint, timers) and
//! `h3_conn.rs` (one HTTP/3 connection's streams, responses and faults).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use mio::Waker;
use mio::net::TcpListener;
use socket2::{Domain, Socket, Type};

mod conn;
mod degrade;
mod fault;
#[doc(hidden)]
pub mod fuzzing;
mod grpc;
mod h2;
mod h2_conn;
mod h2_responses;
mod h3;
mod h3_conn;
mod outage;
mod proto;
mod responder;
mod responses;
mod ticks;
pub mod tls;
mod worker;
mod ws;
mod ws_socket;

pub use degrade::{Degrade, parse_fd_leak, parse_leak, parse_slowdown};
use fault::FaultLayer;
pub use fault::{Fault, FaultMode, fault_help};
pub use grpc::{GrpcService, parse_status as parse_grpc_status};
pub use h3_conn::H3Counts;
pub use outage::Schedule as OutageSchedule;
use responses::*;

use crate::Error;

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
    /// Get worse with time on purpose (`--leak`, `--fd-leak`,
    /// `--slowdown`); the default degrades nothing.
    pub degrade: Degrade,
    /// Serve TLS with this configuration (`--tls`).
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Speak HTTP/2 too (`--h2`): h2c with prior knowledge on a plain
    /// port, h2 by ALPN over TLS; HTTP/1.1 clients are served as before.
    pub h2: bool,
    /// `--grpc`: serve the test gRPC service (implies `h2`).
    pub grpc: Option<GrpcService>,
    /// Serve HTTP/3 too (`--h3`, needs `tls`): QUIC on UDP at the same
    /// address and port as the TCP listener (see
    /// [`TargetHandle::h3_addr`]), ALPN `h3`, the same routes as HTTP/2.
    /// Of the faults, `goaway@N` and `never-answer[@N]` act on it; with
    /// any other `spawn` fails, as it does with `--restart-every`.
    pub h3: bool,
    /// The secret HTTP/3's stateless resets are keyed with (see
    /// [`tls::ServerTls::reset_key`]); `None` makes one at random, and
    /// connections left by an earlier process are then dropped silently
    /// (their clients time out) rather than reset.
    pub reset_key: Option<[u8; 32]>,
    /// Restarts and brownouts on a schedule (`--restart-every`,
    /// `--brownout-every`; see `outage.rs`); the default has none.
    pub outage: OutageSchedule,
    /// `--reuse-port`: share the address with other processes' listeners
    /// (SO_REUSEPORT), so that N target processes, each under its own
    /// open-file limit, serve one address as one server.
    pub reuse_port: bool,
}

impl Default for TargetConfig {
    /// One thread on a free loopback port, answering at once, no fault,
    /// no TLS, HTTP/1.1 only.
    fn default() -> TargetConfig {
        TargetConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            threads: 1,
            delay: Duration::ZERO,
            fault: None,
            degrade: Degrade::default(),
            tls: None,
            h2: false,
            grpc: None,
            h3: false,
            reset_key: None,
            outage: OutageSchedule::default(),
            reuse_port: false,
        }
    }
}

/// A running target; dropping it does not stop it, call [`TargetHandle::stop`].
#[derive(Debug)]
pub struct TargetHandle {
    addr: SocketAddr,
    /// The UDP address HTTP/3 is served on (`--h3`).
    h3_addr: Option<SocketAddr>,
    stop: Arc<AtomicBool>,
    threads: Vec<(Waker, JoinHandle<()>)>,
    /// The thread growing memory and descriptors (`--leak`, `--fd-leak`).
    leak: Option<JoinHandle<()>>,
    /// What the HTTP/3 thread answered, refused and sent (`--h3`).
    h3_counts: Option<Arc<h3_conn::H3Counters>>,
}

impl TargetHandle {
    /// The address the target actually listens on (port 0 resolved).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// With [`TargetConfig::h3`], the UDP address HTTP/3 is served on:
    /// [`TargetHandle::local_addr`]'s, on UDP.
    pub fn h3_addr(&self) -> Option<SocketAddr> {
        self.h3_addr
    }

    /// With [`TargetConfig::h3`], what HTTP/3 has answered, refused and
    /// sent so far (`soakd target` prints it when it stops, for tests to
    /// count the server's side).
    pub fn h3_counts(&self) -> Option<H3Counts> {
        self.h3_counts.as_deref().map(h3_conn::H3Counters::snapshot)
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
        // The wakers stay alive until every thread is joined: dropping one
        // closes its eventfd, and a wake its thread has not read yet would
        // be lost with it.
        let (wakers, threads): (Vec<Waker>, Vec<JoinHandle<()>>) = self.threads.into_iter().unzip();
        for thread in threads.into_iter().chain(self.leak) {
            if let Err(payload) = thread.join() {
                panic.get_or_insert(payload);
            }
        }
        drop(wakers);
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
    if cfg.h3 && cfg.tls.is_none() {
        return Err(Error::Usage(
            "--h3 needs --tls: QUIC is always encrypted (add --tls, or --tls-cert and --tls-key)".to_string(),
        ));
    }
    if cfg.h3 && cfg.outage.restart_every.is_some() {
        return Err(Error::Usage(
            "--restart-every cannot be combined with --h3: the restarts drop TCP listeners and connections only"
                .to_string(),
        ));
    }
    if let Some(fault) = &cfg.fault {
        fault.validate().map_err(Error::Usage)?;
        if matches!(fault.mode, FaultMode::HandshakeStall | FaultMode::CloseNoNotify) && cfg.tls.is_none() {
            return Err(Error::Usage(format!("the {} fault needs --tls", fault.mode.name())));
        }
        if cfg.h3 && !h3_conn::H3_FAULTS.contains(&fault.mode) {
            return Err(Error::Usage(format!(
                "the {} fault does not act on HTTP/3: with --h3 use goaway@N (HTTP/3, and HTTP/2 with --h2) or never-answer[@N] (HTTP/3 and HTTP/1.1)",
                fault.mode.name()
            )));
        }
        let h2 = cfg.h2 || cfg.grpc.is_some();
        // `goaway` acts on HTTP/3 too: with --h3 it needs no --h2.
        if fault.mode.layer() == FaultLayer::H2 && !h2 && !(cfg.h3 && fault.mode == FaultMode::Goaway) {
            return Err(Error::Usage(format!(
                "the {} fault acts on HTTP/2 connections: add --h2",
                fault.mode.name()
            )));
        }
        if h2 && matches!(fault.mode.layer(), FaultLayer::Http1 | FaultLayer::Ws) {
            return Err(Error::Usage(format!(
                "the {} fault acts on HTTP/1 responses; with --h2 use an HTTP/2 fault (goaway, goaway-error, rst-stream, max-streams=K, window-stall, settings-flood) or one that acts before the protocol (close-after-accept, stop-accepting, handshake-stall)",
                fault.mode.name()
            )));
        }
        if fault.mode == FaultMode::Trickle && !cfg.delay.is_zero() {
            return Err(Error::Usage(
                "the trickle fault cannot be combined with --delay".to_string(),
            ));
        }
    }
    if cfg.degrade.slowdown_per_s > 0.0 && cfg.delay.is_zero() {
        return Err(Error::Usage(
            "--slowdown grows the response delay: give the delay it starts from with --delay (e.g. --delay 5ms)"
                .to_string(),
        ));
    }
    cfg.outage.validate().map_err(Error::Usage)?;
    let stop_accepting = cfg.fault.is_some_and(|f| f.mode == FaultMode::StopAccepting);
    // A listener that is never accepted from: the smallest backlog, so that
    // it fills after a connection or two.
    let backlog = if stop_accepting { 1 } else { BACKLOG };
    // SO_REUSEPORT only when several listeners must share the port (our
    // own threads', or other processes' by --reuse-port): on a lone
    // listener it would let another process silently steal half of the
    // connections.
    let reuse_port = cfg.threads > 1 || cfg.reuse_port;
    let first = bind(cfg.listen, reuse_port, backlog)?;
    let addr = first
        .local_addr()
        .map_err(|e| Error::io("reading the target's bound address", e))?;
    let mut listeners = vec![first];
    for _ in 1..cfg.threads {
        listeners.push(bind(addr, reuse_port, backlog)?);
    }
    // HTTP/3: the QUIC configuration from the TCP side's certificate, and
    // the UDP socket on the port the TCP listener got (port 0 resolved).
    // One QUIC thread, so SO_REUSEPORT only for --reuse-port.
    let h3 = match (&cfg.tls, cfg.h3) {
        (Some(tls), true) => Some((h3::server_config(tls)?, h3::bind(addr, cfg.reuse_port)?)),
        _ => None,
    };

    let responses = Arc::new(Responses::build(cfg.fault.map(|f| f.mode)));
    // With --h2 a TLS client may pick h2 by ALPN; one offering only
    // http/1.1 still gets it.
    let mut cfg = cfg.clone();
    cfg.h2 |= cfg.grpc.is_some();
    // Every thread follows one schedule, from now.
    cfg.outage.epoch = Some(std::time::Instant::now());
    if cfg.h2
        && let Some(tls) = &mut cfg.tls
    {
        let mut config = (**tls).clone();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        *tls = Arc::new(config);
    }
    let cfg = &cfg;
    let mut handle = TargetHandle {
        addr,
        h3_addr: h3.is_some().then_some(addr),
        stop: Arc::new(AtomicBool::new(false)),
        threads: Vec::with_capacity(cfg.threads),
        leak: None,
        h3_counts: None,
    };
    for (index, listener) in listeners.into_iter().enumerate() {
        match worker::start(index, listener, cfg, &responses, &handle.stop) {
            Ok(thread) => handle.threads.push(thread),
            Err(err) => {
                handle.stop();
                return Err(err);
            }
        }
    }
    if let Some((server, socket)) = h3 {
        let counts = Arc::new(h3_conn::H3Counters::default());
        handle.h3_counts = Some(Arc::clone(&counts));
        match h3::start(socket, server, cfg, &handle.stop, counts) {
            Ok(thread) => handle.threads.push(thread),
            Err(err) => {
                handle.stop();
                return Err(err);
            }
        }
    }
    match cfg.degrade.spawn_leaks(Arc::clone(&handle.stop)) {
        Ok(leak) => handle.leak = leak,
        Err(e) => {
            handle.stop();
            return Err(Error::io("starting the target's leak thread", e));
        }
    }
    Ok(handle)
}

/// Request heads longer than this get `431` and the connection is closed
/// (the servers' one limit; for HTTP/2, the header-list size announced).
use crate::wire::request_head::MAX_HEAD;
/// Size of the per-thread read buffer.
const READ_BUF: usize = 64 * 1024;
/// Pending output is written out once it reaches this size, which bounds
/// the per-thread batch buffer when a read holds many pipelined `/big`s.
const FLUSH_AT: usize = 64 * 1024;
/// Listen backlog; the kernel clamps it to `net.core.somaxconn`, so asking
/// for the most means "as large as this machine allows".
const BACKLOG: i32 = i32::MAX;
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

#[cfg(test)]
mod tests;
