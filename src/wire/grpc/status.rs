//! gRPC's status: the 17 codes (statuscodes.md, the `Code` enum of
//! `google.rpc`), and how a response's header blocks end a call with one.
//!
//! A response is `:status 200` headers, messages, then trailers carrying
//! `grpc-status` (and maybe a percent-encoded `grpc-message`) — or a
//! *trailers-only* response, one header block that carries `grpc-status`
//! at once (an immediate error, or a server with nothing to send). A
//! proxy in the way may answer in plain HTTP (a 503 with no
//! `grpc-status`); PROTOCOL-HTTP2.md asks the client to make a status up
//! from the HTTP one then (http-grpc-status-mapping.md), and never to
//! prefer it to a `grpc-status` that is there.
//!
//! [`BlockFields`] reads one header block field by field, as the HPACK
//! decoder hands them over, keeping a few bytes and copying nothing
//! (`grpc-message` only into a buffer the caller offers);
//! [`ResponseHeads::on_block`] then says what the block was — headers to
//! be followed by messages, or the call's end with its [`CallStatus`] and
//! where the status came from.

use std::borrow::Cow;

use super::meta::is_grpc_content_type;
use crate::wire::h2::ErrorCode;

/// Declares the code table: the enum with its spec names (via
/// `name_table!`), and each code's number and metric label beside its
/// name, written once.
macro_rules! codes {
    ($( $(#[$m:meta])* $variant:ident = $name:literal, $label:literal; )+) => {
        name_table! {
            /// A gRPC status code by its name in the spec; the value is its
            /// number on the wire (0 ..= 16).
            pub enum Code {
                $( $(#[$m])* $variant = $name, )+
            }
        }

        impl Code {
            /// The code's metric label and report key: its name in
            /// snake_case (`deadline_exceeded`).
            pub fn label(self) -> &'static str {
                match self {
                    $( Code::$variant => $label, )+
                }
            }
        }
    };
}

codes! {
    /// 0: not an error.
    Ok = "OK", "ok";
    /// 1: the call was cancelled (usually by the caller).
    Cancelled = "CANCELLED", "cancelled";
    /// 2: an error with no better code; also any number the spec does not
    /// define.
    Unknown = "UNKNOWN", "unknown";
    /// 3.
    InvalidArgument = "INVALID_ARGUMENT", "invalid_argument";
    /// 4: the deadline expired before the call completed.
    DeadlineExceeded = "DEADLINE_EXCEEDED", "deadline_exceeded";
    /// 5.
    NotFound = "NOT_FOUND", "not_found";
    /// 6.
    AlreadyExists = "ALREADY_EXISTS", "already_exists";
    /// 7.
    PermissionDenied = "PERMISSION_DENIED", "permission_denied";
    /// 8: a quota, a limit or memory ran out.
    ResourceExhausted = "RESOURCE_EXHAUSTED", "resource_exhausted";
    /// 9.
    FailedPrecondition = "FAILED_PRECONDITION", "failed_precondition";
    /// 10.
    Aborted = "ABORTED", "aborted";
    /// 11.
    OutOfRange = "OUT_OF_RANGE", "out_of_range";
    /// 12: the method is not implemented (or not served here).
    Unimplemented = "UNIMPLEMENTED", "unimplemented";
    /// 13.
    Internal = "INTERNAL", "internal";
    /// 14: the service is unavailable for now; retrying may help.
    Unavailable = "UNAVAILABLE", "unavailable";
    /// 15.
    DataLoss = "DATA_LOSS", "data_loss";
    /// 16.
    Unauthenticated = "UNAUTHENTICATED", "unauthenticated";
}

impl Code {
    /// The code of a number from the wire; a number the spec does not
    /// define is UNKNOWN (as every gRPC library reads it).
    pub fn from_u32(n: u32) -> Code {
        Code::ALL.get(n as usize).copied().unwrap_or(Code::Unknown)
    }

    /// The code's number.
    pub fn number(self) -> u32 {
        self as u32
    }

    /// The code with that metric label, if any.
    pub fn from_label(label: &str) -> Option<Code> {
        Code::ALL.into_iter().find(|c| c.label() == label)
    }

    /// The code a client reports for a response without `grpc-status`
    /// whose HTTP status is `http` (http-grpc-status-mapping.md).
    pub fn from_http(http: u16) -> Code {
        match http {
            400 | 431 => Code::Internal,
            401 => Code::Unauthenticated,
            403 => Code::PermissionDenied,
            404 => Code::Unimplemented,
            429 | 502 | 503 | 504 => Code::Unavailable,
            _ => Code::Unknown,
        }
    }

    /// The code of a stream the server reset with `code` (PROTOCOL-HTTP2.md,
    /// "Errors"): REFUSED_STREAM is UNAVAILABLE (nothing was processed),
    /// CANCEL is CANCELLED, ENHANCE_YOUR_CALM is RESOURCE_EXHAUSTED,
    /// INADEQUATE_SECURITY is PERMISSION_DENIED, anything else INTERNAL.
    pub fn from_reset(code: ErrorCode) -> Code {
        match code {
            ErrorCode::RefusedStream => Code::Unavailable,
            ErrorCode::Cancel => Code::Cancelled,
            ErrorCode::EnhanceYourCalm => Code::ResourceExhausted,
            ErrorCode::InadequateSecurity => Code::PermissionDenied,
            _ => Code::Internal,
        }
    }
}

/// A `grpc-status` value as read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusValue {
    /// A decimal number: its code.
    Code(Code),
    /// Not a decimal number.
    Malformed,
}

/// Reads a `grpc-status` value: ASCII digits (a number the spec does not
/// define is UNKNOWN).
pub fn parse_status(value: &[u8]) -> StatusValue {
    if value.is_empty() || value.len() > 10 || !value.iter().all(u8::is_ascii_digit) {
        return StatusValue::Malformed;
    }
    let n = value.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
    StatusValue::Code(u32::try_from(n).map_or(Code::Unknown, Code::from_u32))
}

/// The `content-type` of a block, as far as gRPC cares.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ContentTypeSeen {
    /// No `content-type` field.
    #[default]
    Absent,
    /// `application/grpc` or one of its `+` subtypes.
    Grpc,
    /// Something else (an HTML error page from a proxy).
    Other,
}

/// The most bytes of a `grpc-message` [`BlockFields::field_keeping_message`]
/// keeps (a message is for people; a megabyte of it is not kept).
pub const MAX_MESSAGE_KEPT: usize = 1024;

/// What one header block of a response said that gRPC reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockFields {
    /// `:status`, when present and a number.
    pub http_status: Option<u16>,
    /// `grpc-status`, when present.
    pub grpc_status: Option<StatusValue>,
    /// `content-type`.
    pub content_type: ContentTypeSeen,
    /// A `grpc-message` was present.
    pub has_message: bool,
}

