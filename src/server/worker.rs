//! One target server thread: its poll, listener and connections, and the
//! event loop that hands readiness and due times to the [`Responder`].
//!
//! The listener and the connection table are `netio`'s server core, and
//! the deadlines the servers' one timer scheme (`timer::Deadlines`), the
//! same the metrics exporter runs on; what is the target's own is here:
//! stopping on the shared flag, the thread's queues (delayed responses,
//! trickles, pushes, HTTP/2's streams and floods) as the only timers, each
//! armed for its front (so an idle target sleeps), and the faults that act
//! on accept, and `--restart-every`'s restarts (the listener dropped and
//! bound again, on the schedule of `outage.rs`, whose changes are one more
//! deadline id). What a connection speaks is `proto.rs`'s.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Instant;

use mio::net::TcpListener;
use mio::{Events, Poll, Token, Waker};

use super::conn::{Conn, ConnFault};
use super::outage::{Phase, Schedule};
use super::responder::Responder;
use super::responses::Responses;
use super::{EVENTS, FaultMode, READ_BUF, TargetConfig};
use crate::Error;
use crate::netio::{Accepted, Acceptor, ConnTable, LISTENER, Stream, TlsStream, WAKER};
use crate::timer::Deadlines;

/// Creates a thread's poll and waker and starts the thread.
pub(super) fn start(
    index: usize,
    listener: TcpListener,
    cfg: &TargetConfig,
    responses: &Arc<Responses>,
    stop: &Arc<AtomicBool>,
) -> Result<(Waker, JoinHandle<()>), Error> {
    let poll = Poll::new().map_err(|e| Error::io("creating the target's poll", e))?;
    let waker = Waker::new(poll.registry(), WAKER).map_err(|e| Error::io("creating the target's waker", e))?;
    let mut acceptor = Acceptor::new(listener);
    // The stop-accepting fault keeps the listener (its backlog fills) but
    // never polls it, so no edge comes and nothing is ever accepted.
    if !cfg.fault.is_some_and(|f| f.mode == FaultMode::StopAccepting) {
        acceptor
            .register(poll.registry(), LISTENER)
            .map_err(|e| Error::io("registering the target's listener", e))?;
    }
    let addr = acceptor
        .local_addr()
        .map_err(|e| Error::io("reading the target's bound address", e))?;
    let responder = Responder::new(Arc::clone(responses), cfg.delay, cfg.degrade, cfg.fault).speaking(cfg);
    let worker = Worker {
        poll,
        acceptor: Some(acceptor),
        restarts: Restarts {
            schedule: cfg.outage,
            addr,
            reuse_port: cfg.threads > 1,
        },
        conns: ConnTable::with_capacity(0),
        buf: vec![0; READ_BUF].into_boxed_slice(),
        responder,
        tls: cfg.tls.clone(),
        stop: Arc::clone(stop),
        deadlines: Deadlines::new(),
        fired: Vec::new(),
    };
    std::thread::Builder::new()
        .name(format!("soakd-target-{index}"))
        .spawn(move || {
            // Nobody joins a target that is never stopped, so an error here
            // can only be reported where an operator will see it.
            if let Err(err) = worker.run() {
                eprintln!("soakd target: thread {index} stopped: {err}");
            }
        })
        .map(|thread| (waker, thread))
        .map_err(|e| Error::io("starting a target thread", e))
}

/// `--restart-every`: the schedule, and where to listen again after a
/// restart.
struct Restarts {
    schedule: Schedule,
    addr: std::net::SocketAddr,
    reuse_port: bool,
}

/// One server thread: its poll, listener and connections.
struct Worker {
    poll: Poll,
    /// The listener, paused for a moment after running out of file
    /// descriptors (accepting again at once would only fail again);
    /// `None` while a `--restart-every` restart is down.
    acceptor: Option<Acceptor>,
    /// `--restart-every`: the schedule and how to listen again.
    restarts: Restarts,
    conns: ConnTable<Conn>,
    /// The one buffer every read of this thread goes through.
    buf: Box<[u8]>,
    responder: Responder,
    /// `--tls`: every accepted connection speaks TLS with this.
    tls: Option<Arc<rustls::ServerConfig>>,
    stop: Arc<AtomicBool>,
    /// The thread's queues and the accept pause, by id (see `proto.rs`).
    deadlines: Deadlines,
    /// The ids due in a turn (kept for its capacity).
    fired: Vec<u32>,
}

/// The deadline id of the end of an accept pause (after the queues').
const ACCEPT: u32 = super::proto::H2_PUSHES + 1;
/// The deadline id of the next change of `--restart-every`'s or
/// `--brownout-every`'s schedule.
const SCHEDULE: u32 = ACCEPT + 1;

