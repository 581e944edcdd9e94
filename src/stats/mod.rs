//! Counting without sharing: per-thread counters and histograms, merged off
//! the hot path.
//!
//! A worker records every request into its own [`WorkloadStats`] (plain
//! integers and HdrHistograms, no atomics, no locks). A few times a second it
//! adds those deltas into its [`Mailbox`] under a mutex that only it and the
//! aggregator ever take, then clears them. The aggregator (the control
//! thread) drains every mailbox into running totals, which the report, the
//! status line and the exporter read. So a request costs a few increments
//! and one histogram record; a lock is taken per flush, not per request.
//!
//! Histograms record microseconds from 1 µs to 1 hour with 3 significant
//! digits (0.1% precision). Values above an hour are clamped to the top so a
//! week-long run can never fail to record; counts are `u64`, so a bucket
//! cannot saturate in any run shorter than centuries.

pub mod events;
mod grpc;
mod h2;
pub mod judge;
mod kinds;
pub mod outage;
mod point_counts;
pub mod rank;
mod resources;
pub mod saved;
mod series;
mod sparse;
mod timeline;
mod timeline_json;
mod totals;
pub mod trend;
mod trend_input;
pub mod trends;
pub mod trends_text;
pub mod watch;
mod ws;

use std::sync::Mutex;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

pub use events::{Disruptions, EventRecord};
pub use grpc::GrpcStreamStats;
pub use h2::H2Stats;
pub use kinds::{CheckKind, CloseReason, ErrorKind, StatusClass};
pub use outage::{Excursion, Outage, Outages};
pub use timeline::{MAX_POINTS, MAX_WORKLOADS, ProcSample, Resources, Timeline};
pub use timeline_json::{PointJson, TimelineJson, one_line_each};
pub use ws::WsStats;
// WebSocket: silences per timeline interval
pub use timeline::BASE_INTERVAL;

/// Significant digits of the per-request histograms: 1% precision at a
/// tenth of the memory of the workload's (a workload may have 64 requests,
/// each with a histogram on every worker).
const REQUEST_HIST_DIGITS: u8 = 2;
pub use saved::{Restart, TotalsSaved};
pub use totals::Totals;

/// Highest value the histograms track, in microseconds (1 hour).
pub const HIST_MAX_US: u64 = 3_600_000_000;

/// Plain event counters of one workload. Serialized as they are into a
/// `--state` checkpoint ([`saved`]), so a counter added here is carried
/// across a restart without another list.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Counters {
    /// Successful connects.
    pub opened: u64,
    /// Closes of established connections, by [`CloseReason`].
    pub closed: [u64; CloseReason::COUNT],
    /// Connect attempts started.
    pub connects_started: u64,
    /// Requests issued on a connection.
    pub sent: u64,
    /// Complete final responses.
    pub completed: u64,
    /// Requests that were sent and then lost to an error.
    pub failed: u64,
    /// Scheduled requests dropped because they were already older than the
    /// request timeout when a connection became free (open/paced modes).
    pub missed: u64,
    /// Responses by class: 1xx .. 5xx (a status outside 100..599 counts as 5xx).
    pub responses: [u64; StatusClass::COUNT],
    /// Errors by [`ErrorKind`], in [`ErrorKind::ALL`] order.
    #[serde(deserialize_with = "kinds::counts_from_older")]
    pub errors: [u64; ErrorKind::COUNT],
    /// Bytes written.
    pub bytes_sent: u64,
    /// Bytes read.
    pub bytes_received: u64,
    /// Completed TLS handshakes: [full, resumed].
    pub tls_handshakes: [u64; 2],
    // HTTP/2's counts are in [`H2Stats`], beside these (see its module).
}

/// HTTP/2 error codes, the label set of the HTTP/2 counters.
pub use crate::wire::h2::ErrorCode as H2Code;

