//! A `grpc://` or `grpcs://` workload: the flags that make its call, checked
//! once, and the call rendered into the one request the HTTP/2 client
//! sends (its HEADERS made once, the framed message as its body).
//!
//! The method is `--call package.Service/Method` (config key `call`), not
//! the URL's path: in soakd the URL names where connections go, and a gRPC
//! method is a name in the schema (it must resolve there, and be listed
//! when it does not), not a path the operator types. A URL with a path is
//! refused with the fix, so there is one way to say it.
//!
//! With `--proto` or `--protoset` the request is made while the plan is;
//! with neither the schema is the server's, fetched by `reflection` (layer
//! 2, after the plan is built and before anything opens), which then calls
//! [`finish`]. Until then the workload's target is [`GrpcTarget::pending`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::{GrpcCall, MessageCheck, MessageData, MethodKind, Schema, SchemaSource, prepare_call};
use crate::Error;
use crate::plan::{LoadModel, ParsedUrl, Request, defaults};

/// The gRPC settings as given (flags or `[[workload]]` keys).
#[derive(Clone, Debug, Default)]
pub struct GrpcSpec {
    /// `--call package.Service/Method`.
    pub call: Option<String>,
    /// `--proto FILE` (repeatable).
    pub proto: Vec<PathBuf>,
    /// `--import-path DIR` (repeatable).
    pub import_path: Vec<PathBuf>,
    /// `--protoset FILE`.
    pub protoset: Option<PathBuf>,
    /// `--data JSON`.
    pub data: Option<String>,
    /// `--data-file FILE`.
    pub data_file: Option<PathBuf>,
    /// `--data-bin FILE`.
    pub data_bin: Option<PathBuf>,
    /// `--stream subscribe`: hold server-streaming calls open.
    pub stream: Option<String>,
    /// `--stream-lifetime DUR`: how long each held stream lives.
    pub stream_lifetime: Option<Duration>,
    /// `--stream-message JSON`: what each client or bidirectional stream
    /// sends on its schedule.
    pub stream_message: Option<String>,
}

impl GrpcSpec {
    /// The settings given, by key (for "only with grpc://" messages).
    pub(crate) fn given(&self) -> Vec<&'static str> {
        [
            (self.call.is_some(), "call"),
            (!self.proto.is_empty(), "proto"),
            (!self.import_path.is_empty(), "import_path"),
            (self.protoset.is_some(), "protoset"),
            (self.data.is_some(), "data"),
            (self.data_file.is_some(), "data_file"),
            (self.data_bin.is_some(), "data_bin"),
            (self.stream.is_some(), "stream"),
            (self.stream_lifetime.is_some(), "stream_lifetime"),
            (self.stream_message.is_some(), "stream_message"),
        ]
        .into_iter()
        .filter_map(|(yes, k)| yes.then_some(k))
        .collect()
    }
}

/// A gRPC workload's call as the plan holds it.
#[derive(Clone, Debug, PartialEq)]
pub struct GrpcTarget {
    /// The method as given (`--call`).
    pub given: String,
    /// Where the schema comes from.
    pub source: SchemaSource,
    /// The request message as given.
    pub data: MessageData,
    /// `-H` entries, as `name: value`.
    pub metadata: Vec<String>,
    /// The `grpc-timeout` sent (`--request-timeout`).
    pub timeout: Duration,
    /// The `Host` the request names (`:authority`).
    pub authority: String,
    /// The call, once the schema is known (`None`: the reflection fetch
    /// has not run yet).
    pub call: Option<Arc<GrpcCall>>,
    /// `expect_grpc_status`: the codes that end a call well (`None`: OK);
    /// `expect_grpc_message` once the schema is known.
    pub checks: Option<Arc<crate::plan::Checks>>,
    /// `expect_grpc_message` as given (compiled with the schema).
    pub expect_message: Option<String>,
    /// `--stream subscribe` or `--stream-message`: each stream slot holds
    /// one streaming call open (`None`: calls are unary).
    pub hold: Option<Hold>,
    /// `--stream-message` as given.
    pub stream_message: Option<String>,
    /// The load model is closed loop (no `-i`, no `-r`).
    pub closed_loop: bool,
    /// A mix of methods (`mix.rs`): its calls, in request order (empty:
    /// the workload's one call).
    pub mix: Vec<super::mix::MixCall>,
    /// Each request's method, once the schema is known.
    pub methods: Vec<String>,
}

