//! The built-in target's HTTP/2 and HTTP/3 responses, rendered once per
//! thread at start: the HTTP/1 target's routes as header blocks (status,
//! length, type), their bodies, the `100` of `/continue` and the trailer of
//! `/chunked`, and the answers to a malformed request and to a header list
//! over the limit. Answering a stream then formats and allocates nothing.
//!
//! Both protocols take the same facts from here (which status and fields
//! a route answers with, which body); only the header block coding
//! differs (HPACK for HTTP/2, QPACK for HTTP/3), so the table is rendered
//! with the caller's block encoder.

use super::responses::{BIG_BODY, Route};

/// A header block encoder: `wire::h2::encode_block` (HPACK) or
/// `wire::h3::encode_block` (QPACK); both take the fields in order, names
/// lower-case.
pub(super) type BlockEncoder = fn(&[(&[u8], &[u8])]) -> Vec<u8>;

/// The body of `/big`, the same bytes as the HTTP/1 route's.
static BIG: [u8; BIG_BODY] = [b'x'; BIG_BODY];

/// One response, rendered at start.
pub(super) struct Response {
    /// A `100` header block sent first (`/continue`).
    pub(super) info: Option<Box<[u8]>>,
    /// The response's header block.
    pub(super) head: Box<[u8]>,
    pub(super) body: &'static [u8],
    /// A trailer block ending the stream (`/chunked`).
    pub(super) trailers: Option<Box<[u8]>>,
}

/// Index of the response to a malformed request's stream (no `:method`
/// or `:path`); header lists over the limit get the one after it.
pub(super) const BAD_REQUEST: usize = super::responses::ROUTES * 2;
pub(super) const TOO_LARGE: usize = BAD_REQUEST + 1;

/// Every response, indexed by [`index`], its header blocks coded by
/// `encode`.
pub(super) fn render_table(encode: BlockEncoder) -> Vec<Response> {
    let mut table = Vec::with_capacity(TOO_LARGE + 1);
    for index in 0..super::responses::ROUTES {
        let route = Route::from_index(index);
        for head in [false, true] {
            table.push(render(encode, route, head));
        }
    }
    for code in [400u16, 431] {
        table.push(Response {
            info: None,
            head: block(encode, code, Some(0), false),
            body: b"",
            trailers: None,
        });
    }
    table
}

/// The table index of the response to a request for `route` (`head`: the
/// method was HEAD): the one mapping both protocols answer by.
pub(super) fn index(route: Route, head: bool) -> usize {
    route.index() * 2 + usize::from(head)
}

/// A header block of `:status`, `content-length` and `content-type`.
fn block(encode: BlockEncoder, code: u16, length: Option<usize>, typed: bool) -> Box<[u8]> {
    let status = code.to_string();
    let length = length.map(|l| l.to_string());
    let mut fields: Vec<(&[u8], &[u8])> = vec![(b":status", status.as_bytes())];
    if let Some(l) = &length {
        fields.push((b"content-length", l.as_bytes()));
    }
    if typed {
        fields.push((b"content-type", b"text/plain"));
    }
    encode(&fields).into_boxed_slice()
}

/// The HTTP/2 (and HTTP/3) form of a route's response. Neither has
/// chunked or close-delimited bodies nor `Connection`: `/close` and
/// `/http10` are `pong`, and `/chunked` sends `pong` followed by its
/// trailer as a header block.
fn render(encode: BlockEncoder, route: Route, head: bool) -> Response {
    let code = match route {
        Route::Status(code) => code,
        _ => 200,
    };
    let body: &'static [u8] = match route {
        Route::Status(204 | 304) => b"",
        Route::Big => &BIG,
        _ => b"pong",
    };
    let no_body = matches!(route, Route::Status(204 | 304));
    let length = (!no_body && route != Route::Chunked).then_some(body.len());
    Response {
        info: (route == Route::Continue).then(|| block(encode, 100, None, false)),
        head: block(encode, code, length, !no_body),
        body: if head { b"" } else { body },
        trailers: (route == Route::Chunked && !head).then(|| encode(&[(b"x-trailer", b"done")]).into_boxed_slice()),
    }
}
