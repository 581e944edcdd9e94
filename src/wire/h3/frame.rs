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
    match code {
        error::NO_ERROR => "H3_NO_ERROR",
        error::GENERAL_PROTOCOL_ERROR => "H3_GENERAL_PROTOCOL_ERROR",
        error::INTERNAL_ERROR => "H3_INTERNAL_ERROR",
        error::STREAM_CREATION_ERROR => "H3_STREAM_CREATION_ERROR",
        error::CLOSED_CRITICAL_STREAM => "H3_CLOSED_CRITICAL_STREAM",
        error::FRAME_UNEXPECTED => "H3_FRAME_UNEXPECTED",
        error::FRAME_ERROR => "H3_FRAME_ERROR",
        error::EXCESSIVE_LOAD => "H3_EXCESSIVE_LOAD",
        error::ID_ERROR => "H3_ID_ERROR",
        error::SETTINGS_ERROR => "H3_SETTINGS_ERROR",
        error::MISSING_SETTINGS => "H3_MISSING_SETTINGS",
        error::REQUEST_REJECTED => "H3_REQUEST_REJECTED",
        error::REQUEST_CANCELLED => "H3_REQUEST_CANCELLED",
        error::REQUEST_INCOMPLETE => "H3_REQUEST_INCOMPLETE",
        error::MESSAGE_ERROR => "H3_MESSAGE_ERROR",
        error::CONNECT_ERROR => "H3_CONNECT_ERROR",
        error::VERSION_FALLBACK => "H3_VERSION_FALLBACK",
        error::QPACK_DECOMPRESSION_FAILED => "QPACK_DECOMPRESSION_FAILED",
        error::QPACK_ENCODER_STREAM_ERROR => "QPACK_ENCODER_STREAM_ERROR",
        error::QPACK_DECODER_STREAM_ERROR => "QPACK_DECODER_STREAM_ERROR",
        _ => "unknown",
    }
}

/// The largest value a variable-length integer holds: 2^62 - 1.
const MAX_VARINT: u64 = (1 << 62) - 1;

/// How many bytes [`put_varint`] writes for `v`.
fn varint_len(v: u64) -> usize {
    match v {
        0..0x40 => 1,
        0x40..0x4000 => 2,
        0x4000..0x4000_0000 => 4,
        _ => 8,
    }
}

/// Appends `v` as a QUIC variable-length integer (the shortest form).
/// Values ≥ 2^62 do not exist on the wire; they are a caller's bug.
pub fn put_varint(out: &mut Vec<u8>, v: u64) {
    // A caller's bug, caught in tests; a release build writes the low 62
    // bits rather than let the top two corrupt the length prefix.
    debug_assert!(v <= MAX_VARINT, "{v} does not fit a QUIC varint");
    let v = v & MAX_VARINT;
    match varint_len(v) {
        1 => out.push(v as u8),
        2 => out.extend_from_slice(&(v as u16 | 0x4000).to_be_bytes()),
        4 => out.extend_from_slice(&(v as u32 | 0x8000_0000).to_be_bytes()),
        _ => out.extend_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes()),
    }
}

/// Reads a variable-length integer at the start of `buf`: the value and
/// its length, or `None` when `buf` ends before it does.
pub fn get_varint(buf: &[u8]) -> Option<(u64, usize)> {
    // The two top bits of the first byte give the length (1, 2, 4, 8);
    // RFC 9000 §16 lets a sender use a longer form than needed, so any
    // form is taken.
    let first = *buf.first()?;
    let len = 1usize << (first >> 6);
    let bytes = buf.get(..len)?;
    let v = bytes[1..]
        .iter()
        .fold(u64::from(first & 0x3f), |v, &b| (v << 8) | u64::from(b));
    Some((v, len))
}

/// Appends a frame header: type and payload length.
fn put_header(out: &mut Vec<u8>, kind: u64, len: usize) {
    put_varint(out, kind);
    put_varint(out, len as u64);
}

