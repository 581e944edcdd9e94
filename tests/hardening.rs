//! Hardening: soakd against a target that misbehaves on purpose
//! (`soakd target --fault MODE[@N]`) and against exhausted resources (file
//! descriptors, ephemeral ports, a full listen backlog).
//!
//! Every run is bounded (`-d`/`-n` plus a hard timeout) and goes to
//! 127.0.0.1 only. For each fault the test checks that
//! - the failure is counted under its precise error kind, once per faulted
//!   request, and nothing lands in a catch-all kind;
//! - failed slots reconnect with backoff (error counts stay under what the
//!   100 ms-doubling backoff allows; a busy loop would make thousands);
//! - soakd survives: exit 0, a report, no panic, the request accounting
//!   holds, and memory stays bounded where a fault could inflate it;
//! - with `@N` (one request in N faulted) the other requests still succeed.
//!
//! For exhausted resources: the precise kind (`fd_limit`,
//! `addr_unavailable`, `connect_timeout`), bounded retries, recovery, and
//! CPU well under a core while the resource stays exhausted. The port tests
//! run in network namespaces of their own, with a small port range.

mod util;

use std::collections::BTreeMap;
use std::process::ExitStatus;
use std::thread::{self, sleep};
use std::time::{Duration, Instant};

use serde_json::Value;
use util::{
    BuiltinTarget, NetNs, cpu_seconds, field as u, heavy_lock, soakd_timeout, socket_states, spawn_soakd_in, temp_path,
    vm_rss_kb, wait_for_comm, wait_output,
};

/// Connections of a fault run.
const CONNS: u64 = 20;
/// Length of a fault run, seconds.
const SECS: u64 = 3;
/// Paced interval of a fault run: 20 connections × 20/s = 400 requests/s.
const INTERVAL_MS: u64 = 50;
/// The `@N` of the mixed fault runs: one request in ten is faulted.
const EVERY: u64 = 10;
/// Ceiling for soakd's resident memory while a fault runs.
const MAX_RSS_KB: u64 = 64 * 1024;

// ---------------------------------------------------------------------------
// Running and judging soakd
// ---------------------------------------------------------------------------

/// One finished soakd run.
struct Run {
    status: ExitStatus,
    stderr: String,
    report: Value,
    /// Largest VmRSS seen while it ran (sampled every 50 ms).
    max_rss_kb: u64,
    /// From spawn to exit.
    elapsed: Duration,
}

impl Run {
    fn u(&self, path: &str) -> u64 {
        u(&self.report, path)
    }

    /// The error kinds counted at least once.
    fn errors(&self) -> BTreeMap<String, u64> {
        self.report["errors"]
            .as_object()
            .expect("errors object")
            .iter()
            .filter_map(|(k, v)| v.as_u64().filter(|&n| n > 0).map(|n| (k.clone(), n)))
            .collect()
    }

    /// The figures that explain a failed assertion.
    fn summary(&self) -> String {
        format!(
            "errors {:?}\nrequests {}\nresponses {}\nconnections {}\nelapsed {:?}, max rss {} KiB",
            self.errors(),
            self.report["requests"],
            self.report["responses"],
            self.report["connections"],
            self.elapsed,
            self.max_rss_kb
        )
    }
}

/// Runs `PREFIX... soakd ARGS... --metrics-listen off --report FILE`,
/// samples its VmRSS every 50 ms and calls `watch(pid, elapsed)` at each
/// sample; kills it and panics after `timeout_s`.
fn run_watched(prefix: &[&str], args: &[&str], timeout_s: u64, mut watch: impl FnMut(u32, Duration)) -> Run {
    let path = temp_path("hardening", "json");
    let path_s = path.display().to_string();
    let mut all = args.to_vec();
    all.extend(["--metrics-listen", "off", "--report", &path_s]);
    let began = Instant::now();
    let mut child = spawn_soakd_in(prefix, &all);
    let pid = child.id();
    let deadline = began + Duration::from_secs(timeout_s);
    let mut max_rss_kb = 0;
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            break;
        }
        if let Some(kb) = vm_rss_kb(pid) {
            max_rss_kb = max_rss_kb.max(kb);
        }
        watch(pid, began.elapsed());
        // The sampling period of VmRSS and of `watch`, not a wait for a
        // state: the loop ends when soakd exits.
        sleep(Duration::from_millis(50));
    }
    let elapsed = began.elapsed();
    // Already exited, or gets one more second before it counts as hung.
    let out = wait_output(child, 1);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let text = std::fs::read_to_string(&path);
    let _ = std::fs::remove_file(&path);
    let report = match text
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| format!("{e}: {t:?}")))
    {
        Ok(report) => report,
        Err(e) => panic!(
            "soakd {prefix:?} {args:?} wrote no valid report ({e}); exit {}\n--- stderr ---\n{stderr}",
            out.status
        ),
    };
    Run {
        status: out.status,
        stderr,
        report,
        max_rss_kb,
        elapsed,
    }
}

