//! Preflight: make sure the plan fits this machine before opening anything.
//!
//! A soak that dies of EMFILE after 40 minutes of ramping, or that can never
//! get past the ephemeral-port range, wastes the operator's time. So before
//! the first connect soakd raises its soft open-file limit to the hard
//! limit, and refuses (exit 2) when the connections plus a margin still do
//! not fit, or when one target would need more local ports than the port
//! range gives its source addresses. Each message names the limit and what
//! to change.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;

use crate::plan::ReportDest;
use crate::{Error, Plan};

/// Descriptors soakd needs besides connections: stdio, one epoll and waker
/// per thread, signals, the metrics listener and its scrapers, files.
pub fn fd_margin(threads: usize) -> u64 {
    64 + 4 * threads as u64
}

/// Raises the soft open-file limit to the hard limit; returns (soft, hard)
/// as in force afterwards.
pub fn raise_nofile() -> Result<(u64, u64), Error> {
    let (soft, hard) = rlimit::Resource::NOFILE
        .get()
        .map_err(|e| Error::io("reading the open-file limit", e))?;
    if soft < hard {
        rlimit::Resource::NOFILE
            .set(hard, hard)
            .map_err(|e| Error::io("raising the open-file limit", e))?;
    }
    Ok((hard, hard))
}

/// The local (ephemeral) port range, from
/// `/proc/sys/net/ipv4/ip_local_port_range`.
pub fn local_port_range() -> Option<(u32, u32)> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let mut it = text.split_whitespace().map(|v| v.parse::<u32>().ok());
    Some((it.next()??, it.next()??))
}

/// `net.ipv4.ip_local_reserved_ports` as ranges (`8080,9000-9100`).
pub fn reserved_ports() -> Vec<(u32, u32)> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_reserved_ports").unwrap_or_default();
    text.trim()
        .split(',')
        .filter_map(|part| {
            let (a, b) = part.split_once('-').unwrap_or((part, part));
            Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
        })
        .collect()
}

/// Runs every check; on success the soft open-file limit has been raised.
/// Settings that fit but leave little room print a warning.
pub fn check(plan: &Plan) -> Result<(), Error> {
    for w in check_quiet(plan)? {
        eprintln!("soakd: warning: {w}");
    }
    Ok(())
}

/// [`check`], its warnings returned instead of printed (`soakd run
/// --processes N` checks N alike shares and says their warnings once).
pub fn check_quiet(plan: &Plan) -> Result<Vec<String>, Error> {
    check_limits(plan)?;
    Ok(warnings(plan))
}

/// Every check that refuses a plan, without the warnings (which read the
/// kernel's whole socket table: `soakd run --processes N` reads it once,
/// for its first share, not N times).
pub fn check_limits(plan: &Plan) -> Result<(), Error> {
    let (soft, hard) = raise_nofile()?;
    check_fds(plan.total_connections(), plan.threads, soft, hard)?;
    check_port_budget(plan)?;
    check_sources(plan)?;
    check_outputs(plan)
}

/// The open-file limit alone, raised and checked (a shard of `soakd run
/// --processes N`, whose parent ran the other checks for every share).
pub fn check_own_limit(plan: &Plan) -> Result<(), Error> {
    let (soft, hard) = raise_nofile()?;
    check_fds(plan.total_connections(), plan.threads, soft, hard)
}

/// The local ports `plan` needs against the kernel's range. Processes that
/// share source addresses share their ports: checked on the whole plan.
pub fn check_port_budget(plan: &Plan) -> Result<(), Error> {
    match local_port_range() {
        Some((lo, hi)) => check_ports(plan, lo, hi),
        None => Ok(()),
    }
}