impl Counters {
    /// Adds `other` into `self`.
    pub fn add(&mut self, o: &Counters) {
        self.opened += o.opened;
        self.connects_started += o.connects_started;
        self.sent += o.sent;
        self.completed += o.completed;
        self.failed += o.failed;
        self.missed += o.missed;
        self.bytes_sent += o.bytes_sent;
        self.bytes_received += o.bytes_received;
        self.tls_handshakes[0] += o.tls_handshakes[0];
        self.tls_handshakes[1] += o.tls_handshakes[1];
        for (a, b) in self.closed.iter_mut().zip(o.closed) {
            *a += b;
        }
        for (a, b) in self.responses.iter_mut().zip(o.responses) {
            *a += b;
        }
        for (a, b) in self.errors.iter_mut().zip(o.errors) {
            *a += b;
        }
    }

    /// Counts one error of `kind`.
    #[inline]
    pub fn error(&mut self, kind: ErrorKind, n: u64) {
        self.errors[kind as usize] += n;
    }

    /// Errors of `kind`.
    pub fn errors_of(&self, kind: ErrorKind) -> u64 {
        self.errors[kind as usize]
    }

    /// All errors.
    pub fn total_errors(&self) -> u64 {
        self.errors.iter().sum()
    }

    /// All closes.
    pub fn total_closed(&self) -> u64 {
        self.closed.iter().sum()
    }

    /// Counts one complete response with `status`.
    #[inline]
    pub fn response(&mut self, status: u16) {
        self.responses[StatusClass::of(status) as usize] += 1;
    }
}

/// A new histogram with soakd's bounds (1 µs to 1 h, 3 significant digits).
///
/// Sized by what it holds: it starts covering 1–2,047 µs (16 KiB) and
/// grows, by whole doublings, to the largest value recorded or added, at
/// most [`HIST_MAX_US`] (188 KiB). Made for the whole range at once, every
/// one of the two or three dozen histograms of a process cost its 188 KiB
/// even for a run whose latencies never pass a millisecond: ~7 MB of a
/// process holding one connection, most of soakd's memory per connection
/// when a million are held as 67 processes (issue 41). A histogram grows
/// only when a value a doubling past its largest arrives, so it allocates
/// at most 21 times in its life, none once the run's range is seen; it
/// never shrinks (a reset keeps its size), so the memory stays that of the
/// run's largest latency, bounded by the full size.
pub fn histogram() -> Histogram<u64> {
    sized(3)
}

/// A growing histogram of `digits` significant digits from 1 µs (see
/// [`histogram`]).
pub(crate) fn sized(digits: u8) -> Histogram<u64> {
    // 1 and 3 (or 2) digits are bounds that hdrhistogram accepts.
    Histogram::new(digits).expect("valid histogram bounds")
}

/// A histogram read from a file (a report, an HDR log, a checkpoint) made
/// to grow like [`histogram`]'s, so adding a larger one to it cannot fail.
pub fn growing(mut h: Histogram<u64>) -> Histogram<u64> {
    h.auto(true);
    h
}

/// Records `us` microseconds, clamped into soakd's range (1 µs to 1 h):
/// the histogram grows to hold it (one that cannot grow, read from a file,
/// keeps it at its top).
#[inline]
pub fn record_us(h: &mut Histogram<u64>, us: u64) {
    let us = us.clamp(1, HIST_MAX_US);
    if h.record(us).is_err() {
        h.saturating_record(us);
    }
}

#[cfg(test)]
/// Records a duration in microseconds, clamped into the histogram's range so
/// recording can never fail.
#[inline]
pub fn record(h: &mut Histogram<u64>, d: Duration) {
    record_us(h, d.as_micros() as u64);
}

/// Records a nanosecond span (the engine's clock unit).
#[inline]
pub fn record_ns(h: &mut Histogram<u64>, ns: u64) {
    record_us(h, ns / 1_000);
}

/// A histogram of the metrics' latency window (the quantile gauges over
/// the last seconds): 2 significant digits (1%), growing like
/// [`histogram`]'s. A workload keeps a dozen of them (a second each and
/// their sum), so at 3 digits they were most of its memory once its
/// latencies reach seconds (issue 41); a gauge read at 1% is the
/// per-request histograms' precision.
pub fn window_histogram() -> Histogram<u64> {
    sized(REQUEST_HIST_DIGITS)
}

