//! Regression tests for engine faults found by reading the code: each test
//! shows one of them from the outside (the real binary, driven only through
//! its flags, config files and signals) and names what broke.
//!
//! Run them one at a time: `cargo test --release --test regressions --
//! --test-threads=1`. Every wait below is bounded, every target is on
//! 127.0.0.1 and every run stops by itself.

mod util;

use std::fs;
use std::io::{ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::{self, sleep};
use std::time::{Duration, Instant};

use serde_json::Value;
use util::{BuiltinTarget, TempDir, field as u, free_port, socket_states, temp_path, wait_until};

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// A `soakd` child whose stderr goes to a file the test can read while it
/// runs (to see notes such as "serving the final metrics"). Killed on drop.
struct Soakd {
    child: Option<Child>,
    stderr: PathBuf,
    args: Vec<String>,
}

impl Soakd {
    fn spawn(args: &[&str]) -> Soakd {
        let stderr = temp_path("regress-stderr", "log");
        let child = Command::new(util::soakd_bin())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(&stderr).expect("create stderr capture"))
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start soakd {args:?}: {e}"));
        Soakd {
            child: Some(child),
            stderr,
            args: args.iter().map(|a| a.to_string()).collect(),
        }
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// What it wrote to stderr so far.
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&fs::read(&self.stderr).unwrap_or_default()).into_owned()
    }

    /// Whether it is still running (not exited, not a zombie).
    fn running(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// Waits up to `secs` for it to exit; kills it and panics (with its
    /// stderr) when it does not.
    fn wait(&mut self, secs: u64) -> (ExitStatus, String) {
        let mut child = self.child.take().expect("running");
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            match child.try_wait() {
                Ok(Some(status)) => return (status, self.stderr()),
                Ok(None) if Instant::now() < deadline => sleep(Duration::from_millis(10)),
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!(
                        "soakd {:?} still running after {secs} s, killed\n--- stderr ---\n{}",
                        self.args,
                        self.stderr()
                    );
                }
            }
        }
    }

    /// Waits up to `secs` until its stderr contains `text`.
    fn wait_for_stderr(&mut self, text: &str, secs: u64) {
        wait_until(
            || {
                let stderr = self.stderr();
                assert!(
                    stderr.contains(text) || self.running(),
                    "soakd exited without printing {text:?}\n--- stderr ---\n{stderr}"
                );
                stderr.contains(text)
            },
            Duration::from_secs(secs),
            &format!("{text:?} on soakd's stderr"),
        );
    }

    /// Waits up to `secs` until it holds `n` established TCP connections.
    fn wait_established(&mut self, n: usize, secs: u64) {
        let pid = self.pid();
        wait_until(
            || {
                assert!(self.running(), "soakd exited\n--- stderr ---\n{}", self.stderr());
                established(pid) == n
            },
            Duration::from_secs(secs),
            &format!("soakd to hold {n} established connections"),
        );
    }
}

impl Drop for Soakd {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = fs::remove_file(&self.stderr);
    }
}

/// Established TCP connections that `pid` holds.
fn established(pid: u32) -> usize {
    socket_states(pid).get("ESTABLISHED").copied().unwrap_or(0)
}

/// Sends the signals to `pid` from one shell with its built-in `kill`, so
/// they arrive microseconds apart (no process is started between them).
fn signals_back_to_back(pid: u32, sigs: &[&str]) {
    let script: String = sigs
        .iter()
        .map(|s| format!("kill -s {s} \"$1\" && "))
        .collect::<String>()
        + "true";
    let ok = Command::new("sh")
        .args(["-c", &script, "sh", &pid.to_string()])
        .stdin(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "could not send {sigs:?} to pid {pid}");
}

