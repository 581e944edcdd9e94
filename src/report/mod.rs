//! The final report: JSON for machines, a text summary for people.
//!
//! The JSON field names are a contract (tests, dashboards and scripts read
//! them). Top-level figures sum every workload; `workloads` repeats them per
//! workload. Percentiles come from the HdrHistograms (µs resolution, 0.1%
//! precision) and are `null` when nothing was measured, so "no data" can
//! never be mistaken for "zero latency".

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

pub mod baseline;
mod by_name;
pub use by_name::{ByName, CheckFailures, Closes, Errors, Responses};
use by_name::{no_check_failures, no_errors, no_responses};
mod grpc_streams;
mod http;
pub use http::HttpFigures;
mod load;
pub use load::{Load, StageLoad};
mod outages;
pub use outages::measure_outages;
mod read;
pub mod server;
mod text;
mod trend;
mod ws;
pub use grpc_streams::{GrpcStreamFigures, GrpcStreamHistograms};
pub use ws::{WsFigures, WsHistograms};

pub use read::{Counted, HOST_ERRORS, error_rate, read};
pub use text::{human, threshold_value};
pub use trend::trend_settings;

use crate::plan::{Metric, Plan, Threshold};
pub use crate::stats::Restart;
use crate::stats::trends::{Judged, Trends};
use crate::stats::{
    CheckKind, CloseReason, Disruptions, ErrorKind, Gauges, StatusClass, TimelineJson, Totals, WorkloadStats,
};

/// Percentiles of one histogram, in seconds.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Percentiles {
    /// Number of samples.
    pub count: u64,
    /// Smallest sample.
    pub min: Option<f64>,
    /// Mean.
    pub mean: Option<f64>,
    /// Median.
    pub p50: Option<f64>,
    /// 90th percentile.
    pub p90: Option<f64>,
    /// 99th percentile.
    pub p99: Option<f64>,
    /// 99.9th percentile.
    pub p999: Option<f64>,
    /// Largest sample.
    pub max: Option<f64>,
}

impl Percentiles {
    /// Reads a µs histogram.
    pub fn of(h: &Histogram<u64>) -> Percentiles {
        if h.is_empty() {
            return Percentiles::default();
        }
        let s = |us: u64| Some(us as f64 / 1e6);
        Percentiles {
            count: h.len(),
            min: s(h.min()),
            mean: Some(h.mean() / 1e6),
            p50: s(h.value_at_quantile(0.5)),
            p90: s(h.value_at_quantile(0.9)),
            p99: s(h.value_at_quantile(0.99)),
            p999: s(h.value_at_quantile(0.999)),
            max: s(h.max()),
        }
    }
}

/// Connection figures.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct Connections {
    /// Connections the plan holds.
    pub desired: u64,
    /// Most open at once (sampled every 250 ms).
    pub peak_open: u64,
    /// Open when the run stopped.
    pub open_at_end: u64,
    /// Successful connects.
    pub opened: u64,
    /// Closes of established connections (all reasons, including the
    /// shutdown).
    pub closed: u64,
    /// Time from start until all desired connections were first open;
    /// `null` if that never happened.
    pub ramp_seconds: Option<f64>,
    /// Closes by reason.
    pub closed_by_reason: Closes,
}

/// Request figures. `sent = completed + failed + in_flight_at_end`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Requests {
    /// Requests issued on a connection.
    pub sent: u64,
    /// Complete final responses.
    pub completed: u64,
    /// Sent, then lost to an error.
    pub failed: u64,
    /// Scheduled but never sent: already older than the request timeout
    /// when a connection became free.
    pub missed: u64,
    /// Still owed a response when the run ended.
    pub in_flight_at_end: u64,
    /// Completed per second of run time.
    pub per_second: f64,
}

impl Default for Connections {
    fn default() -> Connections {
        Connections {
            desired: 0,
            peak_open: 0,
            open_at_end: 0,
            opened: 0,
            closed: 0,
            ramp_seconds: None,
            closed_by_reason: Closes {
                names: CloseReason::ALL.map(CloseReason::name),
                counts: [0; CloseReason::COUNT],
            },
        }
    }
}

