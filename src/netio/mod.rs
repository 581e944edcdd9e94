//! Plumbing every epoll server and client in the crate shares: the byte
//! stream of a connection (plain or TLS, [`Stream`]), connection tokens
//! that carry a generation, pausing `accept` when descriptors run out, the
//! one write-until-`WouldBlock` loop, and the core of the two HTTP/1
//! servers (connection table and listener, [`ConnTable`], [`Acceptor`]).
//!
//! Slab keys are reused at once, so an event for a connection closed
//! earlier in the same batch (or a delayed response queued for it) must
//! not reach the connection that took its slot: a token holds the key in
//! its low 32 bits and a generation in the high 32, and a stale one no
//! longer matches. The two tokens at the very top (every key bit set, or
//! all but the lowest) are left for the event loop's own sources: the
//! [`WAKER`] every loop has, and [`LISTENER`] (a server's listening
//! socket, or another source of a loop that has none).
//!
//! An `accept` that fails for lack of descriptors fails again at once, so
//! retrying would spin; [`AcceptPause`] holds accepts off for a moment and
//! tells the event loop when to look again.
//!
//! Files: `fetch.rs` (one blocking GET, plain or TLS, with a deadline and a body cap: `soakd
//! status` and the server watch); `pool.rs` (the per-thread buffer pool); `stream.rs` (the plain/TLS enum) over `tls_client.rs` and
//! `tls_server.rs`, which share only `tls.rs`; `tls_errors.rs` (certificate failures in words); `write.rs` (the write loop
//! and pending output); `read.rs` (the one read step of every
//! read-until-drained loop); `server.rs` (the HTTP/1 servers' core);
//! `wait.rs` (the engine's wait, finer than a millisecond, without a timer
//! descriptor); `udp.rs` (batched datagrams for QUIC: `recvmmsg`,
//! `sendmmsg`, segmentation offload).

pub mod fetch;
pub mod pool;
mod read;
mod server;
mod stream;
#[cfg(test)]
pub mod testing;
mod tls;
mod tls_client;
mod tls_errors;
mod tls_server;
pub mod udp;
mod wait;
mod write;

use std::io;
use std::time::{Duration, Instant};

pub use read::{Got, Source, read_some};
pub use server::{Accepted, Acceptor, ConnTable, Slot};
pub use stream::Stream;
pub use tls::{Session, tls_error};
pub use tls_client::ClientTls;
pub use tls_errors::{certificate_words, log_once};
pub use tls_server::TlsStream;
pub use wait::{Ready, Waiter};
pub use write::{Pending, until_blocked};

use mio::Token;

/// Token reserved for an event loop's waker (every loop in the crate has
/// one; this is the only definition).
pub const WAKER: Token = Token(usize::MAX);
/// Token reserved for a listening socket (or a loop's other own source).
pub const LISTENER: Token = Token(usize::MAX - 1);
/// Keys at or above this cannot be told from the reserved tokens.
pub const KEY_LIMIT: usize = (1 << 32) - 2;

/// The token for slab key `key` (below [`KEY_LIMIT`]) in `generation`.
#[inline]
pub fn token(key: usize, generation: u32) -> Token {
    debug_assert!(key < KEY_LIMIT);
    Token(key | ((generation as usize) << 32))
}

/// The slab key and generation a token carries.
#[inline]
pub fn split(token: Token) -> (usize, u32) {
    (token.0 & 0xffff_ffff, (token.0 >> 32) as u32)
}

/// Hands out generations; one per event loop.
#[derive(Debug, Default)]
pub struct Generations(u32);

impl Generations {
    /// The next generation (wrapping: a token would have to survive four
    /// billion reconnects of other slots to be mistaken).
    #[inline]
    pub fn next(&mut self) -> u32 {
        self.0 = self.0.wrapping_add(1);
        self.0
    }
}

/// What to do after `accept` failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcceptFailure {
    /// The backlog is empty: wait for the next readiness edge.
    Drained,
    /// This one connection went away or the call was interrupted: accept
    /// the next.
    Retry,
    /// No descriptor left (EMFILE/ENFILE): free one, or pause.
    OutOfFds,
    /// Anything else: pause rather than spin.
    Other,
}

/// Classifies an `accept` error.
pub fn accept_failure(err: &io::Error) -> AcceptFailure {
    match err.kind() {
        io::ErrorKind::WouldBlock => AcceptFailure::Drained,
        io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset => {
            AcceptFailure::Retry
        }
        _ if matches!(err.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => AcceptFailure::OutOfFds,
        _ => AcceptFailure::Other,
    }
}

/// How long accepting stays off after it failed for want of resources.
pub const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// Accepting switched off for a moment, so a listener whose accepts fail
/// does not spin its event loop; the connections wait in the backlog.
#[derive(Debug, Default)]
pub struct AcceptPause {
    until: Option<Instant>,
}

impl AcceptPause {
    /// Turns accepting off for [`ACCEPT_PAUSE`] from `now`.
    pub fn pause(&mut self, now: Instant) {
        self.until = Some(now + ACCEPT_PAUSE);
    }

    /// True while accepting is off; clears the pause once it is over.
    pub fn active(&mut self, now: Instant) -> bool {
        match self.until {
            Some(t) if now < t => true,
            Some(_) => {
                self.until = None;
                false
            }
            None => false,
        }
    }

    /// When the pause ends, for the event loop's timeout.
    pub fn deadline(&self) -> Option<Instant> {
        self.until
    }
}

/// Sets an integer socket option socket2 does not expose (the engine's
/// `IP_BIND_ADDRESS_NO_PORT`, Linux 4.2+: bind the address now, pick the
/// port at connect time, and `IP_LOCAL_PORT_RANGE`; the target's
/// `IP_MTU_DISCOVER` for QUIC).
#[allow(unsafe_code)]
pub fn set_int(socket: &socket2::Socket, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: `socket` is a valid open descriptor for the duration of the
    // call, and the option value points at a live c_int of the given size.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_stay_clear_of_the_reserved_ones() {
        let mut g = Generations::default();
        let a = token(7, g.next());
        let b = token(7, g.next());
        assert_ne!(a, b);
        assert_eq!(split(b), (7, 2));
        let top = token(KEY_LIMIT - 1, u32::MAX);
        assert_ne!(top, LISTENER);
        assert_ne!(top, WAKER);
    }

    #[test]
    fn accept_failures_are_classified() {
        let k = |kind| accept_failure(&io::Error::from(kind));
        assert_eq!(k(io::ErrorKind::WouldBlock), AcceptFailure::Drained);
        assert_eq!(k(io::ErrorKind::ConnectionAborted), AcceptFailure::Retry);
        assert_eq!(
            accept_failure(&io::Error::from_raw_os_error(libc::EMFILE)),
            AcceptFailure::OutOfFds
        );
        assert_eq!(
            accept_failure(&io::Error::from_raw_os_error(libc::ENOBUFS)),
            AcceptFailure::Other
        );
    }

    #[test]
    fn a_pause_ends_by_itself() {
        let mut p = AcceptPause::default();
        let t0 = Instant::now();
        assert!(!p.active(t0));
        p.pause(t0);
        assert!(p.active(t0 + Duration::from_millis(50)));
        assert_eq!(p.deadline(), Some(t0 + ACCEPT_PAUSE));
        assert!(!p.active(t0 + ACCEPT_PAUSE));
        assert_eq!(p.deadline(), None);
    }
}
