//! `soakd merge`: the reports (and HDR interval logs) of a plan's shards
//! combined into one, as if one process had run the whole plan.
//!
//! Counts add; the run time is the longest shard's; percentiles are not
//! averaged (that would be wrong) but recomputed from the shards' full-run
//! HdrHistograms, which every report carries (`workloads[].histograms`), so
//! the merged distribution loses nothing. Peak open connections add the
//! shards' peaks (sampled at different moments, an upper bound); requests
//! per second add, as the shards ran side by side.
//!
//! Reports are read through the one reader of report files
//! ([`report::read`]) and fields this version does not know are ignored,
//! so a report from a newer soakd (with more sections) still merges into
//! the sections listed here; a section merge does not know is left out of
//! the merged report rather than copied from one shard. The merged HDR log
//! is written whole or not at all, like every file soakd writes whole
//! ([`crate::fsio`]).
//!
//! Per-request figures (a mix's `by_request`) add their counts; their
//! quantiles, like a timeline point's, are the worst shard's.
//!
//! Timelines align by wall clock: each shard's point is placed by its
//! start (`timeline.started_at` plus `t`) on a grid from the earliest
//! shard's start, at the coarsest shard's interval. Counts add exactly; a
//! shard's connections open count at the end of the grid step (its last
//! point there) and its fewest open add across shards. A point's latency
//! quantiles cannot be recomputed from quantiles, so the merged point
//! shows the worst shard's (an upper bound, never an average); the
//! whole-run percentiles above are exact.
//!
//! HDR interval logs merge by tag and interval: each interval's wall-clock
//! start (the log's base time plus its offset) is placed on the 10 s grid
//! of the earliest log, and the histograms of one tag in one place add.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use hdrhistogram::Histogram;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, IntervalLogWriterBuilder, LogEntry, Tag};
use hdrhistogram::serialization::{Deserializer, V2DeflateSerializer};

use crate::Error;
use crate::report::{self, Figures, Histograms, Percentiles, Report, RequestReport, ShardReport, WorkloadReport};
use crate::stats::watch::SeriesTable;
use crate::stats::{Disruptions, PointJson, TimelineJson};

/// Reads every report and merges them; `what` of each is its path.
pub fn merge_files(paths: &[PathBuf]) -> Result<Report, Error> {
    let mut reports = Vec::with_capacity(paths.len());
    for p in paths {
        reports.push((p.display().to_string(), report::read(p, "")?));
    }
    merge(&reports)
}

