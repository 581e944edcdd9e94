//! The worker's QUIC I/O: UDP sockets, one quinn-proto [`Endpoint`], and
//! the glue between them and the loop's slots (HTTP/3, `h3.rs`).
//!
//! A TCP connection is a socket the loop registers; a QUIC connection is
//! not: every connection of a worker shares its UDP socket (one per local
//! address), and the endpoint routes each datagram to its connection by
//! connection id. So readiness of a UDP socket is one event for many
//! slots: [`Worker::on_quic`] reads until the socket is drained, hands
//! each datagram to the endpoint and its connection, queues the slots it
//! touched, and then drives each once ([`Worker::quic_drive`]): the
//! connection's events become the loop's [`Output`]s, acted on as a
//! byte-stream protocol's are (`io.rs`, `settle`), and the packets they
//! made owed go out in one pass ([`Worker::quic_transmit`]).
//!
//! Timers: quinn-proto says when a connection next needs the clock
//! (loss detection, acknowledgements, keep-alive PINGs, the idle timeout);
//! that time is the protocol's deadline, armed on the same `O(1)` wheel
//! entry as the slot's other deadlines (`io.rs`, `arm`), so an idle QUIC
//! connection costs a wake-up per keep-alive and nothing between.
//!
//! A connection dropped before quinn drained it (a failure, a churn, the
//! stop) is told to the endpoint as drained at once, so its ids are
//! forgotten and a later datagram for it meets no connection, never the
//! slot's next one.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use bytes::BytesMut;
use mio::net::UdpSocket;
use quinn_proto::{DatagramEvent, Endpoint, EndpointConfig, EndpointEvent};

use super::conn::{State, tick_ceil};
use super::h3::{instant, timer_ns};
use super::protocol::{Cx, Output, ProtoRt, Protocol, Tally};
use super::{Worker, socket};
use crate::netio::udp::{RecvBatch, SendBatch};
use crate::stats::{self, ErrorKind};
use crate::wire::h3::error;

/// The token key of the worker's UDP sockets (the generation field
/// carries the socket's index); below the lingering sockets' key.
pub(super) const QUIC_KEY: usize = crate::netio::KEY_LIMIT - 2;

/// Bytes of one datagram read (see `netio::udp`).
const MAX_DATAGRAM: usize = crate::netio::udp::SLOT;

/// Datagrams quinn may make at once for one connection when segmentation
/// offload is on: a run to one destination, sent as one message.
const GSO_RUN: usize = 10;

/// Socket buffers asked for: a burst of a few thousand connections' packets
/// (a ramp's handshakes, a keep-alive round) must not be dropped by the
/// kernel before the loop reads them.
const SOCKET_BUFFER: usize = 4 << 20;

/// `recvmmsg` calls per readiness event before other slots get a turn
/// (of [`crate::netio::udp::BATCH`] datagrams each).
const READ_BUDGET: usize = 32;

/// A slot key that no connection handle maps to.
const NO_SLOT: u32 = u32::MAX;

/// What a worker keeps for QUIC, made at its first QUIC connect.
pub(super) struct Quic {
    endpoint: Endpoint,
    /// By local address: the socket and the address it was bound to.
    sockets: Vec<(IpAddr, UdpSocket)>,
    /// By socket: the datagrams this wakeup made, sent at its end.
    send: Vec<SendBatch>,
    /// One `recvmmsg`'s datagrams.
    recv: Box<RecvBatch>,
    /// By connection handle: the slot it belongs to.
    owners: Vec<u32>,
    /// Packets quinn makes, a connection's run at a time.
    tx: Vec<u8>,
    /// Slots a read touched, to drive once it is done.
    queue: Vec<u32>,
    /// A socket whose read stopped at [`READ_BUDGET`] with datagrams left:
    /// read again on the loop's next turn, without waiting (its readiness
    /// is edge-triggered and will not be reported again for them).
    unread: Option<usize>,
}

impl Quic {
    fn new() -> Quic {
        Quic {
            endpoint: Endpoint::new(Arc::new(EndpointConfig::default()), None, true, None),
            sockets: Vec::new(),
            send: Vec::new(),
            recv: Box::new(RecvBatch::default()),
            owners: Vec::new(),
            tx: Vec::with_capacity(MAX_DATAGRAM * GSO_RUN),
            unread: None,
            queue: Vec::new(),
        }
    }

