//! The opening handshake (RFC 6455 section 4): an HTTP/1.1 Upgrade, both
//! ends. The client's request is rendered once per workload up to its
//! `Sec-WebSocket-Key` value, so each connection adds only its own key; the
//! answer is checked whole (status 101, Upgrade, Connection, the accept
//! value, no extension, the subprotocol). The server's half checks a
//! request's upgrade fields and renders the 101.

use super::{ACCEPT_LEN, KEY_LEN, accept_key};
use crate::wire::framer::response_head;
use crate::wire::{MAX_HEAD_BYTES, RequestSpec, render_request};

/// Why a server's answer to the upgrade is not a WebSocket.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HandshakeError {
    /// Not 101 Switching Protocols (the status is counted).
    #[error("the server answered {0}, not 101 Switching Protocols")]
    Status(u16),
    /// Not an HTTP/1.1 head, or one over the head limit.
    #[error("the answer is not a valid HTTP/1.1 head")]
    Malformed,
    /// 101 without `Upgrade: websocket` and `Connection: Upgrade`.
    #[error("the 101 does not upgrade to websocket")]
    NotUpgraded,
    /// `Sec-WebSocket-Accept` missing or not the key's.
    #[error("Sec-WebSocket-Accept does not match the key sent")]
    BadAccept,
    /// A subprotocol offered and not chosen, or one not offered.
    #[error("the server did not choose the subprotocol offered")]
    Subprotocol,
    /// An extension that was not offered.
    #[error("the server chose an extension that was not offered")]
    Extension,
}

/// A client's upgrade request, rendered once per workload up to the key:
/// a connection's request is [`Upgrade::prefix`], its key, then
/// [`Upgrade::SUFFIX`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upgrade {
    prefix: Vec<u8>,
}

impl Upgrade {
    /// What follows the key: the end of its line and of the head.
    pub const SUFFIX: &'static [u8] = b"\r\n\r\n";

    /// The request for `spec` (its method, body and `close` are ignored:
    /// an upgrade is a GET without a body) offering `subprotocol`.
    pub fn new(spec: &RequestSpec, subprotocol: Option<&str>) -> Upgrade {
        let mut spec = RequestSpec {
            method: "GET".into(),
            body: Vec::new(),
            close: false,
            ..spec.clone()
        };
        let ours = [
            "upgrade",
            "connection",
            "sec-websocket-version",
            "sec-websocket-key",
            "sec-websocket-protocol",
        ];
        spec.headers
            .retain(|(n, _)| !ours.iter().any(|o| n.eq_ignore_ascii_case(o)));
        spec.headers.push(("Upgrade".into(), "websocket".into()));
        spec.headers.push(("Connection".into(), "Upgrade".into()));
        spec.headers.push(("Sec-WebSocket-Version".into(), "13".into()));
        if let Some(p) = subprotocol {
            spec.headers.push(("Sec-WebSocket-Protocol".into(), p.into()));
        }
        let mut prefix = render_request(&spec);
        // Drop the blank line: the key's field comes last.
        prefix.truncate(prefix.len() - 2);
        prefix.extend_from_slice(b"Sec-WebSocket-Key: ");
        Upgrade { prefix }
    }

    /// The request's bytes before the key.
    pub fn prefix(&self) -> &[u8] {
        &self.prefix
    }

    /// The whole request with `key` (for tests and one-off use).
    pub fn with_key(&self, key: &[u8; KEY_LEN]) -> Vec<u8> {
        [&self.prefix[..], key, Self::SUFFIX].concat()
    }
}

