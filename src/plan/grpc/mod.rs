//! A gRPC workload's schema, method and request, made once with the plan.
//!
//! The schema is a set of protobuf descriptors from one of three places:
//! `--proto FILE` (with `--import-path DIR`) compiled in-process,
//! `--protoset FILE` (a serialized FileDescriptorSet), or the server's
//! reflection service (fetched by `reflection`, layer 2, which hands the
//! files to [`Schema::from_file_protos`]). From it, [`Schema::method`]
//! resolves `package.Service/Method` into the HTTP/2 `:path`, the kind of
//! call and the message types, and [`prepare_call`] encodes the request
//! message (from canonical JSON or already-encoded bytes) and the `-H`
//! metadata — once: the engine only copies the bytes it is given.
//! Responses are decoded ([`Method::decode_output`]) only when a check
//! asks.
//!
//! Every refusal is a [`SchemaError`] whose text says what is wrong and
//! where (file:line:column, the field path in the JSON, the methods that
//! do exist); it becomes exit 2 before anything opens.
//!
//! Files: `compile.rs` (descriptors from sources, protosets and fetched
//! files), `data.rs` (request messages in, responses out), `metadata.rs`
//! (`-H`), `error.rs`, `workload.rs` (a `grpc://` workload's settings and
//! its one rendered request). docs/grpc.md says why protox and prost-reflect.

mod check;
mod compile;
mod data;
mod error;
mod metadata;
mod mix;
mod workload;

use std::path::PathBuf;

use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor, MethodDescriptor};

pub use check::{MAX_CHECKED_REPLY, MessageCheck};
pub use data::{DecodeError, MessageData};
pub use error::SchemaError;
pub use metadata::{MetadataEntry, parse_metadata};
pub use mix::MixCall;
pub use workload::{GrpcSpec, GrpcTarget, Hold, STREAM_MODES, build as build_workload, finish};

/// Where the schema comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SchemaSource {
    /// `.proto` files compiled with these import paths.
    Protos {
        /// The files (`--proto`, repeatable).
        files: Vec<PathBuf>,
        /// Where imports are looked for (`--import-path`, repeatable).
        import_paths: Vec<PathBuf>,
    },
    /// A serialized FileDescriptorSet (`--protoset`).
    Protoset(PathBuf),
    /// The server's reflection service (neither flag given).
    Reflection,
}

name_table! {
    /// The kind of a call: whether each side streams.
    pub enum MethodKind {
        /// One request, one response.
        Unary = "unary",
        /// One request, a stream of responses.
        ServerStreaming = "server_streaming",
        /// A stream of requests, one response.
        ClientStreaming = "client_streaming",
        /// Both sides stream.
        Bidi = "bidi_streaming",
    }
}

/// A loaded schema: every file's descriptors, linked.
#[derive(Clone, Debug)]
pub struct Schema {
    pool: DescriptorPool,
}

impl Schema {
    /// Loads the schema of `source`; `None` for [`SchemaSource::Reflection`],
    /// which needs the server (see `reflection`).
    pub fn load(source: &SchemaSource) -> Option<Result<Schema, SchemaError>> {
        match source {
            SchemaSource::Protos { files, import_paths } => Some(Schema::from_protos(files, import_paths)),
            SchemaSource::Protoset(path) => Some(Schema::from_protoset(path)),
            SchemaSource::Reflection => None,
        }
    }

    /// Compiles `.proto` files (see [`SchemaSource::Protos`]).
    pub fn from_protos(files: &[PathBuf], import_paths: &[PathBuf]) -> Result<Schema, SchemaError> {
        compile::compile_protos(files, import_paths).map(|pool| Schema { pool })
    }

    /// Reads a serialized FileDescriptorSet.
    pub fn from_protoset(path: &std::path::Path) -> Result<Schema, SchemaError> {
        compile::read_protoset(path).map(|pool| Schema { pool })
    }

    /// Links serialized FileDescriptorProtos fetched from `origin` (any
    /// order; every dependency among them).
    pub fn from_file_protos(origin: &str, files: &[Vec<u8>]) -> Result<Schema, SchemaError> {
        compile::from_file_protos(origin, files).map(|pool| Schema { pool })
    }

    /// Every method, as `package.Service/Method`, sorted.
    pub fn methods(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .pool
            .services()
            .flat_map(|s| s.methods().map(|m| method_name(&m)).collect::<Vec<_>>())
            .collect();
        v.sort();
        v
    }

    /// Every service's full name, sorted.
    pub fn services(&self) -> Vec<String> {
        let mut v: Vec<String> = self.pool.services().map(|s| s.full_name().to_string()).collect();
        v.sort();
        v
    }

    /// Every file's name, sorted.
    pub fn files(&self) -> Vec<String> {
        let mut v: Vec<String> = self.pool.files().map(|f| f.name().to_string()).collect();
        v.sort();
        v
    }

    /// Resolves a method given as `package.Service/Method` (or with a
    /// leading `/`, or `package.Service.Method`).
    pub fn method(&self, given: &str) -> Result<Method, SchemaError> {
        let name = given.trim().trim_start_matches('/');
        let (service, method) = name
            .rsplit_once('/')
            .or_else(|| name.rsplit_once('.'))
            .filter(|(s, m)| !s.is_empty() && !m.is_empty() && !m.contains('/'))
            .ok_or_else(|| SchemaError::MethodName {
                given: given.to_string(),
            })?;
        let found = self
            .pool
            .get_service_by_name(service)
            .and_then(|s| s.methods().find(|m| m.name() == method));
        match found {
            Some(m) => Ok(Method::new(m)),
            None => {
                let available = self.methods();
                let wanted = format!("{service}/{method}");
                Err(SchemaError::MethodNotFound {
                    given: given.to_string(),
                    suggestion: closest(&wanted, &available),
                    available,
                })
            }
        }
    }