/// Merges shard reports of one plan (name, report). Refused (usage error):
/// no report, reports of different plans (workload names or URLs, shard
/// counts), the same shard twice, an already merged report.
pub fn merge(reports: &[(String, Report)]) -> Result<Report, Error> {
    let Some((first_name, first)) = reports.first() else {
        return Err(Error::Usage("soakd merge needs at least one report".into()));
    };
    let plan_of =
        |r: &Report| -> Vec<(String, String)> { r.workloads.iter().map(|w| (w.name.clone(), w.url.clone())).collect() };
    let mut shards: Vec<u32> = Vec::new();
    for (name, r) in reports {
        if plan_of(r) != plan_of(first) {
            return Err(Error::Usage(format!(
                "{name} and {first_name} are reports of different plans (workloads {:?} vs {:?}); merge only the shards of one plan",
                plan_of(r),
                plan_of(first)
            )));
        }
        if r.shard.count != first.shard.count {
            return Err(Error::Usage(format!(
                "{name} is a shard of {} but {first_name} of {}; merge only the shards of one plan",
                r.shard.count, first.shard.count
            )));
        }
        let Some(index) = r.shard.index else {
            return Err(Error::Usage(format!(
                "{name} is already a merged report; merge the shards' own reports"
            )));
        };
        if shards.contains(&index) {
            return Err(Error::Usage(format!(
                "shard {index}/{} is given twice ({name}); give each shard's report once",
                r.shard.count
            )));
        }
        shards.push(index);
    }
    shards.sort_unstable();
    let missing: Vec<u32> = (0..first.shard.count).filter(|i| !shards.contains(i)).collect();
    if !missing.is_empty() {
        eprintln!(
            "soakd merge: note: shard(s) {missing:?} of {} are not among the reports; the merged figures cover {} of the plan's {} shards",
            first.shard.count,
            shards.len(),
            first.shard.count
        );
    }
    let mut workloads = Vec::with_capacity(first.workloads.len());
    let mut all_hist = Decoded::empty();
    for wi in 0..first.workloads.len() {
        let mut figures: Option<Figures> = None;
        let mut hist = Decoded::empty();
        for (name, r) in reports {
            let w = &r.workloads[wi];
            hist.add(&Decoded::of(&w.histograms, name, &w.name)?)
                .map_err(|e| Error::Usage(format!("{name}: workload {}: {e}", w.name)))?;
            figures = Some(match figures {
                None => w.figures.clone(),
                Some(f) => plus(&f, &w.figures),
            });
        }
        let mut figures = figures.expect("at least one report");
        hist.set_percentiles(&mut figures);
        // WebSocket: the shards' sections combined (None when no shard
        // has one, i.e. an HTTP workload).
        let ws_parts: Vec<&crate::report::WsFigures> = reports
            .iter()
            .filter_map(|(_, r)| r.workloads[wi].ws.as_ref())
            .collect();
        let ws = (!ws_parts.is_empty()).then(|| crate::report::WsFigures::merge(&ws_parts, &figures.latency_seconds));
        all_hist
            .add(&hist)
            .map_err(|e| Error::Usage(format!("workload {}: {e}", first.workloads[wi].name)))?;
        workloads.push(WorkloadReport {
            name: first.workloads[wi].name.clone(),
            url: first.workloads[wi].url.clone(),
            // Every shard states the whole plan's load.
            load: first.workloads[wi].load.clone(),
            figures,
            histograms: hist.encode(),
            by_request: merge_requests(reports.iter().map(|(_, r)| &r.workloads[wi].by_request)),
            http: reports
                .iter()
                .fold(Default::default(), |a: crate::report::HttpFigures, (_, r)| {
                    a.plus(&r.workloads[wi].http)
                }),
            ws,
        });
    }
    let mut all = reports[1..]
        .iter()
        .fold(first.all.clone(), |acc, (_, r)| plus(&acc, &r.all));
    all_hist.set_percentiles(&mut all);
    let timeline = merge_timelines(reports.iter().map(|(_, r)| &r.timeline));
    let server = merge_server(reports, &timeline);
    Ok(Report {
        duration_seconds: reports.iter().map(|(_, r)| r.duration_seconds).fold(0.0, f64::max),
        shard: ShardReport {
            index: None,
            count: first.shard.count,
            merged: shards,
        },
        all,
        workloads,
        // A shard's plan text describes its share only; the merged report
        // has none rather than one shard's.
        plan: String::new(),
        timeline,
        // Thresholds judge one process's figures; the merged report is
        // not judged again (each shard's report has its own verdicts).
        thresholds: Vec::new(),
        aborted: reports.iter().find_map(|(_, r)| r.aborted.clone()),
        hdr_log: None,
        // Trends are each shard's (its own target processes and soakd's
        // own memory); the merged report has none rather than a mix.
        trends: Default::default(),
        // Each shard's restarts are its own.
        resumed: Vec::new(),
        // Each shard judged its own share against its own baseline.
        baseline: None,
        // The server watch's series, judged again on the merged timeline
        // (shards that watched the same server share its series).
        server,
        disruptions: disruptions(reports),
    })
}

/// The shards' server sections as one: the sources' counts added, the
/// series' trends computed again from the merged timeline's values, over
/// the latest steady start of any shard.
fn merge_server(reports: &[(String, Report)], timeline: &TimelineJson) -> Option<crate::report::server::ServerSection> {
    let sections: Vec<&crate::report::server::ServerSection> =
        reports.iter().filter_map(|(_, r)| r.server.as_ref()).collect();
    if sections.is_empty() {
        return None;
    }
    let mut sources: Vec<crate::stats::watch::SourceStats> = Vec::new();
    for s in sections.iter().flat_map(|x| &x.sources) {
        match sources.iter_mut().find(|x| x.source == s.source) {
            Some(x) => {
                x.reads += s.reads;
                x.restarts = x.restarts.max(s.restarts);
                x.stale |= s.stale;
                for (k, v) in &s.failures {
                    *x.failures.entry(k.clone()).or_default() += v;
                }
            }
            None => sources.push(s.clone()),
        }
    }
    let settings = crate::stats::trends::Settings {
        steady_from: sections.iter().map(|x| x.steady_from_seconds).fold(0.0, f64::max),
        until: reports.iter().map(|(_, r)| r.duration_seconds).fold(0.0, f64::max),
        significance: crate::plan::defaults::SIGNIFICANCE,
        error_rate_floor: crate::plan::defaults::MIN_ERROR_RATE_CHANGE,
    };
    let input = crate::stats::trends::TrendInput::of_json(timeline);
    crate::report::server::ServerSection::build(&input, &timeline.series, &sources, &settings)
}