fn field<'h>(hs: &'h [httparse::Header<'_>], name: &str) -> Option<&'h [u8]> {
    hs.iter().find(|h| h.name.eq_ignore_ascii_case(name)).map(|h| h.value)
}

/// True when `value`, a comma-separated list, has `token` (ASCII case
/// ignored).
fn has_token(value: Option<&[u8]>, token: &str) -> bool {
    value.is_some_and(|v| {
        v.split(|&b| b == b',')
            .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
    })
}

/// Checks the server's answer at the start of `buf` against the key's
/// `accept` value and the `subprotocol` offered: `Ok(Some(n))` when the
/// head (n bytes; frames may follow it) accepts the upgrade, `Ok(None)`
/// when it is incomplete. An offered subprotocol the server does not
/// choose fails the handshake: the workload asked for it.
pub fn check_response(
    buf: &[u8],
    accept: &[u8; ACCEPT_LEN],
    subprotocol: Option<&str>,
) -> Result<Option<usize>, HandshakeError> {
    let checked = response_head(buf, MAX_HEAD_BYTES, |resp, n| {
        let code = resp.code.unwrap_or(0);
        if code != 101 {
            return Err(HandshakeError::Status(code));
        }
        let hs = &*resp.headers;
        if !has_token(field(hs, "upgrade"), "websocket") || !has_token(field(hs, "connection"), "upgrade") {
            return Err(HandshakeError::NotUpgraded);
        }
        if field(hs, "sec-websocket-accept").map(|v| v.trim_ascii()) != Some(&accept[..]) {
            return Err(HandshakeError::BadAccept);
        }
        if field(hs, "sec-websocket-extensions").is_some_and(|v| !v.trim_ascii().is_empty()) {
            return Err(HandshakeError::Extension);
        }
        let chosen = field(hs, "sec-websocket-protocol").map(|v| v.trim_ascii());
        if chosen != subprotocol.map(str::as_bytes) {
            return Err(HandshakeError::Subprotocol);
        }
        Ok(n)
    });
    match checked {
        Ok(Some(Ok(n))) => Ok(Some(n)),
        Ok(Some(Err(e))) => Err(e),
        Ok(None) => Ok(None),
        Err(_) => Err(HandshakeError::Malformed),
    }
}

/// Why a server refuses an upgrade request (answer 400, or 426 with
/// `Sec-WebSocket-Version: 13` for [`UpgradeRefused::Version`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UpgradeRefused {
    /// Not a GET with `Upgrade: websocket` and `Connection: Upgrade`.
    #[error("not a WebSocket upgrade")]
    NotUpgrade,
    /// `Sec-WebSocket-Version` is not 13.
    #[error("Sec-WebSocket-Version is not 13")]
    Version,
    /// `Sec-WebSocket-Key` missing or not 16 bytes in base64.
    #[error("Sec-WebSocket-Key is missing or malformed")]
    Key,
}

/// Checks a client's upgrade request (its method and header fields); the
/// `Sec-WebSocket-Accept` value to answer with.
pub fn accept_request(method: &str, hs: &[httparse::Header<'_>]) -> Result<[u8; ACCEPT_LEN], UpgradeRefused> {
    if method != "GET"
        || !has_token(field(hs, "upgrade"), "websocket")
        || !has_token(field(hs, "connection"), "upgrade")
    {
        return Err(UpgradeRefused::NotUpgrade);
    }
    if field(hs, "sec-websocket-version").map(|v| v.trim_ascii()) != Some(b"13") {
        return Err(UpgradeRefused::Version);
    }
    let key = field(hs, "sec-websocket-key")
        .map(|v| v.trim_ascii())
        .ok_or(UpgradeRefused::Key)?;
    use base64::Engine as _;
    match base64::engine::general_purpose::STANDARD.decode(key) {
        Ok(raw) if raw.len() == 16 => Ok(accept_key(key)),
        _ => Err(UpgradeRefused::Key),
    }
}

/// Appends the 101 answer with `accept` (and the chosen `subprotocol`).
pub fn render_accept(out: &mut Vec<u8>, accept: &[u8; ACCEPT_LEN], subprotocol: Option<&str>) {
    out.extend_from_slice(
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ",
    );
    out.extend_from_slice(accept);
    out.extend_from_slice(b"\r\n");
    if let Some(p) = subprotocol {
        out.extend_from_slice(b"Sec-WebSocket-Protocol: ");
        out.extend_from_slice(p.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}
