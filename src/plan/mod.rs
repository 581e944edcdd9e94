//! The validated plan: what to load, how hard, for how long.
//!
//! Flags (and, later, config files) are turned into a [`Plan`] in one place,
//! and everything past that point can trust it: numbers are in range, URLs
//! are resolved, the request bytes are rendered. Internally the engine runs a
//! list of [`Workload`]s even though the command line defines one, so a
//! config file with several workloads needs no engine change.
//!
//! Helpers here ([`parse_duration`], [`parse_url`]) produce the one-line
//! messages the operator sees for bad input: each names the offending value
//! and what is expected.

pub mod checks;
pub mod defaults;
mod describe;
pub mod events;
pub mod grpc;
pub mod h3;
mod http;
pub mod mix;
mod render;
pub mod shard;
pub mod threshold;
pub mod tls;
mod tls_version;
mod url;
pub mod watch;
pub mod ws;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

pub use checks::{CheckSpec, CheckState, Checks, Judge};
pub use describe::describe;
pub use events::{EventPlan, EventSpec, OutagePlan, parse_flag_event};
pub use http::HttpVersion;
pub use mix::{Request, RequestEntry};
pub use shard::Shard;
pub use threshold::{Metric, Op, Threshold};
pub use tls::{Tls, TlsSpec, TlsVersion};
pub use url::{ParsedUrl, parse_url, resolve};
pub use ws::{WsMode, WsPlan, WsSpec};

use crate::Error;

/// How requests are paced on each connection.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum LoadModel {
    /// Next request as soon as a response is in (latency from write).
    #[default]
    Closed,
    /// Each connection sends one request every interval (latency from the
    /// time the request was due).
    Interval(Duration),
    /// Requests per second in total, spread evenly over the connections
    /// (latency from the time the request was due).
    Rate(f64),
}

impl LoadModel {
    /// The schedule interval of one connection out of `connections`, or
    /// `None` in closed loop.
    pub fn per_connection_interval(&self, connections: u32) -> Option<Duration> {
        match *self {
            LoadModel::Closed => None,
            LoadModel::Interval(d) => Some(d),
            LoadModel::Rate(r) => Some(Duration::from_secs_f64(connections as f64 / r)),
        }
    }
}

impl std::fmt::Display for LoadModel {
    /// How the pace reads in logs and `soakd check`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadModel::Closed => f.write_str("closed loop"),
            LoadModel::Interval(i) => write!(f, "one request every {} each", humantime::format_duration(*i)),
            LoadModel::Rate(r) => write!(f, "{r} req/s"),
        }
    }
}

/// Where the target lives and how requests to it look.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// The URL as given.
    pub url: String,
    /// Address connections are opened to (first resolved address).
    pub addr: SocketAddr,
    /// The requests sent (one, or a weighted mix), each rendered once.
    pub requests: Vec<Request>,
    /// `https://`: the TLS client connections use.
    pub tls: Option<Tls>,
    /// `ws://`/`wss://`: what each connection does once upgraded (part of
    /// what is sent, so a change of it recycles connections like a change
    /// of the requests).
    pub ws: Option<std::sync::Arc<WsPlan>>,
    /// `grpc://`/`grpcs://`: the call (part of what is sent, like `ws`).
    pub grpc: Option<std::sync::Arc<grpc::GrpcTarget>>,
}

