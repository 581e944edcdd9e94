//! HTTP/3 in the built-in target (`soakd target --tls --h3`): QUIC on a UDP
//! socket at the TCP listener's address and port, driven by a thread of
//! its own.
//!
//! Why it exists: soakd's HTTP/3 client needs a server that is
//! predictable, cheap and can misbehave on demand, as the HTTP/1 and
//! HTTP/2 sides are for theirs. The frames and QPACK are `wire::h3`'s (the
//! client's codec), the responses `h2_responses`' table (the same routes,
//! statuses and bodies as HTTP/2), QUIC is quinn-proto's; what is here is
//! the loop that connects quinn-proto to a socket and a clock.
//!
//! quinn-proto is sans-I/O: an [`Endpoint`] turns datagrams into
//! connection events and new connections, each [`Connection`] turns
//! events and timeouts into datagrams to send. The loop here is the
//! target's usual one (edge-triggered mio poll, a waker to stop, the
//! servers' `timer::Deadlines`):
//!
//! * every datagram that arrived is handed to the endpoint, and the
//!   connections it concerned are marked; once the socket is drained each
//!   marked connection is driven once (its endpoint events, application
//!   events, then its datagrams), so a burst is answered in one pass;
//! * each connection's `poll_timeout` is its deadline in the wheel (id:
//!   its handle + 1), re-armed after every drive in O(1); an idle
//!   connection costs nothing between quinn's own timers (the idle timeout
//!   of 30 s, the client's keep-alives), and the loop never spins;
//! * delayed responses wait in one FIFO whose front is deadline id 0.
//!
//! Datagrams go out one per `send_to` (no GSO: quinn is asked for one
//! datagram at a time). A datagram the socket will not take (its buffer
//! full) is dropped as the network would: QUIC's loss recovery sends it
//! again, and a target under that load would rather not queue.
//!
//! One thread serves HTTP/3 whatever `--threads` says: a test target's
//! QUIC load is far below what one core handles, and one socket keeps
//! every connection on it without routing by connection id.
//!
//! Per connection: quinn's state with small windows (64 KiB a stream,
//! 256 KiB the connection, 18 concurrent requests granted at first and up
//! to 100 as the client uses them: quinn keeps a receive state for every
//! stream granted), so 10,000 idle QUIC connections stay cheap, and
//! `h3_conn.rs`'s small struct.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use mio::net::UdpSocket;
use mio::{Events, Interest, Poll, Token, Waker};
use quinn_proto::crypto::rustls::QuicServerConfig;
use quinn_proto::{
    ConnectionHandle, DatagramEvent, Endpoint, EndpointConfig, HashedConnectionIdGenerator, IdleTimeout, ServerConfig,
    TransportConfig, VarInt,
};
use socket2::{Domain, Protocol, Socket, Type};

use super::h3_conn::{Cx, H3Conn, H3Counters, INITIAL_REQUESTS, Serving};
use super::{EVENTS, TargetConfig};
use crate::Error;
use crate::netio::{WAKER, set_int};
use crate::timer::Deadlines;
use crate::wire::h3::error;

/// The UDP socket's token.
const SOCKET: Token = Token(0);
/// The deadline id of the delay queue's front; a connection's is its
/// handle + 1.
const DELAYED: u32 = 0;
/// The largest datagram read (UDP's limit; QUIC's are ~1,200 to 1,500
/// bytes, but a larger one must not be truncated into garbage).
const MAX_DATAGRAM: usize = 64 * 1024;
/// Received datagrams are cut from arenas of this size (see `Loop::rx`).
const ARENA: usize = 1024 * 1024;
/// The socket buffers asked for (the kernel caps them at its maximum):
/// room for a burst of a few thousand datagrams.
const SOCKET_BUFFER: usize = 4 * 1024 * 1024;
/// A connection's idle timeout.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Concurrent unidirectional streams a client may open: its control and
/// QPACK streams, and a few spare for greasing streams (refused).
const MAX_UNI: u32 = 8;
/// Flow control windows: a stream's, the connection's, and what we keep
/// unacknowledged (`/big`'s 64 KiB fits a stream window).
const STREAM_WINDOW: u32 = 64 * 1024;
const CONN_WINDOW: u32 = 256 * 1024;
const SEND_WINDOW: u64 = 256 * 1024;

