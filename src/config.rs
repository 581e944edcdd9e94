//! The TOML config file: declared workloads for a daemon left running.
//!
//! A file holds globals (metrics address, threads, report and log paths,
//! duration) and one or more `[[workload]]` tables, each the equivalent of a
//! `soakd run URL ...` command line. It is parsed with serde into raw
//! structs that refuse unknown keys, then every workload goes through the
//! same [`WorkloadSpec::build`] as the command line, so a setting means the
//! same thing in both places. Errors name the file, the line, the key and
//! what is expected.
//!
//! ```toml
//! metrics_listen = "127.0.0.1:9469"
//! threads = 2
//!
//! [[workload]]
//! name = "api"
//! url = "http://127.0.0.1:8080/health"
//! connections = 5000
//! interval = "1s"
//! ```

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::Error;
use crate::plan::{self, LoadModel, Plan, ReportDest, TlsSpec, TlsVersion, WorkloadSpec, defaults};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileGlobals {
    metrics_listen: Option<Spanned<String>>,
    metrics_linger: Option<Spanned<String>>,
    threads: Option<Spanned<u16>>,
    report: Option<String>,
    hdr_log: Option<PathBuf>,
    duration: Option<Spanned<String>>,
    requests: Option<Spanned<u64>>,
    hdr_log_interval: Option<Spanned<String>>,
    #[serde(default)]
    thresholds: Vec<Spanned<String>>,
    threshold_window: Option<Spanned<String>>,
    abort_on_fail: Option<Spanned<String>>,
    shard: Option<Spanned<String>>,
    shard_sources: Option<bool>,
    #[serde(default)]
    workload: Vec<Spanned<FileWorkload>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileWorkload {
    name: Option<Spanned<String>>,
    url: Spanned<String>,
    connections: Option<Spanned<u32>>,
    ramp: Option<Spanned<u32>>,
    interval: Option<Spanned<String>>,
    rate: Option<Spanned<f64>>,
    closed: Option<Spanned<bool>>,
    pipeline: Option<Spanned<u16>>,
    close: Option<Spanned<bool>>,
    close_with_reset: Option<Spanned<bool>>,
    method: Option<Spanned<String>>,
    headers: Option<Spanned<BTreeMap<String, String>>>,
    body: Option<Spanned<String>>,
    body_file: Option<Spanned<PathBuf>>,
    connect_timeout: Option<Spanned<String>>,
    request_timeout: Option<Spanned<String>>,
    #[serde(default)]
    source_addrs: Vec<Spanned<String>>,
    max_requests_per_conn: Option<Spanned<u32>>,
    max_conn_lifetime: Option<Spanned<String>>,
    #[serde(default)]
    target_pids: Vec<u32>,
    #[serde(default)]
    stages: Vec<Spanned<FileStage>>,
    then: Option<Spanned<String>>,
    servername: Option<Spanned<String>>,
    cacert: Option<Spanned<OneOrMany>>,
    insecure: Option<Spanned<bool>>,
    cert: Option<Spanned<PathBuf>>,
    key: Option<Spanned<PathBuf>>,
    tls_min: Option<Spanned<String>>,
    tls_max: Option<Spanned<String>>,
    tls_resumption: Option<Spanned<bool>>,
    expect_status: Option<Spanned<Vec<u16>>>,
    expect_header: Option<Spanned<BTreeMap<String, String>>>,
    expect_body_contains: Option<Spanned<String>>,
    check_body_limit: Option<Spanned<u64>>,
    max_body_bytes: Option<Spanned<u64>>,
    #[serde(default)]
    request: Vec<Spanned<FileRequest>>,
    #[serde(default)]
    thresholds: Vec<Spanned<String>>,
}

/// The check keys, which a workload (inherited) and a request both take
/// (serde's `flatten` cannot be combined with `deny_unknown_fields`, so
/// both structs list them and this macro reads them the same way).
macro_rules! check_spec {
    ($t:expr) => {
        plan::CheckSpec {
            expect_status: $t.expect_status.as_ref().map(|v| v.get_ref().clone()),
            expect_header: $t
                .expect_header
                .as_ref()
                .map(|h| h.get_ref().iter().map(|(n, v)| (n.clone(), v.clone())).collect()),
            expect_body_contains: $t.expect_body_contains.as_ref().map(|v| v.get_ref().clone()),
            check_body_limit: $t.check_body_limit.as_ref().map(|v| *v.get_ref()),
            max_body_bytes: $t.max_body_bytes.as_ref().map(|v| *v.get_ref()),
        }
    };
}

/// One `[[workload.request]]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileRequest {
    name: Option<String>,
    method: Option<Spanned<String>>,
    path: Spanned<String>,
    headers: Option<Spanned<BTreeMap<String, String>>>,
    body: Option<String>,
    body_file: Option<PathBuf>,
    weight: Option<u32>,
    expect_status: Option<Spanned<Vec<u16>>>,
    expect_header: Option<Spanned<BTreeMap<String, String>>>,
    expect_body_contains: Option<Spanned<String>>,
    check_body_limit: Option<Spanned<u64>>,
    max_body_bytes: Option<Spanned<u64>>,
}

