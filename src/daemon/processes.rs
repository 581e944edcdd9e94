//! `soakd run --processes N`: one plan run as N local shards by one command.
//!
//! Why it exists: a process's open-file limit caps what it can hold (20,000
//! descriptors on some hosts, with no way to raise it), while the host can
//! hold far more. Sharding already splits a plan over processes
//! ([`crate::plan::shard`], `--shard I/N`); this module spares the operator
//! N command lines, N metrics addresses and a `soakd merge` at the end.
//!
//! The parent runs no load. It checks the whole plan and every share before
//! anything opens (preflight of each share: open files, ports, source
//! addresses, outputs; each share's metrics port bound and let go), then
//! starts N copies of itself with the same command line and, in their
//! environment, which share each runs ([`INDEX_ENV`]) and where it writes
//! ([`DIR_ENV`]). A copy that finds them runs share I of N: its slots, its
//! own slice of the source addresses when the plan has any, metrics on the
//! given port + I, its report (and HDR log, state file) of its own, no
//! status line and no summary. The copies run in a process group of their
//! own, so a Ctrl-C reaches the parent once and is passed on once (a second
//! one stops them at once, as it does one process); they are told to stop if
//! the parent dies. The parent waits for all, merges their reports and HDR
//! logs as `soakd merge` does, writes the merged report, HTML page and
//! summary, compares with `--baseline` and exits with the worst of the
//! shards' verdicts. A share refused at start (exit 2) stops the others at
//! once.

use std::ffi::OsString;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1, SIGUSR2};

use super as daemon;
use crate::engine::Reload;
use crate::plan::{Plan, ReportDest, Shard};
use crate::{Error, preflight};

/// The environment variable that tells a copy which share it runs (set by
/// the parent; not for users: use `--shard` for a share of your own).
pub const INDEX_ENV: &str = "SOAKD_PROCESS";
/// Where a copy writes its report, HDR log and the parent reads them.
pub const DIR_ENV: &str = "SOAKD_PROCESS_DIR";

/// What this process is in a `--processes N` run.
pub enum Role {
    /// The one started by the user: starts, watches and merges the shards.
    Parent {
        /// Shards.
        count: u32,
    },
    /// Share `index` of `count`, writing into `dir`.
    Shard {
        /// This share.
        index: u32,
        /// Shards in all.
        count: u32,
        /// The parent's directory for the shards' files.
        dir: PathBuf,
    },
}

impl Role {
    /// The role for `--processes` (`None`: not given, or 1) given the
    /// environment. `shard_given` names a `--shard`/`SOAKD_SHARD` the user
    /// gave as well, which cannot be combined. A shard's threads default to
    /// its part of the host's CPUs.
    pub fn of(processes: Option<u16>, shard_given: Option<&str>) -> Result<Option<Role>, Error> {
        let Some(count) = processes.map(u32::from).filter(|&n| n > 1) else {
            return Ok(None);
        };
        let index = std::env::var(INDEX_ENV).ok().filter(|v| !v.is_empty());
        let Some(index) = index else {
            if let Some(flag) = shard_given {
                return Err(Error::Usage(format!(
                    "--processes {count} runs every share of the plan on this host itself; {flag} runs one share: give one or the other"
                )));
            }
            return Ok(Some(Role::Parent { count }));
        };
        let index: u32 = index
            .parse()
            .ok()
            .filter(|&i| i < count)
            .ok_or_else(|| Error::Usage(format!("{INDEX_ENV}={index:?} is not a share of --processes {count}; it is set by soakd run --processes for its own copies, unset it")))?;
        let dir = std::env::var_os(DIR_ENV)
            .map(PathBuf::from)
            .ok_or_else(|| Error::Usage(format!("{INDEX_ENV} is set but {DIR_ENV} is not; both are set by soakd run --processes for its own copies, unset {INDEX_ENV}")))?;
        crate::plan::defaults::share_cpus(count as usize);
        Ok(Some(Role::Shard { index, count, dir }))
    }