/// A new per-request histogram (2 significant digits, growing like
/// [`histogram`]'s).
pub fn request_histogram() -> Histogram<u64> {
    sized(REQUEST_HIST_DIGITS)
}

/// Counters of one request of a workload's mix.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct RequestStats {
    /// Complete responses (mixes only; see [`WorkloadStats::request`]).
    pub completed: u64,
    /// Responses by class (mixes only).
    pub responses: [u64; StatusClass::COUNT],
    /// Failed checks by [`CheckKind`].
    pub checks: [u64; CheckKind::COUNT],
    /// Latency, µs (mixes only).
    #[serde(with = "saved::hist")]
    pub latency: Histogram<u64>,
    /// gRPC calls that ended, by status code (mixes of methods only).
    pub grpc_calls: [u64; crate::wire::grpc::Code::COUNT],
}

impl Default for RequestStats {
    fn default() -> Self {
        RequestStats {
            completed: 0,
            responses: [0; StatusClass::COUNT],
            checks: [0; CheckKind::COUNT],
            latency: request_histogram(),
            grpc_calls: [0; crate::wire::grpc::Code::COUNT],
        }
    }
}

impl RequestStats {
    /// Adds `other` into `self`.
    pub fn add(&mut self, o: &RequestStats) {
        self.completed += o.completed;
        for (a, b) in self.responses.iter_mut().zip(o.responses) {
            *a += b;
        }
        for (a, b) in self.checks.iter_mut().zip(o.checks) {
            *a += b;
        }
        for (a, b) in self.grpc_calls.iter_mut().zip(o.grpc_calls) {
            *a += b;
        }
        if !o.latency.is_empty() {
            self.latency.add(&o.latency).expect("histograms share bounds");
        }
    }

    /// Counts the failed checks of one response (a bit set of
    /// [`CheckKind`]s).
    #[inline]
    pub fn failed(&mut self, bits: u8) {
        for (k, n) in self.checks.iter_mut().enumerate() {
            *n += u64::from(bits >> k & 1);
        }
    }
}

/// One request's figures, whether the workload has a mix or one request.
#[derive(Clone, Copy, Debug)]
pub struct RequestView<'a> {
    /// Complete responses.
    pub completed: u64,
    /// Responses by class.
    pub responses: [u64; StatusClass::COUNT],
    /// Failed checks by kind.
    pub checks: [u64; CheckKind::COUNT],
    /// Latency, µs.
    pub latency: &'a Histogram<u64>,
    /// gRPC calls that ended, by status code.
    pub grpc_calls: [u64; crate::wire::grpc::Code::COUNT],
}

/// Counters and histograms of one workload: what the report is built
/// from, and what a `--state` checkpoint carries (histograms in
/// HdrHistogram's compressed V2 encoding, see [`saved`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkloadStats {
    /// Event counters.
    pub counters: Counters,
    /// Request latency (from due time in paced/open modes, from write in
    /// closed loop), µs.
    #[serde(with = "saved::hist")]
    pub latency: Histogram<u64>,
    /// Due → written, µs (paced/open modes only).
    #[serde(with = "saved::hist")]
    pub lag: Histogram<u64>,
    /// TCP connect time, µs.
    #[serde(with = "saved::hist")]
    pub connect: Histogram<u64>,
    /// TLS handshake time (after the TCP connect), µs.
    #[serde(with = "saved::hist")]
    pub tls_handshake: Histogram<u64>,
    /// Per request of the workload (see [`WorkloadStats::request`]).
    pub requests: Vec<RequestStats>,
    /// WebSocket figures (zero for HTTP workloads).
    pub ws: WsStats,
    /// HTTP/2 figures: `None` until a worker counted an HTTP/2 event for
    /// the workload (see [`H2Stats`]), so HTTP/1.1 carries none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub h2: Option<Box<H2Stats>>,
    /// Held gRPC streams' figures (`--stream subscribe`): `None` until a
    /// worker opened one for the workload (see [`GrpcStreamStats`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<Box<GrpcStreamStats>>,
}

