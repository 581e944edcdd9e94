//! Getting worse on purpose: a target whose memory, open descriptors or
//! response delay grow with time.
//!
//! A soak exists to find what degrades, and soakd's trend verdicts
//! (`target_rss_slope`, `target_fds_slope`, `p99_drift`) need a server that
//! really does, at a known rate, to be shown right: in tests, in the demo
//! and in `bench/trends.sh`. The growth is real, not reported: leaked memory
//! is allocated *and touched* page by page so it is resident, and leaked
//! descriptors are open files, so `/proc` sees what an operator would see
//! on a leaking server.
//!
//! Memory and descriptors grow on a thread of their own that wakes ten
//! times a second (a tenth of a second's worth each time, so the growth is
//! smooth at any rate) and stops with the target. The slowdown needs no
//! thread: the server asks [`Degrade::delay_at`] for the delay of each
//! response, which grows linearly from the `--delay` it started with.
//!
//! Both leaks have ceilings ([`MAX_LEAK_BYTES`], [`MAX_LEAK_FDS`]) so a
//! forgotten `--leak` cannot take the host down; reaching one is printed
//! once, and the growth stops there.

use std::fs::File;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The most memory `--leak` will hold.
pub const MAX_LEAK_BYTES: u64 = 4 << 30;
/// The most descriptors `--fd-leak` will hold (well under the open-file
/// limit, so the target can still accept connections).
pub const MAX_LEAK_FDS: u64 = 4096;
/// How often the leak thread grows what it holds.
const STEP: Duration = Duration::from_millis(100);
/// Leaked memory is allocated in chunks of this size.
const CHUNK: usize = 256 * 1024;
/// Touching one byte per page makes the whole chunk resident.
const PAGE: usize = 4096;

/// How the target degrades: each rate per second, zero for "not at all".
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Degrade {
    /// Bytes of resident memory to add per second (`--leak`).
    pub leak_bytes_per_s: f64,
    /// Descriptors to open and keep per second (`--fd-leak`).
    pub fds_per_s: f64,
    /// Growth of the response delay per second, as a fraction of the
    /// starting delay (`--slowdown 5%/min` is 0.05 / 60).
    pub slowdown_per_s: f64,
}

impl Degrade {
    /// The delay of a response sent `elapsed` after the target started,
    /// when it started with `base`.
    pub fn delay_at(&self, base: Duration, elapsed: Duration) -> Duration {
        if self.slowdown_per_s == 0.0 || base.is_zero() {
            return base;
        }
        base.mul_f64(1.0 + self.slowdown_per_s * elapsed.as_secs_f64())
    }

    /// Starts the leak thread when memory or descriptors are to grow; it
    /// stops once `stop` is set.
    pub fn spawn_leaks(&self, stop: Arc<AtomicBool>) -> std::io::Result<Option<JoinHandle<()>>> {
        if self.leak_bytes_per_s == 0.0 && self.fds_per_s == 0.0 {
            return Ok(None);
        }
        let rates = *self;
        std::thread::Builder::new()
            .name("soakd-target-leak".to_string())
            .spawn(move || leak(rates, &stop))
            .map(Some)
    }
}

/// The leak thread's loop: hold what `rates` says by now, until `stop`.
fn leak(rates: Degrade, stop: &AtomicBool) {
    let start = Instant::now();
    let mut memory: Vec<Box<[u8]>> = Vec::new();
    let mut held_bytes = 0u64;
    let mut files: Vec<File> = Vec::new();
    let mut capped = (false, false);
    while !stop.load(Ordering::Acquire) {
        std::thread::sleep(STEP);
        let secs = start.elapsed().as_secs_f64();
        let want_bytes = ((rates.leak_bytes_per_s * secs) as u64).min(MAX_LEAK_BYTES);
        while held_bytes + CHUNK as u64 <= want_bytes {
            let mut chunk = vec![0u8; CHUNK].into_boxed_slice();
            // A fresh allocation of this size is mapped but not resident
            // until written: touch every page.
            for i in (0..CHUNK).step_by(PAGE) {
                chunk[i] = 1;
            }
            memory.push(std::hint::black_box(chunk));
            held_bytes += CHUNK as u64;
        }
        if want_bytes == MAX_LEAK_BYTES && !capped.0 {
            capped.0 = true;
            eprintln!("soakd target: --leak reached its ceiling of {MAX_LEAK_BYTES} bytes; holding there");
        }
        let want_fds = ((rates.fds_per_s * secs) as u64).min(MAX_LEAK_FDS);
        while (files.len() as u64) < want_fds {
            match File::open("/dev/null") {
                Ok(f) => files.push(f),
                Err(e) => {
                    eprintln!("soakd target: --fd-leak stopped at {} descriptors: {e}", files.len());
                    capped.1 = true;
                    break;
                }
            }
        }
        if want_fds == MAX_LEAK_FDS && !capped.1 {
            capped.1 = true;
            eprintln!("soakd target: --fd-leak reached its ceiling of {MAX_LEAK_FDS} descriptors; holding there");
        }
    }
}

