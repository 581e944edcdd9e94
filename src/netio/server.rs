//! The parts of an epoll HTTP/1 server that the built-in target and the
//! metrics exporter share: the connection table and the listener.
//!
//! Both servers had written the same two things each: a slab whose tokens
//! carry a generation (so an event for a connection closed earlier in the
//! same batch is dropped, not handed to the slot's next occupant), and an
//! accept loop that drains the edge-triggered listener, tells "backlog
//! empty" from "out of descriptors", and pauses rather than spins when
//! accepting fails. They differ only in what they do with a connection,
//! so that is all they supply here. The rest of the shared core is the
//! keep-alive rule (`wire::headers::Persist`) and the pending output with
//! its write loop ([`super::Pending`]).

use std::io;
use std::net::SocketAddr;
use std::time::Instant;

use mio::net::{TcpListener, TcpStream};
use mio::{Interest, Registry, Token};
use slab::Slab;

use super::{AcceptFailure, AcceptPause, Generations, KEY_LIMIT, accept_failure, split, token};

/// A connection kept in a [`ConnTable`]: it knows the token it was
/// admitted with, which is how a stale event is told from a current one.
pub trait Slot {
    /// The token given to [`ConnTable::admit`]'s `make`.
    fn token(&self) -> Token;
}

/// Connections by token: a slab whose tokens carry a generation.
#[derive(Debug)]
pub struct ConnTable<C> {
    slab: Slab<C>,
    generations: Generations,
}

impl<C: Slot> ConnTable<C> {
    /// An empty table with room for `capacity` connections before it grows.
    pub fn with_capacity(capacity: usize) -> ConnTable<C> {
        ConnTable {
            slab: Slab::with_capacity(capacity),
            generations: Generations::default(),
        }
    }

    /// Connections held.
    pub fn len(&self) -> usize {
        self.slab.len()
    }

    /// Takes a connection in: `make` gets its token (to register the
    /// socket with) and builds it, or gives `None` to refuse it. Refused
    /// too when the slab's keys would reach the reserved tokens.
    pub fn admit(&mut self, make: impl FnOnce(Token) -> Option<C>) -> Option<&mut C> {
        let entry = self.slab.vacant_entry();
        if entry.key() >= KEY_LIMIT {
            return None;
        }
        let token = token(entry.key(), self.generations.next());
        let conn = make(token)?;
        debug_assert_eq!(conn.token(), token);
        Some(entry.insert(conn))
    }

    /// The connection `token` was given to, unless it is gone (the slot may
    /// hold a newer one: that is `None` too).
    pub fn get_mut(&mut self, token: Token) -> Option<&mut C> {
        self.slab.get_mut(split(token).0).filter(|c| c.token() == token)
    }

    /// Removes (and returns) the connection `token` was given to.
    pub fn remove(&mut self, token: Token) -> Option<C> {
        let key = split(token).0;
        if self.slab.get(key)?.token() != token {
            return None;
        }
        Some(self.slab.remove(key))
    }

    /// Every connection, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = &C> {
        self.slab.iter().map(|(_, c)| c)
    }

    /// The connection in slab slot `key` (a timer's id), whatever its
    /// generation.
    pub fn at_key_mut(&mut self, key: usize) -> Option<&mut C> {
        self.slab.get_mut(key)
    }

    /// Drops every connection (the target's `--restart-every`: a server
    /// that stops closes them all). Their tokens stay stale: the
    /// generations go on.
    pub fn clear(&mut self) {
        self.slab.clear();
    }
}

/// What [`Acceptor::accept`] hands its caller.
#[derive(Debug)]
pub enum Accepted {
    /// A new connection (non-blocking).
    Conn(TcpStream),
    /// No descriptor left: close a connection and answer true to try once
    /// more, or false to pause accepting.
    OutOfFds,
}

/// A listener drained edge by edge, with the accept pause.
#[derive(Debug)]
pub struct Acceptor {
    listener: TcpListener,
    pause: AcceptPause,
    /// Connections may wait in the backlog: a readiness edge came and
    /// accepting has not reached `WouldBlock` since.
    ready: bool,
}

impl Acceptor {
    /// Wraps a bound, listening socket. Nothing is accepted before its
    /// first readiness edge (registering reports connections already
    /// waiting), so a listener never registered is never accepted from.
    pub fn new(listener: TcpListener) -> Acceptor {
        Acceptor {
            listener,
            pause: AcceptPause::default(),
            ready: false,
        }
    }

