//! The command line: flags → a validated [`Plan`], and the three commands.
//!
//! Flag names are a contract (tests, docs, dashboards and benchmarks use
//! them). Numbers and durations are checked by clap with soakd's own
//! parsers, so a bad value is reported with the flag's name and what is
//! expected, exit code 2, before anything is opened. Cross-flag rules
//! (`-i` with `-r`, `--close` with `--pipeline`) are checked in
//! [`RunArgs::into_plan`].

use std::io::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::http::{RequestSpec, render_request};
use crate::plan::{self, LoadModel, Plan, ReportDest, Target, Workload};
use crate::report::Report;
use crate::{Error, target};

/// soakd: hold thousands of HTTP/1.1 keep-alive connections against a
/// target for hours or days, measure latency truthfully, classify every
/// failure.
#[derive(Debug, Parser)]
#[command(name = "soakd", version, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Open and hold connections against a target and keep sending requests.
    Run(Box<RunArgs>),
    /// Run the built-in keep-alive HTTP/1.1 target (answers `pong`).
    Target(TargetArgs),
    /// Soak an embedded target: 1000 connections, one request per second
    /// each, until Ctrl-C.
    Demo(DemoArgs),
    /// Summarise a running soakd from its metrics endpoint.
    Status(StatusArgs),
}

/// Flags of `soakd status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The daemon's metrics URL.
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:9469/metrics")]
    pub metrics: String,
}

fn duration(v: &str) -> Result<Duration, String> {
    if v.trim_start().starts_with('-') {
        return Err("durations cannot be negative; expected e.g. 250ms, 5s, 10m".into());
    }
    plan::parse_duration("duration", v)
        .map_err(|_| "expected a duration with a unit: ms, s, m, h or d (e.g. 250ms, 5s, 10m)".into())
}

fn positive_duration(v: &str) -> Result<Duration, String> {
    let d = duration(v)?;
    if d.is_zero() {
        Err("expected a duration greater than 0".into())
    } else {
        Ok(d)
    }
}

fn rate(v: &str) -> Result<f64, String> {
    match v.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err("expected a number of requests per second greater than 0 (e.g. 500 or 0.5)".into()),
    }
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

fn header(v: &str) -> Result<(String, String), String> {
    let Some((name, value)) = v.split_once(':') else {
        return Err("expected \"Name: value\"".into());
    };
    let name = name.trim();
    let is_token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() || !name.chars().all(is_token) {
        return Err(format!("{name:?} is not a valid header name; expected \"Name: value\""));
    }
    if value.contains(['\r', '\n']) {
        return Err("header values cannot contain line breaks".into());
    }
    Ok((name.to_string(), value.trim().to_string()))
}

fn method(v: &str) -> Result<String, String> {
    if !v.is_empty() && v.chars().all(|c| c.is_ascii_uppercase()) {
        Ok(v.to_string())
    } else {
        Err("expected an upper-case HTTP method such as GET, POST or HEAD".into())
    }
}