/// Parses a growth rate `AMOUNT/UNIT` of `what` (`--leak 1MiB/min`,
/// `--fd-leak 60/min`, `--slowdown 5%/min`) into an amount per second.
/// `amount` turns the part before the slash into a number (bytes, a count,
/// a fraction).
fn per_second(s: &str, what: &str, example: &str, amount: impl Fn(&str) -> Option<f64>) -> Result<f64, String> {
    let bad = || format!("{what} {s:?}: expected AMOUNT/UNIT such as {example} (units s, min, h)");
    let (a, unit) = s.trim().rsplit_once('/').ok_or_else(bad)?;
    let secs = match unit.trim() {
        "s" => 1.0,
        "min" | "m" => 60.0,
        "h" => 3600.0,
        _ => return Err(bad()),
    };
    let v = amount(a.trim())
        .filter(|v| v.is_finite() && *v >= 0.0)
        .ok_or_else(bad)?;
    Ok(v / secs)
}

/// `--leak RATE`: bytes per second from e.g. `1MiB/min`, `512KiB/s`.
pub fn parse_leak(s: &str) -> Result<f64, String> {
    per_second(s, "--leak", "1MiB/min", |a| {
        let split = a.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(a.len());
        let (n, unit) = a.split_at(split);
        let scale = match unit {
            "B" | "" => 1.0,
            "KiB" => 1024.0,
            "MiB" => 1024.0 * 1024.0,
            "GiB" => 1024.0 * 1024.0 * 1024.0,
            _ => return None,
        };
        n.trim().parse::<f64>().ok().map(|n| n * scale)
    })
}

/// `--fd-leak RATE`: descriptors per second from e.g. `60/min`.
pub fn parse_fd_leak(s: &str) -> Result<f64, String> {
    per_second(s, "--fd-leak", "60/min", |a| a.parse::<f64>().ok())
}

/// `--slowdown RATE`: growth of the delay per second as a fraction of the
/// starting delay, from e.g. `5%/min`.
pub fn parse_slowdown(s: &str) -> Result<f64, String> {
    per_second(s, "--slowdown", "5%/min", |a| {
        a.strip_suffix('%')?.trim().parse::<f64>().ok().map(|p| p / 100.0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_to_per_second() {
        assert_eq!(parse_leak("1MiB/min").unwrap(), 1024.0 * 1024.0 / 60.0);
        assert_eq!(parse_leak("512KiB/s").unwrap(), 512.0 * 1024.0);
        assert_eq!(parse_leak("2 MiB / h").unwrap(), 2.0 * 1024.0 * 1024.0 / 3600.0);
        assert_eq!(parse_fd_leak("60/min").unwrap(), 1.0);
        assert!((parse_slowdown("5%/min").unwrap() - 0.05 / 60.0).abs() < 1e-12);
        for bad in ["1MiB", "1MB/min", "-1MiB/min", "x/min", "1MiB/week", "nan/s"] {
            let e = parse_leak(bad).unwrap_err();
            assert!(e.contains("--leak") && e.contains("1MiB/min"), "{bad}: {e}");
        }
        assert!(parse_slowdown("5/min").unwrap_err().contains("5%/min"));
        assert!(parse_fd_leak("a/min").is_err());
    }

    #[test]
    fn the_delay_grows_linearly_from_its_start() {
        let d = Degrade {
            slowdown_per_s: parse_slowdown("10%/min").unwrap(),
            ..Degrade::default()
        };
        let base = Duration::from_millis(5);
        assert_eq!(d.delay_at(base, Duration::ZERO), base);
        let after_3_min = d.delay_at(base, Duration::from_secs(180));
        assert!((after_3_min.as_secs_f64() - 0.0065).abs() < 1e-9, "{after_3_min:?}");
        // No delay to grow: none added.
        assert_eq!(d.delay_at(Duration::ZERO, Duration::from_secs(600)), Duration::ZERO);
    }

    /// The leak is real: the process's resident memory and open
    /// descriptors grow, as `/proc` (and so `--target-pid`) sees them.
    #[test]
    fn leaks_are_resident_and_open() {
        let fds = || std::fs::read_dir("/proc/self/fd").unwrap().count();
        let rss = || procfs::process::Process::myself().unwrap().stat().unwrap().rss * procfs::page_size();
        let (rss0, fds0) = (rss(), fds());
        let stop = Arc::new(AtomicBool::new(false));
        let d = Degrade {
            leak_bytes_per_s: 40.0 * 1024.0 * 1024.0,
            fds_per_s: 100.0,
            slowdown_per_s: 0.0,
        };
        let t = d.spawn_leaks(stop.clone()).unwrap().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while (rss() < rss0 + (16 << 20) || fds() < fds0 + 40) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let (grown_rss, grown_fds) = (rss().saturating_sub(rss0), fds().saturating_sub(fds0));
        stop.store(true, Ordering::Release);
        t.join().unwrap();
        assert!(grown_rss >= 16 << 20, "resident memory grew only {grown_rss} bytes");
        assert!(grown_fds >= 40, "only {grown_fds} descriptors opened");
    }
}
