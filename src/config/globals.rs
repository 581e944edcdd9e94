//! The file's globals (metrics address, threads, outputs, when to stop,
//! thresholds, shard) and the command-line flags that override them.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::Locator;
use super::events::{FileEvent, FileKeys, ShareRaw};
use super::kinds::FileCx;
use super::settings::FileWorkload;
use super::watch::{FileWatch, FileWatchKeys, OneOrMany};
use crate::Error;
use crate::plan::{self, Plan, ReportDest, Workload, defaults};

/// The whole file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileGlobals {
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
    // --baseline
    baseline: Option<PathBuf>,
    baseline_hdr_log: Option<PathBuf>,
    tolerance: Option<Spanned<String>>,
    baseline_window: Option<Spanned<String>>,
    shard: Option<Spanned<String>>,
    shard_sources: Option<bool>,
    // --state
    state: Option<PathBuf>,
    checkpoint_interval: Option<Spanned<String>>,
    // Outages and events (config/events.rs)
    outage_errors: Option<Spanned<ShareRaw>>,
    outage_open: Option<Spanned<ShareRaw>>,
    outage_settle: Option<Spanned<String>>,
    #[serde(default)]
    event: Vec<Spanned<FileEvent>>,
    event_window: Option<Spanned<String>>,
    event_log: Option<PathBuf>,
    event_name_file: Option<PathBuf>,
    event_socket: Option<PathBuf>,
    // The server watch (config/watch.rs)
    target_metrics: Option<Spanned<OneOrMany>>,
    prometheus: Option<Spanned<String>>,
    #[serde(default)]
    watch: Vec<Spanned<FileWatch>>,
    target_metrics_interval: Option<Spanned<String>>,
    target_metrics_headers: Option<Spanned<std::collections::BTreeMap<String, String>>>,
    target_metrics_bearer_file: Option<PathBuf>,
    #[serde(default)]
    target_metrics_cacert: Vec<PathBuf>,
    target_metrics_insecure: Option<bool>,
    target_metrics_cert: Option<PathBuf>,
    target_metrics_key: Option<PathBuf>,
    target_pidfile: Option<Spanned<OneOrMany>>,
    target_cgroup: Option<Spanned<OneOrMany>>,
    target_unit: Option<Spanned<OneOrMany>>,
    #[serde(default)]
    pub(super) workload: Vec<Spanned<FileWorkload>>,
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
    /// `--baseline`: the report to compare with.
    pub baseline: Option<PathBuf>,
    /// `--baseline-hdr-log`: its interval log.
    pub baseline_hdr_log: Option<PathBuf>,
    /// `--tolerance`.
    pub tolerance: Option<f64>,
    /// `--baseline-window`.
    pub baseline_window: Option<Duration>,
    /// `--shard` (or `SOAKD_SHARD`): the share of the plan to run, and the
    /// flag or variable it came from (for messages).
    pub shard: Option<(plan::Shard, String)>,
    /// `--shard-sources`: each shard takes a slice of the source addresses.
    pub shard_sources: bool,
    /// `--state`: the checkpoint file.
    pub state: Option<PathBuf>,
    /// `--checkpoint-interval`.
    pub checkpoint_interval: Option<Duration>,
    /// `--fresh` (command line only).
    pub fresh: bool,
    /// `--outage-*` and `--event*`.
    pub disruptions: super::DisruptionArgs,
    /// `--target-metrics`, `--prometheus`, `--watch` and their companions.
    pub watch: super::WatchArgs,
}