/// One load: a target, a connection count and a load model.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    /// Name used in reports and as the `target` metric label (`host:port`
    /// unless a config file names it).
    pub name: String,
    /// What to connect to and send.
    pub target: Target,
    /// Connections to open and hold.
    pub connections: u32,
    /// At most this many new connections per second while ramping up.
    pub ramp: u32,
    /// How requests are paced.
    pub model: LoadModel,
    /// How each connection behaves (see [`ConnPolicy`]).
    pub conn: ConnPolicy,
    /// A digest of the settings whose change recycles the connections on a
    /// reload (each setting's class is declared with it, `config::settings`).
    pub recycle_key: u64,
    /// Time after the ramp the trends leave out (`None`: the default,
    /// [`defaults::default_warmup`] of the run).
    pub warmup: Option<Duration>,
    /// PIDs of the server under test, watched through /proc for the metrics.
    pub target_pids: Vec<u32>,
    /// Steps run in order after the start (the first step is the starting
    /// `connections` and `model`); empty for a constant load.
    pub stages: Vec<Stage>,
    /// Stop the run when the last stage's hold is over (else hold it).
    pub then_stop: bool,
    /// Thresholds on this workload's own figures.
    pub thresholds: Vec<Threshold>,
    // HTTP/2
    /// The HTTP version asked for (`--http`).
    pub http: HttpVersion,
    /// Concurrent streams per HTTP/2 connection.
    pub streams: u16,
    /// soakd's HTTP/2 receive window (connection and stream), bytes.
    pub h2_window: u32,
    /// `--h2-ping`: a PING on each HTTP/2 connection this often.
    pub h2_ping: Option<std::time::Duration>,
    /// `--h3-keepalive`: `None` by default (half the negotiated idle
    /// timeout), `Some(None)` off, `Some(Some(d))` after `d` of silence.
    pub h3_keepalive: Option<Option<std::time::Duration>>,
    /// `--h3-0rtt`: requests as 0-RTT data on resumed connections.
    pub h3_0rtt: bool,
}

/// How each connection of a workload behaves: carried from the flags or
/// the file to the plan as one value (declared once, in the struct and in
/// `config::settings`), not field by field.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConnPolicy {
    /// Requests in flight per connection.
    pub pipeline: u16,
    /// Close after one response (HTTP/1.0-style churn).
    pub close: bool,
    /// Close soakd's own connections with a reset (SO_LINGER 0) at churn
    /// and shutdown, so they leave no TIME_WAIT behind.
    pub close_with_reset: bool,
    /// Connect timeout (and the TLS handshake's).
    pub connect_timeout: Duration,
    /// Time a request may wait for its complete response.
    pub request_timeout: Duration,
    /// Local addresses to bind; connections are spread over them.
    pub source_addrs: Vec<IpAddr>,
    /// Planned churn: close after about this many requests (±10%).
    pub max_requests_per_conn: Option<u32>,
    /// Planned churn: close after about this long (±10%).
    pub max_conn_lifetime: Option<Duration>,
    /// TCP keepalive idle time; `None`: off.
    pub tcp_keepalive: Option<Duration>,
}

/// One step of a workload's stages.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stage {
    /// Connections during the step.
    pub connections: u32,
    /// Load model during the step.
    pub model: LoadModel,
    /// How long the step lasts.
    pub hold: Duration,
}

/// Where the final JSON report goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReportDest {
    /// Standard output (`--report -`).
    Stdout,
    /// A file.
    File(PathBuf),
}

impl ReportDest {
    /// `-` is standard output, anything else a file (the same for the flag
    /// and the config key).
    pub fn parse(value: &str) -> ReportDest {
        if value == "-" {
            ReportDest::Stdout
        } else {
            ReportDest::File(PathBuf::from(value))
        }
    }
}

/// A validated run.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The loads to run side by side.
    pub workloads: Vec<Workload>,
    /// Worker threads.
    pub threads: usize,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Stop after this many completed requests (over all workloads).
    pub max_requests: Option<u64>,
    /// Where to write the JSON report.
    pub report: Option<ReportDest>,
    /// Prometheus endpoint address; `None` is off.
    pub metrics_listen: Option<SocketAddr>,
    /// Time allowed for responses in flight after a stop.
    pub drain_timeout: Duration,
    /// HdrHistogram interval log of latencies, one interval per
    /// `hdr_log_interval` (`--hdr-log-interval`).
    pub hdr_log: Option<PathBuf>,
    /// Keep serving the final metrics this long after the run, so the last
    /// scrape sees the final counters.
    pub metrics_linger: Duration,
    /// The share of the plan this process runs (0/1 unsharded). The
    /// workloads keep the whole plan's numbers; see [`shard`].
    pub shard: Shard,
    /// `--shard-sources`: the workloads' source addresses are already this
    /// shard's slice.
    pub shard_sources: bool,
    /// Length of one HDR log interval.
    pub hdr_log_interval: Duration,
    /// Thresholds on the figures over all workloads.
    pub thresholds: Vec<Threshold>,
    /// The live threshold gauges look at this much of the recent past
    /// (`None`: the whole run).
    pub threshold_window: Option<Duration>,
    /// Stop the run once a threshold has failed (live) this long.
    pub abort_on_fail: Option<Duration>,
    /// A report to compare this run's with, live and at the end.
    pub baseline: Option<Baseline>,
    /// `--state`: where the run checkpoints itself, so a restart continues
    /// it (`None`: a restart starts over).
    pub state: Option<StateFile>,
    /// How outages are found (`--outage-*`).
    pub outages: OutagePlan,
    /// Events run at a time of the run or marked from outside.
    pub events: EventPlan,
    /// The server's own figures to read, trend and judge (`--target-metrics`,
    /// `--prometheus`, `--target-pidfile`, `--target-cgroup`).
    pub watch: watch::WatchPlan,
}

