//! The client's protocol state machines driven by arbitrary input, for
//! `fuzz/` (`client_protocols`): the codecs under them are fuzzed on their
//! own; this drives what the loop drives — a connection's [`Protocol`] —
//! with a server that says anything, in any pieces, between requests the
//! loop issues, writes it makes and timers that fire, and checks what the
//! loop relies on.
//!
//! The protocol is the caller's (0 HTTP/1.1, 1 HTTP/2, 2 WebSocket: one
//! fuzz target each). The script: byte 0 is its settings (pipeline or streams, whether a well-formed start —
//! an HTTP/2 SETTINGS frame, a WebSocket 101 for the key soakd sent — comes
//! first, so that the rest reaches the states after it). Then operations,
//! one byte each, with their argument after it: feed the next N bytes of
//! the script as a read, issue a request, let the socket take N bytes of
//! what is owed, advance the clock and fire the protocol's timer, close.
//!
//! Checked on every step: nothing panics; an answer names an entry that is
//! in flight (and frees it); never more in flight than the capacity the
//! protocol gave; what is owed stays within the protocol's bound however
//! little the socket takes; "taken" takes every byte it was handed.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::WorkloadRt;
use super::exchange::{Cx, Inflight, Issued, Output, Tally};
use super::h2::H2Rt;
use super::protocol::{ProtoRt, Protocol};
use crate::stats::{Gauges, WorkloadStats};

/// What soakd may owe a server that does not read, at most, in bytes: the
/// owed bounds (64 KiB) plus the requests in flight and one more frame.
const OWED_LIMIT: usize = 64 * 1024 + 256 * 1024;

/// Runs one script against protocol `kind` (see the module doc); panics
/// when an invariant breaks.
pub fn drive(kind: u8, script: &[u8]) {
    let [settings, rest @ ..] = script else { return };
    let depth = 1 + (settings & 7) as usize;
    let get: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    let proto = match kind % 3 {
        0 => ProtoRt::Http1,
        1 => ProtoRt::H2(Arc::new(H2Rt {
            required: true,
            cleartext: true,
            streams: depth as u16,
            window: 65_535,
            requests: vec![crate::wire::h2::render_request(get, false).expect("a request")].into(),
            // Half the runs read the responses as gRPC calls.
            hold: None,
            grpc: settings & 16 != 0,
            // A quarter of the runs ping every millisecond.
            ping: if settings & 32 != 0 { 1_000_000 } else { 0 },
        })),
        _ => ProtoRt::Ws(ws_plan(settings & 8 != 0)),
    };
    let w = WorkloadRt::test(get, depth as u16, proto);
    let entries = vec![Inflight::default(); w.depth()];
    let cx = Cx::of(&w, &entries, 0, entries.len());
    let mut st = WorkloadStats::default();
    let mut g = Gauges::default();
    let mut now = 1_000_000_000u64;
    let mut p = Protocol::new(&w);
    p.reset();
    p.open(now + 5_000_000_000);
    let mut live: BTreeSet<u16> = BTreeSet::new();
    let mut input: Vec<u8> = Vec::new();
    if settings & 16 != 0 {
        input.extend(good_start(&mut p, &cx, kind % 3));
    }
    input.extend_from_slice(rest);
    let mut pos = 0;
    let mut ops = rest.iter().copied();
    while let (Some(op), Some(arg)) = (ops.next(), ops.next()) {
        let mut t = Tally {
            st: &mut st,
            g: &mut g,
            now,
        };
        let ended = match op % 5 {
            0 => {
                let n = (arg as usize + 1).min(input.len() - pos);
                let read = &input[pos..pos + n];
                pos += n;
                feed(&mut p, &cx, &mut t, read, &mut live)
            }
            1 => {
                if p.in_flight() < p.capacity(&w) {
                    match p.issue(&mut t, 0, entries.len()) {
                        Issued::Entry(e) => {
                            assert!((e as usize) < entries.len(), "entry {e} out of the slot");
                            assert!(live.insert(e), "entry {e} issued twice");
                        }
                        Issued::Untimed | Issued::Refused(_) => {}
                    }
                }
                false
            }
            2 => {
                let owed = p.outgoing(&cx).len();
                assert!(owed <= OWED_LIMIT, "{owed} bytes owed");
                let n = owed.min(arg as usize * 64);
                if n > 0 {
                    p.sent(&cx, n);
                }
                false
            }
            3 => {
                now += (arg as u64 + 1) * 100_000_000;
                t.now = now;
                if p.deadline().is_some_and(|d| now >= d) {
                    let out = p.on_time(&mut t);
                    matches!(out, Output::Error(_) | Output::End(_))
                } else {
                    false
                }
            }
            _ => {
                let _ = p.at_close(&cx, &mut t);
                true
            }
        };
        assert!(
            (p.in_flight() as usize) == live.len(),
            "{} in flight, {} issued and unanswered",
            p.in_flight(),
            live.len()
        );
        if ended {
            let _ = p.closed(&mut Tally {
                st: &mut st,
                g: &mut g,
                now,
            });
            p.reset();
            return;
        }
    }
}