/// [`run_watched`] without a watcher.
fn run(args: &[&str], timeout_s: u64) -> Run {
    run_watched(&[], args, timeout_s, |_, _| {})
}

/// soakd kept running: exit 0, no panic, and `sent = completed + failed +
/// in_flight_at_end`.
fn assert_survived(r: &Run) {
    assert!(r.status.success(), "exit {}\n{}\n{}", r.status, r.stderr, r.summary());
    assert!(!r.stderr.contains("panicked"), "soakd panicked:\n{}", r.stderr);
    assert_eq!(
        r.u("/requests/sent"),
        r.u("/requests/completed") + r.u("/requests/failed") + r.u("/requests/in_flight_at_end"),
        "accounting\n{}",
        r.summary()
    );
}

/// Nothing but `kinds` was counted (in particular no `protocol` catch-all
/// where a precise kind exists).
fn assert_errors_only(r: &Run, kinds: &[&str]) {
    let other: Vec<_> = r
        .errors()
        .into_iter()
        .filter(|(k, _)| !kinds.contains(&k.as_str()))
        .collect();
    assert!(
        other.is_empty(),
        "unexpected error kinds {other:?} (expected only {kinds:?})\n{}",
        r.summary()
    );
}

/// The built-in target is still fine: it reported no failed thread.
fn assert_target_ok(target: &BuiltinTarget) {
    let log = target.stderr();
    assert!(!log.contains("panicked") && !log.contains("stopped"), "target: {log}");
}

/// The most connection attempts one slot can make in `secs` when every
/// attempt fails: backoff starts at 100 ms and doubles up to 10 s, and at
/// least half of each step is waited (the other half is jitter). Doubled
/// for slack; a reconnect loop without backoff would make thousands.
fn max_attempts(secs: f64) -> u64 {
    let (mut t, mut backoff, mut n) = (0.0, 0.1, 1);
    loop {
        t += backoff / 2.0;
        if t > secs {
            break;
        }
        n += 1;
        backoff = f64::min(backoff * 2.0, 10.0);
    }
    2 * n
}

/// Requests the paced fault runs schedule: CONNS × SECS / interval.
fn schedule() -> u64 {
    CONNS * SECS * 1000 / INTERVAL_MS
}

/// The paced fault run (20 connections, 20 req/s each, 3 s) against a target
/// with `MODE@10`. Checks the common promises and that the fault is counted
/// as `kind`, exactly once per faulted request, while the other nine in ten
/// succeed. `extra` goes to `soakd run`.
fn mixed_fault(mode: &str, kind: &str, extra: &[&str]) -> Run {
    let fault = format!("{mode}@{EVERY}");
    let target = BuiltinTarget::start(&["--fault", &fault]);
    let url = target.url("/");
    let (c, i, d) = (CONNS.to_string(), format!("{INTERVAL_MS}ms"), format!("{SECS}s"));
    let mut args = vec!["run", url.as_str(), "-c", &c, "-i", &i, "-d", &d];
    args.extend_from_slice(extra);
    let r = run(&args, 40);
    assert_survived(&r);
    assert_target_ok(&target);
    assert_errors_only(&r, &[kind]);

    // The target faults every 10th request it gets (one thread, one count);
    // each costs exactly one error of the fault's kind. Up to one per
    // connection may still be unseen when the run stops.
    let sent = r.u("/requests/sent");
    let faulted = sent / EVERY;
    let counted = r.u(&format!("/errors/{kind}"));
    assert!(
        counted >= 1 && counted + CONNS >= faulted && counted <= faulted + 1,
        "{kind}: {counted} counted for about {faulted} faulted requests\n{}",
        r.summary()
    );
    // No collateral damage: only faulted requests fail.
    let failed = r.u("/requests/failed");
    assert!(
        failed <= faulted + 1,
        "{failed} failed for {faulted} faults\n{}",
        r.summary()
    );
    // The rest succeed. Each fault costs its slot a backoff (and requests
    // due meanwhile go out late or, past the request timeout, are missed),
    // so not the whole schedule completes, but far more than a third does.
    let completed = r.u("/requests/completed");
    assert!(
        completed * 10 >= schedule() * 3,
        "completed {completed} of {} scheduled\n{}",
        schedule(),
        r.summary()
    );
    assert_eq!(r.u("/responses/2xx"), completed, "{}", r.summary());
    // Backoff: far fewer errors than a reconnect loop would make.
    let errors: u64 = r.errors().values().sum();
    assert!(errors <= CONNS * max_attempts((SECS + 1) as f64), "{}", r.summary());
    r
}

