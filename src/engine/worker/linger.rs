//! Lingering closes: a socket soakd failed after sending a close frame
//! (a WebSocket protocol error or ping timeout), kept reading until the
//! server closes.
//!
//! RFC 6455 §7.1.1 asks an endpoint that closes to close TCP cleanly,
//! "discarding any trailing bytes". Closing a socket whose receive queue
//! still holds bytes (the rest of the oversized message that was the
//! error) makes the kernel answer with a reset instead, and a server still
//! writing then fails before it reads the close frame: it sees a reset
//! where the RFC promised it a code (`tests/ws.rs`'s `/oversize` case lost
//! its 1009 that way under load). So such a socket leaves its slot (which
//! counts the error and reconnects as before) half-closed, FIN after the
//! close frame, and waits here, its bytes read and dropped, until the
//! server closes or [`LINGER_NS`] has passed.
//!
//! A stop waits for them as for the closing handshakes it starts itself.
//! Bounded: at most [`MAX_LINGERING`] per worker (past it a socket closes
//! at once, as before: a mass failure must not hold descriptors the
//! reconnects need), each for at most [`LINGER_NS`], nothing kept of what
//! is read.

use mio::Registry;
use slab::Slab;

use super::transport::Transport;
use crate::netio::Got;

/// How long a failed socket waits for the server's close.
const LINGER_NS: u64 = 2_000_000_000;
/// Lingering sockets per worker at most.
const MAX_LINGERING: usize = 64;
/// The slab key of every lingering socket's token (its place here goes in
/// the generation bits): above any connection slot's key.
pub(super) const LINGER_KEY: usize = crate::netio::KEY_LIMIT - 1;

/// A worker's lingering sockets and when each gives up.
#[derive(Default)]
pub(super) struct Lingering {
    socks: Slab<(Transport, u64)>,
}

impl Lingering {
    /// Takes a failed connection's stream (deregistered from its slot's
    /// token): sends FIN after what was written and waits for the
    /// server's. Dropped (closed now) when too many already wait.
    pub(super) fn add(&mut self, registry: &Registry, mut stream: Transport, now: u64) {
        if self.socks.len() >= MAX_LINGERING {
            return;
        }
        let _ = stream.tcp().shutdown(std::net::Shutdown::Write);
        let entry = self.socks.vacant_entry();
        let token = crate::netio::token(LINGER_KEY, entry.key() as u32);
        // Registering reports what is readable already: the first event
        // drains it.
        if stream.register(registry, token).is_ok() {
            entry.insert((stream, now + LINGER_NS));
        }
    }

    /// Readiness of lingering socket `at`: read and drop until the socket
    /// is drained; closed at the server's close or an error.
    pub(super) fn on_event(&mut self, registry: &Registry, at: usize, rbuf: &mut [u8]) {
        let Some((stream, _)) = self.socks.get_mut(at) else {
            return;
        };
        loop {
            // To the end (`WouldBlock` or the close): the server's FIN may
            // come with its last bytes, in the same edge.
            match crate::netio::read_some(&mut stream.tcp(), rbuf, true) {
                Ok(Got::Eof) | Err(_) => break,
                Ok(Got::Data { .. }) => {}
                Ok(Got::Empty) => return,
            }
        }
        let (mut stream, _) = self.socks.remove(at);
        stream.deregister(registry);
    }

    /// No socket waits (a draining worker is idle only then: a stop also
    /// gives the server the time to read the close).
    pub(super) fn is_empty(&self) -> bool {
        self.socks.is_empty()
    }

    /// Closes the sockets whose wait is over (`now`), or every one
    /// (`u64::MAX`, the worker's exit).
    pub(super) fn expire(&mut self, registry: &Registry, now: u64) {
        if self.socks.is_empty() {
            return;
        }
        self.socks.retain(|_, (stream, until)| {
            let keep = *until > now;
            if !keep {
                stream.deregister(registry);
            }
            keep
        });
    }
}
