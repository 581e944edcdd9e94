//! WebSocket (RFC 6455) on the wire, sans I/O: frame heads parsed and
//! written in both directions, a streaming decoder, close codes, UTF-8
//! checked across fragments, and the opening handshake's key and accept
//! values.
//!
//! Why a small codec here rather than a crate: soakd holds tens of
//! thousands of sockets per process and an idle one may keep only its
//! state (`tungstenite` allocates 128 KiB of buffers per socket). The
//! [`Decoder`] therefore never buffers a payload: it hands out each chunk
//! of a data message as it arrives (the caller counts, checks or echoes
//! it), keeps only the message's length, kind and an incomplete UTF-8
//! character between reads, and leaves an incomplete frame head or control
//! frame (at most [`MAX_CONTROL_FRAME`] bytes) unconsumed for the caller
//! to carry. Both sides use it: the engine decodes as a [`Role::Client`]
//! (server frames must be unmasked), the built-in target as a
//! [`Role::Server`] (client frames must be masked, and are unmasked in
//! place by [`Decoder::decode_mut`]).
//!
//! No extension is ever negotiated (permessage-deflate is not offered), so
//! any reserved bit is a protocol error, as the RFC says (section 5.2).

use ring::digest;

mod handshake;
pub use handshake::{HandshakeError, Upgrade, UpgradeRefused, accept_request, check_response, render_accept};

/// The longest frame head: 2 bytes, an 8-byte length, a 4-byte mask key.
pub const MAX_HEAD: usize = 14;
/// The longest control frame payload (RFC 6455 section 5.5).
pub const MAX_CONTROL_PAYLOAD: usize = 125;
/// The longest control frame, head and payload: what a caller may have to
/// carry between reads at most.
pub const MAX_CONTROL_FRAME: usize = MAX_HEAD + MAX_CONTROL_PAYLOAD;
/// The GUID the handshake's accept value is derived with (section 1.3).
pub const GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
/// Length of a `Sec-WebSocket-Key` value (16 random bytes in base64).
pub const KEY_LEN: usize = 24;
/// Length of a `Sec-WebSocket-Accept` value (a SHA-1 digest in base64).
pub const ACCEPT_LEN: usize = 28;

/// A frame's opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opcode {
    /// A further fragment of a data message.
    Continuation = 0,
    /// A text message's first (or only) frame.
    Text = 1,
    /// A binary message's first (or only) frame.
    Binary = 2,
    /// The closing handshake.
    Close = 8,
    /// A ping (answer it with a pong carrying the same payload).
    Ping = 9,
    /// A pong.
    Pong = 10,
}

impl Opcode {
    /// The opcode with that 4-bit value; `None` for the reserved ones.
    pub fn from_bits(bits: u8) -> Option<Opcode> {
        Some(match bits {
            0 => Opcode::Continuation,
            1 => Opcode::Text,
            2 => Opcode::Binary,
            8 => Opcode::Close,
            9 => Opcode::Ping,
            10 => Opcode::Pong,
            _ => return None,
        })
    }

    /// True for close, ping and pong.
    pub fn is_control(self) -> bool {
        self as u8 >= 8
    }
}

/// Which end decodes: a client reads the server's unmasked frames, a
/// server reads the client's masked ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Decodes server frames (a masked one is an error).
    Client,
    /// Decodes client frames (an unmasked one is an error).
    Server,
}

/// A data message's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageKind {
    /// UTF-8 text (validated).
    Text,
    /// Binary.
    Binary,
}

