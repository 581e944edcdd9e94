//! One upgraded socket's state, apart from `ws.rs`, which drives it: a
//! connection (`conn.rs`) holds this, and `ws.rs` works on connections, so
//! the type both need lives here rather than in either.

use std::time::Duration;

use crate::wire::ws::Decoder;

/// What an upgraded socket does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WsRoute {
    /// `/ws`: answer each message with the same message.
    Echo,
    /// `/ws/push?every=DUR`: send `push` every DUR; messages from
    /// the client (a subscription) are read and dropped.
    Push(Duration),
}

/// One upgraded socket's state: the decoder's few words and the route's
/// and faults' flags; no buffer.
pub(super) struct WsConn {
    pub(super) decoder: Decoder,
    pub(super) route: WsRoute,
    /// Data messages so far, received (`/ws`) or pushed (`/ws/push`):
    /// what the message faults' `@N` counts.
    pub(super) messages: u32,
    /// A message from the client is being received.
    pub(super) in_message: bool,
    /// ... and is being echoed (its first frame is out).
    pub(super) echoing: bool,
    /// Payload bytes of the echo frame in progress still to come (its
    /// head is out; it mirrors the client's frame).
    pub(super) echo_left: u64,
    /// `ws-no-pong` hit this socket: pings are dropped.
    pub(super) no_pong: bool,
    /// We sent a close frame: nothing more is sent, input is read until
    /// the client's close.
    pub(super) close_sent: bool,
    /// A `ws-bad-frame` was sent: nothing more is echoed.
    pub(super) broken: bool,
}
