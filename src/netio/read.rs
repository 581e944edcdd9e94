//! Reading a non-blocking socket until it is drained: the one read step
//! every loop in soakd takes (the engine's connections, the built-in
//! target's, the metrics exporter's, the event socket's).
//!
//! Edge-triggered readiness says "something arrived" once; a loop must
//! read until the socket is empty or no new edge will come (GUIDE habit
//! 1). Empty is usually learnt from a read that says `WouldBlock`, a
//! system call that brings nothing. A read that came back shorter than the
//! buffer already proves it on plain TCP, and on the client's TLS when its
//! last socket read came back short and no decrypted bytes wait
//! ([`Source::drained`]); the server's buffered TLS proves nothing that
//! way (rustls may hold records it has not handed out). With the peer's
//! FIN or an error pending, a short read does not mean drained either:
//! the caller says so (`to_end`) and reads on until the end or the error
//! shows, as no new edge would report it.

use std::io::{self, Read};

use super::stream::Stream;

/// A byte source a read-until-drained loop reads.
pub trait Source {
    /// Reads what has arrived (`Ok(0)`: the peer's close).
    fn read_bytes(&mut self, buf: &mut [u8]) -> io::Result<usize>;
    /// True when the read that just returned `n` bytes into a buffer of
    /// `room` left nothing to read until a new edge.
    fn drained(&self, n: usize, room: usize) -> bool;
}

impl Source for mio::net::TcpStream {
    fn read_bytes(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read(buf)
    }

    #[inline]
    fn drained(&self, n: usize, room: usize) -> bool {
        n < room
    }
}

/// The raw socket under a stream (a lingering close reads past TLS).
impl Source for &mio::net::TcpStream {
    fn read_bytes(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read(buf)
    }

    #[inline]
    fn drained(&self, n: usize, room: usize) -> bool {
        n < room
    }
}

/// The event socket's clients (`observe/event_socket.rs`).
impl Source for mio::net::UnixStream {
    fn read_bytes(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read(buf)
    }

    #[inline]
    fn drained(&self, n: usize, room: usize) -> bool {
        n < room
    }
}

impl Source for Stream {
    #[inline]
    fn read_bytes(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read(buf)
    }

    #[inline]
    fn drained(&self, n: usize, room: usize) -> bool {
        match self {
            Stream::Plain(_) => n < room,
            Stream::Client(c) => c.drained(),
            Stream::Tls(_) => false,
        }
    }
}

/// What one read found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Got {
    /// `n` bytes; `drained` when the socket is known empty after them (the
    /// loop stops without a read that would only say `WouldBlock`).
    Data {
        /// Bytes read into the front of the buffer.
        n: usize,
        /// Nothing more to read until a new edge.
        drained: bool,
    },
    /// The peer closed its side.
    Eof,
    /// Nothing to read (`WouldBlock`).
    Empty,
}

/// One read of a loop that reads until the socket is drained (see the
/// module doc): `Interrupted` is retried, `WouldBlock` is [`Got::Empty`],
/// other errors are returned as they are.
#[inline]
pub fn read_some<S: Source + ?Sized>(src: &mut S, buf: &mut [u8], to_end: bool) -> io::Result<Got> {
    loop {
        match src.read_bytes(buf) {
            Ok(0) => return Ok(Got::Eof),
            Ok(n) => {
                return Ok(Got::Data {
                    n,
                    drained: !to_end && src.drained(n, buf.len()),
                });
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Got::Empty),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A source that hands out `reads` in turn, then `WouldBlock`; one
    /// `Interrupted` first.
    struct Script {
        reads: Vec<io::Result<Vec<u8>>>,
        interrupted: bool,
    }

    impl Source for Script {
        fn read_bytes(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if !self.interrupted {
                self.interrupted = true;
                return Err(io::ErrorKind::Interrupted.into());
            }
            if self.reads.is_empty() {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let bytes = self.reads.remove(0)?;
            buf[..bytes.len()].copy_from_slice(&bytes);
            Ok(bytes.len())
        }

        fn drained(&self, n: usize, room: usize) -> bool {
            n < room
        }
    }

    #[test]
    fn a_short_read_drains_unless_the_end_is_pending() {
        let mut buf = [0u8; 4];
        let mut s = Script {
            reads: vec![Ok(b"abcd".to_vec()), Ok(b"ef".to_vec())],
            interrupted: false,
        };
        assert_eq!(
            read_some(&mut s, &mut buf, false).unwrap(),
            Got::Data { n: 4, drained: false }
        );
        assert_eq!(
            read_some(&mut s, &mut buf, false).unwrap(),
            Got::Data { n: 2, drained: true }
        );
        assert_eq!(read_some(&mut s, &mut buf, false).unwrap(), Got::Empty);
        let mut s = Script {
            reads: vec![
                Ok(b"ef".to_vec()),
                Ok(Vec::new()),
                Err(io::ErrorKind::ConnectionReset.into()),
            ],
            interrupted: true,
        };
        assert_eq!(
            read_some(&mut s, &mut buf, true).unwrap(),
            Got::Data { n: 2, drained: false }
        );
        assert_eq!(read_some(&mut s, &mut buf, true).unwrap(), Got::Eof);
        assert_eq!(
            read_some(&mut s, &mut buf, true).unwrap_err().kind(),
            io::ErrorKind::ConnectionReset
        );
    }
}
