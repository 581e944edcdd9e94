//! Which HTTP version a workload speaks (`--http`): a file of its own
//! because the defaults, the settings table and the TLS client (ALPN) all
//! name it.

/// The HTTP version a workload asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum HttpVersion {
    /// HTTP/1.1 only (ALPN `http/1.1` over TLS).
    Http11,
    /// HTTP/2 only: ALPN `h2` over TLS, h2c with prior knowledge on
    /// `http://`. A server that will not speak it is an error
    /// (`h2_not_negotiated`), not a fallback.
    Http2,
    /// Over TLS, offer `h2,http/1.1` and speak what the server picks; on
    /// `http://`, HTTP/1.1 (there is nothing to negotiate with).
    #[default]
    Auto,
    /// HTTP/3 over QUIC (UDP, TLS 1.3, ALPN `h3`), `https://` only; never
    /// picked by `auto` (no Alt-Svc discovery, docs/http3.md).
    Http3,
}

impl HttpVersion {
    /// Parses `1.1`, `2`, `3` or `auto`.
    pub fn parse(value: &str) -> Option<HttpVersion> {
        match value.trim() {
            "1.1" => Some(HttpVersion::Http11),
            "2" => Some(HttpVersion::Http2),
            "3" => Some(HttpVersion::Http3),
            "auto" => Some(HttpVersion::Auto),
            _ => None,
        }
    }

    /// How it is written on the command line and in files.
    pub fn name(self) -> &'static str {
        match self {
            HttpVersion::Http11 => "1.1",
            HttpVersion::Http2 => "2",
            HttpVersion::Http3 => "3",
            HttpVersion::Auto => "auto",
        }
    }

    /// The ALPN protocols a TLS client offers, in preference order.
    pub fn alpn(self) -> Vec<Vec<u8>> {
        match self {
            HttpVersion::Http11 => vec![b"http/1.1".to_vec()],
            HttpVersion::Http2 => vec![b"h2".to_vec()],
            HttpVersion::Http3 => vec![b"h3".to_vec()],
            HttpVersion::Auto => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
        }
    }

    /// Connections may speak HTTP/2 (so its state is prepared).
    pub fn may_be_h2(self, tls: bool) -> bool {
        match self {
            HttpVersion::Http11 | HttpVersion::Http3 => false,
            HttpVersion::Http2 => true,
            HttpVersion::Auto => tls,
        }
    }
}
