//! Fuzzes the HTTP/2 [`FrameDecoder`] the way the engine drives it: bytes
//! arrive in reads of some size, what the decoder leaves unconsumed (an
//! incomplete frame) is kept and fed again in front of the next read, and
//! each header block that completes goes through the HPACK decoder.
//!
//! Input layout: byte 0, low 3 bits: how many read sizes follow (0 = one
//! read); then that many u16 LE read sizes (+1); then the stream.
//!
//! Checked on every input:
//! - nothing panics (frame decoder and HPACK alike);
//! - a decoded frame consumed at least its header and no more than fed;
//! - the bytes carried between reads never exceed one frame (9 + the
//!   maximum frame size), and an assembled header block never exceeds the
//!   header-block limit: no unbounded buffering;
//! - the stream read in pieces decodes exactly like the stream read at once
//!   (the same frames, then the same error or the same end).
#![no_main]

use libfuzzer_sys::fuzz_target;
use soakd::wire::h2::{Frame, FrameDecoder, FrameError, HEADER_LEN, HeaderDecoder};

const MAX_FRAME: u32 = 16_384;
const MAX_BLOCK: u32 = 64 * 1024;

fn u16_at(data: &[u8], at: usize) -> usize {
    u16::from_le_bytes([data[at], data[at + 1]]) as usize
}

/// Decodes `stream` read in pieces of `sizes` (in turn; empty = one read);
/// every frame's debug string, then the error if one ended it.
fn decode(stream: &[u8], sizes: &[usize]) -> (Vec<String>, Option<FrameError>) {
    let mut d = FrameDecoder::new(MAX_FRAME, MAX_BLOCK);
    let mut hpack = HeaderDecoder::new(4096, 256 * 1024);
    let mut block: Vec<u8> = Vec::new();
    let mut carried: Vec<u8> = Vec::new();
    let mut frames = Vec::new();
    let mut at = 0;
    let mut read = 0;
    while at < stream.len() {
        let size = match sizes {
            [] => stream.len(),
            _ => sizes[read % sizes.len()].max(1),
        };
        read += 1;
        let end = (at + size).min(stream.len());
        carried.extend_from_slice(&stream[at..end]);
        at = end;
        let mut pos = 0;
        loop {
            match d.decode(&carried[pos..]) {
                Err(e) => return (frames, Some(e)),
                Ok(None) => break,
                Ok(Some((f, n))) => {
                    assert!(n >= HEADER_LEN && n <= carried.len() - pos, "consumed {n}");
                    let whole = match f {
                        Frame::Headers { fragment, end_headers, .. } => {
                            block.clear();
                            block.extend_from_slice(fragment);
                            end_headers
                        }
                        Frame::Continuation { fragment, end_headers, .. } => {
                            block.extend_from_slice(fragment);
                            end_headers
                        }
                        _ => false,
                    };
                    assert!(block.len() <= MAX_BLOCK as usize, "header block of {} bytes", block.len());
                    frames.push(format!("{f:?}"));
                    if whole {
                        let mut fields = 0usize;
                        let r = hpack.decode(&block, |_, _| fields += 1);
                        frames.push(format!("block {r:?} {fields}"));
                    }
                    pos += n;
                }
            }
        }
        carried.drain(..pos);
        assert!(carried.len() < HEADER_LEN + MAX_FRAME as usize, "{} bytes carried", carried.len());
    }
    (frames, None)
}

fuzz_target!(|data: &[u8]| {
    let Some(&first) = data.first() else { return };
    let n = (first & 7) as usize;
    if data.len() < 1 + 2 * n {
        return;
    }
    let sizes: Vec<usize> = (0..n).map(|i| u16_at(data, 1 + 2 * i) + 1).collect();
    let stream = &data[1 + 2 * n..];
    let whole = decode(stream, &[]);
    if !sizes.is_empty() {
        assert_eq!(decode(stream, &sizes), whole, "split {sizes:?}");
    }
});