/// What is wrong with the bytes received. Each maps to the close code the
/// receiver sends before it fails the connection ([`WsError::close_code`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WsError {
    /// A reserved bit is set (no extension was negotiated).
    #[error("a reserved bit is set")]
    Reserved,
    /// A reserved opcode.
    #[error("unknown opcode {0}")]
    UnknownOpcode(u8),
    /// A control frame is fragmented.
    #[error("a fragmented control frame")]
    FragmentedControl,
    /// A control frame's payload is over 125 bytes.
    #[error("a control frame over 125 bytes")]
    ControlTooLong,
    /// A server sent a masked frame.
    #[error("a masked frame from the server")]
    Masked,
    /// A client sent an unmasked frame.
    #[error("an unmasked frame from the client")]
    Unmasked,
    /// A 64-bit length with its top bit set.
    #[error("a frame length over 2^63")]
    BadLength,
    /// A continuation frame with no message started.
    #[error("a continuation frame outside a message")]
    StrayContinuation,
    /// A new data message before the previous one ended.
    #[error("a new message inside a fragmented one")]
    Interleaved,
    /// A close frame with a one-byte payload.
    #[error("a close frame with a 1-byte payload")]
    BadClosePayload,
    /// A close code no endpoint may send (section 7.4).
    #[error("close code {0} is not allowed on the wire")]
    BadCloseCode(u16),
    /// Text (or a close reason) that is not UTF-8.
    #[error("text that is not UTF-8")]
    InvalidUtf8,
    /// A message over the size limit.
    #[error("a message over the size limit")]
    TooBig,
}

impl WsError {
    /// The code to close with (1002 protocol error, 1007 bad data, 1009
    /// too big).
    pub fn close_code(self) -> u16 {
        match self {
            WsError::InvalidUtf8 => 1007,
            WsError::TooBig => 1009,
            _ => 1002,
        }
    }
}

/// A parsed frame head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHead {
    /// The frame ends its message.
    pub fin: bool,
    /// The three reserved bits (RSV1..3 as bits 2..0).
    pub rsv: u8,
    /// The opcode's 4 bits (see [`Opcode::from_bits`]).
    pub opcode: u8,
    /// The masking key, when the frame is masked.
    pub mask: Option<[u8; 4]>,
    /// Payload length.
    pub len: u64,
    /// Length of the head itself, in bytes.
    pub head_len: usize,
}

/// Parses a frame head from the start of `buf` without judging it;
/// `Ok(None)` when more bytes are needed.
pub fn parse_head(buf: &[u8]) -> Result<Option<FrameHead>, WsError> {
    if buf.len() < 2 {
        return Ok(None);
    }
    let (b0, b1) = (buf[0], buf[1]);
    let masked = b1 & 0x80 != 0;
    let (ext, len7) = match b1 & 0x7f {
        126 => (2, 0),
        127 => (8, 0),
        n => (0, n as u64),
    };
    let head_len = 2 + ext + if masked { 4 } else { 0 };
    if buf.len() < head_len {
        return Ok(None);
    }
    let len = match ext {
        2 => u16::from_be_bytes([buf[2], buf[3]]) as u64,
        8 => {
            let l = u64::from_be_bytes(buf[2..10].try_into().expect("8 bytes"));
            if l >> 63 != 0 {
                return Err(WsError::BadLength);
            }
            l
        }
        _ => len7,
    };
    let mask = masked.then(|| buf[2 + ext..6 + ext].try_into().expect("4 bytes"));
    Ok(Some(FrameHead {
        fin: b0 & 0x80 != 0,
        rsv: (b0 >> 4) & 7,
        opcode: b0 & 0x0f,
        mask,
        len,
        head_len,
    }))
}

