//! A gRPC schema from the server itself: its reflection service, asked
//! before anything else opens, when neither `--proto` nor `--protoset`
//! is given.
//!
//! Reflection is a bidirectional call (`ServerReflectionInfo`) of
//! questions and answers. soakd asks for the file that defines the
//! service it will call (`file_containing_symbol`), then for every file
//! that file imports and it has not been sent yet (`file_by_filename`),
//! until the set is closed; the files become a
//! [`Schema`](crate::plan::grpc::Schema) exactly as a protoset would.
//! The `grpc.reflection.v1` service is asked first; a server that does not
//! have it (UNIMPLEMENTED, an HTTP 404, a reset stream) is asked the same
//! on `grpc.reflection.v1alpha` — which is all grpcio (Python) serves, and
//! where clients that know only v1 fail (ghz #419).
//!
//! This is layer 2 (it does network I/O, before the engine exists): a
//! blocking client of one call at a time (`conn.rs`) over the project's
//! HTTP/2 codec, HPACK and TLS client, with one deadline for the whole
//! exchange.

mod conn;
mod proto;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use prost::Message as _;
use prost_reflect::prost_types::FileDescriptorProto;

pub use conn::{CallEnd, Conn, ConnError, Endpoint, MAX_MESSAGE, Next};

use crate::plan::grpc::{Schema, SchemaError};
use crate::wire::grpc::{Code, encode_message};

/// Why reflection gave no schema.
#[derive(Debug, thiserror::Error)]
pub enum ReflectionError {
    /// The server could not be reached or talked to.
    #[error("reflection from {addr}: {source}; is the server up, and is it gRPC?")]
    Unreachable {
        /// The server.
        addr: String,
        /// What failed.
        source: ConnError,
    },
    /// Neither reflection service is served.
    #[error("{addr} does not serve reflection (grpc.reflection.v1 or v1alpha: {reason}); give --proto or --protoset")]
    NotServed {
        /// The server.
        addr: String,
        /// What the v1alpha call ended with.
        reason: String,
    },
    /// The reflection call failed.
    #[error("reflection from {addr} failed: {reason}")]
    Failed {
        /// The server.
        addr: String,
        /// The status or error.
        reason: String,
    },
    /// The server's reflection does not know the service.
    #[error(
        "{addr} has no service {service} (its reflection lists: {}); check the method's service name",
        list(available)
    )]
    ServiceNotFound {
        /// The server.
        addr: String,
        /// The service asked for.
        service: String,
        /// The services it lists, sorted.
        available: Vec<String>,
    },
    /// A file the schema needs was not sent.
    #[error("reflection from {addr} did not send {file} (imported by {by}): {reason}")]
    MissingFile {
        /// The server.
        addr: String,
        /// The file.
        file: String,
        /// The file that imports it.
        by: String,
        /// The server's error.
        reason: String,
    },
    /// The files sent do not form a schema.
    #[error(transparent)]
    Schema(#[from] SchemaError),
}

fn list(v: &[String]) -> String {
    if v.is_empty() { "nothing".into() } else { v.join(", ") }
}

impl From<ReflectionError> for crate::Error {
    fn from(e: ReflectionError) -> crate::Error {
        crate::Error::Preflight(e.to_string())
    }
}

/// What a fetch found, besides the schema: which version answered.
#[derive(Clone, Debug)]
pub struct Fetched {
    /// The schema: the services' files and every file they import.
    pub schema: Schema,
    /// The path of the reflection call that answered.
    pub served_by: &'static str,
    /// How many files were sent.
    pub files: usize,
}

/// Completes every gRPC workload of `plan` whose schema is the server's:
/// fetches it (within the workload's connect timeout, at least 5 s) and
/// makes the call's request. A plan with none is left as it is.
pub fn complete(plan: &mut crate::plan::Plan) -> Result<(), crate::Error> {
    for w in &mut plan.workloads {
        let Some(g) = w.target.grpc.as_deref().filter(|g| g.pending()) else {
            continue;
        };
        let mut g = g.clone();
        let ep = Endpoint {
            addr: w.target.addr,
            authority: g.authority.clone(),
            tls: w.target.tls.clone(),
            source: w.conn.source_addrs.first().copied(),
        };
        // Every service the calls name (several for a mix of methods).
        let mut services: Vec<String> = Vec::new();
        for given in g.request_methods() {
            let service = given
                .rsplit_once('/')
                .or_else(|| given.rsplit_once('.'))
                .map_or(given.as_str(), |(s, _)| s)
                .to_string();
            if !services.contains(&service) {
                services.push(service);
            }
        }
        let services: Vec<&str> = services.iter().map(String::as_str).collect();
        let timeout = w.conn.connect_timeout.max(Duration::from_secs(5));
        let fetched = fetch_schema(&ep, &services, timeout)?;
        w.target.requests = crate::plan::grpc::finish(&mut g, &fetched.schema)?;
        w.target.grpc = Some(std::sync::Arc::new(g));
    }
    Ok(())
}