/// A field of /proc/PID/task/TID/status (a number, the unit dropped).
fn task_status(pid: u32, tid: u32, key: &str) -> Option<u64> {
    let text = fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// Voluntary context switches of the main thread of `pid`: soakd's control
/// thread (workers are `soakd-worker-N`, the exporter has its own thread).
fn control_thread_sleeps(pid: u32) -> Option<u64> {
    task_status(pid, pid, "voluntary_ctxt_switches")
}

/// Where in the kernel the control thread of `pid` sleeps
/// (/proc/PID/task/PID/wchan: `do_epoll_wait` in its poll, a `futex_…`
/// function when it joins the workers); empty when it is gone.
fn control_thread_wchan(pid: u32) -> String {
    fs::read_to_string(format!("/proc/{pid}/task/{pid}/wchan")).unwrap_or_default()
}

/// The sum of every series of metric `name` whose labels start with
/// `target="TARGET"` (one workload's), in a scrape of `addr`; `None` when
/// the endpoint does not answer.
fn scrape_workload(addr: &str, name: &str, target: &str) -> Option<f64> {
    let m = util::scrape(addr)?;
    let prefix = format!("{name}{{target=\"{target}\"");
    Some(m.iter().filter(|(k, _)| k.starts_with(&prefix)).map(|(_, v)| v).sum())
}

/// One workload's open connections (`soakd_connections`'s `open` series),
/// in a scrape of `addr`.
fn open_connections(addr: &str, target: &str) -> Option<f64> {
    let m = util::scrape(addr)?;
    let prefix = format!("soakd_connections{{target=\"{target}\"");
    m.iter()
        .find(|(k, _)| k.starts_with(&prefix) && k.contains("state=\"open\""))
        .map(|(_, v)| *v)
}

/// The sum of every series of metric `name` in a scrape of `addr`, or
/// `None` when the endpoint does not answer.
fn scrape_sum(addr: &str, name: &str) -> Option<f64> {
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").ok()?;
    let mut text = String::new();
    std::io::Read::read_to_string(&mut s, &mut text).ok()?;
    let (_, body) = text.split_once("\r\n\r\n")?;
    let mut found = false;
    let mut sum = 0.0;
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, v)) = line.rsplit_once(' ') else {
            continue;
        };
        if series.split('{').next() == Some(name) {
            sum += v.parse::<f64>().ok()?;
            found = true;
        }
    }
    found.then_some(sum)
}

/// Waits up to `secs` until the metrics endpoint at `addr` answers.
fn wait_metrics_up(addr: &str, soakd: &mut Soakd, secs: u64) {
    wait_until(
        || {
            assert!(soakd.running(), "soakd exited\n--- stderr ---\n{}", soakd.stderr());
            scrape_sum(addr, "soakd_requests_sent_total").is_some()
        },
        Duration::from_secs(secs),
        &format!("the metrics endpoint {addr} to answer"),
    );
}

/// Reads and removes a JSON report.
fn read_report(path: &Path, stderr: &str) -> Value {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("no report at {} ({e})\n{stderr}", path.display()));
    let _ = fs::remove_file(path);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("bad report ({e}): {text}"))
}

/// The figures of the workload called `name` in a report.
fn workload<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["workloads"]
        .as_array()
        .and_then(|ws| ws.iter().find(|w| w["name"] == name))
        .unwrap_or_else(|| panic!("no workload {name:?} in {report:#}"))
}

/// Writes `bytes` into the FIFO at `path` once a reader has it open: opens
/// it for writing without blocking (ENXIO while nobody reads), retrying for
/// up to `within`. Returns whether a reader came and took the bytes.
fn feed_fifo(path: &Path, bytes: &[u8], within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        match fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
        {
            // Small enough for the pipe buffer: never blocks, and closing
            // the file gives the reader its EOF.
            Ok(mut f) => return f.write_all(bytes).is_ok(),
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) && Instant::now() < deadline => {
                sleep(Duration::from_millis(10))
            }
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => return false,
            Err(e) => panic!("open fifo {}: {e}", path.display()),
        }
    }
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap_or_else(|e| panic!("cannot run mkfifo: {e}"));
    assert!(status.success(), "mkfifo {} failed", path.display());
}

// ---------------------------------------------------------------------------
// 2. Every worker held its own copy of the request repeated `pipeline` times
// ---------------------------------------------------------------------------

