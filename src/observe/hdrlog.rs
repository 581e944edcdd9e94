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
//! histogram per workload each interval. The file is not buffered in
//! soakd: an interval is a few hundred bytes every 10 s, and a process
//! killed with SIGKILL keeps every interval written so far.
//!
//! A run continued from its `--state` checkpoint appends to the log
//! instead of truncating it: a comment line says where the run continued,
//! and the intervals go on with the run's time since its original start
//! (the header's `StartTime` is still the start). A line the kill cut in
//! half is dropped first, so every line of the log stays whole.

use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _};
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
    /// The histograms of written intervals, back from the writer thread to
    /// be filled again.
    written: mpsc::Receiver<Vec<Histogram<u64>>>,
    thread: Option<JoinHandle<()>>,
    started: Duration,
    interval: Duration,
}

impl HdrLog {
    /// Creates (truncates) `path` and writes the log header; or, when the
    /// run continues from a checkpoint at run time `resumed`, appends to
    /// it (see the module doc). Tags are the workload names with
    /// characters the format forbids replaced by `_`.
    pub fn create(path: &Path, interval: Duration, resumed: Option<Duration>) -> Result<HdrLog, Error> {
        // A continued run appends to the log it wrote (a log that is
        // not there, or empty, gets its header).
        let append = resumed.is_some() && path.metadata().is_ok_and(|m| m.len() > 0);
        let opened = if append {
            open_to_append(path)
        } else {
            File::create(path)
        };
        let file = opened.map_err(|e| {
            Error::Usage(format!(
                "--hdr-log {}: cannot create it ({e}); give a writable path",
                path.display()
            ))
        })?;
        let (sender, receiver) = mpsc::channel::<Interval>();
        let (give_back, written) = mpsc::channel::<Vec<Histogram<u64>>>();
        let now = SystemTime::now();
        let thread = std::thread::Builder::new()
            .name("soakd-hdr-log".into())
            .spawn(move || {
                let mut out = file;
                let mut serializer = V2DeflateSerializer::new();
                let mut builder = IntervalLogWriterBuilder::new();
                match resumed.filter(|_| append) {
                    None => builder
                        .add_comment(&header_comment(
                            "soakd request latency in microseconds, one interval per workload (tag)",
                            interval,
                        ))
                        .with_start_time(now)
                        .with_base_time(now)
                        .with_max_value_divisor(1e6),
                    Some(at) => builder.add_comment(&format!(
                        "soakd continued the run from its --state at {:.3} s (run time); intervals before it are the earlier process's",
                        at.as_secs_f64()
                    )),
                };
                let writer = builder.begin_log_with(&mut out, &mut serializer);
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
                    let _ = give_back.send(interval.histograms);
                    // The encoder's buffers (~130 KB a histogram) go back
                    // now, not at the control thread's next give-back:
                    // whether that one came before or after this write
                    // decided whether soakd's RSS counted them (see
                    // `crate::heap`).
                    crate::heap::give_back();
                }
                drop(writer);
                let _ = std::io::Write::flush(&mut out);
            })
            .map_err(|e| Error::io("starting the hdr-log thread", e))?;
        Ok(HdrLog {
            sender: Some(sender),
            written,
            thread: Some(thread),
            started: resumed.unwrap_or_default(),
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
        // The newest set back; any older ones (the writer once fell
        // behind) are dropped, so no more than one set waits here.
        let mut histograms = self.written.try_iter().last().unwrap_or_default();
        totals.take_log_interval(&mut histograms);
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

/// Opens `path` to append, first cutting a last line left unfinished (a
/// kill mid-write) back to the end of the last whole line.
fn open_to_append(path: &Path) -> std::io::Result<File> {
    let mut file = OpenOptions::new().read(true).append(true).create(true).open(path)?;
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(file);
    }
    // Look back from the end for the last newline, a block at a time.
    let mut end = len;
    let mut buf = vec![0u8; 4096];
    while end > 0 {
        let from = end.saturating_sub(buf.len() as u64);
        let n = (end - from) as usize;
        file.seek(std::io::SeekFrom::Start(from))?;
        file.read_exact(&mut buf[..n])?;
        if let Some(i) = buf[..n].iter().rposition(|&b| b == b'\n') {
            let keep = from + i as u64 + 1;
            if keep < len {
                file.set_len(keep)?;
            }
            return Ok(file);
        }
        end = from;
    }
    file.set_len(0)?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An appended log keeps whole lines: a half-written last line is cut.
    #[test]
    fn appending_drops_a_torn_last_line() {
        let dir = std::env::temp_dir().join(format!("soakd-hdrlog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("l.hlog");
        std::fs::write(&path, "#a\nTag=a,0.000,1.000,0.001,HIS").unwrap();
        {
            use std::io::Write as _;
            let mut f = open_to_append(&path).unwrap();
            f.write_all(b"Tag=a,1.000,1.000,0.001,X\n").unwrap();
        }
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "#a\nTag=a,1.000,1.000,0.001,X\n"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

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
