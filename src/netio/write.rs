//! Writing to a non-blocking socket: the one write-until-`WouldBlock` loop
//! and the output a connection keeps while its socket is full.
//!
//! Every flush in soakd — the client's TLS records, the target's and the
//! exporter's responses, rustls's queued server records — repeats one
//! non-blocking write until nothing is left or the socket is full, retries
//! `Interrupted`, and treats a write that takes nothing as an error (it
//! would otherwise loop for ever). [`until_blocked`] is that loop, written
//! once; [`write_until_blocked`] is it over a byte slice; [`Pending`] is
//! the output a server connection carries until its next WRITABLE edge.

use std::io::{self, Write};

/// Repeats `step` (one non-blocking write of what is left, giving the
/// bytes it took; `None` once nothing is left) until nothing is left
/// (`Ok(true)`) or the socket is full (`Ok(false)`). A write that takes
/// nothing is `WriteZero`; other errors end the loop as they are.
pub fn until_blocked(mut step: impl FnMut() -> Option<io::Result<usize>>) -> io::Result<bool> {
    loop {
        match step() {
            None => return Ok(true),
            Some(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
            Some(Ok(_)) => {}
            Some(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
            Some(Err(e)) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Some(Err(e)) => return Err(e),
        }
    }
}

/// Writes as much of `bytes` as the socket takes without blocking and
/// says how much that was (less than all only when the socket is full).
/// After an error the connection is done for, so what was written before
/// it does not matter.
pub fn write_until_blocked<W: Write + ?Sized>(w: &mut W, bytes: &[u8]) -> io::Result<usize> {
    let mut sent = 0;
    until_blocked(|| {
        (sent < bytes.len()).then(|| {
            let n = w.write(&bytes[sent..]);
            if let Ok(n) = n {
                sent += n;
            }
            n
        })
    })?;
    Ok(sent)
}

/// Output a connection could not write yet, kept in order until the
/// socket takes it. Empty (and unallocated) on a connection that keeps up,
/// so an idle connection owns no buffer.
#[derive(Debug, Default)]
pub struct Pending {
    bytes: Vec<u8>,
    /// How much of `bytes` has been written.
    at: usize,
}

impl Pending {
    /// True when nothing waits.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.at == self.bytes.len()
    }

    /// Writes `bytes` now, keeping (a copy of) what the socket does not
    /// take; behind output already waiting, `bytes` only joins the queue.
    pub fn send<W: Write + ?Sized>(&mut self, w: &mut W, bytes: &[u8]) -> io::Result<()> {
        if !self.is_empty() {
            self.bytes.extend_from_slice(bytes);
            return Ok(());
        }
        let sent = write_until_blocked(w, bytes)?;
        if sent < bytes.len() {
            self.bytes = bytes[sent..].to_vec();
            self.at = 0;
        }
        Ok(())
    }

    /// Queues `bytes` without writing (taking the buffer over when nothing
    /// else waits, so a large response is not copied); [`Pending::flush`]
    /// writes it.
    pub fn queue(&mut self, bytes: Vec<u8>) {
        if self.is_empty() {
            self.bytes = bytes;
            self.at = 0;
        } else {
            self.bytes.extend_from_slice(&bytes);
        }
    }

    /// Writes what waits until the socket is full; `Ok(true)` once all of
    /// it is out, when the buffer is given back (the connection may now
    /// idle for hours).
    pub fn flush<W: Write + ?Sized>(&mut self, w: &mut W) -> io::Result<bool> {
        self.at += write_until_blocked(w, &self.bytes[self.at..])?;
        if self.is_empty() {
            *self = Pending::default();
            return Ok(true);
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A socket that takes at most `room` bytes per write and then, until
    /// `room` is refilled, reports `WouldBlock`; one `Interrupted` first.
    struct Full {
        got: Vec<u8>,
        room: usize,
        interrupted: bool,
    }

    impl Write for Full {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            if !self.interrupted {
                self.interrupted = true;
                return Err(io::ErrorKind::Interrupted.into());
            }
            if self.room == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = bytes.len().min(self.room).min(3);
            self.room -= n;
            self.got.extend_from_slice(&bytes[..n]);
            Ok(n)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn full(room: usize) -> Full {
        Full {
            got: Vec::new(),
            room,
            interrupted: false,
        }
    }

    #[test]
    fn writes_until_the_socket_is_full_across_short_writes_and_interrupts() {
        let mut w = full(7);
        assert_eq!(write_until_blocked(&mut w, b"0123456789").unwrap(), 7);
        assert_eq!(w.got, b"0123456");
        let mut w = full(100);
        assert_eq!(write_until_blocked(&mut w, b"0123456789").unwrap(), 10);
    }

    #[test]
    fn a_write_that_takes_nothing_is_an_error_not_a_spin() {
        struct Zero;
        impl Write for Zero {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Ok(0)
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let e = write_until_blocked(&mut Zero, b"x").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WriteZero);
    }

    #[test]
    fn pending_output_keeps_order_and_frees_its_buffer_when_drained() {
        let mut w = full(4);
        let mut p = Pending::default();
        p.send(&mut w, b"abcdef").unwrap();
        assert!(!p.is_empty());
        p.send(&mut w, b"gh").unwrap(); // behind "ef": queued, not written
        p.queue(b"ij".to_vec());
        assert_eq!(w.got, b"abcd");
        assert!(!p.flush(&mut w).unwrap());
        w.room = 100;
        assert!(p.flush(&mut w).unwrap());
        assert_eq!(w.got, b"abcdefghij");
        assert!(p.is_empty());
        assert_eq!(p.bytes.capacity(), 0);
        // Nothing waiting: a send goes straight out and keeps nothing.
        p.send(&mut w, b"k").unwrap();
        assert!(p.is_empty() && p.bytes.capacity() == 0);
    }
}
