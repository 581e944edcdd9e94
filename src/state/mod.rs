//! `--state FILE`: a soak that outlives the process.
//!
//! A three-day soak must not die with its process: a crash, an OOM kill, a
//! reboot or a systemd restart on day two would otherwise lose the run,
//! although `Restart=on-failure` brings soakd straight back. So every
//! `--checkpoint-interval` the run's whole state (counters, full-run
//! histograms, the timeline, the live thresholds' windows, the run's start
//! and a digest of the plan) is written to FILE, and a soakd started with
//! the same plan and FILE continues the run: `-d` counts from the original
//! start, the report covers every part, the timeline flags the time no
//! soakd ran as a `gap`, and the report's `resumed` lists each restart.
//!
//! The file is written whole or not at all ([`crate::fsio::write_atomic`]:
//! temp file, fsync, rename, directory fsync), so a SIGKILL at any instant
//! leaves the previous checkpoint intact. Its first line is a header
//! (format, version, the soakd that wrote it, the body's length and
//! SHA-256), the second the body (JSON): a truncated or damaged file is
//! recognised as such and refused, never silently taken for a new soak.
//!
//! Refused, each as bad input (exit 2) before anything starts, naming the
//! file and the fix: a state of another plan (the settings that differ are
//! named, see [`digest`]), a damaged one, one of another format version, a
//! finished run. `--fresh` moves an existing file aside and starts over.
//!
//! Stages need no saving: their position follows from the run time, which
//! continues. Stage commands reach the workers at the first tick after a
//! restart.

mod digest;
mod writer;

use std::path::Path;
use std::time::{Duration, SystemTime};

use ring::digest::{SHA256, digest as sha256};
use serde::{Deserialize, Serialize};

pub use writer::{Snapshot, Writer};

use crate::Error;
use crate::plan::Plan;
use crate::stats::{TotalsSaved, WorkloadStats};

/// The state format this soakd writes and reads. 2: HTTP/2's GOAWAY and
/// reset counts moved out of the counters into the workload's `h2`, and a
/// timeline point keeps only the counts it charts. A version-1 file would
/// read without error but with those counts gone, so it is refused by
/// version instead (the message names the fix).
pub const VERSION: u32 = 2;
/// The header's `format`.
const FORMAT: &str = "soakd-state";

/// The first line of a state file.
#[derive(Debug, Serialize, Deserialize)]
struct Header {
    format: String,
    version: u32,
    /// The soakd that wrote it.
    soakd: String,
    body_bytes: usize,
    body_sha256: String,
}

/// What a checkpoint holds.
#[derive(Debug, Serialize, Deserialize)]
struct Body {
    /// [`digest::of`] the settings.
    digest: String,
    /// The settings that define the run ([`digest::settings`]).
    settings: Vec<(String, String)>,
    /// Run time of the checkpoint, since the original start.
    at: Duration,
    /// The run ended on its own (duration, requests, stages, an abort):
    /// nothing is left to continue.
    finished: bool,
    totals: TotalsSaved,
    window: Option<WindowSaved>,
    /// The live comparison with `--baseline` (absent in a checkpoint of a
    /// run without one, or of a soakd before it).
    #[serde(default)]
    baseline: Option<BaselineSaved>,
}

/// The live thresholds (`observe::thresholds`) as data.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct WindowSaved {
    /// Per threshold, in the plan's order.
    pub items: Vec<ItemSaved>,
    /// The window's slices, oldest first (empty without a window).
    pub slices: Vec<SliceSaved>,
    /// When the thresholds were last evaluated.
    pub last_eval: Option<Duration>,
    /// When the trends were last computed.
    pub last_trends: Option<Duration>,
    /// Why the run should stop, once decided.
    pub abort: Option<String>,
}

/// The live comparison as data for a `--state` checkpoint.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct BaselineSaved {
    /// The windows listed so far.
    pub windows: Vec<crate::report::baseline::WindowRow>,
    /// Windows dropped from the list.
    pub dropped: u64,
    /// Per pair, per metric.
    pub states: Vec<[crate::report::baseline::MetricState; 5]>,
    /// Why the run should stop, once decided.
    pub abort: Option<String>,
}

