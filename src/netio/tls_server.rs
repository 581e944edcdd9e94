//! The server side of TLS (the built-in target): rustls's buffered API
//! over a non-blocking socket, the way rustls's own mio examples drive it.
//!
//! `read_tls` → `process_new_packets` → `reader()` on the way in,
//! `writer()` → `write_tls` on the way out. The buffered API keeps a
//! receive buffer per connection for its whole life; the target holds a
//! few thousand test connections and is not measured, so that is fine
//! here (the client side, [`super::ClientTls`], cannot afford it).

use std::io::{self, Read, Write};
use std::sync::Arc;

use mio::net::TcpStream;
use rustls::{ServerConfig, ServerConnection};

use super::tls::MAX_PLAINTEXT_PER_WRITE;
use super::write::until_blocked;

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

    /// The TCP socket underneath.
    pub(super) fn tcp(&self) -> &TcpStream {
        &self.tcp
    }

    /// The TCP socket underneath, mutably (for registering it).
    pub(super) fn tcp_mut(&mut self) -> &mut TcpStream {
        &mut self.tcp
    }

    /// True when encrypted records wait for the socket.
    pub(super) fn wants_write(&self) -> bool {
        self.conn.wants_write()
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

    pub(super) fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
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

    pub(super) fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
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

    pub(super) fn flush(&mut self) -> io::Result<()> {
        let (conn, tcp) = (&mut self.conn, &mut self.tcp);
        if until_blocked(|| conn.wants_write().then(|| conn.write_tls(tcp)))? {
            Ok(())
        } else {
            Err(io::ErrorKind::WouldBlock.into())
        }
    }

    /// Queues a close_notify and sends it if the socket takes it.
    pub fn close_notify(&mut self) {
        self.conn.send_close_notify();
        let _ = self.flush();
    }
}
