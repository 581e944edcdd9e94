//! The protocol seam: what a connection speaks, behind one type the loop
//! calls, so the loop never knows HTTP/1.1 from HTTP/2 or WebSocket.
//!
//! The loop (`io.rs`, `lifecycle.rs`) owns the socket, the schedule (when
//! a request is due and which one of a mix), the timer wheel, the counters
//! and the in-flight entries' storage (one stretch of `max_pipeline`
//! [`Inflight`] entries per slot, in one per-worker vector). A
//! [`Protocol`] owns everything about how requests and responses map onto
//! the byte stream, and is driven sans I/O (quiche's `Connection` driven
//! from mio is the model). The loop tells it:
//!
//! - **up**: [`Protocol::open`] — the connection is established (TLS
//!   included); what the protocol says first (an HTTP/2 preface, a
//!   WebSocket upgrade) is owed from now on;
//! - **due request**: [`Protocol::issue`] answers which in-flight entry the
//!   request takes (or that it goes out untimed, or must not be sent here);
//!   [`Protocol::capacity`] says how many may be in flight now;
//! - **may write**: [`Protocol::outgoing`] / [`Protocol::sent`] hand out the
//!   bytes owed, from the workload's pre-rendered buffers or the protocol's
//!   own, until the socket is full;
//! - **bytes arrived**: [`Protocol::receive`] answers one [`Output`] at a
//!   time (a response naming its entry, one request failed or handed back,
//!   the connection broken or ending, or "all taken");
//! - **its own time**: [`Protocol::deadline`] / [`Protocol::on_time`] (an
//!   upgrade's deadline, a ping, a closing handshake's wait);
//! - **closed**: [`Protocol::at_close`] says what the peer's close meant;
//!   [`Protocol::closed`] lets it record its last figures;
//! - **stopping**: [`Protocol::start_close`] starts a closing handshake the
//!   drain waits for (a WebSocket close), [`Protocol::farewell`] says bytes
//!   are owed that must go out before the socket closes (a close frame).
//!
//! What one protocol alone counts (HTTP/2's GOAWAY codes and retries,
//! WebSocket's pongs and close codes, a refused upgrade's status) it counts
//! itself, through the [`Tally`] it is lent, into its own section of the
//! workload's stats: the loop's accounting is the same for every protocol.
//!
//! A new protocol is one more variant of [`Protocol`] (and of [`ProtoRt`],
//! its per-workload settings) and one module like `http1.rs`: dispatch is a
//! `match` per call, no trait object, and nothing is allocated per request.
//!
//! HTTP/3 is the one protocol without a byte stream: its QUIC connection
//! lives in the protocol state, and the worker's QUIC driver (`quic.rs`)
//! takes the place of the socket's reads and writes, handing its
//! connection datagrams and timeouts and acting on the same [`Output`]s
//! (`H3::poll`); the schedule, entries, timers and counters are the loop's
//! as for every other protocol.

use std::sync::Arc;

use super::WorkloadRt;
pub(super) use super::exchange::{AtClose, Cx, Inflight, Issued, Output, Response, Tally};
use super::h2::{H2, H2Rt};
use super::h3::{H3, H3Rt, Keepalive};
use super::http1::Http1;
use super::ws::Ws;
use crate::plan::{HttpVersion, WsMode, WsPlan};
use crate::stats::ErrorKind;

/// What a workload's connections speak, as the workers use it: decided
/// from the plan once, compared on a reload (a change recycles the
/// workload's connections, see `commands.rs`).
#[derive(Clone, Debug, PartialEq)]
pub enum ProtoRt {
    /// HTTP/1.1.
    Http1,
    /// HTTP/2 when the connection speaks it: h2c with prior knowledge on
    /// `http://`, h2 when ALPN picks it on `https://` (else HTTP/1.1,
    /// unless HTTP/2 is required).
    H2(Arc<H2Rt>),
    /// WebSocket: the upgrade, then messages.
    Ws(Arc<WsPlan>),
    /// HTTP/3 over QUIC (`--http 3`).
    H3(Arc<H3Rt>),
}