/// Writes a frame head into `out`; returns its length. A client passes a
/// fresh `mask` key for each frame (and masks the payload with
/// [`apply_mask`]); a server passes `None`.
pub fn encode_head(out: &mut [u8; MAX_HEAD], fin: bool, opcode: Opcode, len: u64, mask: Option<[u8; 4]>) -> usize {
    out[0] = if fin { 0x80 } else { 0 } | opcode as u8;
    let m = if mask.is_some() { 0x80 } else { 0 };
    let mut at = if len < 126 {
        out[1] = m | len as u8;
        2
    } else if len <= u16::MAX as u64 {
        out[1] = m | 126;
        out[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        4
    } else {
        out[1] = m | 127;
        out[2..10].copy_from_slice(&len.to_be_bytes());
        10
    };
    if let Some(key) = mask {
        out[at..at + 4].copy_from_slice(&key);
        at += 4;
    }
    at
}

/// Bytes of masking keys drawn from the operating system at a time: one
/// `getrandom` per 64 frames, so a key costs no syscall on the hot path.
const MASK_POOL: usize = 256;

thread_local! {
    /// This thread's unused masking-key bytes and the next one to hand out.
    static MASK_KEYS: std::cell::RefCell<([u8; MASK_POOL], usize)> =
        const { std::cell::RefCell::new(([0; MASK_POOL], MASK_POOL)) };
}

/// A masking key for one client frame. RFC 6455 §5.3 asks for keys "from a
/// strong source of entropy" that a server or proxy cannot predict (a
/// predictable mask lets a page's script steer the bytes on the wire, the
/// cache-poisoning attack the mask exists to stop), so they come from the
/// operating system's generator (`ring::rand::SystemRandom`), drawn in
/// batches per thread, not from the load generator's fast PRNG.
pub fn mask_key() -> [u8; 4] {
    use ring::rand::SecureRandom as _;
    MASK_KEYS.with(|cell| {
        let (pool, next) = &mut *cell.borrow_mut();
        if *next + 4 > MASK_POOL {
            ring::rand::SystemRandom::new()
                .fill(pool)
                .expect("the operating system's random generator answers");
            *next = 0;
        }
        let key = [pool[*next], pool[*next + 1], pool[*next + 2], pool[*next + 3]];
        *next += 4;
        key
    })
}

/// Masks (or unmasks: the same XOR) `data`, which starts `offset` bytes
/// into its frame's payload.
#[inline]
pub fn apply_mask(data: &mut [u8], key: [u8; 4], offset: usize) {
    let mut k = [0u8; 4];
    for (i, b) in k.iter_mut().enumerate() {
        *b = key[(offset + i) & 3];
    }
    let word = u32::from_ne_bytes(k);
    let mut chunks = data.chunks_exact_mut(4);
    for c in &mut chunks {
        let v = u32::from_ne_bytes([c[0], c[1], c[2], c[3]]) ^ word;
        c.copy_from_slice(&v.to_ne_bytes());
    }
    for (i, b) in chunks.into_remainder().iter_mut().enumerate() {
        *b ^= k[i];
    }
}

/// Appends one whole frame (head and, when `mask` is given, the masked
/// payload) to `out`.
pub fn encode_frame(out: &mut Vec<u8>, fin: bool, opcode: Opcode, payload: &[u8], mask: Option<[u8; 4]>) {
    let mut head = [0u8; MAX_HEAD];
    let n = encode_head(&mut head, fin, opcode, payload.len() as u64, mask);
    out.extend_from_slice(&head[..n]);
    let start = out.len();
    out.extend_from_slice(payload);
    if let Some(key) = mask {
        apply_mask(&mut out[start..], key, 0);
    }
}

/// Writes a close frame's payload (the code, then as much of `reason` as
/// fits in a control frame) into `out`; returns its length.
pub fn close_payload(out: &mut [u8; MAX_CONTROL_PAYLOAD], code: u16, reason: &str) -> usize {
    out[..2].copy_from_slice(&code.to_be_bytes());
    // Cut the reason at a character boundary so it stays UTF-8.
    let mut n = reason.len().min(MAX_CONTROL_PAYLOAD - 2);
    while !reason.is_char_boundary(n) {
        n -= 1;
    }
    out[2..2 + n].copy_from_slice(&reason.as_bytes()[..n]);
    2 + n
}

/// True for a close code an endpoint may put in a close frame (section
/// 7.4): the defined ones except those reserved for local use (1004, 1005,
/// 1006, 1015), and 3000..=4999 (libraries and applications).
pub fn close_code_allowed(code: u16) -> bool {
    matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999)
}

