//! One HTTP/2 connection's frame-level rules, written once for both roles
//! (RFC 9113), sans I/O: the engine's client (`engine/worker/h2.rs`), the
//! built-in target's server (`server/h2_conn.rs`) and the reflection
//! client (`reflection/conn.rs`) each feed their bytes to a [`Core`] and
//! act only on what concerns their streams.
//!
//! What the core does for every role, so no role can do it differently:
//!
//! - decodes the frames (`frame.rs`, with its size and order limits);
//! - applies the peer's SETTINGS (`flow.rs`'s [`PeerSettings`]) and
//!   acknowledges them, answers PINGs;
//! - keeps the connection's flow-control windows (`flow.rs`'s
//!   [`SendWindow`] and [`RecvWindow`], with their overflow checks): DATA
//!   is counted against the receive window before the role sees it, and a
//!   WINDOW_UPDATE that overflows the send window is the peer's error;
//! - assembles a header block from HEADERS and its CONTINUATION frames,
//!   and hands it over whole;
//! - refuses PUSH_PROMISE (neither role enables push) and, in the
//!   [`Role::Client`] role, a server whose first frame is not its
//!   SETTINGS (RFC 9113 §3.4: it does not speak HTTP/2).
//!
//! What concerns a stream comes out as an [`Event`]: a whole header block,
//! DATA, a reset, a stream's WINDOW_UPDATE, GOAWAY, a PING's ACK, and that
//! the peer's SETTINGS moved every stream's send window. Streams' states
//! (what a client does with a response, what a server answers), when the
//! receive window is credited back (the client after half its large
//! window, the target at once), the buffering of a frame split across
//! reads and the replies' bound are the role's. The replies the core
//! writes go into the caller's output ([`Replies`]: a `Vec`, or a buffer
//! the caller takes from a pool only when a reply is written, so a
//! connection that owes nothing holds none).

use std::borrow::Cow;

use super::flow::{PeerSettings, RecvWindow, SendWindow};
use super::frame::{
    DEFAULT_WINDOW, ErrorCode, Frame, FrameDecoder, FrameError, encode_ping, encode_settings, encode_window_update,
};

/// Where the core writes its replies (SETTINGS and PING
/// acknowledgements, WINDOW_UPDATEs); asked only when it writes one.
pub trait Replies {
    /// The buffer to append to.
    fn buf(&mut self) -> &mut Vec<u8>;
}

impl Replies for Vec<u8> {
    fn buf(&mut self) -> &mut Vec<u8> {
        self
    }
}

/// Which side of the connection this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Sends the preface; the server's first frame must be its SETTINGS.
    Client,
    /// Receives the preface (its caller checks it before any frame).
    Server,
}

/// What the peer's frames mean to the role (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// The peer's SETTINGS were applied and acknowledged: every open
    /// stream's send window moves by `shift`; `first` for its first ones.
    Settings {
        /// New initial window minus the old one.
        shift: i64,
        /// These were the peer's first SETTINGS.
        first: bool,
    },
    /// A PING was answered (its ACK is in the output).
    Pinged,
    /// The ACK of our PING.
    PingAck([u8; 8]),
    /// The connection's send window grew.
    Window,
    /// A stream's send window may grow by `increment` (the role keeps
    /// streams' windows).
    StreamWindow {
        /// The stream.
        stream: u32,
        /// The increment.
        increment: u32,
    },
    /// A whole header block (HEADERS and its CONTINUATIONs).
    Headers {
        /// The stream.
        stream: u32,
        /// The stream ends with the block.
        end_stream: bool,
        /// The block: borrowed from the input when it came in one frame.
        block: Cow<'a, [u8]>,
    },
    /// DATA, already counted against the connection's receive window.
    Data {
        /// The stream.
        stream: u32,
        /// The stream ends with it.
        end_stream: bool,
        /// The data (padding removed).
        data: &'a [u8],
        /// What it counts against the windows (padding included).
        flow_len: u32,
    },
    /// RST_STREAM.
    Reset {
        /// The stream.
        stream: u32,
        /// Why.
        code: ErrorCode,
    },
    /// GOAWAY.
    GoAway {
        /// The last stream the peer may have processed.
        last_stream: u32,
        /// Why (NO_ERROR for a graceful one).
        code: ErrorCode,
        /// Its debug data.
        debug: &'a [u8],
    },
}