impl ProtoRt {
    /// The protocol of plan workload `w`.
    pub fn of(w: &crate::plan::Workload) -> ProtoRt {
        let tls = w.target.tls.is_some();
        if let Some(plan) = &w.target.ws {
            return ProtoRt::Ws(plan.clone());
        }
        if w.http == HttpVersion::Http3
            && let Some(t) = &w.target.tls
        {
            return ProtoRt::H3(Arc::new(H3Rt {
                requests: w
                    .target
                    .requests
                    .iter()
                    .map(|r| crate::wire::h3::render_request(&r.bytes).expect("soakd's own HTTP/1.1 rendering parses"))
                    .collect(),
                streams: w.streams,
                quic: crate::plan::h3::client_config(&t.config, w.streams, w.h3_0rtt)
                    .expect("checked when the plan was built (plan::h3)"),
                server_name: server_name(&t.server_name),
                keepalive: match w.h3_keepalive {
                    None => Keepalive::Auto,
                    Some(None) => Keepalive::Off,
                    Some(Some(d)) => Keepalive::Every(d.as_nanos() as u64),
                },
                idle_timeout: crate::plan::h3::IDLE_TIMEOUT.as_nanos() as u64,
                zero_rtt: w.h3_0rtt,
            }));
        }
        if !w.http.may_be_h2(tls) {
            return ProtoRt::Http1;
        }
        ProtoRt::H2(Arc::new(H2Rt {
            required: w.http == HttpVersion::Http2,
            cleartext: !tls,
            streams: w.streams,
            window: w.h2_window,
            requests: w
                .target
                .requests
                .iter()
                .map(|r| crate::wire::h2::render_request(&r.bytes, tls).expect("soakd's own HTTP/1.1 rendering parses"))
                .collect(),
            grpc: w.target.grpc.is_some(),
            ping: w.h2_ping.map_or(0, |d| d.as_nanos() as u64),
            hold: w.target.grpc.as_ref().and_then(|g| g.hold.clone()),
        }))
    }

    /// Lanes a connection carries, each paced as a connection is under
    /// `-i`: an HTTP/2 connection's stream slots, else one.
    pub(super) fn lanes(&self) -> u16 {
        match self {
            ProtoRt::H2(h) => h.streams.max(1),
            ProtoRt::H3(h) => h.streams.max(1),
            ProtoRt::Http1 | ProtoRt::Ws(_) => 1,
        }
    }

    /// True for QUIC (its connections live on the worker's UDP sockets,
    /// `quic.rs`).
    pub(super) fn is_quic(&self) -> bool {
        matches!(self, ProtoRt::H3(_))
    }

    /// In-flight entries a slot may need besides the pipeline depth.
    pub(super) fn depth(&self) -> u16 {
        match self {
            ProtoRt::H2(h) => h.streams,
            ProtoRt::H3(h) => h.streams,
            ProtoRt::Http1 | ProtoRt::Ws(_) => 1,
        }
    }

    /// True when the workload's connections keep a per-interval figure
    /// that a walk over the slots records (WebSocket subscribe silences).
    pub(super) fn walks(&self) -> bool {
        matches!(self, ProtoRt::Ws(p) if p.mode == WsMode::Subscribe)
            || matches!(self, ProtoRt::H2(h) if h.hold.is_some())
    }
}

/// A connection's protocol state; one per slot, reset for each connection.
#[derive(Debug)]
pub(super) enum Protocol {
    /// HTTP/1.1 keep-alive, pipelined in order.
    Http1(Http1),
    /// HTTP/2: streams on one connection (boxed: its state is larger than
    /// HTTP/1.1's, and a slot pays one pointer for it).
    H2(Box<H2>),
    /// WebSocket: the upgrade, then messages (boxed, like HTTP/2's, so an
    /// HTTP/1.1 slot does not pay for it).
    Ws(Box<Ws>),
    /// HTTP/3: a QUIC connection's request streams (boxed, as HTTP/2's).
    H3(Box<H3>),
}

