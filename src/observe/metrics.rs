//! Every Prometheus metric soakd exports, declared in one place.
//!
//! The workers never touch this module. The control thread turns its
//! running totals into a [`Snapshot`] a few times a second
//! ([`Metrics::update`]); a scrape renders the latest snapshot through a
//! custom collector registered in a `prometheus` registry next to the
//! crate's process collector. So a scrape costs the workers nothing, the
//! figures are at most one aggregation tick (250 ms) old, and every series of
//! a scrape comes from the same instant.
//!
//! Label sets are closed (state, reason, code, kind, quantile) and every
//! series exists from the first scrape with 0, so `rate()` and alerts work
//! from the start. Histograms are classic Prometheus histograms built from
//! soakd's HdrHistograms with the fixed [`BUCKETS`](super::prom::BUCKETS), which put boundaries at
//! the thresholds alerts use.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use prometheus::core::{Collector, Desc};
use prometheus::proto::{self, MetricFamily, MetricType};

pub use super::procs::sample_resources;
mod baseline;
// WebSocket
mod core;
mod grpc;
mod h2;
pub mod outage;
pub mod watch;
pub mod ws;
use super::procs::{ProcStat, read_proc};
pub use super::prom::Buckets;
use super::prom::{histogram, labels, value};
use crate::stats::Totals;
use crate::stats::{self, CheckKind, Counters, Gauges, H2Stats, StatusClass};
pub use baseline::BaselineGauges;
pub use grpc::GrpcStreamSnapshot;
pub use outage::{EventSnapshot, OutageSnapshot};
pub use ws::WsSnapshot;

/// Quantiles of the window summary.
pub const WINDOW_QUANTILES: [(f64, &str); 4] = [(0.5, "0.5"), (0.9, "0.9"), (0.99, "0.99"), (0.999, "0.999")];

/// Seconds of latency the window gauge covers.
const WINDOW_SECONDS: usize = 10;

/// A worker that has not checked in for this long makes /healthz fail.
pub const STALL_AFTER: Duration = Duration::from_secs(5);

/// One request's figures as of the last update.
#[derive(Clone, Debug, Default)]
pub struct RequestSnapshot {
    /// The `request` label.
    pub name: String,
    /// Responses by class.
    pub responses: [u64; StatusClass::COUNT],
    /// Failed checks by kind.
    pub checks: [u64; CheckKind::COUNT],
    /// Latency.
    pub latency: Buckets,
    /// gRPC calls that ended, by status code.
    pub grpc_calls: [u64; crate::wire::grpc::Code::COUNT],
}

impl RequestSnapshot {
    fn empty(name: &str) -> RequestSnapshot {
        RequestSnapshot {
            name: name.to_string(),
            latency: Buckets::from_hdr(&stats::histogram()),
            ..RequestSnapshot::default()
        }
    }
}

/// One workload's figures as of the last update.
#[derive(Clone, Debug, Default)]
pub struct WorkloadSnapshot {
    /// The `target` label.
    pub name: String,
    /// Counters.
    pub counters: Counters,
    /// Connection levels.
    pub gauges: Gauges,
    /// Request latency.
    pub latency: Buckets,
    /// Per request: the labelled latency histogram, responses and checks.
    pub requests: Vec<RequestSnapshot>,
    /// Connect time.
    pub connect: Buckets,
    /// Schedule lag.
    pub lag: Buckets,
    /// TLS handshake time.
    pub tls_handshake: Buckets,
    /// Latency quantiles over the last 10 s (NaN without samples).
    pub window: [f64; 4],
    /// PIDs of the server under test (`--target-pid`).
    pub target_pids: Vec<u32>,
    /// WebSocket figures (zero for HTTP targets).
    pub ws: WsSnapshot,
    /// HTTP/2 figures (zero until the target's first HTTP/2 event).
    pub h2: H2Stats,
    /// A gRPC target's method (`package.Service/Method`; a mix's,
    /// comma-separated); `None` for other targets, which have no
    /// `soakd_grpc_*` series.
    pub grpc_method: Option<String>,
    /// A gRPC target's method of each request (several for a mix).
    pub grpc_request_methods: Vec<String>,
    /// `--h2-ping` is on: the `soakd_h2_ping*` series are rendered.
    pub h2_ping: bool,
    /// A gRPC target's held streams (zero for unary calls).
    pub grpc_streams: GrpcStreamSnapshot,
    /// `--baseline`: the baseline's figures and the verdicts against
    /// them (`None`: no baseline workload pairs with this one).
    pub baseline: Option<BaselineGauges>,
    /// Outage figures.
    pub outage: OutageSnapshot,
}