    /// The socket for local address `local` (bound on first use).
    fn socket(&mut self, registry: &mio::Registry, local: IpAddr) -> io::Result<usize> {
        if let Some(i) = self.sockets.iter().position(|(a, _)| *a == local) {
            return Ok(i);
        }
        let s = socket2::Socket::new(
            socket2::Domain::for_address(SocketAddr::new(local, 0)),
            socket2::Type::DGRAM,
            Some(socket2::Protocol::UDP),
        )?;
        s.set_nonblocking(true)?;
        let _ = s.set_recv_buffer_size(SOCKET_BUFFER);
        let _ = s.set_send_buffer_size(SOCKET_BUFFER);
        s.bind(&SocketAddr::new(local, 0).into())?;
        let mut udp = UdpSocket::from_std(s.into());
        // Runs of datagrams coalesced by the kernel where it can (a large
        // body's window arrives in a few reads); the batch grows its slots
        // for them the first time.
        if crate::netio::udp::enable_gro(&udp) && self.recv.capacity() == crate::netio::udp::BATCH {
            *self.recv = RecvBatch::new(true);
        }
        let i = self.sockets.len();
        registry.register(
            &mut udp,
            crate::netio::token(QUIC_KEY, i as u32),
            mio::Interest::READABLE,
        )?;
        self.sockets.push((local, udp));
        self.send.push(SendBatch::default());
        Ok(i)
    }
}

impl Worker {
    /// Starts slot `key`'s QUIC connection (the slot is `Connecting`): the
    /// handshake's first packet goes out now; the connection is open once
    /// quinn says the handshake is done (`quic_drive`).
    pub(super) fn start_quic(&mut self, key: usize, now: u64) {
        let c = &self.conns[key];
        let wi = c.workload as usize;
        let w = &self.wl[wi];
        let ProtoRt::H3(rt) = &w.proto else {
            return self.fail(key, ErrorKind::ConnectOther, now);
        };
        let rt = rt.clone();
        let addr = w.addr;
        let local = if w.sources.is_empty() {
            match addr {
                SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                SocketAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            }
        } else {
            w.sources[self.shard.local(c.slot) as usize % w.sources.len()]
        };
        let q = self.quic.get_or_insert_with(|| Box::new(Quic::new()));
        let sock = match q.socket(self.poll.registry(), local) {
            Ok(i) => i,
            Err(e) => return self.fail(key, socket::classify_connect(&e), now),
        };
        let at = instant(self.shared.start, now);
        let (handle, conn) = match q.endpoint.connect(at, rt.quic.clone(), addr, &rt.server_name) {
            Ok(made) => made,
            Err(e) => {
                crate::netio::log_once("quic_connect", || format!("QUIC: cannot start a connection: {e}"));
                return self.fail(key, ErrorKind::ConnectOther, now);
            }
        };
        if q.owners.len() <= handle.0 {
            q.owners.resize(handle.0 + 1, NO_SLOT);
        }
        q.owners[handle.0] = key as u32;
        let c = &mut self.conns[key];
        let Protocol::H3(h) = &mut c.proto else {
            return self.fail(key, ErrorKind::ConnectOther, now);
        };
        h.attach(handle, conn, sock as u8, now);
        let early = h.early_open();
        // One state for QUIC's whole handshake (transport and TLS in one):
        // its deadline is the connect timeout.
        self.set_state(key, State::Handshaking);
        if early {
            // 0-RTT: the connection opens now and its first requests ride
            // the handshake's flight (a server that never answers ends it
            // by its idle timeout, and the requests by theirs).
            self.on_connected(key, now);
        }
        self.quic_transmit(key);
    }

