//! HPACK (RFC 7541) through `loona-hpack`, the way soakd uses it.
//!
//! Sending: a header block is rendered once and sent many times, so it must
//! not depend on a dynamic table: [`encode_block`] starts every block with
//! a dynamic table size update to 0 and encodes with an encoder whose table
//! is 0 bytes, so each field is a static index or a literal, and the same
//! headers always give the same bytes.
//!
//! Receiving: [`HeaderDecoder`] decodes a whole block (HEADERS plus its
//! CONTINUATIONs, whose size the frame decoder has capped) and hands each
//! field to a callback; indexed fields are borrowed from the tables, raw
//! literals from the block, and Huffman-coded ones are decoded into the
//! thread's scratch buffers (patched into the vendored crate, see
//! vendor/loona-hpack/VENDORED.md): no allocation per response unless a
//! field enters the dynamic table. The
//! decoded list is checked against the header-list limit this side
//! announced, and a peer's table size update above the size this side
//! announced is an error, never a panic (`set_max_allowed_table_size`).

use std::borrow::Cow;
use std::cell::RefCell;

/// Why a header block could not be taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HpackError {
    /// The block is not valid HPACK (a connection error,
    /// COMPRESSION_ERROR).
    #[error("header block is not valid HPACK")]
    Compression,
    /// The decoded fields exceed the header-list limit (name + value + 32
    /// bytes each, RFC 9113 §6.5.2). The block was still decoded whole, so
    /// the table stays in step and only the stream need fail.
    #[error("header list over the size limit")]
    ListTooLarge,
}

/// A header block that needs no dynamic table on either side.
pub fn encode_block(fields: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut enc = loona_hpack::Encoder::new();
    enc.set_max_table_size(0);
    // A dynamic table size update to 0 (RFC 7541 §6.3): the peer's decoder
    // keeps nothing for this connection.
    let mut out = vec![0x20];
    enc.encode_into(fields.iter().copied(), &mut out)
        .expect("writing to a Vec cannot fail");
    out
}

thread_local! {
    /// Where the HPACK decoder writes Huffman-coded names and values: one
    /// pair of buffers per worker thread, kept from block to block, so a
    /// response's headers decode without allocating (nginx Huffman-codes
    /// every response value). Per thread rather than per connection: a
    /// buffer per connection would cost every held connection its bytes.
    static SCRATCH: RefCell<[Vec<u8>; 2]> = const { RefCell::new([Vec::new(), Vec::new()]) };
}

/// The most capacity a scratch buffer keeps after a block (a long cookie or
/// token fits; a hostile megabyte string is freed).
const SCRATCH_KEEP: usize = 16 * 1024;

/// One connection's HPACK decoder.
pub struct HeaderDecoder {
    inner: loona_hpack::Decoder<'static>,
    max_list: usize,
}

impl std::fmt::Debug for HeaderDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeaderDecoder")
            .field("max_list", &self.max_list)
            .finish()
    }
}

impl HeaderDecoder {
    /// A decoder for a peer told SETTINGS_HEADER_TABLE_SIZE `table_size`
    /// and SETTINGS_MAX_HEADER_LIST_SIZE `max_list`. Until the peer has
    /// seen those settings it may still use the default 4096-byte table,
    /// which is allowed for as well.
    pub fn new(table_size: usize, max_list: usize) -> HeaderDecoder {
        let mut inner = loona_hpack::Decoder::new();
        inner.set_max_allowed_table_size(table_size.max(4096));
        HeaderDecoder { inner, max_list }
    }

