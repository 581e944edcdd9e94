//! The server on soakd's own host, followed across its restarts: by a pid
//! file (`--target-pidfile`: the file's PID now, a new one is a restart)
//! or by a cgroup (`--target-cgroup`, `--target-unit`: every process of a
//! service, master and workers, whatever their PIDs).
//!
//! `--target-pid` loses the server at its first restart (its PID is
//! gone); these read the server as it is at each read, so a deploy in the
//! middle of a week-long soak is one restart on the timeline, not the end
//! of the leak watch. Each gives the series `rss`, `fds` and `cpu` (the
//! CPU time's rate, seconds per second), with the source as the label.
//! For a cgroup, `rss` is the memory the cgroup is charged (v2
//! `memory.current`, v1 `memory.usage_in_bytes`: page cache included, as
//! the kernel counts it against the cgroup's limit), `cpu` its CPU time
//! (v2 `cpu.stat` `usage_usec`, v1 `cpuacct.usage`), `fds` the open
//! descriptors of its processes summed.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::remote::ReadError;
use super::{Reading, Restart, Value};
use crate::plan::watch::{CgroupSpec, PROCESS_WATCHES};

/// The last CPU time read, for its rate.
#[derive(Clone, Copy, Debug)]
struct Cpu {
    seconds: f64,
    at: Instant,
}

/// A read's three figures, before they become values.
struct Figures {
    rss: f64,
    fds: Option<f64>,
    cpu_seconds: f64,
}

/// Puts `f` into `out` as the process watches' values (`ids`: each
/// watch's index, rss, fds and cpu), the CPU as a rate against `last`.
fn emit(f: &Figures, last: &mut Option<Cpu>, ids: [usize; 3], out: &mut Reading, source: usize) {
    let now = Instant::now();
    let mut push = |i: usize, value: f64| {
        out.values.push(Value {
            watch: ids[i],
            source,
            labels: Vec::new(),
            value,
        })
    };
    push(0, f.rss);
    if let Some(fds) = f.fds {
        push(1, fds);
    }
    if let Some(l) = *last {
        let secs = now.duration_since(l.at).as_secs_f64();
        if secs > 0.0 && f.cpu_seconds >= l.seconds {
            push(2, (f.cpu_seconds - l.seconds) / secs);
        }
    }
    *last = Some(Cpu {
        seconds: f.cpu_seconds,
        at: now,
    });
}

/// The indices of the process watches (`rss`, `fds`, `cpu`) in the
/// watch's name list.
pub(super) fn process_ids(names: &[String]) -> [usize; 3] {
    PROCESS_WATCHES.map(|(n, _)| {
        names
            .iter()
            .position(|x| x == n)
            .expect("the process watches are named")
    })
}

/// A server by its pid file.
pub(super) struct PidFile {
    path: PathBuf,
    pid: Option<u32>,
    cpu: Option<Cpu>,
}

impl PidFile {
    pub(super) fn new(path: &Path) -> PidFile {
        PidFile {
            path: path.to_path_buf(),
            pid: None,
            cpu: None,
        }
    }

    /// Reads the file's process now.
    pub(super) fn read(&mut self, ids: [usize; 3], out: &mut Reading, source: usize) -> Result<(), ReadError> {
        let text = std::fs::read_to_string(&self.path).map_err(|e| ReadError {
            reason: "gone",
            detail: format!("cannot read the pid file ({e})"),
        })?;
        let pid: u32 = text.trim().parse().map_err(|_| ReadError {
            reason: "gone",
            detail: format!("the pid file holds {:?}, not a PID", text.trim()),
        })?;
        let p = crate::observe::procs::read_proc(pid).ok_or_else(|| ReadError {
            reason: "gone",
            detail: format!("PID {pid} (from the pid file) is not running"),
        })?;
        if self.pid.is_some_and(|old| old != pid) {
            out.restarts.push(Restart {
                source,
                watch: None,
                why: format!("PID {} → {pid}", self.pid.unwrap_or_default()),
            });
            self.cpu = None;
        }
        self.pid = Some(pid);
        let f = Figures {
            rss: p.rss_bytes,
            fds: p.open_fds,
            cpu_seconds: p.cpu_seconds,
        };
        emit(&f, &mut self.cpu, ids, out, source);
        Ok(())
    }
}

/// Where a cgroup's figures are, v2 or v1.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Files {
    /// The unified hierarchy: one directory.
    V2(PathBuf),
    /// The memory and cpuacct controllers' directories.
    V1 { memory: PathBuf, cpuacct: PathBuf },
}

/// A cgroup's processes.
pub(super) struct Cgroup {
    files: Files,
    pids: Vec<u32>,
    cpu: Option<Cpu>,
}

/// The root cgroup hierarchies are mounted under.
const ROOT: &str = "/sys/fs/cgroup";