/// How held streams live (`--stream subscribe`, or `--stream-message` on
/// a client-streaming or bidirectional method).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hold {
    /// `--stream-lifetime`: each stream is ended and opened anew after
    /// this long (jittered ±10%); `None`: held until the run ends.
    pub lifetime: Option<Duration>,
    /// Client and bidirectional streams: the message each stream sends on
    /// its schedule, framed (encoded once, with the call); `None` for a
    /// server stream.
    pub message: Option<Arc<[u8]>>,
    /// Bidirectional: each message is timed to the next reply.
    pub replies: bool,
}

impl Hold {
    /// `subscribe`, `client` or `bidi`, as the report names it.
    pub fn mode(&self) -> &'static str {
        match (&self.message, self.replies) {
            (None, _) => "subscribe",
            (Some(_), false) => "client",
            (Some(_), true) => "bidi",
        }
    }
}

/// The values `--stream` takes.
pub const STREAM_MODES: &[&str] = &["subscribe"];

impl GrpcTarget {
    /// True until the schema is fetched from the server.
    pub fn pending(&self) -> bool {
        self.call.is_none()
    }

    /// Each request's `package.Service/Method`, once resolved, else as
    /// given (one for a workload's one call, one per call of a mix).
    pub fn request_methods(&self) -> Vec<String> {
        if !self.methods.is_empty() {
            return self.methods.clone();
        }
        match self.mix.is_empty() {
            true => vec![self.given.trim_start_matches('/').to_string()],
            false => self
                .mix
                .iter()
                .map(|m| m.given.trim_start_matches('/').to_string())
                .collect(),
        }
    }

    /// The method's `package.Service/Method` once resolved, else as given;
    /// a mix's distinct methods, comma-separated.
    pub fn method_name(&self) -> String {
        let mut seen: Vec<String> = Vec::new();
        for m in self.request_methods() {
            if !seen.contains(&m) {
                seen.push(m);
            }
        }
        seen.join(", ")
    }
}

