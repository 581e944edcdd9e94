//! gRPC's length-prefixed messages (PROTOCOL-HTTP2.md, "Length-Prefixed-
//! Message"): a compressed flag byte, a 4-byte big-endian length, the
//! message.
//!
//! The messages ride in DATA frames whose boundaries have nothing to do
//! with the messages' (a 5-byte prefix may be split over two frames, one
//! frame may hold the end of a message and the start of three more), so
//! the decoder is a streaming state machine fed each frame's payload as it
//! comes. It keeps the prefix bytes it has (at most 5) and how much of the
//! current message is still owed, and nothing else: it never buffers a
//! message. A caller that only counts messages (a server stream held for
//! days) follows [`Event`]s — where a message starts, each borrowed piece
//! of its body, where it ends — and allocates nothing; a caller whose check
//! needs the bytes gathers them with [`MessageDecoder::for_each_message`],
//! which hands a message that arrived in one piece straight from the input
//! and copies only one split across reads.
//!
//! The length is checked against a cap as soon as the prefix is in, so a
//! peer announcing a 4 GiB message is refused before a byte of it is
//! counted or copied.

/// Bytes of the prefix in front of every message.
pub const PREFIX_LEN: usize = 5;

/// A message's prefix: whether it is compressed, and its length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessageHead {
    /// The compressed flag was 1 (the body is coded with the stream's
    /// `grpc-encoding`).
    pub compressed: bool,
    /// Bytes of the message after the prefix.
    pub len: u32,
}

/// Why bytes are not a valid sequence of messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    /// A message longer than the cap.
    #[error("gRPC message of {len} bytes is over the limit of {max} bytes")]
    TooLarge {
        /// The length the prefix announced.
        len: u32,
        /// The cap.
        max: u32,
    },
    /// A compressed flag other than 0 or 1.
    #[error("gRPC message prefix has compressed flag {0} (only 0 and 1 are defined)")]
    BadFlag(u8),
    /// The stream ended inside a message.
    #[error("stream ended inside a gRPC message ({missing} more bytes were owed)")]
    Truncated {
        /// Bytes of the prefix and body that never came.
        missing: u64,
    },
}

/// One step through the bytes, borrowing from the input it was read in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// A message's prefix is complete: its body follows (possibly empty).
    Start(MessageHead),
    /// Some bytes of the current message's body, in order.
    Body(&'a [u8]),
    /// The current message is complete.
    End(MessageHead),
}

/// Where the decoder stands between two calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Reading a prefix; `have` bytes of it are in `prefix`.
    Prefix { have: u8 },
    /// Inside a body with `owed` bytes to come (`Start` given).
    Body { head: MessageHead, owed: u32 },
    /// The body is complete; `End` is next.
    Done { head: MessageHead },
}

/// The streaming decoder of one stream's messages (see the module doc).
#[derive(Clone, Debug)]
pub struct MessageDecoder {
    max_len: u32,
    prefix: [u8; PREFIX_LEN],
    state: State,
}

impl MessageDecoder {
    /// A decoder refusing messages longer than `max_len` bytes.
    pub fn new(max_len: u32) -> MessageDecoder {
        MessageDecoder {
            max_len,
            prefix: [0; PREFIX_LEN],
            state: State::Prefix { have: 0 },
        }
    }

    /// The cap it was made with.
    pub fn max_len(&self) -> u32 {
        self.max_len
    }

    /// Forgets a message in progress (a new stream).
    pub fn reset(&mut self) {
        self.state = State::Prefix { have: 0 };
    }

    /// True between messages: no prefix or body byte is owed.
    pub fn at_boundary(&self) -> bool {
        self.state == State::Prefix { have: 0 }
    }

