//! Per-interval samples from an HDR interval log, and the rank test that
//! compares two sets of them.
//!
//! A run's report gives one p99 per workload: one number, which cannot say
//! whether another run's p99 differs by more than chance. The interval log
//! gives one histogram per workload per interval, so each quantile comes
//! as a series of samples, one per interval; two runs' series can be
//! tested against each other. Mann–Whitney's U is used because it assumes
//! nothing about the samples' distribution (latency quantiles are skewed
//! and spiky) and a single extreme interval moves it by one rank only.

use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};

use crate::Error;
pub(crate) use crate::observe::tag_of;

/// What one interval of one workload measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interval {
    /// Start, seconds since the log's base time (soakd's: the run's
    /// start).
    pub start: f64,
    /// Length in seconds.
    pub seconds: f64,
    /// Latency quantiles in seconds: p50, p90, p99, p99.9, max.
    pub quantiles: [f64; 5],
    /// Responses per second.
    pub rps: f64,
}

/// Samples per log tag (the workload name, with `,` and spaces as `_`).
pub type Samples = BTreeMap<String, Vec<Interval>>;

/// Reads an interval log written by `--hdr-log`. Intervals with no
/// response and a last interval shorter than half the usual length (the
/// partial one at the stop) are left out: they measure the edges of the
/// run, not the server.
pub fn read_log(path: &Path, what: &str) -> Result<Samples, Error> {
    let bytes = std::fs::read(path).map_err(|e| {
        Error::Usage(format!(
            "{what} {}: cannot read it ({e}); give the file `soakd run --hdr-log` wrote",
            path.display()
        ))
    })?;
    let bad = |why: String| {
        Error::Usage(format!(
            "{what} {}: not an HdrHistogram interval log ({why}); give the file `soakd run --hdr-log` wrote",
            path.display()
        ))
    };
    let mut out: Samples = BTreeMap::new();
    let mut de = Deserializer::new();
    for entry in IntervalLogIterator::new(&bytes) {
        let entry = entry.map_err(|e| bad(format!("{e:?}")))?;
        let LogEntry::Interval(h) = entry else { continue };
        let raw = base64::engine::general_purpose::STANDARD
            .decode(h.encoded_histogram())
            .map_err(|e| bad(e.to_string()))?;
        let hist: Histogram<u64> = de
            .deserialize(&mut raw.as_slice())
            .map(crate::stats::growing)
            .map_err(|e| bad(format!("{e:?}")))?;
        let seconds = h.duration().as_secs_f64();
        if hist.is_empty() || seconds <= 0.0 {
            continue;
        }
        let q = |q: f64| hist.value_at_quantile(q) as f64 / 1e6;
        out.entry(h.tag().map_or(String::new(), |t| t.as_str().to_string()))
            .or_default()
            .push(Interval {
                start: h.start_timestamp().as_secs_f64(),
                seconds,
                quantiles: [q(0.5), q(0.9), q(0.99), q(0.999), hist.max() as f64 / 1e6],
                rps: hist.len() as f64 / seconds,
            });
    }
    for v in out.values_mut() {
        let mut lengths: Vec<f64> = v.iter().map(|i| i.seconds).collect();
        lengths.sort_by(f64::total_cmp);
        let usual = lengths[lengths.len() / 2];
        if v.len() > 1 && v.last().is_some_and(|i| i.seconds < usual / 2.0) {
            v.pop();
        }
    }
    Ok(out)
}

/// The log's `StartTime` (seconds since the Unix epoch), when it states
/// one: soakd writes the run's start there.
pub fn start_time(path: &Path) -> Option<f64> {
    let bytes = std::fs::read(path).ok()?;
    IntervalLogIterator::new(&bytes).find_map(|e| match e {
        Ok(LogEntry::StartTime(t)) => Some(t.as_secs_f64()),
        _ => None,
    })
}

/// One stretch of a log's intervals of one tag, merged.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stretch {
    /// p50, p90, p99, p99.9 in seconds (`None`: no response in it).
    pub quantiles: [Option<f64>; 4],
    /// Responses in it.
    pub count: u64,
    /// Seconds its intervals cover.
    pub seconds: f64,
}