name_table! {
    /// Close codes as metric labels and report keys: the RFC's and IANA's
    /// defined codes by name, everything else `other` (a closed set).
    pub enum CloseName {
        /// 1000: the purpose is fulfilled.
        Normal = "normal",
        /// 1001: the server is going away (restart, page left).
        GoingAway = "going_away",
        /// 1002: a protocol error.
        ProtocolError = "protocol_error",
        /// 1003: a data kind it cannot accept.
        Unsupported = "unsupported_data",
        /// 1005: a close frame without a code (never on the wire as a code).
        NoStatus = "no_status",
        /// 1006: closed without a close frame (never on the wire).
        Abnormal = "abnormal",
        /// 1007: data inconsistent with its type (text not UTF-8).
        InvalidPayload = "invalid_payload",
        /// 1008: a policy was violated.
        PolicyViolation = "policy_violation",
        /// 1009: a message too big to process.
        TooBig = "message_too_big",
        /// 1010: an extension the client needed was not negotiated.
        MandatoryExtension = "mandatory_extension",
        /// 1011: the server hit an unexpected condition.
        InternalError = "internal_error",
        /// 1012: the service is restarting.
        ServiceRestart = "service_restart",
        /// 1013: try again later.
        TryAgainLater = "try_again_later",
        /// 1014: a gateway got a bad answer upstream.
        BadGateway = "bad_gateway",
        /// Any other code (3000..=4999, or one not allowed).
        Other = "other",
    }
}

impl CloseName {
    /// The name of `code` (`None`: a close frame without a code, 1005).
    pub fn of(code: Option<u16>) -> CloseName {
        match code {
            None | Some(1005) => CloseName::NoStatus,
            Some(1000) => CloseName::Normal,
            Some(1001) => CloseName::GoingAway,
            Some(1002) => CloseName::ProtocolError,
            Some(1003) => CloseName::Unsupported,
            Some(1006) => CloseName::Abnormal,
            Some(1007) => CloseName::InvalidPayload,
            Some(1008) => CloseName::PolicyViolation,
            Some(1009) => CloseName::TooBig,
            Some(1010) => CloseName::MandatoryExtension,
            Some(1011) => CloseName::InternalError,
            Some(1012) => CloseName::ServiceRestart,
            Some(1013) => CloseName::TryAgainLater,
            Some(1014) => CloseName::BadGateway,
            Some(_) => CloseName::Other,
        }
    }
}

/// UTF-8 checked across chunk boundaries: only an incomplete character
/// (at most 3 bytes) is kept between chunks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Utf8 {
    /// The incomplete character's bytes so far.
    pending: [u8; 3],
    /// How many of `pending` are used.
    have: u8,
}

/// The length of the character a UTF-8 lead byte starts (0: not a lead).
fn char_width(lead: u8) -> usize {
    match lead {
        0x00..=0x7f => 1,
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => 0,
    }
}

impl Utf8 {
    /// Checks the next chunk. An error as soon as the bytes so far cannot
    /// begin valid UTF-8.
    pub fn feed(&mut self, mut bytes: &[u8]) -> Result<(), WsError> {
        if self.have > 0 {
            let have = self.have as usize;
            let width = char_width(self.pending[0]);
            let take = (width - have).min(bytes.len());
            let mut ch = [0u8; 4];
            ch[..have].copy_from_slice(&self.pending[..have]);
            ch[have..have + take].copy_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if have + take < width {
                // Still incomplete: it must still be a valid beginning.
                check_prefix(&ch[..have + take])?;
                self.pending[..have + take].copy_from_slice(&ch[..have + take]);
                self.have = (have + take) as u8;
                return Ok(());
            }
            std::str::from_utf8(&ch[..width]).map_err(|_| WsError::InvalidUtf8)?;
            self.have = 0;
        }
        match std::str::from_utf8(bytes) {
            Ok(_) => Ok(()),
            Err(e) if e.error_len().is_none() => {
                // Cut short at the end: keep the tail for the next chunk.
                let tail = &bytes[e.valid_up_to()..];
                check_prefix(tail)?;
                self.pending[..tail.len()].copy_from_slice(tail);
                self.have = tail.len() as u8;
                Ok(())
            }
            Err(_) => Err(WsError::InvalidUtf8),
        }
    }