/// A WebSocket plan: request mode (a message timed to its reply, a
/// reply that must contain text, pings with a timeout), or subscribe mode.
fn ws_plan(request: bool) -> Arc<crate::plan::WsPlan> {
    let mode = if request {
        "ws_message = \"hi\"\nexpect_message_contains = \"ok\"\nws_ping = \"1s\"\nws_ping_timeout = \"2s\""
    } else {
        "ws_subscribe = \"go\"\nws_ping = \"1s\""
    };
    let text = format!("[[workload]]\nurl = \"ws://127.0.0.1:1/\"\n{mode}\n");
    let plan = crate::config::parse(std::path::Path::new("fuzz.toml"), &text, Default::default())
        .expect("the fuzz plan parses");
    plan.workloads[0].target.ws.clone().expect("a ws:// workload")
}

/// Feeds one read until taken; true when the connection ended.
fn feed(p: &mut Protocol, cx: &Cx<'_>, t: &mut Tally<'_>, read: &[u8], live: &mut BTreeSet<u16>) -> bool {
    let mut at = 0;
    // Each answer takes at least a byte or frees an entry, so this ends;
    // the bound only turns a bug into a failure rather than a hang.
    for _ in 0..read.len() + 2 * cx.entries.len() + 64 {
        let (used, out) = p.receive(cx, t, &read[at..]);
        assert!(used <= read.len() - at, "used {used} of {}", read.len() - at);
        at += used;
        match out {
            Output::Taken => {
                assert_eq!(at, read.len(), "taken, but bytes are left");
                return false;
            }
            Output::Ready | Output::Opened => {}
            Output::Response(r) => assert!(live.remove(&r.entry), "a response for entry {} not in flight", r.entry),
            Output::Failed { entry, .. } | Output::Retry(entry) => {
                assert!(live.remove(&entry), "entry {entry} freed but not in flight")
            }
            Output::Error(_) | Output::End(_) => return true,
        }
    }
    panic!("a read of {} bytes never came to an end", read.len());
}

/// A well-formed start for `kind`: HTTP/2's SETTINGS, or the 101 for the
/// key of the WebSocket upgrade soakd owes (written at once).
fn good_start(p: &mut Protocol, cx: &Cx<'_>, kind: u8) -> Vec<u8> {
    let mut b = Vec::new();
    match kind {
        1 => crate::wire::h2::encode_settings(&mut b, false, &[]),
        2 => {
            let req = p.outgoing(cx).to_vec();
            let key = req
                .split(|&c| c == b'\n')
                .find_map(|l| l.strip_prefix(b"Sec-WebSocket-Key: "))
                .map(|k| k.trim_ascii().to_vec())
                .unwrap_or_default();
            let accept = crate::wire::ws::accept_key(&key);
            b.extend_from_slice(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n");
            b.extend_from_slice(b"Sec-WebSocket-Accept: ");
            b.extend_from_slice(accept.as_ref());
            b.extend_from_slice(b"\r\n\r\n");
        }
        _ => {}
    }
    b
}
