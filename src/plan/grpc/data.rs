//! A call's request message, encoded once from what the operator gave
//! (`--data JSON`, `--data-file FILE`: protobuf's canonical JSON mapping;
//! `--data-bin FILE`: bytes already encoded), and responses decoded back
//! for a check that asks.
//!
//! JSON is read through prost-reflect's mapping (every well-known type,
//! 64-bit integers as strings, enum names or numbers, camelCase or proto
//! field names; unknown fields refused), with serde_path_to_error keeping
//! where the reader was, so a message that does not fit names the field:
//! `items[2].name: invalid type: integer `5`, expected a string`.

use std::path::PathBuf;

use prost::Message as _;
use prost_reflect::{DynamicMessage, MessageDescriptor, SerializeOptions};

use super::error::SchemaError;

/// Where a call's request message comes from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum MessageData {
    /// None given: the message with every field at its default (encoded
    /// as zero bytes).
    #[default]
    Empty,
    /// `--data`: JSON text.
    Json(String),
    /// `--data-file`: a file of JSON.
    JsonFile(PathBuf),
    /// `--data-bin`: a file holding the encoded message.
    Binary(PathBuf),
}

/// Encodes `data` as a `desc` message (unframed protobuf bytes).
pub fn encode(desc: &MessageDescriptor, data: &MessageData) -> Result<Vec<u8>, SchemaError> {
    let read = |flag: &'static str, path: &PathBuf| {
        std::fs::read(path).map_err(|e| SchemaError::Read {
            flag,
            path: path.display().to_string(),
            reason: e.to_string(),
        })
    };
    match data {
        MessageData::Empty => Ok(Vec::new()),
        MessageData::Json(text) => from_json(desc, text, "--data".into()),
        MessageData::JsonFile(path) => {
            let bytes = read("--data-file", path)?;
            let origin = format!("--data-file {}", path.display());
            let text = String::from_utf8(bytes).map_err(|e| SchemaError::Json {
                origin: origin.clone(),
                message_type: desc.full_name().to_string(),
                path: String::new(),
                reason: format!("not UTF-8 text ({e})"),
            })?;
            from_json(desc, &text, origin)
        }
        MessageData::Binary(path) => {
            let bytes = read("--data-bin", path)?;
            // Decoded once to be sure it is a message of the type (the
            // bytes sent are the file's, unchanged).
            DynamicMessage::decode(desc.clone(), &bytes[..]).map_err(|e| SchemaError::Binary {
                path: path.display().to_string(),
                message_type: desc.full_name().to_string(),
                reason: e.to_string(),
            })?;
            Ok(bytes)
        }
    }
}

/// The JSON `text` as a `desc` message, encoded.
pub fn from_json(desc: &MessageDescriptor, text: &str, origin: String) -> Result<Vec<u8>, SchemaError> {
    let mut json = serde_json::Deserializer::from_str(text);
    let mut track = serde_path_to_error::Track::new();
    let parsed = DynamicMessage::deserialize(
        desc.clone(),
        serde_path_to_error::Deserializer::new(&mut json, &mut track),
    )
    .and_then(|m| json.end().map(|()| m));
    match parsed {
        Ok(message) => Ok(message.encode_to_vec()),
        Err(e) => Err(SchemaError::Json {
            origin,
            message_type: desc.full_name().to_string(),
            path: json_path(&track.path()),
            reason: without_position(&e),
        }),
    }
}

/// The path serde_path_to_error kept, as `items[2].name` (empty at the
/// top level, or where it could not tell: `?`).
fn json_path(path: &serde_path_to_error::Path) -> String {
    let text = path.to_string();
    if text == "." || text == "?" {
        String::new()
    } else {
        text
    }
}

/// serde_json's message with its position in words at the end.
fn without_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    match text.strip_suffix(&suffix) {
        Some(msg) if e.line() > 0 => format!("{msg} (line {}, column {})", e.line(), e.column()),
        _ => text,
    }
}

/// A response message that could not be decoded (or rendered as JSON).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a valid {message_type} message ({reason})")]
pub struct DecodeError {
    /// The type expected.
    pub message_type: String,
    /// What went wrong.
    pub reason: String,
}

/// Decodes a `desc` message (a response, for a check).
pub fn decode(desc: &MessageDescriptor, bytes: &[u8]) -> Result<DynamicMessage, DecodeError> {
    DynamicMessage::decode(desc.clone(), bytes).map_err(|e| DecodeError {
        message_type: desc.full_name().to_string(),
        reason: e.to_string(),
    })
}

/// Decodes a `desc` message into protobuf's canonical JSON (fields by
/// their JSON names, defaults left out).
pub fn to_json(desc: &MessageDescriptor, bytes: &[u8]) -> Result<String, DecodeError> {
    let message = decode(desc, bytes)?;
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::new(&mut out);
    // An Any whose type the schema lacks cannot be written as JSON.
    message
        .serialize_with_options(&mut ser, &SerializeOptions::new())
        .map_err(|e| DecodeError {
            message_type: desc.full_name().to_string(),
            reason: e.to_string(),
        })?;
    Ok(String::from_utf8(out).expect("serde_json writes UTF-8"))
}