/// `--pipeline 1024` with a 64 KiB body on 16 threads: each worker used to
/// render its own 64 MiB copy of the pipelined request bytes (1 GiB in
/// all). Memory must not grow with threads × pipeline × body.
#[test]
fn pipelined_large_body_is_not_copied_per_worker() {
    // One at a time: they measure memory, wake-ups and timing.
    let _heavy = util::heavy_lock();
    let target = BuiltinTarget::start(&[]);
    let dir = TempDir::new("regress-body");
    let body = dir.path().join("body.bin");
    fs::write(&body, vec![b'x'; 64 * 1024]).unwrap();
    let report = temp_path("regress-body", "json");
    let url = target.url("/");
    let mut soakd = Soakd::spawn(&[
        "run",
        &url,
        "-t",
        "16",
        "-c",
        "16",
        "--pipeline",
        "1024",
        "-m",
        "POST",
        "--body-file",
        body.to_str().unwrap(),
        // Paced, so the test measures the process's memory, not loopback
        // throughput: 160 requests (10 MiB) a second.
        "-i",
        "100ms",
        "-d",
        "2s",
        "--metrics-listen",
        "off",
        "--report",
        report.to_str().unwrap(),
    ]);
    let pid = soakd.pid();
    let mut peak_kb = 0;
    let deadline = Instant::now() + Duration::from_secs(20);
    while soakd.running() && Instant::now() < deadline {
        let hwm = task_status(pid, pid, "VmHWM").unwrap_or(0);
        let rss = task_status(pid, pid, "VmRSS").unwrap_or(0);
        peak_kb = peak_kb.max(hwm).max(rss);
        // The sampling period of the memory under test, not a wait for a
        // state: the loop ends when soakd exits.
        sleep(Duration::from_millis(50));
    }
    let (status, stderr) = soakd.wait(20);
    let rep = read_report(&report, &stderr);
    assert!(status.success(), "exit {status}\n{stderr}");
    assert!(
        u(&rep, "/requests/completed") > 0,
        "the target answered no POST: {rep:#}\n{stderr}"
    );
    assert_eq!(util::total_errors(&rep), 0, "{rep:#}");
    let peak_mib = peak_kb / 1024;
    eprintln!("peak RSS {peak_mib} MiB");
    assert!(
        peak_mib < 256,
        "peak RSS {peak_mib} MiB (VmHWM) with -t 16 --pipeline 1024 and a 64 KiB body: \
         the pipelined request bytes are copied per worker (limit 256 MiB)"
    );
}

/// A request body over 16 MiB is refused up front (exit 2, naming the flag
/// and the limit) instead of being rendered, repeated and copied into every
/// worker.
#[test]
fn body_file_over_16_mib_is_refused_before_connecting() {
    // One at a time: they measure memory, wake-ups and timing.
    let _heavy = util::heavy_lock();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let dir = TempDir::new("regress-bigbody");
    let body = dir.path().join("body.bin");
    fs::write(&body, vec![b'x'; 16 * 1024 * 1024 + 1]).unwrap();
    let mut soakd = Soakd::spawn(&[
        "run",
        &url,
        "-c",
        "1",
        "-m",
        "POST",
        "--body-file",
        body.to_str().unwrap(),
        "-d",
        "1s",
        "--request-timeout",
        "1s",
        "--metrics-listen",
        "off",
    ]);
    let (status, stderr) = soakd.wait(30);
    let connected = match listener.accept() {
        Ok(_) => true,
        Err(e) if e.kind() == ErrorKind::WouldBlock => false,
        Err(e) => panic!("accept: {e}"),
    };
    assert_eq!(
        status.code(),
        Some(2),
        "a 16 MiB + 1 byte --body-file was not refused ({status}, connected to the target: {connected})\n{stderr}"
    );
    assert!(
        stderr.contains("--body-file") && stderr.to_ascii_lowercase().contains("16 mib"),
        "the refusal must name --body-file and the 16 MiB limit:\n{stderr}"
    );
    assert!(!connected, "soakd connected before refusing the body\n{stderr}");
}

// ---------------------------------------------------------------------------
// 3. A SIGHUP reload read the config's files on the control thread
// ---------------------------------------------------------------------------

