//! A request as an HTTP/3 request stream's bytes, derived once from its
//! HTTP/1.1 rendering (as `h2::render_request` does for HTTP/2).

/// One request ready for any HTTP/3 connection: the whole content of its
/// request stream (a HEADERS frame, then a DATA frame when it has a body),
/// written and finished as one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct H3Request {
    /// HEADERS and DATA frames.
    pub frames: Vec<u8>,
}

/// Derives the HTTP/3 form of `http1`, a request soakd rendered (so it
/// parses): `:method`, `:scheme` https, `:authority` from Host, `:path`,
/// then the other fields lower-cased, less the connection-specific ones
/// HTTP/3 forbids (RFC 9114 §4.2, as HTTP/2's); the body after the head
/// becomes one DATA frame.
pub fn render_request(http1: &[u8]) -> Result<H3Request, String> {
    let _ = http1;
    todo!()
}
