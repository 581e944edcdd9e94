//! The command line: flags → a validated [`Plan`], and the three commands.
//!
//! Flag names are a contract (tests, docs, dashboards and benchmarks use
//! them). Numbers and durations are checked by clap with soakd's own
//! parsers, so a bad value is reported with the flag's name and what is
//! expected, exit code 2, before anything is opened. Cross-flag rules
//! (`-i` with `-r`, `--close` with `--pipeline`) are checked in
//! [`RunArgs::into_plan`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::config::kinds::{duration, positive_duration};
use crate::config::settings::WorkloadSettings;
use crate::engine::Reload;
use crate::plan::{self, Baseline, Plan, ReportDest, Threshold, WorkloadSpec, defaults};
use crate::verdict::{Options, Run, compare};
use crate::{Error, server};

mod demo;
mod target;

/// soakd: hold thousands of keep-alive connections (HTTP/1.1, HTTP/2,
/// gRPC, WebSocket) against a target for hours or days, measure latency
/// truthfully, classify every failure.
#[derive(Debug, Parser)]
#[command(name = "soakd", version, propagate_version = true, after_help = EXIT_CODES)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The exit-code contract, shown by `--help`.
const EXIT_CODES: &str = "Exit codes: 0 the run completed (target errors are results) and nothing failed; 1 an internal failure, or the report could not be written where asked (stderr names where it went instead); 2 bad input or a preflight failure (nothing was opened); 3 the run completed but a --threshold failed, --abort-on-fail stopped it, or it is worse than --baseline (soakd compare: something is worse).";

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Open and hold connections against a target and keep sending requests.
    #[command(after_help = EXIT_CODES)]
    Run(Box<RunArgs>),
    /// Run the built-in target: keep-alive HTTP/1.1 (answers `pong`),
    /// HTTP/2 with `--h2`, gRPC with `--grpc` (soakd.test.v1.Echo: Unary,
    /// Subscribe, Chat), WebSocket on `/ws`.
    Target(TargetArgs),
    /// Soak an embedded target: 1000 connections, one request per second
    /// each (with --h2 or --grpc, one per second on each of 10 streams),
    /// until Ctrl-C.
    Demo(DemoArgs),
    /// Summarise a running soakd from its metrics endpoint.
    Status(StatusArgs),
    /// Validate a config file and print the effective plan and the
    /// preflight verdict (nothing is opened).
    Check(CheckArgs),
    /// Compare two runs' JSON reports (and their HDR interval logs):
    /// better, same or worse per figure. Exit 0 when nothing is worse, 3
    /// when something is, 2 on bad input.
    #[command(after_help = EXIT_CODES)]
    Compare(CompareArgs),
    /// Judge a series of runs' reports, each against the one before it and
    /// against the first: p50, p99, p99.9, requests/s and error rate,
    /// better, same or worse; name the first run worse than its
    /// predecessor. Exit 3 when the newest run is worse than the one before
    /// it, 2 on bad input.
    #[command(after_help = EXIT_CODES)]
    History(HistoryArgs),
    /// Combine the JSON reports (and HDR logs) of a plan's shards into one.
    Merge(MergeArgs),
    /// Turn a JSON report into a self-contained HTML page with charts.
    Report(ReportArgs),
}

/// Flags of `soakd merge`.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The shards' JSON reports (`soakd run --shard I/N --report FILE`).
    #[arg(value_name = "REPORT", required = true)]
    pub reports: Vec<PathBuf>,
    /// Where to write the merged report ("-" = stdout).
    #[arg(long, value_name = "FILE")]
    pub out: String,
    /// The shards' HDR interval logs (`--hdr-log`), repeatable; needs
    /// --hdr-log-out.
    #[arg(long = "hdr-log", value_name = "IN")]
    pub hdr_logs: Vec<PathBuf>,
    /// Where to write the merged HDR interval log.
    #[arg(long, value_name = "FILE", requires = "hdr_logs")]
    pub hdr_log_out: Option<PathBuf>,
}

/// Flags of `soakd report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The JSON report a run wrote with --report.
    #[arg(value_name = "REPORT.json")]
    pub report: PathBuf,
    /// Write the HTML page to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: PathBuf,
    /// The same run's HDR interval log (--hdr-log): the percentile
    /// spectrum is drawn from it instead of the report's histogram.
    #[arg(long, value_name = "FILE")]
    pub hdr_log: Option<PathBuf>,
    /// A baseline report, overlaid dashed on the charts and the summary.
    #[arg(long, value_name = "REPORT.json")]
    pub baseline: Option<PathBuf>,
}

