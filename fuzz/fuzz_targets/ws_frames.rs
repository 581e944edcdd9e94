//! Fuzzes the WebSocket frame [`Decoder`] the way the engine and the
//! built-in target drive it: bytes arrive in reads of some size, whatever
//! the decoder leaves unconsumed (an incomplete frame head or control
//! frame) is kept and fed again in front of the next read.
//!
//! Input layout (a fixed 8-byte header, then the stream):
//!
//! | bytes | meaning |
//! |-------|---------|
//! | 0     | bit 0: decode as the server (masked frames, unmasked in place) |
//! | 1..3  | u16 LE: the message size limit |
//! | 3     | low 2 bits: how many of the read sizes below are used (0 = one read) |
//! | 4..8  | two u16 LE read sizes (+1), used in turn |
//! | 8..   | the stream |
//!
//! Checked on every input:
//! - nothing panics;
//! - `consumed` never exceeds what was fed, and never exceeds the bytes of
//!   the frames it completed (no byte is skipped);
//! - the bytes carried between reads never exceed `MAX_CONTROL_FRAME` (the
//!   decoder buffers no payload);
//! - no message is longer than the limit, text messages are UTF-8;
//! - the stream read in pieces decodes exactly like the stream read at once.
#![no_main]

use libfuzzer_sys::fuzz_target;
use soakd::wire::ws::{Decoder, Event, MAX_CONTROL_FRAME, MessageKind, Role, WsError};

const HEADER: usize = 8;

#[derive(Debug, PartialEq, Eq)]
enum Got {
    Message(MessageKind, Vec<u8>),
    Ping(Vec<u8>),
    Pong(Vec<u8>),
    Close(Option<u16>, String),
    Error(WsError),
}

fn decode(role: Role, max: u64, stream: &[u8], sizes: &[usize]) -> Vec<Got> {
    let mut d = Decoder::new(role, max);
    let mut got = Vec::new();
    let mut msg = Vec::new();
    let mut carried: Vec<u8> = Vec::new();
    let mut at = 0;
    let mut read = 0;
    while at < stream.len() {
        let size = if sizes.is_empty() { stream.len() } else { sizes[read % sizes.len()] };
        read += 1;
        let end = (at + size).min(stream.len());
        carried.extend_from_slice(&stream[at..end]);
        at = end;
        let mut pos = 0;
        loop {
            let avail = carried.len() - pos;
            let res = match role {
                Role::Client => d.decode(&carried[pos..]),
                Role::Server => d.decode_mut(&mut carried[pos..]),
            };
            let (used, ev) = match res {
                Ok(x) => x,
                Err(e) => {
                    got.push(Got::Error(e));
                    return got;
                }
            };
            assert!(used <= avail, "used {used} of {avail}");
            pos += used;
            match ev {
                Event::NeedMore => break,
                Event::Data { payload, kind, fin } => {
                    msg.extend_from_slice(payload);
                    assert!(msg.len() as u64 <= max, "a message over the limit");
                    if fin {
                        if kind == MessageKind::Text {
                            assert!(std::str::from_utf8(&msg).is_ok(), "text not UTF-8 let through");
                        }
                        got.push(Got::Message(kind, std::mem::take(&mut msg)));
                    }
                }
                Event::Ping(p) => got.push(Got::Ping(p.to_vec())),
                Event::Pong(p) => got.push(Got::Pong(p.to_vec())),
                Event::Close { code, reason } => got.push(Got::Close(code, reason.into())),
            }
        }
        carried.drain(..pos);
        assert!(carried.len() <= MAX_CONTROL_FRAME, "{} bytes carried", carried.len());
    }
    got
}

fuzz_target!(|data: &[u8]| {
    if data.len() < HEADER {
        return;
    }
    let role = if data[0] & 1 == 1 { Role::Server } else { Role::Client };
    let max = u16::from_le_bytes([data[1], data[2]]) as u64;
    let n = (data[3] & 3) as usize;
    let sizes: Vec<usize> = (0..n.min(2))
        .map(|i| u16::from_le_bytes([data[4 + 2 * i], data[5 + 2 * i]]) as usize + 1)
        .collect();
    let stream = &data[HEADER..];
    let whole = decode(role, max, stream, &[]);
    if !sizes.is_empty() {
        assert_eq!(decode(role, max, stream, &sizes), whole, "split {sizes:?}");
    }
});
