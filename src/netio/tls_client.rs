//! The client side of TLS, on rustls's unbuffered API, so that an idle
//! connection holds no record buffers.
//!
//! rustls's buffered `ClientConnection` keeps a receive buffer of at least
//! 4 KiB for the life of every connection. At ten thousand held connections
//! that buffer is most of what TLS costs in memory, and it sits unused while
//! a connection waits for its next request. Here the ciphertext is read
//! into one scratch buffer per thread instead, and a connection keeps only
//! what is genuinely its own between calls: the tail of a record that has
//! not fully arrived, encrypted bytes the socket did not take, or
//! plaintext the reader had no room for. Each of those is empty (and
//! unallocated) on an idle connection.
//!
//! The unbuffered API hands back one state at a time (encode a handshake
//! record, transmit, blocked for more input, application data to read,
//! ready to write); [`ClientTls::pump`] drives it until it needs the socket
//! or the caller. Bytes the state machine has consumed are discarded from
//! the front of the input, and the rest — possibly half a record, possibly
//! a handshake message that spans records — is carried to the next call
//! exactly as it was, which is what rustls requires.
//!
//! The server side (the built-in target) stays on the buffered API: it
//! holds at most a few thousand test connections and is not measured.

use std::cell::RefCell;
use std::io::{self, Read, Write};
use std::sync::Arc;

use mio::net::TcpStream;
use rustls::client::UnbufferedClientConnection;
use rustls::pki_types::ServerName;
use rustls::unbuffered::{ConnectionState, EncodeError, EncryptError};
use rustls::{ClientConfig, HandshakeKind};

use super::tls::{MAX_PLAINTEXT_PER_WRITE, Session};
use super::write::write_until_blocked;

/// Room for the ciphertext of [`MAX_PLAINTEXT_PER_WRITE`]: each record
/// adds a 5-byte header, the content type and a tag of at most 16 bytes;
/// 64 bytes per record is generous for every suite rustls offers.
const OUT_SCRATCH: usize = MAX_PLAINTEXT_PER_WRITE + 64 * (MAX_PLAINTEXT_PER_WRITE / 16384 + 1);

/// Room for the ciphertext carried between calls (at most one handshake
/// message, which rustls caps at 64 KiB) plus one read from the socket.
const IN_SCRATCH: usize = 192 * 1024;

/// The per-thread buffers every client connection on the thread borrows
/// for the duration of one call. Nothing in a call re-enters another
/// connection, so one pair per thread is enough.
struct Scratch {
    incoming: Box<[u8]>,
    outgoing: Box<[u8]>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch {
        incoming: vec![0; IN_SCRATCH].into_boxed_slice(),
        outgoing: vec![0; OUT_SCRATCH].into_boxed_slice(),
    });
}

/// What the caller wants from one pass of the state machine.
enum Intent<'a> {
    /// Finish the handshake.
    Handshake,
    /// Read application data into `out[*got..]`.
    Read { out: &'a mut [u8], got: &'a mut usize },
    /// Encrypt and send `bytes` (all of them: the caller caps the size).
    Write { bytes: &'a [u8] },
    /// Send a close_notify alert.
    CloseNotify,
}

/// Where the state machine stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// The handshake waits for more from the server.
    Handshaking,
    /// Application data may flow (and everything complete was consumed).
    Open,
    /// The server sent close_notify: no more data will come.
    PeerClosed,
}

/// A TLS client connection over a non-blocking socket `S` (a mio
/// `TcpStream` in the engine; anything that reads and writes in tests).
pub struct ClientTls<S = TcpStream> {
    sock: S,
    conn: UnbufferedClientConnection,
    /// Ciphertext received and not yet consumed by rustls: the start of a
    /// record (or handshake message) whose rest has not arrived.
    carry_in: Vec<u8>,
    /// Ciphertext ready to send that the socket has not taken yet.
    carry_out: Vec<u8>,
    /// Plaintext decrypted but not yet handed to the reader, from
    /// `carry_plain_at` on.
    carry_plain: Vec<u8>,
    carry_plain_at: usize,
    /// The server's close_notify has been seen.
    peer_closed: bool,
    /// The last read from the socket came back short of its room.
    short_fill: bool,
}