// ---------------------------------------------------------------------------
// The flag
// ---------------------------------------------------------------------------

/// `--fault` takes only known modes and a positive `@N`; anything else is
/// a clear usage error (exit 2) before anything is bound.
#[test]
fn fault_flag_rejects_bad_values() {
    for (args, says) in [
        (&["--fault", "bogus"][..], "close-mid-head"),
        (&["--fault", "reset@0"][..], "at least 1"),
        (&["--fault", "reset@x"][..], "at least 1"),
        (&["--fault", "stop-accepting@3"][..], "no @N"),
        (&["--fault", "trickle", "--delay", "1s"][..], "--delay"),
        (&["--fault"][..], "--fault"),
    ] {
        let mut all = vec!["target", "--listen", "127.0.0.1:0"];
        all.extend_from_slice(args);
        // A target that wrongly starts would run until killed: 10 s is a hang.
        let out = soakd_timeout(&all, 10);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains("listening"), "{args:?}");
    }
}

// ---------------------------------------------------------------------------
// Faults of a response
// ---------------------------------------------------------------------------

/// Half a response head, then a close: the request was owed, so `eof`.
#[test]
fn close_mid_head_is_eof() {
    mixed_fault("close-mid-head", "eof", &[]);
}

/// A head promising 100 bytes, 10 of them, a close: `eof`.
#[test]
fn close_mid_body_is_eof() {
    mixed_fault("close-mid-body", "eof", &[]);
}

/// Content-Length 100, 50 bytes, a close: `eof`.
#[test]
fn short_body_is_eof() {
    mixed_fault("short-body", "eof", &[]);
}

/// An RST instead of a response: `reset`.
#[test]
fn reset_is_reset() {
    mixed_fault("reset", "reset", &[]);
}

/// A request that is never answered times out after --request-timeout.
#[test]
fn never_answer_is_timeout() {
    let r = mixed_fault("never-answer", "timeout", &["--request-timeout", "1s"]);
    // The run still ends: the drain waits at most for the request timeout.
    assert!(r.elapsed < Duration::from_secs(SECS + 4), "{}", r.summary());
}

/// An invalid status line (`HTTP/1.1 2x0 OK`): `protocol`.
#[test]
fn bad_status_is_protocol() {
    mixed_fault("bad-status", "protocol", &[]);
}

/// A chunk size that is not hexadecimal: `protocol`.
#[test]
fn bad_chunk_is_protocol() {
    mixed_fault("bad-chunk", "protocol", &[]);
}

/// Garbage after a complete response: bytes nobody asked for, `protocol`.
/// In paced mode no request is owed when they arrive, so the error counts
/// for the connection and `failed` stays below the error count.
#[test]
fn extra_bytes_are_protocol() {
    let r = mixed_fault("extra-bytes", "protocol", &[]);
    assert!(r.u("/requests/failed") <= r.u("/errors/protocol"), "{}", r.summary());
}