    /// The address bound.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Registers the listener for readable edges under `token`.
    pub fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        registry.register(&mut self.listener, token, Interest::READABLE)
    }

    /// The listener's readiness edge arrived.
    pub fn readable(&mut self) {
        self.ready = true;
    }

    /// When the event loop must come back to accept: `now` while
    /// connections wait, the end of a pause, or never (the next edge).
    pub fn wake_at(&self, now: Instant) -> Option<Instant> {
        match self.pause.deadline() {
            Some(until) => Some(until),
            None if self.ready => Some(now),
            None => None,
        }
    }

    /// Accepts up to `max` waiting connections, handing each to `on`,
    /// unless paused. Stops at an empty backlog; pauses on any failure it
    /// cannot retry (out of descriptors after `on` freed none or already
    /// freed one for the previous attempt, or anything unexpected), since
    /// trying again at once would fail the same way.
    pub fn accept(&mut self, now: Instant, max: usize, mut on: impl FnMut(Accepted) -> bool) {
        if !self.ready || self.pause.active(now) {
            return;
        }
        // True right after `on` closed a connection to free a descriptor:
        // failing again means another thread took it, so pause.
        let mut freed = false;
        for _ in 0..max {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    freed = false;
                    on(Accepted::Conn(stream));
                }
                Err(err) => match accept_failure(&err) {
                    AcceptFailure::Drained => {
                        self.ready = false;
                        return;
                    }
                    // The peer gave up before we got to it; others may wait.
                    AcceptFailure::Retry => {}
                    AcceptFailure::OutOfFds if !freed && on(Accepted::OutOfFds) => freed = true,
                    // The connections stay in the backlog until the pause ends.
                    AcceptFailure::OutOfFds | AcceptFailure::Other => {
                        self.pause.pause(now);
                        return;
                    }
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct C(Token);

    impl Slot for C {
        fn token(&self) -> Token {
            self.0
        }
    }

    #[test]
    fn a_stale_token_finds_nothing_even_when_its_slot_is_reused() {
        let mut table = ConnTable::with_capacity(4);
        let old = table.admit(|t| Some(C(t))).unwrap().0;
        assert!(table.remove(old).is_some());
        let new = table.admit(|t| Some(C(t))).unwrap().0;
        assert_eq!(split(old).0, split(new).0, "the slot is reused");
        assert!(table.get_mut(old).is_none());
        assert!(table.remove(old).is_none());
        assert_eq!(table.len(), 1);
        assert!(table.get_mut(new).is_some());
        // A refused connection leaves the table as it was.
        assert!(table.admit(|_| None).is_none());
        assert_eq!(table.len(), 1);
        // A timer's id finds the slot whatever its generation.
        assert!(table.at_key_mut(split(new).0).is_some());
    }

    #[test]
    fn accepts_after_an_edge_and_stops_at_an_empty_backlog() {
        let listener = TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let mut acceptor = Acceptor::new(listener);
        let addr = acceptor.local_addr().unwrap();
        let clients: Vec<_> = (0..3).map(|_| std::net::TcpStream::connect(addr).unwrap()).collect();
        let now = Instant::now();
        let mut got = 0;
        acceptor.accept(now, 10, |_| {
            got += 1;
            true
        });
        assert_eq!(got, 0, "no edge yet: nothing is accepted");
        acceptor.readable();
        assert_eq!(acceptor.wake_at(now), Some(now));
        // Bounded per turn: two now, the third on the next turn.
        acceptor.accept(now, 2, |a| {
            assert!(matches!(a, Accepted::Conn(_)));
            got += 1;
            true
        });
        assert_eq!(got, 2);
        assert_eq!(acceptor.wake_at(now), Some(now), "one still waits");
        // The kernel queues the handshake asynchronously; the backlog is
        // drained once accept says WouldBlock, bounded in attempts.
        for _ in 0..1000 {
            acceptor.accept(now, 10, |_| {
                got += 1;
                true
            });
            if got == 3 {
                break;
            }
            acceptor.readable();
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(got, 3);
        acceptor.accept(now, 10, |_| panic!("nothing waits"));
        assert_eq!(acceptor.wake_at(now), None);
        drop(clients);
    }
}
