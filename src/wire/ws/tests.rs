use super::*;
use crate::wire::RequestSpec;
use proptest::prelude::*;

/// What a decoded stream made, owned (data chunks of a message joined).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Got {
    Message(MessageKind, Vec<u8>),
    Ping(Vec<u8>),
    Pong(Vec<u8>),
    Close(Option<u16>, String),
    Error(WsError),
}

/// Decodes `stream` read in pieces of `sizes` (in turn), carrying what the
/// decoder leaves unconsumed in front of the next read, as the engine
/// does; checks the carry never exceeds a control frame.
fn decode_all(role: Role, max: u64, stream: &[u8], sizes: &[usize]) -> Vec<Got> {
    let mut d = Decoder::new(role, max);
    let mut got = Vec::new();
    let mut msg = Vec::new();
    let mut carried: Vec<u8> = Vec::new();
    let mut at = 0;
    let mut read = 0;
    while at < stream.len() {
        let size = if sizes.is_empty() {
            stream.len()
        } else {
            sizes[read % sizes.len()].max(1)
        };
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
            match res {
                Err(e) => {
                    got.push(Got::Error(e));
                    return got;
                }
                Ok((used, ev)) => {
                    assert!(used <= avail);
                    pos += used;
                    match ev {
                        Event::NeedMore => break,
                        Event::Data { payload, kind, fin } => {
                            msg.extend_from_slice(payload);
                            if fin {
                                got.push(Got::Message(kind, std::mem::take(&mut msg)));
                            }
                        }
                        Event::Ping(p) => got.push(Got::Ping(p.to_vec())),
                        Event::Pong(p) => got.push(Got::Pong(p.to_vec())),
                        Event::Close { code, reason } => got.push(Got::Close(code, reason.into())),
                    }
                }
            }
        }
        carried.drain(..pos);
        assert!(carried.len() <= MAX_CONTROL_FRAME, "{} bytes carried", carried.len());
    }
    got
}

fn frame(fin: bool, op: u8, payload: &[u8], mask: Option<[u8; 4]>) -> Vec<u8> {
    let mut out = Vec::new();
    let op = Opcode::from_bits(op).unwrap();
    encode_frame(&mut out, fin, op, payload, mask);
    out
}

#[test]
fn rfc_examples_decode() {
    // RFC 6455 section 5.7.
    let hello = [0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f];
    assert_eq!(
        decode_all(Role::Client, 1 << 20, &hello, &[]),
        [Got::Message(MessageKind::Text, b"Hello".to_vec())]
    );
    let masked = [0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58];
    assert_eq!(
        decode_all(Role::Server, 1 << 20, &masked, &[]),
        [Got::Message(MessageKind::Text, b"Hello".to_vec())]
    );
    let fragmented = [0x01, 0x03, 0x48, 0x65, 0x6c, 0x80, 0x02, 0x6c, 0x6f];
    assert_eq!(
        decode_all(Role::Client, 1 << 20, &fragmented, &[1]),
        [Got::Message(MessageKind::Text, b"Hello".to_vec())]
    );
    let ping = [0x89, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f];
    assert_eq!(
        decode_all(Role::Client, 1 << 20, &ping, &[]),
        [Got::Ping(b"Hello".to_vec())]
    );
    let pong = [0x8a, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58];
    assert_eq!(
        decode_all(Role::Server, 1 << 20, &pong, &[]),
        [Got::Pong(b"Hello".to_vec())]
    );
    let mut big = vec![0x82, 0x7e, 0x01, 0x00];
    big.extend(std::iter::repeat_n(7u8, 256));
    assert_eq!(
        decode_all(Role::Client, 1 << 20, &big, &[3]),
        [Got::Message(MessageKind::Binary, vec![7; 256])]
    );
    let mut huge = vec![0x82, 0x7f, 0, 0, 0, 0, 0, 1, 0, 0];
    huge.extend(std::iter::repeat_n(1u8, 65536));
    assert_eq!(
        decode_all(Role::Client, 1 << 20, &huge, &[1000]),
        [Got::Message(MessageKind::Binary, vec![1; 65536])]
    );
}

#[test]
fn encodes_what_the_rfc_shows() {
    assert_eq!(
        frame(true, 1, b"Hello", None),
        [0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f]
    );
    assert_eq!(
        frame(true, 1, b"Hello", Some([0x37, 0xfa, 0x21, 0x3d])),
        [0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58]
    );
    let mut head = [0u8; MAX_HEAD];
    assert_eq!(encode_head(&mut head, true, Opcode::Binary, 256, None), 4);
    assert_eq!(head[..4], [0x82, 0x7e, 0x01, 0x00]);
    assert_eq!(
        encode_head(&mut head, true, Opcode::Binary, 65536, Some([1, 2, 3, 4])),
        14
    );
    assert_eq!(head[..14], [0x82, 0xff, 0, 0, 0, 0, 0, 1, 0, 0, 1, 2, 3, 4]);
}