/// A reload whose `body_file` is slow to read (a FIFO nobody writes to for
/// 3 s) must not stop the control thread: the metrics snapshot it refreshes
/// every 250 ms keeps moving while requests flow. It used to freeze until
/// the read finished.
#[test]
fn slow_reload_does_not_freeze_the_metrics() {
    // One at a time: they measure memory, wake-ups and timing.
    let _heavy = util::heavy_lock();
    let target = BuiltinTarget::start(&[]);
    let dir = TempDir::new("regress-fifo");
    let fifo = dir.path().join("body.fifo");
    mkfifo(&fifo);
    let metrics = format!("127.0.0.1:{}", free_port());
    let config = dir.path().join("soak.toml");
    fs::write(
        &config,
        format!(
            "metrics_listen = \"{metrics}\"\nthreads = 2\n\n[[workload]]\nname = \"fifo\"\nurl = \"{}\"\n\
             connections = 50\ninterval = \"50ms\"\nmethod = \"POST\"\nbody_file = \"{}\"\n",
            target.url("/"),
            fifo.display()
        ),
    )
    .unwrap();

    // The first load reads the FIFO once: feed it from a thread.
    let feeder = {
        let fifo = fifo.clone();
        thread::spawn(move || feed_fifo(&fifo, b"first body", Duration::from_secs(10)))
    };
    let mut soakd = Soakd::spawn(&["run", "--config", config.to_str().unwrap(), "-d", "30s"]);
    assert!(
        feeder.join().unwrap(),
        "soakd never read the body FIFO at startup\n{}",
        soakd.stderr()
    );
    wait_metrics_up(&metrics, &mut soakd, 10);
    // Requests flow: the counter moves between scrapes.
    let before = scrape_sum(&metrics, "soakd_requests_sent_total").unwrap_or(0.0);
    wait_until(
        || scrape_sum(&metrics, "soakd_requests_sent_total").is_some_and(|now| now > before),
        Duration::from_secs(10),
        &format!("soakd_requests_sent_total to grow past {before}"),
    );

    // The run has started, so its SIGHUP handler is installed.
    util::wait_for_handler(soakd.pid(), "HUP");
    util::signal(soakd.pid(), "HUP");
    // Nothing writes to the FIFO for 3 s: a reload reading it waits.
    let t0 = Instant::now();
    let mut samples: Vec<(Duration, Option<f64>)> = Vec::new();
    while t0.elapsed() < Duration::from_secs(3) {
        // The sampling period of what is under test (the metrics must
        // move every 250 ms during these 3 s), not a wait for a state.
        sleep(Duration::from_millis(250));
        samples.push((t0.elapsed(), scrape_sum(&metrics, "soakd_requests_sent_total")));
    }
    // Let a reload that is waiting on the FIFO finish, then stop.
    let released = feed_fifo(&fifo, b"first body", Duration::from_secs(2));
    util::signal(soakd.pid(), "INT");
    let (status, stderr) = soakd.wait(20);

    let values: Vec<f64> = samples.iter().filter_map(|(_, v)| *v).collect();
    eprintln!("soakd_requests_sent_total every 250 ms after SIGHUP: {values:?}");
    assert!(
        values.len() == samples.len(),
        "the metrics endpoint stopped answering after SIGHUP: {samples:?}\n{stderr}"
    );
    // Samples from 0.5 s on: the control thread had time to take SIGHUP.
    let window: Vec<f64> = samples
        .iter()
        .filter(|(t, _)| *t >= Duration::from_millis(500))
        .filter_map(|(_, v)| *v)
        .collect();
    let (first, last) = (window[0], *window.last().unwrap());
    assert!(
        last > first,
        "soakd_requests_sent_total froze at {first} for {:.1} s while a SIGHUP reload waited on its \
         body_file (a FIFO): the control thread does the reload's I/O (samples every 250 ms: {values:?}; \
         reload then read the FIFO: {released})\n{stderr}",
        (window.len() - 1) as f64 * 0.25
    );
    assert!(status.success(), "exit {status}\n{stderr}");
}

// ---------------------------------------------------------------------------
// 4. A stop that skipped the drain reported no connection open at the end
// ---------------------------------------------------------------------------

/// Threads of a child held in ptrace-stop (`PTRACE_SEIZE` +
/// `PTRACE_INTERRUPT`): they run no code until dropped (`PTRACE_DETACH`),
/// and the kernel delivers the process's signals to its other threads.
/// All calls happen on the thread that made the value.
struct HeldThreads {
    tids: Vec<libc::pid_t>,
}