fn read_sysctl(name: &str) -> Option<u64> {
    let path = format!("/proc/sys/{}", name.replace('.', "/"));
    std::fs::read_to_string(path)
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Host settings that fit the plan only barely (soakd reads them, it never
/// changes them; systemd/60-soakd.conf has values for big soaks).
pub fn warnings(plan: &Plan) -> Vec<String> {
    let mut out = Vec::new();
    let total = plan.total_connections();
    if let Some((lo, hi)) = local_port_range() {
        out.extend(port_budget(plan, lo, hi, &sockets()));
        let ports = (hi.saturating_sub(lo) + 1) as u64;
        let churny = plan
            .workloads
            .iter()
            .any(|w| w.conn.close || w.conn.max_requests_per_conn.is_some() || w.conn.max_conn_lifetime.is_some());
        for w in &plan.workloads {
            let fit = ports * w.conn.source_addrs.len().max(1) as u64;
            if churny && plan.share(w) * 2 > fit {
                out.push(format!(
                    "{}: {} connections with churn use more than half of the {fit} local ports; closed connections hold theirs for 60 s in TIME_WAIT (widen net.ipv4.ip_local_port_range or add --source-addr)",
                    w.name,
                    plan.share(w)
                ));
            }
        }
    }
    if let Some(max) = read_sysctl("net.netfilter.nf_conntrack_max")
        && total > max / 2
    {
        out.push(format!(
            "net.netfilter.nf_conntrack_max is {max}: {total} connections (and the target's side, if local) may fill the conntrack table and drop new connections; raise it (systemd/60-soakd.conf)"
        ));
    }
    for w in &plan.workloads {
        if w.target.tls.as_ref().is_some_and(|t| !t.verified()) {
            out.push(format!(
                "{}: --insecure: the server's certificate is not verified; anyone on the path could be answering",
                w.name
            ));
        }
    }
    if read_sysctl("net.ipv4.tcp_tw_reuse") == Some(0) && plan.workloads.iter().any(|w| w.conn.close) {
        out.push("net.ipv4.tcp_tw_reuse is 0: --close churn will run out of local ports quickly; set it to 1".into());
    }
    out
}

/// Every TCP socket of this network namespace (IPv4 and IPv6).
fn sockets() -> Vec<procfs::net::TcpNetEntry> {
    let mut all = procfs::net::tcp().unwrap_or_default();
    all.extend(procfs::net::tcp6().unwrap_or_default());
    all
}

/// Local ports of the ephemeral range that sockets already hold, as seen
/// by a new connection from one source address to one target. soakd leaves
/// each port to the kernel's connect-time choice (see
/// `engine::worker::socket`), and that choice is per 4-tuple: a port is
/// held for this connection when a socket of the same source address (or
/// of the wildcard one) already has it towards the same target, in any
/// state, TIME_WAIT included unless the kernel reuses those (below). A
/// port used towards another target, or from another address, is free.
/// The exception is a port some program bound explicitly (every listening
/// socket): the kernel's choice skips it whatever the address.
#[derive(Debug, Default, PartialEq, Eq)]
struct Held {
    time_wait: u64,
    established: u64,
    other: u64,
}

/// A new connection's view of the port range: from `source` (`None`: any
/// local address, when the route's source is unknown) to `target`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Tuple {
    source: Option<IpAddr>,
    target: SocketAddr,
}

fn held(sockets: &[procfs::net::TcpNetEntry], tuple: Tuple, lo: u32, hi: u32) -> Held {
    use procfs::net::TcpState;
    // By port, not by socket: a server's listening port can carry thousands
    // of accepted sockets and is still one port. A port counts under the
    // busiest state any of its sockets is in.
    let mut ports: HashMap<u16, u8> = HashMap::new();
    for s in sockets {
        let local = s.local_address;
        if !(lo..=hi).contains(&u32::from(local.port())) {
            continue;
        }
        let listening = s.state == TcpState::Listen;
        let same_tuple = same_ip(s.remote_address, tuple.target)
            && s.remote_address.port() == tuple.target.port()
            && tuple
                .source
                .is_none_or(|ip| same_ip(local, SocketAddr::new(ip, 0)) || local.ip().is_unspecified());
        if !listening && !same_tuple {
            continue;
        }
        let rank = match s.state {
            TcpState::TimeWait => 0,
            TcpState::Established => 2,
            _ => 1,
        };
        let e = ports.entry(local.port()).or_insert(rank);
        *e = (*e).max(rank);
    }
    let mut h = Held::default();
    for rank in ports.into_values() {
        match rank {
            0 => h.time_wait += 1,
            2 => h.established += 1,
            _ => h.other += 1,
        }
    }
    h
}

/// Address equality across the two ways /proc writes an IPv4 peer of an
/// IPv6 socket (`::ffff:a.b.c.d`).
fn same_ip(a: SocketAddr, b: SocketAddr) -> bool {
    let canon = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    canon(a.ip()) == canon(b.ip())
}

/// The source address the kernel would choose for a connection to
/// `target` (the route's `src`): a UDP socket "connected" there sends
/// nothing and reads it back.
fn route_source(target: SocketAddr) -> Option<IpAddr> {
    let any: SocketAddr = if target.is_ipv4() {
        ([0u8; 4], 0).into()
    } else {
        ([0u16; 8], 0).into()
    };
    let probe = std::net::UdpSocket::bind(any).ok()?;
    probe.connect(target).ok()?;
    Some(probe.local_addr().ok()?.ip())
}

/// Whether the kernel hands out a TIME_WAIT 4-tuple again to a new connect
/// (`net.ipv4.tcp_tw_reuse`: 1 everywhere, 2, the default, on loopback;
/// with TCP timestamps, a second after the close). Those ports are not
/// held for what follows, so preflight does not count them.
fn time_wait_reused(tuple: Tuple) -> bool {
    match read_sysctl("net.ipv4.tcp_tw_reuse") {
        Some(1) => true,
        Some(2) => tuple.target.ip().is_loopback() || tuple.source.is_some_and(|ip| ip.is_loopback()),
        _ => false,
    }
}

/// Warns when the ports already held for a target (by an earlier run's
/// TIME_WAITs, most often) and the plan's share together fill more than
/// three quarters of the range: the port search slows and connects fail
/// as `addr_unavailable` until the TIME_WAITs expire.
fn port_budget(plan: &Plan, lo: u32, hi: u32, sockets: &[procfs::net::TcpNetEntry]) -> Vec<String> {
    let ports = (hi.saturating_sub(lo) + 1) as u64;
    let mut need: Vec<(Tuple, u64)> = Vec::new();
    for w in &plan.workloads {
        let target = w.target.addr;
        let sources: Vec<Option<IpAddr>> = if w.conn.source_addrs.is_empty() {
            vec![route_source(target)]
        } else {
            w.conn.source_addrs.iter().copied().map(Some).collect()
        };
        let share = plan.share(w).div_ceil(sources.len() as u64);
        for source in sources {
            let tuple = Tuple { source, target };
            match need.iter_mut().find(|(t, _)| *t == tuple) {
                Some((_, n)) => *n += share,
                None => need.push((tuple, share)),
            }
        }
    }
    let mut out = Vec::new();
    for (tuple, share) in need {
        let h = held(sockets, tuple, lo, hi);
        let time_wait = if time_wait_reused(tuple) { 0 } else { h.time_wait };
        let taken = time_wait + h.established + h.other;
        if taken == 0 || (share + taken) * 4 <= ports * 3 {
            continue;
        }
        let free = ports.saturating_sub(taken);
        out.push(format!(
            "{}: {share} new connections need local ports, but {taken} of the {ports} in ip_local_port_range ({lo}-{hi}) are held \
             ({time_wait} in TIME_WAIT, freed within 60 s of their close; {} established; {} in other states), leaving {free}; \
             connects will slow down and fail as addr_unavailable until they free: wait a minute, or use other --source-addr addresses",
            match tuple.source {
                Some(ip) => format!("{ip} to {}", tuple.target),
                None => format!("local ports to {}", tuple.target),
            },
            h.established,
            h.other
        ));
    }
    out
}

/// Free local ports per (source, target) of the plan, as a line for
/// `soakd check`: what the kernel can still hand out to the plan's new
/// connections, by the same count as the warning above.
fn port_counts(plan: &Plan, lo: u32, hi: u32) -> Vec<String> {
    let ports = (hi.saturating_sub(lo) + 1) as u64;
    let sockets = sockets();
    let mut out: Vec<String> = Vec::new();
    for w in &plan.workloads {
        let target = w.target.addr;
        let sources: Vec<Option<IpAddr>> = if w.conn.source_addrs.is_empty() {
            vec![route_source(target)]
        } else {
            w.conn.source_addrs.iter().copied().map(Some).collect()
        };
        for source in sources {
            let tuple = Tuple { source, target };
            let h = held(&sockets, tuple, lo, hi);
            let taken = h.established + h.other + if time_wait_reused(tuple) { 0 } else { h.time_wait };
            let line = format!(
                "{} to {target}: {} of {ports} local ports free",
                source.map_or("any address".to_string(), |ip| ip.to_string()),
                ports.saturating_sub(taken)
            );
            if !out.contains(&line) {
                out.push(line);
            }
        }
    }
    out
}

/// The same checks as [`check`] without changing anything (the soft limit
/// is taken as already raised to the hard one): for `soakd check`.
pub fn verdict(plan: &Plan) -> Result<String, Error> {
    let (_, hard) = rlimit::Resource::NOFILE
        .get()
        .map_err(|e| Error::io("reading the open-file limit", e))?;
    check_fds(plan.total_connections(), plan.threads, hard, hard)?;
    let ports = match local_port_range() {
        Some((lo, hi)) => {
            check_ports(plan, lo, hi)?;
            format!(
                "local ports {lo}-{hi} ({} per source address; {})",
                hi - lo + 1,
                port_counts(plan, lo, hi).join("; ")
            )
        }
        None => "local port range unknown".to_string(),
    };
    check_sources(plan)?;
    check_outputs(plan)?;
    let mut verdict = format!(
        "preflight: ok: needs about {} open files of a hard limit of {hard}; {ports}",
        plan.total_connections() + fd_margin(plan.threads)
    );
    for w in warnings(plan) {
        verdict.push_str("\nwarning: ");
        verdict.push_str(&w);
    }
    Ok(verdict)
}

/// The open-file check, separated for testing.
pub fn check_fds(connections: u64, threads: usize, soft: u64, hard: u64) -> Result<(), Error> {
    let needed = connections + fd_margin(threads);
    if needed > soft {
        return Err(Error::Preflight(format!(
            "--connections {connections} needs about {needed} open files, but the open-file limit (RLIMIT_NOFILE) is {soft} (hard limit {hard}); \
             lower --connections, raise the limit (ulimit -n, or LimitNOFILE= in the systemd unit), or split the load over several soakd processes"
        )));
    }
    Ok(())
}

/// Each target gets `ports × source addresses` connections at most.
fn check_ports(plan: &Plan, lo: u32, hi: u32) -> Result<(), Error> {
    let per_addr = (hi.saturating_sub(lo) + 1) as u64;
    let mut by_target: HashMap<SocketAddr, (u64, usize)> = HashMap::new();
    for w in &plan.workloads {
        let e = by_target.entry(w.target.addr).or_insert((0, usize::MAX));
        e.0 += plan.share(w);
        e.1 = e.1.min(w.conn.source_addrs.len().max(1));
    }
    for (addr, (conns, sources)) in by_target {
        let fit = per_addr * sources as u64;
        if conns > fit {
            return Err(Error::Preflight(format!(
                "{conns} connections to {addr} need {conns} local ports, but net.ipv4.ip_local_port_range ({lo}-{hi}) gives {per_addr} per source address \
                 and {sources} source address(es) give {fit}; add --source-addr addresses (any of 127.0.0.0/8 on loopback), \
                 widen ip_local_port_range, or lower --connections"
            )));
        }
    }
    Ok(())
}

/// Every source address must be local and of the target's family.
fn check_sources(plan: &Plan) -> Result<(), Error> {
    for w in &plan.workloads {
        for ip in &w.conn.source_addrs {
            if ip.is_ipv4() != w.target.addr.is_ipv4() {
                return Err(Error::Usage(format!(
                    "--source-addr {ip} is {} but the target {} is {}; use source addresses of the target's family",
                    family(*ip),
                    w.target.addr,
                    family(w.target.addr.ip())
                )));
            }
            // A UDP bind asks only "is this address ours?". A TCP bind would
            // also need a free TCP port, and an address whose ports are all
            // held or in TIME_WAIT (say, right after an earlier run) would be
            // refused as "not assigned": wrong advice. Running out of ports
            // is a run-time condition (`addr_unavailable`, with backoff).
            std::net::UdpSocket::bind(SocketAddr::new(*ip, 0)).map_err(|e| {
                Error::Preflight(format!(
                    "--source-addr {ip} cannot be bound ({e}); use an address assigned to this machine (see `ip addr`)"
                ))
            })?;
        }
    }
    Ok(())
}

/// The report and the HdrHistogram log must be writable before the run
/// starts: a soak that runs for a week and then cannot write its report
/// has lost the week. The files themselves are neither created nor
/// truncated here: an existing one is opened for writing and closed; for a
/// new one, the directory must exist and take a new file (a probe, removed
/// at once).
fn check_outputs(plan: &Plan) -> Result<(), Error> {
    if let Some(ReportDest::File(path)) = &plan.report {
        check_writable("--report", path)?;
    }
    if let Some(path) = &plan.hdr_log {
        check_writable("--hdr-log", path)?;
    }
    // The state file is rewritten (temp file and rename) every checkpoint,
    // so its directory must take new files, whether or not it exists yet.
    if let Some(sf) = &plan.state {
        check_writable("--state", &sf.path)?;
        let dir = match sf.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if let Err(e) = crate::fsio::check_writable(&dir.join(".soakd-state-probe")) {
            return Err(Error::Preflight(format!(
                "--state {}: its directory {} does not take new files ({e}), and each checkpoint is written as a new file renamed over the old; choose a writable directory",
                sf.path.display(),
                dir.display()
            )));
        }
    }
    Ok(())
}

fn check_writable(flag: &str, path: &Path) -> Result<(), Error> {
    let refuse = |why: String| {
        Err(Error::Preflight(format!(
            "{flag} {}: {why}; choose a writable file path",
            path.display()
        )))
    };
    if path.is_dir() {
        return refuse("is a directory".into());
    }
    if path.exists() {
        return match std::fs::OpenOptions::new().write(true).open(path) {
            Ok(_) => Ok(()),
            Err(e) => refuse(format!("cannot be written ({e})")),
        };
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return refuse(format!("{} is not a directory", dir.display())),
        Err(e) => return refuse(format!("directory {} is not usable ({e})", dir.display())),
    }
    // Mode bits do not tell (ACLs, read-only mounts, root): a probe file
    // created and removed at once does.
    let probe = dir.join(format!(".soakd-probe-{}", std::process::id()));
    match std::fs::OpenOptions::new().write(true).create_new(true).open(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => refuse(format!("directory {} is not writable ({e})", dir.display())),
    }
}

fn family(ip: IpAddr) -> &'static str {
    if ip.is_ipv4() { "IPv4" } else { "IPv6" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_must_be_writable_before_the_run() {
        let dir = std::env::temp_dir().join(format!("soakd-preflight-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let existing = dir.join("old.json");
        std::fs::write(&existing, "keep me").unwrap();
        assert!(check_writable("--report", &dir.join("new.json")).is_ok());
        assert!(!dir.join("new.json").exists(), "the check created the file");
        assert!(check_writable("--report", &existing).is_ok());
        assert_eq!(std::fs::read_to_string(&existing).unwrap(), "keep me", "truncated");
        let only_the_old_file = std::fs::read_dir(&dir).unwrap().count() == 1;
        assert!(only_the_old_file, "the probe file was left behind");
        for (path, says) in [
            (dir.clone(), "is a directory"),
            (dir.join("no/such/dir/r.json"), "is not usable"),
            (existing.join("r.json"), "is not a directory"),
        ] {
            let e = check_writable("--hdr-log", &path).unwrap_err();
            assert_eq!(e.exit_code(), 2);
            let msg = e.to_string();
            assert!(msg.contains("--hdr-log") && msg.contains(says), "{msg}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn fd_check_names_the_limit() {
        assert!(check_fds(15_000, 2, 20_000, 20_000).is_ok());
        let e = check_fds(100_000, 2, 20_000, 20_000).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let msg = e.to_string();
        assert!(
            msg.contains("open-file limit") && msg.contains("20000") && msg.contains("100000"),
            "{msg}"
        );
    }

    #[test]
    fn churn_near_the_port_range_warns() {
        let text = "metrics_listen = \"off\"\n[[workload]]\nurl = \"http://127.0.0.1:1/\"\nconnections = 20000\nclose = true\n";
        let plan = crate::config::parse(std::path::Path::new("t.toml"), text, Default::default()).unwrap();
        let (lo, hi) = local_port_range().expect("linux has the port range");
        let w = warnings(&plan);
        if hi - lo + 1 < 40_000 {
            assert!(
                w.iter().any(|m| m.contains("TIME_WAIT") && m.contains("--source-addr")),
                "{w:?}"
            );
        }
        let quiet = crate::config::parse(
            std::path::Path::new("t.toml"),
            "metrics_listen = \"off\"\n[[workload]]\nurl = \"http://127.0.0.1:1/\"\nconnections = 10\n",
            Default::default(),
        )
        .unwrap();
        assert!(warnings(&quiet).iter().all(|m| !m.contains("with churn")));
        // Nothing held: no port-budget warning whatever the plan.
        assert!(port_budget(&plan, lo, hi, &[]).is_empty());
    }

    /// `/proc/net/tcp` lines for `(local, remote, state)` (state in hex as
    /// the kernel writes it: 01 established, 06 TIME_WAIT, 0A listen).
    fn table(rows: &[(&str, &str, &str)]) -> Vec<procfs::net::TcpNetEntry> {
        use procfs::FromBufReadSI;
        let hex = |a: &str| {
            let a: SocketAddr = a.parse().unwrap();
            let IpAddr::V4(ip) = a.ip() else { unreachable!() };
            format!("{:08X}:{:04X}", u32::from_le_bytes(ip.octets()), a.port())
        };
        let mut text = String::from(
            "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n",
        );
        for (i, (l, r, st)) in rows.iter().enumerate() {
            text.push_str(&format!(
                "{i:4}: {} {} {st} 00000000:00000000 00:00000000 00000000     0        0 {i} 1 0000000000000000 20 4 30 10 -1\n",
                hex(l),
                hex(r)
            ));
        }
        let info = procfs::ExplicitSystemInfo {
            boot_time_secs: 0,
            ticks_per_second: 100,
            page_size: 4096,
            is_little_endian: cfg!(target_endian = "little"),
        };
        procfs::net::TcpNetEntries::from_buf_read(text.as_bytes(), &info)
            .unwrap()
            .0
    }

    /// Issue 17: ports are held per 4-tuple. Connections from 127.0.0.11 to
    /// the target hold nothing for 127.0.0.1 or for another target; a
    /// listening port is held for everyone (the kernel's choice skips
    /// explicitly bound ports); a port counts once.
    #[test]
    fn held_ports_are_counted_per_four_tuple() {
        let target: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let rows = table(&[
            ("127.0.0.11:40000", "127.0.0.1:8080", "01"),
            ("127.0.0.11:40001", "127.0.0.1:8080", "06"),
            ("127.0.0.11:40002", "127.0.0.1:9090", "01"),
            ("127.0.0.1:40003", "127.0.0.1:8080", "01"),
            ("127.0.0.1:40003", "127.0.0.1:9090", "06"),
            ("127.0.0.1:40004", "0.0.0.0:0", "0A"),
            ("127.0.0.1:40004", "127.0.0.1:50000", "01"),
            ("127.0.0.11:30000", "127.0.0.1:8080", "01"),
        ]);
        let from = |ip: &str| Tuple {
            source: Some(ip.parse().unwrap()),
            target,
        };
        let h = |t| held(&rows, t, 40000, 49999);
        assert_eq!(
            h(from("127.0.0.11")),
            Held {
                time_wait: 1,
                established: 1,
                other: 1
            }
        );
        assert_eq!(
            h(from("127.0.0.1")),
            Held {
                time_wait: 0,
                established: 1,
                other: 1
            },
            "40003, and the listener's 40004 (its accepted connection is another tuple)"
        );
        assert_eq!(
            h(from("127.0.0.12")),
            Held {
                other: 1,
                ..Held::default()
            },
            "only the listener"
        );
        let other_target = Tuple {
            source: Some("127.0.0.11".parse().unwrap()),
            target: "127.0.0.1:9090".parse().unwrap(),
        };
        assert_eq!(
            h(other_target),
            Held {
                time_wait: 0,
                established: 1,
                other: 1
            }
        );
        let any = Tuple { source: None, target };
        assert_eq!(
            h(any),
            Held {
                time_wait: 1,
                established: 2,
                other: 1
            }
        );
    }

    #[test]
    fn the_route_source_of_loopback_is_loopback() {
        let src = route_source("127.0.0.1:9".parse().unwrap()).expect("a route to loopback");
        assert!(src.is_loopback(), "{src}");
    }

    #[test]
    fn reads_the_port_range() {
        let (lo, hi) = local_port_range().expect("linux has the port range");
        assert!(lo > 0 && hi >= lo);
    }
}