impl BlockFields {
    /// Reads one field (names are lower case in HTTP/2).
    pub fn field(&mut self, name: &[u8], value: &[u8]) {
        match name {
            b":status" => {
                self.http_status = std::str::from_utf8(value).ok().and_then(|s| s.parse().ok());
            }
            b"grpc-status" => self.grpc_status = Some(parse_status(value)),
            b"grpc-message" => self.has_message = true,
            b"content-type" => {
                self.content_type = if is_grpc_content_type(value) {
                    ContentTypeSeen::Grpc
                } else {
                    ContentTypeSeen::Other
                };
            }
            _ => {}
        }
    }

    /// Reads one field, and keeps a `grpc-message`'s raw (percent-encoded)
    /// bytes in `message`, at most [`MAX_MESSAGE_KEPT`] of them (see
    /// [`decode_message`]).
    pub fn field_keeping_message(&mut self, name: &[u8], value: &[u8], message: &mut Vec<u8>) {
        self.field(name, value);
        if name == b"grpc-message" {
            message.clear();
            message.extend_from_slice(&value[..value.len().min(MAX_MESSAGE_KEPT)]);
        }
    }
}

/// Where a call's status came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusSource {
    /// The trailers after the response's messages.
    Trailers,
    /// A trailers-only response: one header block ending the call.
    TrailersOnly,
    /// No `grpc-status`; made up from this non-200 HTTP status.
    Http(u16),
    /// No `grpc-status`; the response was not gRPC (`content-type`).
    NotGrpc,
    /// The response ended without a `grpc-status` (UNKNOWN).
    Missing,
    /// `grpc-status` was not a number (UNKNOWN).
    Malformed,
}

/// How a call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallStatus {
    /// The code.
    pub code: Code,
    /// Where it came from.
    pub source: StatusSource,
}

/// What a header block of a response was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Block {
    /// An informational (1xx) head: skipped, the real one follows.
    Informational,
    /// The response's headers: messages follow.
    Headers,
    /// The call ended with this status (trailers, trailers-only, or a
    /// status made up from a response that was not gRPC).
    End(CallStatus),
}