impl Worker {
    fn run(mut self) -> Result<(), Error> {
        let mut events = Events::with_capacity(EVENTS);
        loop {
            let timeout = self.deadlines.timeout(Instant::now());
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
                    LISTENER => {
                        if let Some(a) = &mut self.acceptor {
                            a.readable();
                        }
                    }
                    token => {
                        let Some(conn) = self.conns.get_mut(token) else {
                            continue; // stale: the slot belongs to a newer connection
                        };
                        let result = self.responder.on_event(conn, &mut self.buf, event);
                        self.settle(token, result);
                    }
                }
            }
            let now = Instant::now();
            // Also after a pause: edge-triggered, connections that queued
            // up meanwhile bring no new event.
            self.accept(now);
            self.fired.extend(self.deadlines.expired(now));
            let mut fired = std::mem::take(&mut self.fired);
            for id in fired.drain(..) {
                match id {
                    SCHEDULE => self.follow_restarts(now),
                    id => self.run_due(id, now),
                }
            }
            self.fired = fired;
            self.responder.arm(&mut self.deadlines, now);
            self.deadlines
                .set(ACCEPT, self.acceptor.as_ref().and_then(|a| a.wake_at(now)));
            self.deadlines.set(SCHEDULE, self.restarts.schedule.next_change(now));
        }
    }

    /// Everything due by `now` in the queue `id`, each on its connection
    /// (gone connections' entries are dropped).
    fn run_due(&mut self, id: u32, now: Instant) {
        while let Some((token, due)) = self.responder.pop_due(id, now) {
            let Some(conn) = self.conns.get_mut(token) else {
                continue; // the connection is gone, and what was due with it
            };
            let result = self.responder.on_due(conn, due, now, &mut self.buf);
            self.settle(token, result);
        }
    }

    /// Accepts every waiting connection (unless paused).
    fn accept(&mut self, now: Instant) {
        let (conns, responder, poll, tls) = (&mut self.conns, &mut self.responder, &self.poll, &self.tls);
        let Some(acceptor) = self.acceptor.as_mut() else { return };
        acceptor.accept(now, usize::MAX, |accepted| {
            let Accepted::Conn(stream) = accepted else {
                // Out of descriptors: every connection here is a client's
                // own, so none is given up; the acceptor pauses.
                return false;
            };
            if responder.fault_hits(FaultMode::CloseAfterAccept) {
                return true; // dropping it closes it
            }
            // Responses are written whole; Nagle would only hold back the
            // next one until the previous one is acknowledged.
            let _ = stream.set_nodelay(true);
            let mut stream = match tls {
                None => Stream::Plain(stream),
                Some(config) => match TlsStream::server(stream, config.clone()) {
                    Ok(t) => Stream::Tls(Box::new(t)),
                    Err(_) => return true,
                },
            };
            conns.admit(|token| {
                // Registered for both directions once: with edge
                // triggering a spare writable edge is cheaper than a
                // reregister syscall each time a write would block.
                stream.register(poll.registry(), token).ok()?;
                let mut conn = Conn::new(stream, token, responder.first_proto());
                if tls.is_some() && responder.fault_hits(FaultMode::HandshakeStall) {
                    conn.fault = ConnFault::Stalled;
                }
                Some(conn)
            });
            true
        });
    }

    /// `--restart-every`, at a change of the schedule: down, the listener
    /// and every connection close (as when a server process stops); up
    /// again, the listener is bound again on the same address (see
    /// `outage.rs`). A brownout's edges change nothing here: its delay is
    /// read as each response is made.
    fn follow_restarts(&mut self, now: Instant) {
        let down = self.restarts.schedule.now(now) == Phase::Down;
        if down == self.acceptor.is_none() {
            return;
        }
        if down {
            self.acceptor = None;
            self.conns.clear();
            return;
        }
        let listened = super::bind(self.restarts.addr, self.restarts.reuse_port, super::BACKLOG)
            .map(Acceptor::new)
            .and_then(|mut a| {
                a.register(self.poll.registry(), LISTENER)
                    .map_err(|e| Error::io("registering the target's listener", e))?;
                Ok(a)
            });
        match listened {
            Ok(a) => self.acceptor = Some(a),
            // Down until the next restart ends: said, not fatal.
            Err(e) => eprintln!("soakd target: cannot listen again after a restart: {e}"),
        }
    }

    /// After the responder worked on `token`'s connection: drops it on an
    /// error, ends it once it has nothing left to do.
    fn settle(&mut self, token: Token, result: io::Result<()>) {
        // On error the batch may hold output for this connection only.
        self.responder.batch.clear();
        if result.is_err() {
            self.conns.remove(token);
        } else if self.conns.get_mut(token).is_some_and(|c| c.finished())
            && let Some(conn) = self.conns.remove(token)
        {
            conn.end();
        }
    }
}
