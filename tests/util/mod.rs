//! Shared helpers for soakd's integration tests.
//!
//! Every file in `tests/` is compiled as its own crate and pulls this module
//! in with `mod util;`. Everything here uses only std plus `serde_json` and
//! `procfs` (regular dependencies of the crate), so no dev-dependency is
//! needed.
//!
//! What is here:
//! - [`wait_until`], [`wait_for`]: a bounded poll for a condition that
//!   names what it waited for; tests wait for conditions, never for time.
//! - [`need_root`]: skip a root-only test, or fail it under
//!   `SOAKD_REQUIRE_ROOT=1` (CI).
//! - [`wait_for_handler`]: a process has installed its handler for a
//!   signal, so sending it cannot kill the process or be lost.
//! - [`stderr_so_far`], [`scrape`], [`metric_sum`]: what a running soakd
//!   has printed, and its metrics, for the conditions tests wait on.
//! - [`Nginx`]: a private nginx (generated config, temp dir, free port) that
//!   can be frozen with SIGSTOP and thawed with SIGCONT.
//! - [`soakd`], [`soakd_report`], [`spawn_soakd`], [`wait_with_timeout`],
//!   [`signal`]: run the soakd binary with hard timeouts.
//! - [`BuiltinTarget`]: `soakd target` as a child process.
//! - [`raw_server`]: a server that answers every read with fixed bytes, for
//!   malformed-response tests.
//! - [`heavy_lock`]: serialises tests that open thousands of sockets.
//! - [`spawn_soakd_in`], [`BuiltinTarget::start_in`]: the same behind a
//!   command prefix (`prlimit …`, `ip netns exec NS`).
//! - [`vm_rss_kb`], [`cpu_seconds`], [`socket_states`], [`wait_for_comm`]:
//!   what a running process uses, from /proc.
//! - [`NetNs`]: a throw-away network namespace (root only).
//! - [`Prometheus`]: a private Prometheus (the package `scripts/test.sh`
//!   installs) scraping soakd with the mixin's rules and alerts, and its
//!   query API.

// Each test binary uses only some of these helpers. Without this, the ones a
// given binary does not use would be dead-code warnings, which
// `clippy -D warnings` turns into errors.
#![allow(dead_code)]

use std::fs;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, mpsc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Timeout used by [`soakd`] when the test does not pick one.
pub const DEFAULT_TIMEOUT_S: u64 = 60;

/// How often the wait loops below look again.
const POLL: Duration = Duration::from_millis(20);

// ---------------------------------------------------------------------------
// Waiting for conditions, root, signal handlers
// ---------------------------------------------------------------------------

/// Polls `condition` (every 20 ms) until it holds. On timeout it panics
/// saying what it waited for and for how long, so a failure reads as
/// "waited 10 s for 50 connections open", not as a wrong number after a
/// blind sleep.
pub fn wait_until(mut condition: impl FnMut() -> bool, timeout: Duration, what: &str) {
    wait_for(|| condition().then_some(()), timeout, what)
}

/// Like [`wait_until`] for a condition that has a value: polls `probe`
/// until it returns `Some`, and returns that value (e.g. the scrape in
/// which a counter reached its figure, for the assertions that follow).
pub fn wait_for<T>(mut probe: impl FnMut() -> Option<T>, timeout: Duration, what: &str) -> T {
    let start = Instant::now();
    loop {
        if let Some(value) = probe() {
            return value;
        }
        if start.elapsed() > timeout {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        thread::sleep(POLL);
    }
}

/// Whether a test that needs root (network namespaces, sysctls) can run.
/// As root: true. Otherwise, when `SOAKD_REQUIRE_ROOT` is unset (a
/// developer's machine) it prints `skipped: WHAT needs root` and returns
/// false, so the test returns early; when it is set (`.ci/run` sets it) it
/// panics, so CI cannot pass a root test it never ran.
pub fn need_root(what: &str) -> bool {
    if is_root() {
        return true;
    }
    cannot_run(&format!("{what} needs root"));
    false
}

/// A test cannot run here (`why`, e.g. no network namespaces): with
/// `SOAKD_REQUIRE_ROOT` set (CI) that fails the test; otherwise it prints
/// `skipped: WHY` and the caller returns.
pub fn cannot_run(why: &str) {
    if std::env::var_os("SOAKD_REQUIRE_ROOT").is_some_and(|v| !v.is_empty() && v != "0") {
        panic!("{why}, and SOAKD_REQUIRE_ROOT is set: this test must run (run the tests as root, as CI does)");
    }
    eprintln!("skipped: {why} (set SOAKD_REQUIRE_ROOT=1 to make this a failure)");
}

/// The python of the venv `scripts/test.sh` makes with the protocol peers
/// (PyPI's `h2` and `websockets`), for tests that run a server no one here
/// wrote: `SOAKD_TEST_PYTHON`, else the venv's default place. None (after
/// [`cannot_run`]: a failure in CI) when neither imports both packages.
pub fn test_python() -> Option<PathBuf> {
    peers_python(&["h2", "websockets"])
}

/// The same venv's python for the server-watch tests (`prometheus_client`,
/// the servers that export their own metrics), or None after
/// [`cannot_run`].
pub fn metrics_python() -> Option<PathBuf> {
    peers_python(&["prometheus_client"])
}

/// The same venv's python for the gRPC tests (`grpcio`, its reflection
/// service and `grpcio-tools`), or None after [`cannot_run`].
pub fn grpc_python() -> Option<PathBuf> {
    peers_python(&["grpc", "grpc_reflection", "grpc_tools"])
}

/// The peers venv's python if it imports every module of `modules`.
fn peers_python(modules: &[&str]) -> Option<PathBuf> {
    let default = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("/tmp/.cache"))
        .join("soakd/peers-venv/bin/python");
    let python = std::env::var_os("SOAKD_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or(default);
    let imports = Command::new(&python)
        .args(["-c", &format!("import {}", modules.join(", "))])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if imports {
        return Some(python);
    }
    cannot_run(&format!(
        "{} cannot import {} (scripts/test.sh makes that venv)",
        python.display(),
        modules.join(", ")
    ));
    None
}

/// A Python peer from `tests/peers/` run by the test venv's python
/// ([`test_python`]): it listens on 127.0.0.1, port 0, and prints
/// `port N` first. Killed on drop.
pub struct PyPeer {
    child: Child,
    /// The port it printed.
    pub port: u16,
}

impl PyPeer {
    /// Starts `tests/peers/SCRIPT ARGS...`; `None` when the venv is not
    /// there (see [`test_python`]).
    pub fn start(script: &str, args: &[&dyn AsRef<std::ffi::OsStr>]) -> Option<PyPeer> {
        PyPeer::start_env(script, args, &[])
    }

    /// [`PyPeer::start`] with these environment variables set for it.
    pub fn start_env(script: &str, args: &[&dyn AsRef<std::ffi::OsStr>], env: &[(&str, &str)]) -> Option<PyPeer> {
        use std::io::BufRead;
        let python = test_python()?;
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/peers")
            .join(script);
        let mut child = Command::new(python)
            .arg(path)
            .args(args.iter().map(|a| a.as_ref()))
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start the peer {script}: {e}"));
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().expect("a piped stdout"))
            .read_line(&mut line)
            .expect("the peer's first line");
        let port = line
            .trim()
            .strip_prefix("port ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("{script} printed {line:?}, not its port"));
        Some(PyPeer { child, port })
    }
}

impl Drop for PyPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a child started by [`spawn_soakd`] has written to stderr so far
/// (it is still running; [`wait_output`] returns the whole of it at the
/// end). Tests wait on it for a line soakd prints when a state is reached.
pub fn stderr_so_far(child: &Child) -> String {
    let path = captures()
        .iter()
        .find(|c| c.pid == child.id())
        .map(|c| c.stderr.clone())
        .unwrap_or_else(|| panic!("pid {} was not started by spawn_soakd", child.id()));
    read_lossy(&path)
}

/// One scrape of soakd's `http://ADDR/metrics`, as series → value (read
/// with soakd's own parser; keys as `soakd::statuscmd::exposition::Sample::series`
/// writes them), or `None` while the endpoint does not answer 200.
pub fn scrape(addr: &str) -> Option<std::collections::HashMap<String, f64>> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let raw = String::from_utf8_lossy(&raw);
    let (head, body) = raw.split_once("\r\n\r\n")?;
    if !head.starts_with("HTTP/1.1 200") {
        return None;
    }
    let samples = soakd::statuscmd::exposition::parse(body)
        .unwrap_or_else(|e| panic!("{addr}/metrics is not Prometheus text ({e}):\n{body}"));
    Some(samples.into_iter().map(|s| (s.series(), s.value)).collect())
}