/// The QUIC server configuration of `tls`: its certificate (and client
/// verifier, if any), TLS 1.3 only (QUIC has no other), ALPN `h3`, and
/// the transport settings above.
pub(super) fn server_config(tls: &rustls::ServerConfig) -> Result<ServerConfig, Error> {
    let mut tls = tls.clone();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    // No 0-RTT: quinn takes 0 or u32::MAX, and replayable requests are
    // nothing a test target needs.
    tls.max_early_data_size = 0;
    let crypto = QuicServerConfig::try_from(Arc::new(tls))
        .map_err(|e| Error::Usage(format!("--h3: the TLS configuration cannot serve QUIC: {e}")))?;
    let mut transport = TransportConfig::default();
    transport
        .max_idle_timeout(Some(
            IdleTimeout::try_from(IDLE_TIMEOUT).expect("30 s is a valid idle timeout"),
        ))
        .max_concurrent_bidi_streams(VarInt::from_u32(INITIAL_REQUESTS))
        .max_concurrent_uni_streams(VarInt::from_u32(MAX_UNI))
        .stream_receive_window(VarInt::from_u32(STREAM_WINDOW))
        .receive_window(VarInt::from_u32(CONN_WINDOW))
        .send_window(SEND_WINDOW)
        // HTTP/3 uses no unreliable datagrams: no buffer for them.
        .datagram_receive_buffer_size(None);
    let mut config = ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(Arc::new(transport));
    Ok(config)
}

/// The endpoint's settings for a kept secret (`TargetConfig::reset_key`):
/// stateless reset tokens keyed with it, and connection ids whose
/// signature it keys too. Both must outlive a restart for the reset to
/// happen: quinn answers a packet for a connection it does not know with
/// a reset only when the connection id carries its own signature.
fn endpoint_config(secret: &[u8; 32]) -> EndpointConfig {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
    let tag = ring::hmac::sign(&key, b"connection ids");
    let cid_key = u64::from_le_bytes(tag.as_ref()[..8].try_into().expect("a SHA-256 tag has 8 bytes"));
    let mut config = EndpointConfig::new(Arc::new(ResetKey(key)));
    config.cid_generator(move || Box::new(HashedConnectionIdGenerator::from_key(cid_key)));
    config
}

/// The key stateless reset tokens are made with (`TargetConfig::reset_key`),
/// as HMAC-SHA256 on ring, which soakd builds with either TLS provider
/// (quinn-proto implements its trait only for its own provider's key).
struct ResetKey(ring::hmac::Key);

impl quinn_proto::crypto::HmacKey for ResetKey {
    fn sign(&self, data: &[u8], out: &mut [u8]) {
        out.copy_from_slice(ring::hmac::sign(&self.0, data).as_ref());
    }

    fn signature_len(&self) -> usize {
        32
    }

    fn verify(&self, data: &[u8], signature: &[u8]) -> Result<(), quinn_proto::crypto::CryptoError> {
        ring::hmac::verify(&self.0, data, signature).map_err(|_| quinn_proto::crypto::CryptoError)
    }
}

/// Binds the UDP socket at `addr` (the TCP listener's, port resolved).
/// Also says whether path MTU discovery may run (the socket sets the
/// don't-fragment bit, so a probe too large is lost, not fragmented).
pub(super) fn bind(addr: SocketAddr, reuse_port: bool) -> Result<(std::net::UdpSocket, bool), Error> {
    let fail = |err: io::Error| {
        Error::Preflight(format!(
            "cannot serve HTTP/3 on udp {addr}: {err}; pick a free address with --listen"
        ))
    };
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP)).map_err(fail)?;
    // No SO_REUSEADDR: on UDP it would let another socket share the port.
    if reuse_port {
        socket.set_reuse_port(true).map_err(fail)?;
    }
    socket.set_nonblocking(true).map_err(fail)?;
    // Best effort: the kernel caps them, and the defaults still work.
    let _ = socket.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = socket.set_send_buffer_size(SOCKET_BUFFER);
    let mtud = dont_fragment(&socket, addr.is_ipv4());
    socket.bind(&addr.into()).map_err(fail)?;
    Ok((socket.into(), mtud))
}

/// Sets the don't-fragment bit on the socket's datagrams (`PMTUDISC_PROBE`:
/// set, and the kernel's own path MTU ignored, as quinn-udp does); false
/// when it cannot, and MTU discovery then stays off.
fn dont_fragment(socket: &Socket, v4: bool) -> bool {
    let set = if v4 {
        set_int(socket, libc::IPPROTO_IP, libc::IP_MTU_DISCOVER, libc::IP_PMTUDISC_PROBE)
    } else {
        set_int(
            socket,
            libc::IPPROTO_IPV6,
            libc::IPV6_MTU_DISCOVER,
            libc::IPV6_PMTUDISC_PROBE,
        )
    };
    set.is_ok()
}