    /// The next event from `input` and how many of its bytes the event
    /// took; `Ok(None)` when every byte of `input` has been taken and more
    /// are needed. Call again with the rest (`&input[n..]`) until `None`.
    /// An `End` or an empty `Start` may take 0 bytes.
    pub fn next<'a>(&mut self, input: &'a [u8]) -> Result<Option<(Event<'a>, usize)>, MessageError> {
        match self.state {
            State::Done { head } => {
                self.state = State::Prefix { have: 0 };
                Ok(Some((Event::End(head), 0)))
            }
            State::Body { head, owed } => {
                if input.is_empty() {
                    return Ok(None);
                }
                let n = input.len().min(owed as usize);
                let left = owed - n as u32;
                self.state = if left == 0 {
                    State::Done { head }
                } else {
                    State::Body { head, owed: left }
                };
                Ok(Some((Event::Body(&input[..n]), n)))
            }
            State::Prefix { have } => {
                let have = have as usize;
                let n = input.len().min(PREFIX_LEN - have);
                self.prefix[have..have + n].copy_from_slice(&input[..n]);
                if have + n < PREFIX_LEN {
                    self.state = State::Prefix { have: (have + n) as u8 };
                    return Ok(None);
                }
                let head = parse_prefix(&self.prefix)?;
                if head.len > self.max_len {
                    return Err(MessageError::TooLarge {
                        len: head.len,
                        max: self.max_len,
                    });
                }
                self.state = if head.len == 0 {
                    State::Done { head }
                } else {
                    State::Body { head, owed: head.len }
                };
                Ok(Some((Event::Start(head), n)))
            }
        }
    }

    /// Takes all of `input`, calling `ended` with each message it
    /// completes: the counting mode, which copies and allocates nothing.
    /// Messages completed before an error in the same input are reported
    /// before the error is.
    pub fn skip(&mut self, mut input: &[u8], mut ended: impl FnMut(MessageHead)) -> Result<(), MessageError> {
        while let Some((event, n)) = self.next(input)? {
            input = &input[n..];
            if let Event::End(head) = event {
                ended(head);
            }
        }
        Ok(())
    }

    /// Takes all of `input`, calling `message` with each message it
    /// completes. A message whose prefix and body are all in `input` is
    /// handed over from it; one split across calls is gathered in `carry`
    /// (the caller's buffer, kept between calls and cleared here).
    pub fn for_each_message(
        &mut self,
        input: &[u8],
        carry: &mut Vec<u8>,
        mut message: impl FnMut(MessageHead, &[u8]),
    ) -> Result<(), MessageError> {
        // Where the current message's body started in `input`, when its
        // prefix was read in this call and nothing was carried.
        let mut start: Option<usize> = None;
        let mut at = 0usize;
        while let Some((event, n)) = self.next(&input[at..])? {
            match event {
                Event::Start(_) => {
                    carry.clear();
                    start = Some(at + n);
                }
                Event::Body(bytes) => {
                    if start.is_none() {
                        carry.extend_from_slice(bytes);
                    }
                }
                Event::End(head) => match start.take() {
                    Some(s) => message(head, &input[s..s + head.len as usize]),
                    None => {
                        message(head, carry);
                        carry.clear();
                    }
                },
            }
            at += n;
        }
        // A body still open continues in the next call: keep what came.
        if let Some(s) = start {
            carry.clear();
            carry.extend_from_slice(&input[s..]);
        }
        Ok(())
    }

    /// The stream ended (END_STREAM): an error if it ended inside a
    /// message.
    pub fn finish(&self) -> Result<(), MessageError> {
        let missing = match self.state {
            State::Prefix { have: 0 } => return Ok(()),
            State::Prefix { have } => (PREFIX_LEN - have as usize) as u64,
            State::Body { owed, .. } => owed as u64,
            // Every byte is in; only the `End` was not asked for.
            State::Done { .. } => return Ok(()),
        };
        Err(MessageError::Truncated { missing })
    }
}

/// Reads a message prefix.
pub fn parse_prefix(prefix: &[u8; PREFIX_LEN]) -> Result<MessageHead, MessageError> {
    let compressed = match prefix[0] {
        0 => false,
        1 => true,
        f => return Err(MessageError::BadFlag(f)),
    };
    Ok(MessageHead {
        compressed,
        len: u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]),
    })
}

/// The prefix of a message of `len` bytes.
pub fn prefix(compressed: bool, len: u32) -> [u8; PREFIX_LEN] {
    let l = len.to_be_bytes();
    [u8::from(compressed), l[0], l[1], l[2], l[3]]
}

