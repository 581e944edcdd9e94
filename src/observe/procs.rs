//! The server under test as /proc sees it (`--target-pid`), and soakd
//! itself: memory, CPU and descriptors for the metrics and the timeline.
//!
//! Read by the control thread (once a scrape for the metrics, once a
//! timeline point for the trends), never by a worker.

use crate::stats;

/// What /proc says about one process of the server under test.
pub(super) struct ProcStat {
    pub(super) rss_bytes: f64,
    pub(super) cpu_seconds: f64,
    /// `None` when /proc/PID/fd is not readable (another user's process
    /// under the hardened unit): memory and CPU are still reported.
    pub(super) open_fds: Option<f64>,
}

/// One process's figures; `None` when it cannot be read (gone, or not ours).
pub(super) fn read_proc(pid: u32) -> Option<ProcStat> {
    let p = procfs::process::Process::new(pid as i32).ok()?;
    let stat = p.stat().ok()?;
    let ticks = procfs::ticks_per_second() as f64;
    Some(ProcStat {
        rss_bytes: (stat.rss * procfs::page_size()) as f64,
        cpu_seconds: (stat.utime + stat.stime) as f64 / ticks,
        open_fds: p.fd_count().ok().map(|n| n as f64),
    })
}

/// The processes of a run as /proc says now, for the timeline: each of
/// `pids` that can be read (a vanished one is left out) and soakd itself.
/// Called once a timeline point by the control thread, never by a worker.
pub fn sample_resources(pids: &[u32]) -> stats::Resources {
    stats::Resources {
        targets: pids
            .iter()
            .filter_map(|pid| {
                let p = read_proc(*pid)?;
                Some(stats::ProcSample {
                    pid: *pid,
                    rss_bytes: p.rss_bytes as u64,
                    cpu_ms: (p.cpu_seconds * 1e3).round() as u64,
                    open_fds: p.open_fds.map(|n| n as u64),
                })
            })
            .collect(),
        soakd_rss_bytes: read_proc(std::process::id()).map(|p| p.rss_bytes as u64),
    }
}
