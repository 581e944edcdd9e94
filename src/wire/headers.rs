//! The one set of HTTP header helpers: Content-Length, Transfer-Encoding,
//! Connection (and the keep-alive rule it feeds, [`Persist`]) and reason
//! phrases.
//!
//! The response framer, the built-in target and the metrics endpoint all
//! read the same few header fields. Reading them in one place means a
//! Content-Length with a sign, a coding list or an odd `Connection` option
//! is judged the same way by every part of soakd.

/// What the framing-relevant fields of one head say.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Framing {
    /// The Content-Length, when one was given (several must agree).
    pub content_length: Option<u64>,
    /// The final transfer coding is `chunked` (RFC 9112 6.3).
    pub chunked: bool,
    /// A transfer coding other than a final `chunked` was given.
    pub other_coding: bool,
    /// `Connection: close` was among the options.
    pub close: bool,
    /// `Connection: keep-alive` was among the options (HTTP/1.0).
    pub keep_alive: bool,
}

impl Framing {
    /// The keep-alive rule (RFC 9112 9.3), for requests and responses
    /// alike: HTTP/1.1 keeps the connection unless told to close; HTTP/1.0
    /// closes unless asked to keep it (and not told to close as well).
    pub fn persist(&self, http10: bool) -> Persist {
        match (self.close, http10, self.keep_alive) {
            (true, _, _) => Persist::Close,
            (false, false, _) => Persist::Default,
            (false, true, true) => Persist::KeepAlive,
            (false, true, false) => Persist::Close,
        }
    }
}

/// What happens to the connection after a message, and so what a server's
/// answer says about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persist {
    /// HTTP/1.1 keep-alive: no `Connection` header needed.
    Default = 0,
    /// HTTP/1.0 asking for keep-alive: the answer must say it was granted.
    KeepAlive = 1,
    /// The connection closes after the answer.
    Close = 2,
}

impl Persist {
    /// True unless the connection closes.
    #[inline]
    pub fn keeps(self) -> bool {
        self != Persist::Close
    }

    /// The `Connection` header line an answer carries (empty for
    /// HTTP/1.1's default), ending in CRLF.
    pub fn header(self) -> &'static str {
        match self {
            Persist::Default => "",
            Persist::KeepAlive => "Connection: keep-alive\r\n",
            Persist::Close => "Connection: close\r\n",
        }
    }
}

/// A Content-Length that is not a plain decimal number, or several that
/// disagree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadContentLength;

/// Reads the framing fields of a parsed head.
pub fn scan(headers: &[httparse::Header<'_>]) -> Result<Framing, BadContentLength> {
    let mut f = Framing::default();
    for h in headers {
        if h.name.eq_ignore_ascii_case("content-length") {
            let v = content_length(h.value).ok_or(BadContentLength)?;
            if f.content_length.is_some_and(|l| l != v) {
                return Err(BadContentLength);
            }
            f.content_length = Some(v);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            // Only the final coding decides the framing.
            let last = h.value.rsplit(|b| *b == b',').next().unwrap_or(b"");
            f.chunked = last.trim_ascii().eq_ignore_ascii_case(b"chunked");
            f.other_coding = !f.chunked;
        } else if h.name.eq_ignore_ascii_case("connection") {
            for option in h.value.split(|b| *b == b',').map(<[u8]>::trim_ascii) {
                f.close |= option.eq_ignore_ascii_case(b"close");
                f.keep_alive |= option.eq_ignore_ascii_case(b"keep-alive");
            }
        }
    }
    Ok(f)
}

/// Parses a Content-Length value: decimal digits only (no sign, no
/// spaces inside), surrounding white space allowed, no overflow.
pub fn content_length(value: &[u8]) -> Option<u64> {
    let value = value.trim_ascii();
    if value.is_empty() {
        return None;
    }
    value.iter().try_fold(0u64, |acc, &b| {
        if b.is_ascii_digit() {
            acc.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        } else {
            None
        }
    })
}

/// Connection-specific fields, which HTTP/2 and HTTP/3 do not carry (RFC
/// 9113 §8.2.2, RFC 9114 §4.2): a request derived from its HTTP/1.1
/// rendering drops them.
const CONNECTION_FIELDS: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
];

/// True for a field of an HTTP/1.1 head that HTTP/2 and HTTP/3 forbid: a
/// connection-specific one, or `TE` with any value but `trailers`.
pub fn connection_specific(name: &str, value: &[u8]) -> bool {
    CONNECTION_FIELDS.iter().any(|c| name.eq_ignore_ascii_case(c))
        || (name.eq_ignore_ascii_case("te") && !value.eq_ignore_ascii_case(b"trailers"))
}