    /// Runs this role with the whole plan (and its reload, with `--config`).
    pub fn run(self, plan: Plan, reload: Option<Reload>, html: Option<PathBuf>) -> Result<(), Error> {
        match self {
            Role::Parent { count } => parent(plan, count, html),
            Role::Shard { index, count, dir } => {
                let split = splits_sources(&plan);
                let mine = share(plan, index, count, split, &dir)?;
                let reload = reload.map(|whole| -> Reload {
                    std::sync::Arc::new(move || whole().and_then(|p| share(p, index, count, split, &dir)))
                });
                daemon::run_shard(mine, reload)
            }
        }
    }
}

/// Each process takes its own slice of the source addresses when the plan
/// has any; with none, every process shares the kernel's choice of source.
fn splits_sources(plan: &Plan) -> bool {
    plan.workloads.iter().any(|w| !w.conn.source_addrs.is_empty())
}

/// Share `index` of `count` of the whole `plan`, its files in `dir`.
fn share(plan: Plan, index: u32, count: u32, split: bool, dir: &Path) -> Result<Plan, Error> {
    let shard = Shard { index, count };
    let mut plan = crate::plan::shard::apply(plan, shard, split, "--processes: shard")?;
    plan.metrics_listen = plan.metrics_listen.map(|a| metrics_addr(a, index));
    plan.report = Some(ReportDest::File(report_path(dir, index)));
    plan.hdr_log = plan.hdr_log.as_ref().map(|_| hdr_path(dir, index));
    if let Some(state) = &mut plan.state {
        state.path = suffixed(&state.path, index);
    }
    // The baseline is a whole plan's run: the parent compares the merged
    // report with it at the end; a share would only read as a different load.
    plan.baseline = None;
    Ok(plan)
}

/// Share `index`'s metrics address: the given port plus the index (port 0,
/// any free port, stays 0).
fn metrics_addr(a: SocketAddr, index: u32) -> SocketAddr {
    if a.port() == 0 {
        return a;
    }
    SocketAddr::new(a.ip(), a.port() + index as u16)
}

fn report_path(dir: &Path, index: u32) -> PathBuf {
    dir.join(format!("shard-{index}.json"))
}

fn hdr_path(dir: &Path, index: u32) -> PathBuf {
    dir.join(format!("shard-{index}.hdr"))
}

/// `FILE.shard-I`: share I's own state file beside the one named.
fn suffixed(path: &Path, index: u32) -> PathBuf {
    let mut s: OsString = path.as_os_str().to_owned();
    s.push(format!(".shard-{index}"));
    PathBuf::from(s)
}

/// Where the shards' files go: beside `--report FILE` as `FILE.shards/`
/// (kept: `soakd merge` can redo the merge), else a directory under the
/// temporary directory, removed at the end.
fn shards_dir(plan: &Plan) -> (PathBuf, bool) {
    match &plan.report {
        Some(ReportDest::File(p)) => {
            let mut s = p.as_os_str().to_owned();
            s.push(".shards");
            (PathBuf::from(s), false)
        }
        _ => (
            std::env::temp_dir().join(format!("soakd-processes-{}", std::process::id())),
            true,
        ),
    }
}

/// Everything a share needs is checked before the first copy starts: a
/// typo, a port taken or a limit too low must not cost a half-started run.
fn check_shares(plan: &Plan, count: u32, split: bool, dir: &Path) -> Result<Vec<Plan>, Error> {
    if let Some(a) = plan.metrics_listen
        && a.port() != 0
        && u32::from(a.port()) + count - 1 > u32::from(u16::MAX)
    {
        return Err(Error::Usage(format!(
            "--processes {count}: the shards' metrics ports would run from {} past 65535; give a lower --metrics-listen port",
            a.port()
        )));
    }
    if split {
        for w in &plan.workloads {
            let n = w.conn.source_addrs.len();
            if n < count as usize {
                return Err(Error::Usage(format!(
                    "--processes {count}: workload {} has {n} source address(es), and each process takes its own; give at least {count} (e.g. --source-addr 127.0.0.2 --source-addr 127.0.0.3 … on loopback), or none at all",
                    w.name
                )));
            }
        }
    }
    if !split {
        // Every process takes its ports from the one source address.
        preflight::check_port_budget(plan)?;
    }
    let mut shares = Vec::with_capacity(count as usize);
    for index in 0..count {
        let mine = share(plan.clone(), index, count, split, dir)?;
        // One share's warnings stand for all (the shares are alike).
        if index == 0 {
            for w in preflight::check_quiet(&mine)? {
                eprintln!("soakd: warning: {w}");
            }
        } else {
            preflight::check_limits(&mine)?;
        }
        if let Some(a) = mine.metrics_listen
            && a.port() != 0
        {
            TcpListener::bind(a).map_err(|e| {
                Error::Preflight(format!(
                    "--processes {count}: shard {index}'s metrics address {a} (--metrics-listen plus {index}) cannot be bound ({e}); give another --metrics-listen port or stop what listens there"
                ))
            })?;
        }
        shares.push(mine);
    }
    Ok(shares)
}

