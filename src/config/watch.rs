//! The server watch's settings, from flags and from a file: where the
//! server's own figures are read (`--target-metrics`, `--prometheus`,
//! `--target-pidfile`, `--target-cgroup`, `--target-unit`), what is
//! watched (`--watch`, `[[watch]]`), how often, with which headers and
//! TLS. Run-wide, like the events: they sit beside the file's globals,
//! and a flag given next to `--config` replaces the file's key (`--watch`
//! replaces the file's `[[watch]]` list).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::Locator;
use super::kinds::{FileCx, Headers, Kind, help, positive_duration};
use crate::Error;
use crate::plan::defaults;
use crate::plan::tls::TlsSpec;
use crate::plan::watch::{GivenWatch, WatchGiven, WatchPlan, split_watch};

/// The watch flags of `soakd run`.
#[derive(Clone, Debug, Default, PartialEq, clap::Args)]
pub struct WatchArgs {
    /// Read the server's own Prometheus exposition (its /metrics, or an
    /// exporter's beside it: node, nginx, JVM) at URL every
    /// --target-metrics-interval; each --watch series is trended and
    /// judged as soakd's own figures are (repeatable; http:// or
    /// https://). Without --watch: rss=process_resident_memory_bytes and
    /// fds=process_open_fds where the endpoint has them.
    #[arg(long = "target-metrics", value_name = "URL")]
    pub target_metrics: Vec<String>,
    /// Ask this Prometheus server (its HTTP API, an instant query each
    /// --target-metrics-interval) for every --watch query: how a server in
    /// pods is seen. Each series of an answer is trended on its own.
    #[arg(long, value_name = "URL")]
    pub prometheus: Option<String>,
    /// NAME=SELECTOR with --target-metrics (a metric with optional label
    /// matchers, heap=jvm_memory_used_bytes{area="heap"}, or the rate of a
    /// counter, gc=rate(go_gc_duration_seconds_sum)); NAME=PROMQL with
    /// --prometheus. Thresholds judge it as slope(NAME), drift(NAME),
    /// max(NAME). Repeatable.
    #[arg(long = "watch", value_name = "NAME=EXPR", allow_hyphen_values = true)]
    pub watches: Vec<String>,
    /// How often every watch source is read.
    #[arg(long, value_name = "DUR", value_parser = positive_duration, allow_hyphen_values = true, help = help(
        "How often every watch source (--target-metrics, --prometheus, --target-pidfile, --target-cgroup) is read",
        Some(humantime::format_duration(defaults::WATCH_INTERVAL).to_string()),
    ))]
    pub target_metrics_interval: Option<Duration>,
    /// A header sent with every scrape and query, "Name: value"
    /// (repeatable; values are never printed).
    #[arg(long, value_name = "HEADER", value_parser = Headers::parser())]
    pub target_metrics_header: Vec<(String, String)>,
    /// Send "Authorization: Bearer TOKEN" with every scrape and query,
    /// TOKEN the first line of FILE, read before each (a rotating
    /// Kubernetes token); never printed.
    #[arg(long, value_name = "FILE")]
    pub target_metrics_bearer_file: Option<PathBuf>,
    /// PEM CA bundle that replaces the system's roots for https://
    /// --target-metrics and --prometheus URLs (repeatable).
    #[arg(long, value_name = "FILE")]
    pub target_metrics_cacert: Vec<PathBuf>,
    /// Do not verify the certificates of https:// --target-metrics and
    /// --prometheus URLs.
    #[arg(long)]
    pub target_metrics_insecure: bool,
    /// PEM client certificate for https:// --target-metrics and
    /// --prometheus URLs (with --target-metrics-key).
    #[arg(long, value_name = "FILE", requires = "target_metrics_key")]
    pub target_metrics_cert: Option<PathBuf>,
    /// The private key of --target-metrics-cert, PEM.
    #[arg(long, value_name = "FILE", requires = "target_metrics_cert")]
    pub target_metrics_key: Option<PathBuf>,
    /// The server on this host by its pid file, followed across restarts
    /// (a new PID in the file is a restart): its rss, fds and cpu
    /// (repeatable).
    #[arg(long, value_name = "FILE")]
    pub target_pidfile: Vec<PathBuf>,
    /// Every process of a cgroup (cgroup v2 memory.current and cpu.stat,
    /// or v1 memory.usage_in_bytes and cpuacct.usage, and the processes'
    /// descriptors): /system.slice/nginx.service or a path under
    /// /sys/fs/cgroup (repeatable).
    #[arg(long, value_name = "PATH")]
    pub target_cgroup: Vec<String>,
    /// A systemd unit's cgroup (every process of the service, master and
    /// workers, across restarts), e.g. nginx.service (repeatable).
    #[arg(long, value_name = "NAME.service")]
    pub target_unit: Vec<String>,
}

