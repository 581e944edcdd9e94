//! The server watch: the server's own figures, read where it runs (its
//! exposition, an exporter, the Prometheus that scrapes its pods, or
//! /proc and its cgroup on this host), put on the timeline beside soakd's
//! own, trended and judged like them.
//!
//! The reads run on a thread of their own, every `--target-metrics-interval`:
//! a scrape that hangs, crawls or answers 50 MB holds that thread (each
//! read has a deadline and a body cap, `netio::fetch`), never a worker or
//! the control loop, so requests to the target are never delayed by one.
//! The thread leaves its latest [`Reading`] in an inbox; the control loop
//! takes it once a tick ([`Watcher::apply`]) and files each value under
//! its series in the timeline (a column of the points' `watch`, the series
//! table capped at `MAX_SERIES`), counts each source's reads and failures
//! by reason, marks a failing source stale (said once in the log, and
//! once when it is back), and turns a restart of the server into an event
//! and a cut in its series' slopes.
//!
//! [`Watcher::start`] reads every source once before anything is opened:
//! an endpoint that does not answer, a query Prometheus refuses, a
//! selector that matches nothing, a pid file without a process is exit 2,
//! naming the flag and what to fix. After that the soak goes on whatever a
//! source does.

mod local;
mod remote;

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::Error;
use crate::plan::watch::{PROCESS_WATCHES, WatchExpr, WatchPlan, WatchSpec};
use crate::stats::watch::SourceStats;
use crate::stats::{EventRecord, Totals};
use local::{Cgroup, PidFile, process_ids};
use remote::{Query, ReadError, Scrape};

/// Most restarts kept per series (a server restarted every minute for a
/// week is still 100 cuts; its events are counted all the same).
const MAX_RESTARTS: usize = 100;

/// One value read.
#[derive(Clone, Debug, PartialEq)]
pub struct Value {
    /// The watch (index into [`Watcher::names`]).
    pub watch: usize,
    /// The source (index into [`Watcher::sources`]).
    pub source: usize,
    /// The series' labels, as the source gave them.
    pub labels: Vec<(String, String)>,
    /// The value, in the watch's unit.
    pub value: f64,
}

/// A restart of the server seen at a source.
#[derive(Clone, Debug, PartialEq)]
pub struct Restart {
    /// The source (index into [`Watcher::sources`]).
    pub source: usize,
    /// The watch whose series it cuts (a query's pods replaced), or
    /// `None`: every series of the source (the process restarted).
    pub watch: Option<usize>,
    /// What showed it, in words.
    pub why: String,
}

/// What one round of reads brought.
#[derive(Debug, Default)]
pub struct Reading {
    /// The values read.
    pub values: Vec<Value>,
    /// Restarts seen.
    pub restarts: Vec<Restart>,
    /// Each read: the source and how it failed (`None`: it did not).
    outcomes: Vec<(usize, Option<ReadError>)>,
}

impl Reading {
    /// A later reading over an earlier one the control loop has not taken
    /// yet: the newer values win, restarts and outcomes add (bounded).
    fn absorb(&mut self, newer: Reading) {
        self.values = newer.values;
        self.restarts.extend(newer.restarts);
        self.outcomes.extend(newer.outcomes);
        self.restarts.truncate(1000);
        if self.outcomes.len() > 1000 {
            self.outcomes.drain(..self.outcomes.len() - 1000);
        }
    }
}

/// A source of the watch.
enum Source {
    Scrape(Scrape),
    Query(Query),
    PidFile(PidFile),
    Cgroup(Cgroup),
}

/// The sources and what to read of them: the reading thread's state.
struct Reader {
    sources: Vec<Source>,
    /// Each plan watch, by index in the names.
    watches: Vec<(usize, WatchSpec)>,
    /// The process watches' indices (rss, fds, cpu).
    process: [usize; 3],
}