/// Flags of `soakd compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The baseline's JSON report (`soakd run --report`).
    pub baseline: PathBuf,
    /// The new run's JSON report.
    pub new: PathBuf,
    /// The baseline's HDR interval log (default: the one its report names).
    #[arg(long, value_name = "FILE")]
    pub baseline_hdr_log: Option<PathBuf>,
    /// The new run's HDR interval log (default: the one its report names).
    #[arg(long, value_name = "FILE")]
    pub hdr_log: Option<PathBuf>,
    /// The smallest relative change that counts.
    #[arg(long, value_name = "PCT", default_value = "10%", value_parser = tolerance)]
    pub tolerance: f64,
    /// Print the comparison as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `soakd history`.
#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// The runs' JSON reports (`soakd run --report`), or directories of
    /// them; put in start order whatever the order given.
    #[arg(value_name = "REPORT|DIR", required = true)]
    pub reports: Vec<PathBuf>,
    /// Also write a self-contained HTML page: each figure across the runs,
    /// the verdicts marked.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Print the history as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// The smallest relative change that counts.
    #[arg(long, value_name = "PCT", default_value = "10%", value_parser = tolerance)]
    pub tolerance: f64,
}

/// Flags of `soakd check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The TOML config file.
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// Check (and print) one shard's share of the plan.
    #[command(flatten)]
    pub shard: ShardArgs,
}

/// Flags of `soakd status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The daemon's metrics URL.
    #[arg(long, value_name = "URL", default_value_t = format!("http://{}/metrics", defaults::METRICS_LISTEN))]
    pub metrics: String,
}

/// A flag's help line with its default, taken from `plan::defaults`.
fn with_default(text: &str, value: impl std::fmt::Display) -> String {
    format!("{text} [default: {value}]")
}

fn threshold(v: &str) -> Result<Threshold, String> {
    Threshold::parse("threshold", v).map_err(|e| e.to_string())
}

fn tolerance(v: &str) -> Result<f64, String> {
    plan::parse_tolerance("tolerance", v).map_err(|e| e.to_string())
}

/// A listen address or `off`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Listen(pub Option<SocketAddr>);

fn metrics_addr(v: &str) -> Result<Listen, String> {
    if v == "off" {
        return Ok(Listen(None));
    }
    v.parse()
        .map(|a| Listen(Some(a)))
        .map_err(|_| "expected ADDRESS:PORT (e.g. 127.0.0.1:9469) or \"off\"".into())
}