/// `--state FILE` and its companions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateFile {
    /// The state file.
    pub path: PathBuf,
    /// How often the run's state is written (`--checkpoint-interval`).
    pub checkpoint_interval: Duration,
    /// `--fresh`: move an existing state aside and start a new soak.
    pub fresh: bool,
}

impl StateFile {
    /// `--state` (config `state`) with `--checkpoint-interval` (config
    /// `checkpoint_interval`, default [`defaults::CHECKPOINT_INTERVAL`])
    /// and `--fresh`; the last two mean nothing without a state file.
    pub fn of(path: Option<PathBuf>, interval: Option<Duration>, fresh: bool) -> Result<Option<StateFile>, Error> {
        match path {
            Some(path) => Ok(Some(StateFile {
                path,
                checkpoint_interval: interval.unwrap_or(defaults::CHECKPOINT_INTERVAL),
                fresh,
            })),
            None if interval.is_some() => Err(Error::Usage(
                "--checkpoint-interval / checkpoint_interval is how often --state is written, but no --state FILE (state = \"FILE\") is given; add one or drop it".into(),
            )),
            None if fresh => Err(Error::Usage(
                "--fresh starts a new soak over an existing --state file, but no --state FILE (state = \"FILE\") is given; add one or drop --fresh".into(),
            )),
            None => Ok(None),
        }
    }
}

/// `--baseline`: an earlier run's report to compare with, window by
/// window while the run goes and as a whole at the end.
#[derive(Clone, Debug, PartialEq)]
pub struct Baseline {
    /// Its JSON report.
    pub report: PathBuf,
    /// Its HDR interval log (else the one the report names, if any).
    pub hdr_log: Option<PathBuf>,
    /// The smallest relative change that counts (0.1 = 10%).
    pub tolerance: f64,
    /// How much of the run each live verdict judges (`--baseline-window`).
    pub window: Duration,
}

impl Baseline {
    /// `--baseline` (config `baseline`) with its companions
    /// `--baseline-hdr-log`, `--tolerance` and `--baseline-window`
    /// (defaults [`defaults::TOLERANCE`] and [`defaults::BASELINE_WINDOW`]),
    /// which mean nothing without it.
    pub fn of(
        report: Option<PathBuf>,
        hdr_log: Option<PathBuf>,
        tolerance: Option<f64>,
        window: Option<Duration>,
    ) -> Result<Option<Baseline>, Error> {
        let Some(report) = report else {
            let given = [
                (hdr_log.is_some(), "--baseline-hdr-log / baseline_hdr_log"),
                (tolerance.is_some(), "--tolerance / tolerance"),
                (window.is_some(), "--baseline-window / baseline_window"),
            ];
            return match given.iter().find(|(g, _)| *g) {
                Some((_, what)) => Err(Error::Usage(format!(
                    "{what} goes with a baseline, but no --baseline REPORT (baseline = \"REPORT\") is given; add one or drop it"
                ))),
                None => Ok(None),
            };
        };
        Ok(Some(Baseline {
            report,
            hdr_log,
            tolerance: tolerance.unwrap_or(defaults::TOLERANCE),
            window: window.unwrap_or(defaults::BASELINE_WINDOW),
        }))
    }
}

impl Plan {
    /// The warmup the trends leave out after the ramp: the longest any
    /// workload asks for (`--warmup`), `None` when none does (then the
    /// default of the run's length applies).
    pub fn warmup(&self) -> Option<Duration> {
        self.workloads.iter().filter_map(|w| w.warmup).max()
    }