impl HeldThreads {
    /// Holds every thread of `pid` whose name starts with `prefix`, or says
    /// why it cannot (no threads of that name, ptrace not permitted).
    fn hold(pid: u32, prefix: &str) -> Result<HeldThreads, String> {
        let mut held = HeldThreads { tids: Vec::new() };
        let tasks = fs::read_dir(format!("/proc/{pid}/task")).map_err(|e| format!("/proc/{pid}/task: {e}"))?;
        let mut tids: Vec<libc::pid_t> = tasks
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .filter(|tid| {
                fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).is_ok_and(|c| c.starts_with(prefix))
            })
            .collect();
        tids.sort_unstable();
        if tids.is_empty() {
            return Err(format!("no thread of {pid} is named {prefix}*"));
        }
        let null = std::ptr::null_mut::<libc::c_void>();
        for tid in tids {
            // SAFETY: plain syscalls on a thread of our own child; no memory
            // is passed (addr and data are null) except `status` below.
            if unsafe { libc::ptrace(libc::PTRACE_SEIZE, tid, null, null) } != 0 {
                return Err(format!("PTRACE_SEIZE {tid}: {}", std::io::Error::last_os_error()));
            }
            held.tids.push(tid);
            // SAFETY: as above.
            if unsafe { libc::ptrace(libc::PTRACE_INTERRUPT, tid, null, null) } != 0 {
                return Err(format!("PTRACE_INTERRUPT {tid}: {}", std::io::Error::last_os_error()));
            }
            let mut status = 0;
            // SAFETY: `status` is a live c_int for the call's duration.
            let got = unsafe { libc::waitpid(tid, &mut status, libc::__WALL) };
            if got != tid || !libc::WIFSTOPPED(status) {
                return Err(format!("thread {tid} did not stop (waitpid {got}, status {status:#x})"));
            }
        }
        Ok(held)
    }
}

impl Drop for HeldThreads {
    fn drop(&mut self) {
        let null = std::ptr::null_mut::<libc::c_void>();
        for &tid in &self.tids {
            // SAFETY: detaching a thread this thread attached; no memory passed.
            unsafe { libc::ptrace(libc::PTRACE_DETACH, tid, null, null) };
        }
    }
}

/// SIGINT and at once SIGTERM: the run goes from running to exit without
/// the workers ever draining. `open_at_end` must still be the connections
/// open when the stop began (200), not 0.
///
/// Whether a worker gets to act on the drain between the two signals is a
/// race, so the first run takes it out: the worker threads are held (ptrace)
/// while both signals arrive and the control thread acts on them, and let go
/// afterwards. The other two runs are plain back-to-back signals.
#[test]
fn int_then_term_still_reports_open_at_end() {
    // One at a time: they measure memory, wake-ups and timing.
    let _heavy = util::heavy_lock();
    let target = BuiltinTarget::start(&[]);
    let url = target.url("/");
    for (run, hold_workers) in [(1, true), (2, false), (3, false)] {
        let report = temp_path("regress-exit", "json");
        let metrics = format!("127.0.0.1:{}", free_port());
        let mut soakd = Soakd::spawn(&[
            "run",
            &url,
            "-c",
            "200",
            "-i",
            "1s",
            "-t",
            "2",
            "--metrics-listen",
            &metrics,
            "--report",
            report.to_str().unwrap(),
        ]);
        soakd.wait_established(200, 10);
        // An aggregation tick has seen them all open (peak_open): the
        // metrics come from the same tick. The open state's series only:
        // the states together always add up to the 200 slots, so waiting
        // for their sum raced the workers' first flush after the ramp.
        wait_until(
            || open_connections(&metrics, &target.addr) == Some(200.0),
            Duration::from_secs(10),
            "soakd's metrics to show 200 connections open",
        );
        let how = if hold_workers {
            match HeldThreads::hold(soakd.pid(), "soakd-worker") {
                Ok(held) => {
                    signals_back_to_back(soakd.pid(), &["INT", "TERM"]);
                    soakd.wait_for_stderr("stopping", 5);
                    // The control thread takes SIGTERM on its next turn,
                    // leaves its loop and joins the held workers.
                    let pid = soakd.pid();
                    wait_until(
                        || control_thread_wchan(pid).contains("futex"),
                        Duration::from_secs(5),
                        "the control thread to act on SIGTERM and wait to join the held workers",
                    );
                    drop(held);
                    "with the workers held while the signals arrived"
                }
                Err(why) => {
                    eprintln!("cannot hold the worker threads ({why}): plain signals instead");
                    signals_back_to_back(soakd.pid(), &["INT", "TERM"]);
                    "back to back"
                }
            }
        } else {
            signals_back_to_back(soakd.pid(), &["INT", "TERM"]);
            "back to back"
        };
        let (status, stderr) = soakd.wait(20);
        let rep = read_report(&report, &stderr);
        let peak = u(&rep, "/connections/peak_open");
        let at_end = u(&rep, "/connections/open_at_end");
        assert_eq!(peak, 200, "run {run}: {rep:#}");
        assert_eq!(
            at_end, 200,
            "run {run} of 3: SIGINT then SIGTERM ({how}) with 200 connections open (peak_open {peak}) \
             reported connections.open_at_end = {at_end} ({status})\n{stderr}"
        );
    }
}

