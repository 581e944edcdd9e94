//! `soakd target --grpc`: the built-in target's gRPC service, on its
//! HTTP/2 server, for soaking soakd's gRPC client (and demos) without a
//! gRPC server at hand.
//!
//! It serves `soakd.test.v1.Echo` of `tests/proto/echo.proto`, whose
//! replies are `EchoReply { echo = 1: a request, seq = 2: a number }`,
//! written field by field with prost's encoding primitives (a
//! length-delimited field and a varint) and framed by `wire::grpc`'s
//! message prefix, as the client's are, so the target needs no schema and
//! decodes no message it echoes:
//! * `Unary`: the request echoed, `seq` the thread's call count;
//! * `Subscribe` (server streaming): `SubscribeRequest { count,
//!   interval_ms, template }` (three fields read by hand) asks for `count`
//!   replies (0: until the client ends the call) echoing `template`, one
//!   every `interval_ms`, on the thread's interval timers (`ticks.rs`);
//! * `Chat` (bidirectional): each request message echoed as it arrives,
//!   OK when the client ends its side.
//!
//! Every other method answers UNIMPLEMENTED. The header blocks (the response head, the
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

use prost::encoding::{DecodeContext, WireType, decode_key, decode_varint, encode_key, encode_varint, key_len};
use prost::encoding::{encoded_len_varint, skip_field};

use crate::wire::grpc::{Code, PREFIX_LEN, parse_prefix, prefix};
use crate::wire::h2::encode_block;

/// The methods served, by `StreamState::grpc` code (0: not a call).
pub(super) const UNARY: u8 = 1;
pub(super) const OTHER: u8 = 2;
pub(super) const SUBSCRIBE: u8 = 3;
pub(super) const CHAT: u8 = 4;
/// Push intervals `Subscribe` accepts, ms.
const PUSH_MS: std::ops::RangeInclusive<u32> = 1..=3_600_000;
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
    /// A server stream: this many replies (0: without end), one every
    /// this long.
    Subscribe(u32, Duration),
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

    /// How a call of `method` whose request body is `body` is answered.
    pub(super) fn answer(&mut self, method: u8, body: &[u8]) -> Answer {
        if method != UNARY && method != SUBSCRIBE {
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
        match (method, request_message(body)) {
            (_, None) => Answer::Status(Code::Internal),
            (SUBSCRIBE, Some(m)) => match subscribe_of(m) {
                Some((count, ms, _)) if PUSH_MS.contains(&ms) => {
                    Answer::Subscribe(count, Duration::from_millis(u64::from(ms)))
                }
                _ => Answer::Status(Code::InvalidArgument),
            },
            (_, Some(_)) => Answer::Echo,
        }
    }

    /// The next reply number of the thread.
    pub(super) fn next_seq(&mut self) -> u64 {
        self.calls += 1;
        self.calls
    }

    /// The framed reply to a unary request whose framed body is `body`
    /// (see the module doc), appended to `out`.
    pub(super) fn reply(&mut self, body: &[u8], out: &mut Vec<u8>) {
        let seq = self.next_seq();
        frame_reply(request_message(body).unwrap_or(&[]), seq, out);
    }
}

/// `EchoReply { echo = msg, seq }`, framed, appended to `out`.
pub(super) fn frame_reply(msg: &[u8], seq: u64, out: &mut Vec<u8>) {
    let len = msg.len() as u64;
    let inner = key_len(1) + encoded_len_varint(len) + msg.len() + key_len(2) + encoded_len_varint(seq);
    out.extend_from_slice(&prefix(false, inner as u32));
    encode_key(1, WireType::LengthDelimited, out);
    encode_varint(len, out);
    out.extend_from_slice(msg);
    encode_key(2, WireType::Varint, out);
    encode_varint(seq, out);
}

/// The method of a call to `path` (see [`UNARY`] and the others).
pub(super) fn method_of(path: &[u8]) -> u8 {
    match path.strip_prefix(b"/soakd.test.v1.Echo/") {
        Some(b"Unary") => UNARY,
        Some(b"Subscribe") => SUBSCRIBE,
        Some(b"Chat") => CHAT,
        _ => OTHER,
    }
}

/// The first whole message framed in `buf`: its bytes' range, the frame
/// ending at its end; `Err` for a compressed one (nothing offered it).
pub(super) fn next_message(buf: &[u8]) -> Option<Result<std::ops::Range<usize>, ()>> {
    let (head, rest) = buf.split_first_chunk::<PREFIX_LEN>()?;
    match parse_prefix(head) {
        Ok(h) if !h.compressed => {
            let end = PREFIX_LEN + h.len as usize;
            (rest.len() >= h.len as usize).then_some(Ok(PREFIX_LEN..end))
        }
        _ => Some(Err(())),
    }
}

