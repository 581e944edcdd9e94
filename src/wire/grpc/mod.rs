//! gRPC on the wire (PROTOCOL-HTTP2.md, statuscodes.md), sans I/O: what
//! gRPC adds to an HTTP/2 stream, for the engine's client and the built-in
//! target alike.
//!
//! - `message.rs`: the length-prefixed messages DATA frames carry — a
//!   streaming decoder that counts messages without copying them (or
//!   gathers one when a check needs its bytes), capped in size, and the
//!   encoder of one message;
//! - `status.rs`: the 17 status codes, written once with their numbers,
//!   spec names and metric labels; how the header blocks of a response end
//!   a call (trailers, trailers-only, or a status made up from a response
//!   that was not gRPC); `grpc-message`'s percent-coding;
//! - `meta.rs`: `grpc-timeout` from a duration, the gRPC `content-type`,
//!   and which metadata names and values may be sent.
//!
//! The HTTP/2 frames and HPACK these ride on are [`super::h2`]'s; this
//! module knows nothing of streams' state, sockets or schemas (the schema
//! is the plan's, `plan::grpc`).

mod message;
mod meta;
mod status;

pub use message::{Event, MessageDecoder, MessageError, MessageHead, PREFIX_LEN, encode_message, parse_prefix, prefix};
pub use meta::{
    CONTENT_TYPE, NameError, Timeout, bad_ascii_value_byte, check_metadata_name, is_binary_name, is_grpc_content_type,
    parse_timeout, render_timeout,
};
pub use status::{
    Block, BlockFields, CallStatus, Code, ContentTypeSeen, HeadError, MAX_MESSAGE_KEPT, ResponseHeads, StatusSource,
    StatusValue, decode_message, encode_message as encode_status_message, parse_status,
};