    /// The rules the outage watch runs by: the plan's, with `soakd
    /// compare`'s tolerance (`--tolerance` with a baseline) for "back to
    /// normal".
    pub fn outage_rules(&self) -> crate::stats::outage::Rules {
        crate::stats::outage::Rules {
            errors: self.outages.errors,
            open: self.outages.open,
            settle: self.outages.settle,
            tolerance: self.baseline.as_ref().map_or(defaults::TOLERANCE, |b| b.tolerance),
            min_latency_change: defaults::MIN_LATENCY_CHANGE.as_secs_f64(),
        }
    }

    /// This process's connections over all workloads (its shard's share),
    /// at the largest stage of each: what the open-file and port limits
    /// must fit.
    pub fn total_connections(&self) -> u64 {
        self.workloads.iter().map(|w| self.share(w)).sum()
    }

    /// The most connections this process holds of `w`: its shard's share
    /// of the workload's peak.
    pub fn share(&self, w: &Workload) -> u64 {
        self.shard.share(w.peak_connections())
    }

    /// Every threshold with the workload it is about (`None`: all of
    /// them), in the order the report lists them.
    pub fn all_thresholds(&self) -> Vec<(Option<usize>, &Threshold)> {
        let mut out: Vec<(Option<usize>, &Threshold)> = self
            .workloads
            .iter()
            .enumerate()
            .flat_map(|(wi, w)| w.thresholds.iter().map(move |t| (Some(wi), t)))
            .collect();
        out.extend(self.thresholds.iter().map(|t| (None, t)));
        out
    }

    /// Checks the run-wide thresholds against the workloads: a TLS
    /// handshake threshold needs an https workload. `key` names where
    /// they were given, for the message.
    pub fn check_thresholds(&self, key: &str) -> Result<(), Error> {
        if self.abort_on_fail.is_some() && self.all_thresholds().is_empty() && self.baseline.is_none() {
            return Err(Error::Usage(
                "--abort-on-fail / abort_on_fail stops the run when a threshold fails or a regression against the baseline holds, but neither a threshold nor a baseline is given; add --threshold (or thresholds = [...]) or --baseline REPORT".into(),
            ));
        }
        if self.workloads.iter().all(|w| w.target.tls.is_none())
            && let Some(t) = self.thresholds.iter().find(|t| t.metric == Metric::TlsHandshakeP99)
        {
            return Err(Error::Usage(format!(
                "{key} {:?}: no workload speaks TLS (https://), so there is no handshake to measure; drop it or use an https:// URL",
                t.text
            )));
        }
        if self.workloads.iter().all(|w| w.target.grpc.is_none())
            && let Some((_, t)) = self
                .all_thresholds()
                .into_iter()
                .find(|(_, t)| t.metric == Metric::GrpcErrorRate)
        {
            return Err(Error::Usage(format!(
                "{key} {:?}: no workload makes gRPC calls (grpc:// or grpcs://), so no call ends with a status; drop it, or use error_rate for HTTP",
                t.text
            )));
        }
        for t in self.thresholds.iter().filter(|t| t.metric.is_watch()) {
            let w = t.watch.as_ref().expect("a watch threshold names its watch");
            let names = self.watch.names();
            let Some(unit) = self.watch.unit_of(&w.name) else {
                return Err(Error::Usage(format!(
                    "{key} {:?}: no watch is named {}; {}",
                    t.text,
                    w.name,
                    if names.is_empty() {
                        "watches come with --target-metrics or --prometheus and --watch NAME=…, or rss, fds and cpu with --target-pidfile or --target-cgroup".to_string()
                    } else {
                        format!("the watches are {}", names.join(", "))
                    }
                )));
            };
            if w.sized && !unit.is_bytes() {
                return Err(Error::Usage(format!(
                    "{key} {:?}: {} is in {}, not bytes; write its limit without a size",
                    t.text,
                    w.name,
                    unit.name()
                )));
            }
            if w.timed && !matches!(unit, watch::WatchUnit::Seconds | watch::WatchUnit::SecondsPerSecond) {
                return Err(Error::Usage(format!(
                    "{key} {:?}: {} is in {}, not seconds; write its limit without a time",
                    t.text,
                    w.name,
                    unit.name()
                )));
            }
        }
        if self.workloads.iter().all(|w| w.target_pids.is_empty())
            && let Some(t) = self.thresholds.iter().find(|t| t.metric.needs_target_pid())
        {
            return Err(Error::Usage(format!(
                "{key} {:?}: {} is the server's own trend, read from /proc, and no --target-pid (target_pids) says which process the server is; add --target-pid PID of the server, or drop the threshold",
                t.text,
                t.metric.name()
            )));
        }
        Ok(())
    }
}