/// Flags of `soakd run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Target URL, http:// or https://, e.g. http://127.0.0.1:8080/
    pub url: Option<String>,
    /// Run the workloads of a TOML config file (see docs/config.md); flags
    /// for globals (-t, -d, -n, --report, --metrics-listen, --hdr-log)
    /// override the file.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The workload: connections, pace, request, timeouts, churn, TLS
    /// (declared once in `config::settings`, the same as a file's keys).
    #[command(flatten)]
    pub workload: WorkloadSettings,
    /// A weighted mix of requests, one block per request: `[WEIGHT] METHOD
    /// URL-or-path`, `Header: value` lines, `@body-file`; blank line
    /// between (see docs/config.md). The URL is then the origin.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["body", "body_file", "method"])]
    pub requests_file: Option<PathBuf>,
    /// Stop after DUR (default: until SIGINT/SIGTERM).
    #[arg(short = 'd', long, value_name = "DUR", value_parser = positive_duration, allow_hyphen_values = true)]
    pub duration: Option<Duration>,
    /// Stop after N completed requests.
    #[arg(short = 'n', long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..), allow_hyphen_values = true)]
    pub requests: Option<u64>,
    /// Worker threads (default: available CPUs).
    #[arg(short = 't', long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024), allow_hyphen_values = true)]
    pub threads: Option<u16>,
    /// Write the final JSON report to FILE ("-" = stdout).
    #[arg(long, value_name = "FILE")]
    pub report: Option<String>,
    /// Prometheus endpoint address, or "off".
    #[arg(help = with_default("Prometheus endpoint address, or \"off\"", defaults::METRICS_LISTEN), long, value_name = "ADDR", value_parser = metrics_addr)]
    pub metrics_listen: Option<Listen>,
    /// Write latency as an HdrHistogram interval log (one interval per
    /// --hdr-log-interval, tagged by workload).
    #[arg(long, value_name = "FILE")]
    pub hdr_log: Option<PathBuf>,
    /// Length of one --hdr-log interval (short ones give `soakd compare`
    /// more samples in a short run).
    #[arg(help = with_default("Length of one --hdr-log interval (shorter: more samples for `soakd compare`)", humantime::format_duration(defaults::HDR_LOG_INTERVAL)), long, value_name = "DUR", value_parser = positive_duration, allow_hyphen_values = true)]
    pub hdr_log_interval: Option<Duration>,
    /// A pass/fail condition on the run's figures, e.g. "p99<50ms",
    /// "error_rate<=0.1%", "rps>=900", "open_min>=1000" (repeatable). Any
    /// failed threshold makes the exit code 3. Metrics: p50 p90 p99 p999
    /// max mean lag_p99 tls_handshake_p99 error_rate errors rps open_min,
    /// and on the run's outages outages outage_max recovery_max downtime.
    #[arg(long = "threshold", value_name = "EXPR", value_parser = threshold, allow_hyphen_values = true)]
    pub thresholds: Vec<Threshold>,
    /// The live threshold gauges (soakd_threshold_passing) and
    /// --abort-on-fail judge the last DUR (default: the whole run).
    #[arg(long, value_name = "DUR", value_parser = positive_duration, allow_hyphen_values = true)]
    pub threshold_window: Option<Duration>,
    /// Stop the run early (draining as on SIGTERM) once a threshold has
    /// failed continuously for DUR; the report says why, exit code 3.
    #[arg(long, value_name = "DUR", value_parser = positive_duration, allow_hyphen_values = true)]
    pub abort_on_fail: Option<Duration>,
    /// Compare with this earlier run's JSON report: every
    /// --baseline-window while the run goes (soakd_baseline_* metrics,
    /// --abort-on-fail) and as a whole at the end (as `soakd compare`
    /// does); something worse at the end makes the exit code 3.
    #[arg(long, value_name = "REPORT")]
    pub baseline: Option<PathBuf>,
    /// The baseline's HDR interval log (default: the one its report names).
    #[arg(long, value_name = "FILE")]
    pub baseline_hdr_log: Option<PathBuf>,
    /// With --baseline: the smallest relative change that counts.
    #[arg(help = with_default("With --baseline: the smallest relative change that counts", format!("{}%", defaults::TOLERANCE * 100.0)), long, value_name = "PCT", value_parser = tolerance)]
    pub tolerance: Option<f64>,
    /// With --baseline: how much of the run each live verdict judges.
    #[arg(help = with_default("With --baseline: how much of the run each live verdict (soakd_baseline_verdict) judges", humantime::format_duration(defaults::BASELINE_WINDOW)), long, value_name = "DUR", value_parser = positive_duration, allow_hyphen_values = true)]
    pub baseline_window: Option<Duration>,
    /// Write the self-contained HTML report (charts over time, percentile
    /// spectrum) to FILE at the end of the run.
    #[arg(long, value_name = "FILE")]
    pub html_report: Option<PathBuf>,
    /// After the run, keep serving the final metrics for DUR so Prometheus
    /// scrapes the final counters (e.g. 2 × the scrape interval).
    #[arg(long, value_name = "DUR", default_value = "0s", value_parser = duration, allow_hyphen_values = true)]
    pub metrics_linger: Duration,
    /// Sharding: which share of the plan this process runs.
    #[command(flatten)]
    pub shard: ShardArgs,
    /// Run the plan as N processes on this host (shards 0/N to N-1/N, each
    /// with its own slice of the source addresses when there are any, its
    /// metrics on --metrics-listen's port + I, its threads its part of the
    /// CPUs), then merge their reports into one (--report; the shards' are
    /// kept in REPORT.shards/ with a Prometheus file_sd targets.json). For
    /// more connections than one process's open-file limit allows.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024), allow_hyphen_values = true, conflicts_with = "shard")]
    pub processes: Option<u16>,
    /// Checkpoint the run to FILE (atomically) every
    /// --checkpoint-interval; when FILE exists and holds this plan's run,
    /// continue that run instead of starting over (docs/operating.md).
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// How often --state is written.
    #[arg(help = with_default("How often --state is written", humantime::format_duration(defaults::CHECKPOINT_INTERVAL)), long, value_name = "DUR", value_parser = positive_duration, allow_hyphen_values = true)]
    pub checkpoint_interval: Option<Duration>,
    /// With --state: move an existing state file aside (FILE.old-UNIXTIME)
    /// and start a new soak.
    #[arg(long)]
    pub fresh: bool,
    /// Outages and events: how outages are found, commands run at a time
    /// of the run, events marked from outside.
    #[command(flatten)]
    pub disruptions: crate::config::DisruptionArgs,
    /// The server's own side: its metrics scraped or queried, trended and
    /// judged.
    #[command(flatten)]
    pub watch: crate::config::WatchArgs,
}

/// `--shard` and `--shard-sources`, shared by `run` and `check`.
#[derive(Debug, Args)]
pub struct ShardArgs {
    /// Run share I of N of the plan (0-based): connections, rate, ramp and
    /// -n split so the N shares add up to the plan, each slot at its place
    /// in the whole plan's schedule. `auto/N` takes I from
    /// JOB_COMPLETION_INDEX (a Kubernetes Indexed Job). Also SOAKD_SHARD.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<String>,
    /// With --shard: shard I takes its own disjoint slice of the source
    /// addresses (several shards on one host).
    #[arg(long)]
    pub shard_sources: bool,
}