/// The Prometheus file_sd list of the shards' metrics addresses, for one
/// scrape job over all of them.
fn targets_json(shares: &[Plan]) -> Option<String> {
    let addrs: Vec<String> = shares
        .iter()
        .filter_map(|p| p.metrics_listen)
        .filter(|a| a.port() != 0)
        .map(|a| format!("\"{a}\""))
        .collect();
    (!addrs.is_empty()).then(|| format!("[{{\"targets\": [{}], \"labels\": {{}}}}]\n", addrs.join(", ")))
}

/// The user's process: checks, starts the shards, passes signals on,
/// waits, merges.
fn parent(plan: Plan, count: u32, html: Option<PathBuf>) -> Result<(), Error> {
    let split = splits_sources(&plan);
    let (dir, temporary) = shards_dir(&plan);
    std::fs::create_dir_all(&dir).map_err(|e| {
        Error::Usage(format!(
            "--processes: cannot make {} for the shards' reports ({e}); give a --report in a writable place",
            dir.display()
        ))
    })?;
    daemon::check_html(html.as_deref())?;
    let baseline = daemon::load_baseline(&plan)?;
    let shares = check_shares(&plan, count, split, &dir)?;
    let targets = dir.join("targets.json");
    let sd = targets_json(&shares);
    if let Some(json) = &sd {
        crate::fsio::write_atomic(&targets, json.as_bytes())
            .map_err(|e| Error::io(format!("writing {}", targets.display()), e))?;
    }
    let listen = match (
        shares.first().and_then(|p| p.metrics_listen),
        shares.last().and_then(|p| p.metrics_listen),
    ) {
        (Some(a), Some(b)) if a.port() != 0 => {
            format!("metrics on {a} to {b} (Prometheus file_sd: {})", targets.display())
        }
        (Some(_), Some(_)) => "metrics each on a free port (printed by each shard)".to_string(),
        _ => "metrics off".to_string(),
    };
    eprintln!(
        "soakd: running the plan as {count} processes (shards 0/{count} to {}/{count}); {listen}; shards' reports in {}",
        count - 1,
        dir.display()
    );

    // A report left from an earlier run with the same --report must not be
    // merged as this run's when a shard fails before writing its own.
    for index in 0..count {
        for stale in [report_path(&dir, index), hdr_path(&dir, index)] {
            match std::fs::remove_file(&stale) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(format!("removing the earlier run's {}", stale.display()), e)),
            }
        }
    }
    let signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2])
        .map_err(|e| Error::io("installing the signal handlers", e))?;
    let mut children = spawn_all(count, &dir)?;
    // Under systemd the parent is the service's main process: it says
    // ready once every shard is started, pings the watchdog from its own
    // loop, and says stopping when told to stop. The shards do not
    // speak to systemd (NotifyAccess=main would refuse them).
    let notify = crate::observe::notify::Notifier::from_env();
    notify.ready();
    notify.status(&format!("{count} shards running"));
    let codes = wait_all(&mut children, signals, &notify);

    let mut reports = Vec::new();
    let mut missing = Vec::new();
    for index in 0..count {
        let path = report_path(&dir, index);
        match crate::report::read(&path, "a shard's report") {
            Ok(r) => reports.push((path.display().to_string(), r)),
            Err(_) => missing.push(index),
        }
    }
    let refused: Vec<u32> = (0..count).filter(|&i| codes[i as usize] == Some(2)).collect();
    if !refused.is_empty() {
        cleanup(&dir, temporary);
        return Err(Error::Usage(format!(
            "--processes {count}: shard(s) {} refused their share (said above); the others were stopped",
            list(&refused)
        )));
    }
    let outputs = if reports.is_empty() {
        Err(Error::Internal(format!(
            "--processes {count}: no shard wrote its report"
        )))
    } else {
        merged_outputs(&plan, &reports, &dir, count, html.as_deref(), baseline)
    };
    cleanup(&dir, temporary && outputs.is_ok());
    let comparison = outputs?;

    let failed: Vec<u32> = (0..count)
        .filter(|&i| !matches!(codes[i as usize], Some(0) | Some(3)))
        .collect();
    if !failed.is_empty() {
        return Err(Error::Internal(format!(
            "--processes {count}: shard(s) {} ended in error (said above; their reports: {} missing); the merged report holds the {} that finished",
            list(&failed),
            if missing.is_empty() {
                "none".to_string()
            } else {
                list(&missing)
            },
            reports.len()
        )));
    }
    let mut bad = Vec::new();
    let verdict: Vec<u32> = (0..count).filter(|&i| codes[i as usize] == Some(3)).collect();
    if !verdict.is_empty() {
        bad.push(format!(
            "shard(s) {} failed their thresholds (said above)",
            list(&verdict)
        ));
    }
    if let Some(Err(e)) = comparison.as_ref().map(crate::verdict::Comparison::verdict) {
        bad.push(e.to_string());
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(Error::Verdict(bad.join("; ")))
    }
}