// ---------------------------------------------------------------------------
// 5. Deepening one workload's pipeline failed every workload's requests
// ---------------------------------------------------------------------------

/// A reload raises workload `b`'s pipeline from 1 to 4 while both `a` and
/// `b` have requests in flight (the target answers after 1 s). Workload `a`
/// did not change: its requests must be answered, not counted as `eof`.
#[test]
fn deeper_pipeline_on_reload_loses_no_requests_of_other_workloads() {
    // One at a time: they measure memory, wake-ups and timing.
    let _heavy = util::heavy_lock();
    let target = BuiltinTarget::start(&["--delay", "1s"]);
    let dir = TempDir::new("regress-pipeline");
    let config = dir.path().join("soak.toml");
    let metrics = format!("127.0.0.1:{}", free_port());
    let write_config = |b_pipeline: u16| {
        let text = format!(
            "metrics_listen = \"{metrics}\"\nthreads = 2\n\n\
             [[workload]]\nname = \"a\"\nurl = \"{url}\"\nconnections = 10\npipeline = 1\n\n\
             [[workload]]\nname = \"b\"\nurl = \"{url}\"\nconnections = 10\npipeline = {b_pipeline}\n",
            url = target.url("/")
        );
        fs::write(&config, text).unwrap();
    };
    write_config(1);
    let report = temp_path("regress-pipeline", "json");
    let mut soakd = Soakd::spawn(&[
        "run",
        "--config",
        config.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
        "-d",
        "30s",
    ]);
    soakd.wait_established(20, 10);
    // Closed loop: every connection has its request in flight (1 s delay).
    wait_until(
        || scrape_sum(&metrics, "soakd_requests_in_flight") == Some(20.0),
        Duration::from_secs(10),
        "a request in flight on each of the 20 connections",
    );
    let a_before = scrape_workload(&metrics, "soakd_responses_total", "a").unwrap_or(0.0);
    write_config(4);
    util::signal(soakd.pid(), "HUP");
    soakd.wait_for_stderr("config reloaded", 5);
    // Workload a's 10 requests in flight at the reload are answered (or
    // would be counted as eof): wait for those answers before stopping.
    wait_until(
        || scrape_workload(&metrics, "soakd_responses_total", "a").is_some_and(|n| n >= a_before + 10.0),
        Duration::from_secs(10),
        "the answers to workload a's 10 requests in flight at the reload",
    );
    util::signal(soakd.pid(), "INT");
    let (status, stderr) = soakd.wait(20);
    let rep = read_report(&report, &stderr);
    assert!(status.success(), "exit {status}\n{stderr}");
    assert!(stderr.contains("config reloaded: b changed"), "{stderr}");
    let a = workload(&rep, "a");
    assert!(u(a, "/requests/completed") > 0, "{a:#}");
    assert_eq!(
        u(a, "/errors/eof"),
        0,
        "workload a was not changed by the reload, yet {} of its in-flight requests were counted as eof \
         when b's pipeline went from 1 to 4:\n{a:#}",
        u(a, "/errors/eof")
    );
    assert_eq!(
        u(&rep, "/errors/eof"),
        0,
        "requests in flight at the reload were counted as eof:\n{rep:#}"
    );
}