/// Flags of `soakd run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Target URL (http:// only), e.g. http://127.0.0.1:8080/
    pub url: Option<String>,
    /// Connections to open and hold.
    #[arg(short = 'c', long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..), allow_hyphen_values = true)]
    pub connections: u32,
    /// At most N new connections per second while ramping up.
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..), allow_hyphen_values = true)]
    pub ramp: u32,
    /// Paced: each connection sends one request every DUR (e.g. 5s, 250ms).
    #[arg(short = 'i', long, value_name = "DUR", value_parser = positive_duration, conflicts_with = "rate", allow_hyphen_values = true)]
    pub interval: Option<Duration>,
    /// Open loop: N requests/s in total, spread evenly over the connections.
    #[arg(short = 'r', long, value_name = "N", value_parser = rate, allow_hyphen_values = true)]
    pub rate: Option<f64>,
    /// Requests in flight per connection (HTTP/1.1 pipelining when > 1).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024), allow_hyphen_values = true)]
    pub pipeline: u16,
    /// One request per connection, then close (HTTP/1.0 style churn).
    #[arg(long, conflicts_with = "max_requests_per_conn")]
    pub close: bool,
    /// Stop after DUR (default: until SIGINT/SIGTERM).
    #[arg(short = 'd', long, value_name = "DUR", value_parser = positive_duration, allow_hyphen_values = true)]
    pub duration: Option<Duration>,
    /// Stop after N completed requests.
    #[arg(short = 'n', long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..), allow_hyphen_values = true)]
    pub requests: Option<u64>,
    /// Worker threads (default: available CPUs).
    #[arg(short = 't', long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024), allow_hyphen_values = true)]
    pub threads: Option<u16>,
    /// Request method.
    #[arg(short = 'm', long, value_name = "M", default_value = "GET", value_parser = method)]
    pub method: String,
    /// Extra request header "Name: value" (repeatable).
    #[arg(short = 'H', long = "header", value_name = "HEADER", value_parser = header)]
    pub headers: Vec<(String, String)>,
    /// Request body.
    #[arg(long, value_name = "STRING", conflicts_with = "body_file")]
    pub body: Option<String>,
    /// Request body read from FILE.
    #[arg(long, value_name = "FILE")]
    pub body_file: Option<PathBuf>,
    /// Connect timeout.
    #[arg(long, value_name = "DUR", default_value = "5s", value_parser = positive_duration, allow_hyphen_values = true)]
    pub connect_timeout: Duration,
    /// Time a request may wait for its complete response.
    #[arg(long, value_name = "DUR", default_value = "30s", value_parser = positive_duration, allow_hyphen_values = true)]
    pub request_timeout: Duration,
    /// Local address to bind (repeatable); spreads connections over several
    /// addresses to go past the ephemeral-port limit per target.
    #[arg(long = "source-addr", value_name = "ADDR")]
    pub source_addrs: Vec<IpAddr>,
    /// Planned churn: close a connection after about N requests (±10%).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), allow_hyphen_values = true)]
    pub max_requests_per_conn: Option<u32>,
    /// Planned churn: close a connection after about DUR (±10%).
    #[arg(long, value_name = "DUR", value_parser = positive_duration, allow_hyphen_values = true)]
    pub max_conn_lifetime: Option<Duration>,
    /// Write the final JSON report to FILE ("-" = stdout).
    #[arg(long, value_name = "FILE")]
    pub report: Option<String>,
    /// Prometheus endpoint address, or "off".
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9469", value_parser = metrics_addr)]
    pub metrics_listen: Listen,
    /// PID of the server under test (repeatable, e.g. nginx master and
    /// workers): its memory, CPU and open files join the metrics.
    #[arg(long = "target-pid", value_name = "PID", value_parser = clap::value_parser!(u32).range(1..))]
    pub target_pids: Vec<u32>,
    /// Write latency as an HdrHistogram interval log (one interval per 10 s).
    #[arg(long, value_name = "FILE")]
    pub hdr_log: Option<PathBuf>,
    /// After the run, keep serving the final metrics for DUR so Prometheus
    /// scrapes the final counters (e.g. 2 × the scrape interval).
    #[arg(long, value_name = "DUR", default_value = "0s", value_parser = duration, allow_hyphen_values = true)]
    pub metrics_linger: Duration,
}