/// A key that takes one path or a list of them (`cacert`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(PathBuf),
    Many(Vec<PathBuf>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileStage {
    connections: Option<Spanned<u32>>,
    interval: Option<Spanned<String>>,
    rate: Option<Spanned<f64>>,
    hold: Spanned<String>,
}

/// Where things are in the file, for messages.
struct Locator<'a> {
    path: &'a Path,
    text: &'a str,
}

impl Locator<'_> {
    fn line(&self, offset: usize) -> usize {
        self.text[..offset.min(self.text.len())].matches('\n').count() + 1
    }

    fn at<T>(&self, v: &Spanned<T>, key: &str) -> String {
        format!("{}:{}: {key}", self.path.display(), self.line(v.span().start))
    }

    fn err<T>(&self, v: &Spanned<T>, key: &str, msg: impl std::fmt::Display) -> Error {
        Error::Usage(format!("{} {msg}", self.at(v, key)))
    }
}

/// Globals given on the command line next to `--config`; each one, when
/// set, replaces the file's key of the same meaning (and stays in force
/// across reloads, so SIGHUP cannot undo a flag).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overrides {
    /// The Prometheus address (`Some(None)` turns the endpoint off).
    pub metrics_listen: Option<Option<SocketAddr>>,
    /// Worker threads.
    pub threads: Option<usize>,
    /// Where the JSON report goes (`-` for standard output).
    pub report: Option<String>,
    /// The HdrHistogram interval log.
    pub hdr_log: Option<PathBuf>,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Stop after this many completed requests.
    pub requests: Option<u64>,
    /// Serve the final metrics this long after the run.
    pub metrics_linger: Option<Duration>,
    /// Length of one HDR log interval.
    pub hdr_log_interval: Option<Duration>,
    /// Run-wide thresholds (replace the file's `thresholds`).
    pub thresholds: Option<Vec<plan::Threshold>>,
    /// The live thresholds' window.
    pub threshold_window: Option<Duration>,
    /// Stop once a threshold has failed this long.
    pub abort_on_fail: Option<Duration>,
    /// Compare with this report at the end (command line only).
    pub baseline: Option<plan::Baseline>,
    /// `--shard` (or `SOAKD_SHARD`): the share of the plan to run, and the
    /// flag or variable it came from (for messages).
    pub shard: Option<(plan::Shard, String)>,
    /// `--shard-sources`: each shard takes a slice of the source addresses.
    pub shard_sources: bool,
}

/// Reads and validates `path` into a plan; flags in `over` win over the
/// file's globals.
pub fn load(path: &Path, over: Overrides) -> Result<Plan, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Error::Usage(format!(
            "--config {}: cannot read it ({e}); give a readable TOML file",
            path.display()
        ))
    })?;
    parse(path, &text, over)
}

