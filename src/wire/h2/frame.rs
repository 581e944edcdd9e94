//! HTTP/2 frames (RFC 9113 §4, §6): the 9-byte header, the frame types a
//! client and a server exchange, decoded from and encoded into plain byte
//! slices.
//!
//! The decoder is sans I/O and borrows: a [`Frame`] points into the bytes
//! it was decoded from, so decoding a frame allocates nothing. It is fed
//! whatever has arrived; it answers "need more" (`Ok(None)`) until a whole
//! frame is there, and refuses a frame longer than the size it was told to
//! accept as soon as the header is in, so a caller never buffers more than
//! `9 + max_frame_size` bytes. The one piece of state across frames is the
//! header block being assembled (HEADERS then CONTINUATION): its total
//! size and number of frames are capped here, so a CONTINUATION flood or a
//! megabyte header block ends in an error, not in memory.
//!
//! Encoding writes whole frames onto a `Vec<u8>` (control frames, and the
//! request or response frames a caller renders once); [`set_stream_id`]
//! patches the stream of a frame already rendered, which is all a client
//! changes per request.

/// The client connection preface (RFC 9113 §3.4), sent before SETTINGS.
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Bytes of a frame header.
pub const HEADER_LEN: usize = 9;
/// The smallest SETTINGS_MAX_FRAME_SIZE, and every peer's initial one.
pub const DEFAULT_MAX_FRAME_SIZE: u32 = 16_384;
/// The largest SETTINGS_MAX_FRAME_SIZE a peer may announce.
pub const MAX_MAX_FRAME_SIZE: u32 = (1 << 24) - 1;
/// Every window's initial size (RFC 9113 §6.9.2).
pub const DEFAULT_WINDOW: u32 = 65_535;
/// The largest a flow-control window may grow.
pub const MAX_WINDOW: u32 = (1 << 31) - 1;
/// CONTINUATION frames one header block may have at most. A server splits
/// a block at its frame size (16 KiB and up), so a block under the
/// header-block limit needs a handful; more is a flood of tiny frames.
pub const MAX_CONTINUATIONS: u16 = 64;

/// Frame type codes (RFC 9113 §6).
pub mod kind {
    /// DATA.
    pub const DATA: u8 = 0x0;
    /// HEADERS.
    pub const HEADERS: u8 = 0x1;
    /// PRIORITY (deprecated; decoded and ignored).
    pub const PRIORITY: u8 = 0x2;
    /// RST_STREAM.
    pub const RST_STREAM: u8 = 0x3;
    /// SETTINGS.
    pub const SETTINGS: u8 = 0x4;
    /// PUSH_PROMISE.
    pub const PUSH_PROMISE: u8 = 0x5;
    /// PING.
    pub const PING: u8 = 0x6;
    /// GOAWAY.
    pub const GOAWAY: u8 = 0x7;
    /// WINDOW_UPDATE.
    pub const WINDOW_UPDATE: u8 = 0x8;
    /// CONTINUATION.
    pub const CONTINUATION: u8 = 0x9;
}

/// Frame flags.
pub mod flag {
    /// DATA, HEADERS: the last frame of the stream from this side.
    pub const END_STREAM: u8 = 0x1;
    /// SETTINGS, PING: an acknowledgement.
    pub const ACK: u8 = 0x1;
    /// HEADERS, CONTINUATION: the header block ends here.
    pub const END_HEADERS: u8 = 0x4;
    /// DATA, HEADERS: padded.
    pub const PADDED: u8 = 0x8;
    /// HEADERS: a priority block follows the padding length.
    pub const PRIORITY: u8 = 0x20;
}

/// SETTINGS identifiers (RFC 9113 §6.5.2).
pub mod setting {
    /// SETTINGS_HEADER_TABLE_SIZE.
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    /// SETTINGS_ENABLE_PUSH.
    pub const ENABLE_PUSH: u16 = 0x2;
    /// SETTINGS_MAX_CONCURRENT_STREAMS.
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    /// SETTINGS_INITIAL_WINDOW_SIZE.
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    /// SETTINGS_MAX_FRAME_SIZE.
    pub const MAX_FRAME_SIZE: u16 = 0x5;
    /// SETTINGS_MAX_HEADER_LIST_SIZE.
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
}