impl Cgroup {
    /// Finds the cgroup's files (a unit's cgroup from `systemctl show`
    /// first): the error is what the operator must fix.
    pub(super) fn open(spec: &CgroupSpec) -> Result<Cgroup, String> {
        let path = if spec.path.is_empty() {
            unit_cgroup(&spec.given)?
        } else {
            spec.path.clone()
        };
        let rel = path.trim_start_matches('/');
        let v2 = Path::new(ROOT).join(rel);
        let files = if v2.join("memory.current").exists() {
            Files::V2(v2)
        } else {
            let memory = Path::new(ROOT).join("memory").join(rel);
            let cpuacct = ["cpuacct", "cpu,cpuacct"]
                .iter()
                .map(|c| Path::new(ROOT).join(c).join(rel))
                .find(|d| d.join("cpuacct.usage").exists());
            match (memory.join("memory.usage_in_bytes").exists(), cpuacct) {
                (true, Some(cpuacct)) => Files::V1 { memory, cpuacct },
                _ => {
                    return Err(format!(
                        "no cgroup {path} under {ROOT} (neither v2 memory.current nor v1 memory.usage_in_bytes and cpuacct.usage): is the server running there? (see /proc/PID/cgroup of one of its processes)"
                    ));
                }
            }
        };
        Ok(Cgroup {
            files,
            pids: Vec::new(),
            cpu: None,
        })
    }

    /// Reads the cgroup now.
    pub(super) fn read(&mut self, ids: [usize; 3], out: &mut Reading, source: usize) -> Result<(), ReadError> {
        let gone = |what: &Path, e: std::io::Error| ReadError {
            reason: "gone",
            detail: format!("cannot read {} ({e})", what.display()),
        };
        let number = |path: PathBuf| -> Result<f64, ReadError> {
            let text = std::fs::read_to_string(&path).map_err(|e| gone(&path, e))?;
            text.trim().parse().map_err(|_| ReadError {
                reason: "malformed",
                detail: format!("{} holds {:?}", path.display(), text.trim()),
            })
        };
        let (rss, cpu_seconds, procs) = match &self.files {
            Files::V2(dir) => {
                let stat = dir.join("cpu.stat");
                let text = std::fs::read_to_string(&stat).map_err(|e| gone(&stat, e))?;
                let usec = text
                    .lines()
                    .find_map(|l| l.strip_prefix("usage_usec "))
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .unwrap_or(0.0);
                (
                    number(dir.join("memory.current"))?,
                    usec / 1e6,
                    dir.join("cgroup.procs"),
                )
            }
            Files::V1 { memory, cpuacct } => (
                number(memory.join("memory.usage_in_bytes"))?,
                number(cpuacct.join("cpuacct.usage"))? / 1e9,
                memory.join("cgroup.procs"),
            ),
        };
        let text = std::fs::read_to_string(&procs).map_err(|e| gone(&procs, e))?;
        let pids: Vec<u32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
        let fds = pids
            .iter()
            .map(|pid| std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count() as f64))
            .sum::<Result<f64, _>>()
            .ok();
        // A restart: every process replaced (a service's new master and
        // workers), or the cgroup's CPU counter started over (the cgroup
        // was made anew).
        let replaced = !self.pids.is_empty() && !pids.is_empty() && !pids.iter().any(|p| self.pids.contains(p));
        let started_over = self.cpu.is_some_and(|c| cpu_seconds < c.seconds);
        if replaced || started_over {
            out.restarts.push(Restart {
                source,
                watch: None,
                why: if replaced {
                    format!("every process replaced (now PIDs {:?})", &pids[..pids.len().min(4)])
                } else {
                    "the cgroup's CPU time started over".into()
                },
            });
            self.cpu = None;
        }
        // A moment with no process (the old one gone, the new one not yet
        // in) keeps the last set, so the new one is seen as replacing it.
        if !pids.is_empty() {
            self.pids = pids;
        }
        let f = Figures { rss, fds, cpu_seconds };
        emit(&f, &mut self.cpu, ids, out, source);
        Ok(())
    }
}

/// A systemd unit's cgroup path (`systemctl show -p ControlGroup`).
fn unit_cgroup(unit: &str) -> Result<String, String> {
    let out = std::process::Command::new("systemctl")
        .args(["show", "--property", "ControlGroup", "--value", unit])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| {
            format!("cannot run systemctl to find the unit's cgroup ({e}); give --target-cgroup PATH instead")
        })?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || path.is_empty() {
        let why = String::from_utf8_lossy(&out.stderr).trim().to_string();
        return Err(format!(
            "systemd has no cgroup for it (is it running?{}); give --target-cgroup PATH instead",
            if why.is_empty() {
                String::new()
            } else {
                format!(" systemctl says: {why}")
            }
        ));
    }
    Ok(path)
}
