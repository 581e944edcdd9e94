//! The built-in target's HTTP/2 responses, rendered once per thread at
//! start: the HTTP/1 target's routes as header blocks (status, length,
//! type), their bodies, the `100` of `/continue` and the trailer of
//! `/chunked`, and the answers to a malformed request and to a header list
//! over the limit. Answering a stream then formats and allocates nothing.

use super::responses::{BIG_BODY, Route};
use crate::wire::h2::encode_block;

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

/// Every response, indexed by route index × 2 + HEAD.
pub(super) fn render_table() -> Vec<Response> {
    let mut table = Vec::with_capacity(TOO_LARGE + 1);
    for index in 0..super::responses::ROUTES {
        let route = Route::from_index(index);
        for head in [false, true] {
            table.push(render(route, head));
        }
    }
    for code in [400u16, 431] {
        table.push(Response {
            info: None,
            head: block(code, Some(0), false),
            body: b"",
            trailers: None,
        });
    }
    table
}

/// A header block of `:status`, `content-length` and `content-type`.
fn block(code: u16, length: Option<usize>, typed: bool) -> Box<[u8]> {
    let status = code.to_string();
    let length = length.map(|l| l.to_string());
    let mut fields: Vec<(&[u8], &[u8])> = vec![(b":status", status.as_bytes())];
    if let Some(l) = &length {
        fields.push((b"content-length", l.as_bytes()));
    }
    if typed {
        fields.push((b"content-type", b"text/plain"));
    }
    encode_block(&fields).into_boxed_slice()
}

/// The HTTP/2 form of a route's response. HTTP/2 has no chunked or
/// close-delimited bodies and no `Connection`: `/close` and `/http10` are
/// `pong`, and `/chunked` sends `pong` in two DATA frames' worth followed by
/// its trailer as a header block.
fn render(route: Route, head: bool) -> Response {
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
        info: (route == Route::Continue).then(|| block(100, None, false)),
        head: block(code, length, !no_body),
        body: if head { b"" } else { body },
        trailers: (route == Route::Chunked && !head)
            .then(|| encode_block(&[(b"x-trailer", b"done")]).into_boxed_slice()),
    }
}
