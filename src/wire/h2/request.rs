//! A request as HTTP/2 frames, derived once from its HTTP/1.1 rendering.
//!
//! The plan renders each request once as HTTP/1.1 bytes (the one place a
//! request's method, target, headers and body are put together); an HTTP/2
//! connection sends the same request, so its header block is derived from
//! those bytes here, once per workload, rather than rendered a second way:
//! `Host` becomes `:authority`, names are lower-cased, and the fields
//! HTTP/2 forbids (connection-specific ones, RFC 9113 §8.2.2) are dropped.
//! The frames carry stream 0; the client patches the stream of each frame
//! header as it copies them out ([`super::set_stream_id`]).

use super::frame::{DEFAULT_MAX_FRAME_SIZE, encode_headers};
use super::hpack::encode_block;
use crate::wire::headers::request_fields;

/// One request ready for any HTTP/2 connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct H2Request {
    /// HEADERS (and CONTINUATION) frames on stream 0; END_STREAM when the
    /// request has no body.
    pub frames: Vec<u8>,
    /// Where the body starts in the HTTP/1.1 bytes it was derived from (it
    /// runs to their end; empty when it starts at the end).
    pub body_at: usize,
    /// The header list's size as RFC 9113 §6.5.2 counts it (name + value +
    /// 32 per field, pseudo-fields included): what a server's
    /// SETTINGS_MAX_HEADER_LIST_SIZE is compared with.
    pub list_size: u32,
}

/// Derives the HTTP/2 form of `http1`, a request soakd rendered (so it
/// parses); `https` gives `:scheme`.
pub fn render_request(http1: &[u8], https: bool) -> Result<H2Request, String> {
    let scheme: &[u8] = if https { b"https" } else { b"http" };
    let (owned, body_at) = request_fields(http1, scheme)?;
    let fields: Vec<(&[u8], &[u8])> = owned.iter().map(|(n, v)| (&n[..], &v[..])).collect();
    let list_size = fields.iter().map(|(n, v)| n.len() + v.len() + 32).sum::<usize>();
    let list_size = u32::try_from(list_size).unwrap_or(u32::MAX);
    let block = encode_block(&fields);
    let mut frames = Vec::with_capacity(block.len() + 9);
    encode_headers(&mut frames, 0, &block, body_at == http1.len(), DEFAULT_MAX_FRAME_SIZE);
    Ok(H2Request {
        frames,
        body_at,
        list_size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::h2::{Frame, FrameDecoder, HeaderDecoder};

    fn fields_of(r: &H2Request) -> (Vec<(String, String)>, bool) {
        // As a client sends it: on a stream of its own.
        let mut frames = r.frames.clone();
        crate::wire::h2::set_stream_id(&mut frames, 1);
        let (f, n) = FrameDecoder::new(16_384, 65_536).decode(&frames).unwrap().unwrap();
        assert_eq!(n, frames.len());
        let Frame::Headers {
            fragment,
            end_stream,
            end_headers: true,
            stream: 1,
        } = f
        else {
            panic!("{f:?}")
        };
        let mut out = Vec::new();
        HeaderDecoder::new(0, 1 << 16)
            .decode(fragment, |n, v| {
                out.push((String::from_utf8_lossy(n).into(), String::from_utf8_lossy(v).into()))
            })
            .unwrap();
        (out, end_stream)
    }

    #[test]
    fn a_get_becomes_pseudo_headers_and_lower_case_fields() {
        let r = render_request(
            b"GET /a?b=1 HTTP/1.1\r\nHost: x.test:8443\r\nUser-Agent: soakd\r\nX-Trace: On\r\nConnection: close\r\n\r\n",
            true,
        )
        .unwrap();
        let (f, end_stream) = fields_of(&r);
        let want = [
            (":method", "GET"),
            (":scheme", "https"),
            (":authority", "x.test:8443"),
            (":path", "/a?b=1"),
            ("user-agent", "soakd"),
            ("x-trace", "On"),
        ];
        assert_eq!(f, want.map(|(a, b)| (a.to_string(), b.to_string())));
        assert!(end_stream, "no body: the HEADERS frame ends the stream");
        let size: usize = want.iter().map(|(n, v)| n.len() + v.len() + 32).sum();
        assert_eq!(r.list_size as usize, size);
    }

    #[test]
    fn a_body_is_left_in_place() {
        let bytes = b"POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nabcd";
        let r = render_request(bytes, false).unwrap();
        let (f, end_stream) = fields_of(&r);
        assert!(!end_stream);
        assert_eq!(&bytes[r.body_at..], b"abcd");
        assert!(f.contains(&("content-length".into(), "4".into())));
        assert!(f.contains(&(":scheme".into(), "http".into())));
    }
}