/// The sum of every series of metric `name` in a [`scrape`] (0 when there
/// is none).
pub fn metric_sum(m: &std::collections::HashMap<String, f64>, name: &str) -> f64 {
    m.iter()
        .filter(|(k, _)| k.split('{').next() == Some(name))
        .map(|(_, v)| v)
        .sum()
}

/// The number of a signal by name ("HUP", "SIGINT", ...), for the ones
/// the tests send to soakd.
fn signal_number(sig: &str) -> u32 {
    match sig.trim_start_matches("SIG") {
        "HUP" => 1,
        "INT" => 2,
        "USR1" => 10,
        "USR2" => 12,
        "TERM" => 15,
        other => panic!("signal_number: add SIG{other}"),
    }
}

/// Whether `pid` catches signal `sig`: its bit in `SigCgt` of
/// /proc/PID/status (a handler is installed). False when it is gone.
pub fn catches_signal(pid: u32, sig: &str) -> bool {
    let bit = 1u64 << (signal_number(sig) - 1);
    process(pid)
        .and_then(|p| p.status().ok())
        .is_some_and(|s| s.sigcgt & bit != 0)
}

/// Waits (up to 10 s) until `pid` has installed its handler for `sig`.
/// A signal sent before that takes its default action (SIGUSR1 and SIGHUP
/// kill the process) or, for a process that blocks it meanwhile, may be
/// handled before the state the test means to act on exists. soakd
/// installs its handlers when the run starts, just before its workers.
pub fn wait_for_handler(pid: u32, sig: &str) {
    wait_until(
        || catches_signal(pid, sig),
        Duration::from_secs(10),
        &format!("pid {pid} to install its SIG{} handler", sig.trim_start_matches("SIG")),
    );
}

// ---------------------------------------------------------------------------
// Temp files and directories
// ---------------------------------------------------------------------------

/// A name that is unique within this process (counter) and across processes
/// (pid), plus some clock bits so that a leftover from a dead run with a
/// recycled pid does not collide either.
fn unique_name(tag: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("soakd-test-{tag}-{}-{n}-{nanos}", std::process::id())
}

/// Creates a fresh, empty directory under `std::env::temp_dir()`.
/// The caller removes it (see [`TempDir`] for a guard that does).
pub fn make_temp_dir(tag: &str) -> PathBuf {
    loop {
        let path = std::env::temp_dir().join(unique_name(tag));
        match fs::create_dir(&path) {
            Ok(()) => return path,
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => panic!("cannot create temp dir {}: {e}", path.display()),
        }
    }
}

/// A path under `std::env::temp_dir()` where no file exists yet.
pub fn temp_path(tag: &str, ext: &str) -> PathBuf {
    loop {
        let path = std::env::temp_dir().join(format!("{}.{ext}", unique_name(tag)));
        if !path.exists() {
            return path;
        }
    }
}

/// A temp directory that is removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        TempDir(make_temp_dir(tag))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Reads a file as text, or returns a note saying why it could not.
fn read_lossy(path: &Path) -> String {
    match fs::read(path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) => format!("<cannot read {}: {e}>", path.display()),
    }
}

// ---------------------------------------------------------------------------
// Signals and small network helpers
// ---------------------------------------------------------------------------