// ---------------------------------------------------------------------------
// 6. Linger and drain polled with short sleeps
// ---------------------------------------------------------------------------

/// Lingering after the run (`--metrics-linger`) waits for a signal or the
/// end of the linger, not in 50 ms sleeps: over 2 s the control thread
/// sleeps fewer than 10 times (it was about 40).
#[test]
fn metrics_linger_waits_without_polling() {
    // One at a time: they measure memory, wake-ups and timing.
    let _heavy = util::heavy_lock();
    let target = BuiltinTarget::start(&[]);
    let url = target.url("/");
    let metrics = format!("127.0.0.1:{}", free_port());
    let mut soakd = Soakd::spawn(&[
        "run",
        &url,
        "-c",
        "5",
        "-i",
        "100ms",
        "-t",
        "1",
        "-d",
        "1s",
        "--metrics-linger",
        "5s",
        "--metrics-listen",
        &metrics,
    ]);
    soakd.wait_for_stderr("serving the final metrics", 10);
    let pid = soakd.pid();
    wait_until(
        || control_thread_wchan(pid).contains("epoll"),
        Duration::from_secs(5),
        "the control thread to wait in its poll (the linger)",
    );
    let before = control_thread_sleeps(pid).expect("control thread status");
    // The window under test: 2 s of linger, counting wake-ups.
    sleep(Duration::from_secs(2));
    let after = control_thread_sleeps(pid).expect("soakd ended its 5 s linger early");
    assert!(soakd.running(), "soakd ended its 5 s linger early\n{}", soakd.stderr());
    util::signal(pid, "INT");
    let (status, stderr) = soakd.wait(10);
    assert!(status.success(), "exit {status}\n{stderr}");
    let switches = after - before;
    eprintln!("control thread: {switches} voluntary switches in 2 s of linger");
    assert!(
        switches < 10,
        "the control thread woke {switches} times in 2 s of --metrics-linger (fewer than 10 expected): \
         it polls instead of waiting for a signal\n{stderr}"
    );
}

/// Draining after SIGTERM waits on signals and the aggregation tick, not in
/// 20 ms polls: over 2 s of drain the control thread sleeps fewer than 20
/// times (about 100 before; a 250 ms tick makes 8).
#[test]
fn drain_waits_without_polling() {
    // One at a time: they measure memory, wake-ups and timing.
    let _heavy = util::heavy_lock();
    let target = BuiltinTarget::start(&["--delay", "4s"]);
    let url = target.url("/");
    let metrics = format!("127.0.0.1:{}", free_port());
    let mut soakd = Soakd::spawn(&["run", &url, "-c", "20", "-t", "1", "--metrics-listen", &metrics]);
    let pid = soakd.pid();
    soakd.wait_established(20, 10);
    // Closed loop: each connection's first request is in flight for 4 s.
    wait_until(
        || scrape_sum(&metrics, "soakd_requests_in_flight") == Some(20.0),
        Duration::from_secs(10),
        "a request in flight on each of the 20 connections",
    );
    util::signal(pid, "TERM");
    soakd.wait_for_stderr("stopping", 5);
    let before = control_thread_sleeps(pid).expect("control thread status");
    // The window under test: 2 s of drain, counting wake-ups.
    sleep(Duration::from_secs(2));
    let after = control_thread_sleeps(pid);
    let still_draining = soakd.running();
    let (status, stderr) = soakd.wait(15);
    let after = after.expect("soakd ended before the drain was over");
    assert!(still_draining, "soakd ended before the drain was over\n{stderr}");
    assert!(status.success(), "exit {status}\n{stderr}");
    let switches = after - before;
    eprintln!("control thread: {switches} voluntary switches in 2 s of drain");
    assert!(
        switches < 20,
        "the control thread woke {switches} times in 2 s of drain (fewer than 20 expected): \
         it polls every 20 ms instead of waiting for signals and its tick\n{stderr}"
    );
}