/// The shards' outages, excursions and events in one list each, on the
/// earliest shard's clock (each shard found its own: its share of the
/// connections went down with the target), attributed again over every
/// shard's events.
fn disruptions(reports: &[(String, Report)]) -> Disruptions {
    let starts = reports.iter().map(|(_, r)| r.timeline.started_at_unix_seconds);
    let base = starts.filter(|s| *s > 0.0).fold(f64::MAX, f64::min);
    let mut out = Disruptions::default();
    for (_, r) in reports {
        let shift = if base < f64::MAX && r.timeline.started_at_unix_seconds > 0.0 {
            r.timeline.started_at_unix_seconds - base
        } else {
            0.0
        };
        let d = &r.disruptions;
        out.outages.extend(d.outages.iter().cloned().map(|mut o| {
            o.start += shift;
            o.end = o.end.map(|e| e + shift);
            o
        }));
        out.excursions.extend(d.excursions.iter().cloned().map(|mut x| {
            x.start += shift;
            x.end = x.end.map(|e| e + shift);
            x
        }));
        out.events.extend(d.events.iter().cloned().map(|mut e| {
            e.at += shift;
            e.end = e.end.map(|t| t + shift);
            e
        }));
    }
    out.outages.sort_by(|a, b| a.start.total_cmp(&b.start));
    out.excursions.sort_by(|a, b| a.start.total_cmp(&b.start));
    out.events.sort_by(|a, b| a.at.total_cmp(&b.at));
    out.attribute(crate::plan::defaults::EVENT_WINDOW.as_secs_f64());
    out
}

/// The shards' per-request figures of one workload, request by request
/// (the shards run one plan, so one list of requests).
fn merge_requests<'a>(mut lists: impl Iterator<Item = &'a Vec<RequestReport>>) -> Vec<RequestReport> {
    let first = lists.next().cloned().unwrap_or_default();
    lists.fold(first, |acc, list| {
        acc.iter().zip(list).map(|(a, b)| plus_request(a, b)).collect()
    })
}

/// The shards' timelines on one wall-clock grid (see the module doc).
fn merge_timelines<'a>(timelines: impl Iterator<Item = &'a TimelineJson>) -> TimelineJson {
    let timelines: Vec<&TimelineJson> = timelines.filter(|t| !t.points.is_empty()).collect();
    let Some(first) = timelines
        .iter()
        .min_by(|a, b| a.started_at_unix_seconds.total_cmp(&b.started_at_unix_seconds))
    else {
        return TimelineJson::default();
    };
    let base = first.started_at_unix_seconds;
    let step = timelines.iter().map(|t| t.interval_seconds).fold(0.0, f64::max);
    if step <= 0.0 {
        return TimelineJson::default();
    }
    // Grid step -> the merged point; per shard first, so that a shard with
    // finer points counts its open connections once per step.
    let mut merged: BTreeMap<u64, PointJson> = BTreeMap::new();
    let mut series = SeriesTable::default();
    for t in &timelines {
        let offset = t.started_at_unix_seconds - base;
        // The shard's watched columns in the merged table (shards that
        // watched the same server share its series), restarts moved to
        // the merged clock.
        let columns: Vec<Option<usize>> = t
            .series
            .series
            .iter()
            .map(|s| {
                let labels: Vec<(String, String)> = s.labels.clone().into_iter().collect();
                let col = series.column(&s.watch, &s.source, &labels, &s.unit)?;
                let restarts = &mut series.series[col].restarts;
                for r in s.restarts.iter().map(|r| r + offset) {
                    if !restarts.iter().any(|x| (x - r).abs() < 1.0) {
                        restarts.push(r);
                    }
                }
                restarts.sort_by(f64::total_cmp);
                Some(col)
            })
            .collect();
        series.dropped += t.series.dropped;
        let mut own: BTreeMap<u64, PointJson> = BTreeMap::new();
        for p in &t.points {
            let mut p = p.clone();
            p.watch = remap(&p.watch, &columns);
            let p = &p;
            // A millisecond of slack: starts are rounded to it.
            let at = ((offset + p.t) / step + 1e-3 / step).floor().max(0.0) as u64;
            match own.get_mut(&at) {
                None => {
                    own.insert(at, p.clone());
                }
                Some(q) => {
                    add_counts(q, p);
                    q.open = p.open;
                    q.open_min = q.open_min.min(p.open_min);
                    worst_quantiles(q, p);
                    overlay_watch(q, p);
                }
            }
        }
        for (at, p) in own {
            match merged.get_mut(&at) {
                None => {
                    merged.insert(at, p);
                }
                Some(q) => {
                    add_counts(q, &p);
                    q.open += p.open;
                    q.open_min += p.open_min;
                    worst_quantiles(q, &p);
                    overlay_watch(q, &p);
                }
            }
        }
    }
    let end = timelines
        .iter()
        .flat_map(|t| {
            t.points
                .last()
                .map(|p| t.started_at_unix_seconds - base + p.t + p.seconds)
        })
        .fold(0.0, f64::max);
    let points = merged
        .into_iter()
        .map(|(at, mut p)| {
            p.t = at as f64 * step;
            p.seconds = step.min(end - p.t).max(0.0);
            p
        })
        .collect();
    TimelineJson {
        started_at: first.started_at.clone(),
        started_at_unix_seconds: base,
        interval_seconds: step,
        max_points: timelines.iter().map(|t| t.max_points).max().unwrap_or(0),
        points,
        series,
    }
}