impl Default for WorkloadStats {
    fn default() -> Self {
        WorkloadStats {
            counters: Counters::default(),
            latency: histogram(),
            lag: histogram(),
            connect: histogram(),
            tls_handshake: histogram(),
            requests: Vec::new(),
            ws: WsStats::default(),
            h2: None,
            grpc: None,
        }
    }
}

impl WorkloadStats {
    /// Stats of a workload with `requests` requests.
    pub fn with_requests(requests: usize) -> WorkloadStats {
        let mut s = WorkloadStats::default();
        s.set_requests(requests);
        s
    }

    /// Room for `n` requests (a reload may change the mix).
    pub fn set_requests(&mut self, n: usize) {
        self.requests.resize_with(n, RequestStats::default);
    }

    /// Request `i`'s figures. A workload of one request does not count
    /// per request on the hot path (that would cost every request twice):
    /// its one request's figures are the workload's.
    pub fn request(&self, i: usize) -> RequestView<'_> {
        let r = &self.requests[i];
        if self.requests.len() == 1 {
            RequestView {
                completed: self.counters.completed,
                responses: self.counters.responses,
                checks: r.checks,
                latency: &self.latency,
                grpc_calls: self
                    .h2
                    .as_deref()
                    .map_or([0; crate::wire::grpc::Code::COUNT], |h| h.grpc_calls),
            }
        } else {
            RequestView {
                completed: r.completed,
                responses: r.responses,
                checks: r.checks,
                latency: &r.latency,
                grpc_calls: r.grpc_calls,
            }
        }
    }

    /// The HTTP/2 counters, made the first time (once per workload and
    /// worker, at its first GOAWAY, RST_STREAM or retry; kept by
    /// [`WorkloadStats::clear`]).
    #[inline]
    pub fn h2_mut(&mut self) -> &mut H2Stats {
        self.h2.get_or_insert_with(Box::default)
    }

    /// The held-stream figures, made the first time (once per workload
    /// and worker, when its first stream opens; kept by
    /// [`WorkloadStats::clear`]).
    #[inline]
    pub fn grpc_mut(&mut self) -> &mut GrpcStreamStats {
        self.grpc.get_or_insert_with(Box::default)
    }

    /// Failed checks over all requests, by kind.
    pub fn check_failures(&self) -> [u64; CheckKind::COUNT] {
        let mut out = [0; CheckKind::COUNT];
        for r in &self.requests {
            for (a, b) in out.iter_mut().zip(r.checks) {
                *a += b;
            }
        }
        out
    }

    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &WorkloadStats) {
        self.counters.add(&other.counters);
        self.ws.add(&other.ws);
        if let Some(o) = &other.h2 {
            self.h2_mut().add(o);
        }
        if let Some(o) = &other.grpc {
            self.grpc_mut().add(o);
        }
        if self.requests.len() < other.requests.len() {
            self.set_requests(other.requests.len());
        }
        for (a, b) in self.requests.iter_mut().zip(&other.requests) {
            a.add(b);
        }
        // Same bounds on both sides, so addition cannot fail.
        for (a, b) in [
            (&mut self.latency, &other.latency),
            (&mut self.lag, &other.lag),
            (&mut self.connect, &other.connect),
            (&mut self.tls_handshake, &other.tls_handshake),
        ] {
            if !b.is_empty() {
                a.add(b).expect("histograms share bounds");
            }
        }
    }

    /// Clears everything; histograms that are already empty are not touched
    /// (clearing walks the whole counts array).
    pub fn clear(&mut self) {
        self.counters = Counters::default();
        self.ws.clear();
        if let Some(h) = self.h2.as_deref_mut() {
            *h = H2Stats::default();
        }
        if let Some(g) = self.grpc.as_deref_mut() {
            g.clear();
        }
        for r in &mut self.requests {
            r.completed = 0;
            r.responses = [0; StatusClass::COUNT];
            r.checks = [0; CheckKind::COUNT];
            r.grpc_calls = [0; crate::wire::grpc::Code::COUNT];
            if !r.latency.is_empty() {
                r.latency.reset();
            }
        }
        for h in [
            &mut self.latency,
            &mut self.lag,
            &mut self.connect,
            &mut self.tls_handshake,
        ] {
            if !h.is_empty() {
                h.reset();
            }
        }
    }
}