impl WorkloadSnapshot {
    /// The method of a gRPC workload that may hold streams: one method (a
    /// mix of methods holds unary calls only, and has no stream series).
    pub fn stream_method(&self) -> Option<&str> {
        self.grpc_method
            .as_deref()
            .filter(|_| self.grpc_request_methods.len() <= 1)
    }

    /// A workload before anything happened: every series at 0, the window
    /// quantiles NaN.
    fn empty(name: &str, requests: &[String], target_pids: Vec<u32>) -> WorkloadSnapshot {
        let zero = Buckets::from_hdr(&stats::histogram());
        WorkloadSnapshot {
            name: name.to_string(),
            requests: requests.iter().map(|r| RequestSnapshot::empty(r)).collect(),
            latency: zero.clone(),
            connect: zero.clone(),
            tls_handshake: zero.clone(),
            lag: zero,
            window: [f64::NAN; 4],
            target_pids,
            ws: WsSnapshot::of(&stats::WsStats::default()),
            ..WorkloadSnapshot::default()
        }
    }
}

/// What a scrape renders.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Per workload.
    pub workloads: Vec<WorkloadSnapshot>,
    /// Every worker loop checked in within [`STALL_AFTER`].
    pub healthy: bool,
    /// Config reloads: [succeeded, failed].
    pub reloads: [u64; 2],
    /// Unix time of the last successful config load (the start counts).
    pub last_reload_success: f64,
    /// Thresholds: (target label, expression, passing).
    pub thresholds: Vec<(String, String, bool)>,
    /// The `shard` and `shards` labels of `soakd_shard_info` (0 and 1
    /// unsharded).
    pub shard: [String; 2],
    /// The run's events by name.
    pub events: Vec<EventSnapshot>,
    /// The server watch.
    pub watch: watch::WatchSnapshot,
}

/// The exporter's side of the control loop: keeps the window ring and the
/// worker heartbeats, and publishes snapshots.
pub struct Metrics {
    snapshot: Arc<Mutex<Snapshot>>,
    registry: prometheus::Registry,
    ring: Vec<VecDeque<Histogram<u64>>>,
    scratch: Histogram<u64>,
    last_rotation: Instant,
    pids: Vec<Vec<u32>>,
    /// The names of the events the plan runs (series from the start).
    planned_events: Vec<String>,
}

impl Metrics {
    /// Metrics for workloads named `names`, with their requests' names and
    /// `--target-pid`s per workload, of the process that runs `shard` of the
    /// plan.
    pub fn new(names: &[String], requests: &[Vec<String>], pids: Vec<Vec<u32>>, shard: crate::plan::Shard) -> Metrics {
        let snapshot = Arc::new(Mutex::new(Snapshot {
            workloads: names
                .iter()
                .zip(requests)
                .zip(&pids)
                .map(|((n, r), p)| WorkloadSnapshot::empty(n, r, p.clone()))
                .collect(),
            healthy: true,
            reloads: [0, 0],
            last_reload_success: unix_now(),
            thresholds: Vec::new(),
            shard: [shard.index.to_string(), shard.count.to_string()],
            events: Vec::new(),
            watch: watch::WatchSnapshot::default(),
        }));
        let registry = prometheus::Registry::new();
        // Both collectors are built here with fixed, valid descriptors, so
        // registration cannot fail.
        registry
            .register(Box::new(SoakCollector::new(snapshot.clone())))
            .expect("soakd metrics register");
        registry
            .register(Box::new(prometheus::process_collector::ProcessCollector::for_self()))
            .expect("process collector registers");
        Metrics {
            snapshot,
            registry,
            ring: names
                .iter()
                .map(|_| VecDeque::with_capacity(WINDOW_SECONDS + 1))
                .collect(),
            scratch: stats::window_histogram(),
            last_rotation: Instant::now(),
            pids,
            planned_events: Vec::new(),
        }
    }