/// Sends signal `sig` ("TERM", "INT", "STOP", "SIGKILL", ...) to `pid` and
/// reports whether it was delivered.
///
/// This runs the shell's built-in `kill` rather than `/bin/kill`, because
/// `/bin/kill` comes from procps, which minimal Debian images lack, while
/// `sh` is always there. It also keeps the tests free of `unsafe`.
pub fn try_signal(pid: u32, sig: &str) -> bool {
    let sig = sig.trim_start_matches("SIG");
    Command::new("sh")
        .args(["-c", r#"kill -s "$1" "$2""#, "sh", sig, &pid.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Like [`try_signal`] but panics when the signal could not be sent
/// (for example because the process has already gone).
pub fn signal(pid: u32, sig: &str) {
    assert!(try_signal(pid, sig), "could not send SIG{sig} to pid {pid}");
}

/// Whether a process with this pid exists (zombies included).
pub fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// A port on 127.0.0.1 that was free a moment ago: binds port 0, reads the
/// port back and closes the socket. Someone else may take it before the
/// caller binds it, so callers retry on "address in use".
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind 127.0.0.1:0")
        .port()
}

/// Whether something accepts TCP connections on `addr` right now.
pub fn port_accepts(addr: &str) -> bool {
    let addr: SocketAddr = addr.parse().expect("socket address");
    TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
}

/// Sends one `GET path` with `Connection: close` on a fresh connection and
/// returns the response as text: up to the end of the `Content-Length`
/// body, or up to the server closing when there is none. Handy for
/// checking that a target is up. Panics on errors and after 5 s of silence.
pub fn http_get(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = s.read(&mut buf).unwrap_or_else(|e| panic!("read from {addr}: {e}"));
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        if let Some(end) = out.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&out[..end]).to_ascii_lowercase();
            let length = head.lines().find_map(|l| {
                l.strip_prefix("content-length:")
                    .and_then(|v| v.trim().parse::<usize>().ok())
            });
            if length.is_some_and(|len| out.len() >= end + 4 + len) {
                break;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

// ---------------------------------------------------------------------------
// nginx
// ---------------------------------------------------------------------------

/// A private nginx: own config, logs, pid file and temp paths in a fresh
/// temp dir, listening on a free port of 127.0.0.1. The system service and
/// /etc/nginx are never touched. Dropping it stops nginx and removes the dir.
pub struct Nginx {
    pub port: u16,
    pub master_pid: u32,
    dir: PathBuf,
    child: Child,
}

/// The nginx binary: `/usr/sbin` is not on every user's PATH, so look there
/// first and fall back to PATH.
fn nginx_bin() -> PathBuf {
    let sbin = PathBuf::from("/usr/sbin/nginx");
    if sbin.exists() { sbin } else { PathBuf::from("nginx") }
}

/// Temp-path directives for the modules this nginx build has. nginx creates
/// a temp dir for every such module at startup, by default under
/// /var/lib/nginx; pointing them into our dir means no access is needed
/// there. A directive for a module that was compiled out is a config error,
/// so ask `nginx -V` which ones were.
fn nginx_temp_paths(dir: &Path) -> String {
    let v = Command::new(nginx_bin())
        .arg("-V")
        .output()
        .unwrap_or_else(|e| panic!("cannot run nginx -V (is nginx installed?): {e}"));
    let build = String::from_utf8_lossy(&v.stderr);
    let mut out = format!("    client_body_temp_path {}/client_body;\n", dir.display());
    for module in ["proxy", "fastcgi", "uwsgi", "scgi"] {
        if !build.contains(&format!("--without-http_{module}_module")) {
            out += &format!("    {module}_temp_path {}/{module};\n", dir.display());
        }
    }
    out
}

/// What goes inside nginx's `server` block: one `location /` (the usual
/// case), or several locations with an access log of method, path and
/// status per request (tests of request mixes count paths in it).
enum Locations<'a> {
    Root(&'a str),
    Paths(&'a [(&'a str, &'a str)]),
}

fn nginx_config(
    dir: &Path,
    port: u16,
    extra_http: &str,
    locations: &Locations<'_>,
    ssl: Option<&str>,
    listen: &str,
) -> String {
    // With `ssl`, the listener speaks TLS and these directives (certificate,
    // key, client verification) join the server block.
    let (listen_ssl, ssl) = match ssl {
        Some(directives) => (" ssl", directives),
        None => ("", ""),
    };
    let d = dir.display();
    let (log_format, locations) = match locations {
        Locations::Root(body) => {
            let body = if body.trim().is_empty() {
                r#"return 200 "pong";"#
            } else {
                body
            };
            (String::new(), format!("location / {{\n            {body}\n        }}"))
        }
        Locations::Paths(paths) => (
            "log_format soakd_paths '$request_method $uri $status';".to_string(),
            std::iter::once(format!("access_log {d}/access.log soakd_paths;"))
                .chain(
                    paths
                        .iter()
                        .map(|(path, body)| format!("location = {path} {{\n            {body}\n        }}")),
                )
                .collect::<Vec<_>>()
                .join("\n        "),
        ),
    };
    let temp_paths = nginx_temp_paths(dir);
    // worker_rlimit_nofile may exceed what this process may raise its limit
    // to; nginx then logs an alert and keeps the inherited limit.
    format!(
        r#"daemon off;
master_process on;
worker_processes 1;
worker_rlimit_nofile 40000;
pid {d}/nginx.pid;
error_log {d}/error.log warn;

events {{
    worker_connections 30000;
    multi_accept on;
}}

http {{
    access_log off;
    keepalive_requests 1000000;
    keepalive_timeout 3600s;
{temp_paths}
    {extra_http}
    {log_format}

    server {{
        listen 127.0.0.1:{port}{listen_ssl}{listen} backlog=4096;
        {ssl}
        {locations}
    }}
}}
"#
    )
}

impl Nginx {
    /// Starts nginx with `extra_http` added to the `http` block (it must not
    /// repeat the directives set here, or nginx rejects them as duplicates)
    /// and `location_body` as the body of `location /` (empty means
    /// `return 200 "pong";`).
    ///
    /// Returns once the port accepts connections and a worker exists.
    /// Panics with the error log when nginx does not come up within 5 s.
    pub fn start(extra_http: &str, location_body: &str) -> Nginx {
        Self::start_with(extra_http, &Locations::Root(location_body), None, "")
    }

    /// Starts nginx with one exact-match location per `(path, body)` and
    /// an access log of `METHOD PATH STATUS` lines (see
    /// [`Nginx::access_log`]); any other path is nginx's 404.
    pub fn start_locations(extra_http: &str, locations: &[(&str, &str)]) -> Nginx {
        Self::start_with(extra_http, &Locations::Paths(locations), None, "")
    }

    /// The access log of [`Nginx::start_locations`]: one `METHOD PATH
    /// STATUS` line per request answered so far.
    pub fn access_log(&self) -> String {
        read_lossy(&self.dir.join("access.log"))
    }

    /// Like [`Nginx::start`], listening with TLS: `ssl` holds the server
    /// block's TLS directives (`ssl_certificate ...; ssl_certificate_key
    /// ...;` and any others).
    pub fn start_tls(extra_http: &str, location_body: &str, ssl: &str) -> Nginx {
        Self::start_with(extra_http, &Locations::Root(location_body), Some(ssl), "")
    }

    // HTTP/2
    /// Like [`Nginx::start`] with HTTP/2 on the listener (`listen ...
    /// http2`): h2c with prior knowledge, or with `ssl` h2 over TLS (ALPN
    /// `h2`, HTTP/1.1 still offered).
    pub fn start_h2(extra_http: &str, location_body: &str, ssl: Option<&str>) -> Nginx {
        Self::start_with(extra_http, &Locations::Root(location_body), ssl, " http2")
    }

    fn start_with(extra_http: &str, locations: &Locations<'_>, ssl: Option<&str>, listen: &str) -> Nginx {
        // nginx cannot bind port 0, so pick a port that was just free; if
        // another process grabs it first nginx exits with "Address already
        // in use" and we try another one.
        for _ in 0..10 {
            let dir = make_temp_dir("nginx");
            let port = free_port();
            let conf = dir.join("nginx.conf");
            fs::write(&conf, nginx_config(&dir, port, extra_http, locations, ssl, listen)).expect("write nginx.conf");
            let stderr = fs::File::create(dir.join("stderr.log")).expect("create stderr.log");
            let mut prefix = dir.display().to_string();
            prefix.push('/');
            let child = Command::new(nginx_bin())
                .arg("-p")
                .arg(&prefix)
                .arg("-c")
                .arg(&conf)
                // -e: the log used before the config is read; the default
                // may be a file under /var/log.
                .arg("-e")
                .arg(dir.join("error.log"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(stderr)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start nginx (is it installed?): {e}"));
            let mut nginx = Nginx {
                port,
                master_pid: child.id(),
                dir,
                child,
            };
            match nginx.wait_ready() {
                Ok(()) => return nginx,
                Err(log) if log.contains("Address already in use") => {
                    continue; // dropping `nginx` cleans up; try another port
                }
                Err(log) => panic!("nginx did not come up on port {port}:\n{log}"),
            }
        }
        panic!("nginx: no free port found in 10 attempts");
    }

    /// Waits (polling every 20 ms, up to 5 s) until nginx has written its
    /// pid file (it does that only after binding its sockets), the port
    /// accepts TCP connections, and at least one worker has been forked.
    /// Returns the logs on failure.
    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        let addr = self.addr();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("nginx exited with {status}\n{}", self.logs()));
            }
            if self.dir.join("nginx.pid").exists() && port_accepts(&addr) && !self.worker_pids().is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("nginx not ready after 5 s\n{}", self.logs()));
            }
            thread::sleep(POLL);
        }
    }

    /// The error log and nginx's own stderr, for panic messages.
    pub fn logs(&self) -> String {
        format!(
            "--- error.log ---\n{}\n--- stderr ---\n{}",
            read_lossy(&self.dir.join("error.log")),
            read_lossy(&self.dir.join("stderr.log"))
        )
    }

    /// The command line that starts this nginx again with its config and
    /// directory (in the foreground: its config says `daemon off`), for a
    /// test that stops it and brings it back; the pid file it writes is
    /// [`Nginx::pid_file`].
    pub fn start_command(&self) -> Vec<String> {
        let mut prefix = self.dir.display().to_string();
        prefix.push('/');
        vec![
            nginx_bin().display().to_string(),
            "-p".into(),
            prefix,
            "-c".into(),
            self.dir.join("nginx.conf").display().to_string(),
            "-e".into(),
            self.dir.join("error.log").display().to_string(),
        ]
    }

    /// The master's pid file (rewritten by an nginx started again with
    /// [`Nginx::start_command`]).
    pub fn pid_file(&self) -> PathBuf {
        self.dir.join("nginx.pid")
    }

    /// `127.0.0.1:PORT`
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `http://127.0.0.1:PORT/path` (a leading `/` on `path` is optional).
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}/{}", self.port, path.trim_start_matches('/'))
    }

    /// `https://127.0.0.1:PORT/path`, for nginx started with [`Nginx::start_tls`].
    pub fn https_url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}/{}", self.port, path.trim_start_matches('/'))
    }

    /// The pids of the master's children (the workers), read from the ppid
    /// field of /proc/*/stat.
    pub fn worker_pids(&self) -> Vec<u32> {
        children_of(self.master_pid)
    }

    /// Freezes nginx (SIGSTOP to master and workers): the kernel still
    /// completes TCP handshakes into the listen backlog, but nothing is
    /// accepted, read or answered until [`Nginx::cont_workers`].
    pub fn stop_workers(&self) {
        signal(self.master_pid, "STOP");
        for pid in self.worker_pids() {
            signal(pid, "STOP");
        }
    }

    /// Thaws nginx after [`Nginx::stop_workers`] (SIGCONT to all).
    pub fn cont_workers(&self) {
        for pid in self.worker_pids() {
            signal(pid, "CONT");
        }
        signal(self.master_pid, "CONT");
    }
}