/// A header block out of place: a stream error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    /// The first block had no (numeric) `:status`.
    #[error("response headers without a valid :status")]
    NoHttpStatus,
    /// A second header block that does not end the stream (trailers
    /// must).
    #[error("a header block after the response headers that does not end the stream")]
    TrailersNotLast,
    /// A header block after the call ended.
    #[error("a header block after the trailers")]
    AfterEnd,
}

/// Which header block of a response comes next; two bits a stream keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ResponseHeads {
    /// Nothing yet: the response headers (or trailers-only) come next.
    #[default]
    Awaiting,
    /// Headers seen: messages, then the trailers.
    Messages,
    /// The status is known.
    Ended,
}

impl ResponseHeads {
    /// Takes one whole header block (`end_stream`: its HEADERS frame
    /// carried END_STREAM) and says what it was.
    pub fn on_block(&mut self, fields: &BlockFields, end_stream: bool) -> Result<Block, HeadError> {
        match *self {
            ResponseHeads::Ended => Err(HeadError::AfterEnd),
            ResponseHeads::Messages => {
                if !end_stream {
                    return Err(HeadError::TrailersNotLast);
                }
                *self = ResponseHeads::Ended;
                Ok(Block::End(status_of(fields.grpc_status, StatusSource::Trailers)))
            }
            ResponseHeads::Awaiting => {
                let http = fields.http_status.ok_or(HeadError::NoHttpStatus)?;
                if (100..200).contains(&http) {
                    return Ok(Block::Informational);
                }
                // A grpc-status that is there is used, whatever else the
                // block says (http-grpc-status-mapping.md).
                let end = if fields.grpc_status.is_some() {
                    Some(status_of(fields.grpc_status, StatusSource::TrailersOnly))
                } else if http != 200 {
                    Some(CallStatus {
                        code: Code::from_http(http),
                        source: StatusSource::Http(http),
                    })
                } else if fields.content_type != ContentTypeSeen::Grpc {
                    Some(CallStatus {
                        code: Code::Unknown,
                        source: StatusSource::NotGrpc,
                    })
                } else if end_stream {
                    Some(status_of(None, StatusSource::TrailersOnly))
                } else {
                    None
                };
                Ok(match end {
                    Some(s) => {
                        *self = ResponseHeads::Ended;
                        Block::End(s)
                    }
                    None => {
                        *self = ResponseHeads::Messages;
                        Block::Headers
                    }
                })
            }
        }
    }

    /// The stream ended (END_STREAM on DATA) with no trailers: the status
    /// is missing, UNKNOWN. `None` if the call had already ended.
    pub fn on_end_without_trailers(&mut self) -> Option<CallStatus> {
        if *self == ResponseHeads::Ended {
            return None;
        }
        *self = ResponseHeads::Ended;
        Some(status_of(None, StatusSource::Missing))
    }
}

fn status_of(value: Option<StatusValue>, source: StatusSource) -> CallStatus {
    match value {
        Some(StatusValue::Code(code)) => CallStatus { code, source },
        Some(StatusValue::Malformed) => CallStatus {
            code: Code::Unknown,
            source: StatusSource::Malformed,
        },
        None => CallStatus {
            code: Code::Unknown,
            source: StatusSource::Missing,
        },
    }
}

/// The text of a `grpc-message` value: UTF-8, percent-decoded. As the spec
/// asks, a broken `%` sequence is left as it is and bytes that are not
/// UTF-8 become U+FFFD: decoding never fails.
pub fn decode_message(raw: &[u8]) -> Cow<'_, str> {
    if !raw.contains(&b'%') {
        return String::from_utf8_lossy(raw);
    }
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let b = raw[i];
        if b == b'%'
            && let (Some(h), Some(l)) = (raw.get(i + 1).and_then(hex), raw.get(i + 2).and_then(hex))
        {
            out.push(h << 4 | l);
            i += 3;
            continue;
        }
        out.push(b);
        i += 1;
    }
    Cow::Owned(String::from_utf8_lossy(&out).into_owned())
}

fn hex(b: &u8) -> Option<u8> {
    (*b as char).to_digit(16).map(|d| d as u8)
}

