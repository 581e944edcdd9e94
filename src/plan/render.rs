//! How a workload's requests become bytes: the HTTP version it speaks
//! (gRPC is HTTP/2 only; each kind of URL refuses the others' settings),
//! and its one request or weighted mix rendered once, bodies read and
//! checked. A file of its own so that `plan/mod.rs` stays the table of
//! what a plan holds.

use super::{HttpVersion, ParsedUrl, Request, WorkloadSpec, defaults, mix, parse_url};
use crate::Error;

impl WorkloadSpec {
    /// The HTTP version the workload speaks: gRPC is HTTP/2 only, and its
    /// settings are refused on other URLs (and the HTTP request's on it).
    pub(super) fn http_of(&self, parsed: &ParsedUrl, key: &dyn Fn(&str) -> String) -> Result<HttpVersion, Error> {
        if !parsed.grpc {
            if let Some(first) = self.grpc.given().first() {
                return Err(Error::Usage(format!(
                    "{} is a gRPC setting, but {:?} is not a grpc:// or grpcs:// URL; use one or drop it",
                    key(first),
                    self.url
                )));
            }
            return Ok(self.http);
        }
        if self.http == HttpVersion::Http11 {
            return Err(Error::Usage(format!(
                "{} 1.1 cannot be used with a grpc:// URL: gRPC runs on HTTP/2 only; drop {}",
                key("http"),
                key("http")
            )));
        }
        let refused = [
            (self.body.is_some(), "body"),
            (self.body_file.is_some(), "body_file"),
            (self.method != defaults::METHOD, "method"),
            (self.conn.close, "close"),
            (self.conn.pipeline > 1, "pipeline"),
        ];
        if let Some((_, k)) = refused.iter().find(|(given, _)| *given) {
            return Err(Error::Usage(format!(
                "{} cannot be used with a grpc:// URL: the call is {}, its message {}, {} or {}; drop it",
                key(k),
                key("call"),
                key("data"),
                key("data_file"),
                key("data_bin")
            )));
        }
        Ok(HttpVersion::Http2)
    }