impl Default for Figures {
    fn default() -> Figures {
        Figures {
            connections: Connections::default(),
            requests: Requests::default(),
            requests_per_connection: 0.0,
            responses: no_responses(),
            errors: no_errors(),
            latency_seconds: Percentiles::default(),
            schedule_lag_seconds: Percentiles::default(),
            connect_seconds: Percentiles::default(),
            tls_handshake_seconds: Percentiles::default(),
            tls: None,
            bytes: Bytes::default(),
            checks: no_check_failures(),
        }
    }
}

impl Figures {
    /// This figure set's error rate (see [`error_rate`]).
    pub fn error_rate(&self, counted: Counted) -> Option<f64> {
        error_rate(self.requests.completed, &self.errors.counts, counted)
    }
}

pub(super) fn check_failures(counts: [u64; CheckKind::COUNT]) -> CheckFailures {
    CheckFailures {
        names: CheckKind::ALL.map(CheckKind::name),
        counts,
    }
}

/// One request of a workload: what it came to on its own.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RequestReport {
    /// The `request` label.
    pub name: String,
    /// Its weight in the mix.
    #[serde(default)]
    pub weight: u32,
    /// Complete responses.
    #[serde(default)]
    pub count: u64,
    /// Complete responses per second of run time.
    #[serde(default)]
    pub per_second: f64,
    /// Latency (1% precision for a mix's requests; the workload's own
    /// histogram for a single request).
    #[serde(default)]
    pub latency_seconds: Percentiles,
    /// Responses by class.
    #[serde(default = "no_responses")]
    pub responses: Responses,
    /// Failed checks by kind (all 0 when the request has no checks).
    #[serde(default = "no_check_failures")]
    pub checks: CheckFailures,
    /// gRPC: the calls that ended, by status code label (`null` for other
    /// targets); a mix's per method and message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc_calls: Option<std::collections::BTreeMap<String, u64>>,
}

/// Bytes on the wire.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Bytes {
    /// Written.
    pub sent: u64,
    /// Read.
    pub received: u64,
}

/// Every figure of one workload (or of all of them summed). A figure a
/// report lacks (one from an older soakd) reads as zero or `null`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct Figures {
    /// Connection figures.
    pub connections: Connections,
    /// Request figures.
    pub requests: Requests,
    /// Completed requests per opened connection.
    pub requests_per_connection: f64,
    /// Responses by class.
    pub responses: Responses,
    /// Errors by kind.
    pub errors: Errors,
    /// Request latency: from the due time in paced and open-loop modes, from
    /// the write in closed loop.
    pub latency_seconds: Percentiles,
    /// Due time → written (paced and open-loop modes): the generator's own
    /// health.
    pub schedule_lag_seconds: Percentiles,
    /// TCP connect time.
    pub connect_seconds: Percentiles,
    /// TLS handshake time, after the TCP connect (empty for http://).
    pub tls_handshake_seconds: Percentiles,
    /// TLS figures; `null` for an http:// workload (or a run without one).
    pub tls: Option<TlsFigures>,
    /// Bytes on the wire.
    pub bytes: Bytes,
    /// Responses that failed a configured check, by kind (a response may
    /// fail several); they are completed responses, not errors.
    pub checks: CheckFailures,
}

/// What the TLS handshakes of a workload came to.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct TlsFigures {
    /// Completed handshakes.
    pub handshakes: u64,
    /// Of those, resumed sessions.
    pub resumed: u64,
    /// Certificates were verified (false with `--insecure`).
    pub verified: bool,
    /// The version negotiated, e.g. `TLSv1.3` (`null` before a handshake).
    pub version: Option<String>,
    /// The cipher suite negotiated, e.g. `TLS13_AES_128_GCM_SHA256`.
    pub cipher: Option<String>,
}

impl TlsFigures {
    fn of(c: &crate::stats::Counters, g: &Gauges, verified: bool) -> TlsFigures {
        let named = |code: u16, name: String| (code != 0).then_some(name);
        TlsFigures {
            handshakes: c.tls_handshakes[0] + c.tls_handshakes[1],
            resumed: c.tls_handshakes[1],
            verified,
            version: named(g.tls_version, version_name(g.tls_version)),
            cipher: named(g.tls_suite, format!("{:?}", rustls::CipherSuite::from(g.tls_suite))),
        }
    }
}

