//! What crosses the protocol seam (see `protocol.rs`): the in-flight entry
//! the loop keeps per request, what the loop lends a protocol for a call,
//! and what a protocol answers. A file of its own so the protocols
//! (`http1.rs`, later HTTP/2 and WebSocket) and the dispatch over them
//! depend on these types, not on each other.

use super::WorkloadRt;
use crate::stats::ErrorKind;
use crate::wire::h2::ErrorCode;

/// One request in flight: when it was due and written, and which it is.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Inflight {
    /// When the request was due (latency starts here).
    pub(super) due: u64,
    /// When it was written (timeouts start here).
    pub(super) written: u64,
    /// Which request of the workload it is.
    pub(super) req: u8,
    /// HTTP/2: how often the server handed it back unprocessed (see
    /// `Worker::hand_back`; in the entry's padding, no bigger).
    pub(super) handed_back: u8,
}

/// What the loop lends a protocol for one call: the workload (requests,
/// checks, pre-rendered bytes) and the slot's in-flight entries.
pub(super) struct Cx<'a> {
    pub(super) w: &'a WorkloadRt,
    /// The slot's stretch of the worker's in-flight storage; its length is
    /// the slot's capacity (the worker's deepest pipeline).
    pub(super) entries: &'a [Inflight],
}

/// A response that completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Response {
    /// The in-flight entry it answers (its request, due and write times).
    /// The entry is free again from now on.
    pub(super) entry: u16,
    /// Final status code.
    pub(super) status: u16,
    /// The connection stays open after it.
    pub(super) keep_alive: bool,
    /// The request's checks that failed, as a bit set (see
    /// `plan::Checks::finish`); 0 without checks.
    pub(super) failed_checks: u8,
}

/// One answer to bytes that arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Output {
    /// Every byte handed in was used (or kept, when a head is split):
    /// nothing more completed.
    Taken,
    /// A response completed; call again with the bytes after it.
    Response(Response),
    /// The connection is unusable: every request in flight fails with it.
    Error(ErrorKind),
    // HTTP/2
    /// The entry's request was not processed (a GOAWAY's stream above its
    /// last, REFUSED_STREAM): it leaves this connection and is sent again,
    /// on this slot's next connection, with its original due time.
    Retry(u16),
    /// The server reset the entry's stream with `code`; with `retry`
    /// (REFUSED_STREAM) the request is sent again like [`Output::Retry`],
    /// else it failed alone (`stream_reset`). The connection stays.
    Reset {
        /// The entry.
        entry: u16,
        /// RST_STREAM's code.
        code: ErrorCode,
        /// Not processed: send it again.
        retry: bool,
    },
    /// A GOAWAY arrived with `code` (counted; what it means for the
    /// streams follows as other outputs).
    GoAway(ErrorCode),
    /// The server said GOAWAY and nothing is left in flight: close
    /// gracefully and reconnect through the ramp.
    Done,
    /// Something a WebSocket connection saw that the loop accounts or acts
    /// on (see `ws.rs`); call again with the rest.
    Ws(WsNote),
}

/// What a WebSocket connection tells the loop, besides replies (which are
/// [`Output::Response`]s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum WsNote {
    /// The upgrade was accepted: messages and pings may flow.
    Upgraded,
    /// The upgrade was refused with this status (counted, then a
    /// `ws_handshake` error).
    Refused(u16),
    /// A data message arrived that completes no request (a push).
    Pushed,
    /// A pong to one of our pings, after this many ns.
    Pong(u64),
    /// A server ping, answered (the pong is owed).
    Pinged,
    /// The server's close frame (`None`: no code); our answer is owed.
    Closed(Option<u16>),
}

/// What the peer's close meant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AtClose {
    /// Between responses: nothing had arrived of one.
    Idle,
    /// The close ended a response (a close-delimited body); the connection
    /// does not stay (`keep_alive` is false).
    Complete(Response),
    /// The close cut a response short.
    Truncated,
    /// The close itself says what went wrong: an HTTP/2 server that closes
    /// before its SETTINGS never spoke HTTP/2 (`h2_not_negotiated`, not
    /// `eof`: an HTTP/1.1-only server closing on the h2c preface).
    Failed(ErrorKind),
}