impl<S> std::fmt::Debug for ClientTls<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("carry_in", &self.carry_in.len())
            .field("carry_out", &self.carry_out.len())
            .field("carry_plain", &(self.carry_plain.len() - self.carry_plain_at))
            .field("peer_closed", &self.peer_closed)
            .finish_non_exhaustive()
    }
}

impl<S: Read + Write> ClientTls<S> {
    /// A client connection to `name`; the handshake starts with the first
    /// [`ClientTls::handshake`].
    pub fn new(sock: S, config: Arc<ClientConfig>, name: ServerName<'static>) -> Result<ClientTls<S>, rustls::Error> {
        Ok(ClientTls {
            sock,
            conn: UnbufferedClientConnection::new(config, name)?,
            carry_in: Vec::new(),
            carry_out: Vec::new(),
            carry_plain: Vec::new(),
            carry_plain_at: 0,
            peer_closed: false,
            short_fill: false,
        })
    }

    /// The socket underneath.
    pub fn sock(&self) -> &S {
        &self.sock
    }

    /// The socket underneath, mutably (for registering it).
    pub fn sock_mut(&mut self) -> &mut S {
        &mut self.sock
    }

    /// What the handshake agreed on (meaningful once it is complete).
    pub fn session(&self) -> Session {
        Session {
            resumed: self.conn.handshake_kind() == Some(HandshakeKind::Resumed),
            version: self.conn.protocol_version().map_or(0, u16::from),
            suite: self.conn.negotiated_cipher_suite().map_or(0, |s| u16::from(s.suite())),
            h2: self.conn.alpn_protocol() == Some(b"h2"),
        }
    }

    /// True when reading on would only find the socket empty: its last
    /// read came back short and no decrypted bytes wait for the reader.
    pub fn drained(&self) -> bool {
        self.short_fill && self.carry_plain_at == self.carry_plain.len()
    }

    /// True when encrypted bytes wait for the socket.
    pub fn wants_write(&self) -> bool {
        !self.carry_out.is_empty()
    }

    /// Moves the handshake on as far as the socket allows: `Ok(Some(_))`
    /// once complete, `Ok(None)` while it waits for the server. A TLS
    /// failure is `InvalidData` carrying the [`rustls::Error`]; the server
    /// closing mid-handshake is `UnexpectedEof`.
    pub fn handshake(&mut self) -> io::Result<Option<Session>> {
        self.with_input(|me, buf, len| {
            loop {
                let phase = me.pump(buf, len, Intent::Handshake)?;
                match me.flush() {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
                match phase {
                    Phase::Open => return Ok(Some(me.session())),
                    Phase::PeerClosed => return Err(closed_in_handshake()),
                    Phase::Handshaking => {}
                }
                match me.fill(buf, len)? {
                    Fill::Got => {}
                    Fill::Eof => return Err(closed_in_handshake()),
                    Fill::WouldBlock => return Ok(None),
                }
            }
        })
    }

    /// Reads application bytes into `out` (`Ok(0)` is the server's close,
    /// with or without close_notify: for HTTP the framer decides whether a
    /// response was cut short). `WouldBlock` once the socket is drained.
    pub fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.carry_plain_at < self.carry_plain.len() {
            let rest = &self.carry_plain[self.carry_plain_at..];
            let n = rest.len().min(out.len());
            out[..n].copy_from_slice(&rest[..n]);
            self.carry_plain_at += n;
            if self.carry_plain_at == self.carry_plain.len() {
                self.carry_plain = Vec::new();
                self.carry_plain_at = 0;
            }
            return Ok(n);
        }
        if self.peer_closed {
            return Ok(0);
        }
        self.with_input(|me, buf, len| {
            let mut got = 0;
            loop {
                if *len > 0 {
                    let phase = me.pump(buf, len, Intent::Read { out, got: &mut got })?;
                    // Anything the server's records asked for (a key
                    // update) goes out now or with the next flush.
                    match me.flush() {
                        Ok(()) => {}
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                        Err(e) => return Err(e),
                    }
                    if got > 0 {
                        return Ok(got);
                    }
                    if phase == Phase::PeerClosed {
                        return Ok(0);
                    }
                }
                // Read no more ciphertext than `out` can take as plaintext,
                // so a read's records never outgrow the reader's buffer.
                match me.fill_at_most(buf, len, out.len())? {
                    Fill::Got => {}
                    Fill::Eof => return Ok(0),
                    Fill::WouldBlock => return Err(io::ErrorKind::WouldBlock.into()),
                }
            }
        })
    }

