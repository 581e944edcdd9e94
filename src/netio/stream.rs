//! A connection's byte stream, plain or TLS, behind one set of calls.
//!
//! The engine's client connections and the built-in target's server
//! connections both read into a buffer and write from one; [`Stream`] is
//! that seam. The server side ([`TlsStream`]) runs rustls's buffered API
//! over readiness the way rustls's own mio examples do: `read_tls` →
//! `process_new_packets` → `reader()` on the way in, `writer()` →
//! `write_tls` on the way out; the client side ([`ClientTls`]) drives the
//! unbuffered API over the same readiness.
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
use std::sync::Arc;

use mio::net::TcpStream;
use mio::{Interest, Registry, Token};
use rustls::{ServerConfig, ServerConnection};

use super::tls_client::{ClientTls, MAX_PLAINTEXT_PER_WRITE};

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

/// What a finished handshake agreed on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Session {
    /// The session was resumed (a ticket or session ID was accepted).
    pub resumed: bool,
    /// The protocol version (`0x0303` TLS 1.2, `0x0304` TLS 1.3).
    pub version: u16,
    /// The cipher suite's IANA number.
    pub suite: u16,
}

impl Stream {
    /// The TCP socket underneath.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(t) => &t.tcp,
            Stream::Client(c) => c.sock(),
        }
    }

    fn tcp_mut(&mut self) -> &mut TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(t) => &mut t.tcp,
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

    /// True when a read shorter than the buffer proves the socket drained
    /// (plain TCP); a TLS stream must be read until `WouldBlock`.
    #[inline]
    pub fn short_read_drains(&self) -> bool {
        matches!(self, Stream::Plain(_))
    }

    /// True when bytes already written wait to go out (TLS records the
    /// socket did not take yet).
    #[inline]
    pub fn wants_write(&self) -> bool {
        match self {
            Stream::Plain(_) => false,
            Stream::Tls(t) => t.conn.wants_write(),
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

/// rustls (buffered) over a non-blocking TCP socket: the server side.
#[derive(Debug)]
pub struct TlsStream {
    tcp: TcpStream,
    conn: ServerConnection,
}

impl TlsStream {
    /// A server connection, waiting for the client's hello.
    pub fn server(tcp: TcpStream, config: Arc<ServerConfig>) -> Result<TlsStream, rustls::Error> {
        Ok(TlsStream {
            tcp,
            conn: ServerConnection::new(config)?,
        })
    }

    /// Hands TLS records read so far to rustls; sends any alert it queued.
    fn process(&mut self) -> io::Result<()> {
        if let Err(e) = self.conn.process_new_packets() {
            // Tell the peer why (the alert rustls queued), best effort.
            let _ = self.conn.write_tls(&mut self.tcp);
            return Err(io::Error::new(io::ErrorKind::InvalidData, e));
        }
        Ok(())
    }

    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.conn.reader().read(buf) {
                Ok(n) => return Ok(n),
                // The peer closed without close_notify: for HTTP that is an
                // ordinary close (the framer decides whether a response
                // was cut short).
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            match self.conn.read_tls(&mut self.tcp) {
                Ok(0) => {
                    // EOF on the socket: let rustls see it, then the reader
                    // says whether the close was clean.
                    self.process()?;
                    return match self.conn.reader().read(buf) {
                        Ok(n) => Ok(n),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
                        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
                        Err(e) => Err(e),
                    };
                }
                Ok(_) => {
                    self.process()?;
                    // Post-handshake messages (key updates) may want an
                    // answer; it goes out with the next flush if the socket
                    // is full now.
                    if self.conn.wants_write() {
                        match self.flush() {
                            Ok(()) => {}
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                            Err(e) => return Err(e),
                        }
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        // Records still waiting come first: handing rustls more plaintext
        // while the socket is full would only grow its buffer.
        self.flush()?;
        let take = bytes.len().min(MAX_PLAINTEXT_PER_WRITE);
        let n = self.conn.writer().write(&bytes[..take])?;
        match self.flush() {
            Ok(()) => Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(n),
            Err(e) => Err(e),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut self.tcp) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Queues a close_notify and sends it if the socket takes it.
    pub fn close_notify(&mut self) {
        self.conn.send_close_notify();
        let _ = self.flush();
    }
}

/// The rustls error inside an I/O error from a [`Stream`], if there is one.
pub fn tls_error(e: &io::Error) -> Option<&rustls::Error> {
    e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>())
}
