//! `expect_grpc_message`: a check on a gRPC call's decoded reply,
//! compiled once with the schema (the status side, `expect_grpc_status`,
//! is a bit set in `plan::Checks` and needs no schema).
//!
//! The check is a JSON object the reply, decoded and written as protobuf's
//! canonical JSON, must contain: every key given, with the value given
//! (objects compared the same way, key by key, so nested fields need only
//! the keys that matter; lists element by element and of the same length;
//! other values equal). Why a subset in canonical JSON: it is `--data`'s
//! language, so the operator writes the reply as they wrote the request,
//! and replies carry ids, sequence numbers and times that change per call.
//! The expected JSON is read as the method's output type when the plan is
//! made, so a misspelled field or a wrong type is refused then (exit 2,
//! with its path), and written back in canonical form with defaults:
//! `{"number": 0, "big": 5}` matches a reply whose number is unset
//! (proto3's default) and whose int64 `big` protobuf writes as `"5"`.
//! A failed message check is the `body` check kind. Only a call with this
//! check keeps and decodes its reply, once, when it ends.

use prost_reflect::{DynamicMessage, MessageDescriptor, SerializeOptions};
use serde_json::Value;

use crate::wire::grpc::{PREFIX_LEN, parse_prefix};

/// Largest reply kept for a message check, bytes (gRPC's default
/// receive limit): a longer one fails the check.
pub const MAX_CHECKED_REPLY: usize = 4 * 1024 * 1024;

/// A check on the decoded reply (see the module doc).
#[derive(Clone, Debug, PartialEq)]
pub struct MessageCheck {
    output: MessageDescriptor,
    /// The keys given, in canonical JSON with their canonical values.
    want: Value,
}

impl MessageCheck {
    /// Reads `text` as a `desc` message; the error says what is wrong.
    pub fn compile(desc: &MessageDescriptor, text: &str) -> Result<MessageCheck, String> {
        let given: Value = serde_json::from_str(text)
            .map_err(|e| format!("{text:?} is not JSON ({e}); give a JSON object of the reply's fields"))?;
        if !given.is_object() {
            return Err(format!(
                "{text:?} is not a JSON object; give the fields the reply must contain, e.g. {{\"text\": \"hi\"}}"
            ));
        }
        let bytes = super::data::from_json(desc, text, String::new()).map_err(|e| e.to_string())?;
        let full = canonical(desc, &bytes).map_err(|e| e.to_string())?;
        let want = keep_given(&given, &full).ok_or_else(|| {
            format!(
                "{text:?}: a key could not be found in {} as protobuf writes it",
                desc.full_name()
            )
        })?;
        Ok(MessageCheck {
            output: desc.clone(),
            want,
        })
    }

    /// True when the reply's framed bytes (prefix and message; a unary
    /// reply is one message) hold a message that contains what is wanted.
    pub fn matches(&self, framed: &[u8]) -> bool {
        let Some((prefix, rest)) = framed.split_first_chunk::<PREFIX_LEN>() else {
            return false;
        };
        match parse_prefix(prefix) {
            // A compressed reply cannot be read (soakd offers no
            // grpc-accept-encoding, so a server should not send one).
            Ok(head) if !head.compressed && head.len as usize == rest.len() => {
                canonical(&self.output, rest).is_ok_and(|got| contains(&self.want, &got))
            }
            _ => false,
        }
    }

    /// The wanted keys and values, as compared.
    pub fn want(&self) -> &Value {
        &self.want
    }
}

/// A `desc` message's canonical JSON with every field, defaults included.
fn canonical(desc: &MessageDescriptor, bytes: &[u8]) -> Result<Value, String> {
    let m = DynamicMessage::decode(desc.clone(), bytes).map_err(|e| e.to_string())?;
    m.serialize_with_options(
        serde_json::value::Serializer,
        &SerializeOptions::new().skip_default_fields(false),
    )
    .map_err(|e| e.to_string())
}