pub use crate::plan::shard::SHARD_ENV;

impl ShardArgs {
    /// The shard from `--shard`, else from `SOAKD_SHARD`, with the name
    /// of where it came from; `None` when neither is given.
    fn resolve(&self) -> Result<Option<(plan::Shard, String)>, Error> {
        let (what, value) = match (&self.shard, std::env::var(SHARD_ENV)) {
            (Some(v), _) => ("--shard".to_string(), v.clone()),
            (None, Ok(v)) if !v.is_empty() => (SHARD_ENV.to_string(), v),
            (None, _) => return Ok(None),
        };
        let job = std::env::var(plan::shard::JOB_INDEX_ENV).ok();
        let shard = plan::Shard::parse(&what, &value, job.as_deref())?;
        Ok(Some((shard, what)))
    }
}

impl RunArgs {
    /// Validates the flags into a plan (resolving the URL, reading the body
    /// file, rendering the request).
    pub fn into_plan(self) -> Result<Plan, Error> {
        self.into_run().map(|(plan, _)| plan)
    }

    /// The plan, and with `--config` the closure SIGHUP reloads it with
    /// (the same file and the same overriding flags).
    pub(crate) fn into_run(self) -> Result<(Plan, Option<Reload>), Error> {
        if let Some(path) = self.config.clone() {
            return self.into_config_plan(path);
        }
        let Some(url) = self.url.clone() else {
            return Err(Error::Usage(
                "soakd run needs a target URL, e.g. `soakd run http://127.0.0.1:8080/ -c 1000 -i 1s`".into(),
            ));
        };
        let requests = match &self.requests_file {
            None => Vec::new(),
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    Error::Usage(format!(
                        "--requests-file {}: cannot read it ({e}); give a readable file",
                        path.display()
                    ))
                })?;
                crate::plan::mix::parse_requests_file(path, &text)?
            }
        };
        let mut spec = WorkloadSpec {
            url,
            model: self.workload.model(),
            requests,
            ..WorkloadSpec::default()
        };
        self.workload.clone().apply(&mut spec);
        let workload = spec.build(&|k| match k {
            "url" => String::new(),
            other => format!("--{}", crate::config::settings::flag_of(other)),
        })?;
        let (outages, events) = self.disruptions.plans(self.duration)?;
        let plan = Plan {
            workloads: vec![workload],
            threads: self.threads.map_or_else(defaults::threads, |t| t as usize),
            duration: self.duration,
            max_requests: self.requests,
            report: self.report.as_deref().map(ReportDest::parse),
            metrics_listen: self.metrics_listen.map_or(Some(defaults::METRICS_LISTEN), |l| l.0),
            drain_timeout: defaults::DRAIN_TIMEOUT,
            hdr_log: self.hdr_log.clone(),
            metrics_linger: self.metrics_linger,
            hdr_log_interval: self.hdr_log_interval.unwrap_or(defaults::HDR_LOG_INTERVAL),
            thresholds: self.thresholds.clone(),
            threshold_window: self.threshold_window,
            abort_on_fail: self.abort_on_fail,
            baseline: self.baseline()?,
            state: plan::StateFile::of(self.state.clone(), self.checkpoint_interval, self.fresh)?,
            shard: plan::Shard::WHOLE,
            shard_sources: false,
            outages,
            events,
            watch: self.watch.plan()?,
        };
        let (shard, from) = self.shard.resolve()?.unwrap_or((plan::Shard::WHOLE, "--shard".into()));
        let plan = plan::shard::apply(plan, shard, self.shard.shard_sources, &from)?;
        plan.check_thresholds("--threshold")?;
        Ok((plan, None))
    }

    /// `--baseline` and its companions.
    fn baseline(&self) -> Result<Option<Baseline>, Error> {
        Baseline::of(
            self.baseline.clone(),
            self.baseline_hdr_log.clone(),
            self.tolerance,
            self.baseline_window,
        )
    }
}