#[test]
fn masking_any_offset_matches_bytewise() {
    let key = [0xde, 0xad, 0xbe, 0xef];
    let data: Vec<u8> = (0..37).collect();
    for off in 0..8 {
        let mut a = data.clone();
        apply_mask(&mut a, key, off);
        let b: Vec<u8> = data.iter().enumerate().map(|(i, x)| x ^ key[(i + off) % 4]).collect();
        assert_eq!(a, b, "offset {off}");
    }
}

#[test]
fn accept_value_of_the_rfc_example() {
    assert_eq!(
        &accept_key(b"dGhlIHNhbXBsZSBub25jZQ=="),
        b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
    );
    let mut rng = fastrand::Rng::with_seed(1);
    let (a, b) = (new_key(&mut rng), new_key(&mut rng));
    assert_ne!(a, b, "a fresh key each time");
    use base64::Engine as _;
    assert_eq!(base64::engine::general_purpose::STANDARD.decode(a).unwrap().len(), 16);
}

#[test]
fn oddities_are_classified() {
    let m = Some([1, 2, 3, 4]);
    let client = |bytes: &[u8]| decode_all(Role::Client, 100, bytes, &[]);
    let last = |v: Vec<Got>| v.last().cloned().unwrap();
    // Reserved bits (no extension negotiated), unknown opcodes.
    assert_eq!(last(client(&[0xc1, 0x00])), Got::Error(WsError::Reserved));
    assert_eq!(last(client(&[0x93, 0x00])), Got::Error(WsError::Reserved));
    assert_eq!(last(client(&[0x83, 0x00])), Got::Error(WsError::UnknownOpcode(3)));
    assert_eq!(last(client(&[0x8b, 0x00])), Got::Error(WsError::UnknownOpcode(11)));
    // Control frame rules.
    assert_eq!(last(client(&[0x09, 0x00])), Got::Error(WsError::FragmentedControl));
    assert_eq!(
        last(client(&[0x89, 0x7e, 0x00, 0x7e])),
        Got::Error(WsError::ControlTooLong)
    );
    // Masking: a server's frame masked, a client's unmasked.
    assert_eq!(last(client(&frame(true, 1, b"x", m))), Got::Error(WsError::Masked));
    assert_eq!(
        last(decode_all(Role::Server, 100, &frame(true, 1, b"x", None), &[])),
        Got::Error(WsError::Unmasked)
    );
    // Fragmentation order.
    assert_eq!(
        last(client(&frame(true, 0, b"x", None))),
        Got::Error(WsError::StrayContinuation)
    );
    let twice = [frame(false, 1, b"a", None), frame(true, 2, b"b", None)].concat();
    assert_eq!(last(client(&twice)), Got::Error(WsError::Interleaved));
    // Close payloads.
    assert_eq!(last(client(&[0x88, 0x00])), Got::Close(None, String::new()));
    assert_eq!(last(client(&[0x88, 0x01, 0x03])), Got::Error(WsError::BadClosePayload));
    assert_eq!(
        last(client(&frame(true, 8, &1005u16.to_be_bytes(), None))),
        Got::Error(WsError::BadCloseCode(1005))
    );
    assert_eq!(
        last(client(&frame(true, 8, &999u16.to_be_bytes(), None))),
        Got::Error(WsError::BadCloseCode(999))
    );
    assert_eq!(
        last(client(&frame(true, 8, &[0x03, 0xe8, 0xff], None))),
        Got::Error(WsError::InvalidUtf8)
    );
    let mut p = [0u8; MAX_CONTROL_PAYLOAD];
    let n = close_payload(&mut p, 4000, "bye");
    assert_eq!(
        last(client(&frame(true, 8, &p[..n], None))),
        Got::Close(Some(4000), "bye".into())
    );
    // Text must be UTF-8, across fragments too; binary need not be.
    assert_eq!(
        last(client(&frame(true, 1, &[0xff], None))),
        Got::Error(WsError::InvalidUtf8)
    );
    assert_eq!(
        last(client(&frame(true, 2, &[0xff], None))),
        Got::Message(MessageKind::Binary, vec![0xff])
    );
    let euro = "€".as_bytes();
    let split = [frame(false, 1, &euro[..1], None), frame(true, 0, &euro[1..], None)].concat();
    assert_eq!(last(client(&split)), Got::Message(MessageKind::Text, euro.to_vec()));
    let cut = frame(true, 1, &euro[..2], None);
    assert_eq!(last(client(&cut)), Got::Error(WsError::InvalidUtf8));
    // The size limit counts the whole message across fragments.
    assert_eq!(
        last(client(&frame(true, 2, &[0; 101], None))),
        Got::Error(WsError::TooBig)
    );
    let over = [frame(false, 2, &[0; 60], None), frame(true, 0, &[0; 41], None)].concat();
    assert_eq!(last(client(&over)), Got::Error(WsError::TooBig));
    assert_eq!(WsError::TooBig.close_code(), 1009);
    assert_eq!(WsError::InvalidUtf8.close_code(), 1007);
    assert_eq!(WsError::Reserved.close_code(), 1002);
    // A 64-bit length with the top bit set.
    assert_eq!(
        last(client(&[0x82, 0x7f, 0x80, 0, 0, 0, 0, 0, 0, 0])),
        Got::Error(WsError::BadLength)
    );
}