/// A 1 MiB response head is refused at 64 KiB (`protocol`) without soakd
/// buffering it: mixed with good responses, and on every request of 50
/// connections in closed loop, soakd stays far below 64 MB.
#[test]
fn huge_head_is_protocol_and_memory_stays_bounded() {
    thread::scope(|s| {
        let mixed = s.spawn(|| mixed_fault("huge-head", "protocol", &[]));

        let target = BuiltinTarget::start(&["--fault", "huge-head"]);
        let url = target.url("/");
        let r = run(&["run", &url, "-c", "50", "-d", "3s"], 40);
        assert_survived(&r);
        assert_target_ok(&target);
        assert_errors_only(&r, &["protocol"]);
        assert_eq!(r.u("/requests/completed"), 0, "{}", r.summary());
        assert_eq!(r.u("/errors/protocol"), r.u("/requests/failed"), "{}", r.summary());
        assert!(r.u("/errors/protocol") >= 50, "{}", r.summary());
        assert!(r.u("/errors/protocol") <= 50 * max_attempts(4.0), "{}", r.summary());
        assert!(r.max_rss_kb > 0 && r.max_rss_kb < MAX_RSS_KB, "{}", r.summary());

        let mixed = mixed.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        assert!(
            mixed.max_rss_kb > 0 && mixed.max_rss_kb < MAX_RSS_KB,
            "{}",
            mixed.summary()
        );
    });
}

/// A response trickled one byte per 100 ms (about 6.7 s for the whole
/// pong): with a 1 s request timeout it is a `timeout`, and the other
/// requests go on; with a long one it completes, slowly, and is measured
/// so. Memory stays bounded either way.
#[test]
fn trickle_times_out_or_completes() {
    thread::scope(|s| {
        let short = s.spawn(|| mixed_fault("trickle", "timeout", &["--request-timeout", "1s"]));

        let target = BuiltinTarget::start(&["--fault", "trickle"]);
        let url = target.url("/");
        // Closed loop: each of the 5 connections waits for its trickle;
        // -n 5 ends the run when all five are in (-d is the safety net).
        let r = run(
            &[
                "run",
                &url,
                "-c",
                "5",
                "-n",
                "5",
                "-d",
                "20s",
                "--request-timeout",
                "30s",
            ],
            40,
        );
        assert_survived(&r);
        assert_target_ok(&target);
        assert_errors_only(&r, &[]);
        assert_eq!(r.u("/requests/completed"), 5, "{}", r.summary());
        assert_eq!(r.u("/responses/2xx"), 5, "{}", r.summary());
        let min = util::field_f64(&r.report, "/latency_seconds/min");
        assert!(min >= 6.0, "a trickled response took {min} s\n{}", r.summary());
        assert!(r.elapsed < Duration::from_secs(15), "{}", r.summary());
        assert!(r.max_rss_kb > 0 && r.max_rss_kb < MAX_RSS_KB, "{}", r.summary());

        let short = short.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        assert!(
            short.max_rss_kb > 0 && short.max_rss_kb < MAX_RSS_KB,
            "{}",
            short.summary()
        );
    });
}

// ---------------------------------------------------------------------------
// Unusual but valid responses
// ---------------------------------------------------------------------------

/// `100 Continue` before every response: skipped, not an error, not
/// counted as a response; every request completes as a 2xx.
#[test]
fn continue_is_skipped_and_every_request_completes() {
    let target = BuiltinTarget::start(&["--fault", "continue"]);
    let url = target.url("/");
    let r = run(&["run", &url, "-c", "20", "-i", "50ms", "-d", "3s"], 40);
    assert_survived(&r);
    assert_target_ok(&target);
    assert_errors_only(&r, &[]);
    let completed = r.u("/requests/completed");
    assert!(completed * 10 >= schedule() * 9, "{}", r.summary());
    assert_eq!(r.u("/responses/2xx"), completed, "{}", r.summary());
    assert_eq!(r.u("/responses/1xx"), 0, "{}", r.summary());
    assert_eq!(r.u("/connections/closed_by_reason/server_close"), 0, "{}", r.summary());
    assert_eq!(r.u("/connections/opened"), 20, "{}", r.summary());
}