/// `TLSv1.3` and the like, from the IANA number.
fn version_name(code: u16) -> String {
    match code {
        0x0303 => "TLSv1.2".into(),
        0x0304 => "TLSv1.3".into(),
        other => format!("0x{other:04x}"),
    }
}

/// One workload's figures.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WorkloadReport {
    /// Workload name (the metrics' `target` label).
    pub name: String,
    /// Target URL.
    #[serde(default)]
    pub url: String,
    /// The load it put on the target (connections, pace, protocol,
    /// stages): what a comparison with another run must match.
    #[serde(default)]
    pub load: Load,
    /// Its figures.
    #[serde(flatten)]
    pub figures: Figures,
    /// The full-run histograms behind its percentiles, so shard reports can
    /// be merged without loss (`soakd merge`); empty in a report from a
    /// soakd before them.
    #[serde(default)]
    pub histograms: Histograms,
    /// Per request (one entry for a single-URL workload), in the plan's
    /// order. (`requests` holds the workload's request counters.)
    #[serde(default)]
    pub by_request: Vec<RequestReport>,
    // HTTP/2
    /// HTTP versions and HTTP/2's events (see `http.rs`).
    #[serde(default)]
    pub http: http::HttpFigures,
    /// A WebSocket workload's section; absent for HTTP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ws: Option<WsFigures>,
}

/// A workload's full-run histograms (µs), each HdrHistogram V2 + deflate,
/// base64: the same encoding as an HdrHistogram interval log's lines, so
/// the standard tools decode them too.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Histograms {
    /// Request latency.
    pub latency: String,
    /// Schedule lag.
    pub schedule_lag: String,
    /// TCP connect time.
    pub connect: String,
    /// TLS handshake time.
    pub tls_handshake: String,
}

impl Histograms {
    fn of(s: &WorkloadStats) -> Histograms {
        Histograms {
            latency: encode(&s.latency),
            schedule_lag: encode(&s.lag),
            connect: encode(&s.connect),
            tls_handshake: encode(&s.tls_handshake),
        }
    }
}

/// A histogram as base64 of its V2 + deflate serialization.
pub fn encode(h: &Histogram<u64>) -> String {
    use base64::Engine as _;
    let mut bytes = Vec::new();
    // Serializing into a Vec cannot fail for a histogram of our bounds.
    hdrhistogram::serialization::Serializer::serialize(
        &mut hdrhistogram::serialization::V2DeflateSerializer::new(),
        h,
        &mut bytes,
    )
    .expect("histogram serializes");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The histogram [`encode`] wrote; `None` when the text is not one.
pub fn decode(text: &str) -> Option<Histogram<u64>> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD.decode(text).ok()?;
    hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut std::io::Cursor::new(bytes))
        .ok()
        .map(crate::stats::growing)
}

/// Which share of a sharded plan a report covers.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct ShardReport {
    /// The shard (`--shard I/N`); `null` in a merged report.
    pub index: Option<u32>,
    /// Shards of the plan.
    pub count: u32,
    /// A merged report: the shards it holds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged: Vec<u32>,
}

impl Default for ShardReport {
    /// Shard 0 of 1: an unsharded run (what a report before shards was).
    fn default() -> ShardReport {
        ShardReport {
            index: Some(0),
            count: 1,
            merged: Vec::new(),
        }
    }
}