/// A point's watched values in the merged table's columns.
fn remap(values: &[Option<f64>], columns: &[Option<usize>]) -> Vec<Option<f64>> {
    let mut out = Vec::new();
    for (v, col) in values.iter().zip(columns) {
        if let (Some(v), Some(col)) = (v, col) {
            if out.len() <= *col {
                out.resize(col + 1, None);
            }
            out[*col] = Some(*v);
        }
    }
    out
}

/// `p`'s watched values over `into`'s where `p` has one (the later read
/// of a step, or another shard's read of the same series).
fn overlay_watch(into: &mut PointJson, p: &PointJson) {
    if into.watch.len() < p.watch.len() {
        into.watch.resize(p.watch.len(), None);
    }
    for (a, b) in into.watch.iter_mut().zip(&p.watch) {
        if b.is_some() {
            *a = *b;
        }
    }
}

fn add_counts(into: &mut PointJson, p: &PointJson) {
    into.sent += p.sent;
    into.completed += p.completed;
    for (k, v) in &p.responses {
        *into.responses.entry(k.clone()).or_default() += v;
    }
    for (k, v) in &p.errors {
        *into.errors.entry(k.clone()).or_default() += v;
    }
    // Per workload (runs with several): counts add, quantiles the worse.
    if into.workloads.len() < p.workloads.len() {
        into.workloads.resize(p.workloads.len(), Default::default());
    }
    for (a, b) in into.workloads.iter_mut().zip(&p.workloads) {
        a.completed += b.completed;
        a.errors += b.errors;
        a.p50 = worst(a.p50, b.p50);
        a.p99 = worst(a.p99, b.p99);
    }
}