    /// Reads the bodies and renders every request of the workload: the
    /// mix, or the one request of the URL.
    pub(super) fn render_requests(
        &self,
        parsed: &ParsedUrl,
        key: &dyn Fn(&str) -> String,
    ) -> Result<Vec<Request>, Error> {
        let refuse_grpc =
            |spec: &super::CheckSpec, key: &dyn Fn(&str) -> String| match super::Checks::grpc_keys(spec).first() {
                Some(k) => Err(Error::Usage(format!(
                    "{} checks a gRPC call, and this workload speaks HTTP; drop it, or give a grpc:// URL",
                    key(k)
                ))),
                None => Ok(()),
            };
        refuse_grpc(&self.checks, key)?;
        if self.requests.is_empty() {
            let body = read_body(self.body.clone(), self.body_file.as_deref(), key)?;
            let checks = self.checks.compile(key).map_err(Error::Usage)?.map(std::sync::Arc::new);
            let bytes = self.render(&self.method, &parsed.target, self.headers.clone(), body, key)?;
            return Ok(vec![Request {
                name: format!("{} {}", self.method, parsed.target),
                bytes,
                head: self.method == "HEAD",
                weight: defaults::WEIGHT,
                checks,
            }]);
        }
        mix::check_entries(&self.requests)?;
        if parsed.target != "/" {
            return Err(Error::Usage(format!(
                "{}{:?}: with several requests the URL is the origin only; move {:?} into each request's path",
                key("url"),
                self.url,
                parsed.target
            )));
        }
        for (given, k) in [
            (self.body.is_some(), "body"),
            (self.body_file.is_some(), "body_file"),
            (self.method != defaults::METHOD, "method"),
        ] {
            if given {
                return Err(Error::Usage(format!(
                    "{}: set it on each request of the mix, not on the workload",
                    key(k)
                )));
            }
        }
        let mut out: Vec<Request> = Vec::with_capacity(self.requests.len());
        for e in &self.requests {
            let in_entry = |k: &str| format!("{}: {k}", e.origin);
            let method = e.method.clone().unwrap_or_else(|| defaults::METHOD.into());
            let target = if e.path.starts_with('/') {
                e.path.clone()
            } else {
                let p = parse_url(&e.path).map_err(|err| Error::Usage(format!("{}: {err}", e.origin)))?;
                if (p.host.as_str(), p.port, p.tls) != (parsed.host.as_str(), parsed.port, parsed.tls) {
                    return Err(Error::Usage(format!(
                        "{}: {:?} is not on the workload's origin {:?}; one workload sends to one origin (use another workload)",
                        e.origin, e.path, self.url
                    )));
                }
                p.target
            };
            refuse_grpc(&e.checks, &in_entry)?;
            if let Some(k) = [
                (e.call.is_some(), "call"),
                (e.data.is_some(), "data"),
                (e.data_file.is_some(), "data_file"),
            ]
            .iter()
            .find_map(|(given, k)| given.then_some(*k))
            {
                return Err(Error::Usage(format!(
                    "{}: {k} belongs to a request of a grpc:// workload, and this one speaks HTTP; drop it, or give a grpc:// URL",
                    e.origin
                )));
            }
            if e.path.is_empty() {
                return Err(Error::Usage(format!(
                    "{}: path is missing; give the request's path (e.g. path = \"/items\")",
                    e.origin
                )));
            }
            let name = mix::label(e, &method, &target);
            if name.is_empty() {
                return Err(Error::Usage(format!("{}: name must not be empty", e.origin)));
            }
            if out.iter().any(|r| r.name == name) {
                return Err(Error::Usage(format!(
                    "{}: two requests are named {name:?}; give each a different name",
                    e.origin
                )));
            }
            let body = read_body(e.body.clone(), e.body_file.as_deref(), &in_entry)?;
            // The workload's headers go to every request; a request's own
            // field of the same name replaces it.
            let mut headers: Vec<(String, String)> = self
                .headers
                .iter()
                .filter(|(n, _)| !e.headers.iter().any(|(m, _)| m.eq_ignore_ascii_case(n)))
                .cloned()
                .collect();
            headers.extend(e.headers.iter().cloned());
            let checks = e
                .checks
                .inherit(&self.checks)
                .compile(&in_entry)
                .map_err(Error::Usage)?
                .map(std::sync::Arc::new);
            let bytes = self.render(&method, &target, headers, body, &in_entry)?;
            out.push(Request {
                name,
                bytes,
                head: method == "HEAD",
                weight: e.weight,
                checks,
            });
        }
        Ok(out)
    }

    /// Renders one request's bytes.
    fn render(
        &self,
        method: &str,
        target: &str,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
        key: &dyn Fn(&str) -> String,
    ) -> Result<std::sync::Arc<[u8]>, Error> {
        if method == "HEAD" && !body.is_empty() {
            return Err(Error::Usage(format!(
                "{}: a HEAD request cannot carry a body",
                key("body")
            )));
        }
        let parsed = parse_url(&self.url)?;
        Ok(crate::wire::render_request(&crate::wire::RequestSpec {
            method: method.to_string(),
            target: target.to_string(),
            host: parsed.host_header,
            headers,
            body,
            close: self.conn.close,
        })
        .into())
    }
}

/// The body given inline or in a file, within [`defaults::MAX_BODY_BYTES`].
fn read_body(
    body: Option<Vec<u8>>,
    file: Option<&std::path::Path>,
    key: &dyn Fn(&str) -> String,
) -> Result<Vec<u8>, Error> {
    let body = match (body, file) {
        (Some(_), Some(_)) => {
            return Err(Error::Usage(format!(
                "{} and {}: give one of them",
                key("body"),
                key("body_file")
            )));
        }
        (Some(b), None) => b,
        (None, Some(path)) => std::fs::read(path).map_err(|e| {
            Error::Usage(format!(
                "{} {}: cannot read it ({e}); give a readable file",
                key("body_file"),
                path.display()
            ))
        })?,
        (None, None) => Vec::new(),
    };
    if body.len() > defaults::MAX_BODY_BYTES {
        return Err(Error::Usage(format!(
            "{}: the body is {} bytes, over the limit of 16 MiB ({} bytes); send a smaller body",
            if file.is_some() { key("body_file") } else { key("body") },
            body.len(),
            defaults::MAX_BODY_BYTES
        )));
    }
    Ok(body)
}