/// The final report. Every field but the workloads' names has a default,
/// so a report from an older soakd (or a hand-made one in a test) reads
/// through [`read`]; what it lacks reads as zero, `null` or empty.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    /// Run time until the stop began.
    #[serde(default)]
    pub duration_seconds: f64,
    /// The share of the plan this report covers (0 of 1 unsharded).
    #[serde(default)]
    pub shard: ShardReport,
    /// Figures over all workloads.
    #[serde(flatten)]
    pub all: Figures,
    /// Per-workload figures.
    #[serde(default)]
    pub workloads: Vec<WorkloadReport>,
    /// Every threshold, evaluated at the end (empty without thresholds).
    #[serde(default)]
    pub thresholds: Vec<ThresholdResult>,
    /// Why the run was stopped early by a failing threshold
    /// (`--abort-on-fail`); `null` when it was not.
    #[serde(default)]
    pub aborted: Option<String>,
    /// The HDR interval log this run wrote (`--hdr-log`), so `soakd
    /// compare` finds it; `null` without one.
    #[serde(default)]
    pub hdr_log: Option<String>,
    /// The plan in words (what `soakd check` prints; no header values).
    /// Empty in a report from a soakd before it.
    #[serde(default)]
    pub plan: String,
    /// The run over time, all workloads summed: per-interval counts,
    /// connections and latency quantiles, at most 1,000 points (see
    /// `stats::Timeline` and docs/report.md). No points in a merged report
    /// or one from a soakd before it.
    #[serde(default)]
    pub timeline: TimelineJson,
    /// Where the run was going after the ramp and the warmup: slopes of
    /// the target's and soakd's memory and descriptors, drifts of latency
    /// and errors (see `stats::trends`). Empty in a report from a soakd
    /// before it.
    #[serde(default)]
    pub trends: Trends,
    /// Each restart that continued the run from its `--state` checkpoint:
    /// when (`at`, seconds since the run started) and how much run time
    /// the restart lost (`lost_seconds`, from the last checkpoint; the
    /// timeline flags it as a `gap`). Absent for a run in one piece.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resumed: Vec<Restart>,
    /// `--baseline`: the run judged against the baseline window by window
    /// (see `baseline::BaselineSection`); absent without a baseline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<baseline::BaselineSection>,
    /// The server watch (`--target-metrics`, `--prometheus`,
    /// `--target-pidfile`, `--target-cgroup`): each watched series with its
    /// summary, slope, drift and restarts, and the sources' reads (see
    /// `server::ServerSection`); absent without a watch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<server::ServerSection>,
    /// `outages` (in the order they began: when, what they cost, the
    /// reconnect and recovery times, the event each is attributed to),
    /// `excursions` (the target slowed down without failing) and `events`
    /// (commands soakd ran, marks from outside); see `stats::outage` and
    /// docs/report.md.
    #[serde(flatten)]
    pub disruptions: Disruptions,
}

/// One threshold's verdict.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ThresholdResult {
    /// The workload it is about; `null` for a run-wide threshold (over
    /// all workloads).
    pub workload: Option<String>,
    /// The expression, without spaces (`p99<50ms`).
    pub threshold: String,
    /// The metric's name.
    pub metric: String,
    /// The comparison (`<`, `<=`, `>`, `>=`).
    pub op: String,
    /// The limit in base units (seconds, a 0–1 ratio, a count).
    pub limit: f64,
    /// What the run measured, in the same unit; `null` when nothing was
    /// measured (which fails).
    pub measured: Option<f64>,
    /// `measured OP limit`; for a trend, or not significant.
    pub pass: bool,
    /// A trend threshold: whether the figure was significant, or why it
    /// could not be judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// A watch threshold: the unit of `limit` and `measured` (the watch's,
    /// per second for a slope, `relative` for a drift).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
}

impl ThresholdResult {
    /// Evaluates `t` on a measurement.
    pub fn of(t: &Threshold, workload: Option<&str>, measured: Option<f64>) -> ThresholdResult {
        ThresholdResult {
            workload: workload.map(str::to_string),
            threshold: t.text.clone(),
            metric: t.metric.name().to_string(),
            op: t.op.symbol().to_string(),
            limit: t.limit,
            measured,
            pass: t.passes(measured),
            note: None,
            unit: None,
        }
    }

    /// Evaluates a trend threshold, of `workload` (its own drift when
    /// the trends have per-workload ones; slopes are run-wide) or
    /// run-wide: it fails when the figure is over the limit and
    /// significant, or when it could not be judged.
    pub fn of_trend(t: &Threshold, workload: Option<&str>, trends: &Trends) -> ThresholdResult {
        let mut r = ThresholdResult::of(t, workload, None);
        match trends.judged_for(workload, t.metric.name()) {
            Some(Judged::Value(v, significant)) => {
                r.measured = Some(v);
                r.pass = !significant || t.op.holds(v, t.limit);
                r.note = Some(if significant {
                    "significant".into()
                } else {
                    "not significant (noise does not fail a run)".into()
                });
            }
            Some(Judged::NotYet(why)) => r.note = Some(format!("not judged: {why}")),
            None => r.note = Some("not judged: no trends in this report".into()),
        }
        r
    }
}