    /// Encrypts up to [`MAX_PLAINTEXT_PER_WRITE`] of `bytes` and sends
    /// what the socket takes; returns how much plaintext was taken.
    /// `WouldBlock` while earlier records still wait for the socket.
    pub fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        // Records still waiting come first: encrypting more while the
        // socket is full would only grow the carry.
        self.flush()?;
        if bytes.is_empty() {
            return Ok(0);
        }
        let take = bytes.len().min(MAX_PLAINTEXT_PER_WRITE);
        self.with_input(
            |me, buf, len| match me.pump(buf, len, Intent::Write { bytes: &bytes[..take] })? {
                Phase::Open | Phase::PeerClosed => Ok(take),
                Phase::Handshaking => Err(io::Error::other("TLS write before the handshake completed")),
            },
        )
    }

    /// Sends what waits (`WouldBlock` when the socket is still full).
    pub fn flush(&mut self) -> io::Result<()> {
        let sent = write_until_blocked(&mut self.sock, &self.carry_out)?;
        if sent == self.carry_out.len() {
            self.carry_out = Vec::new();
            Ok(())
        } else {
            self.carry_out.drain(..sent);
            Err(io::ErrorKind::WouldBlock.into())
        }
    }

    /// Queues a close_notify and sends it if the socket takes it (best
    /// effort: the connection is about to close either way).
    pub fn close_notify(&mut self) {
        let _ = self.with_input(|me, buf, len| me.pump(buf, len, Intent::CloseNotify));
        let _ = self.flush();
    }

    /// Runs `f` with the thread's input scratch holding this connection's
    /// carried ciphertext at its front (`len` bytes), and carries what `f`
    /// leaves unconsumed back afterwards.
    fn with_input<T>(&mut self, f: impl FnOnce(&mut Self, &mut Scratch, &mut usize) -> io::Result<T>) -> io::Result<T> {
        SCRATCH.with(|cell| {
            let mut scratch = cell.borrow_mut();
            let mut len = self.carry_in.len();
            scratch.incoming[..len].copy_from_slice(&self.carry_in);
            let result = f(self, &mut scratch, &mut len);
            // Keep the unconsumed tail, and nothing at all when there is
            // none: an idle connection holds no buffer.
            if len == 0 {
                self.carry_in = Vec::new();
            } else {
                self.carry_in.clear();
                self.carry_in.extend_from_slice(&scratch.incoming[..len]);
            }
            result
        })
    }

    /// Reads from the socket into the free end of the input.
    fn fill(&mut self, scratch: &mut Scratch, len: &mut usize) -> io::Result<Fill> {
        self.fill_at_most(scratch, len, usize::MAX)
    }

    fn fill_at_most(&mut self, scratch: &mut Scratch, len: &mut usize, most: usize) -> io::Result<Fill> {
        let end = scratch.incoming.len().min(len.saturating_add(most.max(1)));
        if *len == end {
            // Only a handshake message larger than rustls allows could
            // fill the scratch; rustls refuses those before this.
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "TLS input larger than any record",
            ));
        }
        loop {
            match self.sock.read(&mut scratch.incoming[*len..end]) {
                Ok(0) => return Ok(Fill::Eof),
                Ok(n) => {
                    self.short_fill = n < end - *len;
                    *len += n;
                    return Ok(Fill::Got);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Fill::WouldBlock),
                Err(e) => return Err(e),
            }
        }
    }

    /// Drives rustls over `scratch.incoming[..len]` until it needs more
    /// input or is ready for application data, doing what `intent` asks
    /// on the way. Consumed input is removed from the front (`len`
    /// shrinks); handshake records it produces join `carry_out`.
    fn pump(&mut self, scratch: &mut Scratch, len: &mut usize, mut intent: Intent<'_>) -> io::Result<Phase> {
        let Scratch { incoming, outgoing } = scratch;
        let mut start = 0;
        let phase = loop {
            let status = self.conn.process_tls_records(&mut incoming[start..*len]);
            let discard = status.discard;
            let state = match status.state {
                Ok(state) => state,
                Err(e) => {
                    start += discard;
                    incoming.copy_within(start..*len, 0);
                    *len -= start;
                    self.send_alert();
                    return Err(io::Error::new(io::ErrorKind::InvalidData, e));
                }
            };
            match state {
                ConnectionState::EncodeTlsData(mut enc) => {
                    // Handshake records and alerts: rare, so they go
                    // straight to the carry, sized by rustls's own answer.
                    let at = self.carry_out.len();
                    let need = match enc.encode(&mut []) {
                        Err(EncodeError::InsufficientSize(s)) => s.required_size,
                        Ok(_) => 0,
                        Err(e) => return Err(io::Error::other(e)),
                    };
                    self.carry_out.resize(at + need, 0);
                    if need > 0 {
                        enc.encode(&mut self.carry_out[at..]).map_err(io::Error::other)?;
                    }
                }
                // The records are in `carry_out`; the caller flushes it.
                ConnectionState::TransmitTlsData(t) => t.done(),
                ConnectionState::ReadTraffic(mut r) => {
                    while let Some(record) = r.next_record() {
                        let record = record.map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                        let mut payload = record.payload;
                        if let Intent::Read { out, got } = &mut intent {
                            let n = payload.len().min(out.len() - **got);
                            out[**got..**got + n].copy_from_slice(&payload[..n]);
                            **got += n;
                            payload = &payload[n..];
                        }
                        // What the reader had no room for (or data that came
                        // while writing) waits for the next read.
                        if !payload.is_empty() {
                            if self.carry_plain_at > 0 {
                                self.carry_plain.drain(..self.carry_plain_at);
                                self.carry_plain_at = 0;
                            }
                            self.carry_plain.extend_from_slice(payload);
                        }
                    }
                }
                ConnectionState::BlockedHandshake => {
                    start += discard;
                    break Phase::Handshaking;
                }
                ConnectionState::PeerClosed => {
                    self.peer_closed = true;
                }
                ConnectionState::Closed => {
                    start += discard;
                    self.peer_closed = true;
                    break Phase::PeerClosed;
                }
                ConnectionState::WriteTraffic(mut w) => {
                    match &intent {
                        Intent::Write { bytes } => {
                            let n = w.encrypt(bytes, outgoing).map_err(encrypt_error)?;
                            self.send_now(&outgoing[..n])?;
                        }
                        Intent::CloseNotify => {
                            let n = w.queue_close_notify(outgoing).map_err(encrypt_error)?;
                            self.send_now(&outgoing[..n])?;
                        }
                        Intent::Handshake | Intent::Read { .. } => {}
                    }
                    start += discard;
                    break if self.peer_closed {
                        Phase::PeerClosed
                    } else {
                        Phase::Open
                    };
                }
                _ => {
                    return Err(io::Error::other("unexpected TLS state for a client"));
                }
            }
            start += discard;
        };
        incoming.copy_within(start..*len, 0);
        *len -= start;
        Ok(phase)
    }

    /// Sends freshly encrypted bytes, carrying what the socket does not
    /// take. Only when the socket is full is anything copied.
    fn send_now(&mut self, bytes: &[u8]) -> io::Result<()> {
        if !self.carry_out.is_empty() {
            self.carry_out.extend_from_slice(bytes);
            return Ok(());
        }
        let sent = write_until_blocked(&mut self.sock, bytes)?;
        self.carry_out.extend_from_slice(&bytes[sent..]);
        Ok(())
    }

    /// After a TLS error, sends the alert rustls queued for it (best
    /// effort: tells the server why).
    fn send_alert(&mut self) {
        let status = self.conn.process_tls_records(&mut []);
        if let Ok(ConnectionState::EncodeTlsData(mut enc)) = status.state {
            let mut alert = [0u8; 64];
            if let Ok(n) = enc.encode(&mut alert) {
                let _ = self.sock.write(&alert[..n]);
            }
        }
    }
}

