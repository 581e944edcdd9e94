//! HTTP/3 frames (RFC 9114 §7) and QUIC variable-length integers (RFC 9000
//! §16), read incrementally from a stream's bytes.

/// Frame types (RFC 9114 §7.2).
pub mod kind {
    /// DATA.
    pub const DATA: u64 = 0x0;
    /// HEADERS.
    pub const HEADERS: u64 = 0x1;
    /// SETTINGS (control stream only).
    pub const SETTINGS: u64 = 0x4;
    /// GOAWAY (control stream only).
    pub const GOAWAY: u64 = 0x7;
}

/// Unidirectional stream types (RFC 9114 §6.2, RFC 9204 §4.2).
pub mod stream_type {
    /// The control stream.
    pub const CONTROL: u64 = 0x0;
    /// A push stream (soakd never enables push).
    pub const PUSH: u64 = 0x1;
    /// QPACK's encoder stream.
    pub const QPACK_ENCODER: u64 = 0x2;
    /// QPACK's decoder stream.
    pub const QPACK_DECODER: u64 = 0x3;
}

/// SETTINGS identifiers (RFC 9114 §7.2.4.1, RFC 9204 §5).
pub mod setting {
    /// SETTINGS_QPACK_MAX_TABLE_CAPACITY.
    pub const QPACK_MAX_TABLE_CAPACITY: u64 = 0x1;
    /// SETTINGS_MAX_FIELD_SECTION_SIZE.
    pub const MAX_FIELD_SECTION_SIZE: u64 = 0x6;
    /// SETTINGS_QPACK_BLOCKED_STREAMS.
    pub const QPACK_BLOCKED_STREAMS: u64 = 0x7;
}

/// Application error codes (RFC 9114 §8.1, RFC 9204 §6).
pub mod error {
    /// H3_NO_ERROR.
    pub const NO_ERROR: u64 = 0x100;
    /// H3_GENERAL_PROTOCOL_ERROR.
    pub const GENERAL_PROTOCOL_ERROR: u64 = 0x101;
    /// H3_INTERNAL_ERROR.
    pub const INTERNAL_ERROR: u64 = 0x102;
    /// H3_STREAM_CREATION_ERROR.
    pub const STREAM_CREATION_ERROR: u64 = 0x103;
    /// H3_CLOSED_CRITICAL_STREAM.
    pub const CLOSED_CRITICAL_STREAM: u64 = 0x104;
    /// H3_FRAME_UNEXPECTED.
    pub const FRAME_UNEXPECTED: u64 = 0x105;
    /// H3_FRAME_ERROR.
    pub const FRAME_ERROR: u64 = 0x106;
    /// H3_EXCESSIVE_LOAD.
    pub const EXCESSIVE_LOAD: u64 = 0x107;
    /// H3_ID_ERROR.
    pub const ID_ERROR: u64 = 0x108;
    /// H3_SETTINGS_ERROR.
    pub const SETTINGS_ERROR: u64 = 0x109;
    /// H3_MISSING_SETTINGS.
    pub const MISSING_SETTINGS: u64 = 0x10a;
    /// H3_REQUEST_REJECTED.
    pub const REQUEST_REJECTED: u64 = 0x10b;
    /// H3_REQUEST_CANCELLED.
    pub const REQUEST_CANCELLED: u64 = 0x10c;
    /// H3_REQUEST_INCOMPLETE.
    pub const REQUEST_INCOMPLETE: u64 = 0x10d;
    /// H3_MESSAGE_ERROR.
    pub const MESSAGE_ERROR: u64 = 0x10e;
    /// H3_CONNECT_ERROR.
    pub const CONNECT_ERROR: u64 = 0x10f;
    /// H3_VERSION_FALLBACK.
    pub const VERSION_FALLBACK: u64 = 0x110;
    /// QPACK_DECOMPRESSION_FAILED.
    pub const QPACK_DECOMPRESSION_FAILED: u64 = 0x200;
    /// QPACK_ENCODER_STREAM_ERROR.
    pub const QPACK_ENCODER_STREAM_ERROR: u64 = 0x201;
    /// QPACK_DECODER_STREAM_ERROR.
    pub const QPACK_DECODER_STREAM_ERROR: u64 = 0x202;
}

/// The most bytes of one HEADERS frame's field section soakd takes (and
/// announces as SETTINGS_MAX_FIELD_SECTION_SIZE): a larger one is a stream
/// error, never an unbounded buffer.
pub const MAX_HEADERS_BYTES: usize = 64 * 1024;