/// What `metric` measured in `stats` over `secs` seconds, with `open_min`
/// the fewest connections open after the ramp. `None` when there is
/// nothing to measure (no latency recorded, no ramp completed). The one
/// definition of each threshold metric: the end of the run and the live
/// gauges both use it.
pub fn measure(metric: Metric, stats: &WorkloadStats, secs: f64, open_min: Option<u64>) -> Option<f64> {
    let q = |h: &Histogram<u64>, q: f64| (!h.is_empty()).then(|| h.value_at_quantile(q) as f64 / 1e6);
    let c = &stats.counters;
    match metric {
        Metric::P50 => q(&stats.latency, 0.5),
        Metric::P90 => q(&stats.latency, 0.9),
        Metric::P99 => q(&stats.latency, 0.99),
        Metric::P999 => q(&stats.latency, 0.999),
        Metric::Max => (!stats.latency.is_empty()).then(|| stats.latency.max() as f64 / 1e6),
        Metric::Mean => (!stats.latency.is_empty()).then(|| stats.latency.mean() / 1e6),
        Metric::LagP99 => q(&stats.lag, 0.99),
        Metric::TlsHandshakeP99 => q(&stats.tls_handshake, 0.99),
        Metric::ErrorRate => error_rate(c.completed, &c.errors, Counted::Every),
        Metric::Errors => Some(c.total_errors() as f64),
        Metric::Rps => (secs > 0.0).then(|| c.completed as f64 / secs),
        Metric::OpenMin => open_min.map(|m| m as f64),
        Metric::WsP99 => q(&stats.latency, 0.99).filter(|_| stats.ws.replies > 0),
        Metric::PingP99 => q(&stats.ws.ping_rtt, 0.99),
        Metric::Closes => Some(stats.ws.total_closes() as f64),
        Metric::GrpcErrorRate => stats.h2.as_deref().and_then(|h| http::grpc_error_rate(&h.grpc_calls)),
        Metric::StreamRestarts => Some(stats.grpc.as_deref().map_or(0, |g| g.restarts) as f64),
        // Trends come from the timeline (`ThresholdResult::of_trend`).
        Metric::TargetRssSlope
        | Metric::TargetFdsSlope
        | Metric::SoakdRssSlope
        | Metric::P50Drift
        | Metric::P99Drift
        | Metric::ErrorRateDrift => None,
        // Outages come from the outage watch (`measure_outages`).
        Metric::Outages | Metric::OutageMax | Metric::RecoveryMax | Metric::Downtime => None,
        // The watched series, from the server section (`server::judge`).
        Metric::WatchSlope | Metric::WatchDrift | Metric::WatchMax => None,
    }
}

fn figures(stats: &WorkloadStats, g: &Gauges, peak: u64, at_end: u64, ramp: Option<Duration>, secs: f64) -> Figures {
    let c = &stats.counters;
    Figures {
        connections: Connections {
            desired: g.desired,
            peak_open: peak,
            open_at_end: at_end,
            opened: c.opened,
            closed: c.total_closed(),
            ramp_seconds: ramp.map(|d| d.as_secs_f64()),
            closed_by_reason: Closes {
                names: CloseReason::ALL.map(CloseReason::name),
                counts: c.closed,
            },
        },
        requests: Requests {
            sent: c.sent,
            completed: c.completed,
            failed: c.failed,
            missed: c.missed,
            in_flight_at_end: g.in_flight,
            per_second: if secs > 0.0 { c.completed as f64 / secs } else { 0.0 },
        },
        requests_per_connection: if c.opened > 0 {
            c.completed as f64 / c.opened as f64
        } else {
            0.0
        },
        responses: Responses {
            names: StatusClass::ALL.map(StatusClass::name),
            counts: c.responses,
        },
        errors: Errors {
            names: ErrorKind::ALL.map(ErrorKind::name),
            counts: c.errors,
        },
        latency_seconds: Percentiles::of(&stats.latency),
        schedule_lag_seconds: Percentiles::of(&stats.lag),
        connect_seconds: Percentiles::of(&stats.connect),
        tls_handshake_seconds: Percentiles::of(&stats.tls_handshake),
        tls: None,
        bytes: Bytes {
            sent: c.bytes_sent,
            received: c.bytes_received,
        },
        checks: check_failures(stats.check_failures()),
    }
}

