//! HTTP/3 on the wire (RFC 9114): frames, QPACK with the static table, and
//! a request derived from its HTTP/1.1 rendering, sans I/O, for both sides.
//!
//! QUIC itself (packets, streams, loss recovery, TLS) is quinn-proto's,
//! driven by the workers' loops (`engine/worker/h3.rs`) and the built-in
//! target (`server/h3.rs`); what travels on its streams is coded here, as
//! HTTP/2's frames are in [`super::h2`]. Everything here works on byte
//! slices a stream handed over, in order, and knows nothing of QUIC.
//!
//! QPACK without a dynamic table: both sides announce
//! SETTINGS_QPACK_MAX_TABLE_CAPACITY 0, so a peer may only use the static
//! table and literals, and every header block is self-contained (no
//! encoder or decoder stream instructions, no blocked streams). That is
//! what soakd sends (a request rendered once and sent millions of times
//! gains nothing from a table) and all it must accept (RFC 9204 §3.2.3:
//! with capacity 0 a reference to the dynamic table is a connection
//! error). docs/http3.md has the reasoning.

mod frame;
mod qpack;
mod request;

pub use frame::{
    ErrorCode, Frame, FrameError, FrameReader, MAX_HEADERS_BYTES, control_preamble, encode_data, encode_goaway,
    encode_headers, error, error_name, get_varint, kind, put_varint, setting, stream_type,
};
pub use qpack::{QpackError, decode_block, encode_block};
pub use request::{H3Request, render_request};
