//! The one seam a connection's bytes pass through.
//!
//! Schedules, timers and counters never touch the socket: they ask the
//! slot's [`Transport`] to read into a buffer or write from one, and to
//! register for readiness. Today a transport is a plain TCP stream; a TLS
//! transport slots in here, behind the same calls, without the hot path
//! knowing which one it drives.

use std::io::{self, Read, Write};

use mio::{Interest, Registry, Token};

use super::socket;
use crate::stats::ErrorKind;

/// A connection's byte stream.
#[derive(Debug)]
pub(super) struct Transport {
    stream: mio::net::TcpStream,
}

impl Transport {
    /// A plain TCP connection (connected or connecting).
    pub(super) fn plain(stream: mio::net::TcpStream) -> Transport {
        Transport { stream }
    }

    /// Registers for read and write readiness (edge-triggered).
    pub(super) fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        registry.register(&mut self.stream, token, Interest::READABLE | Interest::WRITABLE)
    }

    /// Stops readiness events; the socket closes when the transport drops.
    pub(super) fn deregister(&mut self, registry: &Registry) {
        let _ = registry.deregister(&mut self.stream);
    }

    /// After a WRITABLE event while connecting: `Ok(true)` when the
    /// connection is up, `Ok(false)` when it is not yet.
    pub(super) fn finish_connect(&self) -> Result<bool, ErrorKind> {
        socket::finish_connect(&self.stream)
    }

    /// Reads what has arrived (`Ok(0)` is the peer's close).
    #[inline]
    pub(super) fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream.read(buf)
    }

    /// Writes as much of `bytes` as the socket takes.
    #[inline]
    pub(super) fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.stream.write(bytes)
    }
}