#[test]
fn control_frames_between_fragments() {
    let stream = [
        frame(false, 1, b"He", None),
        frame(true, 9, b"p1", None),
        frame(false, 0, b"", None),
        frame(true, 10, b"p2", None),
        frame(true, 0, b"llo", None),
    ]
    .concat();
    for size in [1, 2, 3, 5, 100] {
        assert_eq!(
            decode_all(Role::Client, 100, &stream, &[size]),
            [
                Got::Ping(b"p1".to_vec()),
                Got::Pong(b"p2".to_vec()),
                Got::Message(MessageKind::Text, b"Hello".to_vec())
            ],
            "reads of {size}"
        );
    }
}

#[test]
fn utf8_checker_fails_fast_and_keeps_at_most_a_character() {
    let mut u = Utf8::default();
    assert_eq!(u.feed(&[0xf0, 0x9f]), Ok(()));
    assert_eq!(u.feed(&[0x98]), Ok(()));
    assert_eq!(u.feed(&[0x80, b'a']), Ok(()));
    assert_eq!(u.finish(), Ok(()));
    // 0xed 0xa0 starts a surrogate: wrong at once, not at the end.
    assert_eq!(u.feed(&[0xed]), Ok(()));
    assert_eq!(u.feed(&[0xa0]), Err(WsError::InvalidUtf8));
    let mut u = Utf8::default();
    assert_eq!(u.feed(&[0xc0]), Err(WsError::InvalidUtf8));
}

#[test]
fn close_names_are_a_closed_set() {
    assert_eq!(CloseName::of(Some(1000)), CloseName::Normal);
    assert_eq!(CloseName::of(None), CloseName::NoStatus);
    assert_eq!(CloseName::of(Some(4000)), CloseName::Other);
    assert_eq!(CloseName::of(Some(1011)).name(), "internal_error");
    assert!(close_code_allowed(1000) && close_code_allowed(3000) && !close_code_allowed(1006));
}