/// The larger of two quantiles, or the one there is.
fn worst(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

fn worst_quantiles(into: &mut PointJson, p: &PointJson) {
    into.p50 = worst(into.p50, p.p50);
    into.p90 = worst(into.p90, p.p90);
    into.p99 = worst(into.p99, p.p99);
    into.max = worst(into.max, p.max);
    into.lag_p99 = worst(into.lag_p99, p.lag_p99);
}

/// The four histograms of a workload, decoded.
struct Decoded([Histogram<u64>; 4]);

impl Decoded {
    fn empty() -> Decoded {
        Decoded(std::array::from_fn(|_| crate::stats::histogram()))
    }

    fn of(h: &Histograms, report: &str, workload: &str) -> Result<Decoded, Error> {
        let one = |text: &str, what: &str| {
            report::decode(text).ok_or_else(|| {
                Error::Usage(format!(
                    "{report}: workload {workload}: histograms.{what} is not an encoded HdrHistogram; give a report from `soakd run --report`"
                ))
            })
        };
        Ok(Decoded([
            one(&h.latency, "latency")?,
            one(&h.schedule_lag, "schedule_lag")?,
            one(&h.connect, "connect")?,
            one(&h.tls_handshake, "tls_handshake")?,
        ]))
    }

    /// Adds `other`; refused when its values lie past soakd's histogram
    /// range (1 µs to 1 h), which no soakd report has.
    fn add(&mut self, other: &Decoded) -> Result<(), String> {
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            a.add(b)
                .map_err(|e| format!("a histogram past soakd's range ({e:?}); give soakd's own reports"))?;
        }
        Ok(())
    }

    fn set_percentiles(&self, f: &mut Figures) {
        let [lat, lag, conn, tls] = &self.0;
        f.latency_seconds = Percentiles::of(lat);
        f.schedule_lag_seconds = Percentiles::of(lag);
        f.connect_seconds = Percentiles::of(conn);
        f.tls_handshake_seconds = Percentiles::of(tls);
    }

    fn encode(&self) -> Histograms {
        let [lat, lag, conn, tls] = &self.0;
        Histograms {
            latency: report::encode(lat),
            schedule_lag: report::encode(lag),
            connect: report::encode(conn),
            tls_handshake: report::encode(tls),
        }
    }
}

/// The counts of `a` and `b` added; percentiles are set afterwards.
fn plus(a: &Figures, b: &Figures) -> Figures {
    let (ca, cb) = (&a.connections, &b.connections);
    let (ra, rb) = (&a.requests, &b.requests);
    let mut f = a.clone();
    f.connections.desired = ca.desired + cb.desired;
    f.connections.peak_open = ca.peak_open + cb.peak_open;
    f.connections.open_at_end = ca.open_at_end + cb.open_at_end;
    f.connections.opened = ca.opened + cb.opened;
    f.connections.closed = ca.closed + cb.closed;
    // The plan is ramped up when its slowest shard is.
    f.connections.ramp_seconds = ca.ramp_seconds.zip(cb.ramp_seconds).map(|(x, y)| x.max(y));
    f.connections.closed_by_reason = ca.closed_by_reason.plus(&cb.closed_by_reason);
    f.requests.sent = ra.sent + rb.sent;
    f.requests.completed = ra.completed + rb.completed;
    f.requests.failed = ra.failed + rb.failed;
    f.requests.missed = ra.missed + rb.missed;
    f.requests.in_flight_at_end = ra.in_flight_at_end + rb.in_flight_at_end;
    f.requests.per_second = ra.per_second + rb.per_second;
    f.requests_per_connection = if f.connections.opened > 0 {
        f.requests.completed as f64 / f.connections.opened as f64
    } else {
        0.0
    };
    f.responses = a.responses.plus(&b.responses);
    f.errors = a.errors.plus(&b.errors);
    f.checks = a.checks.plus(&b.checks);
    f.bytes.sent = a.bytes.sent + b.bytes.sent;
    f.bytes.received = a.bytes.received + b.bytes.received;
    f.tls = match (&a.tls, &b.tls) {
        (Some(x), Some(y)) => {
            let mut t = x.clone();
            t.handshakes += y.handshakes;
            t.resumed += y.resumed;
            t.verified &= y.verified;
            t.version = t.version.or_else(|| y.version.clone());
            t.cipher = t.cipher.or_else(|| y.cipher.clone());
            Some(t)
        }
        (x, y) => x.clone().or_else(|| y.clone()),
    };
    f
}

