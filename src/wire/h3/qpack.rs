//! QPACK (RFC 9204) with the static table only: blocks are encoded with
//! static references and literals, and decoded when they use nothing else.

use loona_hpack::huffman::HuffmanDecoder;

/// Why a field section could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QpackError {
    /// Not valid QPACK, or it refers to the dynamic table this side
    /// announced as 0 bytes (QPACK_DECOMPRESSION_FAILED).
    #[error("field section is not valid QPACK without a dynamic table")]
    Decompression,
}

/// The static table (RFC 9204 Appendix A), indexed from 0.
#[rustfmt::skip]
const STATIC: [(&[u8], &[u8]); 99] = [
    (b":authority", b""),
    (b":path", b"/"),
    (b"age", b"0"),
    (b"content-disposition", b""),
    (b"content-length", b"0"),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"referer", b""),
    (b"set-cookie", b""),
    (b":method", b"CONNECT"),
    (b":method", b"DELETE"),
    (b":method", b"GET"),
    (b":method", b"HEAD"),
    (b":method", b"OPTIONS"),
    (b":method", b"POST"),
    (b":method", b"PUT"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"103"),
    (b":status", b"200"),
    (b":status", b"304"),
    (b":status", b"404"),
    (b":status", b"503"),
    (b"accept", b"*/*"),
    (b"accept", b"application/dns-message"),
    (b"accept-encoding", b"gzip, deflate, br"),
    (b"accept-ranges", b"bytes"),
    (b"access-control-allow-headers", b"cache-control"),
    (b"access-control-allow-headers", b"content-type"),
    (b"access-control-allow-origin", b"*"),
    (b"cache-control", b"max-age=0"),
    (b"cache-control", b"max-age=2592000"),
    (b"cache-control", b"max-age=604800"),
    (b"cache-control", b"no-cache"),
    (b"cache-control", b"no-store"),
    (b"cache-control", b"public, max-age=31536000"),
    (b"content-encoding", b"br"),
    (b"content-encoding", b"gzip"),
    (b"content-type", b"application/dns-message"),
    (b"content-type", b"application/javascript"),
    (b"content-type", b"application/json"),
    (b"content-type", b"application/x-www-form-urlencoded"),
    (b"content-type", b"image/gif"),
    (b"content-type", b"image/jpeg"),
    (b"content-type", b"image/png"),
    (b"content-type", b"text/css"),
    (b"content-type", b"text/html; charset=utf-8"),
    (b"content-type", b"text/plain"),
    (b"content-type", b"text/plain;charset=utf-8"),
    (b"range", b"bytes=0-"),
    (b"strict-transport-security", b"max-age=31536000"),
    (b"strict-transport-security", b"max-age=31536000; includesubdomains"),
    (b"strict-transport-security", b"max-age=31536000; includesubdomains; preload"),
    (b"vary", b"accept-encoding"),
    (b"vary", b"origin"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-xss-protection", b"1; mode=block"),
    (b":status", b"100"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"302"),
    (b":status", b"400"),
    (b":status", b"403"),
    (b":status", b"421"),
    (b":status", b"425"),
    (b":status", b"500"),
    (b"accept-language", b""),
    (b"access-control-allow-credentials", b"FALSE"),
    (b"access-control-allow-credentials", b"TRUE"),
    (b"access-control-allow-headers", b"*"),
    (b"access-control-allow-methods", b"get"),
    (b"access-control-allow-methods", b"get, post, options"),
    (b"access-control-allow-methods", b"options"),
    (b"access-control-expose-headers", b"content-length"),
    (b"access-control-request-headers", b"content-type"),
    (b"access-control-request-method", b"get"),
    (b"access-control-request-method", b"post"),
    (b"alt-svc", b"clear"),
    (b"authorization", b""),
    (b"content-security-policy", b"script-src 'none'; object-src 'none'; base-uri 'none'"),
    (b"early-data", b"1"),
    (b"expect-ct", b""),
    (b"forwarded", b""),
    (b"if-range", b""),
    (b"origin", b""),
    (b"purpose", b"prefetch"),
    (b"server", b""),
    (b"timing-allow-origin", b"*"),
    (b"upgrade-insecure-requests", b"1"),
    (b"user-agent", b""),
    (b"x-forwarded-for", b""),
    (b"x-frame-options", b"deny"),
    (b"x-frame-options", b"sameorigin"),
];