/// A request's field list as HTTP/2 and HTTP/3 carry it, derived from
/// its HTTP/1.1 rendering (the one place a request is put together):
/// `:method`, `:scheme` (`scheme`), `:authority` from Host, `:path`, then
/// the other fields with lower-case names, less the connection-specific
/// ones ([`connection_specific`]). Also where the body starts in `http1`.
/// Once per workload, at render time: the list is owned.
#[allow(clippy::type_complexity)]
pub fn request_fields(http1: &[u8], scheme: &[u8]) -> Result<(Vec<(Vec<u8>, Vec<u8>)>, usize), String> {
    let mut headers = [httparse::EMPTY_HEADER; 128];
    let mut req = httparse::Request::new(&mut headers);
    let body_at = match req.parse(http1) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Err("the request's head is incomplete".into()),
        Err(e) => return Err(format!("the request does not parse ({e})")),
    };
    let authority = req
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("host"))
        .map_or(&b""[..], |h| h.value);
    let mut fields: Vec<(Vec<u8>, Vec<u8>)> = vec![
        (b":method".to_vec(), req.method.unwrap_or("GET").as_bytes().to_vec()),
        (b":scheme".to_vec(), scheme.to_vec()),
        (b":authority".to_vec(), authority.to_vec()),
        (b":path".to_vec(), req.path.unwrap_or("/").as_bytes().to_vec()),
    ];
    fields.extend(
        req.headers
            .iter()
            .filter(|h| !h.name.eq_ignore_ascii_case("host") && !connection_specific(h.name, h.value))
            .map(|h| (h.name.to_ascii_lowercase().into_bytes(), h.value.to_vec())),
    );
    Ok((fields, body_at))
}

/// A short reason phrase for a status code. Clients must not depend on
/// it, so an uncommon code gets its class's name.
pub fn reason(code: u16) -> &'static str {
    let known = match code {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        408 => "Request Timeout",
        413 => "Content Too Large",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "",
    };
    match (known, code / 100) {
        ("", 1) => "Informational",
        ("", 2) => "Success",
        ("", 3) => "Redirection",
        ("", 4) => "Client Error",
        ("", _) => "Server Error",
        (known, _) => known,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_specific_fields() {
        for (name, value) in [
            ("Connection", "close"),
            ("keep-alive", "5"),
            ("Upgrade", "h2c"),
            ("TE", "gzip"),
        ] {
            assert!(connection_specific(name, value.as_bytes()), "{name}");
        }
        for (name, value) in [
            ("te", "trailers"),
            ("TE", "Trailers"),
            ("host", "h"),
            ("x-upgrade", "1"),
        ] {
            assert!(!connection_specific(name, value.as_bytes()), "{name}");
        }
    }

    fn h<'a>(name: &'a str, value: &'a str) -> httparse::Header<'a> {
        httparse::Header {
            name,
            value: value.as_bytes(),
        }
    }

    #[test]
    fn content_lengths() {
        for (text, want) in [
            ("0", Some(0)),
            (" 42 ", Some(42)),
            ("18446744073709551615", Some(u64::MAX)),
            ("18446744073709551616", None),
            ("", None),
            ("-1", None),
            ("+1", None),
            ("1 2", None),
            ("0x10", None),
        ] {
            assert_eq!(content_length(text.as_bytes()), want, "{text:?}");
        }
    }

    #[test]
    fn keep_alive_rule_table() {
        // (Connection header, HTTP/1.0?, what follows)
        for (connection, http10, want) in [
            ("", false, Persist::Default),
            ("keep-alive", false, Persist::Default),
            ("close", false, Persist::Close),
            ("", true, Persist::Close),
            ("Keep-Alive", true, Persist::KeepAlive),
            ("keep-alive, close", true, Persist::Close),
            ("close, keep-alive", false, Persist::Close),
        ] {
            let f = scan(&[h("Connection", connection)]).unwrap();
            assert_eq!(f.persist(http10), want, "{connection:?} http10={http10}");
            assert_eq!(want.keeps(), want != Persist::Close);
        }
        assert_eq!(Persist::Default.header(), "");
        assert_eq!(Persist::KeepAlive.header(), "Connection: keep-alive\r\n");
        assert_eq!(Persist::Close.header(), "Connection: close\r\n");
    }

    #[test]
    fn framing_table() {
        let f = scan(&[h("Content-Length", "5"), h("content-length", "5")]).unwrap();
        assert_eq!(f.content_length, Some(5));
        assert_eq!(
            scan(&[h("Content-Length", "5"), h("Content-Length", "6")]),
            Err(BadContentLength)
        );
        assert_eq!(scan(&[h("Content-Length", "five")]), Err(BadContentLength));
        let f = scan(&[h("Transfer-Encoding", "gzip, chunked")]).unwrap();
        assert!(f.chunked && !f.other_coding);
        let f = scan(&[h("Transfer-Encoding", "chunked, gzip")]).unwrap();
        assert!(!f.chunked && f.other_coding);
        let f = scan(&[h("Connection", "Keep-Alive, Upgrade")]).unwrap();
        assert!(f.keep_alive && !f.close);
        let f = scan(&[h("connection", " close ")]).unwrap();
        assert!(f.close);
    }

    #[test]
    fn reasons() {
        assert_eq!(reason(200), "OK");
        assert_eq!(reason(503), "Service Unavailable");
        assert_eq!(reason(599), "Server Error");
        assert_eq!(reason(299), "Success");
    }
}