/// Fetches the files that define `services` (full names, `pkg.Service`)
/// and all they import from `ep`'s reflection service, within `timeout`.
pub fn fetch_schema(ep: &Endpoint, services: &[&str], timeout: Duration) -> Result<Fetched, ReflectionError> {
    let deadline = Instant::now() + timeout;
    let mut conn = Conn::open(ep, deadline).map_err(|source| ReflectionError::Unreachable {
        addr: ep.addr.to_string(),
        source,
    })?;
    let conn = &mut conn;
    let first_question = symbol_request(services.first().copied().unwrap_or_default());
    let (mut session, first) = Session::open(conn, ep.addr.to_string(), first_question)?;

    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for (i, service) in services.iter().enumerate() {
        let answer = if i == 0 {
            first.clone()
        } else {
            session.ask_or_fail(conn, symbol_request(service))?
        };
        if answer.error_response.is_some() {
            let available = session.list_services(conn).unwrap_or_default();
            return Err(ReflectionError::ServiceNotFound {
                addr: session.addr.clone(),
                service: service.to_string(),
                available,
            });
        }
        session.take(&mut files, answer, service, "the request")?;
    }
    // Follow the imports until every file's dependencies are in.
    loop {
        let missing: BTreeSet<(String, String)> = files
            .iter()
            .flat_map(|(name, bytes)| {
                let deps = FileDescriptorProto::decode(&bytes[..])
                    .map(|f| f.dependency)
                    .unwrap_or_default();
                deps.into_iter().map(move |d| (d, name.clone()))
            })
            .filter(|(d, _)| !files.contains_key(d))
            .collect();
        let Some((file, by)) = missing.into_iter().next() else {
            break;
        };
        let answer = session.ask_or_fail(
            conn,
            proto::Request {
                file_by_filename: Some(file.clone()),
                ..Default::default()
            },
        )?;
        session.take(&mut files, answer, &file, &by)?;
        if !files.contains_key(&file) {
            return Err(session.failed(format!("asked for {file}, was sent other files")));
        }
    }
    session.close(conn);
    let list: Vec<Vec<u8>> = files.into_values().collect();
    let origin = format!("reflection from {}", session.addr);
    Ok(Fetched {
        schema: Schema::from_file_protos(&origin, &list)?,
        served_by: session.path,
        files: list.len(),
    })
}

/// Lists the services `ep`'s reflection names (sorted).
pub fn list_services(ep: &Endpoint, timeout: Duration) -> Result<Vec<String>, ReflectionError> {
    let deadline = Instant::now() + timeout;
    let mut conn = Conn::open(ep, deadline).map_err(|source| ReflectionError::Unreachable {
        addr: ep.addr.to_string(),
        source,
    })?;
    let (session, first) = Session::open(&mut conn, ep.addr.to_string(), list_request())?;
    let mut v = services_of(first);
    v.sort();
    session.close(&mut conn);
    Ok(v)
}

fn symbol_request(symbol: &str) -> proto::Request {
    proto::Request {
        file_containing_symbol: Some(symbol.to_string()),
        ..Default::default()
    }
}

fn list_request() -> proto::Request {
    proto::Request {
        list_services: Some(String::new()),
        ..Default::default()
    }
}

fn services_of(answer: proto::Response) -> Vec<String> {
    answer
        .list_services_response
        .map(|l| l.service.into_iter().map(|s| s.name).collect())
        .unwrap_or_default()
}

fn code_name(code: i32) -> &'static str {
    u32::try_from(code).map_or(Code::Unknown, Code::from_u32).name()
}

/// Why a question got no answer.
enum Unanswered {
    /// This version of the service is not there (the reason in words).
    Unimplemented(String),
    /// Anything else.
    Other(ReflectionError),
}