impl Protocol {
    /// The state for a new connection of workload `w`: what it speaks from
    /// its first byte (h2c with prior knowledge, or HTTP/1.1 until a TLS
    /// handshake says otherwise).
    pub(super) fn new(w: &WorkloadRt) -> Protocol {
        match &w.proto {
            ProtoRt::Ws(plan) => Protocol::Ws(Box::new(Ws::new(plan))),
            ProtoRt::H2(h) if h.cleartext => Protocol::H2(Box::new(H2::new(h.clone(), w.depth()))),
            ProtoRt::H3(h) => Protocol::H3(Box::new(H3::new(h.clone(), w.depth()))),
            ProtoRt::H2(_) | ProtoRt::Http1 => Protocol::Http1(Http1::new(w.head)),
        }
    }

    /// The state for a TLS connection whose handshake picked HTTP/2 (ALPN
    /// `h2`) or not; an error when the workload requires what the server
    /// did not pick.
    pub(super) fn negotiated(w: &WorkloadRt, h2: bool) -> Result<Protocol, ErrorKind> {
        Ok(match &w.proto {
            ProtoRt::Ws(plan) => Protocol::Ws(Box::new(Ws::new(plan))),
            ProtoRt::H2(h) if h2 => Protocol::H2(Box::new(H2::new(h.clone(), w.depth()))),
            ProtoRt::H2(h) if h.required => return Err(ErrorKind::H2NotNegotiated),
            // Never over TCP (see `quic.rs`).
            ProtoRt::H3(_) => Protocol::new(w),
            ProtoRt::H2(_) | ProtoRt::Http1 => Protocol::Http1(Http1::new(w.head)),
        })
    }

    /// The HTTP version the connection speaks, as the gauge shows it: 11
    /// or 20.
    pub(super) fn version(&self) -> u8 {
        match self {
            Protocol::H2(_) => 20,
            Protocol::H3(_) => 30,
            Protocol::Http1(_) | Protocol::Ws(_) => 11,
        }
    }

    /// The step of this connection's schedule (`None` in closed loop): a
    /// connection's interval, or a lane's when it carries several (see
    /// [`ProtoRt::lanes`]).
    #[inline]
    pub(super) fn step(&self, w: &WorkloadRt) -> Option<u64> {
        match self {
            Protocol::H2(_) | Protocol::H3(_) => w.lane_step_ns,
            Protocol::Http1(_) | Protocol::Ws(_) => w.interval_ns,
        }
    }

    /// Requests that may be in flight at once now: the pipeline depth, the
    /// streams the server allows (none before its SETTINGS or after a
    /// GOAWAY), none before a WebSocket is upgraded or when it only holds
    /// or subscribes.
    #[inline]
    pub(super) fn capacity(&self, w: &WorkloadRt) -> u16 {
        match self {
            Protocol::Http1(_) => w.pipeline,
            Protocol::H2(h) => h.capacity(w.lane_step_ns.is_some()),
            Protocol::H3(h) => h.capacity(),
            Protocol::Ws(s) => s.capacity(w.pipeline),
        }
    }

    /// The connection is up (after TLS): what the protocol says first is
    /// owed from now on; a handshake of its own must be done by `deadline`.
    pub(super) fn open(&mut self, deadline: u64) {
        match self {
            Protocol::Http1(_) | Protocol::H3(_) => {}
            Protocol::H2(h) => h.open(),
            Protocol::Ws(s) => s.open(deadline),
        }
    }

    /// The protocol's own timer (a handshake's deadline, the next ping),
    /// ns, if any.
    #[inline]
    pub(super) fn deadline(&self) -> Option<u64> {
        match self {
            Protocol::Ws(s) => s.deadline(),
            Protocol::H2(h) => h.deadline(),
            Protocol::H3(h) => h.deadline(),
            Protocol::Http1(_) => None,
        }
    }

