//! Custom call metadata from `-H 'name: value'`, checked and put in its
//! wire form once, when the plan is made.
//!
//! Names are lower-cased (HTTP/2 sends no capitals) and must be gRPC
//! header names that gRPC and HTTP/2 do not set themselves. A name ending
//! in `-bin` carries bytes: its value is given in base64 (standard or
//! URL-safe alphabet, padded or not, as the spec says a receiver must
//! accept), decoded here to be sure it is base64, and sent unpadded as the
//! spec asks a sender to. Other values must be printable ASCII.

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};

use super::error::SchemaError;
use crate::wire::grpc::{bad_ascii_value_byte, check_metadata_name, is_binary_name};

/// One metadata entry, ready to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetadataEntry {
    /// The name, lower case.
    pub name: String,
    /// The value as sent: the ASCII text, or the bytes of a `-bin` entry
    /// in unpadded base64.
    pub wire_value: String,
    /// A `-bin` entry's bytes.
    pub binary: Option<Vec<u8>>,
}

/// Reads one `-H` argument, `name: value`.
pub fn parse_metadata(given: &str) -> Result<MetadataEntry, SchemaError> {
    let err = |reason: String| SchemaError::Metadata {
        given: given.to_string(),
        reason,
    };
    let (name, value) = given
        .split_once(':')
        .ok_or_else(|| err("give it as 'name: value'".into()))?;
    let name = name.trim().to_ascii_lowercase();
    check_metadata_name(&name).map_err(|e| err(format!("bad name: {e}")))?;
    let value = value.trim();
    if is_binary_name(&name) {
        let bytes = decode_base64(value).ok_or_else(|| {
            err(format!(
                "the value of a -bin entry is base64 (its bytes are sent as such), and {value:?} is not"
            ))
        })?;
        return Ok(MetadataEntry {
            name,
            wire_value: STANDARD_NO_PAD.encode(&bytes),
            binary: Some(bytes),
        });
    }
    if let Some(b) = bad_ascii_value_byte(value.as_bytes()) {
        return Err(err(format!(
            "byte {b:#04x} is not printable ASCII; a value with other bytes goes under a name ending in -bin, \
             in base64"
        )));
    }
    Ok(MetadataEntry {
        name,
        wire_value: value.to_string(),
        binary: None,
    })
}

/// Base64 in either alphabet, padded or not.
fn decode_base64(value: &str) -> Option<Vec<u8>> {
    let unpadded = value.trim_end_matches('=');
    STANDARD_NO_PAD
        .decode(unpadded)
        .or_else(|_| URL_SAFE_NO_PAD.decode(unpadded))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_and_binary_entries() {
        let e = parse_metadata("Authorization: Bearer abc.def").unwrap();
        assert_eq!(
            (e.name.as_str(), e.wire_value.as_str()),
            ("authorization", "Bearer abc.def")
        );
        assert_eq!(e.binary, None);
        // Padded standard and unpadded URL-safe base64 give the same bytes,
        // sent unpadded.
        for v in ["AAEC/w==", "AAEC_w", "AAEC/w"] {
            let e = parse_metadata(&format!("trace-bin: {v}")).unwrap();
            assert_eq!(e.binary.as_deref(), Some(&[0, 1, 2, 255][..]), "{v}");
            assert_eq!(e.wire_value, "AAEC/w");
        }
    }

    #[test]
    fn bad_entries_say_what_to_do() {
        let msg = |s: &str| parse_metadata(s).unwrap_err().to_string();
        assert_eq!(msg("novalue"), "-H \"novalue\": give it as 'name: value'");
        assert!(
            msg("bad name: x").contains("' ' is not allowed"),
            "{}",
            msg("bad name: x")
        );
        assert!(msg("grpc-timeout: 1S").contains("reserved"));
        assert!(msg("te: trailers").contains("reserved"));
        assert!(msg("trace-bin: not base64!").contains("is base64"));
        assert!(msg("x: caf\u{e9}").contains("byte 0xc3 is not printable ASCII"));
    }
}
