//! Everything a running soak shows the world: the Prometheus registry and
//! its HTTP endpoint, the HDR interval log, the status line and systemd's
//! notify socket.
//!
//! [`Observers`] holds the ones a plan asks for and is the engine's one
//! [`Sink`]: the control loop hands it the totals every tick and tells it
//! about stops, reloads and the end, and it fans that out. Nothing in here
//! runs on a worker thread or touches a connection.

pub mod baseline;
mod event_socket;
mod events;
pub mod exporter;
mod hdrlog;
pub mod metrics;
pub mod notify;
mod procs;
mod prom;
mod status;
pub mod thresholds;
pub mod watch;

use std::io::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::Error;
use crate::engine::Sink;
use crate::plan::{Plan, Workload};
use crate::report::Report;
use crate::report::baseline::BaselineSection;
use crate::state::{Loaded, Snapshot, Writer};
use crate::stats::Totals;
use baseline::{Live, Reference};
use events::Events;
use exporter::{Exporter, Handler, Reply};
use hdrlog::HdrLog;
pub(crate) use hdrlog::{header_comment, stated_interval, tag_of};
use metrics::Metrics;
use notify::Notifier;
use status::StatusLine;
pub use status::silence;
use thresholds::Watch;

/// How often systemd's status text is refreshed.
const NOTIFY_STATUS_EVERY: Duration = Duration::from_secs(10);

/// The run's outputs, fed by the control loop.
pub struct Observers {
    metrics: Option<Metrics>,
    exporter: Option<Exporter>,
    hdr_log: Option<HdrLog>,
    thresholds: Option<Watch>,
    status: StatusLine,
    notifier: Notifier,
    linger: Duration,
    last_ping: Instant,
    /// When [`crate::heap::give_back`] last ran (elapsed run time).
    last_give_back: Duration,
    last_status: Duration,
    completed_at_status: u64,
    /// Every `--target-pid` of the plan, once each, in order: sampled into
    /// the timeline once a point.
    target_pids: Vec<u32>,
    /// `--state`: the checkpoint writer.
    checkpoint: Option<Writer>,
    /// `--baseline`: the live comparison, and where its report section
    /// goes at the end.
    baseline: Option<Live>,
    baseline_section: Arc<std::sync::Mutex<Option<BaselineSection>>>,
    /// The run ended on its own (not by a signal or a failure): its last
    /// checkpoint says it is finished.
    complete: bool,
    /// The run's events: commands to run, marks from outside.
    events: Events,
    /// The server watch, and its series' trends (see [`WatchTrends`]).
    watch: Option<WatchTrends>,
}

/// The server watch's reading thread and the trends of its series,
/// computed every [`thresholds::TREND_EVERY`] for /metrics and the watch
/// thresholds.
struct WatchTrends {
    watcher: watch::Watcher,
    /// The timeline's figures, in room made at start.
    input: crate::stats::trends::TrendInput,
    trends: Vec<crate::stats::watch::SeriesTrend>,
    last: Option<Duration>,
    /// The points' room for the series was made.
    reserved: bool,
    /// What the steady part is (the planned run time and `--warmup`).
    duration: Option<Duration>,
    warmup: Option<Duration>,
}

impl WatchTrends {
    /// Files the latest reading and, every 10 s, computes the series'
    /// trends: `true` when the series or their trends changed.
    fn tick(&mut self, totals: &mut Totals, elapsed: Duration, notes: &mut Vec<String>) -> (bool, bool) {
        if !self.reserved {
            totals.timeline.reserve_watch();
            self.reserved = true;
        }
        let mut changed = false;
        if let Some(r) = self.watcher.take() {
            notes.extend(self.watcher.apply(r, totals, elapsed));
            changed = true;
        }
        if self.last.is_some_and(|t| elapsed < t + thresholds::TREND_EVERY) {
            return (changed, false);
        }
        self.last = Some(elapsed);
        let ramp = totals
            .ramp
            .iter()
            .try_fold(Duration::ZERO, |acc, r| r.map(|r| acc.max(r)));
        totals.timeline.trend_input(&mut self.input);
        let settings = crate::report::trend_settings(self.duration, self.warmup, ramp, elapsed);
        self.trends = crate::stats::watch::analyze(&self.input, totals.timeline.series(), &settings);
        (true, true)
    }

    fn snapshot(&self, totals: &Totals) -> metrics::watch::WatchSnapshot {
        metrics::watch::WatchSnapshot::of(
            totals.timeline.series(),
            &self.watcher.latest,
            &self.trends,
            &totals.watch_sources,
        )
    }
}