/// The reflection call in progress on a connection.
struct Session {
    addr: String,
    path: &'static str,
    started: bool,
}

impl Session {
    /// Starts the reflection call on v1, else v1alpha, with `question`:
    /// the session and the first answer.
    fn open(
        conn: &mut Conn,
        addr: String,
        question: proto::Request,
    ) -> Result<(Session, proto::Response), ReflectionError> {
        let mut why_not = String::new();
        for path in proto::PATHS {
            let mut session = Session {
                addr: addr.clone(),
                path,
                started: false,
            };
            match session.ask(conn, question.clone()) {
                Ok(answer) => return Ok((session, answer)),
                Err(Unanswered::Unimplemented(reason)) => why_not = reason,
                Err(Unanswered::Other(e)) => return Err(e),
            }
        }
        Err(ReflectionError::NotServed { addr, reason: why_not })
    }

    fn failed(&self, reason: String) -> ReflectionError {
        ReflectionError::Failed {
            addr: self.addr.clone(),
            reason,
        }
    }

    /// Sends one question and reads its answer (starting the call with the
    /// first question).
    fn ask(&mut self, conn: &mut Conn, question: proto::Request) -> Result<proto::Response, Unanswered> {
        let other = |addr: &str, source: ConnError| {
            Unanswered::Other(ReflectionError::Unreachable {
                addr: addr.to_string(),
                source,
            })
        };
        let mut framed = Vec::new();
        encode_message(&mut framed, false, &question.encode_to_vec());
        if !self.started {
            conn.start(self.path, &[]).map_err(|e| other(&self.addr, e))?;
            self.started = true;
        }
        conn.send(&framed, false).map_err(|e| other(&self.addr, e))?;
        match conn.recv().map_err(|e| other(&self.addr, e))? {
            Next::Message(bytes) => proto::Response::decode(&bytes[..])
                .map_err(|e| Unanswered::Other(self.failed(format!("an answer does not parse ({e})")))),
            Next::End(CallEnd::Status { status, message }) => {
                let reason = format!(
                    "{}{}",
                    status.code.name(),
                    if message.is_empty() {
                        String::new()
                    } else {
                        format!(" {message}")
                    }
                );
                if status.code == Code::Unimplemented {
                    Err(Unanswered::Unimplemented(reason))
                } else {
                    Err(Unanswered::Other(self.failed(reason)))
                }
            }
            // A server without the service may reset the stream rather
            // than answer UNIMPLEMENTED.
            Next::End(CallEnd::Reset(code)) => Err(Unanswered::Unimplemented(format!("stream reset with {code:?}"))),
        }
    }

    /// [`Session::ask`] once the service is known to be there.
    fn ask_or_fail(&mut self, conn: &mut Conn, question: proto::Request) -> Result<proto::Response, ReflectionError> {
        self.ask(conn, question).map_err(|u| match u {
            Unanswered::Unimplemented(reason) => self.failed(reason),
            Unanswered::Other(e) => e,
        })
    }

    fn list_services(&mut self, conn: &mut Conn) -> Result<Vec<String>, ReflectionError> {
        let mut v = services_of(self.ask_or_fail(conn, list_request())?);
        v.sort();
        Ok(v)
    }

    /// Keeps the files of `answer` (to the question `asked`, for `by`).
    fn take(
        &self,
        files: &mut BTreeMap<String, Vec<u8>>,
        answer: proto::Response,
        asked: &str,
        by: &str,
    ) -> Result<(), ReflectionError> {
        if let Some(e) = answer.error_response {
            return Err(ReflectionError::MissingFile {
                addr: self.addr.clone(),
                file: asked.to_string(),
                by: by.to_string(),
                reason: format!("{} {}", code_name(e.error_code), e.error_message),
            });
        }
        for bytes in answer
            .file_descriptor_response
            .map(|r| r.file_descriptor_proto)
            .unwrap_or_default()
        {
            let name = FileDescriptorProto::decode(&bytes[..])
                .map_err(|e| self.failed(format!("a file descriptor does not parse ({e})")))?
                .name
                .unwrap_or_default();
            files.entry(name).or_insert(bytes);
        }
        Ok(())
    }

    /// Ends this side of the call (best effort: the answers are in).
    fn close(&self, conn: &mut Conn) {
        let _ = conn.send(&[], true);
    }
}
