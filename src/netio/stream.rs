//! A connection's byte stream, plain or TLS, behind one set of calls.
//!
//! The engine's client connections and the built-in target's server
//! connections both read into a buffer and write from one; [`Stream`] is
//! that seam. The server side ([`TlsStream`], `tls_server.rs`) runs rustls's
//! buffered API over readiness; the client side ([`ClientTls`],
//! `tls_client.rs`) drives the unbuffered API over the same readiness.
//!
//! Two things differ from a plain socket and every caller must honour them:
//! a short read does not mean the socket is drained (rustls may hold
//! records it has not handed out yet), and a write can be accepted while
//! encrypted bytes still wait for the socket ([`Stream::wants_write`]; call
//! [`Stream::flush`] on the next WRITABLE event).
//!
//! Why two: the buffered API keeps a receive buffer of at least 4 KiB per
//! connection for its whole life — fine for the test server, too much for
//! ten thousand held client connections, which hold no buffer at all when
//! idle on the unbuffered API.

use std::io::{self, Read, Write};

use mio::net::TcpStream;
use mio::{Interest, Registry, Token};

use super::tls_client::ClientTls;
use super::tls_server::TlsStream;

/// A connection's byte stream.
#[derive(Debug)]
pub enum Stream {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP, server side (boxed: the rustls state is much larger
    /// than a socket, and plain connections should not pay for it).
    Tls(Box<TlsStream>),
    /// TLS over TCP, client side.
    Client(Box<ClientTls>),
}

impl Stream {
    /// The TCP socket underneath.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(t) => t.tcp(),
            Stream::Client(c) => c.sock(),
        }
    }

    fn tcp_mut(&mut self) -> &mut TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(t) => t.tcp_mut(),
            Stream::Client(c) => c.sock_mut(),
        }
    }

    /// Registers for read and write readiness (edge-triggered).
    pub fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        registry.register(self.tcp_mut(), token, Interest::READABLE | Interest::WRITABLE)
    }

    /// Stops readiness events; the socket closes when the stream drops.
    pub fn deregister(&mut self, registry: &Registry) {
        let _ = registry.deregister(self.tcp_mut());
    }

    /// Reads application bytes (`Ok(0)` is the peer's close).
    #[inline]
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(t) => t.read(buf),
            Stream::Client(c) => c.read(buf),
        }
    }

    /// Writes application bytes; returns how many were taken.
    #[inline]
    pub fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(bytes),
            Stream::Tls(t) => t.write(bytes),
            Stream::Client(c) => c.write(bytes),
        }
    }

    /// True when bytes already written wait to go out (TLS records the
    /// socket did not take yet).
    #[inline]
    pub fn wants_write(&self) -> bool {
        match self {
            Stream::Plain(_) => false,
            Stream::Tls(t) => t.wants_write(),
            Stream::Client(c) => c.wants_write(),
        }
    }

    /// Sends what waits (`WouldBlock` when the socket is still full).
    pub fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(_) => Ok(()),
            Stream::Tls(t) => t.flush(),
            Stream::Client(c) => c.flush(),
        }
    }
}

/// For code written against `io::Write` (such as [`super::Pending`]):
/// `flush` sends TLS records that wait, `WouldBlock` while the socket is
/// full, like [`Stream::flush`].
impl Write for Stream {
    #[inline]
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        Stream::write(self, bytes)
    }

    fn flush(&mut self) -> io::Result<()> {
        Stream::flush(self)
    }
}
