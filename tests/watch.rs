//! The server watch against servers no one here wrote the metrics of:
//! Python's `prometheus_client` in a leaking keep-alive server
//! (tests/peers/leaky_server.py), a real Prometheus scraping two of them,
//! Debian's process-exporter watching a server that leaks descriptors;
//! the server followed across a restart (its exposition, its pid file, its
//! cgroup); exporters that hang, answer garbage or 50 MB mid-soak; and the
//! bad input refused before anything opens. The 6-minute runs and their
//! figures are bench/watch.sh's (bench/README.md, "Issue 39").

mod util;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use util::{
    Prometheus, TempDir, free_port, metrics_python, need_root, scrape, soakd, soakd_report, spawn_soakd, wait_for,
    wait_until, wait_with_timeout,
};

/// tests/peers/leaky_server.py, and the ports it printed.
struct Leaky {
    child: Child,
    port: u16,
    metrics: u16,
    pid: u32,
}

impl Leaky {
    /// Starts it with `args` (`--leak-bytes N`, `--port P`, …); `None`
    /// when the venv lacks prometheus_client (a failure under CI).
    fn start(args: &[&str]) -> Option<Leaky> {
        metrics_python()?;
        Some(Self::spawn(args).expect("the leaky server prints its ports"))
    }

    /// Starts it, or `None` when it did not print its ports (its ports
    /// taken: the old one's sockets linger a moment after a kill).
    fn spawn(args: &[&str]) -> Option<Leaky> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/leaky_server.py");
        let mut child = Command::new(metrics_python()?)
            .arg(script)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .stdin(Stdio::null())
            .spawn()
            .expect("start the leaky server");
        let mut line = String::new();
        let _ = BufReader::new(child.stdout.take().unwrap()).read_line(&mut line);
        let f: Vec<&str> = line.split_whitespace().collect();
        if (f.first(), f.get(2), f.get(4)) != (Some(&"port"), Some(&"metrics"), Some(&"pid")) {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        Some(Leaky {
            child,
            port: f[1].parse().unwrap(),
            metrics: f[3].parse().unwrap(),
            pid: f[5].parse().unwrap(),
        })
    }

    /// The server killed and a new one (leaking `leak` bytes a request)
    /// started on its ports: what a deploy does to it.
    fn restart(&mut self, leak: &str) -> Leaky {
        self.kill();
        let (port, mport) = (self.port.to_string(), self.metrics.to_string());
        let args = ["--leak-bytes", leak, "--port", &port, "--metrics-port", &mport];
        wait_for(
            || Leaky::spawn(&args),
            Duration::from_secs(10),
            "the leaky server on its ports again",
        )
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    fn metrics_url(&self) -> String {
        format!("http://127.0.0.1:{}/metrics", self.metrics)
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Leaky {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A process's resident memory now, bytes (/proc/PID/status VmRSS).
fn vm(pid: u32, key: &str) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with(key))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024.0)
}

/// The least-squares slope of `(t, y)`.
fn ls_slope(pts: &[(f64, f64)]) -> f64 {
    let n = pts.len() as f64;
    let (mx, my) = (
        pts.iter().map(|p| p.0).sum::<f64>() / n,
        pts.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let num: f64 = pts.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let den: f64 = pts.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
    num / den
}

fn server(r: &Value) -> &Value {
    r.get("server")
        .filter(|s| !s.is_null())
        .unwrap_or_else(|| panic!("no server section: {r}"))
}

/// The report's series of watch `watch`.
fn series<'a>(r: &'a Value, watch: &str) -> Vec<&'a Value> {
    server(r)["series"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["watch"] == watch)
        .collect()
}

fn threshold<'a>(r: &'a Value, text: &str) -> &'a Value {
    r["thresholds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["threshold"] == text)
        .unwrap_or_else(|| panic!("no {text} in {}", r["thresholds"]))
}