/// What a read from the socket gave.
enum Fill {
    Got,
    Eof,
    WouldBlock,
}

fn closed_in_handshake() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "the peer closed the connection during the TLS handshake",
    )
}

/// Encryption fails only when the scratch is too small (it is sized for
/// the largest write) or the keys are exhausted.
fn encrypt_error(e: EncryptError) -> io::Error {
    io::Error::other(e)
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use proptest::prelude::*;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    use rustls::{RootCertStore, ServerConnection};

    use super::*;

    /// A socket stand-in between a [`ClientTls`] and a real rustls server:
    /// reads hand out what the server sent in pieces whose sizes the test
    /// chooses (so records arrive split anywhere), writes take at most
    /// `room` bytes at a time (so the client's carry is exercised).
    struct Pipe {
        inbox: VecDeque<u8>,
        cuts: Vec<usize>,
        next_cut: usize,
        outbox: Vec<u8>,
        room: usize,
        /// Plaintext the server has read.
        seen_by_server: Vec<u8>,
    }

    impl Read for Pipe {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.inbox.is_empty() {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let cut = self.cuts[self.next_cut % self.cuts.len()];
            self.next_cut += 1;
            let n = cut.min(buf.len()).min(self.inbox.len());
            for (i, b) in self.inbox.drain(..n).enumerate() {
                buf[i] = b;
            }
            Ok(n)
        }
    }

    impl Write for Pipe {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            if self.room == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = bytes.len().min(self.room);
            self.outbox.extend_from_slice(&bytes[..n]);
            Ok(n)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// A real rustls server with a fresh self-signed certificate, and a
    /// client configuration that trusts it.
    fn pair() -> (ServerConnection, Arc<ClientConfig>) {
        let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        let cert = CertificateDer::from(made.cert.der().to_vec());
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(made.signing_key.serialize_der()));
        let server = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(vec![cert.clone()], key)
            .unwrap();
        let mut roots = RootCertStore::empty();
        roots.add(cert).unwrap();
        let client = ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let mut conn = ServerConnection::new(Arc::new(server)).unwrap();
        conn.set_buffer_limit(None);
        (conn, Arc::new(client))
    }

    /// Moves bytes both ways until the client's handshake completes.
    fn connect(cuts: Vec<usize>, room: usize) -> (ClientTls<Pipe>, ServerConnection) {
        let (mut server, config) = pair();
        let pipe = Pipe {
            inbox: VecDeque::new(),
            cuts,
            next_cut: 0,
            outbox: Vec::new(),
            room,
            seen_by_server: Vec::new(),
        };
        let mut client = ClientTls::new(pipe, config, ServerName::try_from("localhost").unwrap()).unwrap();
        for _ in 0..10_000 {
            let done = client.handshake().unwrap().is_some();
            let _ = client.flush();
            to_server(&mut client, &mut server);
            if done && !server.is_handshaking() {
                return (client, server);
            }
        }
        panic!("handshake did not complete");
    }

    fn to_server(client: &mut ClientTls<Pipe>, server: &mut ServerConnection) {
        let sent = std::mem::take(&mut client.sock.outbox);
        let mut rd = &sent[..];
        while !rd.is_empty() {
            server.read_tls(&mut rd).unwrap();
            server.process_new_packets().unwrap();
            // Keep the server's plaintext buffer from filling up.
            let mut chunk = [0u8; 8192];
            while let Ok(n) = server.reader().read(&mut chunk) {
                if n == 0 {
                    break;
                }
                client.sock.seen_by_server.extend_from_slice(&chunk[..n]);
            }
        }
        let mut out = Vec::new();
        while server.wants_write() {
            server.write_tls(&mut out).unwrap();
        }
        client.sock.inbox.extend(out);
    }

    /// Reads until the client has nothing more to give.
    fn read_all(client: &mut ClientTls<Pipe>, out_size: usize) -> (Vec<u8>, bool) {
        let mut got = Vec::new();
        let mut buf = vec![0; out_size];
        loop {
            match client.read(&mut buf) {
                Ok(0) => return (got, true),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return (got, false),
                Err(e) => panic!("read failed: {e}"),
            }
        }
    }

    fn message(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Records split anywhere by the socket, read into buffers of any
        /// size, give the same bytes as whole records; nothing is left
        /// held once the data is read.
        #[test]
        fn split_records_read_like_whole_ones(
            cuts in prop::collection::vec(1usize..3000, 1..8),
            writes in prop::collection::vec(1usize..40_000, 1..5),
            out_size in 1usize..70_000,
        ) {
            let (mut client, mut server) = connect(cuts, usize::MAX);
            let mut sent = Vec::new();
            for (i, len) in writes.iter().enumerate() {
                let m = message(*len, i as u8);
                server.writer().write_all(&m).unwrap();
                sent.extend_from_slice(&m);
            }
            to_server(&mut client, &mut server);
            let (got, closed) = read_all(&mut client, out_size);
            prop_assert!(!closed);
            prop_assert_eq!(got.len(), sent.len());
            prop_assert!(got == sent, "plaintext differs");
            prop_assert_eq!(client.carry_in.capacity(), 0);
            prop_assert_eq!(client.carry_plain.capacity(), 0);
        }

        /// Writes the socket takes only in part come out whole and in
        /// order once flushed.
        #[test]
        fn partial_socket_writes_carry_and_flush(
            writes in prop::collection::vec(1usize..100_000, 1..4),
            room in 1usize..5000,
        ) {
            let (mut client, mut server) = connect(vec![4096], usize::MAX);
            client.sock.room = room;
            let mut sent = Vec::new();
            for (i, len) in writes.iter().enumerate() {
                let m = message(*len, i as u8);
                let mut at = 0;
                while at < m.len() {
                    match client.write(&m[at..]) {
                        Ok(n) => at += n,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => to_server(&mut client, &mut server),
                        Err(e) => panic!("write failed: {e}"),
                    }
                }
                sent.extend_from_slice(&m);
            }
            while client.wants_write() {
                let _ = client.flush();
                to_server(&mut client, &mut server);
            }
            to_server(&mut client, &mut server);
            prop_assert!(client.sock.seen_by_server == sent, "the server read different bytes");
            prop_assert_eq!(client.carry_out.capacity(), 0);
        }
    }

    #[test]
    fn close_notify_reads_as_the_end_and_is_sent_back() {
        let (mut client, mut server) = connect(vec![100], usize::MAX);
        server.writer().write_all(b"last words").unwrap();
        server.send_close_notify();
        to_server(&mut client, &mut server);
        let (got, closed) = read_all(&mut client, 4);
        assert_eq!(got, b"last words");
        assert!(closed, "close_notify must read as the end of the stream");
        client.close_notify();
        to_server(&mut client, &mut server);
        let mut rest = Vec::new();
        assert_eq!(
            server.reader().read_to_end(&mut rest).unwrap(),
            0,
            "the server saw our close_notify"
        );
        assert!(rest.is_empty());
    }

    #[test]
    fn a_corrupted_record_is_a_tls_error() {
        let (mut client, mut server) = connect(vec![1 << 20], usize::MAX);
        server.writer().write_all(b"hello").unwrap();
        let mut out = Vec::new();
        while server.wants_write() {
            server.write_tls(&mut out).unwrap();
        }
        let last = out.len() - 1;
        out[last] ^= 0xff;
        client.sock.inbox.extend(out);
        let e = client.read(&mut [0; 64]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(
            super::super::tls_error(&e).is_some(),
            "the rustls error travels with it: {e}"
        );
    }
}