/// Two shards' figures of one request. A request's own histogram is not in
/// the report, so its merged percentiles cannot be exact: count and mean
/// are, min and max are, and the other quantiles are the worse shard's (an
/// upper bound, never an average).
fn plus_request(a: &RequestReport, b: &RequestReport) -> RequestReport {
    let (la, lb) = (&a.latency_seconds, &b.latency_seconds);
    let pick = |x: Option<f64>, y: Option<f64>, f: fn(f64, f64) -> f64| match (x, y) {
        (Some(x), Some(y)) => Some(f(x, y)),
        (x, y) => x.or(y),
    };
    let count = la.count + lb.count;
    let mean = match (la.mean, lb.mean) {
        (Some(x), Some(y)) if count > 0 => Some((x * la.count as f64 + y * lb.count as f64) / count as f64),
        (x, y) => x.or(y),
    };
    RequestReport {
        name: a.name.clone(),
        weight: a.weight,
        count: a.count + b.count,
        per_second: a.per_second + b.per_second,
        latency_seconds: Percentiles {
            count,
            min: pick(la.min, lb.min, f64::min),
            mean,
            p50: pick(la.p50, lb.p50, f64::max),
            p90: pick(la.p90, lb.p90, f64::max),
            p99: pick(la.p99, lb.p99, f64::max),
            p999: pick(la.p999, lb.p999, f64::max),
            max: pick(la.max, lb.max, f64::max),
        },
        responses: a.responses.plus(&b.responses),
        checks: a.checks.plus(&b.checks),
        grpc_calls: match (&a.grpc_calls, &b.grpc_calls) {
            (Some(x), Some(y)) => {
                let mut sum = x.clone();
                for (code, n) in y {
                    *sum.entry(code.clone()).or_default() += n;
                }
                Some(sum)
            }
            (x, y) => x.clone().or_else(|| y.clone()),
        },
    }
}

/// One interval as read from a log: tag, start (from the log's base
/// time), length, histogram.
type Entry = (String, Duration, Duration, Histogram<u64>);

/// One interval of one tag, on the merged grid.
struct Slot {
    length: Duration,
    histogram: Histogram<u64>,
}

/// Merges HDR interval logs (`soakd run --hdr-log`) into `out`; returns
/// the number of intervals written.
pub fn merge_hdr_logs(inputs: &[PathBuf], out: &Path) -> Result<usize, Error> {
    // Per input: its base time (seconds since the epoch) and entries.
    let mut logs: Vec<(Duration, Vec<Entry>)> = Vec::new();
    // The interval length each input states in its header.
    let mut stated = Vec::new();
    for path in inputs {
        let bytes = std::fs::read(path)
            .map_err(|e| Error::Usage(format!("--hdr-log {}: cannot read it ({e})", path.display())))?;
        stated.push(crate::observe::stated_interval(&bytes));
        let bad = |why: String| {
            Error::Usage(format!(
                "--hdr-log {}: {why}; give a log written by `soakd run --hdr-log`",
                path.display()
            ))
        };
        let (mut start, mut base) = (None, None);
        let mut entries = Vec::new();
        for entry in IntervalLogIterator::new(&bytes) {
            match entry.map_err(|e| bad(format!("not an HdrHistogram interval log ({e:?})")))? {
                LogEntry::StartTime(t) => start = Some(t),
                LogEntry::BaseTime(t) => base = Some(t),
                LogEntry::Interval(h) => {
                    use base64::Engine as _;
                    let raw = base64::engine::general_purpose::STANDARD
                        .decode(h.encoded_histogram())
                        .map_err(|_| bad("an interval is not base64".into()))?;
                    let hist: Histogram<u64> = Deserializer::new()
                        .deserialize(&mut std::io::Cursor::new(raw))
                        .map(crate::stats::growing)
                        .map_err(|e| bad(format!("an interval does not decode ({e:?})")))?;
                    let tag = h.tag().map_or(String::new(), |t| t.as_str().to_string());
                    entries.push((tag, h.start_timestamp(), h.duration(), hist));
                }
            }
        }
        let Some(base) = base.or(start) else {
            return Err(bad("no StartTime or BaseTime header".into()));
        };
        logs.push((base, entries));
    }
    let origin = logs.iter().map(|(b, _)| *b).min().unwrap_or_default();
    // The grid intervals are placed on: the logs' own interval length
    // (`--hdr-log-interval`), i.e. their longest one (only the last of a
    // run is shorter).
    let interval = logs
        .iter()
        .flat_map(|(_, e)| e.iter().map(|(_, _, length, _)| *length))
        .max()
        .filter(|d| !d.is_zero())
        .unwrap_or(crate::plan::defaults::HDR_LOG_INTERVAL);
    let mut merged: BTreeMap<(u64, String), Slot> = BTreeMap::new();
    for (base, entries) in logs {
        for (tag, start, length, hist) in entries {
            let at = (base + start).saturating_sub(origin);
            let place = (at.as_secs_f64() / interval.as_secs_f64()).round() as u64;
            let slot = merged.entry((place, tag.clone())).or_insert_with(|| Slot {
                length: Duration::ZERO,
                histogram: crate::stats::histogram(),
            });
            slot.length = slot.length.max(length);
            slot.histogram.add(&hist).map_err(|e| {
                Error::Usage(format!(
                    "--hdr-log: tag {tag:?}: an interval past soakd's histogram range ({e:?}); give soakd's own logs"
                ))
            })?;
        }
    }
    // The header states the shards' interval (`--hdr-log-interval`) as
    // their headers do; logs that do not all state the same one get the
    // grid's length measured above.
    let said = match stated.split_first() {
        Some((Some(first), rest)) if rest.iter().all(|s| s == &Some(*first)) => *first,
        _ => interval,
    };
    crate::fsio::check_writable(out)
        .map_err(|e| Error::Usage(format!("--hdr-log-out {}: cannot create it ({e})", out.display())))?;
    let mut w: Vec<u8> = Vec::new();
    let mut ser = V2DeflateSerializer::new();
    let when = SystemTime::UNIX_EPOCH + origin;
    let failed = |e: String| Error::io(format!("writing {}", out.display()), std::io::Error::other(e));
    let mut log = IntervalLogWriterBuilder::new()
        .add_comment(&crate::observe::header_comment(
            &format!(
                "soakd merge: {} interval logs, request latency in microseconds, one interval per tag",
                inputs.len()
            ),
            said,
        ))
        .with_start_time(when)
        .with_base_time(when)
        .with_max_value_divisor(1e6)
        .begin_log_with(&mut w, &mut ser)
        .map_err(|e| failed(e.to_string()))?;
    for ((place, tag), slot) in &merged {
        log.write_histogram(&slot.histogram, interval * *place as u32, slot.length, Tag::new(tag))
            .map_err(|e| failed(format!("{e:?}")))?;
    }
    drop(log);
    crate::fsio::write_atomic(out, &w).map_err(|e| Error::io(format!("writing {}", out.display()), e))?;
    Ok(merged.len())
}