/// A leak of 20 KB per request at 100 requests/s (about 2 MB/s): the
/// slope soakd reports from the server's own `process_resident_memory_bytes`
/// is within 10% of the slope of its RSS read from /proc by this test;
/// `slope(rss)<=1MiB/h` fails live (soakd_threshold_passing 0 on /metrics)
/// before the end, and at the end (exit 3, the series named);
/// `max(fds)` of the same endpoint passes; the series are on /metrics.
#[test]
fn a_leaking_server_fails_its_slope_live_and_at_the_end() {
    let Some(leaky) = Leaky::start(&["--leak-bytes", "20000"]) else {
        return;
    };
    let dir = TempDir::new("watch-leak");
    let report = dir.path().join("r.json");
    let metrics = format!("127.0.0.1:{}", free_port());
    let child = spawn_soakd(&[
        "run",
        &leaky.url(),
        "-c",
        "10",
        "-r",
        "100",
        "-d",
        "40s",
        "--metrics-listen",
        &metrics,
        "--target-metrics",
        &leaky.metrics_url(),
        "--target-metrics-interval",
        "1s",
        "--threshold",
        "slope(rss)<=1MiB/h",
        "--threshold",
        "max(fds)<=1000",
        "--report",
        report.to_str().unwrap(),
        "--html-report",
        dir.path().join("r.html").to_str().unwrap(),
    ]);
    // The test's own reading of the server's RSS, once a second.
    let started = Instant::now();
    let mut proc_rss = Vec::new();
    let mut failed_live = None;
    while started.elapsed() < Duration::from_secs(38) {
        if let Some(rss) = vm(leaky.pid, "VmRSS:") {
            proc_rss.push((started.elapsed().as_secs_f64(), rss));
        }
        if failed_live.is_none()
            && let Some(m) = scrape(&metrics)
            && m.get("soakd_threshold_passing{target=\"*\",threshold=\"slope(rss)<=1MiB/h\"}") == Some(&0.0)
        {
            failed_live = Some(started.elapsed());
            let rss = m
                .iter()
                .find(|(k, _)| k.starts_with("soakd_watch_value{watch=\"rss\""))
                .map(|(_, v)| *v);
            assert!(rss.is_some_and(|v| v > 1e6), "soakd_watch_value of rss: {m:?}");
            assert!(
                m.iter()
                    .any(|(k, v)| k.starts_with("soakd_watch_slope_significant{watch=\"rss\"") && *v == 1.0),
                "{m:?}"
            );
            assert_eq!(
                m.get(&format!(
                    "soakd_watch_scrape_failures_total{{source=\"{}\",reason=\"timeout\"}}",
                    leaky.metrics_url()
                )),
                Some(&0.0),
                "every reason's series from the start: {m:?}"
            );
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    let (status, stderr) = wait_with_timeout(child, 60);
    let failed_live = failed_live.unwrap_or_else(|| panic!("slope(rss) never failed live\n{stderr}"));
    assert!(failed_live < Duration::from_secs(35), "failed live at {failed_live:?}");
    assert_eq!(status.code(), Some(3), "{stderr}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let rss = series(&r, "rss");
    assert_eq!(rss.len(), 1, "{}", server(&r));
    let soakd_slope = rss[0]["slope"]["slope"].as_f64().unwrap();
    // The same span: after soakd's warmup (4 s of 40) to the end.
    let steady: Vec<(f64, f64)> = proc_rss.iter().copied().filter(|(t, _)| *t >= 5.0).collect();
    let truth = ls_slope(&steady);
    eprintln!(
        "slope of the server's RSS: soakd {soakd_slope:.0} B/s from its exposition, /proc {truth:.0} B/s ({} reads)",
        steady.len()
    );
    assert!((soakd_slope / truth - 1.0).abs() < 0.1, "{soakd_slope} vs {truth}");
    assert_eq!(rss[0]["slope"]["significant"], true);
    let t = threshold(&r, "slope(rss)<=1MiB/h");
    assert_eq!(t["pass"], false, "{t}");
    assert!(t["note"].as_str().unwrap().starts_with("failed by rss"), "{t}");
    assert_eq!(t["unit"], "bytes/s");
    assert_eq!(threshold(&r, "max(fds)<=1000")["pass"], true);
    assert!(
        stderr.contains("FAIL  slope(rss)<=1MiB/h") && stderr.contains("MiB/min"),
        "{stderr}"
    );
    assert!(stderr.contains("  server        2 series from 1 source(s)"), "{stderr}");
    // The points carry the values, the timeline names the columns.
    let cols = r["timeline"]["series"]["series"].as_array().unwrap();
    assert_eq!(cols.len(), 2);
    assert!(
        r["timeline"]["points"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["watch"][0].as_f64().is_some_and(|v| v > 1e6))
    );
    // The page: a chart per watch and the series table.
    let page = std::fs::read_to_string(dir.path().join("r.html")).unwrap();
    assert!(page.contains("Server: rss (bytes)") && page.contains("<h2>Server</h2>"));
    // `soakd compare` and `soakd history`: a build that leaks against one
    // that did not is worse, on the series' slope (reports as the run
    // wrote them, the steady one made from this one's series by hand:
    // flat, not significant).
    let mut steady = r.clone();
    steady["server"]["series"][0]["slope"]["slope"] = 3.0.into();
    steady["server"]["series"][0]["slope"]["significant"] = false.into();
    steady["server"]["series"][0]["last"] = rss[0]["first"].clone();
    steady["timeline"]["started_at_unix_seconds"] = 1.0.into();
    let base = dir.path().join("steady.json");
    std::fs::write(&base, steady.to_string()).unwrap();
    let out = soakd(&["compare", base.to_str().unwrap(), report.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(
        text.contains("server rss") && text.contains("WORSE: ") && text.contains("slope"),
        "{text}"
    );
    let out = soakd(&["history", base.to_str().unwrap(), report.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(
        text.contains("first run worse than the one before it: run 2") && text.contains("server rss slope"),
        "{text}"
    );
}

/// The same server without a leak: `slope(rss)<=1MiB/h` passes (the
/// bench runs it 5 times for 4 minutes, one of them with a CPU hog).
#[test]
fn a_steady_server_passes_its_slope() {
    let Some(leaky) = Leaky::start(&[]) else {
        return;
    };
    let run = soakd_report(
        &[
            "run",
            &leaky.url(),
            "-c",
            "10",
            "-r",
            "100",
            "-d",
            "25s",
            "--metrics-listen",
            "off",
            "--target-metrics",
            &leaky.metrics_url(),
            "--target-metrics-interval",
            "1s",
            "--threshold",
            "slope(rss)<=1MiB/h",
            "--threshold",
            "slope(fds)<=100/h",
        ],
        60,
    );
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    let rss = series(&run.report, "rss");
    assert!(rss[0]["slope"]["slope"].is_number(), "{}", rss[0]);
    assert_eq!(rss[0]["restarts"], Value::Null, "no restart: {}", rss[0]);
}

/// The server killed and started again on its ports mid-soak: one
/// restart, on the series and among the events (its new
/// `process_start_time_seconds`), and the slope fitted on each side of it
/// only: the leak's rate, not the near-zero (or negative) line across the
/// drop. The scrape failures while it was down are counted, none is an
/// error of the soak's requests but those the kill cut.
#[test]
fn a_restarted_server_is_one_restart_and_no_slope_across_it() {
    let Some(mut leaky) = Leaky::start(&["--leak-bytes", "20000"]) else {
        return;
    };
    let dir = TempDir::new("watch-restart");
    let report = dir.path().join("r.json");
    let child = spawn_soakd(&[
        "run",
        &leaky.url(),
        "-c",
        "10",
        "-r",
        "100",
        "-d",
        "40s",
        "--metrics-listen",
        "off",
        "--target-metrics",
        &leaky.metrics_url(),
        "--target-metrics-interval",
        "1s",
        "--report",
        report.to_str().unwrap(),
    ]);
    std::thread::sleep(Duration::from_secs(18));
    let _again = leaky.restart("20000");
    let (status, stderr) = wait_with_timeout(child, 60);
    assert!(status.success(), "{stderr}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let rss = series(&r, "rss");
    let restarts = rss[0]["restarts"].as_array().expect("the series lists its restarts");
    assert_eq!(restarts.len(), 1, "{}", rss[0]);
    let at = restarts[0].as_f64().unwrap();
    assert!((17.0..25.0).contains(&at), "restart at {at}");
    let events: Vec<&Value> = r["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["source"] == "watch")
        .collect();
    assert_eq!(events.len(), 1, "{}", r["events"]);
    assert!(
        events[0]["status"]
            .as_str()
            .unwrap()
            .contains("process_start_time_seconds"),
        "{}",
        events[0]
    );
    let slope = rss[0]["slope"]["slope"].as_f64().unwrap();
    assert!(
        (1.2e6..3.0e6).contains(&slope),
        "the leak's ~2 MB/s within each side, not across the restart: {}",
        rss[0]["slope"]
    );
    assert!(stderr.contains("restarted: process_start_time_seconds"), "{stderr}");
    let src = &server(&r)["sources"][0];
    assert!(src["failures"]["refused"].as_u64().unwrap_or(0) > 0, "{src}");
    assert_eq!(src["restarts"], 1, "{src}");
}

/// Two instances of one job scraped by a real Prometheus, one leaking:
/// through `--prometheus` every series of the query is trended on its
/// own, only the leaking instance fails `slope(rss)`, and the report (and
/// the threshold's note) names it by its labels.
#[test]
fn prometheus_names_the_leaking_instance() {
    let Some(steady) = Leaky::start(&[]) else {
        return;
    };
    let Some(leaking) = Leaky::start(&["--leak-bytes", "20000"]) else {
        return;
    };
    let (a, b) = (
        format!("127.0.0.1:{}", steady.metrics),
        format!("127.0.0.1:{}", leaking.metrics),
    );
    let Some(prom) = Prometheus::start(&[&a, &b], &[]) else {
        return;
    };
    wait_until(
        || prom.query("process_resident_memory_bytes").len() == 2,
        Duration::from_secs(30),
        "Prometheus has scraped both instances",
    );
    let prom_url = format!("http://{}/", prom.addr);
    // The load goes to the leaking instance (its leak is per request);
    // the other one idles, as a replica the balancer spares would.
    let run = soakd_report(
        &[
            "run",
            &leaking.url(),
            "-c",
            "5",
            "-r",
            "50",
            "-d",
            "30s",
            "--metrics-listen",
            "off",
            "--prometheus",
            &prom_url,
            "--watch",
            "rss=process_resident_memory_bytes{job=\"soakd\"}",
            "--target-metrics-interval",
            "1s",
            "--threshold",
            "slope(rss)<=1MiB/h",
        ],
        90,
    );
    assert_eq!(run.status.code(), Some(3), "{}", run.stderr);
    let rss = series(&run.report, "rss");
    assert_eq!(rss.len(), 2, "{}", server(&run.report));
    let by = |inst: &str| {
        rss.iter()
            .find(|s| s["labels"]["instance"] == inst)
            .unwrap_or_else(|| panic!("no series of {inst}: {rss:?}"))
    };
    assert_eq!(by(&b)["slope"]["significant"], true, "{}", by(&b));
    let quiet = by(&a)["slope"]["slope"].as_f64().unwrap();
    assert!(
        quiet.abs() < 291.0 || by(&a)["slope"]["significant"] == false,
        "{}",
        by(&a)
    );
    let t = threshold(&run.report, "slope(rss)<=1MiB/h");
    assert_eq!(t["pass"], false);
    // A query Prometheus refuses, and one that answers nothing: exit 2
    // at start, in Prometheus's own words.
    for (watch, says) in [
        ("x=sum(rate(process_cpu_seconds_total[1m])", "Prometheus refused"),
        ("x=process_resident_memory_bytes{job=\"nope\"}", "answers no series now"),
    ] {
        let out = soakd(&[
            "run",
            &leaking.url(),
            "-c",
            "1",
            "-d",
            "2s",
            "--metrics-listen",
            "off",
            "--prometheus",
            &prom_url,
            "--watch",
            watch,
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{watch}: {err}");
        assert!(
            err.contains(says) && (err.contains("--prometheus") || err.contains("--watch x")),
            "{watch}: {err}"
        );
    }
    let note = t["note"].as_str().unwrap();
    assert!(
        note.contains(&format!("instance=\"{b}\"")) && !note.contains(&a),
        "{note}"
    );
}

/// An exporter that answers as it is told: 0 a good exposition, 1 never
/// (the connection held open), 2 an HTML page, 3 a 50 MB body, 4 a close
/// before any answer. It records the request heads it read.
struct BadExporter {
    addr: String,
    mode: Arc<AtomicU8>,
    heads: Arc<std::sync::Mutex<Vec<String>>>,
}

impl BadExporter {
    fn start() -> BadExporter {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let mode = Arc::new(AtomicU8::new(0));
        let heads = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (m, h) = (mode.clone(), heads.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming().take(10_000) {
                let Ok(mut conn) = conn else { continue };
                let (m, h) = (m.clone(), h.clone());
                std::thread::spawn(move || {
                    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).is_ok_and(|n| n == 1) {
                        head.push(byte[0]);
                    }
                    h.lock().unwrap().push(String::from_utf8_lossy(&head).into_owned());
                    match m.load(Ordering::Relaxed) {
                        0 => {
                            let body = "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes 1.5e+08\nprocess_open_fds 42\n";
                            let _ = write!(conn, "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
                        }
                        1 => {
                            // Held until the client gives up.
                            let _ = conn.read(&mut [0u8; 1]);
                        }
                        2 => {
                            let body = "<!doctype html><html><body>Login required</body></html>";
                            let _ = write!(conn, "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
                        }
                        3 => {
                            let _ = write!(conn, "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", 50 << 20);
                            let chunk = vec![b'x'; 64 << 10];
                            for _ in 0..800 {
                                if conn.write_all(&chunk).is_err() {
                                    break;
                                }
                            }
                        }
                        _ => {}
                    }
                });
            }
        });
        BadExporter { addr, mode, heads }
    }

    fn url(&self) -> String {
        format!("http://{}/metrics", self.addr)
    }

    fn set(&self, mode: u8) {
        self.mode.store(mode, Ordering::Relaxed);
    }
}

/// Exporters that go bad mid-soak (hang, answer an HTML page, answer
/// 50 MB, close at once): each failure counted by reason, said once in
/// the log (and once when the source answers again), the source stale
/// meanwhile; the soak's requests untouched (0 errors, the rate kept);
/// soakd's memory bounded (its peak within 40 MiB of what it held before:
/// the 16 MiB cap, not the 50 MB answer).
#[test]
fn exporters_that_go_bad_leave_the_soak_alone() {
    let target = util::BuiltinTarget::start(&[]);
    let bad = BadExporter::start();
    let metrics = format!("127.0.0.1:{}", free_port());
    let dir = TempDir::new("watch-bad");
    let report = dir.path().join("r.json");
    let child = spawn_soakd(&[
        "run",
        &target.url("/"),
        "-c",
        "20",
        "-r",
        "400",
        "-d",
        "30s",
        "--metrics-listen",
        &metrics,
        "--target-metrics",
        &bad.url(),
        "--target-metrics-interval",
        "1s",
        "--report",
        report.to_str().unwrap(),
    ]);
    let pid = child.id();
    wait_until(
        || scrape(&metrics).is_some_and(|m| util::metric_sum(&m, "soakd_watch_value") > 0.0),
        Duration::from_secs(10),
        "the exporter's values on /metrics",
    );
    let before = vm(pid, "VmRSS:").unwrap();
    let source = format!("source=\"{}\"", bad.url());
    let failures = |m: &std::collections::HashMap<String, f64>, reason: &str| {
        m.get(&format!(
            "soakd_watch_scrape_failures_total{{{source},reason=\"{reason}\"}}"
        ))
        .copied()
        .unwrap_or(0.0)
    };
    for (mode, reason) in [(1, "timeout"), (2, "malformed"), (3, "too_large"), (4, "malformed")] {
        bad.set(mode);
        let m = wait_for(
            || scrape(&metrics).filter(|m| failures(m, reason) >= if mode == 4 { 2.0 } else { 1.0 }),
            Duration::from_secs(10),
            &format!("a {reason} failure counted (mode {mode})"),
        );
        assert_eq!(
            m.get(&format!("soakd_watch_source_up{{{source}}}")),
            Some(&0.0),
            "stale: {m:?}"
        );
        assert!(
            !m.keys().any(|k| k.starts_with("soakd_watch_value{")),
            "no stale value is shown: {m:?}"
        );
    }
    let peak = vm(pid, "VmHWM:").unwrap();
    bad.set(0);
    wait_until(
        || scrape(&metrics).is_some_and(|m| m.get(&format!("soakd_watch_source_up{{{source}}}")) == Some(&1.0)),
        Duration::from_secs(10),
        "the source answering again",
    );
    let (status, stderr) = wait_with_timeout(child, 60);
    assert!(status.success(), "{stderr}");
    eprintln!(
        "soakd RSS {:.1} MiB before the bad exporter, peak {:.1} MiB",
        before / 1048576.0,
        peak / 1048576.0
    );
    assert!(peak < before + 40.0 * 1048576.0, "soakd grew from {before} to {peak}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(util::total_errors(&r), 0, "{}", r["errors"]);
    assert!(
        r["requests"]["per_second"].as_f64().unwrap() > 380.0,
        "{}",
        r["requests"]
    );
    let src = &server(&r)["sources"][0];
    for reason in ["timeout", "malformed", "too_large"] {
        assert!(src["failures"][reason].as_u64().unwrap_or(0) >= 1, "{reason}: {src}");
    }
    assert_eq!(src["stale"], false, "{src}");
    // Each failure said once per stale spell, and the return once.
    let said = stderr.matches("failed (").count();
    assert!((1..=4).contains(&said), "{said} lines: {stderr}");
    assert!(stderr.contains("answers again"), "{stderr}");
}

/// Bad input: exit 2 with the flag named and what to fix, before any
/// connection is opened (the target accepts none).
#[test]
fn bad_watch_input_exits_2_before_anything_opens() {
    let target = util::raw_server(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    let url = target.url("/");
    let closed = format!("http://127.0.0.1:{}/metrics", free_port());
    let dir = TempDir::new("watch-bad-input");
    let token = dir.path().join("empty-token");
    std::fs::write(&token, "\n").unwrap();
    let Some(leaky) = Leaky::start(&[]) else {
        return;
    };
    let lm = leaky.metrics_url();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--target-metrics", &closed], "--target-metrics"),
        (vec!["--target-metrics", "ftp://x/"], "only http:// and https://"),
        (vec!["--target-metrics", &lm, "--watch", "x=up{a=1}"], "double quotes"),
        (
            vec!["--target-metrics", &lm, "--watch", "x=sum(up)"],
            "needs --prometheus",
        ),
        (
            vec!["--target-metrics", &lm, "--watch", "heap=jvm_memory_used_bytes"],
            "not in its exposition",
        ),
        (
            vec!["--target-metrics", &lm, "--threshold", "slope(nope)<=1/h"],
            "no watch is named nope",
        ),
        (
            vec!["--target-metrics", &lm, "--threshold", "max(fds)<=1GiB"],
            "not bytes",
        ),
        (
            vec!["--target-metrics", &lm, "--target-metrics-interval", "100ms"],
            "every second at most",
        ),
        (
            vec![
                "--target-metrics",
                &lm,
                "--target-metrics-bearer-file",
                token.to_str().unwrap(),
            ],
            "empty",
        ),
        (
            vec!["--target-metrics", &lm, "--target-metrics-cacert", "/nonexistent.pem"],
            "https://",
        ),
        (
            vec!["--watch", "rss=process_resident_memory_bytes"],
            "no --target-metrics",
        ),
        (vec!["--prometheus", "http://127.0.0.1:9/"], "--watch"),
        (vec!["--target-pidfile", "/nonexistent/x.pid"], "--target-pidfile"),
        (vec!["--target-cgroup", "relative/path"], "absolute cgroup path"),
        (vec!["--target-cgroup", "/soakd-no-such-cgroup"], "no cgroup"),
        (
            vec!["--target-unit", "soakd-no-such.service"],
            "--target-unit soakd-no-such.service",
        ),
        (vec!["--threshold", "slope(rss)<=1MiB/h"], "no watch is named rss"),
    ];
    for (extra, says) in cases {
        let mut args = vec!["run", &url, "-c", "5", "-d", "2s", "--metrics-listen", "off"];
        args.extend(&extra);
        let out = soakd(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(says), "{extra:?}: wanted {says:?} in {err}");
    }
    assert_eq!(target.accepted(), 0, "nothing was opened");
    // Both sources: each watch must say which it reads.
    let cfg = dir.path().join("both.toml");
    std::fs::write(
        &cfg,
        format!(
            "metrics_listen = \"off\"\nduration = \"2s\"\ntarget_metrics = \"{lm}\"\nprometheus = \"http://127.0.0.1:9/\"\n\
             [[watch]]\nname = \"rss\"\nselect = \"process_resident_memory_bytes\"\n\
             [[workload]]\nurl = \"{url}\"\nconnections = 1\n"
        ),
    )
    .unwrap();
    let out = soakd(&["run", "--config", cfg.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("source = \\\"metrics\\\"") || err.contains("source = \"metrics\""),
        "{err}"
    );
    assert!(err.contains("both.toml:"), "names the file and line: {err}");
}

/// A bearer token and a header are sent with every scrape and never
/// printed: not in the log, the report, the HTML page or `soakd check`.
#[test]
fn secrets_are_sent_and_never_printed() {
    let target = util::BuiltinTarget::start(&[]);
    let bad = BadExporter::start();
    let dir = TempDir::new("watch-secret");
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cr3t-token-xyz\n").unwrap();
    let html = dir.path().join("r.html");
    let run = soakd_report(
        &[
            "run",
            &target.url("/"),
            "-c",
            "2",
            "-d",
            "3s",
            "--metrics-listen",
            "off",
            "--target-metrics",
            &bad.url(),
            "--target-metrics-interval",
            "1s",
            "--target-metrics-bearer-file",
            token.to_str().unwrap(),
            "--target-metrics-header",
            "X-Api-Key: k3y-abc",
            "--html-report",
            html.to_str().unwrap(),
        ],
        30,
    );
    assert!(run.status.success(), "{}", run.stderr);
    let heads = bad.heads.lock().unwrap().clone();
    assert!(heads.len() >= 2, "{heads:?}");
    assert!(
        heads
            .iter()
            .all(|h| h.contains("Authorization: Bearer s3cr3t-token-xyz\r\n") && h.contains("X-Api-Key: k3y-abc\r\n")),
        "{heads:?}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    for text in [run.stderr.as_str(), &run.report.to_string(), &page] {
        assert!(
            !text.contains("s3cr3t") && !text.contains("k3y-abc"),
            "a secret printed: {text}"
        );
    }
    let cfg = dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        format!(
            "target_metrics = \"{}\"\ntarget_metrics_bearer_file = \"token\"\n[target_metrics_headers]\n\"X-Api-Key\" = \"k3y-abc\"\n[[workload]]\nurl = \"{}\"\nconnections = 1\n",
            bad.url(),
            target.url("/")
        ),
    )
    .unwrap();
    let out = soakd(&["check", "--config", cfg.to_str().unwrap()]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("server watch") && text.contains(&bad.url()), "{text}");
    assert!(!text.contains("s3cr3t") && !text.contains("k3y-abc"), "{text}");
}

/// `--target-pidfile`: the server on this host followed across a restart
/// by the new PID in its pid file: rss, fds and cpu series, one restart,
/// the leak's slope within each side of it.
#[test]
fn a_pidfile_follows_the_server_across_a_restart() {
    let Some(mut leaky) = Leaky::start(&["--leak-bytes", "20000"]) else {
        return;
    };
    let dir = TempDir::new("watch-pidfile");
    let pidfile = dir.path().join("server.pid");
    std::fs::write(&pidfile, leaky.pid.to_string()).unwrap();
    let report = dir.path().join("r.json");
    let child = spawn_soakd(&[
        "run",
        &leaky.url(),
        "-c",
        "10",
        "-r",
        "100",
        "-d",
        "34s",
        "--metrics-listen",
        "off",
        "--target-pidfile",
        pidfile.to_str().unwrap(),
        "--target-metrics-interval",
        "1s",
        "--report",
        report.to_str().unwrap(),
    ]);
    std::thread::sleep(Duration::from_secs(15));
    let again = leaky.restart("20000");
    std::fs::write(&pidfile, again.pid.to_string()).unwrap();
    let (status, stderr) = wait_with_timeout(child, 60);
    assert!(status.success(), "{stderr}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    for watch in ["rss", "fds", "cpu"] {
        let s = series(&r, watch);
        assert_eq!(s.len(), 1, "{watch}: {}", server(&r));
        assert_eq!(s[0]["restarts"].as_array().map(Vec::len), Some(1), "{watch}: {}", s[0]);
    }
    let slope = series(&r, "rss")[0]["slope"]["slope"].as_f64().unwrap();
    assert!((1.2e6..3.0e6).contains(&slope), "{}", series(&r, "rss")[0]);
    assert!(
        stderr.contains(&format!("PID {} → {}", leaky.pid, again.pid)),
        "{stderr}"
    );
}

/// A cgroup made by the test (cgroup v1 here: memory and cpuacct), the
/// leaky server moved into it: its memory grows on `rss`, its CPU is
/// `cpu`; the server replaced by a new process in the cgroup is one
/// restart.
#[test]
fn a_cgroup_is_watched_across_a_restart() {
    if !need_root("a cgroup of the test's own") {
        return;
    }
    let name = format!("soakd-test-{}", std::process::id());
    let dirs: Vec<std::path::PathBuf> = ["memory", "cpuacct"]
        .iter()
        .map(|c| Path::new("/sys/fs/cgroup").join(c).join(&name))
        .collect();
    if !dirs
        .iter()
        .all(|d| d.parent().is_some_and(|p| p.join("cgroup.procs").exists()))
    {
        util::cannot_run("no cgroup v1 memory and cpuacct hierarchies under /sys/fs/cgroup");
        return;
    }
    struct Cleanup(Vec<std::path::PathBuf>);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            for d in &self.0 {
                let _ = std::fs::remove_dir(d);
            }
        }
    }
    for d in &dirs {
        std::fs::create_dir(d).expect("make the test's cgroup");
    }
    let _cleanup = Cleanup(dirs.clone());
    let join = |pid: u32| {
        for d in &dirs {
            std::fs::write(d.join("cgroup.procs"), pid.to_string()).expect("move into the cgroup");
        }
    };
    let Some(mut leaky) = Leaky::start(&["--leak-bytes", "20000"]) else {
        return;
    };
    join(leaky.pid);
    let dir = TempDir::new("watch-cgroup");
    let report = dir.path().join("r.json");
    let cgroup = format!("/sys/fs/cgroup/memory/{name}");
    let child = spawn_soakd(&[
        "run",
        &leaky.url(),
        "-c",
        "10",
        "-r",
        "100",
        "-d",
        "30s",
        "--metrics-listen",
        "off",
        "--target-cgroup",
        &cgroup,
        "--target-metrics-interval",
        "1s",
        "--threshold",
        "slope(rss)<=1MiB/h",
        "--report",
        report.to_str().unwrap(),
    ]);
    std::thread::sleep(Duration::from_secs(14));
    let again = leaky.restart("20000");
    join(again.pid);
    let (status, stderr) = wait_with_timeout(child, 60);
    assert_eq!(status.code(), Some(3), "the leak fails slope(rss): {stderr}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let rss = series(&r, "rss");
    assert_eq!(rss.len(), 1, "{}", server(&r));
    assert_eq!(rss[0]["source"], cgroup.as_str());
    assert_eq!(rss[0]["restarts"].as_array().map(Vec::len), Some(1), "{}", rss[0]);
    assert!(stderr.contains("every process replaced"), "{stderr}");
    assert!(series(&r, "cpu")[0]["max"].as_f64().unwrap() > 0.0, "{}", server(&r));
    let t = threshold(&r, "slope(rss)<=1MiB/h");
    assert!(t["note"].as_str().unwrap().starts_with("failed by rss"), "{t}");
    drop(again);
}

/// Debian's process-exporter (a real exporter from the distribution)
/// watching a server that leaks a descriptor every 10 requests:
/// `slope(fds)` is significant and fails, the other process group's does
/// not.
#[test]
fn process_exporter_shows_a_descriptor_leak() {
    let bin = Path::new("/usr/bin/prometheus-process-exporter");
    if !bin.is_file() {
        util::cannot_run("prometheus-process-exporter is not installed (scripts/test.sh installs the Debian package)");
        return;
    }
    let Some(leaky) = Leaky::start(&["--fd-leak-every", "10", "--tag", "fdleaker"]) else {
        return;
    };
    let dir = TempDir::new("watch-procexp");
    let config = dir.path().join("groups.yml");
    std::fs::write(
        &config,
        "process_names:\n  - name: fdleaker\n    cmdline: ['fdleaker']\n",
    )
    .unwrap();
    let port = free_port();
    let mut exporter = Command::new(bin)
        .arg(format!("-config.path={}", config.display()))
        .arg(format!("-web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start process-exporter");
    let url = format!("http://127.0.0.1:{port}/metrics");
    wait_until(
        || {
            util::port_accepts(&format!("127.0.0.1:{port}"))
                && util::http_get(&format!("127.0.0.1:{port}"), "/metrics")
                    .contains("namedprocess_namegroup_open_filedesc")
        },
        Duration::from_secs(20),
        "process-exporter serving its groups",
    );
    let run = soakd_report(
        &[
            "run",
            &leaky.url(),
            "-c",
            "10",
            "-r",
            "100",
            "-d",
            "30s",
            "--metrics-listen",
            "off",
            "--target-metrics",
            &url,
            "--target-metrics-interval",
            "1s",
            "--watch",
            "fds=namedprocess_namegroup_open_filedesc{groupname=\"fdleaker\"}",
            "--threshold",
            "slope(fds)<=100/h",
        ],
        90,
    );
    let _ = exporter.kill();
    let _ = exporter.wait();
    assert_eq!(run.status.code(), Some(3), "{}", run.stderr);
    let fds = series(&run.report, "fds");
    assert_eq!(fds.len(), 1, "{}", server(&run.report));
    let slope = fds[0]["slope"]["slope"].as_f64().unwrap();
    // 100 requests/s, one descriptor every 10: 10 a second.
    assert!((8.0..12.0).contains(&slope), "{}", fds[0]);
    assert_eq!(fds[0]["slope"]["significant"], true);
}