/// Pids whose parent is `parent` (the ppid field of /proc/PID/stat),
/// sorted.
fn children_of(parent: u32) -> Vec<u32> {
    let Ok(processes) = procfs::process::all_processes() else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = processes
        .flatten()
        // A process may exit between listing and reading: skipped then.
        .filter_map(|p| p.stat().ok())
        .filter(|stat| u32::try_from(stat.ppid) == Ok(parent))
        .filter_map(|stat| u32::try_from(stat.pid).ok())
        .collect();
    pids.sort_unstable();
    pids
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let workers = self.worker_pids();
        // A stopped nginx would not act on SIGTERM, so thaw it first.
        for &pid in &workers {
            try_signal(pid, "CONT");
        }
        try_signal(self.master_pid, "CONT");
        try_signal(self.master_pid, "TERM");
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut exited = false;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                exited = true;
                break;
            }
            thread::sleep(POLL);
        }
        if !exited {
            let _ = self.child.kill();
            let _ = self.child.wait();
            // Workers do not die with the master; they are re-parented.
            for pid in workers {
                try_signal(pid, "KILL");
            }
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

// ---------------------------------------------------------------------------
// Running soakd
// ---------------------------------------------------------------------------

/// The soakd binary that cargo built for this test run.
pub fn soakd_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_soakd"))
}

/// Where a child started by [`spawn_soakd`] writes its stdout and stderr.
/// Files rather than pipes so that a chatty child can never block on a full
/// pipe while the test is busy elsewhere.
struct Capture {
    pid: u32,
    args: String,
    stdout: PathBuf,
    stderr: PathBuf,
}

/// Captures of children that have not been waited for yet, keyed by pid.
static CAPTURES: Mutex<Vec<Capture>> = Mutex::new(Vec::new());

fn captures() -> MutexGuard<'static, Vec<Capture>> {
    CAPTURES.lock().unwrap_or_else(|p| p.into_inner())
}

/// Starts `soakd ARGS...` in the background with stdin closed and stdout and
/// stderr captured to temp files. Finish it with [`wait_with_timeout`] or
/// [`wait_output`], which return what it printed.
pub fn spawn_soakd(args: &[&str]) -> Child {
    spawn_soakd_in(&[], args)
}

/// Like [`spawn_soakd`], but runs `PREFIX... soakd ARGS...`, for wrappers
/// that exec the command they are given (`prlimit --nofile=N:N`,
/// `ip netns exec NS`, `bash -c '…; exec "$@"' bash`). The child's pid
/// becomes soakd's once the wrappers have exec'd it (see [`wait_for_comm`]).
pub fn spawn_soakd_in(prefix: &[&str], args: &[&str]) -> Child {
    let stdout = temp_path("stdout", "log");
    let stderr = temp_path("stderr", "log");
    let mut command = match prefix.split_first() {
        Some((program, rest)) => {
            let mut c = Command::new(program);
            c.args(rest).arg(soakd_bin());
            c
        }
        None => Command::new(soakd_bin()),
    };
    let child = command
        .args(args)
        .stdin(Stdio::null())
        .stdout(fs::File::create(&stdout).expect("create stdout capture"))
        .stderr(fs::File::create(&stderr).expect("create stderr capture"))
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start soakd {args:?}: {e}"));
    captures().push(Capture {
        pid: child.id(),
        args: if prefix.is_empty() {
            format!("{args:?}")
        } else {
            format!("{prefix:?} {args:?}")
        },
        stdout,
        stderr,
    });
    child
}