/// HTTP/1.0 without a length on every request: each body ends with the
/// close, so every response completes and every connection ends as a
/// `server_close` (reconnected at once), never an error.
#[test]
fn http10_without_length_is_a_server_close() {
    let target = BuiltinTarget::start(&["--fault", "http10-no-length"]);
    let url = target.url("/");
    let r = run(&["run", &url, "-c", "20", "-i", "50ms", "-d", "3s"], 40);
    assert_survived(&r);
    assert_target_ok(&target);
    assert_errors_only(&r, &[]);
    let completed = r.u("/requests/completed");
    assert!(completed * 10 >= schedule() * 9, "{}", r.summary());
    assert_eq!(r.u("/responses/2xx"), completed, "{}", r.summary());
    assert_eq!(
        r.u("/connections/closed_by_reason/server_close"),
        completed,
        "{}",
        r.summary()
    );
    assert_eq!(r.u("/connections/closed_by_reason/error"), 0, "{}", r.summary());
}

// ---------------------------------------------------------------------------
// Faults of a connection
// ---------------------------------------------------------------------------

/// Closed right after accept, with the request already written (closed
/// loop writes it as soon as the connect completes): the request was owed,
/// so `eof`, or `reset` when the request reached the server before its
/// close, since closing a socket with unread data sends an RST. Never a
/// response, and every slot backs off.
#[test]
fn close_after_accept_with_a_request_owed_is_eof_or_reset() {
    let target = BuiltinTarget::start(&["--fault", "close-after-accept"]);
    let url = target.url("/");
    let r = run(&["run", &url, "-c", "20", "-d", "3s"], 40);
    assert_survived(&r);
    assert_target_ok(&target);
    assert_errors_only(&r, &["eof", "reset"]);
    let lost = r.u("/errors/eof") + r.u("/errors/reset");
    assert_eq!(r.u("/requests/completed"), 0, "{}", r.summary());
    assert_eq!(
        lost,
        r.u("/requests/failed"),
        "one error per lost request\n{}",
        r.summary()
    );
    assert!(lost >= CONNS, "{}", r.summary());
    assert!(lost <= CONNS * max_attempts((SECS + 1) as f64), "{}", r.summary());
}

/// Closed right after accept, before any request is due (paced, 10 s
/// interval): an idle connection closed by the server is a `server_close`
/// and no error; a request found owed (written just as the close came) is
/// `eof` or `reset`. Such slots reconnect without backoff, so the test
/// bounds the reconnects: a server that closes every connection must not
/// draw a reconnect storm.
///
/// Note: this bound holds today partly because of the bug in
/// `idle_connections_closed_by_the_server_are_noticed` (most slots sit on a
/// dead connection instead of reconnecting). When that is fixed, this test
/// shows whether idle server closes need a backoff too.
#[test]
fn close_after_accept_of_idle_connections_is_a_server_close_without_a_storm() {
    let target = BuiltinTarget::start(&["--fault", "close-after-accept"]);
    let url = target.url("/");
    let r = run(&["run", &url, "-c", "20", "-i", "10s", "-d", "3s"], 40);
    assert_survived(&r);
    assert_target_ok(&target);
    assert_errors_only(&r, &["eof", "reset"]);
    assert_eq!(r.u("/requests/completed"), 0, "{}", r.summary());
    assert!(
        r.u("/connections/closed_by_reason/server_close") >= 1,
        "{}",
        r.summary()
    );
    // The brief's generous bound: connections × 2 × seconds × 10.
    let opened = r.u("/connections/opened");
    assert!(
        opened <= CONNS * 2 * SECS * 10,
        "{opened} connections opened\n{}",
        r.summary()
    );
}

/// An idle connection that the server closes must be noticed: soakd closes
/// its end (no socket left in CLOSE_WAIT) and does not count it as open.
///
/// Regression: the server's FIN can arrive in the same edge-triggered event
/// as the connect's completion; soakd used to finish the connect only and
/// never see the FIN (every socket sat in CLOSE_WAIT, counted as open).
#[test]
fn idle_connections_closed_by_the_server_are_noticed() {
    let target = BuiltinTarget::start(&["--fault", "close-after-accept"]);
    let url = target.url("/");
    let mut close_wait = Vec::new();
    let r = run_watched(
        &[],
        &["run", &url, "-c", "20", "-i", "60s", "-d", "2s"],
        40,
        |pid, t| {
            if t >= Duration::from_millis(1000) && close_wait.len() < 5 {
                close_wait.push(socket_states(pid).get("CLOSE_WAIT").copied().unwrap_or(0));
            }
        },
    );
    assert_survived(&r);
    assert_target_ok(&target);
    close_wait.sort_unstable();
    let median = close_wait.get(close_wait.len() / 2).copied().unwrap_or(0);
    // A socket passes through CLOSE_WAIT for the moment between the FIN and
    // soakd's close; it must not stay there.
    assert!(
        median <= 2,
        "soakd holds {close_wait:?} sockets in CLOSE_WAIT (samples)\n{}",
        r.summary()
    );
    assert!(r.u("/connections/open_at_end") <= 2, "{}", r.summary());
}