name_table! {
    /// An HTTP/2 error code (RFC 9113 §7) by name: the RFC's 14, and
    /// `other` for any code it does not define (a closed set, so it can be
    /// a metric label).
    pub enum ErrorCode {
        /// 0x0: graceful.
        NoError = "NO_ERROR",
        /// 0x1.
        ProtocolError = "PROTOCOL_ERROR",
        /// 0x2.
        InternalError = "INTERNAL_ERROR",
        /// 0x3.
        FlowControlError = "FLOW_CONTROL_ERROR",
        /// 0x4.
        SettingsTimeout = "SETTINGS_TIMEOUT",
        /// 0x5.
        StreamClosed = "STREAM_CLOSED",
        /// 0x6.
        FrameSizeError = "FRAME_SIZE_ERROR",
        /// 0x7: the stream was not processed; safe to retry.
        RefusedStream = "REFUSED_STREAM",
        /// 0x8.
        Cancel = "CANCEL",
        /// 0x9.
        CompressionError = "COMPRESSION_ERROR",
        /// 0xa.
        ConnectError = "CONNECT_ERROR",
        /// 0xb.
        EnhanceYourCalm = "ENHANCE_YOUR_CALM",
        /// 0xc.
        InadequateSecurity = "INADEQUATE_SECURITY",
        /// 0xd.
        Http11Required = "HTTP_1_1_REQUIRED",
        /// Any code the RFC does not define.
        Other = "other",
    }
}

impl ErrorCode {
    /// The name of a code as it arrived on the wire.
    pub fn from_u32(code: u32) -> ErrorCode {
        ErrorCode::ALL
            .get(code as usize)
            .copied()
            .filter(|c| *c != ErrorCode::Other)
            .unwrap_or(ErrorCode::Other)
    }

    /// The code to put on the wire (`other` is sent as INTERNAL_ERROR).
    pub fn to_u32(self) -> u32 {
        match self {
            ErrorCode::Other => ErrorCode::InternalError as u32,
            c => c as u32,
        }
    }
}

/// A frame's 9-byte header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// Payload length (24 bits).
    pub len: u32,
    /// Frame type (see [`kind`]).
    pub kind: u8,
    /// Flags (see [`flag`]).
    pub flags: u8,
    /// Stream identifier (31 bits; the reserved bit is dropped).
    pub stream: u32,
}

impl FrameHeader {
    /// Reads a header from the first 9 bytes of `b`.
    pub fn parse(b: &[u8; HEADER_LEN]) -> FrameHeader {
        FrameHeader {
            len: u32::from_be_bytes([0, b[0], b[1], b[2]]),
            kind: b[3],
            flags: b[4],
            stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & MAX_WINDOW,
        }
    }

    /// The header's bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let l = self.len.to_be_bytes();
        let s = (self.stream & MAX_WINDOW).to_be_bytes();
        [l[1], l[2], l[3], self.kind, self.flags, s[0], s[1], s[2], s[3]]
    }
}

/// A decoded frame; its slices borrow the bytes it was decoded from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// DATA, padding removed. `flow_len` is the whole payload (padding
    /// included), which is what flow control counts.
    Data {
        /// The stream.
        stream: u32,
        /// The stream ends with it.
        end_stream: bool,
        /// The data.
        data: &'a [u8],
        /// Bytes the frame counts against the windows.
        flow_len: u32,
    },
    /// HEADERS, padding and priority removed: the start of a header block.
    Headers {
        /// The stream.
        stream: u32,
        /// The stream ends with this block.
        end_stream: bool,
        /// The block is whole (no CONTINUATION follows).
        end_headers: bool,
        /// The block's first fragment.
        fragment: &'a [u8],
    },
    /// CONTINUATION: more of the header block in progress.
    Continuation {
        /// The stream.
        stream: u32,
        /// The block ends here.
        end_headers: bool,
        /// The next fragment.
        fragment: &'a [u8],
    },
    /// PUSH_PROMISE (a client that disabled push treats it as an error).
    PushPromise {
        /// The stream it is sent on.
        stream: u32,
        /// The stream it promises.
        promised: u32,
    },
    /// SETTINGS, validated.
    Settings {
        /// An acknowledgement (no parameters).
        ack: bool,
        /// The parameters.
        params: Settings<'a>,
    },
    /// PING.
    Ping {
        /// A reply.
        ack: bool,
        /// The opaque data to echo.
        data: [u8; 8],
    },
    /// GOAWAY.
    GoAway {
        /// The last stream the peer may have processed.
        last_stream: u32,
        /// Why (NO_ERROR for a graceful one).
        code: ErrorCode,
        /// Debug data.
        debug: &'a [u8],
    },
    /// RST_STREAM.
    RstStream {
        /// The stream.
        stream: u32,
        /// Why.
        code: ErrorCode,
    },
    /// WINDOW_UPDATE (stream 0: the connection's window).
    WindowUpdate {
        /// The stream, or 0.
        stream: u32,
        /// The increment (1 ..= 2^31-1).
        increment: u32,
    },
    /// PRIORITY, or a frame of a type this codec does not know: ignored
    /// (RFC 9113 §4.1, §5.3.2).
    Ignored {
        /// The frame's type.
        kind: u8,
    },
}