/// Waits up to `secs` for `child` to exit and returns its status, stdout
/// and stderr. On timeout it kills the child and panics naming the args.
/// Works for children from [`spawn_soakd`] (captured to files) and for any
/// other child whose stdout/stderr are pipes (read on helper threads).
pub fn wait_output(mut child: Child, secs: u64) -> Output {
    let capture = {
        let mut caps = captures();
        caps.iter()
            .position(|c| c.pid == child.id())
            .map(|i| caps.swap_remove(i))
    };
    let out_pipe = child.stdout.take().map(|p| thread::spawn(move || drain(p)));
    let err_pipe = child.stderr.take().map(|p| thread::spawn(move || drain(p)));

    let deadline = Instant::now() + Duration::from_secs(secs);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
            Ok(None) => break None,
            Err(e) => panic!("waiting for child {}: {e}", child.id()),
        }
    };
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }

    let (mut stdout, mut stderr, args) = match &capture {
        Some(c) => (
            fs::read(&c.stdout).unwrap_or_default(),
            fs::read(&c.stderr).unwrap_or_default(),
            c.args.clone(),
        ),
        None => (Vec::new(), Vec::new(), format!("(pid {})", child.id())),
    };
    if let Some(t) = out_pipe {
        stdout.extend(t.join().unwrap_or_default());
    }
    if let Some(t) = err_pipe {
        stderr.extend(t.join().unwrap_or_default());
    }
    if let Some(c) = &capture {
        let _ = fs::remove_file(&c.stdout);
        let _ = fs::remove_file(&c.stderr);
    }

    match status {
        Some(status) => Output { status, stdout, stderr },
        None => panic!(
            "soakd {args} hung: still running after {secs} s, killed\n--- stderr ---\n{}",
            String::from_utf8_lossy(&stderr)
        ),
    }
}

fn drain(mut r: impl Read) -> Vec<u8> {
    let mut buf = Vec::new();
    let _ = r.read_to_end(&mut buf);
    buf
}