    /// The events the plan runs: their series exist from the first
    /// scrape.
    pub fn plan_events(&mut self, names: Vec<String>) {
        let mut snap = self.snapshot.lock().unwrap_or_else(|p| p.into_inner());
        snap.events = outage::events_by_name(&names, &[]);
        self.planned_events = names;
    }

    /// Publishes the totals as the new snapshot. Called after every
    /// aggregation tick.
    pub fn update(&mut self, totals: &mut Totals) {
        let now = Instant::now();
        let healthy = totals.all_alive(STALL_AFTER);
        let mut window = None;
        if now.duration_since(self.last_rotation) >= Duration::from_secs(1) {
            self.last_rotation = now;
            let mut quantiles = Vec::with_capacity(self.ring.len());
            for (ring, recent) in self.ring.iter_mut().zip(totals.window.iter_mut()) {
                // The second that leaves the window is the next second's
                // histogram: none is made or dropped once the ring is full
                // (each was ~180 KB; issue 29).
                let mut second = if ring.len() >= WINDOW_SECONDS {
                    let mut oldest = ring.pop_front().expect("the ring is full");
                    oldest.reset();
                    oldest
                } else {
                    stats::window_histogram()
                };
                std::mem::swap(&mut second, recent);
                ring.push_back(second);
                self.scratch.reset();
                for h in ring.iter() {
                    // Same bounds everywhere: addition cannot fail.
                    self.scratch.add(h).expect("histograms share bounds");
                }
                quantiles.push(WINDOW_QUANTILES.map(|(q, _)| {
                    if self.scratch.is_empty() {
                        f64::NAN
                    } else {
                        self.scratch.value_at_quantile(q) as f64 / 1e6
                    }
                }));
            }
            window = Some(quantiles);
        }
        let fresh: Vec<[Buckets; 4]> = totals
            .stats
            .iter()
            .map(|s| [&s.latency, &s.connect, &s.lag, &s.tls_handshake].map(Buckets::from_hdr))
            .collect();
        let events = outage::events_by_name(&self.planned_events, &totals.events);
        let outages: Vec<OutageSnapshot> = (0..totals.stats.len()).map(|i| OutageSnapshot::of(totals, i)).collect();
        let mut snap = self.snapshot.lock().unwrap_or_else(|p| p.into_inner());
        snap.healthy = healthy;
        snap.events = events;
        for (i, (w, [latency, connect, lag, tls_handshake])) in snap.workloads.iter_mut().zip(fresh).enumerate() {
            w.counters = totals.stats[i].counters;
            w.gauges = totals.gauges[i];
            w.latency = latency;
            w.connect = connect;
            w.lag = lag;
            w.tls_handshake = tls_handshake;
            let s = &totals.stats[i];
            w.ws.update(&s.ws);
            w.outage = outages[i].clone();
            w.h2 = s.h2.as_deref().copied().unwrap_or_default();
            w.grpc_streams = GrpcStreamSnapshot::of(s.grpc.as_deref());
            w.requests = totals.requests[i]
                .iter()
                .enumerate()
                .map(|(ri, name)| {
                    let r = s.request(ri);
                    RequestSnapshot {
                        name: name.clone(),
                        responses: r.responses,
                        checks: r.checks,
                        grpc_calls: r.grpc_calls,
                        // A single request's latency is the workload's,
                        // already converted above.
                        latency: if s.requests.len() == 1 {
                            w.latency.clone()
                        } else {
                            Buckets::from_hdr(r.latency)
                        },
                    }
                })
                .collect();
            if let Some(q) = &window {
                w.window = q[i];
            }
            w.target_pids.clone_from(&self.pids[i]);
        }
    }

