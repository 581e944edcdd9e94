//! A `[[workload.request]]` table → a [`plan::RequestEntry`]. A file of
//! its own because both the settings table (which declares the workload
//! table's `request` key) and the workload builder (which reads it) need
//! it: either one holding it made an import circle.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;

use super::Locator;
use super::kinds::{FileCx, Headers, Kind, Method};
use crate::Error;
use crate::plan::{self, defaults};

/// One `[[workload.request]]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileRequest {
    name: Option<String>,
    method: Option<Spanned<String>>,
    /// HTTP: required (checked by the plan, which knows the URL's kind).
    path: Option<Spanned<String>>,
    /// gRPC: the method this request calls, and its message.
    call: Option<String>,
    data: Option<String>,
    data_file: Option<PathBuf>,
    headers: Option<Spanned<BTreeMap<String, String>>>,
    body: Option<String>,
    body_file: Option<PathBuf>,
    weight: Option<u32>,
    expect_status: Option<Spanned<Vec<u16>>>,
    expect_header: Option<Spanned<BTreeMap<String, String>>>,
    expect_body_contains: Option<Spanned<String>>,
    check_body_limit: Option<Spanned<u64>>,
    max_body_bytes: Option<Spanned<u64>>,
    expect_grpc_status: Option<Spanned<Vec<String>>>,
    expect_grpc_message: Option<Spanned<String>>,
}

/// The check keys, which a workload (inherited) and a request both take
/// (serde's `flatten` cannot be combined with `deny_unknown_fields`, so
/// both structs list them and this macro reads them the same way).
macro_rules! check_spec {
    ($t:expr) => {
        $crate::plan::CheckSpec {
            expect_status: $t.expect_status.as_ref().map(|v| v.get_ref().clone()),
            expect_header: $t
                .expect_header
                .as_ref()
                .map(|h| h.get_ref().iter().map(|(n, v)| (n.clone(), v.clone())).collect()),
            expect_body_contains: $t.expect_body_contains.as_ref().map(|v| v.get_ref().clone()),
            check_body_limit: $t.check_body_limit.as_ref().map(|v| *v.get_ref()),
            max_body_bytes: $t.max_body_bytes.as_ref().map(|v| *v.get_ref()),
            expect_grpc_status: $t.expect_grpc_status.as_ref().map(|v| v.get_ref().clone()),
            expect_grpc_message: $t.expect_grpc_message.as_ref().map(|v| v.get_ref().clone()),
        }
    };
}
pub(super) use check_spec;

/// The `[[workload.request]]` tables, each named by its line.
pub(super) fn read_all(
    list: &[Spanned<FileRequest>],
    loc: &Locator<'_>,
    cx: &FileCx<'_>,
) -> Result<Vec<plan::RequestEntry>, Error> {
    let mut out = Vec::with_capacity(list.len());
    for (i, r) in list.iter().enumerate() {
        let rr = r.get_ref();
        if let Some(m) = &rr.method {
            Method::file(m.get_ref().clone(), cx).map_err(|e| loc.err(m, "request.method", e))?;
        }
        let headers = match &rr.headers {
            Some(h) => Headers::file(h.get_ref().clone(), cx).map_err(|e| loc.err(h, "request.headers", e))?,
            None => Vec::new(),
        };
        out.push(plan::RequestEntry {
            name: rr.name.clone(),
            method: rr.method.as_ref().map(|m| m.get_ref().clone()),
            path: rr.path.as_ref().map(|p| p.get_ref().clone()).unwrap_or_default(),
            headers,
            body: rr.body.clone().map(String::into_bytes),
            body_file: rr.body_file.as_deref().map(|p| cx.path(p)),
            weight: rr.weight.unwrap_or(defaults::WEIGHT),
            checks: check_spec!(rr),
            call: rr.call.clone(),
            data: rr.data.clone(),
            data_file: rr.data_file.as_deref().map(|p| cx.path(p)),
            origin: format!("{}: workload.request {}", loc.place(r.span()), i + 1),
        });
    }
    Ok(out)
}