/// Checks a gRPC workload's settings and, when the schema is local, makes
/// its request. `key` names a setting as the operator wrote it.
pub fn build(
    spec: &GrpcSpec,
    url: &ParsedUrl,
    headers: &[(String, String)],
    (timeout, model): (Duration, LoadModel),
    checks: &crate::plan::CheckSpec,
    entries: &[crate::plan::RequestEntry],
    key: &dyn Fn(&str) -> String,
) -> Result<(GrpcTarget, Vec<Request>), Error> {
    let mix = if entries.is_empty() {
        Vec::new()
    } else {
        let on_workload = [
            (spec.call.is_some(), "call"),
            (spec.data.is_some(), "data"),
            (spec.data_file.is_some(), "data_file"),
            (spec.data_bin.is_some(), "data_bin"),
            (spec.stream.is_some(), "stream"),
            (spec.stream_message.is_some(), "stream_message"),
        ];
        if let Some((_, k)) = on_workload.iter().find(|(given, _)| *given) {
            return Err(Error::Usage(format!(
                "{}: with several calls (a mix of methods) set the method and message on each request; a mix holds unary calls only",
                key(k)
            )));
        }
        super::mix::build(entries, headers, checks)?
    };
    if let Some(k) = crate::plan::Checks::http_keys(checks).first() {
        return Err(Error::Usage(format!(
            "{} checks an HTTP response, and a gRPC call's answer is a status: use {} (the codes that end a call well) instead",
            key(k),
            key("expect_grpc_status")
        )));
    }
    let expect_message = checks.expect_grpc_message.clone();
    let checks = checks.compile(key).map_err(Error::Usage)?.map(Arc::new);
    if url.target != "/" {
        return Err(Error::Usage(format!(
            "a grpc:// URL names the server only, and {:?} has a path; give the method as {} package.Service/Method and drop the path",
            url.target,
            key("call")
        )));
    }
    let Some(given) = spec.call.clone().or_else(|| mix.first().map(|m| m.given.clone())) else {
        return Err(Error::Usage(format!(
            "a grpc:// workload needs the method to call: give {} package.Service/Method",
            key("call")
        )));
    };
    let source = match (&spec.protoset, spec.proto.is_empty()) {
        (Some(_), false) => {
            return Err(Error::Usage(format!(
                "{} and {}: give one schema (or neither, to ask the server's reflection service)",
                key("proto"),
                key("protoset")
            )));
        }
        (Some(p), true) => SchemaSource::Protoset(p.clone()),
        (None, false) => SchemaSource::Protos {
            files: spec.proto.clone(),
            import_paths: spec.import_path.clone(),
        },
        (None, true) if !spec.import_path.is_empty() => {
            return Err(Error::Usage(format!(
                "{} is where {} files import from, and none is given; add {} FILE or drop it",
                key("import_path"),
                key("proto"),
                key("proto")
            )));
        }
        (None, true) => SchemaSource::Reflection,
    };
    let data = match (&spec.data, &spec.data_file, &spec.data_bin) {
        (None, None, None) => MessageData::Empty,
        (Some(j), None, None) => MessageData::Json(j.clone()),
        (None, Some(f), None) => MessageData::JsonFile(f.clone()),
        (None, None, Some(f)) => MessageData::Binary(f.clone()),
        _ => {
            return Err(Error::Usage(format!(
                "{}, {} and {}: give one of them",
                key("data"),
                key("data_file"),
                key("data_bin")
            )));
        }
    };
    let hold = match spec.stream.as_deref() {
        Some(_) if spec.stream_message.is_some() => {
            return Err(Error::Usage(format!(
                "{} is for server streams and {} for client and bidirectional ones; give the one the method's kind takes",
                key("stream"),
                key("stream_message")
            )));
        }
        None if spec.stream_message.is_some() => Some(Hold {
            lifetime: spec.stream_lifetime,
            ..Hold::default()
        }),
        None if spec.stream_lifetime.is_some() => {
            return Err(Error::Usage(format!(
                "{} is how long a held stream lives, and no stream is held; add {} subscribe or drop it",
                key("stream_lifetime"),
                key("stream")
            )));
        }
        None => None,
        // The duration's kind refuses 0 (a stream ended as it opens).
        Some("subscribe") => Some(Hold {
            lifetime: spec.stream_lifetime,
            ..Hold::default()
        }),
        Some(other) => {
            return Err(Error::Usage(format!(
                "{} {other:?}: the stream mode is one of {}",
                key("stream"),
                STREAM_MODES.join(", ")
            )));
        }
    };
    let mut t = GrpcTarget {
        given,
        source,
        data,
        metadata: headers.iter().map(|(n, v)| format!("{n}: {v}")).collect(),
        timeout,
        authority: url.host_header.clone(),
        call: None,
        checks,
        expect_message,
        hold,
        stream_message: spec.stream_message.clone(),
        closed_loop: model == LoadModel::Closed,
        mix,
        methods: Vec::new(),
    };
    let requests = match Schema::load(&t.source) {
        None => placeholders(&t),
        Some(schema) => finish(&mut t, &schema?)?,
    };
    Ok((t, requests))
}