    /// The descriptor pool (for a check that looks types up).
    pub fn pool(&self) -> &DescriptorPool {
        &self.pool
    }
}

fn method_name(m: &MethodDescriptor) -> String {
    format!("{}/{}", m.parent_service().full_name(), m.name())
}

/// The candidate nearest `wanted` by edit distance, if it is near enough
/// to be a typo (at most a third of the name differs), or the one whose
/// method or service part matches exactly.
fn closest(wanted: &str, candidates: &[String]) -> Option<String> {
    let (w_service, w_method) = wanted.rsplit_once('/').unwrap_or(("", wanted));
    let mut best: Option<(usize, &String)> = None;
    for c in candidates {
        let (c_service, c_method) = c.rsplit_once('/').unwrap_or(("", c));
        // The same method under a mistyped or unqualified service, or
        // another method of the right service, counts as close.
        let d = if c_method == w_method || (c_service.ends_with(w_service) && c_method.eq_ignore_ascii_case(w_method)) {
            edit_distance(w_service, c_service).min(1)
        } else {
            edit_distance(wanted, c)
        };
        if best.is_none_or(|(b, _)| d < b) {
            best = Some((d, c));
        }
    }
    best.filter(|(d, c)| *d <= c.len().max(3) / 3).map(|(_, c)| c.clone())
}

/// Levenshtein distance over bytes.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, &x) in a.iter().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, &y) in b.iter().enumerate() {
            let next = (diag + usize::from(x != y)).min(row[j] + 1).min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// A resolved method.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Method {
    desc: MethodDescriptor,
    /// `package.Service/Method`.
    pub name: String,
    /// The HTTP/2 `:path`: `/package.Service/Method`.
    pub path: String,
    /// Which sides stream.
    pub kind: MethodKind,
}

impl Method {
    fn new(desc: MethodDescriptor) -> Method {
        let name = method_name(&desc);
        let kind = match (desc.is_client_streaming(), desc.is_server_streaming()) {
            (false, false) => MethodKind::Unary,
            (false, true) => MethodKind::ServerStreaming,
            (true, false) => MethodKind::ClientStreaming,
            (true, true) => MethodKind::Bidi,
        };
        Method {
            path: format!("/{name}"),
            name,
            kind,
            desc,
        }
    }

    /// The request message type's descriptor.
    pub fn input(&self) -> MessageDescriptor {
        self.desc.input()
    }

    /// The response message type's descriptor.
    pub fn output(&self) -> MessageDescriptor {
        self.desc.output()
    }

    /// The request type's full name (`package.Message`).
    pub fn input_type(&self) -> String {
        self.desc.input().full_name().to_string()
    }

    /// The response type's full name.
    pub fn output_type(&self) -> String {
        self.desc.output().full_name().to_string()
    }

    /// Encodes a request message (unframed protobuf bytes).
    pub fn encode_input(&self, data: &MessageData) -> Result<Vec<u8>, SchemaError> {
        data::encode(&self.input(), data)
    }

    /// Decodes a response message, for a check.
    pub fn decode_output(&self, bytes: &[u8]) -> Result<DynamicMessage, DecodeError> {
        data::decode(&self.output(), bytes)
    }

    /// Decodes a response message into canonical JSON.
    pub fn output_to_json(&self, bytes: &[u8]) -> Result<String, DecodeError> {
        data::to_json(&self.output(), bytes)
    }

    /// Decodes a request message into canonical JSON (what a server was
    /// sent; the tests and `describe` use it).
    pub fn input_to_json(&self, bytes: &[u8]) -> Result<String, DecodeError> {
        data::to_json(&self.input(), bytes)
    }
}

/// One call, ready for the engine: what it sends, made once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrpcCall {
    /// The method.
    pub method: Method,
    /// The request message, framed (5-byte prefix, then the message):
    /// what goes into the DATA frames as it is, for every call.
    pub framed: Vec<u8>,
    /// Custom metadata, in the order given.
    pub metadata: Vec<MetadataEntry>,
}

impl GrpcCall {
    /// The encoded message without its prefix.
    pub fn message(&self) -> &[u8] {
        &self.framed[crate::wire::grpc::PREFIX_LEN..]
    }
}

/// Resolves `method` in `schema`, encodes its request from `data` and
/// checks the `-H` entries of `metadata`.
pub fn prepare_call(
    schema: &Schema,
    method: &str,
    data: &MessageData,
    metadata: &[String],
) -> Result<GrpcCall, SchemaError> {
    let method = schema.method(method)?;
    let message = method.encode_input(data)?;
    if u32::try_from(message.len()).is_err() {
        return Err(SchemaError::MessageTooLarge {
            message_type: method.input_type(),
            len: message.len(),
        });
    }
    let mut framed = Vec::new();
    crate::wire::grpc::encode_message(&mut framed, false, &message);
    let metadata = metadata.iter().map(|m| parse_metadata(m)).collect::<Result<_, _>>()?;
    Ok(GrpcCall {
        method,
        framed,
        metadata,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_and_suggestions() {
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
        let methods: Vec<String> = ["a.B/Chat", "a.B/Collect", "a.B/Unary", "x.Other/Ping"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let s = |w: &str| closest(w, &methods);
        assert_eq!(s("a.B/Unray").as_deref(), Some("a.B/Unary"));
        assert_eq!(s("a.B/unary").as_deref(), Some("a.B/Unary"));
        // The method under an unqualified or misspelt service.
        assert_eq!(s("B/Unary").as_deref(), Some("a.B/Unary"));
        assert_eq!(s("a.C/Ping").as_deref(), Some("x.Other/Ping"));
        assert_eq!(s("zzz.Q/Nothing"), None);
    }
}