    /// Room for a workload a reload added.
    pub fn add_workload(&mut self, name: &str, requests: &[String], pids: Vec<u32>) {
        self.ring.push(VecDeque::with_capacity(WINDOW_SECONDS + 1));
        self.pids.push(pids.clone());
        let mut snap = self.snapshot.lock().unwrap_or_else(|p| p.into_inner());
        snap.workloads.push(WorkloadSnapshot::empty(name, requests, pids));
    }

    /// Counts a config reload.
    pub fn reloaded(&mut self, ok: bool) {
        let mut snap = self.snapshot.lock().unwrap_or_else(|p| p.into_inner());
        snap.reloads[usize::from(!ok)] += 1;
        if ok {
            snap.last_reload_success = unix_now();
        }
    }

    /// Publishes workload `i`'s baseline gauges (see `observe::baseline`).
    pub fn set_baseline(&mut self, i: usize, gauges: BaselineGauges) {
        let mut snap = self.snapshot.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(w) = snap.workloads.get_mut(i) {
            w.baseline = Some(gauges);
        }
    }

    /// Publishes the server watch's figures.
    pub fn set_watch(&mut self, w: watch::WatchSnapshot) {
        self.snapshot.lock().unwrap_or_else(|p| p.into_inner()).watch = w;
    }

    /// Publishes the thresholds' states (see `observe::thresholds`).
    pub fn set_thresholds(&mut self, states: Vec<(String, String, bool)>) {
        self.snapshot.lock().unwrap_or_else(|p| p.into_inner()).thresholds = states;
    }

    /// The registry (soakd's collector and the process collector).
    pub fn registry(&self) -> &prometheus::Registry {
        &self.registry
    }

    /// The latest snapshot, shared with the scrape handler.
    pub fn snapshot(&self) -> Arc<Mutex<Snapshot>> {
        self.snapshot.clone()
    }
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Renders a registry in the text exposition format 0.0.4.
pub fn render(registry: &prometheus::Registry) -> Vec<u8> {
    use prometheus::Encoder;
    let mut out = Vec::with_capacity(64 * 1024);
    // Encoding plain families into a Vec cannot fail.
    prometheus::TextEncoder::new()
        .encode(&registry.gather(), &mut out)
        .expect("text encoding");
    out
}

/// One metric family: its name, help, type, labels and how its series are
/// made from the snapshot. Each family carries its own `fill`, so a family
/// cannot be declared and then silently left empty by a misspelt name.
struct Family {
    name: &'static str,
    help: &'static str,
    kind: MetricType,
    labels: &'static [&'static str],
    fill: Fill,
}

/// How a family's series are made.
enum Fill {
    /// Series per target (workload).
    Target(fn(&Series<'_>, &mut Vec<proto::Metric>)),
    /// Series about soakd itself.
    Global(fn(MetricType, &Snapshot, &mut Vec<proto::Metric>)),
}

/// What a per-target family reads: one workload's snapshot and the server
/// processes watched for it.
struct Series<'a> {
    kind: MetricType,
    t: &'a str,
    w: &'a WorkloadSnapshot,
    c: &'a Counters,
    procs: &'a [(String, ProcStat)],
}

impl Series<'_> {
    /// One series labelled with the target only.
    fn one(&self, v: u64) -> proto::Metric {
        value(self.kind, &[("target", self.t)], v as f64)
    }
}

/// Every family soakd exports, in exposition order: the one list of the
/// tables (a new table is added here and nowhere else).
fn families() -> impl Iterator<Item = &'static Family> {
    core::FAMILIES
        .iter()
        .chain(h2::FAMILIES)
        .chain(grpc::FAMILIES)
        .chain(ws::FAMILIES)
        .chain(baseline::FAMILIES)
        .chain(outage::FAMILIES)
        .chain(watch::FAMILIES)
}

