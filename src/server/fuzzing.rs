//! The target's HTTP/2 connection ([`H2Conn`]) driven by arbitrary input,
//! for `fuzz/` (`target_h2`): a client that says anything, in any pieces,
//! with the clock moving so delayed responses come due.
//!
//! The script: byte 0 picks a fault (none, `goaway@N`, `goaway-error@N`,
//! `rst-stream@N`, `max-streams=N`, `window-stall`) and whether responses
//! are delayed; then operations, one byte each with an argument: feed the
//! next N bytes of the script, let time pass and deliver what is due.
//!
//! Checked on every step: nothing panics; everything the target writes is
//! well-formed HTTP/2 as soakd's own client decoder reads it (the frames
//! of a server: no frame a server may not send); the streams it keeps stay
//! within the limit it announced; its output per step is bounded by what
//! the step gave it to answer.

use std::time::{Duration, Instant};

use mio::Token;

use super::h2_conn::{Cx, H2Conn, MAX_STREAMS, Serving};
use super::{Degrade, Fault, FaultMode};
use crate::wire::h2::{Frame, FrameDecoder};

/// Runs one script (see the module doc); panics when an invariant breaks.
pub fn drive(script: &[u8]) {
    let [choice, rest @ ..] = script else { return };
    let every = u32::from(choice >> 4) + 1;
    let mode = match choice & 7 {
        1 => Some(FaultMode::Goaway),
        2 => Some(FaultMode::GoawayError),
        3 => Some(FaultMode::RstStream),
        4 => Some(FaultMode::MaxStreams),
        5 => Some(FaultMode::WindowStall),
        _ => None,
    };
    let every = if mode == Some(FaultMode::WindowStall) { 1 } else { every };
    let fault = mode.map(|mode| Fault { mode, every });
    let delay = if choice & 8 != 0 {
        Duration::from_millis(5)
    } else {
        Duration::ZERO
    };
    let mut th = Serving::new(delay, Degrade::default(), fault);
    let mut conn = H2Conn::new(fault);
    let mut out = Vec::new();
    conn.greet(&mut out);
    let mut client = FrameDecoder::new(1 << 24, 1 << 24);
    let mut seen = Vec::new();
    check_frames(&mut client, &mut seen, &mut out);
    let mut in_flight = 0u32;
    let mut now = Instant::now();
    let mut pos = 0;
    let mut ops = rest.iter().copied();
    while let (Some(op), Some(arg)) = (ops.next(), ops.next()) {
        let given = if op % 2 == 0 {
            let n = (arg as usize + 1).min(rest.len() - pos);
            conn.receive(&mut lend(&mut th, now, &mut out, &mut in_flight), &rest[pos..pos + n]);
            pos += n;
            n
        } else {
            now += Duration::from_millis(u64::from(arg) + 1);
            let mut due = 0;
            while let Some(d) = th.queue.front().filter(|d| d.due <= now) {
                let stream = d.stream;
                th.queue.pop_front();
                in_flight = in_flight.saturating_sub(1);
                conn.deliver(&mut lend(&mut th, now, &mut out, &mut in_flight), stream);
                due += 1;
            }
            due
        };
        // A response is a head, a body of at most 64 KiB and a trailer; a
        // read of N bytes opens at most N/9 streams or provokes N/9 frames.
        let bound = (given + 1) * (65 * 1024 + 256);
        assert!(out.len() <= bound, "{} bytes written for {given}", out.len());
        check_frames(&mut client, &mut seen, &mut out);
        assert!(
            conn.streams_open() <= MAX_STREAMS as usize,
            "{} streams",
            conn.streams_open()
        );
        if conn.done && out.is_empty() && op == 255 {
            return;
        }
    }
}

/// What a call into the connection is lent.
fn lend<'a>(th: &'a mut Serving, now: Instant, out: &'a mut Vec<u8>, in_flight: &'a mut u32) -> Cx<'a> {
    Cx {
        th,
        token: Token(1),
        now,
        out,
        in_flight,
    }
}

/// Decodes what the target wrote as soakd's client does (carrying an
/// incomplete frame in `seen`), and empties `out`.
fn check_frames(client: &mut FrameDecoder, seen: &mut Vec<u8>, out: &mut Vec<u8>) {
    seen.append(out);
    let mut at = 0;
    loop {
        match client.decode(&seen[at..]) {
            Ok(Some((frame, n))) => {
                assert!(!matches!(frame, Frame::PushPromise { .. }), "the target never promises");
                at += n;
            }
            Ok(None) => break,
            Err(e) => panic!("the target wrote a bad frame: {e:?}"),
        }
    }
    seen.drain(..at);
}
