//! `--hdr-log FILE`: latency as an HdrHistogram interval log.
//!
//! A multi-day soak is analysed afterwards with the standard HdrHistogram
//! log tools (HistogramLogAnalyzer, `hdr-plot`, HdrHistogram's
//! `HistogramLogProcessor`), which need the full distribution per interval,
//! not percentiles. Every `--hdr-log-interval` (default 10 s) one interval
//! per workload is appended, tagged with the workload name; values are
//! microseconds, and the `MaxValueDivisor` of 1e6 makes the tools print
//! seconds. The header comment states the interval length, and `soakd
//! merge` reads it back from there.
//!
//! The log writer borrows its file for as long as the log is open, so it
//! lives on a small thread of its own; the control thread hands it one
//! histogram per workload each interval.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use hdrhistogram::Histogram;
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};

use crate::Error;
use crate::stats::Totals;

struct Interval {
    start: Duration,
    length: Duration,
    histograms: Vec<Histogram<u64>>,
    /// Workload names, in histogram order (a reload may add workloads).
    names: Vec<String>,
}

/// A workload name as a log tag: the characters the format forbids become
/// `_` (`soakd compare` looks workloads up by it).
pub(crate) fn tag_of(name: &str) -> String {
    name.chars()
        .map(|c| if matches!(c, ',' | ' ' | '\r' | '\n') { '_' } else { c })
        .collect()
}

/// How a log's header comment states its interval length (`… every
/// 10s`): written by [`header_comment`], read back by [`stated_interval`].
const EVERY: &str = " every ";

/// A header comment: `what`, then the interval length the log's intervals
/// have (each one ends at the first tick past it, so a measured length is
/// a little longer; this is the setting).
pub(crate) fn header_comment(what: &str, interval: Duration) -> String {
    format!("{what}{EVERY}{}", humantime::format_duration(interval))
}

/// The interval length a log states in its header comments (the `#` lines
/// it opens with), if one does.
pub(crate) fn stated_interval(log: &[u8]) -> Option<Duration> {
    log.split(|&b| b == b'\n')
        .take_while(|line| line.starts_with(b"#"))
        .filter_map(|line| std::str::from_utf8(line).ok())
        .find_map(|line| humantime::parse_duration(line.rsplit_once(EVERY)?.1.trim()).ok())
}

/// An open interval log.
pub struct HdrLog {
    sender: Option<mpsc::Sender<Interval>>,
    thread: Option<JoinHandle<()>>,
    started: Duration,
    interval: Duration,
}

impl HdrLog {
    /// Creates (truncates) `path` and writes the log header. Tags are the
    /// workload names with characters the format forbids replaced by `_`.
    pub fn create(path: &Path, interval: Duration) -> Result<HdrLog, Error> {
        let file = File::create(path).map_err(|e| {
            Error::Usage(format!(
                "--hdr-log {}: cannot create it ({e}); give a writable path",
                path.display()
            ))
        })?;
        let (sender, receiver) = mpsc::channel::<Interval>();
        let now = SystemTime::now();
        let thread = std::thread::Builder::new()
            .name("soakd-hdr-log".into())
            .spawn(move || {
                let mut out = BufWriter::new(file);
                let mut serializer = V2DeflateSerializer::new();
                let writer = IntervalLogWriterBuilder::new()
                    .add_comment(&header_comment(
                        "soakd request latency in microseconds, one interval per workload (tag)",
                        interval,
                    ))
                    .with_start_time(now)
                    .with_base_time(now)
                    .with_max_value_divisor(1e6)
                    .begin_log_with(&mut out, &mut serializer);
                let Ok(mut writer) = writer else {
                    eprintln!("soakd: --hdr-log: cannot write the log header; no interval log");
                    return;
                };
                for interval in receiver {
                    for (h, name) in interval.histograms.iter().zip(&interval.names) {
                        let tag = tag_of(name);
                        if let Err(e) = writer.write_histogram(h, interval.start, interval.length, Tag::new(&tag)) {
                            eprintln!("soakd: --hdr-log: writing an interval failed ({e:?})");
                        }
                    }
                }
                drop(writer);
                let _ = std::io::Write::flush(&mut out);
            })
            .map_err(|e| Error::io("starting the hdr-log thread", e))?;
        Ok(HdrLog {
            sender: Some(sender),
            thread: Some(thread),
            started: Duration::ZERO,
            interval,
        })
    }

    /// Called every aggregation tick: writes an interval when one is up.
    pub fn tick(&mut self, totals: &mut Totals, elapsed: Duration) {
        if elapsed >= self.started + self.interval {
            self.write(totals, elapsed);
        }
    }

    /// Writes the last (partial) interval and closes the log.
    pub fn finish(&mut self, totals: &mut Totals, elapsed: Duration) {
        if elapsed > self.started {
            self.write(totals, elapsed);
        }
        self.sender = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    fn write(&mut self, totals: &mut Totals, elapsed: Duration) {
        let histograms = totals.take_log_interval();
        if let Some(s) = &self.sender {
            let _ = s.send(Interval {
                start: self.started,
                length: elapsed - self.started,
                histograms,
                names: totals.names.clone(),
            });
        }
        self.started = elapsed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stated_interval_reads_back_from_the_header() {
        for interval in [
            Duration::from_secs(10),
            Duration::from_millis(1500),
            Duration::from_secs(90),
        ] {
            let log = format!(
                "#{}\n#[StartTime: 1.000 (seconds since epoch)]\nTag=a,0.000,1.000,0.001,HISTF\n",
                header_comment("soakd request latency", interval)
            );
            assert_eq!(stated_interval(log.as_bytes()), Some(interval), "{log}");
        }
        // A comment after the first interval line is not the header; a
        // log without one states nothing.
        assert_eq!(stated_interval(b"Tag=a,0.000,1.000,0.001,HISTF\n# x every 5s\n"), None);
        assert_eq!(stated_interval(b"#[StartTime: 1.000 (seconds since epoch)]\n"), None);
    }
}