/// Appends `message`, prefixed, to `out`. Panics on a message of 4 GiB or
/// more, which no length prefix can carry (a plan refuses it first).
pub fn encode_message(out: &mut Vec<u8>, compressed: bool, message: &[u8]) {
    let len = u32::try_from(message.len()).expect("a gRPC message is under 4 GiB");
    out.reserve(PREFIX_LEN + message.len());
    out.extend_from_slice(&prefix(compressed, len));
    out.extend_from_slice(message);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(messages: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for m in messages {
            encode_message(&mut out, false, m);
        }
        out
    }

    /// Decodes `stream` in pieces of `sizes` (in turn) with the gathering
    /// mode; the messages, or the error.
    fn gather(stream: &[u8], sizes: &[usize], max: u32) -> Result<Vec<Vec<u8>>, MessageError> {
        let mut d = MessageDecoder::new(max);
        let mut carry = Vec::new();
        let mut got = Vec::new();
        let mut at = 0;
        let mut i = 0;
        while at < stream.len() {
            let end = (at + sizes[i % sizes.len()].max(1)).min(stream.len());
            i += 1;
            d.for_each_message(&stream[at..end], &mut carry, |_, m| got.push(m.to_vec()))?;
            at = end;
        }
        d.finish()?;
        Ok(got)
    }

    #[test]
    fn prefixes_encode_and_decode() {
        assert_eq!(prefix(false, 0x0102_0304), [0, 1, 2, 3, 4]);
        assert_eq!(prefix(true, 5), [1, 0, 0, 0, 5]);
        assert_eq!(
            parse_prefix(&[1, 0, 0, 1, 0]),
            Ok(MessageHead {
                compressed: true,
                len: 256
            })
        );
        assert_eq!(parse_prefix(&[2, 0, 0, 0, 0]), Err(MessageError::BadFlag(2)));
        let mut out = vec![9];
        encode_message(&mut out, false, b"abc");
        assert_eq!(out, [9, 0, 0, 0, 0, 3, b'a', b'b', b'c']);
    }

    #[test]
    fn events_mark_each_message_and_borrow_the_body() {
        let stream = framed(&[b"hello", b"", b"xy"]);
        let mut d = MessageDecoder::new(100);
        let mut events = Vec::new();
        let mut rest = &stream[..];
        while let Some((e, n)) = d.next(rest).unwrap() {
            events.push(format!("{e:?}"));
            rest = &rest[n..];
        }
        let head = |len| MessageHead { compressed: false, len };
        assert_eq!(
            events,
            [
                format!("{:?}", Event::Start(head(5))),
                format!("{:?}", Event::Body(b"hello")),
                format!("{:?}", Event::End(head(5))),
                format!("{:?}", Event::Start(head(0))),
                format!("{:?}", Event::End(head(0))),
                format!("{:?}", Event::Start(head(2))),
                format!("{:?}", Event::Body(b"xy")),
                format!("{:?}", Event::End(head(2))),
            ]
        );
        assert!(d.at_boundary());
        assert_eq!(d.finish(), Ok(()));
    }

    #[test]
    fn any_split_decodes_like_the_whole() {
        let stream = framed(&[b"first message", b"", &[7u8; 300], b"z"]);
        let whole = gather(&stream, &[stream.len()], 1000).unwrap();
        assert_eq!(whole.len(), 4);
        assert_eq!(whole[2], vec![7u8; 300]);
        for a in 1..12 {
            for b in 1..12 {
                assert_eq!(gather(&stream, &[a, b], 1000).unwrap(), whole, "split {a},{b}");
                let mut d = MessageDecoder::new(1000);
                let mut counted = 0;
                for c in stream.chunks(a) {
                    d.skip(c, |_| counted += 1).unwrap();
                }
                assert_eq!(counted, 4, "counting in pieces of {a}");
            }
        }
    }

    #[test]
    fn the_cap_is_checked_at_the_prefix() {
        let mut d = MessageDecoder::new(10);
        // The prefix alone of an 11-byte message is refused.
        assert_eq!(
            d.skip(&prefix(false, 11), |_| ()),
            Err(MessageError::TooLarge { len: 11, max: 10 })
        );
        let mut d = MessageDecoder::new(10);
        let mut n = 0;
        assert_eq!(d.skip(&framed(&[&[0; 10]]), |_| n += 1), Ok(()));
        assert_eq!(n, 1);
        // A message completed before a bad prefix in the same input is
        // still reported (found by fuzz/grpc_stream).
        let mut d = MessageDecoder::new(u32::MAX);
        let mut n = 0;
        assert_eq!(
            d.skip(&[0, 0, 0, 0, 0, 3, 0, 0, 0, 0], |_| n += 1),
            Err(MessageError::BadFlag(3))
        );
        assert_eq!(n, 1);
    }

    #[test]
    fn a_stream_ending_inside_a_message_is_truncated() {
        let mut d = MessageDecoder::new(100);
        assert_eq!(d.skip(&[0, 0, 0], |_| panic!("no message")), Ok(()));
        assert_eq!(d.finish(), Err(MessageError::Truncated { missing: 2 }));
        assert_eq!(d.skip(&[0, 9, b'a'], |_| panic!("no message")), Ok(()));
        assert_eq!(d.finish(), Err(MessageError::Truncated { missing: 8 }));
        d.reset();
        assert_eq!(d.finish(), Ok(()));
        // All of the body in, the End not yet asked for: complete.
        let mut d = MessageDecoder::new(100);
        let m = framed(&[b"ab"]);
        let (_, n) = d.next(&m).unwrap().unwrap();
        let (_, k) = d.next(&m[n..]).unwrap().unwrap();
        assert_eq!(n + k, m.len());
        assert_eq!(d.finish(), Ok(()));
    }

    #[test]
    fn the_gathering_mode_copies_only_split_messages() {
        // A message whole in one input comes from the input: the carry
        // buffer is never grown.
        let mut d = MessageDecoder::new(100);
        let mut carry = Vec::new();
        let stream = framed(&[b"one", b"two"]);
        let mut got = Vec::new();
        d.for_each_message(&stream, &mut carry, |_, m| got.push(m.to_vec()))
            .unwrap();
        assert_eq!(got, [b"one".to_vec(), b"two".to_vec()]);
        assert_eq!(carry.capacity(), 0);
    }
}