/// The merged report, HDR log and HTML page, and the comparison with
/// `--baseline`; every output is tried even when one fails.
fn merged_outputs(
    plan: &Plan,
    reports: &[(String, crate::Report)],
    dir: &Path,
    count: u32,
    html: Option<&Path>,
    baseline: Option<daemon::Baseline>,
) -> Result<Option<crate::verdict::Comparison>, Error> {
    let report = crate::merge::merge(reports)?;
    let written = daemon::output(&report, plan.report.as_ref());
    let logs = match &plan.hdr_log {
        Some(out) => {
            let inputs: Vec<PathBuf> = (0..count).map(|i| hdr_path(dir, i)).filter(|p| p.exists()).collect();
            crate::merge::merge_hdr_logs(&inputs, out).map(|_| ())
        }
        None => Ok(()),
    };
    let (base, tolerance) = match baseline {
        Some(b) => (Some(b.run.report.clone()), Some((b.run, b.tolerance))),
        None => (None, None),
    };
    let compared = daemon::against_baseline(&report, plan.hdr_log.as_deref(), tolerance);
    let page = match html {
        Some(path) => daemon::write_html(
            &report,
            base.as_ref(),
            plan.hdr_log.as_deref(),
            path,
            compared.as_ref().ok().and_then(Option::as_ref),
        ),
        None => Ok(()),
    };
    let comparison = compared?;
    written.and(logs).and(page).map(|()| comparison)
}

fn list(indices: &[u32]) -> String {
    indices.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
}