/// The plan's target PIDs, each once, in the order given.
fn target_pids(workloads: &[Workload]) -> Vec<u32> {
    let mut out: Vec<u32> = Vec::new();
    for pid in workloads.iter().flat_map(|w| &w.target_pids) {
        if !out.contains(pid) {
            out.push(*pid);
        }
    }
    out
}

impl Observers {
    /// Binds the metrics endpoint, opens the HDR log and starts the
    /// `--state` writer. Done before any connection is opened: a port that
    /// cannot be had is a preflight failure (exit 2), not a surprise an
    /// hour in. `resumed`: the run continues from its state file (the
    /// live thresholds continue, the HDR log is appended to). `baseline`:
    /// what `--baseline` compares the run with, window by window.
    pub fn start(plan: &Plan, resumed: Option<&Loaded>, baseline: Option<Reference>) -> Result<Observers, Error> {
        // The server watch reads every source once first: one that cannot
        // be read is a preflight failure, before a port is bound.
        let watch = watch::Watcher::start(&plan.watch)?.map(|watcher| {
            let mut input = crate::stats::trends::TrendInput::with_room(crate::stats::MAX_POINTS + 1, 0);
            input.reserve_watch(crate::stats::MAX_POINTS + 1, crate::stats::watch::MAX_SERIES);
            WatchTrends {
                watcher,
                input,
                trends: Vec::new(),
                last: None,
                reserved: false,
                duration: plan.duration,
                warmup: plan.warmup(),
            }
        });
        let mut thresholds = Watch::new(plan);
        if let (Some(w), Some(saved)) = (thresholds.as_mut(), resumed.and_then(|l| l.window.clone())) {
            w.restore(saved);
        }
        let mut baseline = baseline.map(|r| Live::new(r, plan.abort_on_fail));
        if let (Some(b), Some(saved)) = (baseline.as_mut(), resumed.and_then(|l| l.baseline.clone())) {
            b.restore(saved);
        }
        let from = resumed.map(|l| l.now);
        let (metrics, exporter) = match plan.metrics_listen {
            Some(addr) => {
                let names: Vec<String> = plan.workloads.iter().map(|w| w.name.clone()).collect();
                let pids = plan.workloads.iter().map(|w| w.target_pids.clone()).collect();
                let requests: Vec<Vec<String>> = plan.workloads.iter().map(|w| w.request_names()).collect();
                let mut m = Metrics::new(&names, &requests, pids, plan.shard);
                for (i, w) in plan.workloads.iter().enumerate() {
                    m.mark_ws(Some(i), w.target.ws.is_some());
                    m.mark_grpc(
                        Some(i),
                        w.target.grpc.as_deref().map(|g| (g.method_name(), g.request_methods())),
                    );
                    m.mark_h2_ping(Some(i), w.h2_ping.is_some());
                }
                // A continued run's counters are where the checkpoint left
                // them from the first scrape on: Prometheus must never see
                // them drop to zero (a reset) while the engine starts.
                if let Some(l) = resumed {
                    let mut t = Totals::new(names.clone(), 0, false, false);
                    for (wi, r) in requests.iter().enumerate() {
                        t.set_requests(wi, r.clone());
                    }
                    t.restore(l.totals.clone(), l.checkpoint_at, l.now);
                    m.update(&mut t);
                }
                m.plan_events(plan.events.events.iter().map(|e| e.name.clone()).collect());
                // Every threshold's gauge exists (passing) from the first
                // scrape.
                if let Some(w) = &thresholds {
                    m.set_thresholds(w.states());
                }
                // The baseline's series too.
                for (i, g) in baseline.iter().flat_map(Live::gauges) {
                    m.set_baseline(i, g);
                }
                let e = Exporter::start(addr, scrape_handler(&m))?;
                eprintln!("soakd: metrics on http://{}/metrics", e.local_addr());
                (Some(m), Some(e))
            }
            None => (None, None),
        };
        let hdr_log = match &plan.hdr_log {
            Some(path) => Some(HdrLog::create(path, plan.hdr_log_interval, from)?),
            None => None,
        };
        let mut status = StatusLine::new();
        // A continued run's counts start where the checkpoint left them.
        let (mut completed, mut errors) = (0, 0);
        for st in resumed.iter().flat_map(|l| &l.totals.stats) {
            completed += st.counters.completed;
            errors += st.counters.total_errors();
        }
        status.continue_at(from.unwrap_or_default(), errors);
        Ok(Observers {
            metrics,
            exporter,
            hdr_log,
            thresholds,
            status,
            notifier: Notifier::from_env(),
            linger: plan.metrics_linger,
            last_ping: Instant::now(),
            last_give_back: Duration::ZERO,
            last_status: from.unwrap_or_default(),
            completed_at_status: completed,
            target_pids: target_pids(&plan.workloads),
            checkpoint: Writer::start(plan, from.unwrap_or_default())?,
            complete: false,
            baseline,
            baseline_section: Live::slot(),
            events: Events::start(plan)?,
            watch,
        })
    }

