//! A mix of gRPC methods: a `grpc://` workload whose requests
//! (`[[workload.request]]` tables with `call` and `data`, or a requests
//! file whose blocks name `package.Service/Method`) each call a method with
//! a message, chosen by weight as an HTTP mix's requests are.
//!
//! Each call is checked as the workload's one call would be (the schema
//! resolves its method, its JSON fits the method's input, its checks are
//! gRPC's) and rendered once into a request of its own, so the hot path
//! is an HTTP/2 mix like any other. Why only unary calls: a held stream
//! occupies its slot for its lifetime, so streams and calls in one
//! weighted schedule would starve each other; a workload holds streams or
//! sends calls, and two workloads do both.

use std::sync::Arc;

use super::{GrpcCall, MessageCheck, MessageData, MethodKind, Schema, prepare_call};
use crate::Error;
use crate::plan::{CheckSpec, Checks, Request, RequestEntry};

/// One call of a mix, as given (its method resolved by [`finish`]).
#[derive(Clone, Debug, PartialEq)]
pub struct MixCall {
    /// The `request` label (`name`; the method when absent).
    pub name: Option<String>,
    /// The method as given.
    pub given: String,
    /// Its message.
    pub data: MessageData,
    /// The workload's metadata, then its own (a name it gives replaces the
    /// workload's), as `name: value`.
    pub metadata: Vec<String>,
    /// Weight in the mix.
    pub weight: u32,
    /// Its checks (the workload's keys it does not set inherited).
    pub checks: Option<Arc<Checks>>,
    /// `expect_grpc_message` as given (compiled with the schema).
    pub expect_message: Option<String>,
    /// Where it was given, for messages.
    pub origin: String,
}

/// Reads the mix's entries: each names its method with `call` and its
/// message with `data` or `data_file`, and takes gRPC's checks only.
pub(super) fn build(
    entries: &[RequestEntry],
    headers: &[(String, String)],
    workload_checks: &CheckSpec,
) -> Result<Vec<MixCall>, Error> {
    let mut out = Vec::with_capacity(entries.len());
    for e in entries {
        let at = |k: &str| format!("{}: {k}", e.origin);
        let http = [
            (e.method.is_some(), "method"),
            (!e.path.is_empty(), "path"),
            (e.body.is_some(), "body"),
            (e.body_file.is_some(), "body_file"),
        ];
        if let Some((_, k)) = http.iter().find(|(given, _)| *given) {
            return Err(Error::Usage(format!(
                "{}: {k} is an HTTP request's, and a request of a grpc:// workload is a call: give call = \"package.Service/Method\" and its data (or data_file)",
                e.origin
            )));
        }
        let Some(given) = e.call.clone() else {
            return Err(Error::Usage(format!(
                "{}: call is missing; give the method this request calls, call = \"package.Service/Method\"",
                e.origin
            )));
        };
        let data = match (&e.data, &e.data_file) {
            (None, None) => MessageData::Empty,
            (Some(j), None) => MessageData::Json(j.clone()),
            (None, Some(f)) => MessageData::JsonFile(f.clone()),
            (Some(_), Some(_)) => {
                return Err(Error::Usage(format!(
                    "{}: data and data_file: give one of them",
                    e.origin
                )));
            }
        };
        let spec = e.checks.inherit(workload_checks);
        if let Some(k) = Checks::http_keys(&spec).first() {
            return Err(Error::Usage(format!(
                "{}: {k} checks an HTTP response, and a gRPC call's answer is a status: use expect_grpc_status instead",
                e.origin
            )));
        }
        let checks = spec.compile(&at).map_err(Error::Usage)?.map(Arc::new);
        let mut metadata: Vec<String> = headers
            .iter()
            .filter(|(n, _)| !e.headers.iter().any(|(m, _)| m.eq_ignore_ascii_case(n)))
            .chain(&e.headers)
            .map(|(n, v)| format!("{n}: {v}"))
            .collect();
        metadata.shrink_to_fit();
        out.push(MixCall {
            name: e.name.clone(),
            given,
            data,
            metadata,
            weight: e.weight,
            checks,
            expect_message: spec.expect_grpc_message.clone(),
            origin: e.origin.clone(),
        });
    }
    Ok(out)
}

/// What [`finish`] makes of a mix: a request per call, each request's
/// method, and the first call (the workload's call for what names one).
pub(super) struct Finished {
    pub requests: Vec<Request>,
    pub methods: Vec<String>,
    pub first: Option<GrpcCall>,
}

/// Resolves every call of `mix` in `schema` and renders its request with
/// `render` (the workload's HEADERS: authority, deadline, metadata).
pub(super) fn finish(
    mix: &[MixCall],
    schema: &Schema,
    render: impl Fn(&GrpcCall) -> Arc<[u8]>,
) -> Result<Finished, Error> {
    let mut out: Vec<Request> = Vec::with_capacity(mix.len());
    let mut methods = Vec::with_capacity(mix.len());
    let mut first = None;
    for m in mix {
        let call = prepare_call(schema, &m.given, &m.data, &m.metadata)
            .map_err(|e| Error::Usage(format!("{}: {e}", m.origin)))?;
        if call.method.kind != MethodKind::Unary {
            return Err(Error::Usage(format!(
                "{}: {} is a {} method, and a mix holds unary calls; hold its streams in a workload of their own (--stream subscribe or --stream-message)",
                m.origin,
                call.method.name,
                call.method.kind.name()
            )));
        }
        let mut checks = m.checks.clone();
        if let Some(text) = &m.expect_message {
            let check = MessageCheck::compile(&call.method.output(), text)
                .map_err(|e| Error::Usage(format!("{}: expect_grpc_message: {e}", m.origin)))?;
            if let Some(c) = checks.as_mut() {
                Arc::make_mut(c).grpc_message = Some(check);
            }
        }
        let name = m.name.clone().unwrap_or_else(|| call.method.name.clone());
        if out.iter().any(|r| r.name == name) {
            return Err(Error::Usage(format!(
                "{}: two requests are named {name:?} (two calls of one method need a name each); give each a different name",
                m.origin
            )));
        }
        methods.push(call.method.name.clone());
        out.push(Request {
            name,
            bytes: render(&call),
            head: false,
            weight: m.weight,
            checks,
        });
        first.get_or_insert(call);
    }
    Ok(Finished {
        requests: out,
        methods,
        first,
    })
}