/// The name of an HTTP/3 or QPACK application error code ("H3_NO_ERROR",
/// …), or "unknown" for any other (reserved greasing codes included).
pub fn error_name(code: u64) -> &'static str {
    let _ = code;
    todo!()
}

/// Appends `v` as a QUIC variable-length integer (the shortest form).
/// Values ≥ 2^62 do not exist on the wire; they are a caller's bug.
pub fn put_varint(out: &mut Vec<u8>, v: u64) {
    let _ = (out, v);
    todo!()
}

/// Reads a variable-length integer at the start of `buf`: the value and
/// its length, or `None` when `buf` ends before it does.
pub fn get_varint(buf: &[u8]) -> Option<(u64, usize)> {
    let _ = buf;
    todo!()
}

/// What either side writes first on its control stream: the stream type
/// (0x00) and a SETTINGS frame announcing a QPACK table of 0 bytes, no
/// blocked streams, and [`MAX_HEADERS_BYTES`] as the field section limit.
pub fn control_preamble() -> Vec<u8> {
    todo!()
}

/// Appends a HEADERS frame carrying `block` (a QPACK field section).
pub fn encode_headers(out: &mut Vec<u8>, block: &[u8]) {
    let _ = (out, block);
    todo!()
}

/// Appends a DATA frame carrying `payload`.
pub fn encode_data(out: &mut Vec<u8>, payload: &[u8]) {
    let _ = (out, payload);
    todo!()
}

/// Appends a GOAWAY frame naming `id` (a stream id from a server, a push
/// id from a client).
pub fn encode_goaway(out: &mut Vec<u8>, id: u64) {
    let _ = (out, id);
    todo!()
}

/// A frame, or a piece of one, as [`FrameReader::next`] hands it out.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A whole HEADERS frame's field section (QPACK-coded).
    Headers(&'a [u8]),
    /// A piece of a DATA frame's payload, as it arrived (never copied); a
    /// frame may come in several pieces.
    Data(&'a [u8]),
    /// A whole SETTINGS frame: (identifier, value) pairs, in order.
    Settings(Vec<(u64, u64)>),
    /// GOAWAY with its id.
    Goaway(u64),
    /// Any other frame (reserved, unknown, PRIORITY_UPDATE, …), skipped
    /// whole: its type, handed out once its payload has been skipped.
    Other(u64),
}

/// Why a stream's bytes could not be read as frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A frame's length or layout is wrong (H3_FRAME_ERROR), e.g. a
    /// GOAWAY or SETTINGS payload that does not parse to its length.
    #[error("malformed HTTP/3 frame")]
    Malformed,
    /// A HEADERS frame larger than [`MAX_HEADERS_BYTES`]
    /// (H3_EXCESSIVE_LOAD).
    #[error("HTTP/3 header section over {MAX_HEADERS_BYTES} bytes")]
    TooLarge,
}

impl FrameError {
    /// The application error code that closes the stream or connection.
    pub fn code(self) -> u64 {
        match self {
            FrameError::Malformed => error::FRAME_ERROR,
            FrameError::TooLarge => error::EXCESSIVE_LOAD,
        }
    }
}

/// Reads frames from one stream's bytes, fed in order in pieces of any
/// size. It keeps bytes only while a frame header, a HEADERS, SETTINGS or
/// GOAWAY frame is split across pieces (at most [`MAX_HEADERS_BYTES`]);
/// DATA payloads and skipped frames pass through without a copy, so an
/// idle stream's reader holds no heap memory.
#[derive(Debug, Default)]
pub struct FrameReader {
    _todo: (),
}

impl FrameReader {
    /// A reader at the start of a stream's frames (after a unidirectional
    /// stream's type, which the caller reads with [`get_varint`]).
    pub fn new() -> FrameReader {
        FrameReader::default()
    }

    /// Takes bytes from `input`: how many it used, and the frame (or piece
    /// of a DATA frame) they completed, if any. Call again with the rest
    /// until it has used everything and returns `None`; a `None` with
    /// bytes left never happens.
    pub fn next<'a>(&'a mut self, input: &'a [u8]) -> Result<(usize, Option<Frame<'a>>), FrameError> {
        let _ = input;
        todo!()
    }

    /// True when the bytes fed so far end exactly at a frame's boundary
    /// (a stream that ends elsewhere ended mid-frame: H3_FRAME_ERROR).
    pub fn at_boundary(&self) -> bool {
        todo!()
    }

    /// Forgets everything (the stream is reused for another request) and
    /// gives back the buffer's memory.
    pub fn reset(&mut self) {
        todo!()
    }
}