    /// The text ended: an incomplete character is an error. Resets.
    pub fn finish(&mut self) -> Result<(), WsError> {
        let complete = self.have == 0;
        self.have = 0;
        if complete { Ok(()) } else { Err(WsError::InvalidUtf8) }
    }
}

/// Errors unless `part` (shorter than its character) can begin a valid
/// character: `from_utf8` reports a truncated but so far valid sequence
/// with no error length.
fn check_prefix(part: &[u8]) -> Result<(), WsError> {
    match std::str::from_utf8(part) {
        Err(e) if e.error_len().is_none() && e.valid_up_to() == 0 => Ok(()),
        Ok(_) if part.is_empty() => Ok(()),
        _ => Err(WsError::InvalidUtf8),
    }
}

/// What the decoder found in the bytes given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// Every byte given was used, or what is left is an incomplete frame
    /// head or control frame that the caller keeps and gives again, in
    /// front of the next bytes.
    NeedMore,
    /// A chunk of a data message (`fin`: the message ends with it; an
    /// empty final chunk is possible). Text was checked as UTF-8.
    Data {
        /// The payload bytes (unmasked).
        payload: &'a [u8],
        /// Text or binary.
        kind: MessageKind,
        /// The message is complete with this chunk.
        fin: bool,
    },
    /// A ping; answer with a pong carrying `payload`.
    Ping(&'a [u8]),
    /// A pong.
    Pong(&'a [u8]),
    /// A close frame: its code (`None`: no code, read as 1005) and reason.
    Close {
        /// The close code.
        code: Option<u16>,
        /// The reason text (UTF-8 checked).
        reason: &'a str,
    },
}

/// A streaming frame decoder for one connection; see the module doc. Its
/// state is a few words: no payload is ever kept.
#[derive(Clone, Copy, Debug)]
pub struct Decoder {
    /// Payload bytes left of the current data frame.
    remaining: u64,
    /// Bytes of the current message so far (bounded by `max`).
    msg_len: u32,
    /// The largest message accepted (a limit over 4 GiB is read as 4 GiB:
    /// the state stays small, one of these lives in every connection).
    max: u32,
    /// The current frame's mask key (server role).
    key: [u8; 4],
    /// How far into the current frame's payload (mod 4, server role).
    key_pos: u8,
    /// The current data frame is the message's last.
    fin: bool,
    /// Inside a data frame's payload.
    in_frame: bool,
    /// The message in progress, if any.
    kind: Option<MessageKind>,
    role: Role,
    utf8: Utf8,
}

impl Decoder {
    /// A decoder for `role` accepting messages up to `max_message` bytes.
    pub fn new(role: Role, max_message: u64) -> Decoder {
        Decoder {
            remaining: 0,
            msg_len: 0,
            max: max_message.min(u32::MAX as u64) as u32,
            key: [0; 4],
            key_pos: 0,
            fin: false,
            in_frame: false,
            kind: None,
            role,
            utf8: Utf8::default(),
        }
    }

    /// The current data frame's payload bytes still to come (0 between
    /// frames) and whether that frame is its message's last: what a server
    /// needs to echo a message in the client's own frames (the target).
    pub fn frame_left(&self) -> (u64, bool) {
        (if self.in_frame { self.remaining } else { 0 }, self.fin)
    }

    /// Forgets the connection's stream (keeps role and limit).
    pub fn reset(&mut self) {
        *self = Decoder::new(self.role, self.max as u64);
    }

    /// True between messages (no data message started).
    pub fn is_idle(&self) -> bool {
        self.kind.is_none()
    }

    /// Decodes from the start of `buf` (client role: server frames are
    /// never masked, so nothing is changed); returns how many bytes were
    /// used and what they made. Call again with the rest until
    /// [`Event::NeedMore`]. After an error the stream is unusable.
    pub fn decode<'a>(&mut self, buf: &'a [u8]) -> Result<(usize, Event<'a>), WsError> {
        if self.role == Role::Server {
            // A server must unmask; this path only serves the client.
            return Err(WsError::Unmasked);
        }
        let (used, step) = self.step(buf)?;
        let event = step.event(buf)?;
        self.check(&event)?;
        Ok((used, event))
    }

    /// As [`Decoder::decode`], unmasking payloads in place (server role).
    pub fn decode_mut<'a>(&mut self, buf: &'a mut [u8]) -> Result<(usize, Event<'a>), WsError> {
        let (used, step) = self.step(buf)?;
        if let Some((key, pos, start, end)) = step.mask {
            apply_mask(&mut buf[start..end], key, pos);
        }
        let buf: &'a [u8] = buf;
        let event = step.event(buf)?;
        self.check(&event)?;
        Ok((used, event))
    }

    /// Checks a text chunk just decoded against the message's UTF-8 so far.
    fn check(&mut self, event: &Event<'_>) -> Result<(), WsError> {
        if let Event::Data {
            payload,
            kind: MessageKind::Text,
            fin,
        } = *event
        {
            self.utf8.feed(payload)?;
            if fin {
                self.utf8.finish()?;
            }
        }
        Ok(())
    }

    /// One step over `buf`, payloads still masked: how much was used and
    /// where its payload lies.
    fn step(&mut self, buf: &[u8]) -> Result<(usize, Step), WsError> {
        let mut at = 0;
        loop {
            if self.in_frame {
                let n = (self.remaining.min((buf.len() - at) as u64)) as usize;
                if n == 0 && self.remaining > 0 {
                    return Ok((at, Step::need_more()));
                }
                let kind = self.kind.expect("a message in progress");
                let mask = (self.role == Role::Server).then_some((self.key, self.key_pos as usize, at, at + n));
                self.key_pos = ((self.key_pos as usize + n) & 3) as u8;
                self.remaining -= n as u64;
                let fin = self.remaining == 0 && self.fin;
                if self.remaining == 0 {
                    self.in_frame = false;
                    if fin {
                        self.kind = None;
                        self.msg_len = 0;
                    }
                }
                return Ok((
                    at + n,
                    Step {
                        what: StepKind::Data { kind, fin },
                        start: at,
                        end: at + n,
                        mask,
                    },
                ));
            }
            let Some(head) = parse_head(&buf[at..])? else {
                return Ok((at, Step::need_more()));
            };
            if head.rsv != 0 {
                return Err(WsError::Reserved);
            }
            let op = Opcode::from_bits(head.opcode).ok_or(WsError::UnknownOpcode(head.opcode))?;
            match (self.role, head.mask) {
                (Role::Client, Some(_)) => return Err(WsError::Masked),
                (Role::Server, None) => return Err(WsError::Unmasked),
                _ => {}
            }
            if op.is_control() {
                if !head.fin {
                    return Err(WsError::FragmentedControl);
                }
                if head.len > MAX_CONTROL_PAYLOAD as u64 {
                    return Err(WsError::ControlTooLong);
                }
                let end = at + head.head_len + head.len as usize;
                if buf.len() < end {
                    // The caller carries the whole frame (at most
                    // MAX_CONTROL_FRAME bytes) to the next read.
                    return Ok((at, Step::need_more()));
                }
                let start = at + head.head_len;
                let what = match op {
                    Opcode::Ping => StepKind::Ping,
                    Opcode::Pong => StepKind::Pong,
                    _ => StepKind::Close,
                };
                return Ok((
                    end,
                    Step {
                        what,
                        start,
                        end,
                        mask: head.mask.map(|k| (k, 0, start, end)),
                    },
                ));
            }
            match (op, self.kind) {
                (Opcode::Continuation, None) => return Err(WsError::StrayContinuation),
                (Opcode::Text | Opcode::Binary, Some(_)) => return Err(WsError::Interleaved),
                (Opcode::Text, None) => self.kind = Some(MessageKind::Text),
                (Opcode::Binary, None) => self.kind = Some(MessageKind::Binary),
                _ => {}
            }
            if head.len > (self.max - self.msg_len) as u64 {
                return Err(WsError::TooBig);
            }
            // At most `max`, so it fits.
            self.msg_len += head.len as u32;
            self.remaining = head.len;
            self.fin = head.fin;
            self.key = head.mask.unwrap_or_default();
            self.key_pos = 0;
            self.in_frame = true;
            at += head.head_len;
            if head.len == 0 && !head.fin {
                // An empty non-final fragment says nothing: go on.
                self.in_frame = false;
                continue;
            }
        }
    }
}