/// One live threshold as data.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ItemSaved {
    /// The threshold as written (checked on restore).
    pub threshold: String,
    /// Passing at the last evaluation.
    pub passing: bool,
    /// Failing since this run time.
    pub failing_since: Option<Duration>,
    /// The last value measured.
    pub last: Option<f64>,
}

/// One slice of a threshold window as data.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SliceSaved {
    /// Its start, run time.
    pub start: Duration,
    /// What arrived in it, per workload.
    pub stats: Vec<WorkloadStats>,
    /// Fewest connections open in it, per workload.
    pub open_min: Vec<Option<u64>>,
    /// The same over all workloads.
    pub open_min_all: Option<u64>,
}

/// A run continued from its state file.
#[derive(Debug)]
pub struct Loaded {
    /// The totals as checkpointed.
    pub totals: TotalsSaved,
    /// The live thresholds as checkpointed.
    pub window: Option<WindowSaved>,
    /// The live comparison with `--baseline` as checkpointed.
    pub baseline: Option<BaselineSaved>,
    /// Run time of the checkpoint.
    pub checkpoint_at: Duration,
    /// Run time now (since the original start).
    pub now: Duration,
}

/// Counts and hashes what is written to it, keeping nothing.
struct Tally {
    bytes: usize,
    hash: ring::digest::Context,
}