    /// Readiness of UDP socket `i`: reads it dry, hands each datagram to
    /// the endpoint and its connection, then drives every connection that
    /// got one.
    pub(super) fn on_quic(&mut self, i: usize) {
        let now = self.now();
        let at = instant(self.shared.start, now);
        let Some(q) = self.quic.as_deref_mut() else { return };
        let Some((_, sock)) = q.sockets.get(i) else { return };
        q.unread = Some(i);
        for _ in 0..READ_BUDGET {
            let n = match q.recv.recv(sock) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    q.unread = None;
                    break;
                }
                // An ICMP error queued on the socket (a port unreachable
                // for one of many peers): nothing to route it to; the
                // connection's own timers judge it.
                Err(_) => continue,
            };
            for d in 0..n {
                let (run, from, seg) = q.recv.get(d);
                let Some(from) = from else { continue };
                // A coalesced read is a run of datagrams of `seg` bytes
                // (the last may be shorter): each goes to the endpoint.
                for bytes in run.chunks(if seg == 0 { run.len().max(1) } else { seg }) {
                    let len = bytes.len();
                    // A copy of its own: quinn may keep a received packet's
                    // bytes (stream data not yet read), and a slice of a shared
                    // buffer would keep the whole buffer alive with it: cut from
                    // 64 KiB arenas, 1,000 held connections pinned 7 MB.
                    let datagram = BytesMut::from(bytes);
                    q.tx.clear();
                    match q.endpoint.handle(at, from, None, None, datagram, &mut q.tx) {
                        Some(DatagramEvent::ConnectionEvent(handle, ev)) => {
                            let key = q.owners.get(handle.0).copied().unwrap_or(NO_SLOT);
                            if let Some(c) = self.conns.get_mut(key as usize)
                                && let Protocol::H3(h) = &mut c.proto
                                && h.handle == handle
                                && let Some(conn) = h.conn()
                            {
                                conn.handle_event(ev);
                                h.heard(now);
                                self.local[c.workload as usize].counters.bytes_received += len as u64;
                                if !h.queued {
                                    h.queued = true;
                                    q.queue.push(key);
                                }
                            }
                        }
                        // A stateless reset or version negotiation the endpoint
                        // answers itself.
                        Some(DatagramEvent::Response(t)) => {
                            q.send[i].push(t.destination, &q.tx[..t.size], t.segment_size);
                        }
                        Some(DatagramEvent::NewConnection(_)) | None => {}
                    }
                }
            }
            // A short batch: the socket was drained.
            if n < q.recv.capacity() {
                q.unread = None;
                break;
            }
        }
        let mut queue = std::mem::take(&mut q.queue);
        for &key in &queue {
            if let Some(c) = self.conns.get_mut(key as usize)
                && let Protocol::H3(h) = &mut c.proto
            {
                h.queued = false;
                self.quic_drive(key as usize, now);
            }
        }
        queue.clear();
        if let Some(q) = self.quic.as_deref_mut() {
            q.queue = queue;
        }
    }

    /// Acts on everything slot `key`'s connection has to say, then sends
    /// what it owes and arms its timer. Returns false when the connection
    /// is gone afterwards.
    pub(super) fn quic_drive(&mut self, key: usize, now: u64) -> bool {
        let mut ready = false;
        loop {
            let out = {
                let Worker {
                    conns,
                    wl,
                    inflight,
                    max_pipeline,
                    quic,
                    local,
                    gauges,
                    ..
                } = self;
                let Some(q) = quic.as_deref_mut() else { return false };
                let c = &mut conns[key];
                let wi = c.workload as usize;
                let Protocol::H3(h) = &mut c.proto else { return false };
                let cx = Cx::of(&wl[wi], inflight, key, *max_pipeline);
                let mut t = Tally {
                    st: &mut local[wi],
                    g: &mut gauges[wi],
                    now,
                };
                h.poll(&mut q.endpoint, &cx, &mut t)
            };
            match out {
                Output::Taken => break,
                Output::Opened => {
                    self.quic_handshake_done(key, now);
                    if self.conns[key].state == State::Handshaking {
                        self.on_connected(key, now);
                        if self.conns[key].state != State::Open {
                            return false;
                        }
                    } else if !self.settle(key, Output::Opened, now) {
                        // After 0-RTT: the server answered; requests may flow.
                        return false;
                    }
                }
                out => {
                    if !self.settle_deferred(key, out, now, &mut ready) {
                        return false;
                    }
                }
            }
        }
        if ready && self.conns[key].state == State::Open && !self.pump(key, now) {
            return false;
        }
        self.quic_transmit(key);
        self.arm(key);
        true
    }

    /// The handshake is done: counted as TCP's connect and TLS's
    /// handshake are together (QUIC does both in one); resumed when it
    /// carried 0-RTT data the server accepted.
    fn quic_handshake_done(&mut self, key: usize, now: u64) {
        let c = &mut self.conns[key];
        let wi = c.workload as usize;
        let Protocol::H3(h) = &mut c.proto else { return };
        let resumed = h.conn().is_some_and(|c| c.accepted_0rtt());
        let st = &mut self.local[wi];
        let took = now.saturating_sub(h.started);
        stats::record_ns(&mut st.connect, took);
        stats::record_ns(&mut st.tls_handshake, took);
        st.counters.tls_handshakes[usize::from(resumed)] += 1;
        // QUIC is TLS 1.3 only (RFC 9001).
        self.gauges[wi].tls_version = 0x0304;
    }

    /// Sends every packet slot `key`'s connection owes, and notes its next
    /// timer (a handshaking slot's wheel entry is armed here: `arm` is for
    /// open ones). A socket that will not take a packet drops it, as the
    /// network may: QUIC's loss recovery sends it again.
    pub(super) fn quic_transmit(&mut self, key: usize) -> bool {
        let now = self.now();
        let at = instant(self.shared.start, now);
        let Some(q) = self.quic.as_deref_mut() else {
            return false;
        };
        let Some(c) = self.conns.get_mut(key) else { return false };
        let wi = c.workload as usize;
        let Protocol::H3(h) = &mut c.proto else { return false };
        let sock = h.sock as usize;
        let mut sent = 0u64;
        if let Some(conn) = h.conn()
            && let Some(out) = q.send.get_mut(sock)
        {
            let run = if out.gso() { GSO_RUN } else { 1 };
            loop {
                q.tx.clear();
                let Some(t) = conn.poll_transmit(at, run, &mut q.tx) else {
                    break;
                };
                out.push(t.destination, &q.tx[..t.size], t.segment_size);
                sent += t.size as u64;
                if out.is_full()
                    && let Some((_, s)) = q.sockets.get(sock)
                {
                    out.flush(s);
                }
            }
            h.timer_ns = timer_ns(self.shared.start, conn.poll_timeout());
        }
        h.owed = false;
        let timer = h.timer_ns;
        self.local[wi].counters.bytes_sent += sent;
        let c = &self.conns[key];
        if c.state == State::Handshaking {
            let deadline = (c.since + self.wl[wi].connect_timeout_ns).min(timer);
            self.wheel.schedule(key as u32, tick_ceil(deadline));
        }
        true
    }

    /// The socket whose last read left datagrams behind, if any (see
    /// `Quic::unread`); the loop reads it again before it waits.
    pub(super) fn quic_unread(&self) -> Option<usize> {
        self.quic.as_deref().and_then(|q| q.unread)
    }

    /// Sends the datagrams this wakeup made (see `netio::udp`): called once
    /// per turn of the loop, after everything that may have made some.
    pub(super) fn quic_flush(&mut self) {
        let Some(q) = self.quic.as_deref_mut() else { return };
        for (out, (_, s)) in q.send.iter_mut().zip(&q.sockets) {
            if !out.is_empty() {
                out.flush(s);
            }
        }
    }

    /// quinn's timer of slot `key` is due (or its connect deadline):
    /// the connection handles it and is driven. Returns false when the
    /// connection is gone afterwards.
    pub(super) fn quic_timeout(&mut self, key: usize, now: u64) -> bool {
        let at = instant(self.shared.start, now);
        if let Protocol::H3(h) = &mut self.conns[key].proto
            && h.timer_ns <= now
            && let Some(conn) = h.conn()
        {
            conn.handle_timeout(at);
        }
        self.quic_drive(key, now)
    }

    /// Drops slot `key`'s QUIC connection, if it has one: a
    /// CONNECTION_CLOSE goes out first unless the connection is closed
    /// already (H3_NO_ERROR for a planned end, H3_GENERAL_PROTOCOL_ERROR
    /// when soakd gives up on it, so the server frees its state at once
    /// rather than at its idle timeout), and the endpoint is told it is
    /// drained unless quinn said so already.
    pub(super) fn quic_forget(&mut self, key: usize, failed: bool) {
        let at = instant(self.shared.start, self.now());
        let Some(c) = self.conns.get_mut(key) else { return };
        let Protocol::H3(h) = &mut c.proto else { return };
        let Some(conn) = h.conn() else { return };
        if !conn.is_closed() {
            h.close(
                at,
                if failed {
                    error::GENERAL_PROTOCOL_ERROR
                } else {
                    error::NO_ERROR
                },
            );
            self.quic_transmit(key);
        }
        let Some(q) = self.quic.as_deref_mut() else { return };
        let Protocol::H3(h) = &mut self.conns[key].proto else {
            return;
        };
        let handle = h.handle;
        let drained = h.drained;
        if h.take_conn().is_some() && !drained {
            let _ = q.endpoint.handle_event(handle, EndpointEvent::drained());
        }
        if let Some(o) = q.owners.get_mut(handle.0) {
            *o = NO_SLOT;
        }
    }
}