/// What either side writes first on its control stream: the stream type
/// (0x00) and a SETTINGS frame announcing a QPACK table of 0 bytes, no
/// blocked streams, and [`MAX_HEADERS_BYTES`] as the field section limit.
pub fn control_preamble() -> Vec<u8> {
    let mut payload = Vec::with_capacity(16);
    for (id, value) in [
        (setting::QPACK_MAX_TABLE_CAPACITY, 0),
        (setting::QPACK_BLOCKED_STREAMS, 0),
        (setting::MAX_FIELD_SECTION_SIZE, MAX_HEADERS_BYTES as u64),
    ] {
        put_varint(&mut payload, id);
        put_varint(&mut payload, value);
    }
    let mut out = Vec::with_capacity(payload.len() + 4);
    put_varint(&mut out, stream_type::CONTROL);
    put_header(&mut out, kind::SETTINGS, payload.len());
    out.extend_from_slice(&payload);
    out
}

/// Appends a HEADERS frame carrying `block` (a QPACK field section).
pub fn encode_headers(out: &mut Vec<u8>, block: &[u8]) {
    put_header(out, kind::HEADERS, block.len());
    out.extend_from_slice(block);
}

/// Appends a DATA frame carrying `payload`.
pub fn encode_data(out: &mut Vec<u8>, payload: &[u8]) {
    put_header(out, kind::DATA, payload.len());
    out.extend_from_slice(payload);
}

/// Appends a GOAWAY frame naming `id` (a stream id from a server, a push
/// id from a client).
pub fn encode_goaway(out: &mut Vec<u8>, id: u64) {
    put_header(out, kind::GOAWAY, varint_len(id));
    put_varint(out, id);
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

/// The most bytes of a SETTINGS payload taken. A peer announces a handful
/// of settings (plus perhaps a greasing one); 16 KiB is generous and keeps
/// what a control stream can make the reader buffer small. A longer one is
/// `Malformed` (not `TooLarge`, which names the header section).
const MAX_SETTINGS_BYTES: usize = 16 * 1024;

/// The most bytes of a GOAWAY payload: one varint.
const MAX_GOAWAY_BYTES: usize = 8;

/// The longest frame header: two 8-byte varints.
const MAX_FRAME_HEADER: usize = 16;

/// Where a [`FrameReader`] is within the stream's frames.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum State {
    /// Reading a frame header (its first bytes, if split, in `head`).
    #[default]
    Header,
    /// Inside a DATA frame, `left` payload bytes to go.
    Data { left: u64 },
    /// Skipping the payload of a frame of type `kind`, `left` bytes to go.
    Skip { kind: u64, left: u64 },
    /// Reading the payload of a HEADERS, SETTINGS or GOAWAY frame of `len`
    /// bytes (checked against its cap), handed out whole; the bytes of a
    /// payload split across pieces are gathered in `buf`.
    Whole { kind: u64, len: usize },
}