    /// The protocol's timer is due: [`Output::Taken`] (nothing to do),
    /// [`Output::Ready`] (bytes owed), an error, or an end.
    pub(super) fn on_time(&mut self, t: &mut Tally<'_>) -> Output {
        match self {
            Protocol::Ws(s) => s.on_time(t),
            Protocol::H2(h) => h.on_time(t),
            // The worker drives a QUIC connection's timers (`quic.rs`).
            Protocol::Http1(_) | Protocol::H3(_) => Output::Taken,
        }
    }

    /// Forgets the connection (closed or failed): nothing in flight, no
    /// bytes owed or carried. The requests that were in flight are the
    /// loop's to count, before it calls this.
    #[inline]
    pub(super) fn reset(&mut self) {
        match self {
            Protocol::Http1(h) => h.reset(),
            Protocol::H2(h) => h.reset(),
            Protocol::H3(h) => h.reset(),
            Protocol::Ws(s) => s.reset(),
        }
    }

    /// Requests issued and not yet answered.
    #[inline]
    pub(super) fn in_flight(&self) -> u16 {
        match self {
            Protocol::Http1(h) => h.in_flight(),
            Protocol::H2(h) => h.in_flight(),
            Protocol::H3(h) => h.in_flight(),
            Protocol::Ws(s) => s.in_flight(),
        }
    }

    /// Entry `e`'s request, written at `written`, timed out: `Some` when
    /// the protocol fails it alone and keeps the connection (an HTTP/2
    /// stream on a connection that spoke since), `None` when the
    /// connection must be failed.
    pub(super) fn cancel(&mut self, e: u16, written: u64) -> Option<Output> {
        match self {
            Protocol::H2(h) => h.cancel(e, written),
            Protocol::H3(h) => Some(h.cancel(e)),
            Protocol::Http1(_) | Protocol::Ws(_) => None,
        }
    }

    /// The entry whose request was written first (its timeout runs out
    /// first), if any is in flight.
    #[inline]
    pub(super) fn oldest(&self) -> Option<u16> {
        match self {
            Protocol::Http1(h) => h.oldest(),
            Protocol::H2(h) => h.oldest(),
            Protocol::H3(h) => h.oldest(),
            Protocol::Ws(s) => s.oldest(),
        }
    }

    /// Takes request `req` (an index into the workload's requests), due
    /// now; the caller has checked the [`Protocol::capacity`]; `depth` is
    /// the slot's storage.
    #[inline]
    pub(super) fn issue(&mut self, t: &mut Tally<'_>, req: u8, depth: usize) -> Issued {
        match self {
            Protocol::Http1(h) => Issued::Entry(h.issue(depth)),
            Protocol::H2(h) => h.issue(t, req),
            Protocol::H3(h) => h.issue(req),
            Protocol::Ws(s) => s.issue(t, depth),
        }
    }

    /// True when bytes are owed to the peer.
    #[inline]
    pub(super) fn has_output(&self) -> bool {
        match self {
            Protocol::Http1(h) => h.has_output(),
            Protocol::H2(h) => h.has_output(),
            Protocol::H3(h) => h.owed,
            Protocol::Ws(s) => s.has_output(),
        }
    }

    /// The next bytes owed (empty when none); report what the socket took
    /// with [`Protocol::sent`].
    #[inline]
    pub(super) fn outgoing<'a>(&'a mut self, cx: &Cx<'a>) -> &'a [u8] {
        match self {
            Protocol::Http1(h) => h.outgoing(cx),
            Protocol::H2(h) => h.outgoing(cx),
            // Packets, not bytes: `quic.rs` sends them.
            Protocol::H3(_) => &[],
            Protocol::Ws(s) => s.outgoing(),
        }
    }

