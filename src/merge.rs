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
//! Reports are read with serde and fields this version does not know are
//! ignored, so a report from a newer soakd (with more sections) still
//! merges into the sections listed here; a section merge does not know is
//! left out of the merged report rather than copied from one shard.
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
use crate::report::{self, Figures, Histograms, Percentiles, Report, ShardReport, WorkloadReport};

/// Reads every report and merges them; `what` of each is its path.
pub fn merge_files(paths: &[PathBuf]) -> Result<Report, Error> {
    let mut reports = Vec::with_capacity(paths.len());
    for p in paths {
        let text = std::fs::read_to_string(p).map_err(|e| {
            Error::Usage(format!(
                "{}: cannot read it ({e}); give a soakd JSON report",
                p.display()
            ))
        })?;
        let r: Report = serde_json::from_str(&text).map_err(|e| {
            Error::Usage(format!(
                "{}: not a soakd report ({e}); give the JSON that `soakd run --report` wrote",
                p.display()
            ))
        })?;
        reports.push((p.display().to_string(), r));
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
        all_hist
            .add(&hist)
            .map_err(|e| Error::Usage(format!("workload {}: {e}", first.workloads[wi].name)))?;
        workloads.push(WorkloadReport {
            name: first.workloads[wi].name.clone(),
            url: first.workloads[wi].url.clone(),
            figures,
            histograms: hist.encode(),
        });
    }
    let mut all = reports[1..]
        .iter()
        .fold(first.all.clone(), |acc, (_, r)| plus(&acc, &r.all));
    all_hist.set_percentiles(&mut all);
    Ok(Report {
        duration_seconds: reports.iter().map(|(_, r)| r.duration_seconds).fold(0.0, f64::max),
        shard: ShardReport {
            index: None,
            count: first.shard.count,
            merged: shards,
        },
        all,
        workloads,
        // A shard's plan text describes its share only, and the shards'
        // timelines run on their own clocks: merging them by wall clock
        // (`timeline.started_at`) is left to a later change, so a merged
        // report has neither (its HTML page shows no time charts).
        plan: String::new(),
        timeline: crate::stats::TimelineJson::default(),
        // Thresholds judge one process's figures; the merged report is
        // not judged again (each shard's report has its own verdicts).
        thresholds: Vec::new(),
        aborted: reports.iter().find_map(|(_, r)| r.aborted.clone()),
        hdr_log: None,
    })
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
    for path in inputs {
        let bytes = std::fs::read(path)
            .map_err(|e| Error::Usage(format!("--hdr-log {}: cannot read it ({e})", path.display())))?;
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
    let file = std::fs::File::create(out)
        .map_err(|e| Error::Usage(format!("--hdr-log-out {}: cannot create it ({e})", out.display())))?;
    let mut w = std::io::BufWriter::new(file);
    let mut ser = V2DeflateSerializer::new();
    let when = SystemTime::UNIX_EPOCH + origin;
    let failed = |e: String| Error::io(format!("writing {}", out.display()), std::io::Error::other(e));
    let mut log = IntervalLogWriterBuilder::new()
        .add_comment(&format!(
            "soakd merge: {} interval logs, request latency in microseconds, one interval per tag every 10 s",
            inputs.len()
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
    std::io::Write::flush(&mut w).map_err(|e| Error::io(format!("writing {}", out.display()), e))?;
    Ok(merged.len())
}

#[cfg(test)]
mod tests {
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