/// Where one decoded step's payload lies in the buffer.
#[derive(Clone, Copy, Debug)]
struct Step {
    what: StepKind,
    start: usize,
    end: usize,
    /// Key, offset into the frame, and the range to unmask.
    mask: Option<([u8; 4], usize, usize, usize)>,
}

#[derive(Clone, Copy, Debug)]
enum StepKind {
    NeedMore,
    Data { kind: MessageKind, fin: bool },
    Ping,
    Pong,
    Close,
}

impl Step {
    fn need_more() -> Step {
        Step {
            what: StepKind::NeedMore,
            start: 0,
            end: 0,
            mask: None,
        }
    }
}

impl Step {
    /// The event, over the (now unmasked) buffer.
    fn event(self, buf: &[u8]) -> Result<Event<'_>, WsError> {
        let payload = &buf[self.start..self.end];
        Ok(match self.what {
            StepKind::NeedMore => Event::NeedMore,
            StepKind::Data { kind, fin } => Event::Data { payload, kind, fin },
            StepKind::Ping => Event::Ping(payload),
            StepKind::Pong => Event::Pong(payload),
            StepKind::Close => match payload.len() {
                0 => Event::Close { code: None, reason: "" },
                1 => return Err(WsError::BadClosePayload),
                _ => {
                    let code = u16::from_be_bytes([payload[0], payload[1]]);
                    if !close_code_allowed(code) {
                        return Err(WsError::BadCloseCode(code));
                    }
                    let reason = std::str::from_utf8(&payload[2..]).map_err(|_| WsError::InvalidUtf8)?;
                    Event::Close {
                        code: Some(code),
                        reason,
                    }
                }
            },
        })
    }
}