/// Why the connection cannot go on (a connection error: GOAWAY with
/// [`CoreError::code`], then close).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CoreError {
    /// Bytes that are not valid frames.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// A server whose first frame is not its SETTINGS.
    #[error("the server's first frame is not its SETTINGS: not HTTP/2")]
    NotSettings,
    /// PUSH_PROMISE, push being disabled.
    #[error("PUSH_PROMISE with push disabled")]
    Push,
    /// DATA past a receive window, or a WINDOW_UPDATE past 2^31-1.
    #[error("flow-control window overflowed")]
    FlowControl,
}

impl CoreError {
    /// The code of the GOAWAY it calls for.
    pub fn code(self) -> ErrorCode {
        match self {
            CoreError::Frame(e) => e.code(),
            CoreError::NotSettings | CoreError::Push => ErrorCode::ProtocolError,
            CoreError::FlowControl => ErrorCode::FlowControlError,
        }
    }
}

/// One connection's frame-level state (see the module doc).
#[derive(Debug)]
pub struct Core {
    role: Role,
    dec: FrameDecoder,
    /// What the peer announced.
    pub peer: PeerSettings,
    /// The connection's credit from the peer.
    pub send: SendWindow,
    /// What the peer may send on the connection.
    pub recv: RecvWindow,
    /// The size `recv` starts at (this side's connection window).
    window: u32,
    settings_seen: bool,
    /// A header block awaiting its CONTINUATIONs (empty, and unallocated,
    /// otherwise), its stream and END_STREAM.
    block: Vec<u8>,
    block_stream: u32,
    block_end: bool,
}

impl Core {
    /// A new connection's state on side `role`: frames of up to
    /// `max_frame` payload bytes and header blocks of up to
    /// `max_header_block` accepted, the connection's receive window
    /// `window` (the default 65,535 unless this side announced more with a
    /// WINDOW_UPDATE).
    pub fn new(role: Role, max_frame: u32, max_header_block: u32, window: u32) -> Core {
        Core {
            role,
            dec: FrameDecoder::new(max_frame, max_header_block),
            peer: PeerSettings::default(),
            send: SendWindow::new(i64::from(DEFAULT_WINDOW)),
            recv: RecvWindow::new(window),
            window,
            settings_seen: false,
            block: Vec::new(),
            block_stream: 0,
            block_end: false,
        }
    }

    /// Forgets the connection (a new one starts).
    pub fn reset(&mut self) {
        self.dec.reset();
        self.peer = PeerSettings::default();
        self.send = SendWindow::new(i64::from(DEFAULT_WINDOW));
        self.recv = RecvWindow::new(self.window);
        self.settings_seen = false;
        self.block = Vec::new();
    }

    /// The peer's SETTINGS have arrived.
    pub fn settings_seen(&self) -> bool {
        self.settings_seen
    }

    /// Bytes the core holds allocated: a header block awaiting its
    /// CONTINUATIONs; none between blocks (an idle connection keeps
    /// nothing).
    pub fn kept(&self) -> usize {
        self.block.capacity()
    }