/// Renders the snapshot into metric families.
struct SoakCollector {
    descs: Vec<Desc>,
    snapshot: Arc<Mutex<Snapshot>>,
}

impl SoakCollector {
    fn new(snapshot: Arc<Mutex<Snapshot>>) -> SoakCollector {
        let descs = families()
            .map(|f| {
                let labels = f.labels.iter().map(|l| l.to_string()).collect();
                Desc::new(f.name.into(), f.help.into(), labels, HashMap::new()).expect("valid metric descriptor")
            })
            .collect();
        SoakCollector { descs, snapshot }
    }
}

impl Collector for SoakCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let snap = self.snapshot.lock().unwrap_or_else(|p| p.into_inner()).clone();
        // /proc is read outside the lock, at scrape time: a vanished PID
        // simply has no series (it is missing, not an error).
        let procs: Vec<Vec<(String, ProcStat)>> = snap
            .workloads
            .iter()
            .map(|w| {
                w.target_pids
                    .iter()
                    .filter_map(|pid| Some((pid.to_string(), read_proc(*pid)?)))
                    .collect()
            })
            .collect();
        families()
            .map(|f| {
                let mut metrics = Vec::new();
                match f.fill {
                    Fill::Target(fill) => {
                        for (w, procs) in snap.workloads.iter().zip(&procs).filter(|(w, _)| ws::shown(f, w)) {
                            let series = Series {
                                kind: f.kind,
                                t: &w.name,
                                w,
                                c: &w.counters,
                                procs,
                            };
                            fill(&series, &mut metrics);
                        }
                    }
                    Fill::Global(fill) => fill(f.kind, &snap, &mut metrics),
                }
                let mut fam = MetricFamily::default();
                fam.set_name(f.name.into());
                fam.set_help(f.help.into());
                fam.set_field_type(f.kind);
                fam.set_metric(metrics);
                fam
            })
            .filter(|fam| !fam.get_metric().is_empty())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::prom::BUCKETS;
    use super::*;

    /// Every request × check series and a latency histogram per request
    /// exist before anything happened.
    #[test]
    fn request_series_exist_from_the_start() {
        let m = Metrics::new(
            &["api".to_string()],
            &[vec!["list".to_string(), "GET /health".to_string()]],
            vec![Vec::new()],
            crate::plan::Shard::WHOLE,
        );
        let text = String::from_utf8(render(m.registry())).unwrap();
        for request in ["list", "GET /health"] {
            for check in CheckKind::ALL {
                let series = format!(
                    "soakd_check_failures_total{{target=\"api\",request=\"{request}\",check=\"{}\"}} 0",
                    check.name()
                );
                assert!(text.contains(&series), "{series} missing");
            }
            let count = format!("soakd_request_duration_seconds_count{{target=\"api\",request=\"{request}\"}} 0");
            assert!(text.contains(&count), "{count} missing");
            let ok = format!("soakd_responses_total{{target=\"api\",request=\"{request}\",code=\"2xx\"}} 0");
            assert!(text.contains(&ok), "{ok} missing");
        }
    }

    /// The recent-latency window turns over a second at a time for a
    /// whole soak: once it holds its seconds, the second that leaves it is
    /// the next one's histogram, and an update makes no large allocation
    /// (issue 29).
    #[test]
    fn the_window_turns_over_without_allocating() {
        let names = ["api".to_string()];
        let mut m = Metrics::new(
            &names,
            &[vec!["GET /".to_string()]],
            vec![Vec::new()],
            crate::plan::Shard::WHOLE,
        );
        let mut totals = Totals::new(names.to_vec(), 1, false, false);
        let mut large = Vec::new();
        for _ in 0..WINDOW_SECONDS + 5 {
            stats::record(&mut totals.window[0], Duration::from_millis(3));
            // As if a second went by since the last turn.
            m.last_rotation = Instant::now() - Duration::from_secs(1);
            let before = crate::test_alloc::large_allocations();
            m.update(&mut totals);
            large.push(crate::test_alloc::large_allocations() - before);
        }
        assert_eq!(m.ring[0].len(), WINDOW_SECONDS);
        // A workload with no held streams shows them as an empty histogram.
        assert_eq!(Buckets::zero(), Buckets::from_hdr(&stats::histogram()));
        assert_eq!(
            large[WINDOW_SECONDS..],
            [0; 5],
            "large allocations per update: {large:?}"
        );
    }

    #[test]
    fn buckets_have_the_alert_thresholds_and_stay_small() {
        // Mind the series per target: each histogram is BUCKETS + 3.
        assert!(BUCKETS.len() <= 56);
        assert!(BUCKETS.windows(2).all(|w| w[0] < w[1]));
        for t in [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0] {
            assert!(BUCKETS.contains(&t), "missing boundary {t}");
        }
        assert_eq!((BUCKETS[0], BUCKETS[BUCKETS.len() - 1]), (0.00001, 60.0));
        // Below 1 s no step is more than 28%: a quantile read between
        // two bounds is off by at most that, about half of it on average.
        let below_1s: Vec<f64> = BUCKETS.iter().copied().take_while(|b| *b <= 1.0).collect();
        assert!(below_1s.windows(2).all(|w| w[1] / w[0] <= 1.285), "{below_1s:?}");
    }

    #[test]
    fn buckets_from_hdr_are_cumulative_and_respect_boundaries() {
        let mut h = stats::histogram();
        stats::record(&mut h, Duration::from_millis(1));
        stats::record(&mut h, Duration::from_micros(1_100));
        stats::record(&mut h, Duration::from_secs(1));
        stats::record(&mut h, Duration::from_secs(120));
        let b = Buckets::from_hdr(&h);
        let at = |bound: f64| b.cumulative[BUCKETS.iter().position(|x| *x == bound).unwrap()];
        assert_eq!(at(0.0005), 0);
        assert_eq!(at(0.001), 1, "exactly 1 ms is within le=0.001");
        assert_eq!(at(0.00125), 2);
        assert_eq!(at(1.0), 3);
        assert_eq!(at(60.0), 3, "120 s is only in +Inf");
        assert_eq!(b.count, 4);
        assert!((b.sum - 121.0021).abs() < 0.2, "{}", b.sum);
    }

    /// A smooth latency distribution read back through Prometheus'
    /// `histogram_quantile` (linear interpolation within a bucket) lands
    /// within 10% of the HDR value between 1 ms and 1 s.
    #[test]
    fn histogram_quantile_p99_is_within_ten_percent_of_hdr() {
        for median_ms in [2.0f64, 7.0, 30.0, 120.0, 450.0] {
            let mut h = stats::histogram();
            let mut rng = fastrand::Rng::with_seed(median_ms as u64);
            for _ in 0..100_000 {
                // Log-normal-ish: median × e^(0.5·N(0,1)).
                let n: f64 = (0..12).map(|_| rng.f64()).sum::<f64>() - 6.0;
                let ms = median_ms * (0.5 * n).exp();
                stats::record(&mut h, Duration::from_secs_f64(ms / 1e3));
            }
            let exact = h.value_at_quantile(0.99) as f64 / 1e6;
            let b = Buckets::from_hdr(&h);
            let rank = 0.99 * b.count as f64;
            let i = b.cumulative.iter().position(|c| *c as f64 >= rank).unwrap();
            let (lo, below) = if i == 0 {
                (0.0, 0)
            } else {
                (BUCKETS[i - 1], b.cumulative[i - 1])
            };
            let inside = (b.cumulative[i] - below) as f64;
            let estimate = lo + (BUCKETS[i] - lo) * (rank - below as f64) / inside;
            let err = (estimate - exact).abs() / exact;
            if (0.001..=1.0).contains(&exact) {
                assert!(
                    err < 0.10,
                    "median {median_ms} ms: p99 exact {exact}, from buckets {estimate}"
                );
            }
        }
    }
}