/// Appends `v` as a prefix integer (RFC 7541 §5.1, which QPACK uses):
/// `flags` fill the first byte's bits above the `bits`-bit prefix.
fn put_int(out: &mut Vec<u8>, flags: u8, bits: u32, v: usize) {
    let max = (1usize << bits) - 1;
    if v < max {
        out.push(flags | v as u8);
        return;
    }
    out.push(flags | max as u8);
    let mut rest = v - max;
    while rest >= 0x80 {
        out.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// Appends a string literal with no Huffman coding: H = 0, the length as
/// a `bits`-bit prefix integer under `flags`, then the bytes.
fn put_str(out: &mut Vec<u8>, flags: u8, bits: u32, s: &[u8]) {
    put_int(out, flags, bits, s.len());
    out.extend_from_slice(s);
}

/// A field section of `fields` (names lower-case, pseudo-fields first):
/// prefix 0/0, each field a static-table reference where name and value
/// match one, a literal with a static name reference where the name
/// does, else a literal name and value; no Huffman coding. The same
/// fields always give the same bytes.
pub fn encode_block(fields: &[(&[u8], &[u8])]) -> Vec<u8> {
    let size = 2 + fields.iter().map(|(n, v)| n.len() + v.len() + 4).sum::<usize>();
    let mut out = Vec::with_capacity(size);
    // Required Insert Count 0, Delta Base 0 (sign 0).
    out.extend_from_slice(&[0, 0]);
    for &(name, value) in fields {
        // The first entry with both, else the first with the name: a scan
        // of 99 entries, done once per rendered request or response.
        let mut by_name = None;
        let mut exact = None;
        for (i, &(n, v)) in STATIC.iter().enumerate() {
            if n == name {
                by_name.get_or_insert(i);
                if v == value {
                    exact = Some(i);
                    break;
                }
            }
        }
        match (exact, by_name) {
            // Indexed field line: 1, T = 1 (static), 6-bit index.
            (Some(i), _) => put_int(&mut out, 0xc0, 6, i),
            // Literal with name reference: 01, N = 0, T = 1, 4-bit index.
            (None, Some(i)) => {
                put_int(&mut out, 0x50, 4, i);
                put_str(&mut out, 0x00, 7, value);
            }
            // Literal with literal name: 001, N = 0, H = 0, 3-bit length.
            (None, None) => {
                put_str(&mut out, 0x20, 3, name);
                put_str(&mut out, 0x00, 7, value);
            }
        }
    }
    out
}

/// Decodes field section `block`, calling `field(name, value)` for each
/// field in order. Huffman-coded strings are decoded into `scratch`
/// (reused across calls, so steady state allocates nothing); static
/// entries and raw literals are borrowed. A block whose Required Insert
/// Count is not 0, or that names the dynamic table, is an error.
pub fn decode_block(
    block: &[u8],
    scratch: &mut Vec<u8>,
    mut field: impl FnMut(&[u8], &[u8]),
) -> Result<(), QpackError> {
    let mut r = Reader { block, at: 0 };
    // Required Insert Count (8-bit prefix): with no dynamic table only 0
    // is possible. Then Delta Base (sign bit, 7-bit prefix), which means
    // nothing when nothing is inserted: read past, whatever it says.
    if r.int(8)? != 0 {
        return Err(QpackError::Decompression);
    }
    r.int(7)?;
    while r.at < block.len() {
        let first = block[r.at];
        // A string of a field line: borrowed from the block or the table,
        // or the range of `scratch` it was Huffman-decoded into (resolved
        // once both are decoded, as `scratch` may move while growing).
        let (name, value);
        scratch.clear();
        if first & 0x80 != 0 {
            // Indexed field line: 1 T index(6).
            if first & 0x40 == 0 {
                return Err(QpackError::Decompression);
            }
            let (n, v) = entry(r.int(6)?)?;
            field(n, v);
            continue;
        } else if first & 0x40 != 0 {
            // Literal with name reference: 01 N T index(4).
            if first & 0x10 == 0 {
                return Err(QpackError::Decompression);
            }
            name = Str::Borrowed(entry(r.int(4)?)?.0);
            value = r.string(7, scratch)?;
        } else if first & 0x20 != 0 {
            // Literal with literal name: 001 N H length(3).
            name = r.string(3, scratch)?;
            value = r.string(7, scratch)?;
        } else {
            // 0001: indexed post-base; 0000: literal with post-base name
            // reference. Both name the dynamic table.
            return Err(QpackError::Decompression);
        }
        field(name.get(scratch), value.get(scratch));
    }
    Ok(())
}

/// Static table entry `i`.
fn entry(i: u64) -> Result<(&'static [u8], &'static [u8]), QpackError> {
    usize::try_from(i)
        .ok()
        .and_then(|i| STATIC.get(i))
        .copied()
        .ok_or(QpackError::Decompression)
}

/// A decoded string: borrowed, or where in the scratch buffer it is.
enum Str<'b> {
    Borrowed(&'b [u8]),
    Scratch(usize, usize),
}

impl<'b> Str<'b> {
    fn get<'s>(&self, scratch: &'s [u8]) -> &'s [u8]
    where
        'b: 's,
    {
        match *self {
            Str::Borrowed(s) => s,
            Str::Scratch(from, to) => &scratch[from..to],
        }
    }
}

/// Reads a block's integers and strings, never past its end.
struct Reader<'b> {
    block: &'b [u8],
    at: usize,
}

