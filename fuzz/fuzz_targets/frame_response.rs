//! Fuzzes the response [`Framer`] the way the engine drives it: bytes
//! arrive in reads of some size, whatever the framer leaves unconsumed (an
//! incomplete head) is kept and fed again in front of the next read, and the
//! connection ends with `eof`.
//!
//! Input layout (a fixed 24-byte header, then the stream):
//!
//! | bytes  | meaning |
//! |--------|---------|
//! | 0      | bit 0: the responses answer HEAD requests |
//! | 1..3   | u16 LE: extra copies of the middle part of the stream |
//! | 3..5   | u16 LE: where the middle part starts (mod stream length + 1) |
//! | 5..7   | u16 LE: length of the middle part |
//! | 7      | low 3 bits: how many of the read sizes below are used (0 = one read) |
//! | 8..24  | eight u16 LE read sizes (+1), used in turn |
//! | 24..   | the stream |
//!
//! The repetition lets a short input describe a stream past
//! `MAX_HEAD_BYTES` (a huge header, thousands of interim 1xx heads).
//!
//! Checked on every input:
//! - nothing panics;
//! - `consumed` never exceeds what was fed, a complete response consumes at
//!   least one byte, and bytes are left over only in the head state;
//! - the bytes carried between reads never exceed `MAX_HEAD_BYTES` (no
//!   unbounded buffering: the engine keeps exactly these bytes);
//! - the stream read in pieces frames exactly like the stream read at once:
//!   the same (status, keep_alive) sequence and the same end (`AtEof`), or
//!   an error after the same responses (the kind may differ only when one of
//!   them is `HeadTooLarge`: which limit trips first depends on the reads).
#![no_main]

use libfuzzer_sys::fuzz_target;
use soakd::wire::{AtEof, Framed, Framer, MAX_HEAD_BYTES, ProtocolError};

const HEADER: usize = 24;
/// Largest stream the repetition may build.
const MAX_STREAM: usize = 256 * 1024;
/// Reads per stream at most: a large stream is not fed in tiny pieces, which
/// would only re-parse a big head quadratically and slow the fuzzer down.
const MAX_READS: usize = 512;

#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    responses: Vec<(u16, bool)>,
    end: Result<AtEof, ProtocolError>,
}

fn u16_at(data: &[u8], at: usize) -> usize {
    u16::from_le_bytes([data[at], data[at + 1]]) as usize
}

/// `body` with its middle part `[start, start + len)` repeated `extra` more
/// times, capped at [`MAX_STREAM`].
fn build_stream(body: &[u8], extra: usize, start: usize, len: usize) -> Vec<u8> {
    let start = start % (body.len() + 1);
    let len = len.min(body.len() - start);
    let (pre, rest) = body.split_at(start);
    let (mid, post) = rest.split_at(len);
    let extra = if mid.is_empty() {
        0
    } else {
        extra.min(MAX_STREAM.saturating_sub(body.len()) / mid.len())
    };
    let mut stream = Vec::with_capacity(body.len() + extra * mid.len());
    stream.extend_from_slice(pre);
    for _ in 0..=extra {
        stream.extend_from_slice(mid);
    }
    stream.extend_from_slice(post);
    stream
}

/// Frames `stream` read in pieces of `sizes` (in turn; empty = one read),
/// exactly as `engine::worker` does, checking the per-feed invariants.
fn frame(stream: &[u8], head: bool, sizes: &[usize]) -> Outcome {
    let mut framer = Framer::new(head);
    let mut carried: Vec<u8> = Vec::new();
    let mut responses = Vec::new();
    let floor = stream.len() / MAX_READS;
    let mut at = 0;
    let mut read = 0;
    while at < stream.len() {
        let size = match sizes {
            [] => stream.len(),
            _ => sizes[read % sizes.len()].max(floor).max(1),
        };
        read += 1;
        let end = (at + size).min(stream.len());
        carried.extend_from_slice(&stream[at..end]);
        at = end;
        let mut pos = 0;
        while pos < carried.len() {
            let fed = carried.len() - pos;
            match framer.feed(&carried[pos..]) {
                Err(e) => {
                    return Outcome { responses, end: Err(e) };
                }
                Ok(Framed::Complete {
                    consumed,
                    status,
                    keep_alive,
                }) => {
                    assert!(consumed > 0, "a complete response consumed nothing");
                    assert!(consumed <= fed, "consumed {consumed} of {fed} bytes fed");
                    pos += consumed;
                    responses.push((status, keep_alive));
                }
                Ok(Framed::Partial { consumed }) => {
                    assert!(consumed <= fed, "consumed {consumed} of {fed} bytes fed");
                    if consumed < fed {
                        assert!(framer.is_idle(), "bytes left over outside the head state");
                    }
                    pos += consumed;
                    break;
                }
            }
        }
        carried.drain(..pos);
        assert!(
            carried.len() <= MAX_HEAD_BYTES,
            "{} bytes carried to the next read (limit {MAX_HEAD_BYTES}; last read {size})",
            carried.len()
        );
    }
    Outcome {
        responses,
        end: Ok(framer.eof(carried.len())),
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < HEADER {
        return;
    }
    let head = data[0] & 1 == 1;
    let stream = build_stream(&data[HEADER..], u16_at(data, 1), u16_at(data, 3), u16_at(data, 5));
    let n = (data[7] & 7) as usize;
    let sizes: Vec<usize> = (0..n).map(|i| u16_at(data, 8 + 2 * i) + 1).collect();

    let whole = frame(&stream, head, &[]);
    if sizes.is_empty() {
        return;
    }
    let split = frame(&stream, head, &sizes);
    assert_eq!(
        split.responses, whole.responses,
        "responses differ (split {sizes:?}; ends: split {:?}, whole {:?})",
        split.end, whole.end
    );
    match (split.end, whole.end) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "end differs (split {sizes:?})"),
        (Err(a), Err(b)) => assert!(
            a == b || a == ProtocolError::HeadTooLarge || b == ProtocolError::HeadTooLarge,
            "errors differ: split {a:?}, whole {b:?} (split {sizes:?})"
        ),
        (a, b) => panic!("split ends {a:?}, whole ends {b:?} (split {sizes:?})"),
    }
});