/// Resolves the method in `schema`, encodes the request and renders it: the
/// workload's one request: a unary call, or the call each held server
/// stream opens with (`--stream subscribe`).
pub fn finish(t: &mut GrpcTarget, schema: &Schema) -> Result<Vec<Request>, Error> {
    if !t.mix.is_empty() {
        let done = super::mix::finish(&t.mix, schema, |call| render(t, call))?;
        t.call = done.first.map(Arc::new);
        t.methods = done.methods;
        return Ok(done.requests);
    }
    let mut call = prepare_call(schema, &t.given, &t.data, &t.metadata)?;
    let kind = call.method.kind;
    match (kind, t.hold.is_some(), t.stream_message.is_some()) {
        (MethodKind::Unary, false, _) | (MethodKind::ServerStreaming, true, false) => {}
        (MethodKind::ClientStreaming | MethodKind::Bidi, _, true) => {
            if t.data != MessageData::Empty {
                return Err(Error::Usage(format!(
                    "{} is a {} method: its messages are --stream-message; drop --data, --data-file and --data-bin",
                    call.method.name,
                    kind.name()
                )));
            }
            if kind == MethodKind::ClientStreaming && t.closed_loop {
                return Err(Error::Usage(format!(
                    "{} is a client-streaming method: its messages get no reply, so closed loop has nothing to wait for; give -i DUR (per stream) or -r RATE",
                    call.method.name
                )));
            }
            let message = MessageData::Json(t.stream_message.clone().unwrap_or_default());
            call = prepare_call(schema, &t.given, &message, &t.metadata)?;
            if let Some(h) = t.hold.as_mut() {
                h.message = Some(Arc::from(&call.framed[..]));
                h.replies = kind == MethodKind::Bidi;
            }
        }
        (MethodKind::ServerStreaming, false, _) => {
            return Err(Error::Usage(format!(
                "{} is a server_streaming method: add --stream subscribe to hold its streams open and count their messages",
                call.method.name
            )));
        }
        (_, _, true) => {
            return Err(Error::Usage(format!(
                "--stream-message is what client-streaming and bidirectional calls send, and {} is a {} method; drop it",
                call.method.name,
                kind.name()
            )));
        }
        (_, true, _) => {
            return Err(Error::Usage(format!(
                "--stream subscribe holds server-streaming calls, and {} is a {} method; drop --stream for a unary one",
                call.method.name,
                kind.name()
            )));
        }
        _ => {
            return Err(Error::Usage(format!(
                "{} is a {} method: give --stream-message JSON, the message each stream sends on its schedule",
                call.method.name,
                kind.name()
            )));
        }
    }
    if let Some(text) = &t.expect_message {
        if t.hold.is_some() {
            return Err(Error::Usage(format!(
                "expect_grpc_message checks a unary call's reply, and {} is held as a {} stream; drop it",
                call.method.name,
                kind.name()
            )));
        }
        let check = MessageCheck::compile(&call.method.output(), text)
            .map_err(|e| Error::Usage(format!("expect_grpc_message: {e}")))?;
        if let Some(c) = t.checks.as_mut() {
            Arc::make_mut(c).grpc_message = Some(check);
        }
    }
    let bytes = render(t, &call);
    let name = call.method.name.clone();
    t.methods = vec![name.clone()];
    t.call = Some(Arc::new(call));
    Ok(vec![Request {
        name,
        bytes,
        head: false,
        weight: defaults::WEIGHT,
        checks: t.checks.clone(),
    }])
}

/// The requests before the schema is known, one per call: named as
/// given; they are replaced before anything is sent.
fn placeholders(t: &GrpcTarget) -> Vec<Request> {
    let names = match t.mix.is_empty() {
        true => t.request_methods(),
        false => t
            .mix
            .iter()
            .zip(t.request_methods())
            .map(|(m, g)| m.name.clone().unwrap_or(g))
            .collect(),
    };
    let weights = t
        .mix
        .iter()
        .map(|m| m.weight)
        .chain(std::iter::repeat(defaults::WEIGHT));
    names
        .into_iter()
        .zip(weights)
        .map(|(name, weight)| Request {
            name,
            bytes: Arc::from(&b"POST / HTTP/1.1\r\n\r\n"[..]),
            head: false,
            weight,
            checks: t.checks.clone(),
        })
        .collect()
}

/// The call as an HTTP/1.1-shaped request (`wire::h2::render_request`
/// turns it into its HEADERS frame once): POST to the method's path, the
/// gRPC content type, `te: trailers`, the deadline, the metadata, and the
/// framed message as the body (no `content-length`: gRPC does not use it).
fn render(t: &GrpcTarget, call: &GrpcCall) -> Arc<[u8]> {
    let mut head = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\ncontent-type: {}\r\nte: trailers\r\n",
        call.method.path,
        t.authority,
        crate::wire::grpc::CONTENT_TYPE
    );
    // A held stream has no deadline: it lives until its lifetime or the
    // run ends, and `grpc-timeout` would have the server end it.
    if t.hold.is_none()
        && let Some(v) = crate::wire::grpc::render_timeout(t.timeout)
    {
        head.push_str(&format!("grpc-timeout: {v}\r\n"));
    }
    for m in &call.metadata {
        head.push_str(&format!("{}: {}\r\n", m.name, m.wire_value));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(&call.framed);
    bytes.into()
}