/// A fresh `Sec-WebSocket-Key`: 16 random bytes in base64 (the nonce need
/// only be unpredictable enough that caches and proxies cannot replay an
/// answer; a per-worker PRNG is enough).
pub fn new_key(rng: &mut fastrand::Rng) -> [u8; KEY_LEN] {
    let mut raw = [0u8; 16];
    rng.fill(&mut raw);
    let mut out = [0u8; KEY_LEN];
    encode_b64(&raw, &mut out);
    out
}

/// The `Sec-WebSocket-Accept` value for a key: base64(SHA-1(key + GUID)).
pub fn accept_key(key: &[u8]) -> [u8; ACCEPT_LEN] {
    let mut ctx = digest::Context::new(&digest::SHA1_FOR_LEGACY_USE_ONLY);
    ctx.update(key);
    ctx.update(GUID);
    let d = ctx.finish();
    let mut out = [0u8; ACCEPT_LEN];
    encode_b64(d.as_ref(), &mut out);
    out
}

fn encode_b64(raw: &[u8], out: &mut [u8]) {
    use base64::Engine as _;
    let n = base64::engine::general_purpose::STANDARD
        .encode_slice(raw, out)
        .expect("the output is sized for the input");
    debug_assert_eq!(n, out.len());
}

#[cfg(test)]
mod tests;