impl RunArgs {
    /// With `--config`: the file's workloads, the flags' globals. A flag
    /// that describes a workload is refused rather than silently ignored.
    fn into_config_plan(self, path: PathBuf) -> Result<(Plan, Option<Reload>), Error> {
        let workload_flag = match (&self.url, &self.requests_file) {
            (Some(_), _) => Some("URL"),
            (None, Some(_)) => Some("--requests-file"),
            (None, None) => self.workload.first_given(),
        };
        if let Some(flag) = workload_flag {
            return Err(Error::Usage(format!(
                "{flag} describes a workload, but --config {} defines the workloads; set it in the file's [[workload]] table",
                path.display()
            )));
        }
        let over = crate::config::Overrides {
            metrics_listen: self.metrics_listen.map(|l| l.0),
            threads: self.threads.map(|t| t as usize),
            report: self.report.clone(),
            hdr_log: self.hdr_log.clone(),
            duration: self.duration,
            requests: self.requests,
            metrics_linger: (!self.metrics_linger.is_zero()).then_some(self.metrics_linger),
            hdr_log_interval: self.hdr_log_interval,
            thresholds: (!self.thresholds.is_empty()).then(|| self.thresholds.clone()),
            threshold_window: self.threshold_window,
            abort_on_fail: self.abort_on_fail,
            baseline: self.baseline.clone(),
            baseline_hdr_log: self.baseline_hdr_log.clone(),
            tolerance: self.tolerance,
            baseline_window: self.baseline_window,
            shard: self.shard.resolve()?,
            shard_sources: self.shard.shard_sources,
            state: self.state.clone(),
            checkpoint_interval: self.checkpoint_interval,
            fresh: self.fresh,
            disruptions: self.disruptions.clone(),
            watch: self.watch.clone(),
        };
        let plan = crate::config::load(&path, over.clone())?;
        let reload: Reload = Arc::new(move || crate::config::load(&path, over.clone()));
        Ok((plan, Some(reload)))
    }
}

/// Flags of `soakd target`.
#[derive(Debug, Args)]
pub struct TargetArgs {
    /// Address to listen on (port 0 picks a free port; the bound address is
    /// printed on stdout as `listening on ADDR`).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Server threads.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256), allow_hyphen_values = true)]
    pub threads: u16,
    /// Delay before each response.
    #[arg(long, value_name = "DUR", default_value = "0s", value_parser = duration, allow_hyphen_values = true)]
    pub delay: Duration,
    /// Misbehave on purpose (the help text lists the modes).
    #[arg(long, value_name = "MODE[@N]", help = server::fault_help())]
    pub fault: Option<server::Fault>,
    /// Grow resident memory at RATE (e.g. 1MiB/min): pages touched and
    /// kept, as a leaking server would (for trend verdicts and demos).
    #[arg(long, value_name = "RATE", value_parser = server::parse_leak)]
    pub leak: Option<f64>,
    /// Open and keep descriptors at RATE (e.g. 60/min).
    #[arg(long, value_name = "RATE", value_parser = server::parse_fd_leak)]
    pub fd_leak: Option<f64>,
    /// Grow the response delay by RATE of its starting value (e.g. 5%/min;
    /// needs --delay).
    #[arg(long, value_name = "RATE", value_parser = server::parse_slowdown)]
    pub slowdown: Option<f64>,
    /// Serve HTTPS with a certificate made at start (its PEM path and
    /// SHA-256 fingerprint are printed before `listening on`).
    #[arg(long)]
    pub tls: bool,
    /// Serve HTTPS with this PEM certificate chain (with --tls-key).
    #[arg(long, value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert, PEM.
    #[arg(long, value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// Require client certificates signed by the CAs in this PEM file
    /// (mutual TLS); a client without one fails its handshake.
    #[arg(long, value_name = "FILE")]
    pub tls_client_ca: Option<PathBuf>,
    /// Speak HTTP/2 as well: h2c with prior knowledge on the plain port,
    /// h2 by ALPN (h2,http/1.1) with --tls; HTTP/1.1 clients are served as
    /// before. Needed by the HTTP/2 faults.
    #[arg(long)]
    pub h2: bool,
    /// Serve HTTP/3 as well (needs --tls): QUIC on UDP at the same address
    /// and port as the TCP listener, ALPN h3, the same routes as HTTP/2;
    /// TCP clients are served as before. Of the faults, goaway@N and
    /// never-answer[@N] act on it (others are refused with --h3).
    #[arg(long)]
    pub h3: bool,
    /// Serve the test gRPC service soakd.test.v1.Echo of
    /// tests/proto/echo.proto on HTTP/2 (implies --h2): Unary echoes the
    /// request; Subscribe (server streaming) sends `count` replies (0:
    /// until the client ends the call) every `interval_ms`; Chat
    /// (bidirectional) echoes each message as it arrives. Other methods
    /// answer UNIMPLEMENTED.
    #[arg(long)]
    pub grpc: bool,
    /// gRPC: every N-th call ends with CODE (a label such as unavailable,
    /// or its number) as a trailers-only response.
    #[arg(long, value_name = "CODE[@N]", value_parser = server::parse_grpc_status, requires = "grpc")]
    pub grpc_status: Option<(crate::wire::grpc::Code, u32)>,
    /// gRPC: age each connection out after DUR, as gRPC servers do
    /// (GOAWAY, then the close after --max-connection-age-grace).
    #[arg(long, value_name = "DUR", value_parser = positive_duration, requires = "grpc", allow_hyphen_values = true)]
    pub max_connection_age: Option<Duration>,
    /// gRPC: from an ageing GOAWAY to the close.
    #[arg(long, value_name = "DUR", default_value = "1s", value_parser = duration, allow_hyphen_values = true)]
    pub max_connection_age_grace: Duration,
    /// Share the address with other `soakd target --reuse-port` processes
    /// (SO_REUSEPORT: the kernel spreads the connections over them), so
    /// that several processes, each under its own open-file limit, serve
    /// one address.
    #[arg(long)]
    pub reuse_port: bool,
    /// Restarts and brownouts on a schedule, for outage tests and demos.
    #[command(flatten)]
    pub outage: TargetOutageArgs,
}