    /// Where the report's `baseline` section is put when the run ends
    /// (empty without `--baseline`): the caller keeps it while the engine
    /// holds the observers.
    pub fn baseline_section(&self) -> Arc<std::sync::Mutex<Option<BaselineSection>>> {
        self.baseline_section.clone()
    }

    /// `--state`: the run as it is now, for the writer.
    fn snapshot(&mut self, totals: &Totals, elapsed: Duration, finished: bool) -> Snapshot {
        let t0 = Instant::now();
        let totals = totals.saved_reusing(self.checkpoint.as_mut().and_then(Writer::spare));
        let window = self.thresholds.as_ref().map(Watch::saved);
        Snapshot {
            at: elapsed,
            finished,
            totals,
            window,
            baseline: self.baseline.as_ref().map(Live::saved),
            taken_in: t0.elapsed(),
            last: false,
        }
    }

    /// systemd: watchdog pings only while every worker loop checks in (so a
    /// stuck loop gets soakd restarted), and a status line every 10 s.
    fn notify(&mut self, totals: &Totals, elapsed: Duration) {
        if !self.notifier.enabled() {
            return;
        }
        if let Some(every) = self.notifier.watchdog_interval()
            && self.last_ping.elapsed() >= every / 2
            && totals.all_alive(metrics::STALL_AFTER)
        {
            self.notifier.watchdog();
            self.last_ping = Instant::now();
        }
        if elapsed >= self.last_status + NOTIFY_STATUS_EVERY {
            let completed: u64 = totals.stats.iter().map(|s| s.counters.completed).sum();
            let errors: u64 = totals.stats.iter().map(|s| s.counters.total_errors()).sum();
            let (open, desired) = totals
                .gauges
                .iter()
                .fold((0, 0), |(o, d), g| (o + g.open, d + g.desired));
            let rate = (completed - self.completed_at_status) as f64 / (elapsed - self.last_status).as_secs_f64();
            self.notifier.status(&format!(
                "open {open}/{desired}, {rate:.1} req/s, {completed} completed, {errors} errors"
            ));
            self.completed_at_status = completed;
            self.last_status = elapsed;
        }
    }
}

impl Sink for Observers {
    fn started(&mut self) {
        self.notifier.ready();
    }

    fn tick(&mut self, totals: &mut Totals, elapsed: Duration) {
        for n in self.events.tick(totals, elapsed) {
            self.status.note(&n);
        }
        if totals.timeline.wants_sample() {
            // Free pages go back before soakd's RSS is read, so that the
            // sample (and soakd_rss_slope) sees what soakd holds.
            if elapsed >= self.last_give_back + crate::heap::GIVE_BACK_EVERY {
                crate::heap::give_back();
                self.last_give_back = elapsed;
            }
            totals.timeline.sample(metrics::sample_resources(&self.target_pids));
        }
        let mut judged = false;
        if let Some(wt) = self.watch.as_mut() {
            let mut notes = Vec::new();
            let (changed, trends) = wt.tick(totals, elapsed, &mut notes);
            for n in notes {
                self.status.note(&n);
            }
            if trends && let Some(w) = self.thresholds.as_mut() {
                judged = w.judge_watch(totals.timeline.series(), &wt.trends, elapsed);
            }
            if changed && let Some(m) = self.metrics.as_mut() {
                m.set_watch(wt.snapshot(totals));
            }
        }
        if let Some(w) = self.thresholds.as_mut()
            && (w.tick(totals, elapsed) || judged)
            && let Some(m) = self.metrics.as_mut()
        {
            m.set_thresholds(w.states());
        }
        if let Some(b) = self.baseline.as_mut()
            && b.tick(totals, elapsed)
            && let Some(m) = self.metrics.as_mut()
        {
            for (i, g) in b.gauges() {
                m.set_baseline(i, g);
            }
        }
        if let Some(m) = self.metrics.as_mut() {
            m.update(totals);
        }
        if let Some(log) = self.hdr_log.as_mut() {
            log.tick(totals, elapsed);
        }
        self.status.tick(totals, elapsed);
        self.notify(totals, elapsed);
        if self.checkpoint.as_ref().is_some_and(|c| c.due(elapsed)) {
            let snap = self.snapshot(totals, elapsed, false);
            if let Some(c) = self.checkpoint.as_mut() {
                c.offer(snap);
            }
        }
    }