impl Reader {
    /// One round: every source read once.
    fn read(&mut self) -> (Reading, Vec<Vec<usize>>) {
        let mut r = Reading::default();
        let mut matched = Vec::with_capacity(self.sources.len());
        let scraped: Vec<(usize, &WatchSpec)> = self
            .watches
            .iter()
            .filter(|(_, w)| !matches!(w.expr, WatchExpr::Query(_)))
            .map(|(i, w)| (*i, w))
            .collect();
        let queried: Vec<(usize, &WatchSpec)> = self
            .watches
            .iter()
            .filter(|(_, w)| matches!(w.expr, WatchExpr::Query(_)))
            .map(|(i, w)| (*i, w))
            .collect();
        for (i, s) in self.sources.iter_mut().enumerate() {
            let got = match s {
                Source::Scrape(x) => x.read(&scraped, &mut r, i),
                Source::Query(x) => x.read(&queried, &mut r, i),
                Source::PidFile(x) => x.read(self.process, &mut r, i).map(|()| Vec::new()),
                Source::Cgroup(x) => x.read(self.process, &mut r, i).map(|()| Vec::new()),
            };
            match got {
                Ok(m) => {
                    matched.push(m);
                    r.outcomes.push((i, None));
                }
                Err(e) => {
                    matched.push(Vec::new());
                    r.outcomes.push((i, Some(e)));
                }
            }
        }
        (r, matched)
    }
}

/// What the reading thread and the control loop share.
#[derive(Default)]
struct Shared {
    inbox: Mutex<(Option<Reading>, bool)>,
    wake: Condvar,
}

/// The watch of a run: its reading thread and what the control loop
/// keeps of it.
pub struct Watcher {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    /// Every watch's name (the plan's, then the process watches').
    names: Vec<String>,
    /// Each watch's unit, by name index.
    units: Vec<&'static str>,
    /// Each source: its label and kind.
    sources: Vec<(String, &'static str)>,
    /// The latest value of each series (by the timeline's column; NaN
    /// while stale or never read), for /metrics.
    pub latest: Vec<f64>,
}

impl Watcher {
    /// Opens every source of `plan` and reads it once (exit 2 on what the
    /// operator must fix), then starts the reading thread; `None` without
    /// a watch.
    pub fn start(plan: &WatchPlan) -> Result<Option<Watcher>, Error> {
        if plan.is_empty() {
            return Ok(None);
        }
        let mut names: Vec<String> = plan.watches.iter().map(|w| w.name.clone()).collect();
        let mut units: Vec<&'static str> = plan.watches.iter().map(|w| w.unit.name()).collect();
        for (n, u) in PROCESS_WATCHES {
            names.push(n.to_string());
            units.push(u.name());
        }
        let watches: Vec<(usize, WatchSpec)> = plan.watches.iter().cloned().enumerate().collect();
        let process = process_ids(&names[plan.watches.len()..]).map(|i| i + plan.watches.len());
        let timeout = plan.timeout();
        let mut sources = Vec::new();
        let mut labels = Vec::new();
        for e in &plan.endpoints {
            sources.push(Source::Scrape(Scrape::new(e, timeout)));
            labels.push((e.url.as_str().to_string(), "metrics"));
        }
        if let Some(p) = &plan.prometheus {
            sources.push(Source::Query(Query::new(p, timeout)));
            labels.push((p.url.as_str().to_string(), "prometheus"));
        }
        for p in &plan.pidfiles {
            sources.push(Source::PidFile(PidFile::new(p)));
            labels.push((p.display().to_string(), "pidfile"));
        }
        for c in &plan.cgroups {
            let flag = if c.path.is_empty() {
                "--target-unit"
            } else {
                "--target-cgroup"
            };
            let g = Cgroup::open(c).map_err(|why| Error::Usage(format!("{flag} {}: {why}", c.given)))?;
            sources.push(Source::Cgroup(g));
            labels.push((c.given.clone(), "cgroup"));
        }
        let mut reader = Reader {
            sources,
            watches,
            process,
        };
        let (first, matched) = reader.read();
        check_first(plan, &labels, &first, &matched)?;
        let shared = Arc::new(Shared::default());
        shared.inbox.lock().unwrap_or_else(|p| p.into_inner()).0 = Some(first);
        let thread = {
            let shared = shared.clone();
            let every = plan.interval;
            std::thread::Builder::new()
                .name("soakd-watch".into())
                .spawn(move || read_loop(reader, &shared, every))
                .map_err(|e| Error::Usage(format!("cannot start the server watch's thread: {e}")))?
        };
        Ok(Some(Watcher {
            shared,
            thread: Some(thread),
            names,
            units,
            sources: labels,
            latest: Vec::new(),
        }))
    }