impl RunArgs {
    /// Validates the flags into a plan (resolving the URL, reading the body
    /// file, rendering the request).
    pub fn into_plan(self) -> Result<Plan, Error> {
        let Some(url) = self.url.as_deref() else {
            return Err(Error::Usage(
                "soakd run needs a target URL, e.g. `soakd run http://127.0.0.1:8080/ -c 1000 -i 1s`".into(),
            ));
        };
        let parsed = plan::parse_url(url)?;
        let addr = plan::resolve(&parsed, url)?;
        if self.close && self.pipeline > 1 {
            return Err(Error::Usage(format!(
                "--pipeline {} cannot be used with --close, which sends one request per connection",
                self.pipeline
            )));
        }
        let body = match (&self.body, &self.body_file) {
            (Some(b), _) => b.clone().into_bytes(),
            (None, Some(path)) => std::fs::read(path).map_err(|e| {
                Error::Usage(format!(
                    "--body-file {}: cannot read it ({e}); give a readable file",
                    path.display()
                ))
            })?,
            (None, None) => Vec::new(),
        };
        if self.method == "HEAD" && !body.is_empty() {
            return Err(Error::Usage(
                "--body with -m HEAD: a HEAD request cannot carry a body".into(),
            ));
        }
        let request = render_request(&RequestSpec {
            method: self.method.clone(),
            target: parsed.target.clone(),
            host: parsed.host_header.clone(),
            headers: self.headers,
            body,
            close: self.close,
        });
        let model = match (self.interval, self.rate) {
            (Some(i), _) => LoadModel::Interval(i),
            (None, Some(r)) => LoadModel::Rate(r),
            (None, None) => LoadModel::Closed,
        };
        let threads = match self.threads {
            Some(t) => t as usize,
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        let report = self.report.map(|r| {
            if r == "-" {
                ReportDest::Stdout
            } else {
                ReportDest::File(PathBuf::from(r))
            }
        });
        let name = if addr.is_ipv6() && !parsed.host.contains('.') && parsed.host.contains(':') {
            format!("[{}]:{}", parsed.host, parsed.port)
        } else {
            format!("{}:{}", parsed.host, parsed.port)
        };
        Ok(Plan {
            workloads: vec![Workload {
                name,
                target: Target {
                    url: url.to_string(),
                    addr,
                    request,
                    head: self.method == "HEAD",
                },
                connections: self.connections,
                ramp: self.ramp,
                model,
                pipeline: self.pipeline,
                close: self.close,
                connect_timeout: self.connect_timeout,
                request_timeout: self.request_timeout,
                source_addrs: self.source_addrs,
                max_requests_per_conn: self.max_requests_per_conn,
                max_conn_lifetime: self.max_conn_lifetime,
                target_pids: self.target_pids,
            }],
            threads,
            duration: self.duration,
            max_requests: self.requests,
            report,
            metrics_listen: self.metrics_listen.0,
            drain_timeout: Duration::from_secs(5),
            hdr_log: self.hdr_log,
            metrics_linger: self.metrics_linger,
        })
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
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9469", value_parser = metrics_addr)]
    pub metrics_listen: Listen,
}

/// Runs a parsed command line; `main` maps the error to an exit code.
pub fn execute(cli: Cli) -> Result<(), Error> {
    match cli.command {
        Command::Run(args) => {
            let plan = args.into_plan()?;
            let dest = plan.report.clone();
            let report = crate::run(plan)?;
            output(&report, dest.as_ref())
        }
        Command::Target(args) => serve_target(args),
        Command::Demo(args) => demo(args),
        Command::Status(args) => {
            let summary = crate::statuscmd::status(&args.metrics, Duration::from_secs(1))?;
            print!("{summary}");
            Ok(())
        }
    }
}

fn output(report: &Report, dest: Option<&ReportDest>) -> Result<(), Error> {
    eprint!("{}", report.summary());
    match dest {
        None => Ok(()),
        Some(ReportDest::Stdout) => {
            let mut out = std::io::stdout().lock();
            writeln!(out, "{}", report.to_json()).map_err(|e| Error::io("writing the report to stdout", e))
        }
        Some(ReportDest::File(path)) => std::fs::write(path, report.to_json() + "\n")
            .map_err(|e| Error::io(format!("writing the report to {}", path.display()), e)),
    }
}

fn serve_target(args: TargetArgs) -> Result<(), Error> {
    let handle = target::spawn(&target::TargetConfig {
        listen: args.listen,
        threads: args.threads as usize,
        delay: args.delay,
    })?;
    // Tests and scripts read this line to learn the port.
    println!("listening on {}", handle.local_addr());
    let _ = std::io::stdout().flush();
    let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM])
        .map_err(|e| Error::io("installing signal handlers", e))?;
    let _ = signals.forever().next();
    handle.stop();
    Ok(())
}

fn demo(args: DemoArgs) -> Result<(), Error> {
    let handle = target::spawn(&target::TargetConfig {
        listen: ([127, 0, 0, 1], 0).into(),
        threads: 1,
        delay: Duration::ZERO,
    })?;
    let url = format!("http://{}/", handle.local_addr());
    eprintln!(
        "soakd demo: built-in target on {url}; holding {} connections, one request every {} on each{}",
        args.connections,
        humantime::format_duration(args.interval),
        match args.duration {
            Some(d) => format!(", for {}", humantime::format_duration(d)),
            None => "; Ctrl-C to stop and see the report".into(),
        }
    );
    let mut argv = vec![
        "soakd".to_string(),
        "run".into(),
        url,
        "-c".into(),
        args.connections.to_string(),
    ];
    argv.extend(["-i".into(), humantime::format_duration(args.interval).to_string()]);
    argv.extend(["--ramp".into(), "1000".into()]);
    if let Some(d) = args.duration {
        argv.extend(["-d".into(), humantime::format_duration(d).to_string()]);
    }
    argv.extend([
        "--metrics-listen".into(),
        args.metrics_listen.0.map_or("off".into(), |a| a.to_string()),
    ]);
    // The demo is `soakd run` with fixed flags, so it exercises exactly
    // the code path operators use.
    let run = match Cli::try_parse_from(&argv).map(|c| c.command) {
        Ok(Command::Run(run)) => run,
        _ => return Err(Error::Internal("demo flags do not parse".into())),
    };
    let mut plan = run.into_plan()?;
    plan.report = args.report.map(|r| {
        if r == "-" {
            ReportDest::Stdout
        } else {
            ReportDest::File(PathBuf::from(r))
        }
    });
    let dest = plan.report.clone();
    let result = crate::run(plan);
    handle.stop();
    output(&result?, dest.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

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
            (&["https://127.0.0.1:1/"][..], "not supported yet"),
            (&[][..], "needs a target URL"),
        ] {
            let e = parse(args).unwrap_err();
            assert!(e.contains(says), "{args:?}: {e}");
        }
    }
}