/// A listener that never accepts, with a backlog of 1: once the backlog is
/// full the kernel drops new SYNs, and connects fail with `connect_timeout`
/// after --connect-timeout, with backoff. The run ends on time (no hang).
/// The one or two connections the backlog took look established to soakd;
/// their requests are never answered (`timeout`).
#[test]
fn full_backlog_is_connect_timeout_not_a_hang() {
    let target = BuiltinTarget::start(&["--fault", "stop-accepting"]);
    let url = target.url("/");
    let r = run(
        &[
            "run",
            &url,
            "-c",
            "20",
            "-i",
            "50ms",
            "-d",
            "3s",
            "--connect-timeout",
            "500ms",
            "--request-timeout",
            "1s",
        ],
        40,
    );
    assert_survived(&r);
    assert_target_ok(&target);
    assert_errors_only(&r, &["connect_timeout", "timeout"]);
    assert_eq!(r.u("/requests/completed"), 0, "{}", r.summary());
    let timeouts = r.u("/errors/connect_timeout");
    assert!(timeouts >= CONNS - 4, "{}", r.summary());
    // Each attempt waits 500 ms on top of its backoff.
    assert!(timeouts <= CONNS * max_attempts((SECS + 1) as f64), "{}", r.summary());
    assert!(r.u("/connections/opened") <= 8, "{}", r.summary());
    assert!(r.elapsed < Duration::from_secs(SECS + 4), "{}", r.summary());
}

// ---------------------------------------------------------------------------
// Exhausted resources
// ---------------------------------------------------------------------------

/// File descriptors running out at run time are `fd_limit`, with backoff
/// and without a busy loop.
///
/// Provoking EMFILE takes a trick: preflight refuses any plan whose
/// connections plus a margin (64 + 4 per thread) exceed the open-file limit,
/// and soakd raises its soft limit to the hard one, so neither
/// `prlimit --nofile=120` with `-c 100 --close` (refused: exit 2, checked
/// below) nor churn (a closed socket frees its descriptor at once) can run
/// it out. What does: descriptors soakd inherits count against the limit
/// but not in preflight. So a bash wrapper opens 120 descriptors (10..129)
/// and execs soakd under a limit of 160 with 48 connections (48 + 68 ≤ 160
/// passes preflight); about 30 fit. Paced churn (`-i 1s --close`) keeps
/// freeing and taking descriptors, so slots keep failing and retrying.
#[test]
fn fd_exhaustion_is_fd_limit_without_a_busy_loop() {
    let _heavy = heavy_lock();
    for tool in [&["bash", "-c", "true"][..], &["prlimit", "--version"]] {
        if std::process::Command::new(tool[0]).args(&tool[1..]).output().is_err() {
            eprintln!("skipped: {} is not available", tool[0]);
            return;
        }
    }
    let target = BuiltinTarget::start(&[]);
    let url = target.url("/");

    // The recipe that does not work: preflight refuses it.
    let refused = wait_output(
        spawn_soakd_in(
            &["prlimit", "--nofile=120:120"],
            &[
                "run",
                &url,
                "-c",
                "100",
                "--close",
                "-d",
                "2s",
                "--metrics-listen",
                "off",
            ],
        ),
        20,
    );
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("open-file limit"));

    let prefix = [
        "prlimit",
        "--nofile=160:160",
        "bash",
        "-c",
        r#"for fd in $(seq 10 129); do eval "exec $fd</dev/null"; done; exec "$@""#,
        "bash",
    ];
    let mut cpu_at_1s = None;
    let mut cpu_at_4s = None;
    let r = run_watched(
        &prefix,
        &["run", &url, "-c", "48", "-t", "1", "-i", "1s", "--close", "-d", "5s"],
        40,
        |pid, t| {
            // Only once bash has exec'd soakd is this pid soakd.
            if !wait_for_comm(pid, "soakd", 0) {
                return;
            }
            if t >= Duration::from_secs(1) && cpu_at_1s.is_none() {
                cpu_at_1s = cpu_seconds(pid);
            }
            if t >= Duration::from_secs(4) && cpu_at_4s.is_none() {
                cpu_at_4s = cpu_seconds(pid);
            }
        },
    );
    assert_survived(&r);
    assert_target_ok(&target);
    assert_errors_only(&r, &["fd_limit"]);
    let fd_limit = r.u("/errors/fd_limit");
    assert!(fd_limit >= 1, "no descriptor ran out\n{}", r.summary());
    assert!(fd_limit <= 48 * max_attempts(6.0), "{}", r.summary());
    assert!(r.u("/connections/peak_open") < 48, "{}", r.summary());
    assert!(r.u("/requests/completed") > 0, "{}", r.summary());
    let (Some(a), Some(b)) = (cpu_at_1s, cpu_at_4s) else {
        panic!("could not sample soakd's CPU time\n{}", r.summary());
    };
    assert!(
        b - a < 0.5,
        "soakd used {:.2} s of CPU in 3 s of exhausted descriptors: a busy loop?\n{}",
        b - a,
        r.summary()
    );
}