/// The flag a watch setting is, for messages.
fn flag_of(setting: &str) -> String {
    match setting {
        "target_metrics" => "--target-metrics".into(),
        "prometheus" => "--prometheus".into(),
        "watch" => "--watch".into(),
        "interval" => "--target-metrics-interval".into(),
        "header" => "--target-metrics-header".into(),
        "bearer_file" => "--target-metrics-bearer-file".into(),
        "cgroup" => "--target-cgroup".into(),
        "unit" => "--target-unit".into(),
        "pidfile" => "--target-pidfile".into(),
        tls => format!("--target-metrics-{}", tls.replace('_', "-")),
    }
}

impl WatchArgs {
    /// The settings as given on the command line.
    fn given(&self) -> Result<WatchGiven, Error> {
        let watches = self
            .watches
            .iter()
            .map(|w| {
                let (name, expr) = split_watch("--watch", w)?;
                Ok(GivenWatch {
                    at: "--watch".into(),
                    name,
                    expr,
                    ..GivenWatch::default()
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(WatchGiven {
            target_metrics: self.target_metrics.clone(),
            prometheus: self.prometheus.clone(),
            watches,
            interval: self.target_metrics_interval,
            headers: self.target_metrics_header.clone(),
            bearer_file: self.target_metrics_bearer_file.clone(),
            tls: TlsSpec {
                cacert: self.target_metrics_cacert.clone(),
                insecure: self.target_metrics_insecure,
                cert: self.target_metrics_cert.clone(),
                key: self.target_metrics_key.clone(),
                ..TlsSpec::default()
            },
            pidfiles: self.target_pidfile.clone(),
            cgroups: self.target_cgroup.clone(),
            units: self.target_unit.clone(),
        })
    }

    /// The plan from the flags alone (no `--config`).
    pub fn plan(&self) -> Result<WatchPlan, Error> {
        WatchPlan::build(self.given()?, &flag_of)
    }

    /// Whether any flag was given (they replace the file's keys).
    fn any(&self) -> bool {
        *self != WatchArgs::default()
    }
}

/// One `[[watch]]` table as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileWatch {
    name: String,
    select: String,
    unit: Option<String>,
    source: Option<String>,
}

/// A string or a list of strings (`target_metrics = "URL"` or `[…]`).
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum OneOrMany {
    /// One.
    One(String),
    /// Several.
    Many(Vec<String>),
}

impl OneOrMany {
    fn list(&self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}

/// The file's watch keys (read with its globals, `FileGlobals`).
#[derive(Debug, Default)]
pub(super) struct FileWatchKeys {
    pub(super) target_metrics: Option<Spanned<OneOrMany>>,
    pub(super) prometheus: Option<Spanned<String>>,
    pub(super) watch: Vec<Spanned<FileWatch>>,
    pub(super) target_metrics_interval: Option<Spanned<String>>,
    pub(super) target_metrics_headers: Option<Spanned<BTreeMap<String, String>>>,
    pub(super) target_metrics_bearer_file: Option<PathBuf>,
    pub(super) target_metrics_cacert: Vec<PathBuf>,
    pub(super) target_metrics_insecure: Option<bool>,
    pub(super) target_metrics_cert: Option<PathBuf>,
    pub(super) target_metrics_key: Option<PathBuf>,
    pub(super) target_pidfile: Option<Spanned<OneOrMany>>,
    pub(super) target_cgroup: Option<Spanned<OneOrMany>>,
    pub(super) target_unit: Option<Spanned<OneOrMany>>,
}

/// The file key a watch setting is.
fn key_of(setting: &str) -> &str {
    match setting {
        "interval" => "target_metrics_interval",
        "header" => "target_metrics_headers",
        "bearer_file" => "target_metrics_bearer_file",
        "cgroup" => "target_cgroup",
        "unit" => "target_unit",
        "pidfile" => "target_pidfile",
        "target_metrics" | "prometheus" | "watch" => setting,
        "cacert" => "target_metrics_cacert",
        "insecure" => "target_metrics_insecure",
        "cert" => "target_metrics_cert",
        "key" => "target_metrics_key",
        other => other,
    }
}

/// The plan of a file's watch keys, or of the flags when any is given
/// (they replace the file's keys as a whole: a watch is one setting).
pub(super) fn plan(
    flags: &WatchArgs,
    file: FileWatchKeys,
    loc: &Locator<'_>,
    cx: &FileCx<'_>,
) -> Result<WatchPlan, Error> {
    if flags.any() {
        return flags.plan();
    }
    let list = |v: &Option<Spanned<OneOrMany>>| v.as_ref().map(|v| v.get_ref().list()).unwrap_or_default();
    let paths = |v: &Option<Spanned<OneOrMany>>| list(v).iter().map(|p| cx.path(p.as_ref())).collect();
    let headers = match &file.target_metrics_headers {
        Some(h) => Headers::file(h.get_ref().clone(), cx).map_err(|e| loc.err(h, "target_metrics_headers", e))?,
        None => Vec::new(),
    };
    let given = WatchGiven {
        target_metrics: list(&file.target_metrics),
        prometheus: file.prometheus.as_ref().map(|p| p.get_ref().clone()),
        watches: file
            .watch
            .iter()
            .map(|w| GivenWatch {
                at: loc.at(w, "watch"),
                name: w.get_ref().name.clone(),
                expr: w.get_ref().select.clone(),
                unit: w.get_ref().unit.clone(),
                source: w.get_ref().source.clone(),
            })
            .collect(),
        interval: loc.duration(&file.target_metrics_interval, "target_metrics_interval", true)?,
        headers,
        bearer_file: file.target_metrics_bearer_file.as_deref().map(|p| cx.path(p)),
        tls: TlsSpec {
            cacert: file.target_metrics_cacert.iter().map(|p| cx.path(p)).collect(),
            insecure: file.target_metrics_insecure.unwrap_or(false),
            cert: file.target_metrics_cert.as_deref().map(|p| cx.path(p)),
            key: file.target_metrics_key.as_deref().map(|p| cx.path(p)),
            ..TlsSpec::default()
        },
        pidfiles: paths(&file.target_pidfile),
        cgroups: list(&file.target_cgroup),
        units: list(&file.target_unit),
    };
    let spanned: [(&str, Option<std::ops::Range<usize>>); 4] = [
        ("target_metrics", file.target_metrics.as_ref().map(Spanned::span)),
        ("prometheus", file.prometheus.as_ref().map(Spanned::span)),
        (
            "target_metrics_interval",
            file.target_metrics_interval.as_ref().map(Spanned::span),
        ),
        (
            "target_metrics_headers",
            file.target_metrics_headers.as_ref().map(Spanned::span),
        ),
    ];
    let key = |setting: &str| {
        let k = key_of(setting);
        match spanned.iter().find(|(name, _)| *name == k).and_then(|(_, s)| s.clone()) {
            Some(span) => loc.at_span(span, k),
            None => format!("{}: {k}", loc.file()),
        }
    };
    WatchPlan::build(given, &key)
}