#[test]
fn handshake_both_ends() {
    let spec = RequestSpec {
        method: "POST".into(),
        target: "/chat?x=1".into(),
        host: "h:1".into(),
        headers: vec![
            ("Authorization".into(), "Bearer t".into()),
            ("Upgrade".into(), "nope".into()),
        ],
        body: b"ignored".to_vec(),
        close: true,
    };
    let up = Upgrade::new(&spec, Some("chat.v1"));
    let key = *b"dGhlIHNhbXBsZSBub25jZQ==";
    let req = up.with_key(&key);
    let text = String::from_utf8(req.clone()).unwrap();
    assert!(text.starts_with("GET /chat?x=1 HTTP/1.1\r\n"), "{text}");
    assert!(
        text.contains("Authorization: Bearer t\r\n") && !text.contains("nope"),
        "{text}"
    );
    assert!(
        text.ends_with("Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"),
        "{text}"
    );
    assert!(
        !text.contains("ignored") && !text.contains("Connection: close"),
        "{text}"
    );

    // The server's half answers it; the client's half accepts the answer.
    let mut hs = [httparse::EMPTY_HEADER; 32];
    let mut parsed = httparse::Request::new(&mut hs);
    parsed.parse(&req).unwrap();
    let accept = accept_request(parsed.method.unwrap(), parsed.headers).unwrap();
    let mut answer = Vec::new();
    render_accept(&mut answer, &accept, Some("chat.v1"));
    let expect = accept_key(&key);
    answer.extend_from_slice(&[0x81, 0x00]);
    assert_eq!(
        check_response(&answer, &expect, Some("chat.v1")),
        Ok(Some(answer.len() - 2))
    );
    assert_eq!(check_response(&answer[..20], &expect, Some("chat.v1")), Ok(None));
    assert_eq!(check_response(&answer, &expect, None), Err(HandshakeError::Subprotocol));
    let mut plain = Vec::new();
    render_accept(&mut plain, &accept, None);
    assert_eq!(
        check_response(&plain, &expect, Some("chat.v1")),
        Err(HandshakeError::Subprotocol)
    );
    let wrong = accept_key(b"AAAAAAAAAAAAAAAAAAAAAA==");
    assert_eq!(check_response(&plain, &wrong, None), Err(HandshakeError::BadAccept));
    assert_eq!(
        check_response(b"HTTP/1.1 403 Forbidden\r\n\r\n", &expect, None),
        Err(HandshakeError::Status(403))
    );
    assert_eq!(
        check_response(b"garbage\r\n\r\n", &expect, None),
        Err(HandshakeError::Malformed)
    );
    let ext = String::from_utf8(plain.clone())
        .unwrap()
        .replace("\r\n\r\n", "\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n");
    assert_eq!(
        check_response(ext.as_bytes(), &expect, None),
        Err(HandshakeError::Extension)
    );
    let no_up = String::from_utf8(plain).unwrap().replace("Upgrade: websocket\r\n", "");
    assert_eq!(
        check_response(no_up.as_bytes(), &expect, None),
        Err(HandshakeError::NotUpgraded)
    );

    // Refusals.
    let h = |n: &'static str, v: &'static [u8]| httparse::Header { name: n, value: v };
    let good = [
        h("Upgrade", b"websocket"),
        h("Connection", b"keep-alive, Upgrade"),
        h("Sec-WebSocket-Version", b"13"),
        h("Sec-WebSocket-Key", b"dGhlIHNhbXBsZSBub25jZQ=="),
    ];
    assert_eq!(accept_request("GET", &good), Ok(expect));
    assert_eq!(accept_request("POST", &good), Err(UpgradeRefused::NotUpgrade));
    assert_eq!(accept_request("GET", &good[1..]), Err(UpgradeRefused::NotUpgrade));
    let v8 = [good[0], good[1], h("Sec-WebSocket-Version", b"8"), good[3]];
    assert_eq!(accept_request("GET", &v8), Err(UpgradeRefused::Version));
    let short = [good[0], good[1], good[2], h("Sec-WebSocket-Key", b"abc=")];
    assert_eq!(accept_request("GET", &short), Err(UpgradeRefused::Key));
}

fn arb_frame() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<bool>(),
        0u8..16,
        proptest::collection::vec(any::<u8>(), 0..300),
        any::<bool>(),
        any::<u8>(),
    )
        .prop_map(|(fin, op, payload, masked, rsv)| {
            let mut f = Vec::new();
            let op_bits = Opcode::from_bits(op).unwrap_or(Opcode::Binary);
            encode_frame(&mut f, fin, op_bits, &payload, masked.then_some([9, 8, 7, 6]));
            // Sometimes an odd opcode or reserved bit.
            if rsv < 8 {
                f[0] = (f[0] & 0x80) | (rsv << 4) | op;
            }
            f
        })
}

proptest! {
    /// Any split of a stream decodes as the stream read at once, and the
    /// decoder never needs more than a control frame carried.
    #[test]
    fn any_split_decodes_the_same(
        frames in proptest::collection::vec(arb_frame(), 1..8),
        sizes in proptest::collection::vec(1usize..40, 1..4),
        server in any::<bool>(),
    ) {
        let stream = frames.concat();
        let role = if server { Role::Server } else { Role::Client };
        let whole = decode_all(role, 1000, &stream, &[]);
        let split = decode_all(role, 1000, &stream, &sizes);
        prop_assert_eq!(whole, split);
    }

    /// Whatever the bytes, the decoder does not panic and consumes no
    /// more than it is given.
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400), size in 1usize..50) {
        let _ = decode_all(Role::Client, 200, &bytes, &[size]);
        let _ = decode_all(Role::Server, 200, &bytes, &[size]);
    }
}

#[test]
fn mask_keys_differ_across_a_pool_refill() {
    // 200 keys span three refills of the per-thread pool (64 keys each).
    let keys: std::collections::HashSet<[u8; 4]> = (0..200).map(|_| mask_key()).collect();
    assert!(keys.len() >= 199, "only {} distinct keys of 200", keys.len());
}