/// Creates a network namespace whose ephemeral port range is 100 ports
/// (40000-40099); `None` when not root and root is not required (see
/// [`util::need_root`]).
fn small_port_namespace() -> Option<NetNs> {
    if !util::need_root("a network namespace with 100 ephemeral ports") {
        return None;
    }
    let ns = NetNs::create().unwrap_or_else(|why| panic!("cannot create a network namespace as root: {why}"));
    ns.sysctl("net.ipv4.ip_local_port_range", "40000 40099");
    Some(ns)
}

/// Ephemeral ports: with 100 local ports, preflight refuses 300 connections
/// to one target from one source address (exit 2, naming the range and the
/// fix), and three source addresses (any of 127.0.0.0/8 is local) hold
/// proportionally more: 250 connections, all open.
#[test]
fn ephemeral_ports_scale_with_source_addresses() {
    let _heavy = heavy_lock();
    let Some(ns) = small_port_namespace() else { return };
    let exec = ns.exec();
    let target = BuiltinTarget::start_in(&exec, &[]);
    let url = target.url("/");

    let refused = wait_output(
        spawn_soakd_in(
            &exec,
            &["run", &url, "-c", "300", "-d", "2s", "--metrics-listen", "off"],
        ),
        20,
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("ip_local_port_range") && stderr.contains("--source-addr"),
        "{stderr}"
    );

    let r = run_watched(
        &exec,
        &[
            "run",
            &url,
            "-c",
            "250",
            "-i",
            "1s",
            "-d",
            "2s",
            "--source-addr",
            "127.0.0.1",
            "--source-addr",
            "127.0.0.2",
            "--source-addr",
            "127.0.0.3",
        ],
        40,
        |_, _| {},
    );
    assert_survived(&r);
    assert_target_ok(&target);
    assert_errors_only(&r, &[]);
    assert!(r.u("/connections/peak_open") >= 250, "{}", r.summary());
    assert_eq!(r.u("/connections/open_at_end"), 250, "{}", r.summary());
    drop(target);
    drop(ns);
}

/// Ephemeral ports running out at run time: 100 local ports pass preflight
/// for 100 connections, but the target's own listening port is one of
/// them, so one slot finds no port: `addr_unavailable`, with backoff,
/// while the other 99 run.
#[test]
fn ephemeral_ports_exhausted_at_run_time_are_addr_unavailable() {
    let _heavy = heavy_lock();
    let Some(ns) = small_port_namespace() else { return };
    let exec = ns.exec();
    let target = BuiltinTarget::start_in(&exec, &[]);
    let port: u16 = target
        .addr
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port");
    // Port 0 is bound from the namespace's own ephemeral range, which is
    // what makes one slot short of a port.
    assert!(
        (40000..=40099).contains(&port),
        "the target's port {port} is outside the namespace's range 40000-40099"
    );
    let url = target.url("/");
    let r = run_watched(
        &exec,
        &["run", &url, "-c", "100", "-i", "1s", "-d", "3s"],
        40,
        |_, _| {},
    );
    assert_survived(&r);
    assert_target_ok(&target);
    assert_errors_only(&r, &["addr_unavailable"]);
    let unavailable = r.u("/errors/addr_unavailable");
    assert!(unavailable >= 1, "{}", r.summary());
    assert!(unavailable <= max_attempts(4.0), "{}", r.summary());
    assert_eq!(r.u("/connections/peak_open"), 99, "{}", r.summary());
    assert!(r.u("/requests/completed") >= 99 * 2, "{}", r.summary());
    drop(target);
    drop(ns);
}

