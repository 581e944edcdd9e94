//! Fuzzes what gRPC adds to an HTTP/2 stream, the way a client reads a
//! response: the header blocks' fields through `BlockFields` and
//! `ResponseHeads` (headers, trailers, trailers-only), and the DATA bytes
//! through the `MessageDecoder`, in reads of any size.
//!
//! Input layout: byte 0, low 3 bits: how many read sizes follow (0 = one
//! read); byte 1: the message cap in units of 64 bytes (+1); then that many
//! u16 LE read sizes (+1); then a u16 LE length L of the header part; L
//! bytes of header blocks; the rest is the DATA stream. The header part is
//! a list of fields, each `name_len value_len name value`; a name of
//! length 0 ends the block, and its value's first byte (bit 0) says
//! whether the block carried END_STREAM.
//!
//! Checked on every input:
//! - nothing panics;
//! - counting (skip mode) and gathering (copy-out mode) find the same
//!   messages, read in pieces or at once, and end the same way (the same
//!   error or the same truncation);
//! - no message longer than the cap is ever handed out, and the gathering
//!   buffer never holds more than the cap: no unbounded buffering;
//! - a status read from the blocks is one of the 17 codes; a block sequence
//!   never ends a call twice;
//! - `grpc-message` decoding never fails and survives encoding again;
//!   every `grpc-timeout` value that parses renders back to the same
//!   duration (but zero, which is not rendered).
#![no_main]

use libfuzzer_sys::fuzz_target;
use soakd::wire::grpc::{
    Block, BlockFields, Code, MessageDecoder, MessageError, ResponseHeads, decode_message, encode_status_message,
    parse_timeout, render_timeout,
};

fn u16_at(data: &[u8], at: usize) -> usize {
    u16::from_le_bytes([data[at], data[at + 1]]) as usize
}

/// `stream` in reads of `sizes` (in turn; empty = one read).
fn pieces<'a>(stream: &'a [u8], sizes: &'a [usize]) -> impl Iterator<Item = &'a [u8]> {
    let mut at = 0;
    let mut read = 0;
    std::iter::from_fn(move || {
        if at >= stream.len() {
            return None;
        }
        let size = if sizes.is_empty() { stream.len() } else { sizes[read % sizes.len()] };
        read += 1;
        let piece = &stream[at..(at + size).min(stream.len())];
        at += piece.len();
        Some(piece)
    })
}

/// The messages of `stream` read in pieces of `sizes`, gathered, and how
/// the stream ended.
fn gather(stream: &[u8], sizes: &[usize], cap: u32) -> (Vec<Vec<u8>>, Result<(), MessageError>) {
    let mut d = MessageDecoder::new(cap);
    let mut carry = Vec::new();
    let mut got = Vec::new();
    for piece in pieces(stream, sizes) {
        let r = d.for_each_message(piece, &mut carry, |head, m| {
            assert_eq!(m.len(), head.len as usize);
            assert!(head.len <= cap, "a message of {} over the cap {cap}", head.len);
            got.push(m.to_vec());
        });
        assert!(carry.len() <= cap as usize, "{} bytes carried", carry.len());
        if let Err(e) = r {
            return (got, Err(e));
        }
    }
    (got, d.finish())
}

/// The number of messages counted in pieces, and how the stream ended.
fn count(stream: &[u8], sizes: &[usize], cap: u32) -> (usize, Result<(), MessageError>) {
    let mut d = MessageDecoder::new(cap);
    let mut n = 0;
    for piece in pieces(stream, sizes) {
        if let Err(e) = d.skip(piece, |_| n += 1) {
            return (n, Err(e));
        }
    }
    (n, d.finish())
}

fn headers(mut part: &[u8]) {
    let mut heads = ResponseHeads::default();
    let mut fields = BlockFields::default();
    let mut message = Vec::new();
    let mut ended = false;
    while let [nl, vl, rest @ ..] = part {
        let (nl, vl) = (*nl as usize, *vl as usize);
        if rest.len() < nl + vl {
            break;
        }
        let (name, value) = (&rest[..nl], &rest[nl..nl + vl]);
        part = &rest[nl + vl..];
        if nl == 0 {
            let end_stream = value.first().is_some_and(|b| b & 1 == 1);
            match heads.on_block(&fields, end_stream) {
                Ok(Block::End(status)) => {
                    assert!(!ended, "a call ended twice");
                    ended = true;
                    assert!(Code::ALL.contains(&status.code));
                }
                Ok(_) | Err(_) => {}
            }
            fields = BlockFields::default();
            continue;
        }
        fields.field_keeping_message(name, value, &mut message);
        let text = decode_message(&message);
        assert_eq!(decode_message(encode_status_message(&text).as_bytes()), text);
        if let Some(d) = parse_timeout(value) {
            // "0S" reads as zero, which is not rendered (not positive).
            match render_timeout(d) {
                Some(t) => assert_eq!(parse_timeout(t.as_bytes()), Some(d), "{value:?} rendered {t}"),
                None => assert!(d.is_zero(), "{value:?} read as {d:?} does not render"),
            }
        }
    }
    if !ended {
        let _ = heads.on_end_without_trailers();
    }
}

fuzz_target!(|data: &[u8]| {
    let [first, cap, ..] = data else { return };
    let n = (first & 7) as usize;
    let cap = (*cap as u32 + 1) * 64;
    if data.len() < 4 + 2 * n {
        return;
    }
    let sizes: Vec<usize> = (0..n).map(|i| u16_at(data, 2 + 2 * i) + 1).collect();
    let rest = &data[2 + 2 * n..];
    let hlen = u16_at(rest, 0).min(rest.len() - 2);
    headers(&rest[2..2 + hlen]);
    let stream = &rest[2 + hlen..];

    let whole = gather(stream, &[], cap);
    assert_eq!(count(stream, &[], cap), (whole.0.len(), whole.1), "counting at once");
    if !sizes.is_empty() {
        assert_eq!(gather(stream, &sizes, cap), whole, "gathering in pieces {sizes:?}");
        assert_eq!(count(stream, &sizes, cap), (whole.0.len(), whole.1), "counting in pieces {sizes:?}");
    }
});
