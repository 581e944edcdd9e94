//! Reading an HTTP/1 request head, for both servers soakd runs: the
//! built-in target and the metrics exporter.
//!
//! They had each written their own around httparse, with different limits
//! (16 KiB and 8 KiB) and their own rules for what is refused. One parser
//! now, with one limit: a head over [`MAX_HEAD`] (or with more than
//! [`MAX_HEADERS`] fields) is refused as too large (431), whether it is
//! complete or still arriving, so neither server buffers more than that of
//! a slowloris; a head httparse rejects, or without a method, target or
//! version, is malformed (400); a bad `Content-Length` or a body in any
//! transfer coding is refused (400: neither server has a use for chunked
//! request bodies, and refusing beats misreading the stream). "Need more
//! bytes" is not "bad bytes": an incomplete head within the limit is
//! [`Parsed::Partial`]. What a server does with a good head — its route,
//! whether it accepts a body — is its own.

use super::headers::{self, Persist};

/// The largest request head either server reads.
pub const MAX_HEAD: usize = 16 * 1024;
/// The most header fields a request head may have.
pub const MAX_HEADERS: usize = 64;

/// A complete, acceptable request head, borrowed from the input.
#[derive(Debug)]
pub struct RequestHead<'h, 'b> {
    /// Bytes of input the head took.
    pub len: usize,
    /// The method, as written.
    pub method: &'b str,
    /// The request target, as written (see [`path_of`]).
    pub target: &'b str,
    /// An HTTP/1.0 request.
    pub http10: bool,
    /// What the connection does after the answer.
    pub persist: Persist,
    /// The body's length (`Content-Length`; 0 without one).
    pub body: u64,
    /// The header fields.
    pub headers: &'h [httparse::Header<'b>],
}

/// Why a head is refused: each is answered with its status, then a close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Over [`MAX_HEAD`] bytes or [`MAX_HEADERS`] fields: 431.
    TooLarge,
    /// Not a request head httparse accepts, or one without a method,
    /// target or version: 400.
    Malformed,
    /// A `Content-Length` that is not a number, or two that differ: 400.
    BadLength,
    /// A body in a transfer coding (chunked or other): 400.
    CodedBody,
}

impl Refused {
    /// The status a server answers with.
    pub fn status(self) -> u16 {
        match self {
            Refused::TooLarge => 431,
            Refused::Malformed | Refused::BadLength | Refused::CodedBody => 400,
        }
    }

    /// The one line a server may send as the body.
    pub fn message(self) -> &'static str {
        match self {
            Refused::TooLarge => "request head too large\n",
            Refused::Malformed => "malformed request\n",
            Refused::BadLength => "invalid Content-Length\n",
            Refused::CodedBody => "request bodies in a transfer coding are not accepted\n",
        }
    }
}

/// What the start of a connection's input holds.
#[derive(Debug)]
pub enum Parsed<'h, 'b> {
    /// The head is not complete yet (and within the limit).
    Partial,
    /// A request head.
    Request(RequestHead<'h, 'b>),
    /// A head to refuse.
    Refused(Refused),
}

/// Parses the request head at the start of `input`, with `fields` as the
/// room for its header fields.
pub fn parse<'h, 'b>(input: &'b [u8], fields: &'h mut [httparse::Header<'b>; MAX_HEADERS]) -> Parsed<'h, 'b> {
    let mut req = httparse::Request::new(fields);
    let len = match req.parse(input) {
        Ok(httparse::Status::Complete(len)) if len <= MAX_HEAD => len,
        Ok(httparse::Status::Partial) if input.len() <= MAX_HEAD => return Parsed::Partial,
        Ok(_) | Err(httparse::Error::TooManyHeaders) => return Parsed::Refused(Refused::TooLarge),
        Err(_) => return Parsed::Refused(Refused::Malformed),
    };
    let (Some(method), Some(target), Some(version)) = (req.method, req.path, req.version) else {
        return Parsed::Refused(Refused::Malformed);
    };
    let headers: &'h [httparse::Header<'b>] = req.headers;
    let Ok(framing) = headers::scan(headers) else {
        return Parsed::Refused(Refused::BadLength);
    };
    if framing.chunked || framing.other_coding {
        return Parsed::Refused(Refused::CodedBody);
    }
    let http10 = version == 0;
    Parsed::Request(RequestHead {
        len,
        method,
        target,
        http10,
        persist: framing.persist(http10),
        body: framing.content_length.unwrap_or(0),
        headers,
    })
}

/// The path of a request target: the query string (and any fragment) is
/// stripped, and an absolute-form target (`http://host/path`) is reduced to
/// its path.
pub fn path_of(target: &str) -> &str {
    let mut path = target;
    if !path.starts_with('/')
        && let Some((_, rest)) = path.split_once("://")
    {
        path = rest.find('/').map_or("/", |i| &rest[i..]);
    }
    let end = path.find(['?', '#']).unwrap_or(path.len());
    &path[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A head as plain values: length, method, target, persistence, body.
    type Head = (usize, String, String, Persist, u64);

    fn parsed(input: &[u8]) -> Result<Option<Head>, Refused> {
        let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
        match parse(input, &mut fields) {
            Parsed::Partial => Ok(None),
            Parsed::Refused(r) => Err(r),
            Parsed::Request(h) => Ok(Some((h.len, h.method.into(), h.target.into(), h.persist, h.body))),
        }
    }

    #[test]
    fn heads_and_their_refusals() {
        let get = b"GET /a?b HTTP/1.1\r\nHost: x\r\n\r\nrest";
        assert_eq!(
            parsed(get),
            Ok(Some((get.len() - 4, "GET".into(), "/a?b".into(), Persist::Default, 0)))
        );
        let old = b"POST / HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 3\r\n\r\n";
        assert_eq!(
            parsed(old),
            Ok(Some((old.len(), "POST".into(), "/".into(), Persist::KeepAlive, 3)))
        );
        assert_eq!(parsed(b"GET / HTTP/1.1\r\nHost"), Ok(None));
        assert_eq!(parsed(b"\x01\x02 nonsense\r\n\r\n"), Err(Refused::Malformed));
        assert_eq!(
            parsed(b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n"),
            Err(Refused::BadLength)
        );
        assert_eq!(
            parsed(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Err(Refused::CodedBody)
        );
        // Too large while still arriving, complete, or by its field count.
        let long = [b"GET / HTTP/1.1\r\nX: ".as_slice(), &vec![b'a'; MAX_HEAD]].concat();
        assert_eq!(parsed(&long), Err(Refused::TooLarge));
        let whole = [long.as_slice(), b"\r\n\r\n"].concat();
        assert_eq!(parsed(&whole), Err(Refused::TooLarge));
        let many = format!("GET / HTTP/1.1\r\n{}\r\n", "A: b\r\n".repeat(MAX_HEADERS + 1));
        assert_eq!(parsed(many.as_bytes()), Err(Refused::TooLarge));
        assert_eq!(Refused::TooLarge.status(), 431);
    }

    #[test]
    fn path_strips_query_and_authority() {
        assert_eq!(path_of("/metrics?x=1"), "/metrics");
        assert_eq!(path_of("/a#b"), "/a");
        assert_eq!(path_of("http://host:9/metrics?q"), "/metrics");
        assert_eq!(path_of("http://host"), "/");
        assert_eq!(path_of("*"), "*");
    }
}