/// [`load`] on text already read (tests and `soakd check` use it too).
pub fn parse(path: &Path, text: &str, over: Overrides) -> Result<Plan, Error> {
    let loc = Locator { path, text };
    let file: FileGlobals = toml::from_str(text).map_err(|e| {
        // serde's messages do not always name the key ("invalid type:
        // string, expected u32"), so show the line itself too.
        let (line, source) = match e.span() {
            Some(sp) => {
                let n = loc.line(sp.start);
                let src = text.lines().nth(n - 1).unwrap_or("").trim();
                (format!(":{n}"), format!(" (in `{src}`)"))
            }
            None => (String::new(), String::new()),
        };
        Error::Usage(format!("{}{line}: {}{source}", path.display(), e.message()))
    })?;
    if file.workload.is_empty() {
        return Err(Error::Usage(format!(
            "{}: no [[workload]] table; add at least one with a url and connections",
            path.display()
        )));
    }
    let dur = |v: &Option<Spanned<String>>, key: &str, positive: bool| -> Result<Option<Duration>, Error> {
        let Some(v) = v else { return Ok(None) };
        let d = plan::parse_duration(key, v.get_ref()).map_err(|_| {
            loc.err(
                v,
                key,
                format!(
                    "= {:?} is not a duration; expected e.g. \"250ms\", \"5s\", \"10m\"",
                    v.get_ref()
                ),
            )
        })?;
        if positive && d.is_zero() {
            return Err(loc.err(v, key, "must be greater than 0"));
        }
        Ok(Some(d))
    };
    let thresholds = |list: &[Spanned<String>]| -> Result<Vec<plan::Threshold>, Error> {
        list.iter()
            .map(|t| plan::Threshold::parse(&loc.at(t, "thresholds"), t.get_ref()))
            .collect()
    };
    let mut workloads = Vec::with_capacity(file.workload.len());
    let mut names = std::collections::HashSet::new();
    for w in &file.workload {
        let ww = w.get_ref();
        let key_at = |k: &str| format!("{}:{}: workload key {k}", path.display(), loc.line(w.span().start));
        let model = match (&ww.interval, &ww.rate, &ww.closed) {
            (Some(i), None, None | Some(_)) if ww.closed.as_ref().is_some_and(|c| *c.get_ref()) => {
                return Err(loc.err(i, "interval", "cannot be used with closed = true"));
            }
            (Some(_), Some(r), _) => return Err(loc.err(r, "rate", "cannot be used with interval; keep one")),
            (Some(_), None, _) => LoadModel::Interval(dur(&ww.interval, "interval", true)?.unwrap_or_default()),
            (None, Some(r), _) => {
                let v = *r.get_ref();
                if !(v.is_finite() && v > 0.0) {
                    return Err(loc.err(
                        r,
                        "rate",
                        format!("= {v} must be a number of requests per second above 0"),
                    ));
                }
                if ww.closed.as_ref().is_some_and(|c| *c.get_ref()) {
                    return Err(loc.err(r, "rate", "cannot be used with closed = true"));
                }
                LoadModel::Rate(v)
            }
            (None, None, _) => LoadModel::Closed,
        };
        let tls_version = |v: &Option<Spanned<String>>, key: &str| -> Result<Option<TlsVersion>, Error> {
            match v {
                None => Ok(None),
                Some(v) => TlsVersion::parse(v.get_ref())
                    .map(Some)
                    .ok_or_else(|| loc.err(v, key, format!("= {:?}: expected \"1.2\" or \"1.3\"", v.get_ref()))),
            }
        };
        let positive_u32 = |v: &Option<Spanned<u32>>, key: &str, default: u32| -> Result<u32, Error> {
            match v {
                Some(v) if *v.get_ref() == 0 => Err(loc.err(v, key, "must be at least 1")),
                Some(v) => Ok(*v.get_ref()),
                None => Ok(default),
            }
        };
        let pipeline = match &ww.pipeline {
            Some(p) if !(1..=defaults::MAX_PIPELINE).contains(p.get_ref()) => {
                return Err(loc.err(
                    p,
                    "pipeline",
                    format!("must be between 1 and {}", defaults::MAX_PIPELINE),
                ));
            }
            Some(p) => *p.get_ref(),
            None => defaults::PIPELINE,
        };
        let method = match &ww.method {
            Some(m) => {
                crate::wire::check_method(m.get_ref()).map_err(|e| loc.err(m, "method", e))?;
                m.get_ref().clone()
            }
            None => defaults::METHOD.into(),
        };
        let mut headers = Vec::new();
        if let Some(h) = &ww.headers {
            for (name, value) in h.get_ref() {
                crate::wire::check_header(name, value).map_err(|e| loc.err(h, "headers", e))?;
                headers.push((name.clone(), value.clone()));
            }
        }
        let mut sources = Vec::new();
        for s in &ww.source_addrs {
            let ip: IpAddr = s
                .get_ref()
                .parse()
                .map_err(|_| loc.err(s, "source_addrs", format!("{:?} is not an IP address", s.get_ref())))?;
            sources.push(ip);
        }
        if let Some(n) = &ww.name {
            if n.get_ref().is_empty() {
                return Err(loc.err(n, "name", "must not be empty"));
            }
            if !names.insert(n.get_ref().clone()) {
                return Err(loc.err(
                    n,
                    "name",
                    format!("{:?} is used by two workloads; names must differ", n.get_ref()),
                ));
            }
        }
        let max_requests_per_conn = match &ww.max_requests_per_conn {
            Some(v) if *v.get_ref() == 0 => return Err(loc.err(v, "max_requests_per_conn", "must be at least 1")),
            v => v.as_ref().map(|v| *v.get_ref()),
        };
        let mut requests = Vec::with_capacity(ww.request.len());
        for (i, r) in ww.request.iter().enumerate() {
            let rr = r.get_ref();
            if let Some(m) = &rr.method {
                crate::wire::check_method(m.get_ref()).map_err(|e| loc.err(m, "request.method", e))?;
            }
            let mut headers = Vec::new();
            if let Some(h) = &rr.headers {
                for (name, value) in h.get_ref() {
                    crate::wire::check_header(name, value).map_err(|e| loc.err(h, "request.headers", e))?;
                    headers.push((name.clone(), value.clone()));
                }
            }
            requests.push(plan::RequestEntry {
                name: rr.name.clone(),
                method: rr.method.as_ref().map(|m| m.get_ref().clone()),
                path: rr.path.get_ref().clone(),
                headers,
                body: rr.body.clone().map(String::into_bytes),
                body_file: rr.body_file.clone(),
                weight: rr.weight.unwrap_or(defaults::WEIGHT),
                checks: check_spec!(rr),
                origin: format!(
                    "{}:{}: workload.request {}",
                    path.display(),
                    loc.line(r.span().start),
                    i + 1
                ),
            });
        }
        let spec = WorkloadSpec {
            name: ww.name.as_ref().map(|n| n.get_ref().clone()),
            url: ww.url.get_ref().clone(),
            connections: positive_u32(&ww.connections, "connections", defaults::CONNECTIONS)?,
            ramp: positive_u32(&ww.ramp, "ramp", defaults::RAMP)?,
            model,
            pipeline,
            close: ww.close.as_ref().is_some_and(|c| *c.get_ref()),
            close_with_reset: ww.close_with_reset.as_ref().is_some_and(|c| *c.get_ref()),
            method,
            headers,
            body: ww.body.as_ref().map(|b| b.get_ref().clone().into_bytes()),
            body_file: ww.body_file.as_ref().map(|f| f.get_ref().clone()),
            requests,
            checks: check_spec!(ww),
            connect_timeout: dur(&ww.connect_timeout, "connect_timeout", true)?.unwrap_or(defaults::CONNECT_TIMEOUT),
            request_timeout: dur(&ww.request_timeout, "request_timeout", true)?.unwrap_or(defaults::REQUEST_TIMEOUT),
            source_addrs: sources,
            max_requests_per_conn,
            max_conn_lifetime: dur(&ww.max_conn_lifetime, "max_conn_lifetime", true)?,
            target_pids: ww.target_pids.clone(),
            stages: Vec::new(),
            then_stop: false,
            thresholds: thresholds(&ww.thresholds)?,
            tls: TlsSpec {
                servername: ww.servername.as_ref().map(|v| v.get_ref().clone()),
                cacert: match ww.cacert.as_ref().map(Spanned::get_ref) {
                    None => Vec::new(),
                    Some(OneOrMany::One(p)) => vec![p.clone()],
                    Some(OneOrMany::Many(v)) => v.clone(),
                },
                insecure: ww.insecure.as_ref().is_some_and(|v| *v.get_ref()),
                cert: ww.cert.as_ref().map(|v| v.get_ref().clone()),
                key: ww.key.as_ref().map(|v| v.get_ref().clone()),
                min: tls_version(&ww.tls_min, "tls_min")?,
                max: tls_version(&ww.tls_max, "tls_max")?,
                resumption: ww.tls_resumption.as_ref().map(|v| *v.get_ref()),
            },
        };
        // Each stage inherits what it does not set from the step before; the
        // first step replaces the workload's own connections and model.
        let mut stages = Vec::with_capacity(ww.stages.len());
        let (mut conns, mut model_now) = (spec.connections, spec.model);
        for st in &ww.stages {
            let sr = st.get_ref();
            if let Some(c) = &sr.connections {
                if *c.get_ref() == 0 {
                    return Err(loc.err(c, "stages.connections", "must be at least 1"));
                }
                conns = *c.get_ref();
            }
            match (&sr.interval, &sr.rate) {
                (Some(_), Some(r)) => {
                    return Err(loc.err(r, "stages.rate", "cannot be used with interval in the same stage"));
                }
                (Some(_), None) => {
                    model_now = LoadModel::Interval(dur(&sr.interval, "stages.interval", true)?.unwrap_or_default())
                }
                (None, Some(r)) if !(r.get_ref().is_finite() && *r.get_ref() > 0.0) => {
                    return Err(loc.err(r, "stages.rate", "must be a number of requests per second above 0"));
                }
                (None, Some(r)) => model_now = LoadModel::Rate(*r.get_ref()),
                (None, None) => {}
            }
            let hold = dur(&Some(sr.hold.clone()), "stages.hold", true)?.unwrap_or_default();
            stages.push(plan::Stage {
                connections: conns,
                model: model_now,
                hold,
            });
        }
        let then_stop = match &ww.then {
            None => false,
            Some(t) if t.get_ref() == "stop" => true,
            Some(t) if t.get_ref() == "hold" => false,
            Some(t) => return Err(loc.err(t, "then", format!("= {:?}: expected \"hold\" or \"stop\"", t.get_ref()))),
        };
        if then_stop && stages.is_empty() {
            return Err(Error::Usage(format!(
                "{}: then = \"stop\" needs stages",
                key_at("then")
            )));
        }
        let mut spec = spec;
        if let Some(first) = stages.first() {
            spec.connections = first.connections;
            spec.model = first.model;
        }
        spec.stages = stages;
        spec.then_stop = then_stop;
        // Cross-field errors from `build` name each key where it is written.
        let spanned_at = |k: &str| -> Option<String> {
            match k {
                "url" => Some(format!("{}: ", loc.at(&ww.url, "url"))),
                "body" => ww.body.as_ref().map(|v| loc.at(v, k)),
                "body_file" => ww.body_file.as_ref().map(|v| loc.at(v, k)),
                "close" => ww.close.as_ref().map(|v| loc.at(v, k)),
                "pipeline" => ww.pipeline.as_ref().map(|v| loc.at(v, k)),
                "method" => ww.method.as_ref().map(|v| loc.at(v, k)),
                "max_requests_per_conn" => ww.max_requests_per_conn.as_ref().map(|v| loc.at(v, k)),
                "servername" => ww.servername.as_ref().map(|v| loc.at(v, k)),
                "cacert" => ww.cacert.as_ref().map(|v| loc.at(v, k)),
                "insecure" => ww.insecure.as_ref().map(|v| loc.at(v, k)),
                "cert" => ww.cert.as_ref().map(|v| loc.at(v, k)),
                "key" => ww.key.as_ref().map(|v| loc.at(v, k)),
                "tls_min" => ww.tls_min.as_ref().map(|v| loc.at(v, k)),
                "tls_max" => ww.tls_max.as_ref().map(|v| loc.at(v, k)),
                "tls_resumption" => ww.tls_resumption.as_ref().map(|v| loc.at(v, k)),
                "thresholds" => ww.thresholds.first().map(|v| loc.at(v, k)),
                _ => None,
            }
        };
        let built = spec.build(&|k| spanned_at(k).unwrap_or_else(|| key_at(k)))?;
        if !names.insert(built.name.clone()) && ww.name.is_none() {
            return Err(Error::Usage(format!(
                "{}: two workloads are both named {:?} (from their URLs); give them distinct `name`s",
                loc.at(&ww.url, "url"),
                built.name
            )));
        }
        workloads.push(built);
    }
    let metrics_listen = match (over.metrics_listen, &file.metrics_listen) {
        (Some(m), _) => m,
        (None, None) => Some(defaults::METRICS_LISTEN),
        (None, Some(v)) if v.get_ref() == "off" => None,
        (None, Some(v)) => Some(v.get_ref().parse().map_err(|_| {
            loc.err(
                v,
                "metrics_listen",
                format!("= {:?}: expected ADDRESS:PORT or \"off\"", v.get_ref()),
            )
        })?),
    };
    let threads = match (over.threads, &file.threads) {
        (Some(t), _) => t,
        (None, Some(t)) if *t.get_ref() == 0 => return Err(loc.err(t, "threads", "must be at least 1")),
        (None, Some(t)) => *t.get_ref() as usize,
        (None, None) => defaults::threads(),
    };
    let requests = match (over.requests, &file.requests) {
        (Some(n), _) => Some(n),
        (None, Some(n)) if *n.get_ref() == 0 => return Err(loc.err(n, "requests", "must be at least 1")),
        (None, n) => n.as_ref().map(|n| *n.get_ref()),
    };
    let global_thresholds = match over.thresholds {
        Some(t) => t,
        None => thresholds(&file.thresholds)?,
    };
    let (shard, shard_from) = match (&over.shard, &file.shard) {
        (Some((s, from)), _) => (*s, from.clone()),
        (None, Some(v)) => {
            let at = loc.at(v, "shard");
            let job = std::env::var(plan::shard::JOB_INDEX_ENV).ok();
            (plan::Shard::parse(&format!("{at} ="), v.get_ref(), job.as_deref())?, at)
        }
        (None, None) => (plan::Shard::WHOLE, "--shard".into()),
    };
    let plan = Plan {
        workloads,
        threads,
        duration: match over.duration {
            Some(d) => Some(d),
            None => dur(&file.duration, "duration", true)?,
        },
        max_requests: requests,
        report: over.report.or(file.report).as_deref().map(ReportDest::parse),
        metrics_listen,
        drain_timeout: defaults::DRAIN_TIMEOUT,
        hdr_log: over.hdr_log.or(file.hdr_log),
        metrics_linger: match over.metrics_linger {
            Some(d) => d,
            None => dur(&file.metrics_linger, "metrics_linger", false)?.unwrap_or_default(),
        },
        hdr_log_interval: match over.hdr_log_interval {
            Some(d) => d,
            None => dur(&file.hdr_log_interval, "hdr_log_interval", true)?.unwrap_or(defaults::HDR_LOG_INTERVAL),
        },
        thresholds: global_thresholds,
        threshold_window: match over.threshold_window {
            Some(d) => Some(d),
            None => dur(&file.threshold_window, "threshold_window", true)?,
        },
        abort_on_fail: match over.abort_on_fail {
            Some(d) => Some(d),
            None => dur(&file.abort_on_fail, "abort_on_fail", true)?,
        },
        baseline: over.baseline,
        shard: plan::Shard::WHOLE,
        shard_sources: false,
    };
    let where_ = file
        .thresholds
        .first()
        .map_or_else(|| "--threshold".to_string(), |t| loc.at(t, "thresholds"));
    plan.check_thresholds(&where_)?;
    let split = over.shard_sources || file.shard_sources.unwrap_or(false);
    plan::shard::apply(plan, shard, split, &shard_from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_text(text: &str) -> Result<Plan, String> {
        parse(Path::new("soak.toml"), text, Overrides::default()).map_err(|e| e.to_string())
    }

    #[test]
    fn a_full_file() {
        let plan = parse_text(
            r#"
metrics_listen = "off"
threads = 3
duration = "2h"

[[workload]]
name = "api"
url = "http://127.0.0.1:8080/health?x=1"
connections = 5000
ramp = 500
interval = "1s"
headers = { "X-Test" = "1" }
source_addrs = ["127.0.0.2", "127.0.0.3"]
max_requests_per_conn = 1000

[[workload]]
url = "http://127.0.0.1:8081/"
connections = 10
rate = 250.5
pipeline = 2
"#,
        )
        .unwrap();
        assert_eq!(plan.threads, 3);
        assert_eq!(plan.metrics_listen, None);
        assert_eq!(plan.duration, Some(Duration::from_secs(7200)));
        assert_eq!(plan.workloads.len(), 2);
        let (a, b) = (&plan.workloads[0], &plan.workloads[1]);
        assert_eq!((a.name.as_str(), a.connections, a.ramp), ("api", 5000, 500));
        assert_eq!(a.model, LoadModel::Interval(Duration::from_secs(1)));
        assert_eq!(a.source_addrs.len(), 2);
        assert!(String::from_utf8_lossy(&a.target.requests[0].bytes).contains("X-Test: 1\r\n"));
        assert_eq!((b.name.as_str(), b.pipeline), ("127.0.0.1:8081", 2));
        assert_eq!(b.model, LoadModel::Rate(250.5));
        assert!(crate::plan::describe(&plan).contains("total: 5010 connections, 5250.5 req/s"));
    }

    #[test]
    fn request_tables_inherit_checks_and_name_their_line() {
        let plan = parse_text(
            r#"
[[workload]]
name = "api"
url = "http://127.0.0.1:8080"
headers = { "Accept" = "application/json" }
expect_status = [200]
max_body_bytes = 100

[[workload.request]]
name = "list"
path = "/items?page=1"
weight = 8

[[workload.request]]
method = "POST"
path = "/items"
body = '{"a":1}'
expect_status = [201]
"#,
        )
        .unwrap();
        let r = &plan.workloads[0].target.requests;
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].name.as_str(), r[0].weight), ("list", 8));
        assert_eq!((r[1].name.as_str(), r[1].weight), ("POST /items", 1));
        let c0 = r[0].checks.as_deref().unwrap();
        let c1 = r[1].checks.as_deref().unwrap();
        assert_eq!((c0.status.as_deref(), c0.max_body), (Some(&[200][..]), Some(100)));
        assert_eq!((c1.status.as_deref(), c1.max_body), (Some(&[201][..]), Some(100)));
        let text = String::from_utf8_lossy(&r[1].bytes);
        assert!(text.starts_with("POST /items HTTP/1.1\r\n"), "{text}");
        assert!(
            text.contains("Accept: application/json\r\n") && text.ends_with("{\"a\":1}"),
            "{text}"
        );

        for (file, says) in [
            (
                "[[workload]]\nurl = \"http://127.0.0.1:1/\"\n[[workload.request]]\npath = \"/\"\nwieght = 2\n",
                "soak.toml:5: unknown field `wieght`",
            ),
            (
                "[[workload]]\nurl = \"http://127.0.0.1:1/\"\n\n[[workload.request]]\npath = \"/\"\nweight = 0\n",
                "soak.toml:4: workload.request 1: weight 0 is out of range",
            ),
            (
                "[[workload]]\nurl = \"http://127.0.0.1:1/api\"\n[[workload.request]]\npath = \"/\"\n",
                "the URL is the origin only",
            ),
            (
                "[[workload]]\nurl = \"http://127.0.0.1:1/\"\nmethod = \"POST\"\n[[workload.request]]\npath = \"/\"\n",
                "set it on each request of the mix",
            ),
            (
                "[[workload]]\nurl = \"http://127.0.0.1:1/\"\n[[workload.request]]\npath = \"/\"\nexpect_body_contains = \"\"\n",
                "expect_body_contains is empty",
            ),
        ] {
            let e = parse_text(file).unwrap_err();
            assert!(e.contains(says), "expected {says:?} in {e}");
        }
    }

    #[test]
    fn overrides_win() {
        let text = "threads = 3\nmetrics_listen = \"off\"\n[[workload]]\nurl = \"http://127.0.0.1:1/\"\n";
        let over = Overrides {
            threads: Some(1),
            metrics_listen: Some(Some("127.0.0.1:9999".parse().unwrap())),
            ..Overrides::default()
        };
        let plan = parse(Path::new("x.toml"), text, over).unwrap();
        assert_eq!(plan.threads, 1);
        assert_eq!(plan.metrics_listen, Some("127.0.0.1:9999".parse().unwrap()));
    }

    #[test]
    fn stages_inherit_and_the_first_one_starts() {
        let plan = parse_text(
            "[[workload]]\nurl = \"http://127.0.0.1:1/\"\nconnections = 7\nrate = 10.0\nthen = \"stop\"\nstages = [\n  { connections = 100, hold = \"1m\" },\n  { interval = \"1s\", hold = \"2m\" },\n  { connections = 500, hold = \"3m\" },\n]\n",
        )
        .unwrap();
        let w = &plan.workloads[0];
        assert_eq!(
            (w.connections, w.model, w.then_stop),
            (100, LoadModel::Rate(10.0), true)
        );
        let got: Vec<(u32, LoadModel, u64)> = w
            .stages
            .iter()
            .map(|s| (s.connections, s.model, s.hold.as_secs()))
            .collect();
        let iv = LoadModel::Interval(Duration::from_secs(1));
        assert_eq!(got, [(100, LoadModel::Rate(10.0), 60), (100, iv, 120), (500, iv, 180)]);
        assert_eq!(plan.total_connections(), 500, "limits must fit the largest stage");
        assert!(crate::plan::describe(&plan).contains("stage 3: 500 connections"));
        let e =
            parse_text("[[workload]]\nurl = \"http://127.0.0.1:1/\"\nstages = [{ connections = 5 }]\n").unwrap_err();
        assert!(e.contains("soak.toml") && e.contains("hold"), "{e}");
        let e =
            parse_text("[[workload]]\nurl = \"http://127.0.0.1:1/\"\nthen = \"later\"\nstages = [{ hold = \"1s\" }]\n")
                .unwrap_err();
        assert!(e.contains("soak.toml:3") && e.contains("then"), "{e}");
    }

    #[test]
    fn thresholds_globally_and_per_workload() {
        let plan = parse_text(
            "thresholds = [\"p99 < 50ms\"]\nthreshold_window = \"5m\"\nabort_on_fail = \"2m\"\nhdr_log_interval = \"1s\"\n[[workload]]\nname = \"api\"\nurl = \"http://127.0.0.1:1/\"\nthresholds = [\"error_rate<=0.1%\", \"open_min >= 90\"]\n",
        )
        .unwrap();
        assert_eq!(plan.thresholds.len(), 1);
        assert_eq!(plan.thresholds[0].text, "p99<50ms");
        let described = crate::plan::describe(&plan);
        assert!(
            described.contains("  thresholds error_rate<=0.1%, open_min>=90\n"),
            "{described}"
        );
        assert!(
            described.contains("thresholds over all workloads: p99<50ms (live window 5m, abort after failing 2m)"),
            "{described}"
        );
        assert_eq!(plan.threshold_window, Some(Duration::from_secs(300)));
        assert_eq!(plan.abort_on_fail, Some(Duration::from_secs(120)));
        assert_eq!(plan.hdr_log_interval, Duration::from_secs(1));
        let texts: Vec<(Option<usize>, &str)> = plan
            .all_thresholds()
            .into_iter()
            .map(|(w, t)| (w, t.text.as_str()))
            .collect();
        assert_eq!(
            texts,
            [
                (Some(0), "error_rate<=0.1%"),
                (Some(0), "open_min>=90"),
                (None, "p99<50ms")
            ]
        );
        // A flag's thresholds replace the file's run-wide ones.
        let over = Overrides {
            thresholds: Some(vec![crate::plan::Threshold::parse("--threshold", "rps>5").unwrap()]),
            ..Overrides::default()
        };
        let plan = parse(
            Path::new("x.toml"),
            "thresholds = [\"p99<5ms\"]\n[[workload]]\nurl = \"http://127.0.0.1:1/\"\n",
            over,
        )
        .unwrap();
        assert_eq!(plan.thresholds[0].text, "rps>5");
    }

    /// Every bad file names the file, the line and the key.
    #[test]
    fn errors_name_file_line_and_key() {
        let cases = [
            (
                "[[workload]]\nurl = \"http://127.0.0.1:1/\"\nconections = 5\n",
                "soak.toml:3",
                "conections",
            ),
            (
                "[[workload]]\nurl = \"http://127.0.0.1:1/\"\ninterval = \"1s\"\nrate = 5.0\n",
                "soak.toml:4",
                "rate",
            ),
            (
                "[[workload]]\nurl = \"http://127.0.0.1:1/\"\ninterval = \"soon\"\n",
                "soak.toml:3",
                "interval",
            ),
            (
                "[[workload]]\nurl = \"http://127.0.0.1:1/\"\nconnections = 0\n",
                "soak.toml:3",
                "connections",
            ),
            (
                "[[workload]]\nurl = \"http://127.0.0.1:1/\"\ninsecure = true\n",
                "soak.toml:3",
                "insecure is a TLS setting",
            ),
            (
                "[[workload]]\nurl = \"https://127.0.0.1:1/\"\ntls_min = \"1.1\"\n",
                "soak.toml:3",
                "tls_min",
            ),
            (
                "[[workload]]\nurl = \"http://127.0.0.1:1/\"\nconnections = \"many\"\n",
                "soak.toml:3",
                "connections",
            ),
            (
                "threads = 0\n[[workload]]\nurl = \"http://127.0.0.1:1/\"\n",
                "soak.toml:1",
                "threads",
            ),
            (
                "[[workload]]\nurl = \"http://127.0.0.1:1/\"\nsource_addrs = [\"nope\"]\n",
                "soak.toml:3",
                "source_addrs",
            ),
            (
                "[[workload]]\nname = \"a\"\nurl = \"http://127.0.0.1:1/\"\n[[workload]]\nname = \"a\"\nurl = \"http://127.0.0.1:2/\"\n",
                "soak.toml:5",
                "name",
            ),
            (
                "[[workload]]\nurl = \"http://127.0.0.1:1/\"\nclose = true\npipeline = 2\n",
                "soak.toml:4",
                "pipeline",
            ),
            (
                "metrics_listen = \"here\"\n[[workload]]\nurl = \"http://127.0.0.1:1/\"\n",
                "soak.toml:1",
                "metrics_listen",
            ),
            ("duration = \"5\"\n", "soak.toml", "workload"),
            (
                "[[workload]]\nurl = \"http://127.0.0.1:1/\"\nthresholds = [\"p99 < 5\"]\n",
                "soak.toml:3",
                "thresholds \"p99 < 5\": p99 is a latency",
            ),
            (
                "thresholds = [\"p42<5ms\"]\n[[workload]]\nurl = \"http://127.0.0.1:1/\"\n",
                "soak.toml:1",
                "unknown metric",
            ),
            (
                "[[workload]]\nurl = \"http://127.0.0.1:1/\"\nthresholds = [\"tls_handshake_p99<5ms\"]\n",
                "soak.toml:3",
                "not an https:// URL",
            ),
            (
                "thresholds = [\"tls_handshake_p99<5ms\"]\n[[workload]]\nurl = \"http://127.0.0.1:1/\"\n",
                "soak.toml:1",
                "no workload speaks TLS",
            ),
            (
                "abort_on_fail = \"soon\"\n[[workload]]\nurl = \"http://127.0.0.1:1/\"\n",
                "soak.toml:1",
                "abort_on_fail",
            ),
        ];
        for (text, at, key) in cases {
            let e = parse_text(text).unwrap_err();
            assert!(e.contains(at) && e.contains(key), "{text:?}: {e}");
        }
    }
}
