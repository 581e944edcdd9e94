//! A request as an HTTP/3 request stream's bytes, derived once from its
//! HTTP/1.1 rendering (as `h2::render_request` does for HTTP/2).

use super::frame::{encode_data, encode_headers};
use super::qpack::encode_block;
use crate::wire::headers::request_fields;

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
    // QUIC is always TLS: the scheme is https.
    let (owned, body_at) = request_fields(http1, b"https")?;
    let fields: Vec<(&[u8], &[u8])> = owned.iter().map(|(n, v)| (&n[..], &v[..])).collect();
    let block = encode_block(&fields);
    let body = &http1[body_at..];
    // Two frame headers: a 1-byte type and a length of at most 8 bytes.
    let mut frames = Vec::with_capacity(block.len() + body.len() + 18);
    encode_headers(&mut frames, &block);
    if !body.is_empty() {
        encode_data(&mut frames, body);
    }
    Ok(H3Request { frames })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::h3::{Frame, FrameReader, decode_block};

    /// The request's fields and body, read back as a server would.
    fn read(r: &H3Request) -> (Vec<(String, String)>, Option<Vec<u8>>) {
        let mut reader = FrameReader::new();
        let mut at = 0;
        let mut fields = Vec::new();
        let mut body: Option<Vec<u8>> = None;
        while at < r.frames.len() {
            let (n, f) = reader.next(&r.frames[at..]).unwrap();
            at += n;
            match f {
                Some(Frame::Headers(block)) => decode_block(block, &mut Vec::new(), |n, v| {
                    fields.push((String::from_utf8_lossy(n).into(), String::from_utf8_lossy(v).into()))
                })
                .unwrap(),
                Some(Frame::Data(d)) => body.get_or_insert_with(Vec::new).extend_from_slice(d),
                f => panic!("{f:?}"),
            }
        }
        assert!(reader.at_boundary());
        (fields, body)
    }

    fn owned(fields: &[(&str, &str)]) -> Vec<(String, String)> {
        fields.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    }

    #[test]
    fn a_get_becomes_pseudo_headers_and_lower_case_fields() {
        let r = render_request(
            b"GET /a?b=1 HTTP/1.1\r\nHost: x.test:8443\r\nUser-Agent: soakd\r\nX-Trace: On\r\nConnection: close\r\n\
              TE: trailers\r\nTransfer-Encoding: chunked\r\nKeep-Alive: 5\r\n\r\n",
        )
        .unwrap();
        let (fields, body) = read(&r);
        let want = [
            (":method", "GET"),
            (":scheme", "https"),
            (":authority", "x.test:8443"),
            (":path", "/a?b=1"),
            ("user-agent", "soakd"),
            ("x-trace", "On"),
            ("te", "trailers"),
        ];
        assert_eq!(fields, owned(&want));
        assert_eq!(body, None, "no body: no DATA frame");
    }

    #[test]
    fn a_post_body_becomes_one_data_frame() {
        let bytes = b"POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nTE: gzip\r\n\r\nabcd";
        let r = render_request(bytes).unwrap();
        let (fields, body) = read(&r);
        let want = [
            (":method", "POST"),
            (":scheme", "https"),
            (":authority", "h"),
            (":path", "/p"),
            ("content-length", "4"),
        ];
        assert_eq!(fields, owned(&want));
        assert_eq!(body.as_deref(), Some(&b"abcd"[..]));
        assert!(r.frames.ends_with(b"\x00\x04abcd"), "{:x?}", r.frames);
    }

    #[test]
    fn a_head_that_does_not_parse_is_an_error() {
        assert!(render_request(b"GET / HTTP/1.1\r\nHost: h\r\n").is_err());
        assert!(render_request(b"GET / HTTP/1.1\r\nBad Header\r\n\r\n").is_err());
    }
}
