//! QPACK (RFC 9204) with the static table only: blocks are encoded with
//! static references and literals, and decoded when they use nothing else.

/// Why a field section could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QpackError {
    /// Not valid QPACK, or it refers to the dynamic table this side
    /// announced as 0 bytes (QPACK_DECOMPRESSION_FAILED).
    #[error("field section is not valid QPACK without a dynamic table")]
    Decompression,
}

/// A field section of `fields` (names lower-case, pseudo-fields first):
/// prefix 0/0, each field a static-table reference where name and value
/// match one, a literal with a static name reference where the name
/// does, else a literal name and value; no Huffman coding. The same
/// fields always give the same bytes.
pub fn encode_block(fields: &[(&[u8], &[u8])]) -> Vec<u8> {
    let _ = fields;
    todo!()
}

/// Decodes field section `block`, calling `field(name, value)` for each
/// field in order. Huffman-coded strings are decoded into `scratch`
/// (reused across calls, so steady state allocates nothing); static
/// entries and raw literals are borrowed. A block whose Required Insert
/// Count is not 0, or that names the dynamic table, is an error.
pub fn decode_block(block: &[u8], scratch: &mut Vec<u8>, field: impl FnMut(&[u8], &[u8])) -> Result<(), QpackError> {
    let _ = (block, scratch, field);
    todo!()
}