/// Binds (without listening) every free port of 127.0.0.1 in `lo..=hi`
/// inside the namespace, prints how many, and holds them until its stdin
/// closes.
const PORT_HOLDER: &str = r#"
import socket, sys
lo, hi = int(sys.argv[1]), int(sys.argv[2])
held = []
for port in range(lo, hi + 1):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        held.append(s)
    except OSError:
        s.close()
print(len(held), flush=True)
sys.stdin.read()
"#;

/// Every local port held by another process, in a namespace with a
/// 19,000-port range: each connect fails (`addr_unavailable`) and the slots
/// back off. The kernel's own port search walks the whole range for a
/// connect that finds nothing, so falling back to it on every attempt kept
/// a core busy (the bug this test pins: 300 slots used 1.8 s of CPU in
/// these 3 s); now a failed search keeps it out for 100 ms and an attempt
/// costs at most 8 failed windows of 64 ports (`WINDOW_TRIES` in
/// engine/worker/socket.rs). Checked: soakd's CPU over 3 s of exhaustion
/// stays under half a second, and the attempts stay within the backoff's
/// bound.
#[test]
fn ports_held_by_another_process_cost_little_cpu() {
    let _heavy = heavy_lock();
    if !util::need_root("a network namespace whose ports another process holds") {
        return;
    }
    let ns = NetNs::create().unwrap_or_else(|why| panic!("cannot create a network namespace as root: {why}"));
    ns.sysctl("net.ipv4.ip_local_port_range", "30000 48999");
    let exec = ns.exec();
    let target = BuiltinTarget::start_in(&exec, &[]);
    let mut holder = std::process::Command::new(exec[0])
        .args(&exec[1..])
        .args(["python3", "-c", PORT_HOLDER, "30000", "48999"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 must be installed");
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(holder.stdout.take().unwrap()), &mut line).unwrap();
    let held: u32 = line.trim().parse().unwrap_or(0);
    assert!(held >= 18_990, "the holder bound only {line:?} ports");

    let url = target.url("/");
    let (mut cpu_at_1s, mut cpu_at_4s) = (None, None);
    let r = run_watched(
        &exec,
        &["run", &url, "-c", "300", "-t", "1", "-i", "1s", "-d", "5s"],
        40,
        |pid, t| {
            if t >= Duration::from_secs(1) && cpu_at_1s.is_none() {
                cpu_at_1s = cpu_seconds(pid);
            }
            if t >= Duration::from_secs(4) && cpu_at_4s.is_none() {
                cpu_at_4s = cpu_seconds(pid);
            }
        },
    );
    drop(holder.stdin.take());
    let _ = holder.wait();
    assert_survived(&r);
    assert_errors_only(&r, &["addr_unavailable"]);
    assert_eq!(r.u("/connections/peak_open"), 0, "{}", r.summary());
    let unavailable = r.u("/errors/addr_unavailable");
    assert!(unavailable >= 300, "{}", r.summary());
    assert!(unavailable <= 300 * max_attempts(5.0), "{}", r.summary());
    let (Some(a), Some(b)) = (cpu_at_1s, cpu_at_4s) else {
        panic!("could not sample soakd's CPU time\n{}", r.summary());
    };
    assert!(
        b - a < 0.5,
        "soakd used {:.2} s of CPU in 3 s of exhausted ports: a busy loop?\n{}",
        b - a,
        r.summary()
    );
    eprintln!("CPU over 3 s of exhausted ports: {:.3} s", b - a);
    drop(target);
    drop(ns);
}