/// The parameters of a SETTINGS frame (validated by the decoder).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings<'a>(&'a [u8]);

impl<'a> Settings<'a> {
    /// Each (identifier, value), in order; unknown identifiers included
    /// (a receiver ignores them).
    pub fn iter(&self) -> impl Iterator<Item = (u16, u32)> + 'a {
        self.0.chunks_exact(6).map(|p| {
            (
                u16::from_be_bytes([p[0], p[1]]),
                u32::from_be_bytes([p[2], p[3], p[4], p[5]]),
            )
        })
    }
}

/// Why bytes are not valid HTTP/2 frames; each is a connection error with
/// the code [`FrameError::code`] names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A frame longer than the size this side accepts.
    #[error("frame of {0} bytes is over the maximum frame size")]
    TooLarge(u32),
    /// A frame whose length does not fit its type.
    #[error("frame of type {0:#x} has a bad length")]
    BadLength(u8),
    /// A frame on the wrong stream (0 where a stream is needed, or the
    /// reverse).
    #[error("frame of type {0:#x} on the wrong stream")]
    BadStream(u8),
    /// Padding longer than the frame.
    #[error("padding longer than the frame")]
    BadPadding,
    /// Another frame where a CONTINUATION was owed, or a CONTINUATION where
    /// none was.
    #[error("header block interrupted or CONTINUATION out of place")]
    Continuation,
    /// A header block longer than this side accepts.
    #[error("header block over the size limit")]
    HeaderBlockTooLarge,
    /// More CONTINUATION frames than a block may have.
    #[error("too many CONTINUATION frames")]
    TooManyContinuations,
    /// A WINDOW_UPDATE of 0.
    #[error("WINDOW_UPDATE with an increment of 0")]
    ZeroIncrement,
    /// A SETTINGS value out of its range (window size: a flow-control
    /// error; push or frame size: a protocol error).
    #[error("SETTINGS value out of range for {0:#x}")]
    BadSetting(u16),
}

impl FrameError {
    /// The error code a GOAWAY for it carries.
    pub fn code(self) -> ErrorCode {
        match self {
            FrameError::TooLarge(_) | FrameError::BadLength(_) => ErrorCode::FrameSizeError,
            FrameError::BadSetting(setting::INITIAL_WINDOW_SIZE) => ErrorCode::FlowControlError,
            FrameError::HeaderBlockTooLarge | FrameError::TooManyContinuations => ErrorCode::EnhanceYourCalm,
            _ => ErrorCode::ProtocolError,
        }
    }
}

/// The header block being assembled: its stream, size so far and frames.
#[derive(Clone, Copy, Debug)]
struct Block {
    stream: u32,
    bytes: u32,
    continuations: u16,
}

/// Decodes frames from bytes, one at a time (see the module doc).
#[derive(Clone, Debug)]
pub struct FrameDecoder {
    max_frame_size: u32,
    max_header_block: u32,
    block: Option<Block>,
}

impl FrameDecoder {
    /// A decoder that accepts frames of up to `max_frame_size` payload
    /// bytes (what this side announced) and header blocks of up to
    /// `max_header_block` bytes (all fragments together).
    pub fn new(max_frame_size: u32, max_header_block: u32) -> FrameDecoder {
        FrameDecoder {
            max_frame_size,
            max_header_block,
            block: None,
        }
    }

    /// Forgets a header block in progress (a new connection).
    pub fn reset(&mut self) {
        self.block = None;
    }

    /// True while a header block waits for CONTINUATION frames.
    pub fn in_header_block(&self) -> bool {
        self.block.is_some()
    }