#[cfg(test)]
mod tests {
    fn point(t: f64, completed: u64, open: u64, p99: f64) -> PointJson {
        PointJson {
            t,
            seconds: 1.0,
            sent: completed,
            completed,
            responses: [("2xx".to_string(), completed)].into(),
            errors: Default::default(),
            open,
            open_min: open,
            p50: Some(p99 / 2.0),
            p90: Some(p99),
            p99: Some(p99),
            max: Some(p99),
            lag_p99: None,
            ..Default::default()
        }
    }

    fn timeline(start: f64, interval: f64, points: Vec<PointJson>) -> TimelineJson {
        TimelineJson {
            started_at: format!("@{start}"),
            started_at_unix_seconds: start,
            interval_seconds: interval,
            max_points: 1000,
            points,
            series: Default::default(),
        }
    }

    #[test]
    fn timelines_align_by_wall_clock_and_counts_add() {
        // Shard b started 1 s after a; shard c coarsened to 2 s points.
        let a = timeline(100.0, 1.0, (0..4).map(|i| point(i as f64, 10, 5, 0.010)).collect());
        let b = timeline(101.0, 1.0, (0..3).map(|i| point(i as f64, 20, 7, 0.030)).collect());
        let c = timeline(100.0, 2.0, vec![point(0.0, 40, 3, 0.020), point(2.0, 40, 3, 0.020)]);
        let m = merge_timelines([&a, &b, &c].into_iter());
        assert_eq!(m.interval_seconds, 2.0, "the coarsest shard's interval");
        assert_eq!(m.started_at, "@100");
        let total = |t: &TimelineJson| t.points.iter().map(|p| p.completed).sum::<u64>();
        assert_eq!(total(&m), total(&a) + total(&b) + total(&c));
        assert_eq!(m.points.len(), 2);
        // Step 0 (100–102 s): a's 2 points, b's first, c's first.
        assert_eq!(m.points[0].completed, 10 + 10 + 20 + 40);
        assert_eq!(m.points[0].responses["2xx"], 80);
        // Open: each shard's last point in the step, added; not a's twice.
        assert_eq!(m.points[0].open, 5 + 7 + 3);
        // Quantiles: the worst shard's.
        assert_eq!(m.points[0].p99, Some(0.030));
        assert_eq!(m.points[1].t, 2.0);
        assert!(merge_timelines(std::iter::empty()).points.is_empty());
    }

    use super::*;