/// `SubscribeRequest { count = 1, interval_ms = 2, template = 3 }`, its
/// three fields read with prost's primitives (others skipped); `None`
/// when it is not one.
pub(super) fn subscribe_of(mut m: &[u8]) -> Option<(u32, u32, &[u8])> {
    let (mut count, mut ms, mut template) = (0u32, 0u32, &[][..]);
    while !m.is_empty() {
        match decode_key(&mut m).ok()? {
            (1, WireType::Varint) => count = decode_varint(&mut m).ok()? as u32,
            (2, WireType::Varint) => ms = decode_varint(&mut m).ok()? as u32,
            (3, WireType::LengthDelimited) => {
                let len = decode_varint(&mut m).ok()? as usize;
                template = m.get(..len)?;
                m = &m[len..];
            }
            (tag, wire) => skip_field(wire, tag, &mut m, DecodeContext::default()).ok()?,
        }
    }
    Some((count, ms, template))
}

/// The message of a unary request's framed body (one uncompressed
/// message, or none: the empty message); `None` when it is not that.
pub(super) fn request_message(body: &[u8]) -> Option<&[u8]> {
    if body.is_empty() {
        return Some(&[]);
    }
    let (head, rest) = body.split_first_chunk::<PREFIX_LEN>()?;
    let h = parse_prefix(head).ok()?;
    (!h.compressed && h.len as usize == rest.len()).then_some(rest)
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
        let answers: Vec<Answer> = (0..3).map(|_| g.answer(UNARY, &body)).collect();
        assert_eq!(answers, [Answer::Echo, Answer::Echo, Answer::Status(Code::Unavailable)]);
        let mut out = Vec::new();
        g.reply(&body, &mut out);
        // EchoReply { echo = { text = "hi" }, seq = 1 }.
        assert_eq!(out, [0, 0, 0, 0, 8, 0x0a, 4, 0x0a, 2, b'h', b'i', 0x10, 1]);
        // Two-byte varints: a 200-byte message, seq 300.
        let mut out = Vec::new();
        frame_reply(&[7; 200], 300, &mut out);
        assert_eq!(out[..8], [0, 0, 0, 0, 206, 0x0a, 0xc8, 0x01]);
        assert_eq!(out.len(), 5 + 206);
        assert_eq!(out[out.len() - 3..], [0x10, 0xac, 0x02]);
        assert_eq!(g.answer(OTHER, &body), Answer::Status(Code::Unimplemented));
        assert_eq!(g.answer(UNARY, &[1, 0, 0, 0, 0]), Answer::Status(Code::Internal));
        assert_eq!(method_of(b"/soakd.test.v1.Echo/Chat"), CHAT);
        assert_eq!(method_of(b"/other.Svc/Unary"), OTHER);
    }

    #[test]
    fn subscribe_requests_and_stream_messages_are_read_by_hand() {
        // SubscribeRequest { count = 3, interval_ms = 100, template = { text = "t" } }.
        let m = [0x08, 3, 0x10, 100, 0x1a, 3, 0x0a, 1, b't'];
        assert_eq!(subscribe_of(&m), Some((3, 100, &[0x0a, 1, b't'][..])));
        assert_eq!(subscribe_of(&[0x08]), None, "a cut varint");
        let mut g = GrpcServing::new(GrpcService {
            status: None,
            max_age: None,
            grace: Duration::ZERO,
        });
        let framed = |m: &[u8]| [&[0, 0, 0, 0, m.len() as u8][..], m].concat();
        assert_eq!(
            g.answer(SUBSCRIBE, &framed(&m)),
            Answer::Subscribe(3, Duration::from_millis(100))
        );
        assert_eq!(
            g.answer(SUBSCRIBE, &framed(&[0x08, 1])),
            Answer::Status(Code::InvalidArgument),
            "no interval"
        );
        let two = [framed(b"ab"), framed(b"c")].concat();
        assert_eq!(next_message(&two), Some(Ok(5..7)));
        assert_eq!(next_message(&two[7..]), Some(Ok(5..6)));
        assert_eq!(next_message(&two[..6]), None, "not whole yet");
        assert_eq!(next_message(&[1, 0, 0, 0, 0]), Some(Err(())));
    }
}