fn cleanup(dir: &Path, remove: bool) {
    if remove {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Starts the copies: the same program and arguments, the share in the
/// environment, a process group of their own, SIGTERM when the parent dies.
fn spawn_all(count: u32, dir: &Path) -> Result<Vec<Child>, Error> {
    let exe = std::env::current_exe().map_err(|e| Error::io("finding soakd's own program to start the shards", e))?;
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let mut children: Vec<Child> = Vec::with_capacity(count as usize);
    for index in 0..count {
        let mut cmd = Command::new(&exe);
        cmd.args(&args)
            .env(INDEX_ENV, index.to_string())
            .env(DIR_ENV, dir)
            .env_remove(crate::plan::shard::SHARD_ENV)
            .env_remove("NOTIFY_SOCKET")
            .env_remove("WATCHDOG_USEC")
            .env_remove("WATCHDOG_PID")
            .stdin(Stdio::null());
        die_with_parent(&mut cmd);
        match cmd.spawn() {
            Ok(c) => children.push(c),
            Err(e) => {
                signal_all(&children, |_| true, SIGTERM);
                for c in &mut children {
                    let _ = c.wait();
                }
                return Err(Error::io(format!("starting shard {index} ({})", exe.display()), e));
            }
        }
    }
    Ok(children)
}

/// A copy in its own process group (a terminal's Ctrl-C reaches only the
/// parent, which passes it on once), told SIGTERM when the parent dies.
#[allow(unsafe_code)]
fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    cmd.process_group(0);
    // SAFETY: prctl with PR_SET_PDEATHSIG only sets a flag of the calling
    // (just forked) process; it allocates nothing and takes no lock.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
}

/// Sends `signal` to every child for which `live(index)` holds: a child
/// already reaped is skipped, as its pid may be another process's by now.
fn signal_all(children: &[Child], live: impl Fn(usize) -> bool, signal: i32) {
    for (i, c) in children.iter().enumerate() {
        if !live(i) {
            continue;
        }
        // One that exited and is not reaped yet takes no harm.
        #[allow(unsafe_code)]
        // SAFETY: kill(2) on a child's pid; no memory is involved.
        unsafe {
            libc::kill(c.id() as libc::pid_t, signal);
        }
    }
}

/// Waits for every copy, passing the parent's signals on; a share refused
/// at start (exit 2) stops the rest. Each copy's exit code (`None`: killed
/// by a signal).
fn wait_all(
    children: &mut [Child],
    mut signals: signal_hook::iterator::Signals,
    notify: &crate::observe::notify::Notifier,
) -> Vec<Option<i32>> {
    let mut codes: Vec<Option<Option<i32>>> = vec![None; children.len()];
    let (mut stopping, mut refused) = (false, false);
    let ping_every = notify.watchdog_interval().map(|d| d / 2);
    let mut pinged = std::time::Instant::now();
    while codes.iter().any(Option::is_none) {
        for s in signals.pending() {
            if s == SIGINT || s == SIGTERM {
                notify.stopping();
            }
            signal_all(children, |i| codes[i].is_none(), s);
        }
        // The parent's own loop is what the watchdog sees; a shard that
        // dies is said on stderr and by its metrics endpoint going away
        // (SoakdDown), and the others soak on.
        if let Some(every) = ping_every
            && pinged.elapsed() >= every
        {
            notify.watchdog();
            pinged = std::time::Instant::now();
        }
        for (i, c) in children.iter_mut().enumerate() {
            if codes[i].is_some() {
                continue;
            }
            if let Ok(Some(status)) = c.try_wait() {
                codes[i] = Some(status.code());
                refused |= status.code() == Some(2);
            }
        }
        if refused && !stopping {
            stopping = true;
            signal_all(children, |i| codes[i].is_none(), SIGTERM);
        }
        // The shards live for the soak; a tenth of a second to notice one
        // ending costs nothing.
        std::thread::sleep(Duration::from_millis(100));
    }
    codes.into_iter().map(Option::flatten).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_share_has_its_port_and_files() {
        let a: SocketAddr = "127.0.0.1:9469".parse().unwrap();
        assert_eq!(metrics_addr(a, 3).port(), 9472);
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        assert_eq!(metrics_addr(any, 3).port(), 0);
        assert_eq!(
            suffixed(Path::new("/var/lib/soakd/state"), 2),
            PathBuf::from("/var/lib/soakd/state.shard-2")
        );
        assert_eq!(
            report_path(Path::new("/r.json.shards"), 0),
            PathBuf::from("/r.json.shards/shard-0.json")
        );
    }

    #[test]
    fn the_role_comes_from_the_flag_and_refuses_a_shard_beside_it() {
        // No child environment in the test process.
        assert!(Role::of(None, None).unwrap().is_none());
        assert!(Role::of(Some(1), None).unwrap().is_none());
        assert!(matches!(
            Role::of(Some(4), None).unwrap(),
            Some(Role::Parent { count: 4 })
        ));
        let e = Role::of(Some(4), Some("--shard")).err().unwrap().to_string();
        assert!(e.contains("--shard") && e.contains("--processes 4"), "{e}");
    }
}
