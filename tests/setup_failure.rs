//! A run whose setup fails part-way must not leave the workers it already
//! started running.
//!
//! This file holds a single test because it lowers RLIMIT_NOFILE of the
//! test process itself, which would disturb any other test of the same
//! binary. It runs soakd in-process (`soakd::run`): a child process would
//! take its workers down with it when it exits on the error, hiding the
//! fault.

mod util;

use std::fs::File;
use std::path::Path;
use std::thread::sleep;
use std::time::{Duration, Instant};

use util::{BuiltinTarget, socket_states};

const THREADS: u64 = 4;
const CONNECTIONS: u64 = 40;

/// Established TCP connections that `pid` holds.
fn established(pid: u32) -> usize {
    socket_states(pid).get("ESTABLISHED").copied().unwrap_or(0)
}

/// A worker after the first of 4 cannot get its epoll or eventfd (EMFILE)
/// after worker 0 was started. `run` returns the error; worker 0 must not
/// go on connecting and holding connections to the target afterwards.
#[test]
fn setup_error_stops_the_workers_already_started() {
    // Started before the limit is lowered: the target inherits it.
    let target = BuiltinTarget::start(&[]);
    let text = format!(
        "metrics_listen = \"off\"\nthreads = {THREADS}\nduration = \"2s\"\n\n[[workload]]\nurl = \"{}\"\n\
         connections = {CONNECTIONS}\ninterval = \"100ms\"\n",
        target.url("/")
    );
    let plan = soakd::config::parse(Path::new("setup-failure.toml"), &text, Default::default()).expect("valid config");

    // Preflight asks for connections + 64 + 4 × threads descriptors: give
    // exactly that, then fill every free descriptor below the limit and
    // hand back 8: the control poll and the signal pipe take 3, worker 0
    // its epoll and eventfd (plus a short-lived file read), which leaves
    // workers 1 and 2 at most — not four workers.
    let (soft0, hard0) = rlimit::Resource::NOFILE.get().expect("read RLIMIT_NOFILE");
    let limit = CONNECTIONS + 64 + 4 * THREADS;
    rlimit::Resource::NOFILE.set(limit, limit).expect("lower RLIMIT_NOFILE");
    let mut dummies = Vec::new();
    for _ in 0..limit {
        match File::open("/dev/null") {
            Ok(f) => dummies.push(f),
            Err(e) if e.raw_os_error() == Some(libc::EMFILE) => break,
            Err(e) => panic!("open /dev/null: {e}"),
        }
    }
    const HEADROOM: usize = 8;
    assert!(dummies.len() > HEADROOM, "only {} descriptors were free", dummies.len());
    dummies.truncate(dummies.len() - HEADROOM);

    let started = Instant::now();
    let result = soakd::run(plan);
    let returned_after = started.elapsed();

    // Room again: a worker left running can now connect. (Raising the hard
    // limit back needs CAP_SYS_RESOURCE; without it the lowered one stays,
    // which is why this test has a binary of its own.)
    drop(dummies);
    let _ = rlimit::Resource::NOFILE.set(soft0, hard0);

    let err = match result {
        Ok(report) => panic!(
            "the run did not fail at setup with {HEADROOM} free descriptors for {THREADS} workers:\n{}",
            report.to_json()
        ),
        Err(e) => e.to_string(),
    };
    eprintln!("run returned after {returned_after:?}: {err}");

    // An absence cannot be waited for, so this watches a window: a
    // surviving worker would (re)connect within it, as its slots back off
    // at most 100-400 ms after the descriptors ran out. Sampled every
    // 100 ms for 2.5 s; every sample must be empty.
    let mut seen = Vec::new();
    let window = Instant::now();
    while window.elapsed() < Duration::from_millis(2500) {
        seen.push((established(target.pid()), established(std::process::id())));
        sleep(Duration::from_millis(100));
    }
    assert!(
        seen.iter().all(|&(t, us)| t == 0 && us == 0),
        "within 2.5 s after soakd::run returned the setup error ({err}), workers it had started held \
         connections: (target side, our side) every 100 ms: {seen:?}"
    );
}