/// Connection slots of one workload on one worker, by state. These are
/// levels, not deltas: a flush overwrites them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Gauges {
    /// Slots the plan wants.
    pub desired: u64,
    /// Established connections.
    pub open: u64,
    /// Connects in progress (TCP, then the TLS handshake).
    pub connecting: u64,
    /// Slots waiting: backoff after an error, or a ramp token.
    pub backoff: u64,
    /// Requests in flight.
    pub in_flight: u64,
    /// The TLS version last negotiated (IANA number, 0 before any).
    pub tls_version: u16,
    /// The TLS cipher suite last negotiated (IANA number, 0 before any).
    pub tls_suite: u16,
    // HTTP/2
    /// The HTTP version last spoken on a new connection: 11 (HTTP/1.1),
    /// 20 (HTTP/2) or 30 (HTTP/3); 0 before any.
    pub http_version: u8,
    /// The lowest SETTINGS_MAX_CONCURRENT_STREAMS a server announced (0:
    /// none seen).
    pub h2_streams_limit: u32,
    /// Established connections by the HTTP version they speak: HTTP/1.1
    /// (WebSocket included), HTTP/2, HTTP/3 (see [`Gauges::http_index`]).
    pub http_open: [u64; 3],
    /// Held gRPC streams open now (`--stream subscribe`).
    pub grpc_streams: u64,
}