fn by_request(w: &crate::plan::Workload, stats: &WorkloadStats, secs: f64) -> Vec<RequestReport> {
    w.target
        .requests
        .iter()
        .enumerate()
        .filter(|(i, _)| *i < stats.requests.len())
        .map(|(i, r)| {
            let v = stats.request(i);
            RequestReport {
                name: r.name.clone(),
                weight: r.weight,
                count: v.completed,
                per_second: if secs > 0.0 { v.completed as f64 / secs } else { 0.0 },
                latency_seconds: Percentiles::of(v.latency),
                responses: Responses {
                    names: StatusClass::ALL.map(StatusClass::name),
                    counts: v.responses,
                },
                checks: check_failures(v.checks),
                grpc_calls: w.target.grpc.is_some().then(|| http::calls_by_label(&v.grpc_calls)),
            }
        })
        .collect()
}

impl Report {
    /// Builds the report from the totals; `ran` is the run time until the stop.
    pub fn build(plan: &Plan, t: &Totals, ran: Duration) -> Report {
        let secs = ran.as_secs_f64();
        let at_end = |wi: usize| t.open_at_stop.as_ref().map_or(t.gauges[wi].open, |v| v[wi]);
        let workloads: Vec<WorkloadReport> = plan
            .workloads
            .iter()
            .enumerate()
            .map(|(wi, w)| {
                let mut figures = figures(
                    &t.stats[wi],
                    &t.gauges[wi],
                    t.peak_open[wi],
                    at_end(wi),
                    t.ramp[wi],
                    secs,
                );
                figures.tls = w
                    .target
                    .tls
                    .as_ref()
                    .map(|tls| TlsFigures::of(&t.stats[wi].counters, &t.gauges[wi], tls.verified()));
                WorkloadReport {
                    name: w.name.clone(),
                    url: w.target.url.clone(),
                    load: Load::of(w),
                    figures,
                    histograms: Histograms::of(&t.stats[wi]),
                    by_request: by_request(w, &t.stats[wi], secs),
                    http: http::HttpFigures {
                        requested: Some(w.http.name().into()),
                        streams: w.streams,
                        grpc: w.target.grpc.as_deref().map(|g| {
                            let mut f = http::GrpcFigures::of(&g.method_name(), t.stats[wi].h2.as_deref());
                            f.streams = g
                                .hold
                                .as_ref()
                                .map(|h| GrpcStreamFigures::of(h.mode(), t.stats[wi].grpc.as_deref(), secs));
                            f
                        }),
                        ping: w.h2_ping.map(|_| {
                            let ws = &t.stats[wi].ws;
                            http::PingFigures {
                                sent: ws.pings,
                                acked: ws.pongs,
                                rtt_seconds: Percentiles::of(&ws.ping_rtt),
                            }
                        }),
                        ..http::HttpFigures::of(t.stats[wi].h2.as_deref(), &t.gauges[wi])
                    },
                    ws: WsFigures::of(w.target.ws.as_deref(), &t.stats[wi]),
                }
            })
            .collect();
        let mut sum = WorkloadStats::default();
        let mut g = Gauges::default();
        for (s, gw) in t.stats.iter().zip(&t.gauges) {
            sum.add(s);
            g.add(gw);
        }
        let peak = t.peak_open.iter().sum();
        let open_at_end = (0..t.names.len()).map(at_end).sum();
        // The run is ramped up when its slowest workload is.
        let ramp = t.ramp.iter().try_fold(Duration::ZERO, |acc, r| r.map(|r| acc.max(r)));
        let mut all = figures(&sum, &g, peak, open_at_end, ramp, secs);
        let tls: Vec<&crate::plan::Tls> = plan.workloads.iter().filter_map(|w| w.target.tls.as_ref()).collect();
        if !tls.is_empty() {
            all.tls = Some(TlsFigures::of(&sum.counters, &g, tls.iter().all(|t| t.verified())));
        }
        let timeline = t.timeline.to_json();
        let settings = trend_settings(plan.duration, plan.warmup(), ramp, ran);
        let input = crate::stats::trends::TrendInput::of_json(&timeline);
        let trends = crate::stats::trends::analyze_input(&input, &settings, &t.names);
        let server = server::ServerSection::build(&input, &timeline.series, &t.watch_sources, &settings);
        let mut disruptions = t.disruptions();
        disruptions.attribute(plan.events.window.as_secs_f64());
        let outages = &disruptions.outages;
        let thresholds = plan
            .all_thresholds()
            .into_iter()
            .map(|(wi, th)| match wi {
                _ if th.metric.is_watch() => server::judge(
                    th,
                    server.iter().flat_map(|s| s.series.iter().map(|x| (&x.info, &x.trend))),
                ),
                _ if th.metric.is_trend() => {
                    ThresholdResult::of_trend(th, wi.map(|wi| plan.workloads[wi].name.as_str()), &trends)
                }
                _ if th.metric.is_outage() => {
                    let name = wi.map(|wi| plan.workloads[wi].name.as_str());
                    let (measured, note) = measure_outages(th.metric, outages, name, secs);
                    ThresholdResult {
                        note,
                        ..ThresholdResult::of(th, name, measured)
                    }
                }
                Some(wi) => ThresholdResult::of(
                    th,
                    Some(&plan.workloads[wi].name),
                    measure(th.metric, &t.stats[wi], secs, t.open_min[wi]),
                ),
                None => ThresholdResult::of(th, None, measure(th.metric, &sum, secs, t.open_min_all)),
            })
            .collect();
        Report {
            duration_seconds: secs,
            shard: ShardReport {
                index: Some(plan.shard.index),
                count: plan.shard.count,
                merged: Vec::new(),
            },
            all,
            workloads,
            thresholds,
            aborted: None,
            hdr_log: plan.hdr_log.as_ref().map(|p| p.display().to_string()),
            plan: crate::plan::describe(plan),
            timeline,
            trends,
            resumed: t.resumed.clone(),
            baseline: None,
            server,
            disruptions,
        }
    }