impl std::io::Write for Tally {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.bytes += buf.len();
        self.hash.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Writes the state file for `body` to `out`: the header line (which
/// states the body's length and SHA-256, so the body is serialized twice:
/// once into a tally, once into `out`) and the body. No copy of the body
/// is ever held: a checkpoint's memory does not grow with the run (the
/// timeline's points, the histograms).
fn encode_to(body: &Body, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let mut tally = Tally {
        bytes: 0,
        hash: ring::digest::Context::new(&SHA256),
    };
    serde_json::to_writer(&mut tally, body)?;
    let header = Header {
        format: FORMAT.into(),
        version: VERSION,
        soakd: env!("CARGO_PKG_VERSION").into(),
        body_bytes: tally.bytes,
        body_sha256: digest::hex(tally.hash.finish().as_ref()),
    };
    serde_json::to_writer(&mut *out, &header)?;
    out.write_all(b"\n")?;
    serde_json::to_writer(&mut *out, body)?;
    out.write_all(b"\n")
}

/// The state file's bytes for `body` (tests).
#[cfg(test)]
fn encode(body: &Body) -> Result<Vec<u8>, std::io::Error> {
    let mut out = Vec::new();
    encode_to(body, &mut out)?;
    Ok(out)
}

/// How a damaged state is refused.
fn damaged(path: &Path, what: &str) -> Error {
    Error::Usage(format!(
        "--state {}: {what}; soakd never discards a state silently: restore an intact copy to continue the soak, or add --fresh to start a new one (the file is moved aside to {}.old-UNIXTIME)",
        path.display(),
        path.display()
    ))
}

/// Reads and checks a state file's bytes.
fn decode(path: &Path, bytes: &[u8]) -> Result<Body, Error> {
    if bytes.is_empty() {
        return Err(damaged(path, "the file is empty"));
    }
    let (first, rest) = match bytes.iter().position(|&b| b == b'\n') {
        Some(i) => (&bytes[..i], &bytes[i + 1..]),
        None => (bytes, &[][..]),
    };
    let header: Header = serde_json::from_slice(first)
        .map_err(|_| damaged(path, "it is not a soakd state file, or its header line is damaged"))?;
    if header.format != FORMAT {
        return Err(damaged(
            path,
            &format!("its format is {:?}, not {FORMAT:?}", header.format),
        ));
    }
    if header.version != VERSION {
        return Err(Error::Usage(format!(
            "--state {}: written by soakd {} in state format version {}, and this soakd ({}) reads version {VERSION}; continue the soak with soakd {}, or add --fresh to start a new one (the file is moved aside)",
            path.display(),
            header.soakd,
            header.version,
            env!("CARGO_PKG_VERSION"),
            header.soakd
        )));
    }
    let body = rest.strip_suffix(b"\n").unwrap_or(rest);
    if body.len() != header.body_bytes {
        return Err(damaged(
            path,
            &format!(
                "it is truncated or damaged ({} bytes of state where its header says {})",
                body.len(),
                header.body_bytes
            ),
        ));
    }
    if digest::hex(sha256(&SHA256, body).as_ref()) != header.body_sha256 {
        return Err(damaged(path, "it is damaged (its SHA-256 does not match its header)"));
    }
    serde_json::from_slice(body).map_err(|e| damaged(path, &format!("its state cannot be read ({e})")))
}

/// At the start of `soakd run`, with `--state`: the run to continue, if
/// there is one. Moves the file aside first with `--fresh`. Errors are
/// bad input (exit 2): see the module doc.
pub fn open(plan: &Plan) -> Result<Option<Loaded>, Error> {
    let Some(sf) = &plan.state else { return Ok(None) };
    let path = &sf.path;
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(Error::Usage(format!(
                "--state {}: cannot read it ({e}); make it readable, or give another path",
                path.display()
            )));
        }
    };
    if sf.fresh {
        move_aside(path)?;
        return Ok(None);
    }
    let body = decode(path, &bytes)?;
    let settings = digest::settings(plan);
    if body.digest != digest::of(&settings) {
        let mut diff = digest::differences(&body.settings, &settings);
        if diff.is_empty() {
            diff.push("the settings' digest differs".into());
        }
        return Err(Error::Usage(format!(
            "--state {}: it holds a soak of another plan ({}); run the same plan to continue it, or add --fresh to start a new soak (the file is moved aside)",
            path.display(),
            diff.join("; ")
        )));
    }
    let started = body.totals.timeline.started_at;
    let now = SystemTime::now()
        .duration_since(started)
        .unwrap_or(body.at)
        .max(body.at);
    let ended = match plan.duration {
        _ if body.finished => true,
        Some(d) => now >= d,
        None => false,
    };
    if ended {
        return Err(Error::Usage(format!(
            "--state {}: the soak it holds is finished (started {}{}); add --fresh to start a new soak (the file is moved aside)",
            path.display(),
            humantime::format_rfc3339_seconds(started),
            match plan.duration {
                Some(d) => format!(", ran for {}", humantime::format_duration(d)),
                None => String::new(),
            }
        )));
    }
    Ok(Some(Loaded {
        totals: body.totals,
        window: body.window,
        baseline: body.baseline,
        checkpoint_at: body.at,
        now,
    }))
}