impl Workload {
    /// The names of its requests (the `request` label), in order.
    pub fn request_names(&self) -> Vec<String> {
        self.target.requests.iter().map(|r| r.name.clone()).collect()
    }

    /// The most connections this workload ever holds (over its stages).
    pub fn peak_connections(&self) -> u64 {
        self.stages
            .iter()
            .map(|s| s.connections)
            .max()
            .unwrap_or(0)
            .max(self.connections) as u64
    }
}

/// One workload as given (flags or a config file), before the URL is
/// resolved and the request rendered. [`WorkloadSpec::build`] checks it.
/// `Default` is the blank the declared settings are applied to
/// (`config::settings`), not a set of defaults: those are in [`defaults`].
#[derive(Clone, Debug, Default)]
pub struct WorkloadSpec {
    /// Name (the `target` label); `host:port` when absent.
    pub name: Option<String>,
    /// Target URL.
    pub url: String,
    /// Connections to hold.
    pub connections: u32,
    /// New connections per second while ramping.
    pub ramp: u32,
    /// Load model.
    pub model: LoadModel,
    /// How each connection behaves.
    pub conn: ConnPolicy,
    /// See [`Workload::recycle_key`] (set where the declared settings are
    /// applied).
    pub recycle_key: u64,
    /// Request method.
    pub method: String,
    /// Extra headers.
    pub headers: Vec<(String, String)>,
    /// Body given inline.
    pub body: Option<Vec<u8>>,
    /// Body read from a file.
    pub body_file: Option<PathBuf>,
    /// A mix of requests (`[[workload.request]]`, `--requests-file`); when
    /// empty, the workload sends the one request the URL, method, headers
    /// and body describe.
    pub requests: Vec<RequestEntry>,
    /// Response checks of the workload (each request inherits the keys it
    /// does not set).
    pub checks: CheckSpec,
    /// Time after the ramp the trends leave out (`None`: the default).
    pub warmup: Option<Duration>,
    /// PIDs of the server under test.
    pub target_pids: Vec<u32>,
    /// Stages (see [`Workload::stages`]).
    pub stages: Vec<Stage>,
    /// Stop after the last stage.
    pub then_stop: bool,
    /// TLS settings (only for `https://` URLs).
    pub tls: TlsSpec,
    /// Thresholds on this workload's figures.
    pub thresholds: Vec<Threshold>,
    // HTTP/2
    /// The HTTP version asked for.
    pub http: HttpVersion,
    /// Concurrent streams per HTTP/2 connection.
    pub streams: u16,
    /// HTTP/2 receive window, bytes.
    pub h2_window: u32,
    /// `--h2-ping` as given (`Some(None)`: off).
    pub h2_ping: Option<Option<std::time::Duration>>,
    /// `--h3-keepalive` as given (`Some(None)`: off).
    pub h3_keepalive: Option<Option<std::time::Duration>>,
    /// `--h3-0rtt` as given.
    pub h3_0rtt: Option<bool>,
    /// WebSocket settings (only for `ws://`/`wss://` URLs).
    pub ws: WsSpec,
    /// gRPC settings (only for `grpc://`/`grpcs://` URLs).
    pub grpc: grpc::GrpcSpec,
}

