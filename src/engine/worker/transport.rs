//! The one seam a connection's bytes pass through.
//!
//! Schedules, timers and counters never touch the socket: they ask the
//! slot's [`Transport`] to read into a buffer or write from one, to flush
//! what waits, and to register for readiness. Underneath is a
//! [`netio::Stream`](crate::netio::Stream), plain TCP or rustls over TCP;
//! only the connect and the handshake differ, and those live here too.

use std::io;
use std::sync::Arc;

use mio::{Registry, Token};
use rustls::ClientConfig;
use rustls::pki_types::ServerName;

use super::socket;
use crate::netio::{ClientTls, Session, Source, Stream, certificate_words, log_once, tls_error};
use crate::stats::ErrorKind;

/// What a TLS workload connects with: the shared client configuration and
/// the name to send and verify.
#[derive(Clone, Debug)]
pub struct TlsClient {
    /// rustls's configuration (and session cache) for the workload.
    pub config: Arc<ClientConfig>,
    /// The server name.
    pub name: ServerName<'static>,
}

impl PartialEq for TlsClient {
    /// The same configuration object and name: a reload that rebuilt the
    /// configuration counts as a change, so connections are recycled.
    fn eq(&self, other: &TlsClient) -> bool {
        Arc::ptr_eq(&self.config, &other.config) && self.name == other.name
    }
}

/// A connection's byte stream.
#[derive(Debug)]
pub(super) struct Transport(Stream);

impl Transport {
    /// A connection (connected or connecting) that speaks plain TCP, or TLS
    /// when `tls` is given. A TLS client whose state cannot be set up fails
    /// like a handshake.
    pub(super) fn new(stream: mio::net::TcpStream, tls: Option<&TlsClient>) -> Result<Transport, ErrorKind> {
        Ok(Transport(match tls {
            None => Stream::Plain(stream),
            Some(t) => Stream::Client(Box::new(
                ClientTls::new(stream, t.config.clone(), t.name.clone()).map_err(|_| ErrorKind::TlsHandshake)?,
            )),
        }))
    }

    /// The TCP socket underneath (a lingering close reads it raw).
    pub(super) fn tcp(&self) -> &mio::net::TcpStream {
        self.0.tcp()
    }

    /// True for a TLS connection (which has a handshake to do).
    pub(super) fn is_tls(&self) -> bool {
        matches!(self.0, Stream::Client(_))
    }

    /// Registers for read and write readiness (edge-triggered).
    pub(super) fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        self.0.register(registry, token)
    }

    /// Stops readiness events; the socket closes when the transport drops.
    pub(super) fn deregister(&mut self, registry: &Registry) {
        self.0.deregister(registry);
    }

    /// After a WRITABLE event while connecting: `Ok(true)` when the TCP
    /// connection is up, `Ok(false)` when it is not yet.
    pub(super) fn finish_connect(&self) -> Result<bool, ErrorKind> {
        socket::finish_connect(self.0.tcp())
    }

    /// Moves a TLS handshake on: `Ok(Some(_))` once done, `Ok(None)` while
    /// it waits for the server, or the error kind it failed with.
    pub(super) fn handshake(&mut self) -> Result<Option<Session>, ErrorKind> {
        let Stream::Client(t) = &mut self.0 else {
            return Ok(None);
        };
        t.handshake().map_err(|e| classify_handshake(&e))
    }

    /// Writes as much of `bytes` as the connection takes.
    #[inline]
    pub(super) fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.write(bytes)
    }

    /// True when written bytes still wait for the socket (TLS records).
    #[inline]
    pub(super) fn wants_write(&self) -> bool {
        self.0.wants_write()
    }

    /// Sends what waits.
    pub(super) fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }

    /// Makes the close that follows a reset (SO_LINGER 0): the socket
    /// leaves no TIME_WAIT behind (`--close-with-reset`).
    pub(super) fn linger_zero(&self) {
        let _ = socket2::SockRef::from(self.0.tcp()).set_linger(Some(std::time::Duration::ZERO));
    }

    /// Ends a TLS session politely (close_notify) before a planned close.
    pub(super) fn close_notify(&mut self) {
        if let Stream::Client(t) = &mut self.0 {
            t.close_notify();
        }
    }
}

/// Reads as every read-until-drained loop does (`netio::read_some`): the
/// stream's own rule says when a short read left the socket drained.
impl Source for Transport {
    #[inline]
    fn read_bytes(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }

    #[inline]
    fn drained(&self, n: usize, room: usize) -> bool {
        self.0.drained(n, room)
    }
}

/// The error kind of a failed handshake: a certificate that failed
/// verification is `tls_certificate` (logged once per kind of reason, in
/// words: what is wrong and the fix), anything else `tls_handshake`.
fn classify_handshake(e: &io::Error) -> ErrorKind {
    match tls_error(e) {
        Some(rustls::Error::InvalidCertificate(why)) => {
            let words = certificate_words(why);
            log_once(words.reason, || format!("TLS certificate rejected: {}", words.text));
            ErrorKind::TlsCertificate
        }
        Some(other) => {
            // rustls's own sentence ("received fatal alert: ..."); the
            // reason is the variant's name, whatever its particulars.
            let debug = format!("{other:?}");
            let reason = debug.split([' ', '{', '(']).next().unwrap_or(&debug);
            log_once(reason, || format!("TLS handshake failed: {other}"));
            ErrorKind::TlsHandshake
        }
        None => ErrorKind::TlsHandshake,
    }
}