/// `--fresh`: the old state becomes `FILE.old-UNIXTIME`.
fn move_aside(path: &Path) -> Result<(), Error> {
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut to = path.as_os_str().to_owned();
    to.push(format!(".old-{secs}"));
    std::fs::rename(path, &to).map_err(|e| {
        Error::Usage(format!(
            "--state {} --fresh: cannot move the old state aside ({e}); move or remove it yourself",
            path.display()
        ))
    })?;
    eprintln!(
        "soakd: --fresh: the old state is now {}; starting a new soak",
        Path::new(&to).display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{Timeline, Totals};

    fn plan(args: &[&str]) -> Plan {
        let mut argv = vec!["soakd", "run", "http://127.0.0.1:1/"];
        argv.extend(args);
        let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(argv).unwrap();
        let crate::cli::Command::Run(run) = cli.command else {
            unreachable!()
        };
        run.into_plan().unwrap()
    }

    fn body(p: &Plan, totals: &Totals) -> Body {
        let settings = digest::settings(p);
        Body {
            digest: digest::of(&settings),
            settings,
            at: Duration::from_secs(5),
            finished: false,
            totals: totals.saved(),
            window: None,
            baseline: None,
        }
    }

    #[test]
    fn a_state_reads_back_and_damage_is_named() {
        let p = plan(&["-c", "3"]);
        let mut t = Totals::new(vec![p.workloads[0].name.clone()], 1, false, false);
        t.stats[0].counters.completed = 42;
        t.stats[0].h2_mut().goaways[crate::stats::H2Code::NoError as usize] = 5;
        let bytes = encode(&body(&p, &t)).unwrap();
        let path = Path::new("/x/s.state");
        let back = decode(path, &bytes).unwrap();
        assert_eq!(back.totals.stats[0].counters.completed, 42);
        assert_eq!(back.totals.stats[0].h2, t.stats[0].h2, "HTTP/2 counts carried");
        // A file of the format before HTTP/2's counts moved is refused by
        // its version, with the fix named, not read with them missing.
        let text = String::from_utf8(bytes.clone()).unwrap();
        let old = text.replacen(&format!("\"version\":{VERSION}"), "\"version\":1", 1);
        assert_ne!(old, text);
        let e = decode(path, old.as_bytes()).unwrap_err().to_string();
        assert!(e.contains("version 1") && e.contains("--fresh"), "{e}");
        assert_eq!(back.at, Duration::from_secs(5));
        for cut in [bytes.len() / 2, bytes.len() - 2] {
            let e = decode(path, &bytes[..cut]).unwrap_err().to_string();
            assert!(
                e.contains("/x/s.state") && e.contains("truncated") && e.contains("--fresh"),
                "{e}"
            );
        }
        let mut bad = bytes.clone();
        let n = bad.len();
        bad[n - 3] ^= 1;
        let e = decode(path, &bad).unwrap_err().to_string();
        assert!(e.contains("damaged"), "{e}");
        assert!(decode(path, b"").unwrap_err().to_string().contains("empty"));
    }

    /// A week-long soak's state, its timeline full (1,000 points, each with
    /// latencies over four decades and a process sample), its full-run
    /// histograms well filled: a few MB at most.
    #[test]
    fn a_weeks_state_stays_small() {
        let p = plan(&["-c", "3"]);
        let mut t = Totals::new(vec![p.workloads[0].name.clone()], 1, false, false);
        let mut rng = fastrand::Rng::with_seed(3);
        let mut tl = Timeline::new();
        let step = 8u64;
        let mut d = crate::stats::WorkloadStats::default();
        for tick in 1..=(7 * 24 * 3600 / step) {
            for _ in 0..40 {
                let us = 10f64.powf(2.0 + 4.0 * rng.f64()) as u64;
                d.latency.record(us).unwrap();
                d.lag.record(us / 10 + 1).unwrap();
            }
            d.counters.completed = 40;
            tl.add(0, &d);
            t.stats[0].add(&d);
            d.clear();
            tl.sample(crate::stats::Resources {
                targets: vec![crate::stats::ProcSample {
                    pid: 1,
                    rss_bytes: 1 << 30,
                    cpu_ms: tick,
                    open_fds: Some(1000),
                }],
                soakd_rss_bytes: Some(1 << 28),
            });
            tl.tick(Duration::from_secs(step * tick));
        }
        t.timeline = tl;
        // What the control thread pays (a copy) and what the writer thread
        // pays (the encoding), for the record.
        let t0 = std::time::Instant::now();
        let b = body(&p, &t);
        let copied = t0.elapsed();
        let t1 = std::time::Instant::now();
        let bytes = encode(&b).unwrap();
        let encoded = t1.elapsed();
        // The next checkpoint, copied into this one's buffers as the
        // writer hands them back.
        let t2 = std::time::Instant::now();
        let again = t.saved_reusing(Some(b.totals));
        let recopied = t2.elapsed();
        assert_eq!(again.timeline.points.len(), t.timeline.points().len());
        eprintln!(
            "a week's state: {} bytes, {} timeline points; copied in {:.2} ms ({:.2} ms into the last one's buffers), encoded in {:.1} ms",
            bytes.len(),
            t.timeline.points().len(),
            copied.as_secs_f64() * 1e3,
            recopied.as_secs_f64() * 1e3,
            encoded.as_secs_f64() * 1e3
        );
        assert!(bytes.len() < 4 << 20, "{} bytes", bytes.len());
    }
}