    /// Decodes a whole header block, calling `field` with each name and
    /// value in order.
    pub fn decode(&mut self, block: &[u8], mut field: impl FnMut(&[u8], &[u8])) -> Result<(), HpackError> {
        let mut size = 0usize;
        let max = self.max_list;
        SCRATCH
            .with_borrow_mut(|scratch| {
                let r = self
                    .inner
                    .decode_with_cb_scratch(block, scratch, |n: Cow<'_, [u8]>, v: Cow<'_, [u8]>| {
                        size += n.len() + v.len() + 32;
                        if size <= max {
                            field(&n, &v);
                        }
                    });
                // A hostile block's huge string is not kept for the thread's
                // lifetime.
                for b in scratch.iter_mut() {
                    if b.capacity() > SCRATCH_KEEP {
                        *b = Vec::new();
                    }
                }
                r
            })
            .map_err(|_| HpackError::Compression)?;
        if size > max {
            return Err(HpackError::ListTooLarge);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(d: &mut HeaderDecoder, block: &[u8]) -> Result<Vec<(String, String)>, HpackError> {
        let mut out = Vec::new();
        d.decode(block, |n, v| {
            out.push((String::from_utf8_lossy(n).into(), String::from_utf8_lossy(v).into()))
        })?;
        Ok(out)
    }

    #[test]
    fn blocks_round_trip_and_are_the_same_every_time() {
        let f: &[(&[u8], &[u8])] = &[
            (b":method", b"GET"),
            (b":scheme", b"https"),
            (b":path", b"/a?b=c"),
            (b":authority", b"example.test"),
            (b"x-custom", b"1"),
        ];
        let a = encode_block(f);
        assert_eq!(a, encode_block(f), "no state between blocks");
        let mut d = HeaderDecoder::new(0, 64 * 1024);
        for _ in 0..3 {
            let got = fields(&mut d, &a).unwrap();
            let want: Vec<(String, String)> = f
                .iter()
                .map(|(n, v)| (String::from_utf8_lossy(n).into(), String::from_utf8_lossy(v).into()))
                .collect();
            assert_eq!(got, want);
        }
    }

    #[test]
    fn known_encodings_decode() {
        // RFC 7541 C.6.1: a response with Huffman-coded literals, indexed
        // into the dynamic table by the next block (C.6.2).
        let c61 = [
            0x48, 0x82, 0x64, 0x02, 0x58, 0x85, 0xae, 0xc3, 0x77, 0x1a, 0x4b, 0x61, 0x96, 0xd0, 0x7a, 0xbe, 0x94, 0x10,
            0x54, 0xd4, 0x44, 0xa8, 0x20, 0x05, 0x95, 0x04, 0x0b, 0x81, 0x66, 0xe0, 0x82, 0xa6, 0x2d, 0x1b, 0xff, 0x6e,
            0x91, 0x9d, 0x29, 0xad, 0x17, 0x18, 0x63, 0xc7, 0x8f, 0x0b, 0x97, 0xc8, 0xe9, 0xae, 0x82, 0xae, 0x43, 0xd3,
        ];
        let c62 = [0x48, 0x83, 0x64, 0x0e, 0xff, 0xc1, 0xc0, 0xbf];
        let mut d = HeaderDecoder::new(4096, 64 * 1024);
        let first = fields(&mut d, &c61).unwrap();
        assert_eq!(first[0], (":status".into(), "302".into()));
        assert_eq!(first[3], ("location".into(), "https://www.example.com".into()));
        let second = fields(&mut d, &c62).unwrap();
        assert_eq!(second[0], (":status".into(), "307".into()));
        assert_eq!(second[3], ("location".into(), "https://www.example.com".into()));
    }

    #[test]
    fn bad_blocks_and_long_lists_are_errors() {
        let mut d = HeaderDecoder::new(0, 100);
        // An index past both tables; a truncated literal; a size update
        // over the allowed table size.
        assert_eq!(fields(&mut d, &[0xff, 0x7f]), Err(HpackError::Compression));
        assert_eq!(fields(&mut d, &[0x00, 0x05, b'a']), Err(HpackError::Compression));
        assert_eq!(
            fields(&mut d, &[0x3f, 0xe1, 0xff, 0x03, 0x88]),
            Err(HpackError::Compression)
        );
        // Three fields of 40+ bytes each: over 100.
        let long = encode_block(&[(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]);
        assert_eq!(fields(&mut d, &long), Err(HpackError::ListTooLarge));
        // The decoder is still usable afterwards.
        assert_eq!(fields(&mut d, &[0x88]).unwrap(), [(":status".into(), "200".into())]);
    }
}
