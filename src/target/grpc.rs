//! `soakd target --grpc`: the built-in target's gRPC service, on its
//! HTTP/2 server, for soaking soakd's gRPC client (and demos) without a
//! gRPC server at hand.
//!
//! It serves `soakd.test.v1.Echo/Unary` of `tests/proto/echo.proto`: the
//! reply is the request echoed, `EchoReply { echo = 1: the request, seq =
//! 2: the call's number }`, framed by hand (a length-delimited field and a
//! varint), so the target needs no schema and decodes nothing. Every other
//! method answers UNIMPLEMENTED. The header blocks (the response head, the
//! OK trailers, a trailers-only answer per code) are rendered once per
//! thread; a call costs the copy of its message into its reply.
//!
//! Faults a soak of a gRPC client needs, on top of the target's `--delay`
//! and `--slowdown` (which delay every call):
//! * `--grpc-status CODE[@N]`: every N-th call (per thread) ends with CODE
//!   as a trailers-only response (HEADERS with END_STREAM carrying
//!   `grpc-status` and `grpc-message`), the form servers use for errors;
//! * `--max-connection-age DUR`: each connection is aged out as gRPC
//!   servers do (`max_connection_age`): after DUR a GOAWAY naming the last
//!   stream it will answer, then, after `--max-connection-age-grace`, the
//!   close, whatever is still open.

use std::time::Duration;

use crate::wire::grpc::Code;
use crate::wire::h2::encode_block;

/// The one method served.
const UNARY: &str = "/soakd.test.v1.Echo/Unary";
/// Longest request message kept to echo (gRPC's default receive limit);
/// a longer one is RESOURCE_EXHAUSTED.
pub(super) const MAX_MESSAGE: usize = 4 * 1024 * 1024;

/// The gRPC service's settings (`soakd target --grpc …`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GrpcService {
    /// `--grpc-status CODE@N`: every N-th call ends with CODE.
    pub status: Option<(Code, u32)>,
    /// `--max-connection-age`: a connection's life before its GOAWAY.
    pub max_age: Option<Duration>,
    /// `--max-connection-age-grace`: from the GOAWAY to the close.
    pub grace: Duration,
}

/// Parses `--grpc-status CODE[@N]`: a code label (`unavailable`) or
/// number, every N-th call (1 when left out).
pub fn parse_status(s: &str) -> Result<(Code, u32), String> {
    let (code, every) = match s.split_once('@') {
        Some((c, n)) => (
            c,
            n.parse::<u32>()
                .ok()
                .filter(|&n| n >= 1)
                .ok_or_else(|| format!("{n:?} is not a count of calls; give CODE@N with N ≥ 1, e.g. unavailable@4"))?,
        ),
        None => (s, 1),
    };
    let code = Code::from_label(&code.to_ascii_lowercase())
        .or_else(|| {
            code.parse::<u32>()
                .ok()
                .and_then(|n| Code::ALL.into_iter().find(|c| c.number() == n))
        })
        .ok_or_else(|| {
            let all: Vec<&str> = Code::ALL.iter().map(|c| c.label()).collect();
            format!(
                "{code:?} is not a gRPC status code; give one of {} (or its number)",
                all.join(", ")
            )
        })?;
    if code == Code::Ok {
        return Err("ok is what every call answers without the fault; give an error code, e.g. unavailable@4".into());
    }
    Ok((code, every))
}

/// How a call is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Answer {
    /// Its reply message, then OK.
    Echo,
    /// A trailers-only response with this code.
    Status(Code),
}

/// Per-thread state of the service: its header blocks and counts.
pub(super) struct GrpcServing {
    pub(super) service: GrpcService,
    /// `:status 200`, `content-type: application/grpc`.
    pub(super) head: Box<[u8]>,
    /// `grpc-status: 0`, ending a call with a reply.
    pub(super) ok_trailers: Box<[u8]>,
    /// A trailers-only response per code, by code number.
    only: Vec<Box<[u8]>>,
    /// Calls since `--grpc-status` last hit.
    since: u32,
    /// Calls answered by this thread (the replies' `seq`).
    calls: u64,
}