impl WorkloadSpec {
    /// Checks the cross-field rules, reads the body file, resolves the URL
    /// and renders the request. `key` turns a setting's name (`"pipeline"`)
    /// into how the operator wrote it (`--pipeline`, or a file, line and
    /// key), for the error messages.
    pub fn build(self, key: &dyn Fn(&str) -> String) -> Result<Workload, Error> {
        let in_url = |e: Error| match e {
            Error::Usage(m) => Error::Usage(format!("{}{m}", key("url"))),
            other => other,
        };
        let parsed = parse_url(&self.url).map_err(in_url)?;
        let http = self.http_of(&parsed, key)?;
        let tls = if parsed.tls {
            let mut t = tls::build(&self.tls, &parsed.host, key)?;
            if let Some(config) = std::sync::Arc::get_mut(&mut t.config) {
                // A WebSocket opens with an HTTP/1.1 upgrade (RFC 6455; its
                // HTTP/2 form, RFC 8441, is not spoken here).
                config.alpn_protocols = if parsed.ws {
                    HttpVersion::Http11.alpn()
                } else {
                    http.alpn()
                };
            }
            Some(t)
        } else {
            if let Some(first) = self.tls.given().first() {
                return Err(Error::Usage(format!(
                    "{} is a TLS setting, but {:?} is not an https:// URL; use https:// or drop it",
                    key(first),
                    self.url
                )));
            }
            None
        };
        if tls.is_none()
            && let Some(t) = self.thresholds.iter().find(|t| t.metric == Metric::TlsHandshakeP99)
        {
            return Err(Error::Usage(format!(
                "{} {:?}: {:?} is not an https:// URL, so there is no TLS handshake to measure; drop it or use https://",
                key("thresholds"),
                t.text,
                self.url
            )));
        }
        // Drifts are per workload too; slopes (one server, one soakd) and
        // the server watch's series are not.
        if let Some(t) = self.thresholds.iter().find(|t| {
            t.metric.is_watch()
                || matches!(
                    t.metric,
                    Metric::TargetRssSlope | Metric::TargetFdsSlope | Metric::SoakdRssSlope
                )
        }) {
            return Err(Error::Usage(format!(
                "{} {:?}: a slope of the server's or soakd's resources is one per run, not per workload; give it as a run-wide --threshold (thresholds = [...] at the top of the file)",
                key("thresholds"),
                t.text
            )));
        }
        let addr = resolve(&parsed, &self.url).map_err(in_url)?;
        let c = &self.conn;
        if c.close && c.pipeline > 1 {
            return Err(Error::Usage(format!(
                "{} {} cannot be used with {}, which sends one request per connection",
                key("pipeline"),
                c.pipeline,
                key("close")
            )));
        }
        if c.close && c.max_requests_per_conn.is_some() {
            return Err(Error::Usage(format!(
                "{} cannot be used with {} (which already means one request per connection)",
                key("max_requests_per_conn"),
                key("close")
            )));
        }
        if self.http == HttpVersion::Http2 && c.close {
            return Err(Error::Usage(format!(
                "{} cannot be used with {} 2: an HTTP/2 connection is not closed per request; use {} instead",
                key("close"),
                key("http"),
                key("max_requests_per_conn")
            )));
        }
        if parsed.ws && self.http == HttpVersion::Http2 {
            return Err(Error::Usage(format!(
                "{} 2 cannot be used with a ws:// or wss:// URL: a WebSocket opens with an HTTP/1.1 upgrade; drop {}",
                key("http"),
                key("http")
            )));
        }
        let h2_ping = self.h2_ping.unwrap_or(defaults::H2_PING);
        if h2_ping.is_some() && (parsed.ws || !http.may_be_h2(parsed.tls)) {
            return Err(Error::Usage(format!(
                "{} is HTTP/2's keepalive and this workload speaks {}; drop it (for a WebSocket, {} pings; for HTTP/3, {})",
                key("h2_ping"),
                if parsed.ws {
                    "WebSocket"
                } else if http == HttpVersion::Http3 {
                    "HTTP/3"
                } else {
                    "HTTP/1.1"
                },
                key("ws_ping"),
                key("h3_keepalive")
            )));
        }
        for (given, name) in [
            (self.h3_keepalive.is_some(), "h3_keepalive"),
            (self.h3_0rtt.is_some(), "h3_0rtt"),
        ] {
            if given && http != HttpVersion::Http3 {
                return Err(Error::Usage(format!(
                    "{} is an HTTP/3 setting and this workload does not speak HTTP/3; drop it, or add {} 3",
                    key(name),
                    key("http")
                )));
            }
        }
        if http == HttpVersion::Http3 {
            self.check_h3(&parsed, tls.as_ref(), key)?;
        }
        let ws = ws::build(&self.ws, &parsed, &self.headers, self.model, key)?.map(std::sync::Arc::new);
        if !self.requests.is_empty() {
            mix::check_entries(&self.requests)?;
        }
        let (grpc, requests) = if parsed.grpc {
            let pace = (self.conn.request_timeout, self.model);
            let (t, requests) = grpc::build_workload(
                &self.grpc,
                &parsed,
                &self.headers,
                pace,
                &self.checks,
                &self.requests,
                key,
            )?;
            (Some(std::sync::Arc::new(t)), requests)
        } else {
            (None, self.render_requests(&parsed, key)?)
        };
        let name = self.name.unwrap_or_else(|| {
            if parsed.host.contains(':') {
                format!("[{}]:{}", parsed.host, parsed.port)
            } else {
                format!("{}:{}", parsed.host, parsed.port)
            }
        });
        Ok(Workload {
            name,
            target: Target {
                url: self.url,
                addr,
                requests,
                tls,
                ws,
                grpc,
            },
            connections: self.connections,
            ramp: self.ramp,
            model: self.model,
            conn: self.conn,
            recycle_key: self.recycle_key,
            warmup: self.warmup,
            target_pids: self.target_pids,
            stages: self.stages,
            then_stop: self.then_stop,
            thresholds: self.thresholds,
            http,
            streams: self.streams,
            h2_window: self.h2_window,
            h2_ping,
            h3_keepalive: self.h3_keepalive,
            h3_0rtt: self.h3_0rtt.unwrap_or(defaults::H3_0RTT),
        })
    }
}