/// `soakd target`'s scheduled disruptions (see `server::OutageSchedule`).
#[derive(Debug, Args)]
pub struct TargetOutageArgs {
    /// Every DUR (first after DUR), close the listener and every
    /// connection, as a stopped server does, for --down-for.
    #[arg(long, value_name = "DUR", value_parser = positive_duration, allow_hyphen_values = true)]
    pub restart_every: Option<Duration>,
    /// How long each restart stays down.
    #[arg(long, value_name = "DUR", default_value = "0s", value_parser = duration, allow_hyphen_values = true)]
    pub down_for: Duration,
    /// Every DUR (first after DUR), delay every HTTP/1.1 response by
    /// --brownout-delay more, for --brownout-for.
    #[arg(long, value_name = "DUR", value_parser = positive_duration, allow_hyphen_values = true)]
    pub brownout_every: Option<Duration>,
    /// How long each brownout lasts.
    #[arg(long, value_name = "DUR", default_value = "0s", value_parser = duration, allow_hyphen_values = true)]
    pub brownout_for: Duration,
    /// The extra delay of each response during a brownout.
    #[arg(long, value_name = "DUR", default_value = "0s", value_parser = duration, allow_hyphen_values = true)]
    pub brownout_delay: Duration,
}

impl TargetOutageArgs {
    fn schedule(&self) -> server::OutageSchedule {
        server::OutageSchedule {
            restart_every: self.restart_every,
            down_for: self.down_for,
            brownout_every: self.brownout_every,
            brownout_for: self.brownout_for,
            brownout_delay: self.brownout_delay,
            epoch: None,
        }
    }
}

/// Flags of `soakd demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Connections to hold.
    #[arg(short = 'c', long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..), allow_hyphen_values = true)]
    pub connections: u32,
    /// Interval between requests on each connection.
    #[arg(short = 'i', long, value_name = "DUR", default_value = "1s", value_parser = positive_duration, allow_hyphen_values = true)]
    pub interval: Duration,
    /// Stop after DUR (default: until Ctrl-C).
    #[arg(short = 'd', long, value_name = "DUR", value_parser = positive_duration, allow_hyphen_values = true)]
    pub duration: Option<Duration>,
    /// Write the final JSON report to FILE ("-" = stdout).
    #[arg(long, value_name = "FILE")]
    pub report: Option<String>,
    /// Prometheus endpoint address, or "off".
    #[arg(help = with_default("Prometheus endpoint address, or \"off\"", defaults::METRICS_LISTEN), long, value_name = "ADDR", value_parser = metrics_addr)]
    pub metrics_listen: Option<Listen>,
    /// Soak the target over HTTPS (a certificate it makes at start, which
    /// the run trusts through --cacert).
    #[arg(long)]
    pub tls: bool,
    /// Soak the target's WebSocket echo (`/ws`) instead: one message per
    /// interval on each socket, timed to its echo (wss:// with --tls).
    #[arg(long, conflicts_with = "h2")]
    pub ws: bool,
    /// Soak the target over HTTP/2 (h2c with prior knowledge; h2 by ALPN
    /// with --tls), ten streams per connection, each stream paced by
    /// --interval (ten requests per interval on each connection).
    #[arg(long)]
    pub h2: bool,
    /// Soak the target's gRPC service instead: unary calls of
    /// soakd.test.v1.Echo/Unary, 10 streams per connection, each paced by
    /// --interval (h2c; h2 by ALPN with --tls).
    #[arg(long, conflicts_with_all = ["ws", "h2"])]
    pub grpc: bool,
    /// Soak the target over HTTP/3 instead (QUIC, so always over TLS: a
    /// certificate the target makes at start, trusted through --cacert),
    /// ten streams per connection, each paced by --interval.
    #[arg(long, conflicts_with_all = ["ws", "h2", "grpc"])]
    pub h3: bool,
}