/// The plan of `workloads` under the file's globals, each replaced by its
/// flag when one is given.
pub(super) fn plan(
    file: FileGlobals,
    workloads: Vec<Workload>,
    over: Overrides,
    loc: &Locator<'_>,
    cx: &FileCx<'_>,
) -> Result<Plan, Error> {
    let or_file = |flag: Option<Duration>, key: &Option<Spanned<String>>, name: &str| match flag {
        Some(d) => Ok(Some(d)),
        None => loc.duration(key, name, true),
    };
    let report = file.report.as_deref().map(|r| match r {
        "-" => ReportDest::Stdout,
        path => ReportDest::File(cx.path(path.as_ref())),
    });
    let (shard, shard_from) = shard(over.shard, &file.shard, loc)?;
    let duration = or_file(over.duration, &file.duration, "duration")?;
    let (outages, events) = super::events::plans(
        &over.disruptions,
        FileKeys {
            outage_errors: file.outage_errors.as_ref(),
            outage_open: file.outage_open.as_ref(),
            outage_settle: file.outage_settle.as_ref(),
            events: &file.event,
            event_window: file.event_window.as_ref(),
            event_log: file.event_log.as_ref(),
            event_name_file: file.event_name_file.as_ref(),
            event_socket: file.event_socket.as_ref(),
        },
        duration,
        loc,
        cx,
    )?;
    let watch = super::watch::plan(
        &over.watch,
        FileWatchKeys {
            target_metrics: file.target_metrics,
            prometheus: file.prometheus,
            watch: file.watch,
            target_metrics_interval: file.target_metrics_interval,
            target_metrics_headers: file.target_metrics_headers,
            target_metrics_bearer_file: file.target_metrics_bearer_file,
            target_metrics_cacert: file.target_metrics_cacert,
            target_metrics_insecure: file.target_metrics_insecure,
            target_metrics_cert: file.target_metrics_cert,
            target_metrics_key: file.target_metrics_key,
            target_pidfile: file.target_pidfile,
            target_cgroup: file.target_cgroup,
            target_unit: file.target_unit,
        },
        loc,
        cx,
    )?;
    let plan = Plan {
        workloads,
        threads: threads(over.threads, &file.threads, loc)?,
        duration,
        max_requests: requests(over.requests, &file.requests, loc)?,
        report: over.report.as_deref().map(ReportDest::parse).or(report),
        metrics_listen: metrics_listen(over.metrics_listen, &file.metrics_listen, loc)?,
        drain_timeout: defaults::DRAIN_TIMEOUT,
        hdr_log: over.hdr_log.or(file.hdr_log.as_deref().map(|p| cx.path(p))),
        metrics_linger: match over.metrics_linger {
            Some(d) => d,
            None => loc
                .duration(&file.metrics_linger, "metrics_linger", false)?
                .unwrap_or_default(),
        },
        hdr_log_interval: or_file(over.hdr_log_interval, &file.hdr_log_interval, "hdr_log_interval")?
            .unwrap_or(defaults::HDR_LOG_INTERVAL),
        thresholds: match over.thresholds {
            Some(t) => t,
            None => loc.thresholds(&file.thresholds)?,
        },
        threshold_window: or_file(over.threshold_window, &file.threshold_window, "threshold_window")?,
        abort_on_fail: or_file(over.abort_on_fail, &file.abort_on_fail, "abort_on_fail")?,
        baseline: plan::Baseline::of(
            over.baseline.or(file.baseline.as_deref().map(|p| cx.path(p))),
            over.baseline_hdr_log
                .or(file.baseline_hdr_log.as_deref().map(|p| cx.path(p))),
            match over.tolerance {
                Some(t) => Some(t),
                None => tolerance(&file.tolerance, loc)?,
            },
            or_file(over.baseline_window, &file.baseline_window, "baseline_window")?,
        )?,
        state: plan::StateFile::of(
            over.state.or(file.state.as_deref().map(|p| cx.path(p))),
            or_file(
                over.checkpoint_interval,
                &file.checkpoint_interval,
                "checkpoint_interval",
            )?,
            over.fresh,
        )?,
        shard: plan::Shard::WHOLE,
        shard_sources: false,
        outages,
        events,
        watch,
    };
    let where_ = file
        .thresholds
        .first()
        .map_or_else(|| "--threshold".to_string(), |t| loc.at(t, "thresholds"));
    plan.check_thresholds(&where_)?;
    let split = over.shard_sources || file.shard_sources.unwrap_or(false);
    plan::shard::apply(plan, shard, split, &shard_from)
}

/// `tolerance`: a percentage (`"10%"`) or a fraction.
fn tolerance(key: &Option<Spanned<String>>, loc: &Locator<'_>) -> Result<Option<f64>, Error> {
    let Some(v) = key else { return Ok(None) };
    plan::parse_tolerance(&loc.at(v, "tolerance"), v.get_ref()).map(Some)
}

/// `metrics_listen`: an address, or `"off"`.
fn metrics_listen(
    flag: Option<Option<SocketAddr>>,
    key: &Option<Spanned<String>>,
    loc: &Locator<'_>,
) -> Result<Option<SocketAddr>, Error> {
    match (flag, key) {
        (Some(m), _) => Ok(m),
        (None, None) => Ok(Some(defaults::METRICS_LISTEN)),
        (None, Some(v)) if v.get_ref() == "off" => Ok(None),
        (None, Some(v)) => v.get_ref().parse().map(Some).map_err(|_| {
            loc.err(
                v,
                "metrics_listen",
                format!("= {:?}: expected ADDRESS:PORT or \"off\"", v.get_ref()),
            )
        }),
    }
}

/// `threads`: at least 1; by default one per CPU.
fn threads(flag: Option<usize>, key: &Option<Spanned<u16>>, loc: &Locator<'_>) -> Result<usize, Error> {
    match (flag, key) {
        (Some(t), _) => Ok(t),
        (None, Some(t)) if *t.get_ref() == 0 => Err(loc.err(t, "threads", "must be at least 1")),
        (None, Some(t)) => Ok(*t.get_ref() as usize),
        (None, None) => Ok(defaults::threads()),
    }
}

/// `requests`: at least 1.
fn requests(flag: Option<u64>, key: &Option<Spanned<u64>>, loc: &Locator<'_>) -> Result<Option<u64>, Error> {
    match (flag, key) {
        (Some(n), _) => Ok(Some(n)),
        (None, Some(n)) if *n.get_ref() == 0 => Err(loc.err(n, "requests", "must be at least 1")),
        (None, n) => Ok(n.as_ref().map(|n| *n.get_ref())),
    }
}

/// The shard, and the flag, variable or line it came from.
fn shard(
    flag: Option<(plan::Shard, String)>,
    key: &Option<Spanned<String>>,
    loc: &Locator<'_>,
) -> Result<(plan::Shard, String), Error> {
    match (flag, key) {
        (Some(given), _) => Ok(given),
        (None, Some(v)) => {
            let at = loc.at(v, "shard");
            let job = std::env::var(plan::shard::JOB_INDEX_ENV).ok();
            Ok((plan::Shard::parse(&format!("{at} ="), v.get_ref(), job.as_deref())?, at))
        }
        (None, None) => Ok((plan::Shard::WHOLE, "--shard".into())),
    }
}