impl GrpcServing {
    pub(super) fn new(service: GrpcService) -> GrpcServing {
        let ct = crate::wire::grpc::CONTENT_TYPE.as_bytes();
        let only = Code::ALL
            .iter()
            .map(|c| {
                let n = c.number().to_string();
                let message = format!("soakd target: {}", c.label());
                encode_block(&[
                    (b":status", b"200"),
                    (b"content-type", ct),
                    (b"grpc-status", n.as_bytes()),
                    (b"grpc-message", message.as_bytes()),
                ])
                .into_boxed_slice()
            })
            .collect();
        GrpcServing {
            service,
            head: encode_block(&[(b":status", b"200"), (b"content-type", ct)]).into_boxed_slice(),
            ok_trailers: encode_block(&[(b"grpc-status", b"0")]).into_boxed_slice(),
            only,
            since: 0,
            calls: 0,
        }
    }

    /// The trailers-only block of `code`.
    pub(super) fn trailers_only(&self, code: Code) -> &[u8] {
        &self.only[code.number() as usize]
    }

    /// How the call to `path` whose request body is `body` is answered.
    pub(super) fn answer(&mut self, path_is_unary: bool, body: &[u8]) -> Answer {
        if !path_is_unary {
            return Answer::Status(Code::Unimplemented);
        }
        if body.len() > MAX_MESSAGE {
            return Answer::Status(Code::ResourceExhausted);
        }
        if let Some((code, every)) = self.service.status {
            self.since += 1;
            if self.since >= every {
                self.since = 0;
                return Answer::Status(code);
            }
        }
        match request_message(body) {
            Some(_) => Answer::Echo,
            None => Answer::Status(Code::Internal),
        }
    }

    /// The framed reply to a request whose framed body is `body` (see the
    /// module doc), appended to `out`.
    pub(super) fn reply(&mut self, body: &[u8], out: &mut Vec<u8>) {
        let msg = request_message(body).unwrap_or(&[]);
        self.calls += 1;
        let mut inner = Vec::with_capacity(msg.len() + 16);
        inner.push(0x0a);
        varint(&mut inner, msg.len() as u64);
        inner.extend_from_slice(msg);
        inner.push(0x10);
        varint(&mut inner, self.calls);
        out.push(0);
        out.extend_from_slice(&(inner.len() as u32).to_be_bytes());
        out.extend_from_slice(&inner);
    }
}

/// True for the one method served.
pub(super) fn is_unary(path: &[u8]) -> bool {
    path == UNARY.as_bytes()
}

/// The message of a unary request's framed body (one uncompressed
/// message, or none: the empty message); `None` when it is not that.
fn request_message(body: &[u8]) -> Option<&[u8]> {
    if body.is_empty() {
        return Some(&[]);
    }
    let (prefix, rest) = body.split_first_chunk::<5>()?;
    let len = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
    (prefix[0] == 0 && len == rest.len()).then_some(rest)
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_faults_parse_and_a_bad_one_is_named() {
        assert_eq!(parse_status("unavailable@4"), Ok((Code::Unavailable, 4)));
        assert_eq!(parse_status("NOT_FOUND"), Ok((Code::NotFound, 1)));
        assert_eq!(parse_status("14@2"), Ok((Code::Unavailable, 2)));
        assert!(parse_status("gone@2").unwrap_err().contains("not a gRPC status code"));
        assert!(parse_status("internal@0").unwrap_err().contains("N ≥ 1"));
        assert!(parse_status("ok").unwrap_err().contains("give an error code"));
    }

    #[test]
    fn the_reply_echoes_the_request_with_its_seq() {
        let mut g = GrpcServing::new(GrpcService {
            status: Some((Code::Unavailable, 3)),
            max_age: None,
            grace: Duration::ZERO,
        });
        // EchoRequest { text = "hi" }, framed.
        let body = [0, 0, 0, 0, 4, 0x0a, 2, b'h', b'i'];
        let answers: Vec<Answer> = (0..3).map(|_| g.answer(true, &body)).collect();
        assert_eq!(answers, [Answer::Echo, Answer::Echo, Answer::Status(Code::Unavailable)]);
        let mut out = Vec::new();
        g.reply(&body, &mut out);
        // EchoReply { echo = { text = "hi" }, seq = 1 }.
        assert_eq!(out, [0, 0, 0, 0, 8, 0x0a, 4, 0x0a, 2, b'h', b'i', 0x10, 1]);
        assert_eq!(g.answer(false, &body), Answer::Status(Code::Unimplemented));
        assert_eq!(g.answer(true, &[1, 0, 0, 0, 0]), Answer::Status(Code::Internal));
    }
}