/// Runs a parsed command line; `main` maps the error to an exit code.
pub fn execute(cli: Cli) -> Result<(), Error> {
    match cli.command {
        Command::Run(mut args) => {
            let html = args.html_report.take();
            let shard_given = args.shard.resolve()?.map(|(_, from)| from);
            // Before the plan is built: a shard's default threads are its
            // part of the CPUs.
            let processes = crate::daemon::processes::Role::of(args.processes, shard_given.as_deref())?;
            let (plan, reload) = args.into_run()?;
            match processes {
                None => crate::daemon::run_to_end(plan, reload, html),
                Some(role) => role.run(plan, reload, html),
            }
        }
        Command::Compare(args) => {
            let base = Run::load(
                &args.baseline,
                args.baseline_hdr_log.as_deref(),
                "BASELINE",
                "--baseline-hdr-log",
            )?;
            let new = Run::load(&args.new, args.hdr_log.as_deref(), "NEW", "--hdr-log")?;
            let opts = Options {
                tolerance: args.tolerance,
                ..Options::default()
            };
            let c = compare(&base, &new, &opts);
            if c.rows.is_empty() {
                return Err(Error::Usage(format!(
                    "{} and {} have no workload in common ({}); compare reports of the same soak",
                    c.baseline,
                    c.new,
                    c.unmatched.join(", ")
                )));
            }
            if args.json {
                println!("{}", c.to_json());
            } else {
                print!("{}", c.text(&opts));
            }
            c.verdict()
        }
        Command::Report(args) => {
            crate::html::check_writable(&args.html, "--html")?;
            let report = crate::report::read(&args.report, "REPORT")?;
            let baseline = args
                .baseline
                .as_deref()
                .map(|p| crate::report::read(p, "--baseline"))
                .transpose()?;
            let spectrum = args.hdr_log.as_deref().map(crate::html::spectrum_of_log).transpose()?;
            // With a baseline, the page shows `soakd compare`'s verdicts.
            let comparison = match &args.baseline {
                Some(b) => {
                    let base = Run::load(b, None, "--baseline", "--baseline's hdr_log")?;
                    let new = Run::load(&args.report, args.hdr_log.as_deref(), "REPORT", "--hdr-log")?;
                    Some(compare(&base, &new, &Options::default()))
                }
                None => None,
            };
            let page = crate::html::render(&crate::html::Inputs {
                report: &report,
                baseline: baseline.as_ref(),
                spectrum,
                verdicts: comparison.as_ref().map(|c| c.rows.as_slice()),
            });
            crate::html::write(&args.html, &page)
        }
        Command::History(args) => {
            if let Some(p) = &args.html {
                crate::html::check_writable(p, "--html")?;
            }
            let runs = crate::verdict::history::load(&args.reports)?;
            let opts = Options {
                tolerance: args.tolerance,
                ..Options::default()
            };
            let h = crate::verdict::history::history(runs, &opts);
            if args.json {
                println!("{}", h.to_json());
            } else {
                print!("{}", h.text());
            }
            if let Some(p) = &args.html {
                crate::html::write(p, &crate::html::history::render(&h))?;
                eprintln!("soakd history: HTML page written to {}", p.display());
            }
            h.verdict()
        }
        Command::Target(args) => target::serve_target(args),
        Command::Demo(args) => demo::demo(args),
        Command::Check(args) => {
            let over = crate::config::Overrides {
                shard: args.shard.resolve()?,
                shard_sources: args.shard.shard_sources,
                ..Default::default()
            };
            let plan = crate::config::load(&args.config, over)?;
            print!("{}", crate::plan::describe(&plan));
            println!("{}", crate::preflight::verdict(&plan)?);
            Ok(())
        }
        Command::Merge(args) => {
            if !args.hdr_logs.is_empty() && args.hdr_log_out.is_none() {
                return Err(Error::Usage(
                    "--hdr-log gives logs to merge; say where the merged log goes with --hdr-log-out FILE".into(),
                ));
            }
            let report = crate::merge::merge_files(&args.reports)?;
            if let Some(out) = &args.hdr_log_out {
                let n = crate::merge::merge_hdr_logs(&args.hdr_logs, out)?;
                eprintln!(
                    "soakd merge: {} HDR logs into {} ({n} intervals)",
                    args.hdr_logs.len(),
                    out.display()
                );
            }
            crate::daemon::output(&report, Some(&ReportDest::parse(&args.out)))
        }
        Command::Status(args) => {
            let summary = crate::statuscmd::status(&args.metrics, Duration::from_secs(1))?;
            print!("{summary}");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::LoadModel;

    fn parse(args: &[&str]) -> Result<Plan, String> {
        let mut argv = vec!["soakd", "run"];
        argv.extend_from_slice(args);
        let cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
        match cli.command {
            Command::Run(r) => r.into_plan().map_err(|e| e.to_string()),
            _ => unreachable!(),
        }
    }

    #[test]
    fn models() {
        let p = parse(&["http://127.0.0.1:1/", "-c", "10"]).unwrap();
        assert_eq!(p.workloads[0].model, LoadModel::Closed);
        assert_eq!(p.workloads[0].name, "127.0.0.1:1");
        let p = parse(&["http://127.0.0.1:1/", "-i", "250ms"]).unwrap();
        assert_eq!(p.workloads[0].model, LoadModel::Interval(Duration::from_millis(250)));
        let p = parse(&["http://127.0.0.1:1/", "-r", "1500", "-c", "300"]).unwrap();
        assert_eq!(
            p.workloads[0].model.per_connection_interval(300),
            Some(Duration::from_millis(200))
        );
        let p = parse(&["http://127.0.0.1:1/", "--metrics-listen", "off"]).unwrap();
        assert_eq!(p.metrics_listen, None);
    }

    #[test]
    fn verdict_flags() {
        let p = parse(&[
            "http://127.0.0.1:1/",
            "--threshold",
            "p99 < 50ms",
            "--threshold",
            "open_min>=100",
            "--threshold-window",
            "1m",
            "--abort-on-fail",
            "2m",
            "--hdr-log-interval",
            "500ms",
            "--baseline",
            "base.json",
            "--tolerance",
            "5%",
        ])
        .unwrap();
        let texts: Vec<&str> = p.thresholds.iter().map(|t| t.text.as_str()).collect();
        assert_eq!(texts, ["p99<50ms", "open_min>=100"]);
        assert_eq!(p.threshold_window, Some(Duration::from_secs(60)));
        assert_eq!(p.abort_on_fail, Some(Duration::from_secs(120)));
        assert_eq!(p.hdr_log_interval, Duration::from_millis(500));
        let b = p.baseline.unwrap();
        assert_eq!((b.report.to_str(), b.tolerance), (Some("base.json"), 0.05));
        assert_eq!(b.window, defaults::BASELINE_WINDOW);
        let p = parse(&["http://127.0.0.1:1/"]).unwrap();
        assert_eq!(p.hdr_log_interval, defaults::HDR_LOG_INTERVAL);
        assert!(p.thresholds.is_empty() && p.baseline.is_none());
    }

    #[test]
    fn bad_input_is_named() {
        for (args, says) in [
            (
                &["http://127.0.0.1:1/", "-i", "1s", "-r", "5"][..],
                "cannot be used with",
            ),
            (&["http://127.0.0.1:1/", "-c", "0"][..], "--connections"),
            (&["http://127.0.0.1:1/", "-d", "-5s"][..], ""),
            (&["http://127.0.0.1:1/", "-d", "5"][..], "ms, s, m, h or d"),
            (&["http://127.0.0.1:1/", "-r", "0"][..], "greater than 0"),
            (&["http://127.0.0.1:1/", "-H", "nocolon"][..], "Name: value"),
            (&["http://127.0.0.1:1/", "--close", "--pipeline", "2"][..], "--close"),
            (
                &["http://127.0.0.1:1/", "--body-file", "/nonexistent/x"][..],
                "--body-file",
            ),
            (&["http://127.0.0.1:1/", "--insecure"][..], "not an https:// URL"),
            (
                &["https://127.0.0.1:1/", "--cert", "/nonexistent/c.pem"][..],
                "--cert needs --key",
            ),
            (
                &["https://127.0.0.1:1/", "--tls-min", "1.3", "--tls-max", "1.2"][..],
                "must not exceed",
            ),
            (
                &["https://127.0.0.1:1/", "--cacert", "/nonexistent/ca.pem"][..],
                "--cacert",
            ),
            (&[][..], "needs a target URL"),
            (&["http://127.0.0.1:1/", "--threshold", "p99<"][..], "no value"),
            (
                &["http://127.0.0.1:1/", "--threshold", "tls_handshake_p99<1s"][..],
                "no workload speaks TLS",
            ),
            (&["http://127.0.0.1:1/", "--tolerance", "5%"][..], "--baseline"),
            (&["http://127.0.0.1:1/", "--abort-on-fail", "0s"][..], "greater than 0"),
            (
                &["http://127.0.0.1:1/", "--abort-on-fail", "1m"][..],
                "neither a threshold nor a baseline is given",
            ),
            (
                &["http://127.0.0.1:1/", "--baseline-window", "1m"][..],
                "--baseline-window / baseline_window goes with a baseline",
            ),
            (
                &["http://127.0.0.1:1/", "--baseline-window", "0s"][..],
                "greater than 0",
            ),
        ] {
            let e = parse(args).unwrap_err();
            assert!(e.contains(says), "{args:?}: {e}");
        }
    }
}