    /// The latest reading, if one came since the last call.
    pub fn take(&self) -> Option<Reading> {
        self.shared.inbox.lock().unwrap_or_else(|p| p.into_inner()).0.take()
    }

    /// Files `r` into the run at `elapsed`: values into the timeline's
    /// columns, reads and failures into the sources' counts, restarts into
    /// their series and the events. Returns lines for the log (a source
    /// gone stale or back, a restart, the series cap reached).
    pub fn apply(&mut self, r: Reading, totals: &mut Totals, elapsed: Duration) -> Vec<String> {
        let mut notes = Vec::new();
        for (label, kind) in &self.sources {
            if !totals.watch_sources.iter().any(|s| &s.source == label) {
                totals.watch_sources.push(SourceStats {
                    source: label.clone(),
                    kind: (*kind).to_string(),
                    ..SourceStats::default()
                });
            }
        }
        let at = elapsed.as_secs_f64();
        let dropped_before = totals.timeline.series().dropped;
        for v in &r.values {
            let source = &self.sources[v.source].0;
            let table = totals.timeline.series_mut();
            let Some(col) = table.column(&self.names[v.watch], source, &v.labels, self.units[v.watch]) else {
                continue;
            };
            totals.timeline.watched(col, v.value);
            if self.latest.len() <= col {
                self.latest.resize(col + 1, f64::NAN);
            }
            self.latest[col] = v.value;
        }
        if dropped_before == 0 && totals.timeline.series().dropped > 0 {
            notes.push(format!(
                "the server watch keeps {} series; more are not kept (the report counts them): narrow the --watch queries",
                crate::stats::watch::MAX_SERIES
            ));
        }
        for (i, why) in r.outcomes {
            let label = &self.sources[i].0;
            let Some(s) = totals.watch_sources.iter_mut().find(|s| &s.source == label) else {
                continue;
            };
            s.reads += 1;
            match why {
                None if s.stale => {
                    s.stale = false;
                    notes.push(format!("watch source {label} answers again"));
                }
                None => {}
                Some(e) => {
                    *s.failures.entry(e.reason.to_string()).or_default() += 1;
                    if !s.stale {
                        notes.push(format!(
                            "watch source {label} failed ({}: {}); its series are stale until it answers",
                            e.reason, e.detail
                        ));
                    }
                    s.stale = true;
                    s.last_error = Some(e.detail);
                    // Stale series show nothing on /metrics.
                    let table = totals.timeline.series();
                    for (col, info) in table.series.iter().enumerate() {
                        if &info.source == label && col < self.latest.len() {
                            self.latest[col] = f64::NAN;
                        }
                    }
                }
            }
        }
        for Restart { source, watch, why } in r.restarts {
            let label = self.sources[source].0.clone();
            let name = watch.map(|w| self.names[w].as_str());
            for info in totals
                .timeline
                .series_mut()
                .series
                .iter_mut()
                .filter(|s| s.source == label && name.is_none_or(|n| s.watch == n))
            {
                if info.restarts.len() < MAX_RESTARTS {
                    info.restarts.push(at);
                }
            }
            if let Some(s) = totals.watch_sources.iter_mut().find(|s| s.source == label) {
                s.restarts += 1;
            }
            if totals.events.len() < crate::observe::events::MAX_EVENTS {
                totals.events.push(EventRecord {
                    name: format!("server restart ({label})"),
                    source: "watch".into(),
                    at,
                    status: why.clone(),
                    ..EventRecord::default()
                });
            }
            notes.push(format!("the server at {label} restarted: {why}"));
        }
        notes
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.shared.inbox.lock().unwrap_or_else(|p| p.into_inner()).1 = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The reading thread: a round every `every`, its reading left in the
/// inbox, until the watcher is dropped.
fn read_loop(mut reader: Reader, shared: &Shared, every: Duration) {
    let start = Instant::now();
    let mut round = 1u32;
    loop {
        let due = start + every * round;
        {
            let mut inbox = shared.inbox.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                if inbox.1 {
                    return;
                }
                let now = Instant::now();
                if now >= due {
                    break;
                }
                inbox = shared
                    .wake
                    .wait_timeout(inbox, due - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        }
        let (reading, _) = reader.read();
        let mut inbox = shared.inbox.lock().unwrap_or_else(|p| p.into_inner());
        match inbox.0.as_mut() {
            Some(waiting) => waiting.absorb(reading),
            None => inbox.0 = Some(reading),
        }
        drop(inbox);
        // A round that took longer than the interval skips the rounds it
        // ran into rather than catching up in a burst.
        let next = (start.elapsed().as_secs_f64() / every.as_secs_f64()).floor() as u32 + 1;
        round = next.max(round + 1);
    }
}

/// The first round's verdict: every source answered, and every watch
/// matched something where it is read.
fn check_first(
    plan: &WatchPlan,
    labels: &[(String, &'static str)],
    first: &Reading,
    matched: &[Vec<usize>],
) -> Result<(), Error> {
    for (i, why) in &first.outcomes {
        let Some(e) = why else { continue };
        let (label, kind) = &labels[*i];
        let flag = match *kind {
            "metrics" => "--target-metrics",
            "prometheus" => "--prometheus",
            "pidfile" => "--target-pidfile",
            _ => "--target-cgroup/--target-unit",
        };
        let hint = match (e.reason, *kind) {
            ("query", _) => "; fix the --watch query".to_string(),
            ("token", _) => String::new(),
            (_, "metrics") => "; is the server (or its exporter) serving its metrics there?".to_string(),
            (_, "prometheus") => "; is a Prometheus server listening there?".to_string(),
            _ => String::new(),
        };
        return Err(Error::Usage(format!("{flag} {label}: {}{hint}", e.detail)));
    }
    let mut any_default = vec![false; labels.len()];
    for (w_index, w) in plan.watches.iter().enumerate() {
        let query = matches!(w.expr, WatchExpr::Query(_));
        for (i, (label, kind)) in labels.iter().enumerate() {
            if (*kind == "prometheus") != query || !matches!(*kind, "metrics" | "prometheus") {
                continue;
            }
            let reads = plan.watches[..w_index]
                .iter()
                .filter(|x| matches!(x.expr, WatchExpr::Query(_)) == query)
                .count();
            let n = matched[i].get(reads).copied().unwrap_or(0);
            if plan.defaulted {
                any_default[i] |= n > 0;
                continue;
            }
            if n == 0 {
                let what = match &w.expr {
                    WatchExpr::Query(q) => format!("the query {q:?} answers no series now"),
                    WatchExpr::Select(s) | WatchExpr::Rate(s) => {
                        format!("{} with these labels is not in its exposition", s.metric)
                    }
                };
                return Err(Error::Usage(format!(
                    "--watch {}: at {label} {what}; check the name and the label matchers (curl {label} shows what it has)",
                    w.name
                )));
            }
        }
    }
    if plan.defaulted
        && let Some(i) = (0..labels.len()).find(|&i| labels[i].1 == "metrics" && !any_default[i])
    {
        return Err(Error::Usage(format!(
            "--target-metrics {}: it has neither process_resident_memory_bytes nor process_open_fds, the watches taken without --watch; say what to watch, e.g. --watch 'heap=jvm_memory_used_bytes{{area=\"heap\"}}'",
            labels[i].0
        )));
    }
    Ok(())
}