    /// Decodes and handles the frame at the start of `buf`: `Ok(None)`
    /// when it is not whole yet (nothing consumed), else the bytes it took
    /// and what it means to the role, if anything. Replies (SETTINGS and
    /// PING acknowledgements) are appended to `out`.
    pub fn next<'a>(
        &mut self,
        buf: &'a [u8],
        out: &mut impl Replies,
    ) -> Result<Option<(usize, Option<Event<'a>>)>, CoreError> {
        let Some((frame, n)) = self.dec.decode(buf)? else {
            return Ok(None);
        };
        Ok(Some((n, self.frame(frame, out)?)))
    }

    /// Sends a WINDOW_UPDATE for the connection once `threshold` bytes of
    /// DATA were taken since the last one (see [`RecvWindow::credit`]);
    /// true when it did.
    pub fn credit(&mut self, threshold: u32, out: &mut impl Replies) -> bool {
        match self.recv.credit(threshold) {
            Some(n) => {
                encode_window_update(out.buf(), 0, n);
                true
            }
            None => false,
        }
    }

    fn frame<'a>(&mut self, frame: Frame<'a>, out: &mut impl Replies) -> Result<Option<Event<'a>>, CoreError> {
        if self.role == Role::Client && !self.settings_seen && !matches!(frame, Frame::Settings { ack: false, .. }) {
            return Err(CoreError::NotSettings);
        }
        Ok(match frame {
            Frame::Settings { ack: false, params } => {
                let shift = self.peer.apply(&params);
                encode_settings(out.buf(), true, &[]);
                let first = !self.settings_seen;
                self.settings_seen = true;
                Some(Event::Settings { shift, first })
            }
            Frame::Settings { ack: true, .. } | Frame::Ignored { .. } => None,
            Frame::Ping { ack: false, data } => {
                encode_ping(out.buf(), true, data);
                Some(Event::Pinged)
            }
            Frame::Ping { ack: true, data } => Some(Event::PingAck(data)),
            Frame::WindowUpdate { stream: 0, increment } => {
                self.send.grow(increment).map_err(|_| CoreError::FlowControl)?;
                Some(Event::Window)
            }
            Frame::WindowUpdate { stream, increment } => Some(Event::StreamWindow { stream, increment }),
            Frame::Headers {
                stream,
                end_stream,
                end_headers: true,
                fragment,
            } => Some(Event::Headers {
                stream,
                end_stream,
                block: Cow::Borrowed(fragment),
            }),
            Frame::Headers {
                stream,
                end_stream,
                end_headers: false,
                fragment,
            } => {
                self.block.clear();
                self.block.extend_from_slice(fragment);
                self.block_stream = stream;
                self.block_end = end_stream;
                None
            }
            Frame::Continuation {
                end_headers, fragment, ..
            } => {
                // The decoder checked it continues the block in progress.
                self.block.extend_from_slice(fragment);
                end_headers.then(|| Event::Headers {
                    stream: self.block_stream,
                    end_stream: self.block_end,
                    block: Cow::Owned(std::mem::take(&mut self.block)),
                })
            }
            Frame::Data {
                stream,
                end_stream,
                data,
                flow_len,
            } => {
                // The connection's window counts every DATA frame, whatever
                // becomes of its stream.
                self.recv.take(flow_len).map_err(|_| CoreError::FlowControl)?;
                Some(Event::Data {
                    stream,
                    end_stream,
                    data,
                    flow_len,
                })
            }
            Frame::RstStream { stream, code } => Some(Event::Reset { stream, code }),
            Frame::GoAway {
                last_stream,
                code,
                debug,
            } => Some(Event::GoAway {
                last_stream,
                code,
                debug,
            }),
            Frame::PushPromise { .. } => return Err(CoreError::Push),
        })
    }
}

/// The core driven by arbitrary bytes in role `role`, for `fuzz/`
/// (`h2_core_client`, `h2_core_server`) and the property test below.
/// Byte 0 picks the read size (1 to 256), byte 1's low bit puts a valid
/// SETTINGS first (so that the client role gets past its first check);
/// the rest is the peer's byte stream. Checked: nothing panics; read in
/// pieces (what a read leaves of a frame carried to the next, as the
/// roles do) the stream gives the same events, replies and error as read
/// at once; a frame takes at least its header and at most what was fed;
/// one frame writes at most one reply (a PING's ACK, 17 bytes); what is
/// carried never exceeds one frame; an assembled header block stays within
/// its limit; in the client role nothing reaches it before the server's
/// SETTINGS.
#[doc(hidden)]
pub fn drive(role: Role, data: &[u8]) {
    const MAX_FRAME: u32 = 16_384;
    const MAX_BLOCK: u32 = 64 * 1024;
    let [size, flags, rest @ ..] = data else { return };
    let mut stream = Vec::new();
    if flags & 1 != 0 {
        encode_settings(&mut stream, false, &[]);
    }
    stream.extend_from_slice(rest);
    let run = |piece: usize| {
        let mut core = Core::new(role, MAX_FRAME, MAX_BLOCK, DEFAULT_WINDOW);
        let (mut events, mut out, mut carry) = (Vec::new(), Vec::new(), Vec::new());
        for chunk in stream.chunks(piece) {
            carry.extend_from_slice(chunk);
            let mut at = 0;
            loop {
                let before = out.len();
                match core.next(&carry[at..], &mut out) {
                    Err(e) => return (events, out, Some(e)),
                    Ok(None) => break,
                    Ok(Some((n, event))) => {
                        assert!(n >= super::frame::HEADER_LEN && n <= carry.len() - at, "took {n}");
                        assert!(
                            out.len() - before <= 17,
                            "one frame, {} bytes of replies",
                            out.len() - before
                        );
                        if let Some(Event::Headers { block, .. }) = &event {
                            assert!(block.len() <= MAX_BLOCK as usize);
                        }
                        assert!(role == Role::Server || core.settings_seen() || event.is_none());
                        events.extend(event.map(|e| format!("{e:?}")));
                        at += n;
                    }
                }
            }
            carry.drain(..at);
            assert!(
                carry.len() <= super::frame::HEADER_LEN + MAX_FRAME as usize,
                "{} carried",
                carry.len()
            );
            assert!(core.kept() == 0 || core.dec.in_header_block());
        }
        (events, out, None)
    };
    let whole = run(stream.len().max(1));
    let split = run(1 + usize::from(*size));
    assert_eq!(whole, split, "read in pieces of {}", 1 + usize::from(*size));
}