impl Gauges {
    /// The HTTP versions [`Gauges::http_open`] counts, as the gauges and
    /// labels name them: (`http_version`'s number, the `version` label).
    pub const HTTP_VERSIONS: [(u8, &'static str); 3] = [(11, "1.1"), (20, "2"), (30, "3")];

    /// The index in [`Gauges::http_open`] of `version` (11, 20 or 30).
    pub fn http_index(version: u8) -> usize {
        match version {
            20 => 1,
            30 => 2,
            _ => 0,
        }
    }

    /// Adds `other` into `self` (summing workers).
    pub fn add(&mut self, o: &Gauges) {
        self.desired += o.desired;
        self.open += o.open;
        self.connecting += o.connecting;
        self.backoff += o.backoff;
        self.in_flight += o.in_flight;
        // Levels, not counts: every worker reports the same session kind.
        self.tls_version = self.tls_version.max(o.tls_version);
        self.tls_suite = self.tls_suite.max(o.tls_suite);
        self.http_version = self.http_version.max(o.http_version);
        for (a, b) in self.http_open.iter_mut().zip(o.http_open) {
            *a += b;
        }
        self.grpc_streams += o.grpc_streams;
        self.h2_streams_limit = match (self.h2_streams_limit, o.h2_streams_limit) {
            (0, b) => b,
            (a, 0) => a,
            (a, b) => a.min(b),
        };
    }
}

/// What a worker hands over at each flush.
#[derive(Debug, Default)]
pub struct Delta {
    /// Per-workload deltas since the aggregator last drained the mailbox.
    pub stats: Vec<WorkloadStats>,
    /// Per-workload levels as of the last flush.
    pub gauges: Vec<Gauges>,
    /// Per workload: time since the run started at which this worker first
    /// had all of its share of the workload open.
    pub full_at: Vec<Option<Duration>>,
    /// Open connections when the stop began (all workloads), per workload.
    pub open_at_stop: Option<Vec<u64>>,
    /// The worker has no request in flight after a stop, or finished its
    /// share of `--requests`.
    pub idle: bool,
    /// The worker finished its share of `--requests`.
    pub budget_done: bool,
    /// Worker loop iterations so far; the aggregator watches it move.
    pub heartbeat: u64,
}

impl Delta {
    /// An empty delta for `workloads` workloads.
    pub fn new(workloads: usize) -> Delta {
        Delta {
            stats: (0..workloads).map(|_| WorkloadStats::default()).collect(),
            gauges: vec![Gauges::default(); workloads],
            full_at: vec![None; workloads],
            ..Delta::default()
        }
    }
}

impl Delta {
    /// Room for one more workload (a reload added it).
    pub fn add_workload(&mut self) {
        self.stats.push(WorkloadStats::default());
        self.gauges.push(Gauges::default());
        self.full_at.push(None);
    }
}

/// One worker's hand-over point to the aggregator.
pub type Mailbox = Mutex<Delta>;

#[cfg(test)]
mod tests {
    use super::*;

    /// The names and their order: a new kind goes at the end, never
    /// between (`kinds::counts_from_older` reads an older `--state`'s
    /// shorter count arrays as a prefix).
    #[test]
    fn names_are_the_contract() {
        let names: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(
            names,
            [
                "connect_refused",
                "connect_timeout",
                "connect_other",
                "addr_unavailable",
                "fd_limit",
                "reset",
                "eof",
                "timeout",
                "protocol",
                "tls_certificate",
                "tls_handshake",
                // HTTP/2
                "stream_reset",
                "goaway_error",
                "h2_protocol",
                "h2_not_negotiated",
                // WebSocket
                "ws_handshake",
                "ws_protocol",
                "ws_closed",
                "ws_ping_timeout",
                "h2_header_list_too_large",
                "h2_retries_exhausted",
                "send_stalled",
                "grpc_status",
                "too_many_pings",
                "h2_ping_timeout",
                // HTTP/3
                "quic_idle_timeout",
                "quic_stateless_reset",
                "quic_version",
                "quic_transport",
                "h3_closed",
                "h3_protocol",
            ]
        );
        for (i, k) in ErrorKind::ALL.iter().enumerate() {
            assert_eq!(*k as usize, i);
        }
        for (i, r) in CloseReason::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i);
        }
    }

    #[test]
    fn merge_adds_everything() {
        let mut a = WorkloadStats::default();
        let mut b = WorkloadStats::default();
        a.counters.completed = 2;
        a.counters.response(200);
        b.counters.response(503);
        b.counters.response(99);
        b.counters.error(ErrorKind::Reset, 3);
        record(&mut a.latency, Duration::from_millis(1));
        record(&mut b.latency, Duration::from_millis(3));
        a.add(&b);
        assert_eq!(a.counters.responses, [0, 1, 0, 0, 2]);
        assert_eq!(a.counters.errors_of(ErrorKind::Reset), 3);
        assert_eq!(a.latency.len(), 2);
        assert!(a.latency.max() >= 2_990);
        b.clear();
        assert_eq!(b.counters, Counters::default());
        assert!(b.latency.is_empty());
    }

    /// A week of latencies between 1 ms and 60 s at 50,000 requests per
    /// second fits without saturating a bucket or losing a sample, and
    /// out-of-range values are clamped rather than dropped.
    #[test]
    fn a_week_of_samples_fits() {
        let mut h = histogram();
        let per_week: u64 = 50_000 * 7 * 24 * 3600;
        let values = [1_000u64, 10_000, 250_000, 1_000_000, 60_000_000];
        for v in values {
            h.record_n(v, per_week / values.len() as u64).unwrap();
        }
        assert_eq!(h.len(), per_week / values.len() as u64 * values.len() as u64);
        assert!(h.value_at_quantile(1.0) >= 59_900_000);
        record(&mut h, Duration::from_secs(10 * 3600));
        assert!(h.max() >= HIST_MAX_US);
        record(&mut h, Duration::ZERO);
        assert_eq!(h.min(), 1);
    }
}