    /// Decodes the frame at the start of `buf`: `Ok(None)` when it is not
    /// all there yet (nothing is consumed), else the frame and the bytes it
    /// took.
    pub fn decode<'a>(&mut self, buf: &'a [u8]) -> Result<Option<(Frame<'a>, usize)>, FrameError> {
        let Some(head) = buf.first_chunk::<HEADER_LEN>() else {
            return Ok(None);
        };
        let h = FrameHeader::parse(head);
        if h.len > self.max_frame_size {
            return Err(FrameError::TooLarge(h.len));
        }
        let end = HEADER_LEN + h.len as usize;
        if buf.len() < end {
            // Even before the payload is in, a frame that interrupts a
            // header block is known bad.
            self.check_block_order(&h)?;
            return Ok(None);
        }
        let frame = self.frame(&h, &buf[HEADER_LEN..end])?;
        Ok(Some((frame, end)))
    }

    fn check_block_order(&self, h: &FrameHeader) -> Result<(), FrameError> {
        match (self.block, h.kind) {
            (Some(b), kind::CONTINUATION) if b.stream == h.stream => Ok(()),
            (None, kind::CONTINUATION) | (Some(_), _) => Err(FrameError::Continuation),
            (None, _) => Ok(()),
        }
    }

    /// The frame of header `h` and payload `p`.
    fn frame<'a>(&mut self, h: &FrameHeader, p: &'a [u8]) -> Result<Frame<'a>, FrameError> {
        self.check_block_order(h)?;
        let on_stream = |ok: bool| if ok { Ok(()) } else { Err(FrameError::BadStream(h.kind)) };
        let exact = |n: usize| {
            if p.len() == n {
                Ok(())
            } else {
                Err(FrameError::BadLength(h.kind))
            }
        };
        Ok(match h.kind {
            kind::DATA => {
                on_stream(h.stream != 0)?;
                Frame::Data {
                    stream: h.stream,
                    end_stream: h.flags & flag::END_STREAM != 0,
                    data: unpad(h, p)?,
                    flow_len: h.len,
                }
            }
            kind::HEADERS => {
                on_stream(h.stream != 0)?;
                let mut fragment = unpad(h, p)?;
                if h.flags & flag::PRIORITY != 0 {
                    fragment = fragment.get(5..).ok_or(FrameError::BadLength(h.kind))?;
                }
                let end_headers = h.flags & flag::END_HEADERS != 0;
                self.fragment(h.stream, fragment.len(), end_headers, false)?;
                Frame::Headers {
                    stream: h.stream,
                    end_stream: h.flags & flag::END_STREAM != 0,
                    end_headers,
                    fragment,
                }
            }
            kind::CONTINUATION => {
                let end_headers = h.flags & flag::END_HEADERS != 0;
                self.fragment(h.stream, p.len(), end_headers, true)?;
                Frame::Continuation {
                    stream: h.stream,
                    end_headers,
                    fragment: p,
                }
            }
            kind::PUSH_PROMISE => {
                on_stream(h.stream != 0)?;
                let rest = unpad(h, p)?;
                let id = rest.first_chunk::<4>().ok_or(FrameError::BadLength(h.kind))?;
                let end_headers = h.flags & flag::END_HEADERS != 0;
                self.fragment(h.stream, rest.len() - 4, end_headers, false)?;
                Frame::PushPromise {
                    stream: h.stream,
                    promised: u32::from_be_bytes(*id) & MAX_WINDOW,
                }
            }
            kind::SETTINGS => {
                on_stream(h.stream == 0)?;
                let ack = h.flags & flag::ACK != 0;
                if (ack && !p.is_empty()) || !p.len().is_multiple_of(6) {
                    return Err(FrameError::BadLength(h.kind));
                }
                let params = Settings(p);
                for (id, v) in params.iter() {
                    let ok = match id {
                        setting::ENABLE_PUSH => v <= 1,
                        setting::INITIAL_WINDOW_SIZE => v <= MAX_WINDOW,
                        setting::MAX_FRAME_SIZE => (DEFAULT_MAX_FRAME_SIZE..=MAX_MAX_FRAME_SIZE).contains(&v),
                        _ => true,
                    };
                    if !ok {
                        return Err(FrameError::BadSetting(id));
                    }
                }
                Frame::Settings { ack, params }
            }
            kind::PING => {
                on_stream(h.stream == 0)?;
                exact(8)?;
                let mut data = [0; 8];
                data.copy_from_slice(p);
                Frame::Ping {
                    ack: h.flags & flag::ACK != 0,
                    data,
                }
            }
            kind::GOAWAY => {
                on_stream(h.stream == 0)?;
                if p.len() < 8 {
                    return Err(FrameError::BadLength(h.kind));
                }
                Frame::GoAway {
                    last_stream: u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & MAX_WINDOW,
                    code: ErrorCode::from_u32(u32::from_be_bytes([p[4], p[5], p[6], p[7]])),
                    debug: &p[8..],
                }
            }
            kind::RST_STREAM => {
                on_stream(h.stream != 0)?;
                exact(4)?;
                Frame::RstStream {
                    stream: h.stream,
                    code: ErrorCode::from_u32(u32::from_be_bytes([p[0], p[1], p[2], p[3]])),
                }
            }
            kind::WINDOW_UPDATE => {
                exact(4)?;
                let increment = u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & MAX_WINDOW;
                if increment == 0 {
                    return Err(FrameError::ZeroIncrement);
                }
                Frame::WindowUpdate {
                    stream: h.stream,
                    increment,
                }
            }
            kind::PRIORITY => {
                on_stream(h.stream != 0)?;
                exact(5)?;
                Frame::Ignored { kind: h.kind }
            }
            other => Frame::Ignored { kind: other },
        })
    }

    /// Accounts one fragment of a header block against the limits.
    fn fragment(&mut self, stream: u32, len: usize, end: bool, continuation: bool) -> Result<(), FrameError> {
        let mut b = match self.block {
            Some(b) if continuation => b,
            _ => Block {
                stream,
                bytes: 0,
                continuations: 0,
            },
        };
        b.bytes = b.bytes.saturating_add(len as u32);
        if continuation {
            b.continuations += 1;
        }
        if b.bytes > self.max_header_block {
            return Err(FrameError::HeaderBlockTooLarge);
        }
        if b.continuations > MAX_CONTINUATIONS {
            return Err(FrameError::TooManyContinuations);
        }
        self.block = (!end).then_some(b);
        Ok(())
    }
}