/// Reads frames from one stream's bytes, fed in order in pieces of any
/// size. It keeps bytes only while a frame header, a HEADERS, SETTINGS or
/// GOAWAY frame is split across pieces (at most [`MAX_HEADERS_BYTES`]);
/// DATA payloads and skipped frames pass through without a copy, so an
/// idle stream's reader holds no heap memory.
///
/// A split frame header is kept inline (at most 16 bytes: a QUIC packet
/// boundary inside one is ordinary, so it costs no allocation); only a
/// split HEADERS, SETTINGS or GOAWAY payload is gathered on the heap, and
/// that buffer is given back on the first call after the frame was handed
/// out (or by [`FrameReader::reset`]). A HEADERS frame that arrives whole
/// is handed out borrowed from the input, not copied.
///
/// A zero-length DATA frame is handed out once, as `Frame::Data(&[])`, so
/// that every call that ends a frame reports one. After an error the
/// stream is to be closed; the reader is only good again after `reset`.
#[derive(Debug, Default)]
pub struct FrameReader {
    state: State,
    /// The first bytes of a frame header split across pieces.
    head: [u8; MAX_FRAME_HEADER],
    /// How many of `head` are filled (0 at a frame boundary).
    head_len: u8,
    /// A split HEADERS, SETTINGS or GOAWAY payload gathered so far.
    buf: Vec<u8>,
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
        // The buffer of a split frame handed out on the last call is no
        // longer borrowed: give its memory back (a split HEADERS frame is
        // the exception; keeping the capacity would make every idle stream
        // that once saw one hold it).
        if !matches!(self.state, State::Whole { .. }) && self.buf.capacity() != 0 {
            self.buf = Vec::new();
        }
        let used = match self.state {
            State::Header => match self.header(input)? {
                Some(used) => used,
                // All of `input` went into the split header.
                None => return Ok((input.len(), None)),
            },
            _ => 0,
        };
        self.payload(input, used)
    }

    /// Reads a frame header from `head` and then `input`; on success sets
    /// the state for its payload and says how many bytes of `input` it
    /// took; `None` when `input` ended first (then it is all in `head`).
    fn header(&mut self, input: &[u8]) -> Result<Option<usize>, FrameError> {
        let had = usize::from(self.head_len);
        let (kind, len, used) = if had == 0 {
            // The usual case: the whole header in this piece, read in place.
            match read_header(input) {
                Some(h) => h,
                None => {
                    // Shorter than a header's maximum, else it would parse.
                    self.head[..input.len()].copy_from_slice(input);
                    self.head_len = input.len() as u8;
                    return Ok(None);
                }
            }
        } else {
            let take = input.len().min(MAX_FRAME_HEADER - had);
            self.head[had..had + take].copy_from_slice(&input[..take]);
            let filled = had + take;
            match read_header(&self.head[..filled]) {
                Some((kind, len, n)) => {
                    self.head_len = 0;
                    // `n` > `had`: `head[..had]` alone did not parse.
                    (kind, len, n - had)
                }
                None => {
                    // `head` is not full (16 bytes always parse), so all
                    // of `input` is in it.
                    self.head_len = filled as u8;
                    return Ok(None);
                }
            }
        };
        self.state = match kind {
            kind::DATA => State::Data { left: len },
            kind::HEADERS => {
                // Judged on the declared length, before a byte is kept.
                if len > MAX_HEADERS_BYTES as u64 {
                    return Err(FrameError::TooLarge);
                }
                State::Whole {
                    kind,
                    len: len as usize,
                }
            }
            kind::SETTINGS if len > MAX_SETTINGS_BYTES as u64 => return Err(FrameError::Malformed),
            kind::GOAWAY if len > MAX_GOAWAY_BYTES as u64 => return Err(FrameError::Malformed),
            kind::SETTINGS | kind::GOAWAY => State::Whole {
                kind,
                len: len as usize,
            },
            // Everything else, HTTP/2's types (H3_FRAME_UNEXPECTED, the
            // caller's call) and reserved greasing types included, is
            // skipped unread.
            _ => State::Skip { kind, left: len },
        };
        Ok(Some(used))
    }

    /// Goes on with the current frame's payload from `input[used..]`.
    fn payload<'a>(&'a mut self, input: &'a [u8], used: usize) -> Result<(usize, Option<Frame<'a>>), FrameError> {
        let rest = &input[used..];
        match self.state {
            State::Header => Ok((used, None)),
            State::Data { left } => {
                let take = left.min(rest.len() as u64) as usize;
                if take == 0 && left != 0 {
                    // The header ended the input; nothing of the payload yet.
                    return Ok((used, None));
                }
                let left = left - take as u64;
                self.state = if left == 0 { State::Header } else { State::Data { left } };
                Ok((used + take, Some(Frame::Data(&rest[..take]))))
            }
            State::Skip { kind, left } => {
                let take = left.min(rest.len() as u64) as usize;
                let left = left - take as u64;
                if left == 0 {
                    self.state = State::Header;
                    Ok((used + take, Some(Frame::Other(kind))))
                } else {
                    self.state = State::Skip { kind, left };
                    Ok((used + take, None))
                }
            }
            State::Whole { kind, len } => {
                if self.buf.is_empty() && rest.len() >= len {
                    // Whole in this piece: borrowed, not copied.
                    self.state = State::Header;
                    return Ok((used + len, Some(whole(kind, &rest[..len])?)));
                }
                let take = (len - self.buf.len()).min(rest.len());
                self.buf.extend_from_slice(&rest[..take]);
                if self.buf.len() < len {
                    return Ok((used + take, None));
                }
                self.state = State::Header;
                Ok((used + take, Some(whole(kind, &self.buf)?)))
            }
        }
    }

    /// True when the bytes fed so far end exactly at a frame's boundary
    /// (a stream that ends elsewhere ended mid-frame: H3_FRAME_ERROR).
    pub fn at_boundary(&self) -> bool {
        self.state == State::Header && self.head_len == 0
    }

    /// Forgets everything (the stream is reused for another request) and
    /// gives back the buffer's memory.
    pub fn reset(&mut self) {
        self.state = State::Header;
        self.head_len = 0;
        self.buf = Vec::new();
    }
}