    /// The thresholds that failed.
    pub fn failed_thresholds(&self) -> impl Iterator<Item = &ThresholdResult> {
        self.thresholds.iter().filter(|t| !t.pass)
    }

    /// The JSON form (pretty-printed).
    pub fn to_json(&self) -> String {
        // Serializing plain structs of numbers and strings cannot fail.
        serde_json::to_string_pretty(self).expect("report serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--warmup` replaces the default (a tenth of the run) after the ramp.
    #[test]
    fn a_given_warmup_replaces_the_default() {
        let secs = Duration::from_secs;
        let given = trend_settings(Some(secs(100)), Some(secs(30)), Some(secs(2)), secs(100));
        assert_eq!(given.steady_from, 32.0);
        let default = trend_settings(Some(secs(100)), None, Some(secs(2)), secs(100));
        assert_eq!(default.steady_from, 12.0);
    }

    #[test]
    fn empty_histograms_are_null_not_zero() {
        let p = Percentiles::of(&crate::stats::histogram());
        assert_eq!(p.count, 0);
        assert_eq!(p.p99, None);
        let json = serde_json::to_value(&p).unwrap();
        assert!(json["p99"].is_null());
    }

    #[test]
    fn percentiles_in_seconds() {
        let mut h = crate::stats::histogram();
        for ms in 1..=1000u64 {
            crate::stats::record(&mut h, Duration::from_millis(ms));
        }
        let p = Percentiles::of(&h);
        assert_eq!(p.count, 1000);
        assert!((p.p50.unwrap() - 0.5).abs() < 0.001, "{p:?}");
        assert!((p.p99.unwrap() - 0.99).abs() < 0.001, "{p:?}");
        assert!((p.max.unwrap() - 1.0).abs() < 0.001, "{p:?}");
        assert_eq!(human(Some(0.000_25)), "250µs");
        assert_eq!(human(Some(0.0123)), "12.30ms");
        assert_eq!(human(Some(2.5)), "2.50s");
    }
}