    fn report(index: u32, count: u32, values_ms: &[u64], name: &str) -> Report {
        let mut h = crate::stats::histogram();
        for v in values_ms {
            h.record(v * 1000).unwrap();
        }
        let hist = Histograms {
            latency: report::encode(&h),
            schedule_lag: report::encode(&crate::stats::histogram()),
            connect: report::encode(&crate::stats::histogram()),
            tls_handshake: report::encode(&crate::stats::histogram()),
        };
        // The figures, the same at the top and for the one workload; the
        // percentiles are stale on purpose (merge recomputes them).
        let figures = serde_json::json!({
            "connections": {"desired": 3, "peak_open": 3, "open_at_end": 3, "opened": 3, "closed": 3, "ramp_seconds": 0.5,
                            "closed_by_reason": {"server_close": 0, "error": 0, "churn": 0, "shutdown": 3}},
            "requests": {"sent": values_ms.len(), "completed": values_ms.len(), "failed": 0, "missed": 0, "in_flight_at_end": 0, "per_second": 1.0},
            "requests_per_connection": 1.0,
            "responses": {"1xx": 0, "2xx": values_ms.len(), "3xx": 0, "4xx": 0, "5xx": 0},
            "errors": {"reset": 1},
            "latency_seconds": {"count": 0}, "schedule_lag_seconds": {"count": 0},
            "connect_seconds": {"count": 0}, "tls_handshake_seconds": {"count": 0},
            "tls": null,
            "bytes": {"sent": 10, "received": 20},
        });
        let mut workload = figures.clone();
        workload["name"] = name.into();
        workload["url"] = "http://127.0.0.1:1/".into();
        workload["histograms"] = serde_json::to_value(hist).unwrap();
        let mut json = figures;
        json["duration_seconds"] = (10.0 + index as f64).into();
        json["shard"] = serde_json::json!({"index": index, "count": count});
        // A section this version does not know (a newer soakd's) is ignored.
        json["a_future_section"] = serde_json::json!([{"a": 1}]);
        json["workloads"] = serde_json::json!([workload]);
        serde_json::from_value(json).expect("a report with an unknown field still reads")
    }

    #[test]
    fn counts_add_and_percentiles_come_from_the_merged_histograms() {
        let a = report(0, 2, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10], "w");
        let b = report(1, 2, &[100; 10], "w");
        let m = merge(&[("a".into(), a), ("b".into(), b)]).unwrap();
        assert_eq!(m.all.connections.desired, 6);
        assert_eq!(m.all.requests.completed, 20);
        assert_eq!(m.all.errors.get("reset"), 2);
        assert_eq!(m.all.responses.get("2xx"), 20);
        assert_eq!(m.duration_seconds, 11.0);
        assert_eq!(m.shard.merged, [0, 1]);
        let p = &m.workloads[0].figures.latency_seconds;
        assert_eq!(p.count, 20);
        // Half the samples are 100 ms: the median of the merged
        // distribution is 10 ms, its p90 100 ms (no averaging of shards).
        assert!((p.p50.unwrap() - 0.010).abs() < 1e-4, "{p:?}");
        assert!((p.p90.unwrap() - 0.100).abs() < 1e-3, "{p:?}");
        assert_eq!(m.all.latency_seconds, *p);
        // The merged report reads back and merges no further.
        let again: Report = serde_json::from_str(&m.to_json()).unwrap();
        let e = merge(&[("m".into(), again)]).unwrap_err().to_string();
        assert!(e.contains("already a merged report"), "{e}");
    }

    #[test]
    fn different_plans_and_twice_the_same_shard_are_refused() {
        let e = merge(&[
            ("a".into(), report(0, 2, &[1], "w")),
            ("b".into(), report(1, 2, &[1], "v")),
        ])
        .unwrap_err();
        assert!(e.to_string().contains("different plans") && e.exit_code() == 2, "{e}");
        let e = merge(&[
            ("a".into(), report(0, 2, &[1], "w")),
            ("b".into(), report(0, 2, &[1], "w")),
        ])
        .unwrap_err();
        assert!(e.to_string().contains("given twice"), "{e}");
        let e = merge(&[
            ("a".into(), report(0, 2, &[1], "w")),
            ("b".into(), report(1, 3, &[1], "w")),
        ])
        .unwrap_err();
        assert!(e.to_string().contains("shard of 3"), "{e}");
    }
}