#[cfg(test)]
mod tests {
    use super::super::frame::{
        DEFAULT_MAX_FRAME_SIZE, encode_data, encode_goaway, encode_headers, encode_rst_stream, kind, setting,
        write_header,
    };
    use super::*;

    /// Every event of `bytes` fed in pieces of `piece` bytes (a frame split
    /// across reads is carried, as the roles do), owned; the replies.
    fn feed(core: &mut Core, bytes: &[u8], piece: usize) -> (Result<Vec<String>, CoreError>, Vec<u8>) {
        let mut out = Vec::new();
        let mut got = Vec::new();
        let mut carry = Vec::new();
        for chunk in bytes.chunks(piece.max(1)) {
            carry.extend_from_slice(chunk);
            let mut at = 0;
            loop {
                match core.next(&carry[at..], &mut out) {
                    Err(e) => return (Err(e), out),
                    Ok(None) => break,
                    Ok(Some((n, ev))) => {
                        at += n;
                        if let Some(ev) = ev {
                            got.push(format!("{ev:?}"));
                        }
                    }
                }
            }
            carry.drain(..at);
        }
        (Ok(got), out)
    }

    fn settings(params: &[(u16, u32)]) -> Vec<u8> {
        let mut b = Vec::new();
        encode_settings(&mut b, false, params);
        b
    }

    fn core(role: Role) -> Core {
        Core::new(role, DEFAULT_MAX_FRAME_SIZE, 1 << 16, DEFAULT_WINDOW)
    }

    #[test]
    fn a_client_wants_the_servers_settings_first_a_server_does_not() {
        let mut ping = Vec::new();
        encode_ping(&mut ping, false, [1; 8]);
        assert_eq!(feed(&mut core(Role::Client), &ping, 100).0, Err(CoreError::NotSettings));
        let (events, out) = feed(&mut core(Role::Server), &ping, 100);
        assert_eq!(events.unwrap(), ["Pinged"]);
        let mut ack = Vec::new();
        encode_ping(&mut ack, true, [1; 8]);
        assert_eq!(out, ack);
    }

    #[test]
    fn settings_are_applied_acknowledged_and_shift_the_streams() {
        let mut c = core(Role::Client);
        let mut bytes = settings(&[(setting::INITIAL_WINDOW_SIZE, 1000), (setting::MAX_FRAME_SIZE, 20_000)]);
        bytes.extend(settings(&[(setting::INITIAL_WINDOW_SIZE, 3000)]));
        let (events, out) = feed(&mut c, &bytes, 7);
        assert_eq!(
            events.unwrap(),
            [
                "Settings { shift: -64535, first: true }",
                "Settings { shift: 2000, first: false }"
            ]
        );
        let mut acks = Vec::new();
        encode_settings(&mut acks, true, &[]);
        encode_settings(&mut acks, true, &[]);
        assert_eq!(out, acks);
        assert!(c.settings_seen());
        assert_eq!((c.peer.initial_window, c.peer.max_frame), (3000, 20_000));
    }

    #[test]
    fn a_header_block_comes_whole_however_it_was_split() {
        let block: Vec<u8> = (0..200u8).collect();
        let mut bytes = settings(&[]);
        // Frames of at most 64 bytes: HEADERS and three CONTINUATIONs.
        encode_headers(&mut bytes, 5, &block, true, 64);
        encode_headers(&mut bytes, 7, &block[..10], false, 64);
        for piece in [1, 5, 9, 64, 1000] {
            let (events, _) = feed(&mut core(Role::Client), &bytes, piece);
            let events = events.unwrap();
            assert_eq!(events.len(), 3, "{events:?}");
            assert_eq!(
                events[1],
                format!(
                    "{:?}",
                    Event::Headers {
                        stream: 5,
                        end_stream: true,
                        block: Cow::Borrowed(&block[..])
                    }
                )
            );
            assert!(events[2].starts_with("Headers { stream: 7, end_stream: false"));
        }
    }