/// A frame header at the start of `buf`: type, length and its size.
fn read_header(buf: &[u8]) -> Option<(u64, u64, usize)> {
    let (kind, a) = get_varint(buf)?;
    let (len, b) = get_varint(&buf[a..])?;
    Some((kind, len, a + b))
}

/// A HEADERS, SETTINGS or GOAWAY frame from its whole payload.
fn whole(kind: u64, payload: &[u8]) -> Result<Frame<'_>, FrameError> {
    match kind {
        kind::HEADERS => Ok(Frame::Headers(payload)),
        kind::GOAWAY => match get_varint(payload) {
            Some((id, n)) if n == payload.len() => Ok(Frame::Goaway(id)),
            _ => Err(FrameError::Malformed),
        },
        _ => {
            // SETTINGS: pairs to the end, the last one not cut short. What
            // the identifiers mean (duplicates, HTTP/2's) is the caller's.
            let mut pairs = Vec::with_capacity(4);
            let mut at = 0;
            while at < payload.len() {
                let (id, a) = get_varint(&payload[at..]).ok_or(FrameError::Malformed)?;
                let (value, b) = get_varint(&payload[at + a..]).ok_or(FrameError::Malformed)?;
                pairs.push((id, value));
                at += a + b;
            }
            Ok(Frame::Settings(pairs))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame as a test compares it: DATA pieces are joined by `read_all`.
    #[derive(Debug, PartialEq, Eq)]
    enum Owned {
        Headers(Vec<u8>),
        Data(Vec<u8>),
        Settings(Vec<(u64, u64)>),
        Goaway(u64),
        Other(u64),
    }

    /// Feeds `bytes` in pieces of `piece` bytes; the frames, consecutive
    /// DATA pieces of one frame joined, and whether it ended at a boundary.
    fn read_all(bytes: &[u8], piece: usize) -> Result<(Vec<Owned>, bool), FrameError> {
        let mut r = FrameReader::new();
        let mut out = Vec::new();
        let mut data: Option<Vec<u8>> = None;
        for chunk in bytes.chunks(piece) {
            let mut at = 0;
            while at < chunk.len() {
                let (n, f) = r.next(&chunk[at..])?;
                assert!(n > 0 || f.is_some(), "no progress at {at} of {chunk:?}");
                at += n;
                let Some(f) = f else {
                    assert_eq!(at, chunk.len(), "None with bytes left");
                    continue;
                };
                if let Frame::Data(d) = f {
                    data.get_or_insert_with(Vec::new).extend_from_slice(d);
                    continue;
                }
                out.extend(data.take().map(Owned::Data));
                out.push(match f {
                    Frame::Headers(h) => Owned::Headers(h.to_vec()),
                    Frame::Settings(s) => Owned::Settings(s),
                    Frame::Goaway(id) => Owned::Goaway(id),
                    Frame::Other(t) => Owned::Other(t),
                    Frame::Data(_) => unreachable!(),
                });
            }
        }
        out.extend(data.take().map(Owned::Data));
        Ok((out, r.at_boundary()))
    }

    fn varint(v: u64) -> Vec<u8> {
        let mut b = Vec::new();
        put_varint(&mut b, v);
        b
    }

    #[test]
    fn varints_round_trip_at_every_boundary() {
        let cases = [
            (0, 1),
            (63, 1),
            (64, 2),
            (16_383, 2),
            (16_384, 4),
            ((1 << 30) - 1, 4),
            (1 << 30, 8),
            ((1 << 62) - 1, 8),
        ];
        for (v, len) in cases {
            let b = varint(v);
            assert_eq!(b.len(), len, "{v}");
            assert_eq!(varint_len(v), len, "{v}");
            assert_eq!(get_varint(&b), Some((v, len)), "{v}");
            assert_eq!(get_varint(&b[..len - 1]), None, "{v} cut short");
        }
    }

    #[test]
    fn varints_decode_rfc_9000_a_1_examples() {
        let examples: [(&[u8], u64); 5] = [
            (
                &[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c],
                151_288_809_941_952_652,
            ),
            (&[0x9d, 0x7f, 0x3e, 0x7d], 494_878_333),
            (&[0x7b, 0xbd], 15_293),
            (&[0x25], 37),
            // The same 37 in a two-byte form: allowed, and read.
            (&[0x40, 0x25], 37),
        ];
        for (bytes, v) in examples {
            assert_eq!(get_varint(bytes), Some((v, bytes.len())));
        }
        // Encoding takes the shortest form.
        assert_eq!(
            varint(151_288_809_941_952_652),
            [0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c]
        );
        assert_eq!(varint(494_878_333), [0x9d, 0x7f, 0x3e, 0x7d]);
        assert_eq!(varint(15_293), [0x7b, 0xbd]);
        assert_eq!(varint(37), [0x25]);
        assert_eq!(get_varint(&[]), None);
    }

    #[test]
    fn error_names() {
        assert_eq!(error_name(error::NO_ERROR), "H3_NO_ERROR");
        assert_eq!(error_name(error::EXCESSIVE_LOAD), "H3_EXCESSIVE_LOAD");
        assert_eq!(error_name(error::VERSION_FALLBACK), "H3_VERSION_FALLBACK");
        assert_eq!(
            error_name(error::QPACK_DECODER_STREAM_ERROR),
            "QPACK_DECODER_STREAM_ERROR"
        );
        assert_eq!(error_name(0x1f * 7 + 0x21), "unknown", "a reserved code");
        assert_eq!(error_name(0x111), "unknown");
        assert_eq!(FrameError::TooLarge.code(), error::EXCESSIVE_LOAD);
    }

    #[test]
    fn the_control_preamble_is_a_stream_type_and_settings() {
        let p = control_preamble();
        assert_eq!(get_varint(&p), Some((stream_type::CONTROL, 1)));
        let (frames, boundary) = read_all(&p[1..], 100).unwrap();
        assert!(boundary);
        let want = vec![
            (setting::QPACK_MAX_TABLE_CAPACITY, 0),
            (setting::QPACK_BLOCKED_STREAMS, 0),
            (setting::MAX_FIELD_SECTION_SIZE, MAX_HEADERS_BYTES as u64),
        ];
        assert_eq!(frames, [Owned::Settings(want)]);
    }

    /// A stream with every kind of frame: big and empty DATA, a greasing
    /// frame, PRIORITY_UPDATE, an HTTP/2 type, GOAWAY, SETTINGS.
    fn sample() -> (Vec<u8>, Vec<Owned>) {
        let mut b = Vec::new();
        let block: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
        encode_headers(&mut b, &block);
        let body: Vec<u8> = (0..20_000u32).map(|i| (i * 7) as u8).collect();
        encode_data(&mut b, &body);
        let grease = 0x1f * 3 + 0x21;
        put_header(&mut b, grease, 70);
        b.extend_from_slice(&[0xaa; 70]);
        encode_data(&mut b, b"");
        put_header(&mut b, 0xf0700, 5); // PRIORITY_UPDATE
        b.extend_from_slice(b"u=1,i");
        put_header(&mut b, 0x8, 4); // HTTP/2's WINDOW_UPDATE
        b.extend_from_slice(&[0, 0, 0, 1]);
        put_header(&mut b, kind::SETTINGS, 3);
        b.extend_from_slice(&[0x06, 0x44, 0x00]);
        encode_goaway(&mut b, 1 << 40);
        encode_data(&mut b, b"tail");
        let frames = vec![
            Owned::Headers(block),
            Owned::Data(body),
            Owned::Other(grease),
            // The empty DATA frame's one empty piece.
            Owned::Data(vec![]),
            Owned::Other(0xf0700),
            Owned::Other(0x8),
            Owned::Settings(vec![(6, 1024)]),
            Owned::Goaway(1 << 40),
            Owned::Data(b"tail".to_vec()),
        ];
        (b, frames)
    }

    #[test]
    fn whole_or_one_byte_at_a_time_gives_the_same_frames() {
        let (bytes, want) = sample();
        for piece in [bytes.len(), 1, 2, 3, 7, 1000] {
            let (got, boundary) = read_all(&bytes, piece).unwrap();
            assert_eq!(got, want, "in pieces of {piece}");
            assert!(boundary);
        }
    }

    #[test]
    fn data_and_whole_headers_are_not_copied() {
        let mut b = Vec::new();
        encode_headers(&mut b, b"\0\0\xd1");
        encode_data(&mut b, b"body");
        let mut r = FrameReader::new();
        let (n, f) = r.next(&b).unwrap();
        let Some(Frame::Headers(h)) = f else { panic!("{f:?}") };
        assert_eq!(h.as_ptr(), b[2..].as_ptr());
        let (m, f) = r.next(&b[n..]).unwrap();
        let Some(Frame::Data(d)) = f else { panic!("{f:?}") };
        assert_eq!(d.as_ptr(), b[n + 2..].as_ptr());
        assert_eq!(n + m, b.len());
        assert_eq!(r.buf.capacity(), 0);
    }

    #[test]
    fn a_huge_headers_frame_is_refused_before_buffering() {
        let mut b = Vec::new();
        put_header(&mut b, kind::HEADERS, MAX_HEADERS_BYTES + 1);
        b.extend_from_slice(&[0; 10]);
        let mut r = FrameReader::new();
        assert_eq!(r.next(&b), Err(FrameError::TooLarge));
        assert_eq!(r.buf.capacity(), 0);
        // The largest taken is MAX_HEADERS_BYTES.
        let mut b = Vec::new();
        put_header(&mut b, kind::HEADERS, MAX_HEADERS_BYTES);
        let mut r = FrameReader::new();
        assert_eq!(r.next(&b), Ok((b.len(), None)));
        // A declared 2^62-1 byte frame of an unknown type is just skipped.
        let mut b = Vec::new();
        put_header(&mut b, 0x21, (1 << 62) - 1);
        b.extend_from_slice(&[0; 100]);
        assert_eq!(read_all(&b, 7).unwrap(), (vec![], false));
    }

    #[test]
    fn bad_settings_and_goaway_are_malformed() {
        let cases: [(u64, &[u8]); 5] = [
            (kind::GOAWAY, &[0x40]),         // the varint runs past the payload
            (kind::GOAWAY, &[0x01, 0x02]),   // bytes after the id
            (kind::GOAWAY, &[]),             // no id
            (kind::SETTINGS, &[0x06]),       // an identifier with no value
            (kind::SETTINGS, &[0x06, 0x80]), // a value cut short
        ];
        for (k, payload) in cases {
            let mut b = Vec::new();
            put_header(&mut b, k, payload.len());
            b.extend_from_slice(payload);
            assert_eq!(
                read_all(&b, b.len()).unwrap_err(),
                FrameError::Malformed,
                "{k} {payload:?}"
            );
            assert_eq!(
                read_all(&b, 1).unwrap_err(),
                FrameError::Malformed,
                "{k} {payload:?} by bytes"
            );
        }
        let mut b = Vec::new();
        put_header(&mut b, kind::SETTINGS, MAX_SETTINGS_BYTES + 1);
        assert_eq!(FrameReader::new().next(&b), Err(FrameError::Malformed));
        let mut b = Vec::new();
        put_header(&mut b, kind::GOAWAY, 9);
        assert_eq!(FrameReader::new().next(&b), Err(FrameError::Malformed));
        // An empty SETTINGS frame is fine.
        let mut b = Vec::new();
        put_header(&mut b, kind::SETTINGS, 0);
        assert_eq!(read_all(&b, 1).unwrap(), (vec![Owned::Settings(vec![])], true));
    }

    #[test]
    fn a_stream_cut_mid_frame_is_not_at_a_boundary() {
        let (bytes, _) = sample();
        let mut r = FrameReader::new();
        assert!(r.at_boundary());
        let (n, _) = r.next(&bytes[..1]).unwrap();
        assert_eq!(n, 1);
        assert!(!r.at_boundary(), "inside a frame header");
        // Every cut inside the first (HEADERS) frame, the DATA after it, and
        // right at the boundary between them.
        let headers_end = 1 + 2 + 300; // type, length, block
        for cut in [3, 100, headers_end - 1, headers_end + 1, headers_end + 10] {
            let (_, boundary) = read_all(&bytes[..cut], 5).unwrap();
            assert!(!boundary, "cut at {cut}");
        }
        assert!(read_all(&bytes[..headers_end], 5).unwrap().1);
    }

    #[test]
    fn a_split_payload_is_gathered_and_its_buffer_given_back() {
        let mut b = Vec::new();
        encode_headers(&mut b, &[9; 40]);
        let mut r = FrameReader::new();
        assert_eq!(r.next(&b[..10]).unwrap(), (10, None));
        assert!(r.buf.capacity() > 0);
        let (n, f) = r.next(&b[10..]).unwrap();
        assert_eq!((n, f), (b.len() - 10, Some(Frame::Headers(&[9; 40]))));
        assert!(r.at_boundary());
        assert_eq!(r.next(&[]).unwrap(), (0, None));
        assert_eq!(r.buf.capacity(), 0, "the next call gives the buffer back");
    }

    #[test]
    fn reset_forgets_a_half_read_frame() {
        let (bytes, want) = sample();
        let mut r = FrameReader::new();
        r.next(&bytes[..50]).unwrap();
        assert!(!r.at_boundary());
        r.reset();
        assert!(r.at_boundary());
        assert_eq!(r.buf.capacity(), 0);
        let (n, f) = r.next(&bytes).unwrap();
        assert_eq!(n, 303);
        assert_eq!(f, Some(Frame::Headers(&bytes[3..303])));
        assert_eq!(want[0], Owned::Headers(bytes[3..303].to_vec()));
    }

    proptest::proptest! {
        /// Any bytes, in any pieces: frames or an error, never a panic,
        /// and every call either makes progress or hands out a frame.
        #[test]
        fn arbitrary_bytes_never_panic(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600),
            piece in 1usize..40,
        ) {
            let _ = read_all(&bytes, piece);
        }
    }
}