/// Starts the HTTP/3 thread on `socket`.
pub(super) fn start(
    (socket, mtud): (std::net::UdpSocket, bool),
    server: ServerConfig,
    cfg: &TargetConfig,
    stop: &Arc<AtomicBool>,
    counts: Arc<H3Counters>,
) -> Result<(Waker, JoinHandle<()>), Error> {
    let poll = Poll::new().map_err(|e| Error::io("creating the target's HTTP/3 poll", e))?;
    let waker = Waker::new(poll.registry(), WAKER).map_err(|e| Error::io("creating the target's HTTP/3 waker", e))?;
    let mut socket = UdpSocket::from_std(socket);
    poll.registry()
        .register(&mut socket, SOCKET, Interest::READABLE)
        .map_err(|e| Error::io("registering the target's UDP socket", e))?;
    let endpoint_config = match cfg.reset_key {
        Some(key) => endpoint_config(&key),
        None => EndpointConfig::default(),
    };
    let endpoint = Endpoint::new(Arc::new(endpoint_config), Some(Arc::new(server)), mtud, None);
    let quic = Loop {
        poll,
        socket,
        endpoint,
        conns: Vec::new(),
        dirty: Vec::new(),
        deadlines: Deadlines::new(),
        serving: Serving::new(cfg.delay, cfg.degrade, cfg.fault, cfg.outage, counts),
        rx: BytesMut::with_capacity(ARENA),
        tx: Vec::with_capacity(MAX_DATAGRAM),
        fired: Vec::new(),
        stop: Arc::clone(stop),
    };
    std::thread::Builder::new()
        .name("soakd-target-h3".to_string())
        .spawn(move || {
            if let Err(err) = quic.run() {
                eprintln!("soakd target: the HTTP/3 thread stopped: {err}");
            }
        })
        .map(|thread| (waker, thread))
        .map_err(|e| Error::io("starting the target's HTTP/3 thread", e))
}

/// The HTTP/3 thread: its socket, endpoint and connections.
struct Loop {
    poll: Poll,
    socket: UdpSocket,
    endpoint: Endpoint,
    /// Connections by handle (the endpoint's slab keys, so dense).
    conns: Vec<Option<Box<H3Conn>>>,
    /// Connections to drive this turn (each once: `H3Conn::dirty`).
    dirty: Vec<usize>,
    /// Each connection's next quinn timeout, and the delay queue's front.
    deadlines: Deadlines,
    serving: Serving,
    /// Datagrams are read into this arena's free end and split off it
    /// (quinn takes them as `BytesMut` and may keep stream data as slices
    /// of them), so receiving allocates once an arena, not once a
    /// datagram. Its length stays `MAX_DATAGRAM`: after a split only the
    /// bytes taken are zeroed again.
    rx: BytesMut,
    /// Where quinn writes a datagram to send.
    tx: Vec<u8>,
    /// The deadline ids due in a turn (kept for its capacity).
    fired: Vec<u32>,
    stop: Arc<AtomicBool>,
}

impl Loop {
    fn run(mut self) -> Result<(), Error> {
        let mut events = Events::with_capacity(EVENTS);
        loop {
            let timeout = self.deadlines.timeout(Instant::now());
            if let Err(err) = self.poll.poll(&mut events, timeout) {
                if err.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(Error::io("waiting for HTTP/3 events", err));
            }
            let mut readable = false;
            for event in events.iter() {
                match event.token() {
                    WAKER if self.stop.load(Ordering::Acquire) => {
                        self.shut_down();
                        return Ok(());
                    }
                    SOCKET => readable = true,
                    _ => {}
                }
            }
            let now = Instant::now();
            if readable {
                self.receive(now);
            }
            self.fired.extend(self.deadlines.expired(now));
            let mut fired = std::mem::take(&mut self.fired);
            for id in fired.drain(..) {
                if id == DELAYED {
                    self.run_due(now);
                } else if let Some(conn) = self.conn(id as usize - 1) {
                    conn.conn.handle_timeout(now);
                    self.mark(id as usize - 1);
                }
            }
            self.fired = fired;
            self.drive_marked(now);
            self.deadlines.set(DELAYED, self.serving.next_due());
        }
    }

    fn conn(&mut self, handle: usize) -> Option<&mut H3Conn> {
        self.conns.get_mut(handle)?.as_deref_mut()
    }

    /// Queues `handle`'s connection to be driven this turn.
    fn mark(&mut self, handle: usize) {
        if let Some(conn) = self.conn(handle)
            && !conn.dirty
        {
            conn.dirty = true;
            self.dirty.push(handle);
        }
    }