/// `full` (the canonical form of what was given) cut down to the keys
/// `given` has: a key is found as written or as its lowerCamelCase JSON
/// name (`item_count` → `itemCount`). `None` when one is not found.
fn keep_given(given: &Value, full: &Value) -> Option<Value> {
    match (given, full) {
        (Value::Object(g), Value::Object(f)) => {
            let mut out = serde_json::Map::new();
            for (k, gv) in g {
                let (fk, fv) = f
                    .get_key_value(k.as_str())
                    .or_else(|| f.get_key_value(&lower_camel(k)))?;
                out.insert(fk.clone(), keep_given(gv, fv)?);
            }
            Some(Value::Object(out))
        }
        (Value::Array(g), Value::Array(f)) if g.len() == f.len() => g
            .iter()
            .zip(f)
            .map(|(a, b)| keep_given(a, b))
            .collect::<Option<Vec<_>>>()
            .map(Value::Array),
        (_, f) => Some(f.clone()),
    }
}

/// protobuf's JSON name of a field: `item_count` → `itemCount`.
fn lower_camel(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut up = false;
    for c in name.chars() {
        if c == '_' {
            up = true;
        } else if up {
            out.extend(c.to_uppercase());
            up = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// `got` has every key of `want` with a value that contains its value.
fn contains(want: &Value, got: &Value) -> bool {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => w.iter().all(|(k, wv)| g.get(k).is_some_and(|gv| contains(wv, gv))),
        (Value::Array(w), Value::Array(g)) => w.len() == g.len() && w.iter().zip(g).all(|(a, b)| contains(a, b)),
        (w, g) => w == g,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::grpc::Schema;
    use std::path::PathBuf;

    fn reply_type() -> MessageDescriptor {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/proto");
        let schema = Schema::from_protos(&[dir.join("echo.proto")], &[dir]).unwrap();
        schema.method("soakd.test.v1.Echo/Unary").unwrap().output()
    }

    /// The reply `json` framed as it arrives.
    fn framed(desc: &MessageDescriptor, json: &str) -> Vec<u8> {
        let m = super::super::data::from_json(desc, json, String::new()).unwrap();
        let mut out = Vec::new();
        crate::wire::grpc::encode_message(&mut out, false, &m);
        out
    }

    #[test]
    fn a_message_check_holds_the_keys_given_in_canonical_form() {
        let d = reply_type();
        let check = MessageCheck::compile(&d, r#"{"echo": {"text": "hi", "big": 5, "number": 0}}"#).unwrap();
        // int64 is a string in canonical JSON; a default value is kept.
        assert_eq!(
            check.want(),
            &serde_json::json!({"echo": {"text": "hi", "big": "5", "number": 0}})
        );
        assert!(check.matches(&framed(
            &d,
            r#"{"echo": {"text": "hi", "big": "5", "flag": true}, "seq": 7}"#
        )));
        assert!(!check.matches(&framed(&d, r#"{"echo": {"text": "hi", "big": 5, "number": 2}}"#)));
        assert!(!check.matches(&framed(&d, r#"{"echo": {"text": "ho", "big": 5}}"#)));
        assert!(!check.matches(&framed(&d, r#"{"seq": 1}"#)));
        // A proto field name finds its JSON name; lists compare element-wise.
        let ids = MessageCheck::compile(&d, r#"{"echo": {"tags": ["a", "b"], "interval_ms": null}}"#);
        assert!(ids.is_err(), "no such field: {ids:?}");
        let tags = MessageCheck::compile(&d, r#"{"echo": {"tags": ["a", "b"]}, "seq": 0}"#).unwrap();
        assert!(tags.matches(&framed(&d, r#"{"echo": {"tags": ["a", "b"], "text": "x"}}"#)));
        assert!(!tags.matches(&framed(&d, r#"{"echo": {"tags": ["a"]}}"#)));
        // Not a whole message, or compressed: not a match.
        let check = MessageCheck::compile(&d, r#"{"echo": {"text": "hi"}}"#).unwrap();
        let f = framed(&d, r#"{"echo": {"text": "hi"}}"#);
        assert!(check.matches(&f));
        assert!(!check.matches(&f[..f.len() - 1]));
        let mut z = f.clone();
        z[0] = 1;
        assert!(!check.matches(&z));
    }

    #[test]
    fn a_bad_expected_message_is_refused_with_its_path() {
        let d = reply_type();
        let e = MessageCheck::compile(&d, r#"{"echo": {"nope": 1}}"#).unwrap_err();
        assert!(e.contains("echo") && e.contains("nope"), "{e}");
        let e = MessageCheck::compile(&d, "[1]").unwrap_err();
        assert!(e.contains("not a JSON object"), "{e}");
        let e = MessageCheck::compile(&d, "{").unwrap_err();
        assert!(e.contains("not JSON"), "{e}");
    }
}