/// The payload of a frame that may be padded, without its padding.
fn unpad<'a>(h: &FrameHeader, p: &'a [u8]) -> Result<&'a [u8], FrameError> {
    if h.flags & flag::PADDED == 0 {
        return Ok(p);
    }
    let (&pad, rest) = p.split_first().ok_or(FrameError::BadLength(h.kind))?;
    rest.len()
        .checked_sub(pad as usize)
        .map(|n| &rest[..n])
        .ok_or(FrameError::BadPadding)
}

/// Appends a frame header.
pub fn write_header(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    out.extend_from_slice(
        &FrameHeader {
            len: len as u32,
            kind,
            flags,
            stream,
        }
        .encode(),
    );
}

/// Sets the stream of the frame whose header starts `frame`.
#[inline]
pub fn set_stream_id(frame: &mut [u8], stream: u32) {
    frame[5..9].copy_from_slice(&(stream & MAX_WINDOW).to_be_bytes());
}

/// Appends a SETTINGS frame with `params`, or an acknowledgement.
pub fn encode_settings(out: &mut Vec<u8>, ack: bool, params: &[(u16, u32)]) {
    write_header(
        out,
        params.len() * 6,
        kind::SETTINGS,
        if ack { flag::ACK } else { 0 },
        0,
    );
    for &(id, v) in params {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&v.to_be_bytes());
    }
}

/// Appends a PING (or its reply).
pub fn encode_ping(out: &mut Vec<u8>, ack: bool, data: [u8; 8]) {
    write_header(out, 8, kind::PING, if ack { flag::ACK } else { 0 }, 0);
    out.extend_from_slice(&data);
}

/// Appends a GOAWAY.
pub fn encode_goaway(out: &mut Vec<u8>, last_stream: u32, code: ErrorCode, debug: &[u8]) {
    write_header(out, 8 + debug.len(), kind::GOAWAY, 0, 0);
    out.extend_from_slice(&(last_stream & MAX_WINDOW).to_be_bytes());
    out.extend_from_slice(&code.to_u32().to_be_bytes());
    out.extend_from_slice(debug);
}

/// Appends an RST_STREAM.
pub fn encode_rst_stream(out: &mut Vec<u8>, stream: u32, code: ErrorCode) {
    write_header(out, 4, kind::RST_STREAM, 0, stream);
    out.extend_from_slice(&code.to_u32().to_be_bytes());
}

/// Appends a WINDOW_UPDATE (stream 0: the connection's window).
pub fn encode_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    write_header(out, 4, kind::WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&(increment & MAX_WINDOW).to_be_bytes());
}

/// Appends a header block as HEADERS and as many CONTINUATION frames as
/// `max_frame_size` asks for.
pub fn encode_headers(out: &mut Vec<u8>, stream: u32, block: &[u8], end_stream: bool, max_frame_size: u32) {
    let max = max_frame_size.max(1) as usize;
    let mut chunks = block.chunks(max).peekable();
    let first = chunks.next().unwrap_or(&[]);
    let end = if end_stream { flag::END_STREAM } else { 0 };
    let last = chunks.peek().is_none();
    write_header(
        out,
        first.len(),
        kind::HEADERS,
        end | if last { flag::END_HEADERS } else { 0 },
        stream,
    );
    out.extend_from_slice(first);
    while let Some(c) = chunks.next() {
        let last = chunks.peek().is_none();
        write_header(
            out,
            c.len(),
            kind::CONTINUATION,
            if last { flag::END_HEADERS } else { 0 },
            stream,
        );
        out.extend_from_slice(c);
    }
}