impl<'b> Reader<'b> {
    /// A prefix integer whose prefix is the low `bits` of the next byte
    /// (RFC 7541 §5.1). Values over 2^62 are refused rather than wrapped:
    /// nothing in a block that fits in memory needs more.
    fn int(&mut self, bits: u32) -> Result<u64, QpackError> {
        let max = (1u64 << bits) - 1;
        let first = *self.block.get(self.at).ok_or(QpackError::Decompression)?;
        self.at += 1;
        let mut v = u64::from(first) & max;
        if v < max {
            return Ok(v);
        }
        let mut shift = 0;
        loop {
            let b = *self.block.get(self.at).ok_or(QpackError::Decompression)?;
            self.at += 1;
            if shift > 56 {
                return Err(QpackError::Decompression);
            }
            v += u64::from(b & 0x7f) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
    }

    /// A string literal: H is the bit just above the `bits`-bit length
    /// prefix. A Huffman-coded one is decoded onto the end of `scratch`.
    fn string(&mut self, bits: u32, scratch: &mut Vec<u8>) -> Result<Str<'b>, QpackError> {
        let huffman = self.block.get(self.at).ok_or(QpackError::Decompression)? & (1 << bits) != 0;
        let len = self.int(bits)?;
        // Bounded by the block: a length past its end is an error, not a
        // reason to read on or to allocate.
        let rest = &self.block[self.at..];
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| l <= rest.len())
            .ok_or(QpackError::Decompression)?;
        let bytes = &rest[..len];
        self.at += len;
        if !huffman {
            return Ok(Str::Borrowed(bytes));
        }
        let from = scratch.len();
        HuffmanDecoder::new()
            .decode_into(bytes, scratch)
            .map_err(|_| QpackError::Decompression)?;
        Ok(Str::Scratch(from, scratch.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(block: &[u8]) -> Result<Vec<(String, String)>, QpackError> {
        let mut out = Vec::new();
        decode_block(block, &mut Vec::new(), |n, v| {
            out.push((String::from_utf8_lossy(n).into(), String::from_utf8_lossy(v).into()))
        })?;
        Ok(out)
    }

    fn owned(fields: &[(&[u8], &[u8])]) -> Vec<(String, String)> {
        fields
            .iter()
            .map(|(n, v)| (String::from_utf8_lossy(n).into(), String::from_utf8_lossy(v).into()))
            .collect()
    }

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn the_static_table_is_rfc_9204s() {
        assert_eq!(STATIC[0], (&b":authority"[..], &b""[..]));
        assert_eq!(STATIC[17], (&b":method"[..], &b"GET"[..]));
        assert_eq!(STATIC[25], (&b":status"[..], &b"200"[..]));
        assert_eq!(STATIC[63], (&b":status"[..], &b"100"[..]));
        assert_eq!(STATIC[98], (&b"x-frame-options"[..], &b"sameorigin"[..]));
    }

    #[test]
    fn a_request_and_a_response_round_trip() {
        let request: &[(&[u8], &[u8])] = &[
            (b":method", b"GET"),
            (b":scheme", b"https"),
            (b":authority", b"api.example.test:8443"),
            (b":path", b"/v1/items?page=2&sort=desc"),
            (b"user-agent", b"soakd/0.1"),
            (b"accept", b"*/*"),
            (b"accept-encoding", b"gzip"),
            (b"x-request-id", b"0f8e7d6c-5b4a-3928-1706-f5e4d3c2b1a0"),
            (b"cookie", &[b'c'; 300]),
        ];
        let response: &[(&[u8], &[u8])] = &[
            (b":status", b"200"),
            (b"content-type", b"application/json"),
            (b"content-length", b"1234"),
            (b"date", b"Mon, 21 Oct 2013 20:13:21 GMT"),
            (b"server", b"soakd"),
            (b"x-empty", b""),
        ];
        for fields in [request, response] {
            let block = encode_block(fields);
            assert_eq!(decode(&block).unwrap(), owned(fields));
            assert_eq!(encode_block(fields), block, "the same fields, the same bytes");
        }
        // The expected forms: GET, https, */* and :status 200 are static
        // references; :authority a name reference; x-request-id literal.
        let block = encode_block(&request[..2]);
        assert_eq!(block, [0, 0, 0xc0 | 17, 0xc0 | 23]);
        let block = encode_block(&[(b":authority", b"a")]);
        assert_eq!(block, [0, 0, 0x50, 1, b'a']);
        let block = encode_block(&[(b"x-a", b"b")]);
        assert_eq!(block, [0, 0, 0x23, b'x', b'-', b'a', 1, b'b']);
    }

    #[test]
    fn large_indices_and_lengths_use_continuation_bytes() {
        // Static index 98 (6-bit prefix: 63 + 35), name index 92 (4-bit
        // prefix: 15 + 77), a 200-byte value (7-bit: 127 + 73), a 10-byte
        // literal name (3-bit: 7 + 3).
        let long = [b'v'; 200];
        let fields: &[(&[u8], &[u8])] = &[
            (b"x-frame-options", b"sameorigin"),
            (b"server", &long),
            (b"abcdefghij", &long),
        ];
        let block = encode_block(fields);
        assert_eq!(&block[..4], [0, 0, 0xff, 35]);
        assert_eq!(&block[4..8], [0x5f, 77, 0x7f, 73]);
        assert_eq!(&block[208..210], [0x27, 3]);
        assert_eq!(decode(&block).unwrap(), owned(fields));
        let mut out = Vec::new();
        put_int(&mut out, 0, 7, 1_337_000);
        let mut r = Reader { block: &out, at: 0 };
        assert_eq!(r.int(7), Ok(1_337_000));
        assert_eq!(r.at, out.len());
    }

    #[test]
    fn decodes_rfc_9204_b_1() {
        let block = hex("0000 510b 2f69 6e64 6578 2e68 746d 6c");
        assert_eq!(decode(&block).unwrap(), owned(&[(b":path", b"/index.html")]));
    }

    #[test]
    fn decodes_huffman_coded_names_and_values() {
        // "www.example.com" Huffman-coded (RFC 7541 C.4.1), as the value
        // of :authority (name reference 0, H set, length 12).
        let www = hex("f1e3 c2e5 f23a 6ba0 ab90 f4ff");
        let mut block = vec![0, 0, 0x50, 0x80 | 12];
        block.extend_from_slice(&www);
        assert_eq!(decode(&block).unwrap(), owned(&[(b":authority", b"www.example.com")]));
        // A literal name and value both Huffman-coded ("custom-key",
        // "custom-value", RFC 7541 C.4.3), after a raw literal; the name's
        // 8-byte length overflows its 3-bit prefix (7, then 1).
        let key = hex("25a8 49e9 5ba9 7d7f");
        let value = hex("25a8 49e9 5bb8 e8b4 bf");
        let mut block = vec![0, 0, 0x21, b'k', 1, b'v', 0x28 | 7, 1];
        block.extend_from_slice(&key);
        block.push(0x80 | value.len() as u8);
        block.extend_from_slice(&value);
        let want = owned(&[(b"k", b"v"), (b"custom-key", b"custom-value")]);
        let mut scratch = Vec::new();
        for _ in 0..2 {
            let mut got = Vec::new();
            decode_block(&block, &mut scratch, |n, v| {
                got.push((String::from_utf8_lossy(n).into(), String::from_utf8_lossy(v).into()))
            })
            .unwrap();
            assert_eq!(got, want);
        }
        // Bad padding (a zero bit) is an error.
        let block = [0, 0, 0x50, 0x81, 0x00];
        assert_eq!(decode(&block), Err(QpackError::Decompression));
    }

    #[test]
    fn decodes_a_block_from_ls_qpack() {
        // pylsqpack (ls-qpack, as aioquic uses it) with a 0-byte table:
        // Huffman-coded literals and static references. (The other way,
        // ls-qpack decodes `encode_block`'s output of these fields.)
        let block = hex(
            "0000 d1d7 508b 1d66 5cbe 474d 7415 7495 0951 022f 782f 02f2 b585 ed69 5095 8d27 821c 645f 5084 41c7 d64f",
        );
        let want: &[(&[u8], &[u8])] = &[
            (b":method", b"GET"),
            (b":scheme", b"https"),
            (b":authority", b"api.example.test"),
            (b":path", b"/x"),
            (b"x-request-id", b"abc"),
            (b"user-agent", b"soakd"),
        ];
        assert_eq!(decode(&block).unwrap(), owned(want));
        assert_eq!(
            hex_of(&encode_block(want)),
            "0000d1d750106170692e6578616d706c652e7465737451022f782705782d726571756573742d6964036162635f5005736f616b64"
        );
    }

    fn hex_of(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn the_dynamic_table_is_refused() {
        let cases: [&[u8]; 8] = [
            &[0x01, 0x00, 0xd1],          // Required Insert Count 1
            &[0x00, 0x00, 0x80],          // indexed, dynamic (T = 0)
            &[0x00, 0x00, 0x40, 0x00],    // literal, dynamic name reference
            &[0x00, 0x00, 0x10],          // indexed post-base
            &[0x00, 0x00, 0x00, 0x00],    // literal, post-base name reference
            &[0x00, 0x00, 0xc0 | 63, 36], // static index 99: past the table
            &[0x00, 0x00, 0x5f, 84],      // name reference 99
            &[0x00],                      // no Delta Base
        ];
        for block in cases {
            assert_eq!(decode(block), Err(QpackError::Decompression), "{block:x?}");
        }
        // A Delta Base with its sign set and any value is fine with RIC 0.
        assert_eq!(
            decode(&[0x00, 0xff, 0x05, 0xd1]).unwrap(),
            owned(&[(b":method", b"GET")])
        );
        assert_eq!(decode(&[0x00, 0x00]).unwrap(), []);
    }

    #[test]
    fn lengths_past_the_block_are_refused() {
        let cases: [&[u8]; 5] = [
            &[0, 0, 0x51, 5, b'a'],                                                    // value cut short
            &[0, 0, 0x27, 0xff, 0xff, 0xff, 0xff, 0x0f],                               // huge name length
            &[0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01], // index overflow
            &[0, 0, 0x5f],                                                             // index cut short
            &[0, 0, 0x22, b'a', b'b'],                                                 // no value
        ];
        for block in cases {
            assert_eq!(decode(block), Err(QpackError::Decompression), "{block:x?}");
        }
    }

    use proptest::collection::vec as vec_of;
    use proptest::prelude::any;

    /// Names with static entries, name-only entries and none.
    const NAMES: [&str; 6] = [
        ":status",
        "content-type",
        "x-custom",
        "server",
        ":path",
        "x-frame-options",
    ];

    proptest::proptest! {
        /// Any bytes: fields or an error, never a panic.
        #[test]
        fn arbitrary_blocks_never_panic(mut bytes in vec_of(any::<u8>(), 0..300)) {
            let _ = decode(&bytes);
            // And the same behind a valid prefix, to reach the field lines.
            bytes.splice(0..0, [0, 0]);
            let _ = decode(&bytes);
        }

        /// Whatever is encoded decodes to the same fields.
        #[test]
        fn encoded_blocks_round_trip(fields in vec_of(
            (
                proptest::sample::select(NAMES.to_vec()),
                vec_of(any::<u8>(), 0..200),
            ),
            0..10,
        )) {
            let fields: Vec<(&[u8], &[u8])> = fields.iter().map(|(n, v)| (n.as_bytes(), &v[..])).collect();
            proptest::prop_assert_eq!(decode(&encode_block(&fields)).unwrap(), owned(&fields));
        }
    }
}