/// Parses a duration such as `250ms`, `5s`, `10m`, `2h` or `1d` (units may
/// be combined, `1m30s`). `what` names the flag in the error message.
pub fn parse_duration(what: &str, value: &str) -> Result<Duration, Error> {
    let v = value.trim();
    let bad = || {
        Error::Usage(format!(
            "{what}: invalid duration {value:?}; expected a number with a unit: ms, s, m, h or d (e.g. 250ms, 5s, 10m)"
        ))
    };
    if v.is_empty() || v.starts_with('-') || v.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(bad());
    }
    humantime::parse_duration(v).map_err(|_| bad())
}

/// Parses a relative tolerance: `10%` or a fraction `0.1`, at least 0.
/// `what` names the flag in the error message.
pub fn parse_tolerance(what: &str, value: &str) -> Result<f64, Error> {
    let v = value.trim();
    let parsed = match v.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|p| p / 100.0),
        None => v.parse::<f64>(),
    };
    match parsed {
        Ok(t) if t.is_finite() && t >= 0.0 => Ok(t),
        _ => Err(Error::Usage(format!(
            "{what}: invalid tolerance {value:?}; expected a percentage such as 10% (or a fraction such as 0.1)"
        ))),
    }
}

/// Like [`parse_duration`], but zero is refused.
pub fn parse_positive_duration(what: &str, value: &str) -> Result<Duration, Error> {
    let d = parse_duration(what, value)?;
    if d.is_zero() {
        return Err(Error::Usage(format!(
            "{what}: {value:?} is zero; expected a duration greater than 0"
        )));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("-d", "250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("-d", "5s").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration("-d", "10m").unwrap(), Duration::from_secs(600));
        assert_eq!(parse_duration("-d", "2h").unwrap(), Duration::from_secs(7200));
        assert_eq!(parse_duration("-d", "1d").unwrap(), Duration::from_secs(86400));
        for bad in ["", "5", "-5s", "abc", "5 parsecs", "1.5"] {
            let e = parse_duration("--duration", bad).unwrap_err().to_string();
            assert!(e.contains("--duration") && e.contains("ms, s, m, h or d"), "{bad}: {e}");
        }
        assert!(
            parse_positive_duration("-i", "0s")
                .unwrap_err()
                .to_string()
                .contains("greater than 0")
        );
    }

    #[test]
    fn urls() {
        let u = parse_url("http://127.0.0.1:8080/a/b?x=1").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.host_header.as_str(), u.target.as_str()),
            ("127.0.0.1", 8080, "127.0.0.1:8080", "/a/b?x=1")
        );
        let u = parse_url("http://localhost").unwrap();
        assert_eq!(
            (u.port, u.host_header.as_str(), u.target.as_str()),
            (80, "localhost", "/")
        );
        let u = parse_url("http://[::1]:9000/").unwrap();
        assert_eq!((u.host.as_str(), u.host_header.as_str()), ("::1", "[::1]:9000"));
        for (bad, says) in [
            ("gopher://127.0.0.1/", "scheme"),
            ("ftp://127.0.0.1/", "scheme"),
            ("http://user:pw@127.0.0.1/", "user info"),
            ("127.0.0.1:80", "not valid"),
            ("not a url", "not valid"),
        ] {
            let e = parse_url(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