/// `text` as a `grpc-message` value: every byte outside space ..= `~`,
/// and `%`, percent-encoded.
pub fn encode_message(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for &b in text.as_bytes() {
        if (0x20..=0x7e).contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(fields: &[(&str, &str)]) -> BlockFields {
        let mut f = BlockFields::default();
        for (n, v) in fields {
            f.field(n.as_bytes(), v.as_bytes());
        }
        f
    }

    #[test]
    fn the_table_has_the_spec_numbers_names_and_labels() {
        assert_eq!(Code::COUNT, 17);
        let want = [
            (0, "OK", "ok"),
            (1, "CANCELLED", "cancelled"),
            (2, "UNKNOWN", "unknown"),
            (3, "INVALID_ARGUMENT", "invalid_argument"),
            (4, "DEADLINE_EXCEEDED", "deadline_exceeded"),
            (5, "NOT_FOUND", "not_found"),
            (6, "ALREADY_EXISTS", "already_exists"),
            (7, "PERMISSION_DENIED", "permission_denied"),
            (8, "RESOURCE_EXHAUSTED", "resource_exhausted"),
            (9, "FAILED_PRECONDITION", "failed_precondition"),
            (10, "ABORTED", "aborted"),
            (11, "OUT_OF_RANGE", "out_of_range"),
            (12, "UNIMPLEMENTED", "unimplemented"),
            (13, "INTERNAL", "internal"),
            (14, "UNAVAILABLE", "unavailable"),
            (15, "DATA_LOSS", "data_loss"),
            (16, "UNAUTHENTICATED", "unauthenticated"),
        ];
        for (n, name, label) in want {
            let c = Code::from_u32(n);
            assert_eq!((c.number(), c.name(), c.label()), (n, name, label));
            assert_eq!(Code::from_name(name), Some(c));
            assert_eq!(Code::from_label(label), Some(c));
            // The label is the name in lower case, for every code.
            assert_eq!(c.label(), c.name().to_ascii_lowercase());
        }
        assert_eq!(Code::from_u32(17), Code::Unknown);
        assert_eq!(Code::from_u32(u32::MAX), Code::Unknown);
    }

    #[test]
    fn status_values_parse() {
        let cases: &[(&str, StatusValue)] = &[
            ("0", StatusValue::Code(Code::Ok)),
            ("4", StatusValue::Code(Code::DeadlineExceeded)),
            ("16", StatusValue::Code(Code::Unauthenticated)),
            ("17", StatusValue::Code(Code::Unknown)),
            ("99999999999", StatusValue::Malformed),
            ("4294967296", StatusValue::Code(Code::Unknown)),
            ("", StatusValue::Malformed),
            ("-1", StatusValue::Malformed),
            (" 0", StatusValue::Malformed),
            ("OK", StatusValue::Malformed),
        ];
        for (v, want) in cases {
            assert_eq!(parse_status(v.as_bytes()), *want, "{v:?}");
        }
    }

    #[test]
    fn responses_end_by_trailers_trailers_only_or_http() {
        let ok_headers = [(":status", "200"), ("content-type", "application/grpc")];
        // Headers, then trailers.
        let mut r = ResponseHeads::default();
        assert_eq!(r.on_block(&block(&ok_headers), false), Ok(Block::Headers));
        let t = block(&[("grpc-status", "0"), ("grpc-message", "")]);
        assert_eq!(
            r.on_block(&t, true),
            Ok(Block::End(CallStatus {
                code: Code::Ok,
                source: StatusSource::Trailers
            }))
        );
        assert_eq!(r.on_block(&t, true), Err(HeadError::AfterEnd));

        // Trailers-only: one block with grpc-status.
        let mut r = ResponseHeads::default();
        let only = block(&[
            (":status", "200"),
            ("content-type", "application/grpc"),
            ("grpc-status", "12"),
        ]);
        assert_eq!(
            r.on_block(&only, true),
            Ok(Block::End(CallStatus {
                code: Code::Unimplemented,
                source: StatusSource::TrailersOnly
            }))
        );

        // A proxy's 503: made up as UNAVAILABLE; a 1xx is skipped first.
        let mut r = ResponseHeads::default();
        assert_eq!(
            r.on_block(&block(&[(":status", "100")]), false),
            Ok(Block::Informational)
        );
        assert_eq!(
            r.on_block(&block(&[(":status", "503"), ("content-type", "text/html")]), false),
            Ok(Block::End(CallStatus {
                code: Code::Unavailable,
                source: StatusSource::Http(503)
            }))
        );
        // ... but a grpc-status that is there wins over the HTTP status.
        let mut r = ResponseHeads::default();
        let b = block(&[(":status", "503"), ("grpc-status", "8")]);
        assert_eq!(
            r.on_block(&b, true),
            Ok(Block::End(CallStatus {
                code: Code::ResourceExhausted,
                source: StatusSource::TrailersOnly
            }))
        );

        // 200 that is not gRPC; 200 ending with no status; trailers with a
        // malformed status or none; no :status at all.
        let mut r = ResponseHeads::default();
        let html = block(&[(":status", "200"), ("content-type", "text/html")]);
        assert_eq!(
            r.on_block(&html, false).unwrap(),
            Block::End(CallStatus {
                code: Code::Unknown,
                source: StatusSource::NotGrpc
            })
        );
        let mut r = ResponseHeads::default();
        assert_eq!(
            r.on_block(&block(&ok_headers), true).unwrap(),
            Block::End(CallStatus {
                code: Code::Unknown,
                source: StatusSource::Missing
            })
        );
        let mut r = ResponseHeads::default();
        r.on_block(&block(&ok_headers), false).unwrap();
        assert_eq!(
            r.on_block(&block(&[("grpc-status", "x")]), true).unwrap(),
            Block::End(CallStatus {
                code: Code::Unknown,
                source: StatusSource::Malformed
            })
        );
        let mut r = ResponseHeads::default();
        r.on_block(&block(&ok_headers), false).unwrap();
        assert_eq!(
            r.on_block(&block(&[("grpc-status", "0")]), false),
            Err(HeadError::TrailersNotLast)
        );
        let mut r = ResponseHeads::default();
        r.on_block(&block(&ok_headers), false).unwrap();
        assert_eq!(
            r.on_end_without_trailers(),
            Some(CallStatus {
                code: Code::Unknown,
                source: StatusSource::Missing
            })
        );
        assert_eq!(r.on_end_without_trailers(), None);
        let mut r = ResponseHeads::default();
        assert_eq!(
            r.on_block(&block(&[("grpc-status", "0")]), true),
            Err(HeadError::NoHttpStatus)
        );
    }

    #[test]
    fn messages_are_kept_on_request_and_percent_decoded() {
        let mut f = BlockFields::default();
        let mut msg = Vec::new();
        f.field_keeping_message(b"grpc-message", b"no%20such%20user%3A%20%C3%A9", &mut msg);
        assert!(f.has_message);
        assert_eq!(decode_message(&msg), "no such user: \u{e9}");
        let long = vec![b'a'; 5000];
        f.field_keeping_message(b"grpc-message", &long, &mut msg);
        assert_eq!(msg.len(), MAX_MESSAGE_KEPT);

        let cases: &[(&[u8], &str)] = &[
            (b"plain text", "plain text"),
            (b"100%", "100%"),
            (b"%zz%4", "%zz%4"),
            (b"%41%62c", "Abc"),
            (b"%FF", "\u{fffd}"),
            (b"%e2%9c%93", "\u{2713}"),
        ];
        for (raw, want) in cases {
            assert_eq!(decode_message(raw), *want, "{raw:?}");
        }
        for text in ["a b", "100% sure", "caf\u{e9} \u{2713}\n", ""] {
            let enc = encode_message(text);
            assert!(enc.bytes().all(|b| (0x20..=0x7e).contains(&b)), "{enc}");
            assert_eq!(decode_message(enc.as_bytes()), text);
        }
    }

    #[test]
    fn resets_and_http_statuses_map_as_the_spec_says() {
        assert_eq!(Code::from_reset(ErrorCode::RefusedStream), Code::Unavailable);
        assert_eq!(Code::from_reset(ErrorCode::Cancel), Code::Cancelled);
        assert_eq!(Code::from_reset(ErrorCode::EnhanceYourCalm), Code::ResourceExhausted);
        assert_eq!(Code::from_reset(ErrorCode::InadequateSecurity), Code::PermissionDenied);
        assert_eq!(Code::from_reset(ErrorCode::NoError), Code::Internal);
        assert_eq!(Code::from_reset(ErrorCode::ProtocolError), Code::Internal);
        for (http, code) in [
            (400, Code::Internal),
            (401, Code::Unauthenticated),
            (403, Code::PermissionDenied),
            (404, Code::Unimplemented),
            (429, Code::Unavailable),
            (431, Code::Internal),
            (502, Code::Unavailable),
            (503, Code::Unavailable),
            (504, Code::Unavailable),
            (200, Code::Unknown),
            (500, Code::Unknown),
        ] {
            assert_eq!(Code::from_http(http), code, "{http}");
        }
    }
}