/// The intervals of `tag` merged per `window` of the log's time (window k
/// holds the intervals that start in k·W to (k+1)·W), in order, up to the
/// last window with an interval: what a staged baseline measured at each
/// elapsed time. One histogram is kept at a time.
pub fn stretches(path: &Path, tag: &str, window: std::time::Duration, what: &str) -> Result<Vec<Stretch>, Error> {
    let bytes =
        std::fs::read(path).map_err(|e| Error::Usage(format!("{what} {}: cannot read it ({e})", path.display())))?;
    let bad = |why: String| {
        Error::Usage(format!(
            "{what} {}: not an HdrHistogram interval log ({why}); give the file `soakd run --hdr-log` wrote",
            path.display()
        ))
    };
    let w = window.as_secs_f64().max(1e-3);
    let mut out: Vec<Stretch> = Vec::new();
    let mut merged = crate::stats::histogram();
    let mut current: Option<usize> = None;
    let mut seconds = 0.0;
    let mut de = Deserializer::new();
    let close = |out: &mut Vec<Stretch>, k: usize, h: &Histogram<u64>, seconds: f64| {
        out.resize(k + 1, Stretch::default());
        let q = |q: f64| (!h.is_empty()).then(|| h.value_at_quantile(q) as f64 / 1e6);
        out[k] = Stretch {
            quantiles: [q(0.5), q(0.9), q(0.99), q(0.999)],
            count: h.len(),
            seconds,
        };
    };
    for entry in IntervalLogIterator::new(&bytes) {
        let entry = entry.map_err(|e| bad(format!("{e:?}")))?;
        let LogEntry::Interval(h) = entry else { continue };
        if h.tag().map_or("", |t| t.as_str()) != tag {
            continue;
        }
        let k = (h.start_timestamp().as_secs_f64() / w).floor().max(0.0) as usize;
        if current.is_some_and(|c| c != k) {
            close(&mut out, current.unwrap_or(0), &merged, seconds);
            merged.reset();
            seconds = 0.0;
        }
        current = Some(k);
        let raw = base64::engine::general_purpose::STANDARD
            .decode(h.encoded_histogram())
            .map_err(|e| bad(e.to_string()))?;
        let hist: Histogram<u64> = de
            .deserialize(&mut raw.as_slice())
            .map(crate::stats::growing)
            .map_err(|e| bad(format!("{e:?}")))?;
        merged.add(&hist).map_err(|e| bad(format!("{e:?}")))?;
        seconds += h.duration().as_secs_f64();
    }
    if let Some(k) = current {
        close(&mut out, k, &merged, seconds);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_reads_back_as_samples_per_tag() {
        use hdrhistogram::serialization::V2DeflateSerializer;
        use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
        use std::time::Duration;
        let mut bytes = Vec::new();
        let mut ser = V2DeflateSerializer::new();
        let mut w = IntervalLogWriterBuilder::new()
            .with_max_value_divisor(1e6)
            .begin_log_with(&mut bytes, &mut ser)
            .unwrap();
        let tag = tag_of("api, v2");
        let mut put = |start: u64, len_ms: u64, values_us: &[u64]| {
            let mut h = crate::stats::histogram();
            for v in values_us {
                h.record(*v).unwrap();
            }
            let (start, len) = (Duration::from_secs(start), Duration::from_millis(len_ms));
            w.write_histogram(&h, start, len, Tag::new(&tag)).unwrap();
        };
        put(0, 1000, &[100; 500]);
        put(1, 1000, &[]);
        put(2, 1000, &[100, 200, 300, 400]);
        put(3, 100, &[5000]);
        drop(w);
        let path = std::env::temp_dir().join(format!("soakd-samples-{}.hlog", std::process::id()));
        std::fs::write(&path, &bytes).unwrap();
        let got = read_log(&path, "--hdr-log").unwrap();
        let _ = std::fs::remove_file(&path);
        let v = &got["api__v2"];
        assert_eq!(
            v.len(),
            2,
            "the empty interval and the short last one are left out: {v:?}"
        );
        assert_eq!(v[0].rps, 500.0);
        assert!((v[0].quantiles[0] - 100e-6).abs() < 1e-6, "{v:?}");
        assert!((v[1].quantiles[4] - 400e-6).abs() < 1e-6, "{v:?}");
        let e = read_log(Path::new("/nonexistent.hlog"), "--hdr-log")
            .unwrap_err()
            .to_string();
        assert!(e.contains("--hdr-log /nonexistent.hlog"), "{e}");
    }
}
