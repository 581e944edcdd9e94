//! HTTP/2 on the wire: frames and HPACK, sans I/O, for both sides.
//!
//! The engine's client (`engine/worker/h2.rs`) and the built-in target's
//! server use this one codec, as they share the HTTP/1 framer: it turns
//! bytes into [`Frame`]s and frames into bytes, and knows nothing of
//! sockets, streams' state or timers (see `frame.rs` for the limits it
//! enforces while decoding, `hpack.rs` for how header blocks are coded,
//! `flow.rs` for the flow-control windows and SETTINGS both sides keep,
//! `conn.rs` for the connection's frame-level rules, written once for the
//! client and the server roles).
//!
//! Why a codec in the tree and not the `h2` crate: `h2` is driven through
//! its async I/O traits and a waker, owns its buffers per connection and
//! allocates per stream; soakd's loop writes pre-rendered request bytes,
//! keeps no buffer on an idle connection and re-issues requests a GOAWAY
//! turned back with their original due time, all of which need the frames
//! in hand. The frame layer is small and fuzzed (`fuzz/`); HPACK is not
//! written here (docs/http2.md has the comparison): it comes from
//! `loona-hpack`, the maintained fork of `hpack` (bearcove's fluke, renamed
//! loona), which fixed the original's panics on malformed integers and
//! size updates, is fuzzed upstream, borrows indexed fields instead of
//! copying them and needs nothing beyond `thiserror` and `tracing`. `hpack`
//! itself has had no release since 2016; `httlib-hpack` none since 2020.
//! The copy soakd builds is patched (`vendor/loona-hpack`, through
//! `[patch.crates-io]`): its Huffman decoder walks a flat table instead of
//! building a `HashMap` per string, which cost tens of microseconds per
//! response from a server that Huffman-codes its headers (docs/http2.md).

mod conn;
mod flow;
mod frame;
mod hpack;
mod request;

#[doc(hidden)]
pub use conn::drive as fuzz_core;
pub use conn::{Core, CoreError, Event, Replies, Role};
pub use flow::{PeerSettings, RecvWindow, SendWindow};
pub use frame::{
    DEFAULT_MAX_FRAME_SIZE, DEFAULT_WINDOW, ErrorCode, Frame, FrameDecoder, FrameError, FrameHeader, HEADER_LEN,
    MAX_CONTINUATIONS, MAX_MAX_FRAME_SIZE, MAX_WINDOW, PREFACE, Settings, encode_data, encode_goaway, encode_headers,
    encode_ping, encode_rst_stream, encode_settings, encode_window_update, flag, kind, set_stream_id, setting,
    write_header,
};
pub use hpack::{HeaderDecoder, HpackError, encode_block};
pub use request::{H2Request, render_request};
