//! What both sides of TLS share: the summary of a finished handshake,
//! the cap on plaintext encrypted per write, and finding the rustls error
//! inside an I/O error.
//!
//! It lives apart so that the client ([`super::tls_client`]), the server
//! ([`super::tls_server`]) and the stream over both ([`super::Stream`])
//! each depend on it and not on one another.

use std::io;

/// Most plaintext encrypted in one write: four full records, so a large
/// body goes out as the socket takes it rather than all at once.
pub const MAX_PLAINTEXT_PER_WRITE: usize = 64 * 1024;

/// What a finished handshake agreed on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Session {
    /// The session was resumed (a ticket or session ID was accepted).
    pub resumed: bool,
    /// The protocol version (`0x0303` TLS 1.2, `0x0304` TLS 1.3).
    pub version: u16,
    /// The cipher suite's IANA number.
    pub suite: u16,
    /// The server picked HTTP/2 (ALPN `h2`).
    pub h2: bool,
}

/// The rustls error inside an I/O error from a [`super::Stream`], if there is one.
pub fn tls_error(e: &io::Error) -> Option<&rustls::Error> {
    e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>())
}