    /// The socket took `n` bytes of what [`Protocol::outgoing`] gave.
    #[inline]
    pub(super) fn sent(&mut self, cx: &Cx<'_>, n: usize) {
        match self {
            Protocol::Http1(h) => h.sent(cx, n),
            Protocol::H2(h) => h.sent(n),
            Protocol::H3(_) => {}
            Protocol::Ws(s) => s.sent(n),
        }
    }

    /// Feeds bytes that arrived. Returns how many of `fresh` were used and
    /// what they made; after anything but [`Output::Taken`], call again
    /// with the rest (unless the loop closed the connection).
    #[inline]
    pub(super) fn receive(&mut self, cx: &Cx<'_>, t: &mut Tally<'_>, fresh: &[u8]) -> (usize, Output) {
        match self {
            Protocol::Http1(h) => h.receive(cx, fresh),
            Protocol::H2(h) => h.receive(cx, t, fresh),
            Protocol::H3(_) => (fresh.len(), Output::Taken),
            Protocol::Ws(s) => s.receive(cx, t, fresh),
        }
    }

    /// The peer closed the connection.
    pub(super) fn at_close(&mut self, cx: &Cx<'_>, t: &mut Tally<'_>) -> AtClose {
        match self {
            Protocol::Http1(h) => h.at_close(cx),
            Protocol::H2(h) => h.at_close(),
            Protocol::H3(_) => AtClose::Idle,
            Protocol::Ws(s) => s.at_close(t),
        }
    }

    /// The connection closes now (whoever closed it), before its state is
    /// reset: the protocol records its last figures. True when it was in a
    /// closing handshake the drain waits for. Does nothing once reset.
    pub(super) fn closed(&mut self, t: &mut Tally<'_>) -> bool {
        match self {
            Protocol::Ws(s) => s.closed(t),
            Protocol::H2(h) => {
                h.closed(t);
                false
            }
            Protocol::Http1(_) | Protocol::H3(_) => false,
        }
    }

    /// The run is stopping: a protocol with a closing handshake starts it,
    /// to be answered by `deadline`. True when the drain must wait for it.
    pub(super) fn start_close(&mut self, now: u64, deadline: u64) -> bool {
        match self {
            Protocol::Ws(s) => s.start_close(now, deadline),
            Protocol::H2(h) => {
                h.start_close();
                false
            }
            Protocol::Http1(_) | Protocol::H3(_) => false,
        }
    }

    /// Bytes are owed that say why the connection ends (a close frame):
    /// written once, best effort, before the socket closes.
    pub(super) fn farewell(&self) -> bool {
        match self {
            Protocol::Ws(s) => s.has_output(),
            Protocol::Http1(_) | Protocol::H2(_) | Protocol::H3(_) => false,
        }
    }

    /// The once-an-interval walk (see [`ProtoRt::walks`]): the
    /// connection's figure of the interval that ended at `t.now`.
    pub(super) fn walk(&mut self, t: &mut Tally<'_>) {
        match self {
            Protocol::Ws(s) => s.walk(t),
            Protocol::H2(h) => h.walk(t),
            Protocol::Http1(_) | Protocol::H3(_) => {}
        }
    }

    /// Moves this slot's entries from `old` to `new` (a reload deepened the
    /// pipeline and the storage was laid out again), keeping their order.
    pub(super) fn relayout(&mut self, old: &[Inflight], new: &mut [Inflight]) {
        match self {
            Protocol::Http1(h) => h.relayout(old, new),
            Protocol::H2(h) => h.relayout(old, new),
            Protocol::H3(h) => super::h3::relayout(h, old, new),
            Protocol::Ws(s) => s.relayout(old, new),
        }
    }
}

/// The name a QUIC client sends and verifies: the TLS client's, as text.
fn server_name(name: &rustls::pki_types::ServerName<'_>) -> String {
    match name {
        rustls::pki_types::ServerName::DnsName(d) => d.as_ref().to_string(),
        rustls::pki_types::ServerName::IpAddress(ip) => std::net::IpAddr::from(*ip).to_string(),
        other => format!("{other:?}"),
    }
}