/// Waits up to `secs` for `child` (see [`wait_output`]); returns its exit
/// status and stderr.
pub fn wait_with_timeout(child: Child, secs: u64) -> (ExitStatus, String) {
    let out = wait_output(child, secs);
    (out.status, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Runs `soakd ARGS...` to completion, killing it and panicking if it takes
/// longer than [`DEFAULT_TIMEOUT_S`].
pub fn soakd(args: &[&str]) -> Output {
    soakd_timeout(args, DEFAULT_TIMEOUT_S)
}

/// Like [`soakd`] with an explicit timeout.
pub fn soakd_timeout(args: &[&str], secs: u64) -> Output {
    wait_output(spawn_soakd(args), secs)
}

/// Runs `n` shards of one plan at once (`soakd run ARGS --shard i/n`, each
/// writing `r{i}.json` into `dir`), waits for each to succeed, then merges
/// their reports into `merged.json`. Returns the shards' reports and the
/// merged one.
pub fn run_shards_and_merge(dir: &TempDir, n: usize, args: &[&str]) -> (Vec<serde_json::Value>, serde_json::Value) {
    let path = |name: String| dir.path().join(name).to_str().unwrap().to_string();
    let children: Vec<Child> = (0..n)
        .map(|i| {
            let (shard, report) = (format!("{i}/{n}"), path(format!("r{i}.json")));
            let mut all = args.to_vec();
            all.extend(["--shard", &shard, "--metrics-listen", "off", "--report", &report]);
            spawn_soakd(&all)
        })
        .collect();
    for c in children {
        let (status, stderr) = wait_with_timeout(c, 60);
        assert!(status.success(), "{stderr}");
    }
    let mut merge = vec!["merge".to_string()];
    merge.extend((0..n).map(|i| path(format!("r{i}.json"))));
    merge.extend(["--out".to_string(), path("merged.json".into())]);
    let out = soakd(&merge.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let read = |name: String| -> serde_json::Value {
        let text = fs::read_to_string(path(name.clone())).unwrap_or_else(|e| panic!("{name}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    (
        (0..n).map(|i| read(format!("r{i}.json"))).collect(),
        read("merged.json".into()),
    )
}

/// What [`soakd_report`] returns.
#[derive(Debug)]
pub struct RunResult {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub report: serde_json::Value,
}

/// Runs `soakd ARGS... --report TMPFILE` (hard timeout `timeout_s`) and
/// parses the JSON report. Panics, showing stderr, when no valid report was
/// written. A non-zero exit with a valid report is returned, not a panic:
/// check `status` in the test.
pub fn soakd_report(args: &[&str], timeout_s: u64) -> RunResult {
    let path = temp_path("report", "json");
    let path_s = path.display().to_string();
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--report", path_s.as_str()]);
    let out = soakd_timeout(&all, timeout_s);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let text = fs::read_to_string(&path);
    let _ = fs::remove_file(&path);
    let report = match text
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| format!("{e}: {t:?}")))
    {
        Ok(report) => report,
        Err(e) => panic!(
            "soakd {args:?} wrote no valid report ({e}); exit {}\n--- stderr ---\n{stderr}",
            out.status
        ),
    };
    RunResult {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr,
        report,
    }
}

/// A CA and what it signed, as PEM files in a temporary directory.
pub struct Pki {
    dir: TempDir,
    ca_params: rcgen::CertificateParams,
    ca_key: rcgen::KeyPair,
}

impl Pki {
    pub fn new() -> Pki {
        let dir = TempDir::new("pki");
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "soakd test CA");
        ca_params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let ca = ca_params.self_signed(&ca_key).unwrap();
        std::fs::write(dir.path().join("ca.pem"), ca.pem()).unwrap();
        Pki { dir, ca_params, ca_key }
    }

    pub fn ca(&self) -> String {
        self.path("ca.pem")
    }

    pub fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// A certificate for `names` signed by the CA, valid from `from` to
    /// `until` (years), written as NAME.pem and NAME.key.
    pub fn issue(&self, name: &str, names: &[&str], years: (i32, i32)) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params =
            rcgen::CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        params.distinguished_name.push(rcgen::DnType::CommonName, name);
        params.not_before = rcgen::date_time_ymd(years.0, 1, 1);
        params.not_after = rcgen::date_time_ymd(years.1, 1, 1);
        let issuer = rcgen::Issuer::from_params(&self.ca_params, &self.ca_key);
        let cert = params.signed_by(&key, &issuer).unwrap();
        let (c, k) = (self.path(&format!("{name}.pem")), self.path(&format!("{name}.key")));
        std::fs::write(&c, cert.pem()).unwrap();
        std::fs::write(&k, key.serialize_pem()).unwrap();
        (c, k)
    }

    /// A server certificate for 127.0.0.1 and localhost, valid now.
    pub fn server(&self) -> (String, String) {
        self.issue("server", &["127.0.0.1", "localhost"], (2020, 2100))
    }
}

// ---------------------------------------------------------------------------
// soakd's built-in target
// ---------------------------------------------------------------------------

/// `soakd target` running as a child process. Killed (SIGKILL) on drop.
pub struct BuiltinTarget {
    /// `127.0.0.1:PORT`, as printed by the target.
    pub addr: String,
    /// With `--tls`: the certificate's PEM path, as printed by the target.
    pub cert: Option<String>,
    child: Child,
    stderr: PathBuf,
}

impl BuiltinTarget {
    /// Starts `soakd target --listen 127.0.0.1:0 EXTRA...` and learns its port
    /// from the `listening on ADDR` line it prints on stdout (within 5 s).
    pub fn start(extra_args: &[&str]) -> BuiltinTarget {
        Self::try_start("127.0.0.1:0", extra_args).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Starts `PREFIX... soakd target --listen 127.0.0.1:0 EXTRA...`, e.g.
    /// inside a network namespace with `ip netns exec NS` as the prefix
    /// (the prefix must exec the command, so that killing the child kills
    /// the target). The address it prints is only reachable from there.
    pub fn start_in(prefix: &[&str], extra_args: &[&str]) -> BuiltinTarget {
        Self::try_start_in(prefix, "127.0.0.1:0", extra_args).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Starts the target on a known address, e.g. to restart it where a
    /// killed one was. The old socket may linger for a moment, so a failed
    /// start is retried for up to 2 s.
    pub fn start_on(addr: &str, extra_args: &[&str]) -> BuiltinTarget {
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            match Self::try_start(addr, extra_args) {
                Ok(t) => return t,
                Err(e) if Instant::now() > deadline => panic!("{e}"),
                Err(_) => thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    fn try_start(listen: &str, extra_args: &[&str]) -> Result<BuiltinTarget, String> {
        Self::try_start_in(&[], listen, extra_args)
    }

    fn try_start_in(prefix: &[&str], listen: &str, extra_args: &[&str]) -> Result<BuiltinTarget, String> {
        let stderr = temp_path("target-stderr", "log");
        let mut command = match prefix.split_first() {
            Some((program, rest)) => {
                let mut c = Command::new(program);
                c.args(rest).arg(soakd_bin());
                c
            }
            None => Command::new(soakd_bin()),
        };
        let mut child = command
            .args(["target", "--listen", listen])
            .args(extra_args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(fs::File::create(&stderr).expect("create stderr capture"))
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start soakd target: {e}"));

        // A thread reads stdout: it reports the `listening on` line and then
        // keeps draining, so the target never blocks writing to stdout.
        let (tx, rx) = mpsc::channel();
        let out = child.stdout.take().expect("piped stdout");
        thread::spawn(move || {
            let mut cert = None;
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                // `certificate PATH sha256 HEX` comes first with --tls.
                if let Some(rest) = line.trim().strip_prefix("certificate ") {
                    cert = rest.split_whitespace().next().map(str::to_string);
                }
                if let Some(addr) = line.trim().strip_prefix("listening on ") {
                    let _ = tx.send((addr.trim().to_string(), cert.take()));
                }
            }
        });

        let failed = |child: &mut Child, why: &str| {
            let _ = child.kill();
            let _ = child.wait();
            let log = read_lossy(&stderr);
            let _ = fs::remove_file(&stderr);
            format!("soakd target --listen {listen} {extra_args:?}: {why}\n--- stderr ---\n{log}")
        };
        match rx.recv_timeout(Duration::from_secs(5)) {
            // Port 0 would mean the target printed what it was asked to
            // bind rather than the address it got.
            Ok((addr, cert)) if addr.parse::<SocketAddr>().is_ok_and(|a| a.port() != 0) => Ok(BuiltinTarget {
                addr,
                cert,
                child,
                stderr,
            }),
            Ok((addr, _)) => Err(failed(
                &mut child,
                &format!("printed `listening on {addr}`, not a bound 127.0.0.1:PORT"),
            )),
            // The sender is gone: stdout closed, the target has exited.
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                Err(failed(&mut child, "exited before printing `listening on`"))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => Err(failed(&mut child, "no `listening on` line within 5 s")),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `http://ADDR/path` (a leading `/` on `path` is optional).
    pub fn url(&self, path: &str) -> String {
        format!("http://{}/{}", self.addr, path.trim_start_matches('/'))
    }

    /// `https://ADDR/path`, for a target started with `--tls`.
    pub fn https_url(&self, path: &str) -> String {
        format!("https://{}/{}", self.addr, path.trim_start_matches('/'))
    }

    /// What the target wrote to stderr so far.
    pub fn stderr(&self) -> String {
        read_lossy(&self.stderr)
    }

    /// SIGKILLs the target and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for BuiltinTarget {
    fn drop(&mut self) {
        self.kill();
        let _ = fs::remove_file(&self.stderr);
    }
}

// ---------------------------------------------------------------------------
// Raw byte server
// ---------------------------------------------------------------------------

/// A server that answers every read on every connection with the same fixed
/// bytes, whatever was sent. See [`raw_server`].
pub struct RawServer {
    /// `127.0.0.1:PORT`
    pub addr: String,
    stop: Arc<AtomicBool>,
    accepted: Arc<AtomicUsize>,
    handle: Option<JoinHandle<()>>,
}

/// The accept loop gives up after this many connections, so a runaway test
/// cannot make it spawn threads forever.
const RAW_MAX_ACCEPTS: usize = 10_000;

/// Starts a [`RawServer`] on a free port of 127.0.0.1 that answers each read
/// with `response` and closes when the peer does. Used to feed soakd
/// malformed responses. It stops when dropped (or [`RawServer::stop`]), or
/// after 10,000 connections; its threads never hold up process exit.
pub fn raw_server(response: &'static [u8]) -> RawServer {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().unwrap().to_string();
    let stop = Arc::new(AtomicBool::new(false));
    let accepted = Arc::new(AtomicUsize::new(0));
    let (stop2, accepted2) = (stop.clone(), accepted.clone());
    let handle = thread::spawn(move || {
        while accepted2.load(Ordering::Relaxed) < RAW_MAX_ACCEPTS {
            let accepted = listener.accept();
            if stop2.load(Ordering::Relaxed) {
                break;
            }
            let Ok((conn, _)) = accepted else {
                // e.g. out of file descriptors: do not spin.
                thread::sleep(Duration::from_millis(10));
                continue;
            };
            accepted2.fetch_add(1, Ordering::Relaxed);
            let stop3 = stop2.clone();
            // Small stacks: a test may hold thousands of these connections.
            let _ = thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn(move || raw_connection(conn, response, &stop3));
        }
        // The listener is dropped here: further connects are refused.
    });
    RawServer {
        addr,
        stop,
        accepted,
        handle: Some(handle),
    }
}

fn raw_connection(mut conn: TcpStream, response: &[u8], stop: &AtomicBool) {
    // A read timeout lets the thread notice the stop flag.
    let _ = conn.set_read_timeout(Some(Duration::from_millis(100)));
    let mut buf = [0u8; 16 * 1024];
    while !stop.load(Ordering::Relaxed) {
        match conn.read(&mut buf) {
            Ok(0) => break, // peer closed
            Ok(_) => {
                if conn.write_all(response).is_err() {
                    break;
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
}

impl RawServer {
    /// How many connections were accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::Relaxed)
    }

    /// `http://ADDR/path` (a leading `/` on `path` is optional).
    pub fn url(&self, path: &str) -> String {
        format!("http://{}/{}", self.addr, path.trim_start_matches('/'))
    }

    /// Stops accepting and makes open connections close within ~100 ms.
    /// Does not wait for the threads.
    pub fn stop(&self) {
        if !self.stop.swap(true, Ordering::Relaxed) {
            // Wake the accept loop, which is blocked in accept().
            if let Ok(addr) = self.addr.parse::<SocketAddr>() {
                let _ = TcpStream::connect_timeout(&addr, Duration::from_millis(200));
            }
        }
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        self.stop();
        // Detach rather than join: dropping must never wait on the threads.
        drop(self.handle.take());
    }
}

// ---------------------------------------------------------------------------
// Reading reports
// ---------------------------------------------------------------------------

/// The unsigned number at JSON pointer `path` (e.g. `/requests/completed`);
/// panics showing the report when it is missing.
pub fn field(v: &serde_json::Value, path: &str) -> u64 {
    v.pointer(path)
        .and_then(serde_json::Value::as_u64)
        .unwrap_or_else(|| panic!("{path} missing in {v:#}"))
}

/// The error kinds a report (or one of its workloads) counted, with their
/// counts, leaving out the kinds at 0, in name order.
pub fn nonzero_errors(v: &serde_json::Value) -> Vec<(String, u64)> {
    v["errors"]
        .as_object()
        .expect("a report has an errors object")
        .iter()
        .filter_map(|(k, n)| n.as_u64().filter(|&n| n > 0).map(|n| (k.clone(), n)))
        .collect()
}

/// All errors of a report (or of one of its workloads), every kind summed.
pub fn total_errors(v: &serde_json::Value) -> u64 {
    v["errors"]
        .as_object()
        .unwrap_or_else(|| panic!("no errors object in {v:#}"))
        .values()
        .map(|n| n.as_u64().unwrap_or(0))
        .sum()
}

/// The number at JSON pointer `path`, as f64.
pub fn field_f64(v: &serde_json::Value, path: &str) -> f64 {
    v.pointer(path)
        .and_then(serde_json::Value::as_f64)
        .unwrap_or_else(|| panic!("{path} missing in {v:#}"))
}

// ---------------------------------------------------------------------------
// Serialising heavy tests
// ---------------------------------------------------------------------------

/// The coordinated-omission proofs' stall: the server frozen (`freeze`)
/// for one second and thawed (`thaw`), then the soak `soakd` (started
/// with a duration long enough never to end first) stopped with SIGTERM
/// two seconds later: drained and reported. The soak's end is placed by
/// the stall, not by its own start, so a busy machine that took long to
/// open the connections cannot end the run before the stall, and the
/// stall's share of the requests stays near a fifth or less (at least
/// 2 s of requests before it, as the caller waits for, 1 s in it, 2 s
/// after), which is what the p99 and p50 assertions rest on.
pub fn stall_then_stop(soakd: &Child, freeze: impl FnOnce(), thaw: impl FnOnce()) {
    freeze();
    thread::sleep(Duration::from_secs(1));
    thaw();
    thread::sleep(Duration::from_secs(2));
    signal(soakd.id(), "TERM");
}

/// A process-wide lock for load tests (thousands of connections): the test
/// harness runs tests in parallel threads, and two such tests at once would
/// exceed the open-file limit and starve each other of CPU. Take it for the
/// whole test: `let _heavy = util::heavy_lock();`. A test that panicked
/// while holding it does not block the others (poison is ignored).
pub fn heavy_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

// ---------------------------------------------------------------------------
// What a running process uses (/proc)
// ---------------------------------------------------------------------------

/// The process `pid` as procfs sees it, or `None` when there is none.
fn process(pid: u32) -> Option<procfs::process::Process> {
    procfs::process::Process::new(i32::try_from(pid).ok()?).ok()
}

/// Resident memory of `pid` in KiB (`VmRSS` in /proc/PID/status), or
/// `None` when the process is gone (or is a zombie, which has no VmRSS).
pub fn vm_rss_kb(pid: u32) -> Option<u64> {
    process(pid)?.status().ok()?.vmrss
}

/// CPU time `pid` has used so far, user plus system, in seconds (utime +
/// stime from /proc/PID/stat, in clock ticks of `sysconf(_SC_CLK_TCK)`),
/// or `None` when it is gone.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = process(pid)?.stat().ok()?;
    Some((stat.utime + stat.stime) as f64 / procfs::ticks_per_second() as f64)
}

/// Waits up to `secs` (0: just looks once) until the command name of `pid`
/// (the `comm` field of /proc/PID/stat) is `comm`: a child started through
/// exec'ing wrappers (see [`spawn_soakd_in`]) has become the program.
/// Returns whether it did; `false` at once when the process is gone.
pub fn wait_for_comm(pid: u32, comm: &str, secs: u64) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        match process(pid).and_then(|p| p.stat().ok()) {
            Some(stat) if stat.comm == comm => return true,
            Some(_) if Instant::now() < deadline => thread::sleep(Duration::from_millis(5)),
            _ => return false,
        }
    }
}

/// The name `ss` and netstat give a TCP state.
fn tcp_state_name(state: &procfs::net::TcpState) -> &'static str {
    use procfs::net::TcpState::*;
    match state {
        Established => "ESTABLISHED",
        SynSent => "SYN_SENT",
        SynRecv => "SYN_RECV",
        FinWait1 => "FIN_WAIT1",
        FinWait2 => "FIN_WAIT2",
        TimeWait => "TIME_WAIT",
        Close => "CLOSE",
        CloseWait => "CLOSE_WAIT",
        LastAck => "LAST_ACK",
        Listen => "LISTEN",
        Closing => "CLOSING",
        NewSynRecv => "NEW_SYN_RECV",
    }
}

/// The TCP sockets `pid` has open, counted by state (`ESTABLISHED`,
/// `CLOSE_WAIT`, …): its socket inodes from /proc/PID/fd matched against
/// /proc/PID/net/tcp and tcp6 (the process's own network namespace).
/// Empty when the process is gone.
pub fn socket_states(pid: u32) -> std::collections::BTreeMap<String, usize> {
    let mut out = std::collections::BTreeMap::new();
    let Some(process) = process(pid) else {
        return out;
    };
    let Ok(fds) = process.fd() else {
        return out;
    };
    // An fd closed while listing is an error item: skipped.
    let inodes: std::collections::HashSet<u64> = fds
        .flatten()
        .filter_map(|fd| match fd.target {
            procfs::process::FDTarget::Socket(inode) => Some(inode),
            _ => None,
        })
        .collect();
    for table in [process.tcp(), process.tcp6()] {
        // No tcp6 table without IPv6: nothing to count there.
        let Ok(entries) = table else {
            continue;
        };
        for entry in entries.iter().filter(|e| inodes.contains(&e.inode)) {
            *out.entry(tcp_state_name(&entry.state).to_string()).or_insert(0) += 1;
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Network namespaces
// ---------------------------------------------------------------------------

/// Whether this process runs as root (effective uid 0, from
/// /proc/self/status).
pub fn is_root() -> bool {
    procfs::process::Process::myself()
        .and_then(|p| p.status())
        .is_ok_and(|s| s.euid == 0)
}

/// A fresh network namespace (`ip netns add soakd-test-PID-N`) with `lo`
/// up, deleted on drop. Inside it, all of 127.0.0.0/8 is local, and
/// sysctls such as `net.ipv4.ip_local_port_range` are its own, so tests
/// can shrink them without touching the host. Drop the processes running
/// inside before the namespace (declare it first).
pub struct NetNs {
    pub name: String,
}

impl NetNs {
    /// Creates the namespace, or says why it cannot (not root, no `ip`,
    /// no netns support), so the caller can skip.
    pub fn create() -> Result<NetNs, String> {
        if !is_root() {
            return Err("not root: network namespaces need CAP_SYS_ADMIN".into());
        }
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "soakd-test-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let run = |args: &[&str]| -> Result<(), String> {
            let out = Command::new("ip")
                .args(args)
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("cannot run ip {args:?}: {e}"))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "ip {args:?} failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ))
            }
        };
        run(&["netns", "add", &name])?;
        // From here on, dropping `ns` deletes the namespace.
        let ns = NetNs { name };
        run(&["netns", "exec", &ns.name, "ip", "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// The command prefix that runs a program inside: `ip netns exec NAME`.
    pub fn exec(&self) -> [&str; 4] {
        ["ip", "netns", "exec", &self.name]
    }

    /// Sets a sysctl inside the namespace (`sysctl -w KEY=VALUE`); panics
    /// when that fails.
    pub fn sysctl(&self, key: &str, value: &str) {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.name, "sysctl", "-w", &format!("{key}={value}")])
            .stdin(Stdio::null())
            .output()
            .expect("run sysctl in the namespace");
        assert!(
            out.status.success(),
            "sysctl -w {key}={value} in {}: {}",
            self.name,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl NetNs {
    /// [`scrape`] of a soakd whose `/metrics` listens at `addr` inside the
    /// namespace (curl run there), or `None` while it does not answer.
    pub fn scrape(&self, addr: &str) -> Option<std::collections::HashMap<String, f64>> {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.name, "curl", "-sf", "-m", "5"])
            .arg(format!("http://{addr}/metrics"))
            .stdin(Stdio::null())
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        let body = String::from_utf8_lossy(&out.stdout);
        let samples = soakd::statuscmd::exposition::parse(&body)
            .unwrap_or_else(|e| panic!("{addr}/metrics is not Prometheus text ({e}):\n{body}"));
        Some(samples.into_iter().map(|s| (s.series(), s.value)).collect())
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

// ---------------------------------------------------------------------------
// Tests that need root
// ---------------------------------------------------------------------------

// ---------------------------------------------------------------------------
// Prometheus
// ---------------------------------------------------------------------------

/// A private Prometheus: its config, data and log in a temp dir, on a free
/// port of 127.0.0.1, scraping `targets` (job `soakd`) every second and
/// evaluating the rule files every second. Killed on drop.
pub struct Prometheus {
    /// `127.0.0.1:PORT` of its HTTP API.
    pub addr: String,
    child: Child,
    dir: TempDir,
}

/// One series of an instant query: its labels and value.
pub type Sample = (std::collections::BTreeMap<String, String>, f64);

/// Every query of the dashboard row titled `row` (the panels after it, up
/// to the next row), as (panel title, expression) with Grafana's variables
/// filled in for a test's Prometheus (job `soakd`, every instance and
/// target, a 1m rate interval).
pub fn dashboard_row_queries(row: &str) -> Vec<(String, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("grafana/dashboards/soakd.json");
    let dash: serde_json::Value = serde_json::from_str(&fs::read_to_string(path).expect("the dashboard")).unwrap();
    let panels = dash["panels"].as_array().unwrap();
    let at = panels
        .iter()
        .position(|p| p["type"] == "row" && p["title"] == row)
        .unwrap_or_else(|| panic!("no dashboard row {row:?}"));
    let mut out = Vec::new();
    for p in panels[at + 1..].iter().take_while(|p| p["type"] != "row") {
        for q in p["targets"].as_array().into_iter().flatten() {
            let expr = q["expr"]
                .as_str()
                .unwrap()
                .replace("$__rate_interval", "1m")
                .replace("$job", "soakd")
                .replace("$instance", ".*")
                .replace("$target", ".*");
            out.push((p["title"].as_str().unwrap_or("").to_string(), expr));
        }
    }
    out
}

impl Prometheus {
    /// Starts Prometheus with `rule_files` (paths relative to the
    /// repository) scraping `targets` (`127.0.0.1:PORT` each); `None` after
    /// [`cannot_run`] (a failure under CI) when the binary is missing.
    pub fn start(targets: &[&str], rule_files: &[&str]) -> Option<Prometheus> {
        let bin = ["/usr/bin/prometheus", "/usr/local/bin/prometheus"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file());
        let Some(bin) = bin else {
            cannot_run("prometheus is not installed (scripts/test.sh installs the Debian package)");
            return None;
        };
        let dir = TempDir::new("prometheus");
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let rules: Vec<String> = rule_files
            .iter()
            .map(|f| format!("{:?}", root.join(f).display().to_string()))
            .collect();
        let targets: Vec<String> = targets.iter().map(|t| format!("{t:?}")).collect();
        let config = dir.path().join("prometheus.yml");
        fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: [{}]\nscrape_configs:\n  - job_name: soakd\n    static_configs:\n      - targets: [{}]\n",
                rules.join(", "),
                targets.join(", ")
            ),
        )
        .expect("write prometheus.yml");
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        let log = fs::File::create(dir.path().join("log")).expect("create the prometheus log");
        let child = Command::new(bin)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address={addr}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        let p = Prometheus { addr, child, dir };
        wait_until(
            || port_accepts(&p.addr) && http_get(&p.addr, "/-/ready").starts_with("HTTP/1.1 200"),
            Duration::from_secs(30),
            "prometheus ready",
        );
        Some(p)
    }

    /// The series of the instant query `expr` now.
    pub fn query(&self, expr: &str) -> Vec<Sample> {
        let mut q = String::new();
        for b in expr.bytes() {
            match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => q.push(b as char),
                _ => q.push_str(&format!("%{b:02X}")),
            }
        }
        let text = http_get(&self.addr, &format!("/api/v1/query?query={q}"));
        let (head, mut body) = text.split_once("\r\n\r\n").unwrap_or(("", ""));
        // Go sends a long answer chunked: take the chunks' data.
        let mut joined = String::new();
        if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
            while let Some((size, rest)) = body.split_once("\r\n") {
                let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
                if n == 0 || rest.len() < n {
                    break;
                }
                joined.push_str(&rest[..n]);
                body = rest[n..].trim_start_matches("\r\n");
            }
            body = &joined;
        }
        let v: serde_json::Value = serde_json::from_str(body)
            .unwrap_or_else(|e| panic!("prometheus answered {expr:?} with no JSON ({e}):\n{text}"));
        assert_eq!(v["status"], "success", "{expr}: {v}");
        v["data"]["result"]
            .as_array()
            .map(|r| {
                r.iter()
                    .map(|s| {
                        let labels = s["metric"]
                            .as_object()
                            .map(|m| {
                                m.iter()
                                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                                    .collect()
                            })
                            .unwrap_or_default();
                        let value = s["value"][1].as_str().and_then(|x| x.parse().ok()).unwrap_or(f64::NAN);
                        (labels, value)
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Its log so far (for failure messages).
    pub fn log(&self) -> String {
        read_lossy(&self.dir.path().join("log"))
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