/// Appends `data` as DATA frames of at most `max_frame_size` bytes; the
/// last carries END_STREAM when `end_stream` (an empty `data` is one empty
/// frame).
pub fn encode_data(out: &mut Vec<u8>, stream: u32, data: &[u8], end_stream: bool, max_frame_size: u32) {
    let max = max_frame_size.max(1) as usize;
    let n = data.len().div_ceil(max).max(1);
    for i in 0..n {
        let c = &data[(i * max).min(data.len())..((i + 1) * max).min(data.len())];
        let flags = if end_stream && i + 1 == n { flag::END_STREAM } else { 0 };
        write_header(out, c.len(), kind::DATA, flags, stream);
        out.extend_from_slice(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec() -> FrameDecoder {
        FrameDecoder::new(DEFAULT_MAX_FRAME_SIZE, 64 * 1024)
    }

    /// Decodes every frame of `bytes` (whole); the frames' debug strings or
    /// the error.
    fn all(d: &mut FrameDecoder, bytes: &[u8]) -> Result<Vec<String>, FrameError> {
        let mut out = Vec::new();
        let mut at = 0;
        while let Some((f, n)) = d.decode(&bytes[at..])? {
            out.push(format!("{f:?}"));
            at += n;
        }
        assert_eq!(at, bytes.len(), "bytes left undecoded");
        Ok(out)
    }

    #[test]
    fn header_round_trips() {
        let h = FrameHeader {
            len: 0x12_3456,
            kind: 7,
            flags: 0xa5,
            stream: 0x7fff_fffe,
        };
        assert_eq!(FrameHeader::parse(&h.encode()), h);
        let mut b = h.encode();
        b[5] |= 0x80; // the reserved bit is ignored
        assert_eq!(FrameHeader::parse(&b).stream, 0x7fff_fffe);
        set_stream_id(&mut b, 3);
        assert_eq!(FrameHeader::parse(&b).stream, 3);
    }

    #[test]
    fn every_control_frame_round_trips() {
        let mut b = Vec::new();
        encode_settings(&mut b, false, &[(setting::MAX_CONCURRENT_STREAMS, 10), (0x99, 7)]);
        encode_settings(&mut b, true, &[]);
        encode_ping(&mut b, false, *b"12345678");
        encode_goaway(&mut b, 9, ErrorCode::EnhanceYourCalm, b"bye");
        encode_rst_stream(&mut b, 5, ErrorCode::RefusedStream);
        encode_window_update(&mut b, 0, 1000);
        let mut d = dec();
        let mut at = 0;
        let mut frames = Vec::new();
        while let Some((f, n)) = d.decode(&b[at..]).unwrap() {
            frames.push(f);
            at += n;
        }
        assert_eq!(frames.len(), 6);
        let Frame::Settings { ack: false, params } = frames[0] else {
            panic!("{:?}", frames[0])
        };
        assert_eq!(params.iter().collect::<Vec<_>>(), [(3, 10), (0x99, 7)]);
        assert!(matches!(frames[1], Frame::Settings { ack: true, .. }));
        assert_eq!(
            frames[2],
            Frame::Ping {
                ack: false,
                data: *b"12345678"
            }
        );
        assert_eq!(
            frames[3],
            Frame::GoAway {
                last_stream: 9,
                code: ErrorCode::EnhanceYourCalm,
                debug: b"bye"
            }
        );
        assert_eq!(
            frames[4],
            Frame::RstStream {
                stream: 5,
                code: ErrorCode::RefusedStream
            }
        );
        assert_eq!(
            frames[5],
            Frame::WindowUpdate {
                stream: 0,
                increment: 1000
            }
        );
    }

    #[test]
    fn headers_split_into_continuations_and_join_again() {
        let block: Vec<u8> = (0..40u8).collect();
        let mut b = Vec::new();
        encode_headers(&mut b, 1, &block, true, 16);
        let mut d = dec();
        let mut at = 0;
        let mut got = Vec::new();
        let mut kinds = Vec::new();
        while let Some((f, n)) = d.decode(&b[at..]).unwrap() {
            match f {
                Frame::Headers {
                    fragment,
                    end_stream,
                    end_headers,
                    ..
                } => {
                    assert!(end_stream && !end_headers);
                    got.extend_from_slice(fragment);
                    kinds.push('H');
                }
                Frame::Continuation {
                    fragment, end_headers, ..
                } => {
                    got.extend_from_slice(fragment);
                    kinds.push(if end_headers { 'E' } else { 'C' });
                }
                f => panic!("{f:?}"),
            }
            at += n;
        }
        assert_eq!(got, block);
        assert_eq!(kinds, ['H', 'C', 'E']);
        assert!(!d.in_header_block());
    }

    #[test]
    fn data_is_split_and_unpadded() {
        let mut b = Vec::new();
        encode_data(&mut b, 3, b"abcdefghij", true, 4);
        let frames = all(&mut dec(), &b).unwrap();
        assert_eq!(frames.len(), 3);
        assert!(frames[2].contains("end_stream: true") && frames[0].contains("end_stream: false"));
        // Padded DATA: pad length 2, "hi", two pad bytes.
        let mut p = Vec::new();
        write_header(&mut p, 5, kind::DATA, flag::PADDED, 1);
        p.extend_from_slice(&[2, b'h', b'i', 0, 0]);
        let (f, n) = dec().decode(&p).unwrap().unwrap();
        assert_eq!(n, p.len());
        assert_eq!(
            f,
            Frame::Data {
                stream: 1,
                end_stream: false,
                data: b"hi",
                flow_len: 5
            }
        );
        // Padding past the end.
        let mut bad = Vec::new();
        write_header(&mut bad, 2, kind::DATA, flag::PADDED, 1);
        bad.extend_from_slice(&[5, 0]);
        assert_eq!(dec().decode(&bad), Err(FrameError::BadPadding));
    }

    /// A bad frame: type, flags, stream, payload, the error and its code.
    type Case = (u8, u8, u32, &'static [u8], FrameError, ErrorCode);

    /// One table of bad frames: (type, flags, stream, payload) → error.
    #[test]
    fn bad_frames_are_refused_with_their_code() {
        let cases: &[Case] = &[
            (
                kind::DATA,
                0,
                0,
                b"x",
                FrameError::BadStream(0),
                ErrorCode::ProtocolError,
            ),
            (
                kind::SETTINGS,
                0,
                1,
                b"",
                FrameError::BadStream(4),
                ErrorCode::ProtocolError,
            ),
            (
                kind::SETTINGS,
                0,
                0,
                b"12345",
                FrameError::BadLength(4),
                ErrorCode::FrameSizeError,
            ),
            (
                kind::SETTINGS,
                flag::ACK,
                0,
                b"123456",
                FrameError::BadLength(4),
                ErrorCode::FrameSizeError,
            ),
            (
                kind::SETTINGS,
                0,
                0,
                &[0, 2, 0, 0, 0, 2],
                FrameError::BadSetting(2),
                ErrorCode::ProtocolError,
            ),
            (
                kind::SETTINGS,
                0,
                0,
                &[0, 4, 0x80, 0, 0, 0],
                FrameError::BadSetting(4),
                ErrorCode::FlowControlError,
            ),
            (
                kind::SETTINGS,
                0,
                0,
                &[0, 5, 0, 0, 0, 1],
                FrameError::BadSetting(5),
                ErrorCode::ProtocolError,
            ),
            (
                kind::PING,
                0,
                0,
                b"1234567",
                FrameError::BadLength(6),
                ErrorCode::FrameSizeError,
            ),
            (
                kind::PING,
                0,
                3,
                b"12345678",
                FrameError::BadStream(6),
                ErrorCode::ProtocolError,
            ),
            (
                kind::GOAWAY,
                0,
                0,
                b"1234567",
                FrameError::BadLength(7),
                ErrorCode::FrameSizeError,
            ),
            (
                kind::RST_STREAM,
                0,
                0,
                b"1234",
                FrameError::BadStream(3),
                ErrorCode::ProtocolError,
            ),
            (
                kind::RST_STREAM,
                0,
                1,
                b"123",
                FrameError::BadLength(3),
                ErrorCode::FrameSizeError,
            ),
            (
                kind::WINDOW_UPDATE,
                0,
                0,
                &[0, 0, 0, 0],
                FrameError::ZeroIncrement,
                ErrorCode::ProtocolError,
            ),
            (
                kind::WINDOW_UPDATE,
                0,
                0,
                &[0, 0, 1],
                FrameError::BadLength(8),
                ErrorCode::FrameSizeError,
            ),
            (
                kind::CONTINUATION,
                0,
                1,
                b"x",
                FrameError::Continuation,
                ErrorCode::ProtocolError,
            ),
            (
                kind::HEADERS,
                flag::PRIORITY,
                1,
                b"1234",
                FrameError::BadLength(1),
                ErrorCode::FrameSizeError,
            ),
            (
                kind::PRIORITY,
                0,
                1,
                b"1234",
                FrameError::BadLength(2),
                ErrorCode::FrameSizeError,
            ),
        ];
        for (i, &(k, flags, stream, payload, err, code)) in cases.iter().enumerate() {
            let mut b = Vec::new();
            write_header(&mut b, payload.len(), k, flags, stream);
            b.extend_from_slice(payload);
            assert_eq!(dec().decode(&b), Err(err), "case {i}");
            assert_eq!(err.code(), code, "case {i}");
        }
    }

    #[test]
    fn unknown_frames_and_priority_are_ignored() {
        let mut b = Vec::new();
        write_header(&mut b, 3, 0xee, 0xff, 9);
        b.extend_from_slice(b"abc");
        write_header(&mut b, 5, kind::PRIORITY, 0, 1);
        b.extend_from_slice(&[0, 0, 0, 3, 16]);
        let frames = all(&mut dec(), &b).unwrap();
        assert_eq!(frames, ["Ignored { kind: 238 }", "Ignored { kind: 2 }"]);
    }

    #[test]
    fn an_oversized_frame_is_refused_from_its_header_alone() {
        let mut b = Vec::new();
        write_header(&mut b, 16_385, kind::DATA, 0, 1);
        assert_eq!(dec().decode(&b), Err(FrameError::TooLarge(16_385)));
        // Within the limit but incomplete: need more, nothing consumed.
        let mut b = Vec::new();
        write_header(&mut b, 100, kind::DATA, 0, 1);
        assert_eq!(dec().decode(&b), Ok(None));
        assert_eq!(dec().decode(&b[..4]), Ok(None));
    }

    #[test]
    fn header_blocks_are_capped_in_size_and_frames() {
        // A 1 MB block in 16 KiB fragments ends at the 64 KiB limit.
        let block = vec![0u8; 1 << 20];
        let mut b = Vec::new();
        encode_headers(&mut b, 1, &block, false, DEFAULT_MAX_FRAME_SIZE);
        assert_eq!(all(&mut dec(), &b), Err(FrameError::HeaderBlockTooLarge));
        // A flood of empty CONTINUATION frames ends at the frame cap.
        let mut b = Vec::new();
        write_header(&mut b, 0, kind::HEADERS, 0, 1);
        for _ in 0..1000 {
            write_header(&mut b, 0, kind::CONTINUATION, 0, 1);
        }
        assert_eq!(all(&mut dec(), &b), Err(FrameError::TooManyContinuations));
        // A block interrupted by another frame, or continued on another
        // stream, is a protocol error; known from the header alone.
        let mut b = Vec::new();
        write_header(&mut b, 0, kind::HEADERS, 0, 1);
        write_header(&mut b, 8, kind::PING, 0, 0);
        assert_eq!(all(&mut dec(), &b), Err(FrameError::Continuation));
        let mut b = Vec::new();
        write_header(&mut b, 0, kind::HEADERS, 0, 1);
        write_header(&mut b, 0, kind::CONTINUATION, flag::END_HEADERS, 3);
        assert_eq!(all(&mut dec(), &b), Err(FrameError::Continuation));
    }

    #[test]
    fn error_codes_have_their_rfc_names() {
        assert_eq!(ErrorCode::from_u32(0), ErrorCode::NoError);
        assert_eq!(ErrorCode::from_u32(7), ErrorCode::RefusedStream);
        assert_eq!(ErrorCode::from_u32(0xd), ErrorCode::Http11Required);
        assert_eq!(ErrorCode::from_u32(0xe), ErrorCode::Other);
        assert_eq!(ErrorCode::from_u32(u32::MAX), ErrorCode::Other);
        assert_eq!(ErrorCode::COUNT, 15);
        assert_eq!(ErrorCode::Cancel.to_u32(), 8);
        assert_eq!(ErrorCode::Other.to_u32(), 2);
    }

    proptest::proptest! {
        /// Any split of a byte stream decodes the same as the whole, when
        /// the caller keeps what was not consumed (as the engine does).
        #[test]
        fn any_split_decodes_like_the_whole(cuts in proptest::collection::vec(0usize..400, 0..8)) {
            let mut b = Vec::new();
            encode_settings(&mut b, false, &[(3, 100), (4, 1 << 20)]);
            encode_headers(&mut b, 1, &[7u8; 50], false, 20);
            encode_data(&mut b, 1, &[1u8; 100], true, 30);
            encode_ping(&mut b, true, [9; 8]);
            encode_goaway(&mut b, 1, ErrorCode::NoError, b"");
            let whole = all(&mut dec(), &b).unwrap();
            let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (b.len() + 1)).collect();
            bounds.extend([0, b.len()]);
            bounds.sort_unstable();
            let mut d = dec();
            let mut carried = Vec::new();
            let mut got = Vec::new();
            for pair in bounds.windows(2) {
                carried.extend_from_slice(&b[pair[0]..pair[1]]);
                let mut at = 0;
                while let Some((f, n)) = d.decode(&carried[at..]).unwrap() {
                    got.push(format!("{f:?}"));
                    at += n;
                }
                carried.drain(..at);
            }
            proptest::prop_assert!(carried.is_empty());
            proptest::prop_assert_eq!(got, whole);
        }
    }
}