    fn note(&mut self, msg: &str) {
        self.status.note(msg);
    }

    fn stopping(&mut self) {
        self.notifier.stopping();
    }

    fn summary(&mut self, plan: &Plan, totals: &Totals, elapsed: Duration) {
        let mut report = Report::build(plan, totals, elapsed);
        report.baseline = self.baseline.as_ref().map(Live::section);
        self.status.clear();
        let _ = std::io::stderr().write_all(report.summary().as_bytes());
    }

    fn workload_added(&mut self, w: &Workload) {
        for pid in &w.target_pids {
            if !self.target_pids.contains(pid) {
                self.target_pids.push(*pid);
            }
        }
        if let Some(m) = self.metrics.as_mut() {
            m.add_workload(&w.name, &w.request_names(), w.target_pids.clone());
            m.mark_ws(None, w.target.ws.is_some());
            m.mark_grpc(
                None,
                w.target.grpc.as_deref().map(|g| (g.method_name(), g.request_methods())),
            );
            m.mark_h2_ping(None, w.h2_ping.is_some());
        }
    }

    fn workload_changed(&mut self, i: usize, w: &Workload) {
        if let Some(m) = self.metrics.as_mut() {
            m.mark_ws(Some(i), w.target.ws.is_some());
            m.mark_h2_ping(Some(i), w.h2_ping.is_some());
        }
    }

    fn reloaded(&mut self, ok: bool) {
        if let Some(m) = self.metrics.as_mut() {
            m.reloaded(ok);
        }
    }

    fn takes_intervals(&self) -> bool {
        self.status.takes_intervals()
    }

    fn marked(&mut self) {
        self.events.signalled();
    }

    fn finish(&mut self, totals: &mut Totals, elapsed: Duration) -> Duration {
        if let Some(b) = self.baseline.as_mut() {
            b.finish(totals, elapsed);
            if let Some(m) = self.metrics.as_mut() {
                for (i, g) in b.gauges() {
                    m.set_baseline(i, g);
                }
            }
            *self.baseline_section.lock().unwrap_or_else(|p| p.into_inner()) = Some(b.section());
        }
        self.events.finish(totals, elapsed);
        if let Some(m) = self.metrics.as_mut() {
            m.update(totals);
        }
        if let Some(log) = self.hdr_log.as_mut() {
            log.finish(totals, elapsed);
        }
        // The last checkpoint: a run stopped by a signal (systemctl stop,
        // a reboot) or a failure continues at the next start; one that
        // ended on its own is finished.
        let snap = self
            .checkpoint
            .is_some()
            .then(|| self.snapshot(totals, elapsed, self.complete));
        if let (Some(c), Some(snap)) = (self.checkpoint.as_mut(), snap) {
            c.finish(snap);
        }
        if self.exporter.is_some() {
            self.linger
        } else {
            Duration::ZERO
        }
    }

    fn ended(&mut self, complete: bool) {
        self.complete = complete;
    }

    fn abort(&mut self) -> Option<String> {
        self.thresholds
            .as_ref()
            .and_then(|w| w.abort.clone())
            .or_else(|| self.baseline.as_ref().and_then(|b| b.abort.clone()))
    }

    fn close(&mut self) {
        if let Some(e) = self.exporter.take() {
            e.stop();
        }
        self.status.finish();
    }
}

/// Serves `/metrics` from the registry and `/healthz` from the snapshot's
/// worker check-ins; everything else is 404.
fn scrape_handler(metrics: &Metrics) -> Handler {
    let registry = metrics.registry().clone();
    let snapshot = metrics.snapshot();
    Arc::new(move |path: &str| match path {
        "/metrics" => Reply {
            status: 200,
            content_type: "text/plain; version=0.0.4; charset=utf-8",
            body: metrics::render(&registry),
        },
        "/healthz" => {
            if snapshot.lock().unwrap_or_else(|p| p.into_inner()).healthy {
                Reply {
                    status: 200,
                    content_type: "text/plain; charset=utf-8",
                    body: b"ok\n".to_vec(),
                }
            } else {
                Reply {
                    status: 503,
                    content_type: "text/plain; charset=utf-8",
                    body: b"a worker loop has not checked in for 5 s\n".to_vec(),
                }
            }
        }
        _ => Reply {
            status: 404,
            content_type: "text/plain; charset=utf-8",
            body: b"not found: try /metrics or /healthz\n".to_vec(),
        },
    })
}