    /// Every datagram waiting on the (edge-triggered) socket.
    fn receive(&mut self, now: Instant) {
        loop {
            if self.rx.capacity() < MAX_DATAGRAM {
                // The arena is used up: a fresh one (the old one is freed
                // once quinn has let go of the last datagram cut from it).
                self.rx = BytesMut::with_capacity(ARENA);
            }
            // Back to MAX_DATAGRAM initialised bytes: after a split only
            // the bytes taken are zeroed again, and it fits the capacity.
            self.rx.resize(MAX_DATAGRAM, 0);
            let (len, from) = match self.socket.recv_from(&mut self.rx) {
                Ok(got) => got,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // An ICMP error reported on the socket and the like: it
                // concerns one peer, the socket is fine.
                Err(_) => continue,
            };
            let datagram = self.rx.split_to(len);
            self.tx.clear();
            match self.endpoint.handle(now, from, None, None, datagram, &mut self.tx) {
                Some(DatagramEvent::NewConnection(incoming)) => {
                    self.tx.clear();
                    match self.endpoint.accept(incoming, now, &mut self.tx, None) {
                        Ok((handle, conn)) => {
                            let h = handle.0;
                            if self.conns.len() <= h {
                                self.conns.resize_with(h + 1, || None);
                            }
                            let serial = self.serving.serial();
                            self.conns[h] = Some(Box::new(H3Conn::new(conn, serial)));
                            self.mark(h);
                        }
                        Err(refused) => {
                            if let Some(t) = refused.response {
                                send(&self.socket, &self.tx[..t.size], t.destination);
                            }
                        }
                    }
                }
                Some(DatagramEvent::ConnectionEvent(handle, event)) => {
                    if let Some(conn) = self.conn(handle.0) {
                        conn.conn.handle_event(event);
                        self.mark(handle.0);
                    }
                }
                // A stateless answer: version negotiation, a reset.
                Some(DatagramEvent::Response(t)) => send(&self.socket, &self.tx[..t.size], t.destination),
                None => {}
            }
        }
    }

    /// The delayed responses due by `now`, each on its connection (those of
    /// connections gone are dropped).
    fn run_due(&mut self, now: Instant) {
        while let Some(due) = self.serving.pop_due(now) {
            let Some(Some(conn)) = self.conns.get_mut(due.handle) else {
                continue;
            };
            if conn.serial != due.serial {
                continue; // the handle belongs to a newer connection
            }
            let mut cx = Cx {
                th: &mut self.serving,
                handle: due.handle,
                now,
            };
            conn.deliver(&mut cx, due.stream);
            self.mark(due.handle);
        }
    }

    /// Drives every marked connection once.
    fn drive_marked(&mut self, now: Instant) {
        let mut dirty = std::mem::take(&mut self.dirty);
        for handle in dirty.drain(..) {
            self.drive(handle, now);
        }
        self.dirty = dirty;
    }

    /// Lets `handle`'s connection act on what happened to it: endpoint
    /// events, application events, then its datagrams out, until it has
    /// nothing more; then re-arms its timer, or drops it once drained.
    fn drive(&mut self, handle: usize, now: Instant) {
        let Some(Some(conn)) = self.conns.get_mut(handle) else {
            return;
        };
        conn.dirty = false;
        let mut cx = Cx {
            th: &mut self.serving,
            handle,
            now,
        };
        // A few rounds at most: answering events makes datagrams, sending
        // them makes no new events but may free endpoint bookkeeping.
        for _ in 0..8 {
            let mut acted = false;
            while let Some(event) = conn.conn.poll_endpoint_events() {
                acted = true;
                if let Some(event) = self.endpoint.handle_event(ConnectionHandle(handle), event) {
                    conn.conn.handle_event(event);
                }
            }
            while let Some(event) = conn.conn.poll() {
                acted = true;
                conn.on_event(&mut cx, event);
            }
            conn.settle(&mut cx);
            loop {
                self.tx.clear();
                let Some(t) = conn.conn.poll_transmit(now, 1, &mut self.tx) else {
                    break;
                };
                acted = true;
                send(&self.socket, &self.tx[..t.size], t.destination);
            }
            if !acted {
                break;
            }
        }
        let id = handle as u32 + 1;
        if conn.conn.is_drained() {
            // Its `Drained` endpoint event went to the endpoint above.
            self.conns[handle] = None;
            self.deadlines.set(id, None);
        } else {
            self.deadlines.set(id, conn.conn.poll_timeout());
        }
    }

    /// The target stops: every connection is told (CONNECTION_CLOSE with
    /// H3_NO_ERROR, one datagram each), so clients need not wait for the
    /// idle timeout.
    fn shut_down(&mut self) {
        let now = Instant::now();
        for conn in self.conns.iter_mut().flatten() {
            conn.conn.close(
                now,
                VarInt::from_u32(error::NO_ERROR as u32),
                Bytes::from_static(b"stopping"),
            );
            self.tx.clear();
            if let Some(t) = conn.conn.poll_transmit(now, 1, &mut self.tx) {
                send(&self.socket, &self.tx[..t.size], t.destination);
            }
        }
    }
}

/// Sends one datagram. Not taken (the socket's buffer is full) or refused
/// (a peer gone): lost, as on the network; QUIC recovers or times out.
fn send(socket: &UdpSocket, datagram: &[u8], to: SocketAddr) {
    let _ = socket.send_to(datagram, to);
}