    #[test]
    fn the_connection_windows_are_kept_with_their_overflow_checks() {
        let mut c = core(Role::Server);
        let mut bytes = Vec::new();
        encode_data(&mut bytes, 1, &[0; 60_000], false, DEFAULT_MAX_FRAME_SIZE);
        let (events, _) = feed(&mut c, &bytes, 1 << 20);
        assert_eq!(events.unwrap().len(), 4, "frames of 16 KiB");
        let mut out = Vec::new();
        assert!(!c.credit(60_001, &mut out));
        assert!(c.credit(1, &mut out));
        assert_eq!(out.len(), 13, "one WINDOW_UPDATE");
        // Past the window (65,535, of which 60,000 came back): an error.
        let mut bytes = Vec::new();
        encode_data(&mut bytes, 3, &[0; 16_000], false, 1 << 16);
        bytes.extend(bytes.clone());
        bytes.extend(bytes.clone());
        bytes.extend(bytes.clone());
        assert_eq!(feed(&mut c, &bytes, 1 << 20).0, Err(CoreError::FlowControl));
        // A WINDOW_UPDATE past 2^31 - 1 on the connection.
        let mut c = core(Role::Server);
        let mut bytes = Vec::new();
        for _ in 0..2 {
            write_header(&mut bytes, 4, kind::WINDOW_UPDATE, 0, 0);
            bytes.extend_from_slice(&0x7fff_0000u32.to_be_bytes());
        }
        assert_eq!(feed(&mut c, &bytes, 100).0, Err(CoreError::FlowControl));
        assert_eq!(CoreError::FlowControl.code(), ErrorCode::FlowControlError);
    }

    #[test]
    fn stream_frames_go_to_the_role_and_push_is_refused() {
        let mut bytes = settings(&[]);
        encode_rst_stream(&mut bytes, 3, ErrorCode::Cancel);
        encode_goaway(&mut bytes, 3, ErrorCode::NoError, b"bye");
        write_header(&mut bytes, 4, kind::WINDOW_UPDATE, 0, 3);
        bytes.extend_from_slice(&10u32.to_be_bytes());
        let (events, _) = feed(&mut core(Role::Client), &bytes, 3);
        assert_eq!(
            events.unwrap()[1..],
            [
                "Reset { stream: 3, code: Cancel }",
                "GoAway { last_stream: 3, code: NoError, debug: [98, 121, 101] }",
                "StreamWindow { stream: 3, increment: 10 }",
            ]
        );
        let mut push = settings(&[]);
        write_header(&mut push, 4, kind::PUSH_PROMISE, 4, 1);
        push.extend_from_slice(&2u32.to_be_bytes());
        assert_eq!(feed(&mut core(Role::Client), &push, 100).0, Err(CoreError::Push));
    }

    proptest::proptest! {
        /// Any bytes, in either role, in any read size: see [`drive`].
        #[test]
        fn the_fuzz_driver_holds_on_frames_and_noise(
            size in 0u8..=255,
            frames in proptest::collection::vec((0u8..10, 0u8..16, 0u32..8, proptest::collection::vec(0u8..=255, 0..40)), 0..12),
        ) {
            // Mostly well-formed frame headers (random type, flags, a
            // small stream id, the payload's real length), so the states
            // past the decoder are reached.
            let mut data = vec![size, 1];
            for (kind, flags, stream, payload) in &frames {
                write_header(&mut data, payload.len(), *kind, *flags, *stream);
                data.extend_from_slice(payload);
            }
            drive(Role::Client, &data);
            drive(Role::Server, &data);
        }
    }

    #[test]
    fn a_reset_core_is_a_new_connection() {
        let mut c = core(Role::Client);
        let mut bytes = settings(&[(setting::MAX_CONCURRENT_STREAMS, 3)]);
        encode_headers(&mut bytes, 1, &[0; 10], false, 4);
        let (events, _) = feed(&mut c, &bytes[..bytes.len() - 3], 1000);
        assert_eq!(events.unwrap().len(), 1);
        c.reset();
        assert!(!c.settings_seen());
        assert_eq!(c.peer, PeerSettings::default());
        // No block in progress any more: SETTINGS are welcome.
        assert_eq!(feed(&mut c, &settings(&[]), 1000).0.unwrap().len(), 1);
    }
}
