//! The Prometheus endpoint against live runs: promtool-clean exposition,
//! every contract metric present from the start, monotonic counters,
//! counters equal to the final report, health, hostile clients, the target
//! process metrics and `soakd status`.

mod util;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::Value;
use soakd::statuscmd::exposition::{self, Sample};
use util::{
    BuiltinTarget, Nginx, free_port, heavy_lock, raw_server, soakd, spawn_soakd, temp_path, wait_for, wait_for_handler,
    wait_until, wait_with_timeout,
};

const CONTRACT: &[&str] = &[
    "soakd_connections",
    "soakd_connections_desired",
    "soakd_connections_opened_total",
    "soakd_connections_closed_total",
    "soakd_requests_sent_total",
    "soakd_responses_total",
    "soakd_check_failures_total",
    "soakd_errors_total",
    "soakd_request_duration_seconds_bucket",
    "soakd_connect_duration_seconds_bucket",
    "soakd_schedule_lag_seconds_bucket",
    "soakd_sent_bytes_total",
    "soakd_received_bytes_total",
    "soakd_request_duration_window_seconds",
    "soakd_build_info",
    "soakd_shard_info",
    "soakd_healthy",
    "process_resident_memory_bytes",
    "process_cpu_seconds_total",
    "process_open_fds",
    "process_max_fds",
];

/// GET `path` from `addr`: (status, body, time taken).
fn get(addr: &str, path: &str) -> (u16, String, Duration) {
    request(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
    )
}

fn request(addr: &str, raw: &str) -> (u16, String, Duration) {
    let t = Instant::now();
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(raw.as_bytes()).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap_or_else(|e| panic!("read {addr}: {e}"));
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body, t.elapsed())
}

/// Series → value, from exposition text, read with soakd's own parser
/// (`soakd status` uses the same one). The keys are [`Sample::series`]:
/// `name{label="value",...}` as soakd writes it, so [`one`] can look up a
/// series written out by hand. Panics when the text is not an exposition.
fn parse(text: &str) -> HashMap<String, f64> {
    exposition::parse(text)
        .unwrap_or_else(|e| panic!("not Prometheus text ({e}):\n{text}"))
        .into_iter()
        .map(|s: Sample| (s.series(), s.value))
        .collect()
}

/// The sum of every series of metric `name` (0 when there is none).
fn sum(m: &HashMap<String, f64>, name: &str) -> f64 {
    m.iter().filter(|(k, _)| metric_name(k) == name).map(|(_, v)| v).sum()
}

/// The value of one series, by its [`Sample::series`] key; panics when it
/// is missing.
fn one(m: &HashMap<String, f64>, series: &str) -> f64 {
    *m.get(series).unwrap_or_else(|| panic!("{series} missing"))
}

/// The metric name of a [`Sample::series`] key: everything before the
/// labels (a metric name never contains `{`).
fn metric_name(series: &str) -> &str {
    series.split('{').next().unwrap_or(series)
}

fn promtool_check(text: &str) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus) must be installed");
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let findings = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && findings.trim().is_empty(),
        "promtool check metrics: {findings}"
    );
}

/// Waits until the endpoint answers (soakd binds it before connecting).
fn wait_up(addr: &str) {
    wait_until(
        || TcpStream::connect(addr).is_ok(),
        Duration::from_secs(10),
        &format!("the metrics endpoint {addr} to accept connections"),
    );
}

#[test]
fn exposition_is_clean_complete_and_monotonic_under_5000_connections() {
    let _heavy = heavy_lock();
    let nginx = Nginx::start("", "");
    let metrics = format!("127.0.0.1:{}", free_port());
    let url = nginx.url("/");
    let child = spawn_soakd(&[
        "run",
        &url,
        "-c",
        "5000",
        "--ramp",
        "5000",
        "-i",
        "1s",
        "-d",
        "7s",
        "--metrics-listen",
        &metrics,
    ]);
    wait_up(&metrics);
    // Right away: every series is there, with zeros.
    let (status, first, _) = get(&metrics, "/metrics");
    assert_eq!(status, 200);
    let m0 = parse(&first);
    for name in CONTRACT {
        assert!(
            m0.keys().any(|k| metric_name(k) == *name),
            "{name} missing from the first scrape"
        );
    }
    let target = nginx.addr();
    for kind in [
        "connect_refused",
        "connect_timeout",
        "connect_other",
        "addr_unavailable",
        "fd_limit",
        "reset",
        "eof",
        "timeout",
        "protocol",
    ] {
        one(
            &m0,
            &format!("soakd_errors_total{{target=\"{target}\",kind=\"{kind}\"}}"),
        );
    }
    // Three later scrapes, each taken once requests have moved on since the
    // one before (so "never goes down" is checked across real change), and
    // the last once all 5000 connections are open.
    let open = format!("soakd_connections{{target=\"{target}\",state=\"open\"}}");
    let mut previous = m0;
    for i in 0..3 {
        let sent_before = sum(&previous, "soakd_requests_sent_total");
        let (text, now) = wait_for(
            || {
                let (status, text, _) = get(&metrics, "/metrics");
                assert_eq!(status, 200);
                let now = parse(&text);
                let moved = sum(&now, "soakd_requests_sent_total") > sent_before;
                let ramped = i < 2 || now.get(&open) == Some(&5000.0);
                (moved && ramped).then_some((text, now))
            },
            Duration::from_secs(6),
            &format!(
                "scrape {} with more requests sent than {sent_before} (and, last, 5000 open)",
                i + 1
            ),
        );
        promtool_check(&text);
        for (series, v) in &now {
            let counter = series.contains("_total") || series.contains("_bucket") || series.contains("_count");
            if counter && let Some(before) = previous.get(series) {
                assert!(v >= before, "{series} went down: {before} -> {v}");
            }
        }
        previous = now;
    }
    assert_eq!(one(&previous, &open), 5000.0);
    assert_eq!(get(&metrics, "/healthz").0, 200);
    assert_eq!(one(&previous, "soakd_healthy"), 1.0);
    assert_eq!(get(&metrics, "/nothing-here").0, 404);
    assert_eq!(
        request(
            &metrics,
            "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
        )
        .0,
        405
    );
    let (status, stderr) = wait_with_timeout(child, 30);
    assert!(status.success(), "{stderr}");
}

/// With `--metrics-linger`, the last scrape after the run sees the final
/// counters, and they are exactly the report's.
#[test]
fn final_counters_equal_the_report() {
    let target = BuiltinTarget::start(&[]);
    let metrics = format!("127.0.0.1:{}", free_port());
    let report = temp_path("final", "json");
    let url = target.url("/");
    let child = spawn_soakd(&[
        "run",
        &url,
        "-c",
        "20",
        "-n",
        "5000",
        "--metrics-listen",
        &metrics,
        "--metrics-linger",
        "3s",
        "--report",
        report.to_str().unwrap(),
    ]);
    wait_up(&metrics);
    let shutdown = format!(
        "soakd_connections_closed_total{{target=\"{}\",reason=\"shutdown\"}}",
        target.addr
    );
    let last = wait_for(
        || {
            let m = parse(&get(&metrics, "/metrics").1);
            (sum(&m, "soakd_responses_total") >= 5000.0 && one(&m, &shutdown) > 0.0).then_some(m)
        },
        Duration::from_secs(30),
        "the final counters (5000 responses, connections closed at shutdown) in a lingering scrape",
    );
    let (status, stderr) = wait_with_timeout(child, 30);
    assert!(status.success(), "{stderr}");
    let rep: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let _ = std::fs::remove_file(&report);
    let r = |p: &str| rep.pointer(p).and_then(Value::as_u64).unwrap() as f64;
    assert_eq!(sum(&last, "soakd_requests_sent_total"), r("/requests/sent"));
    assert_eq!(sum(&last, "soakd_requests_failed_total"), r("/requests/failed"));
    assert_eq!(sum(&last, "soakd_requests_missed_total"), r("/requests/missed"));
    assert_eq!(sum(&last, "soakd_requests_in_flight"), r("/requests/in_flight_at_end"));
    assert_eq!(sum(&last, "soakd_responses_total"), r("/requests/completed"));
    assert_eq!(sum(&last, "soakd_connections_opened_total"), r("/connections/opened"));
    assert_eq!(sum(&last, "soakd_connections_closed_total"), r("/connections/closed"));
    assert_eq!(sum(&last, "soakd_errors_total"), 0.0);
    assert_eq!(sum(&last, "soakd_sent_bytes_total"), r("/bytes/sent"));
    assert_eq!(sum(&last, "soakd_received_bytes_total"), r("/bytes/received"));
    assert_eq!(
        sum(&last, "soakd_request_duration_seconds_count"),
        r("/latency_seconds/count")
    );
    for code in ["1xx", "2xx", "3xx", "4xx", "5xx"] {
        // One request (`GET /`): its responses are the workload's.
        let series = format!(
            "soakd_responses_total{{target=\"{}\",request=\"GET /\",code=\"{code}\"}}",
            target.addr
        );
        assert_eq!(one(&last, &series), r(&format!("/responses/{code}")), "{code}");
    }
}

/// `sent = completed + failed + in flight` holds in every scrape, not just
/// at the end: a worker flushes its counters and its in-flight gauge
/// together and a snapshot adds whole flushes, so no scrape can catch a
/// request between two of them. The target answers after 20 ms and resets
/// every 100th request, so `in flight` and `failed` are not zero while we
/// look (the test checks that too, or it would prove nothing), and two
/// worker threads each contribute their flushes.
#[test]
fn accounting_holds_in_every_scrape() {
    let target = BuiltinTarget::start(&["--delay", "20ms", "--fault", "reset@100"]);
    let metrics = format!("127.0.0.1:{}", free_port());
    let url = target.url("/");
    let mut child = spawn_soakd(&[
        "run",
        &url,
        "-c",
        "100",
        "-r",
        "2000",
        "-t",
        "2",
        "-d",
        "5s",
        "--metrics-listen",
        &metrics,
    ]);
    wait_up(&metrics);
    let (mut scrapes, mut with_in_flight, mut with_failed) = (0, 0, 0);
    while child.try_wait().unwrap().is_none() {
        // The endpoint closes when the run ends; a refused last scrape is fine.
        let Ok(mut s) = TcpStream::connect(&metrics) else { break };
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut raw = Vec::new();
        if s.read_to_end(&mut raw).is_err() || !raw.starts_with(b"HTTP/1.1 200") {
            break;
        }
        let raw = String::from_utf8_lossy(&raw);
        let (_, body) = raw.split_once("\r\n\r\n").expect("a complete response head");
        let m = parse(body);
        let sent = sum(&m, "soakd_requests_sent_total");
        let completed = sum(&m, "soakd_responses_total");
        let failed = sum(&m, "soakd_requests_failed_total");
        let in_flight = sum(&m, "soakd_requests_in_flight");
        assert_eq!(
            sent,
            completed + failed + in_flight,
            "scrape {scrapes}: sent {sent} != completed {completed} + failed {failed} + in flight {in_flight}"
        );
        scrapes += 1;
        with_in_flight += usize::from(in_flight > 0.0);
        with_failed += usize::from(failed > 0.0);
        // The spacing of the samples, not a wait for a state: the invariant
        // must hold in every scrape, ~10 per second until the run ends.
        sleep(Duration::from_millis(100));
    }
    let (status, stderr) = wait_with_timeout(child, 30);
    assert!(status.success(), "{stderr}");
    assert!(scrapes >= 10, "only {scrapes} scrapes");
    assert!(
        with_in_flight * 2 >= scrapes && with_failed * 2 >= scrapes,
        "{scrapes} scrapes, {with_in_flight} with requests in flight, {with_failed} with failures: the check proved little"
    );
}
/// 20 scrapes during a 10,000-connection closed-loop run all succeed and
/// see every connection open. How fast a scrape is served at this size is
/// a benchmark (`MODE=scrape bench/compare.sh`), not a test: timing on a
/// shared machine is noise.
#[test]
fn scrapes_during_a_10000_connection_closed_loop_run() {
    let _heavy = heavy_lock();
    let nginx = Nginx::start("", "");
    let metrics = format!("127.0.0.1:{}", free_port());
    let url = nginx.url("/");
    let child = spawn_soakd(&[
        "run",
        &url,
        "-c",
        "10000",
        "--ramp",
        "10000",
        "-d",
        "9s",
        "--metrics-listen",
        &metrics,
    ]);
    wait_up(&metrics);
    let open = format!("soakd_connections{{target=\"{}\",state=\"open\"}}", nginx.addr());
    wait_until(
        || parse(&get(&metrics, "/metrics").1).get(&open) == Some(&10000.0),
        Duration::from_secs(8),
        "10,000 connections open (soakd's metrics)",
    );
    for i in 0..20 {
        let (status, text, _) = get(&metrics, "/metrics");
        assert_eq!(status, 200, "scrape {i}");
        let m = parse(&text);
        assert_eq!(one(&m, &open), 10000.0, "scrape {i}");
        assert!(sum(&m, "soakd_requests_sent_total") > 0.0, "scrape {i}");
    }
    let (status, stderr) = wait_with_timeout(child, 40);
    assert!(status.success(), "{stderr}");
}

/// Garbage, a 1 MB head, 200 idle connections and a slowloris on the
/// metrics port: a normal scrape still works and the run is unaffected.
#[test]
fn hostile_clients_on_the_metrics_port() {
    let target = BuiltinTarget::start(&[]);
    let metrics = format!("127.0.0.1:{}", free_port());
    let report = temp_path("hostile", "json");
    let url = target.url("/");
    let child = spawn_soakd(&[
        "run",
        &url,
        "-c",
        "50",
        "-i",
        "10ms",
        "-d",
        "8s",
        "--metrics-listen",
        &metrics,
        "--report",
        report.to_str().unwrap(),
    ]);
    wait_up(&metrics);
    let idle: Vec<TcpStream> = (0..200).filter_map(|_| TcpStream::connect(&metrics).ok()).collect();
    let mut garbage = TcpStream::connect(&metrics).unwrap();
    let _ = garbage.write_all(b"\x00\x01\x02 not http at all\r\n\r\n");
    let mut huge = TcpStream::connect(&metrics).unwrap();
    let mut head = b"GET /metrics HTTP/1.1\r\nX-Big: ".to_vec();
    head.resize(1 << 20, b'a');
    let _ = huge.write_all(&head);
    let mut slow = TcpStream::connect(&metrics).unwrap();
    let _ = slow.write_all(b"GET /metr");
    for _ in 0..3 {
        let (status, text, _) = get(&metrics, "/metrics");
        assert_eq!(status, 200);
        assert!(text.contains("soakd_connections_desired"));
        let _ = slow.write_all(b"i");
        // The slowloris under test: one byte every 500 ms.
        sleep(Duration::from_millis(500));
    }
    drop(idle);
    let (status, stderr) = wait_with_timeout(child, 30);
    assert!(status.success(), "{stderr}");
    let rep: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let _ = std::fs::remove_file(&report);
    // 50 connections × 100/s for 8 s: the workers kept their schedule.
    let completed = rep["requests"]["completed"].as_u64().unwrap();
    assert!(completed >= 50 * 100 * 7, "completed {completed}");
    assert_eq!(util::total_errors(&rep), 0);
}

#[test]
fn target_pids_and_status_summary() {
    let nginx = Nginx::start("", "");
    let metrics = format!("127.0.0.1:{}", free_port());
    let url = nginx.url("/");
    let mut args: Vec<String> = [
        "run",
        &url,
        "-c",
        "100",
        "-i",
        "100ms",
        "-d",
        "6s",
        "--metrics-listen",
        &metrics,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut pids = vec![nginx.master_pid];
    pids.extend(nginx.worker_pids());
    for pid in &pids {
        args.push("--target-pid".into());
        args.push(pid.to_string());
    }
    let child = spawn_soakd(&args.iter().map(String::as_str).collect::<Vec<_>>());
    wait_up(&metrics);
    let rss_series = |pid: &u32| {
        format!(
            "soakd_target_process_resident_memory_bytes{{target=\"{}\",pid=\"{pid}\"}}",
            nginx.addr()
        )
    };
    let open = format!("soakd_connections{{target=\"{}\",state=\"open\"}}", nginx.addr());
    let m = wait_for(
        || {
            let m = parse(&get(&metrics, "/metrics").1);
            let sampled = pids.iter().all(|pid| m.get(&rss_series(pid)).is_some_and(|&v| v > 0.0));
            (sampled && m.get(&open) == Some(&100.0)).then_some(m)
        },
        Duration::from_secs(5),
        "100 connections open and every target pid's memory sampled",
    );
    for pid in &pids {
        let rss = one(
            &m,
            &format!(
                "soakd_target_process_resident_memory_bytes{{target=\"{}\",pid=\"{pid}\"}}",
                nginx.addr()
            ),
        );
        assert!(rss > 100_000.0, "pid {pid} rss {rss}");
        one(
            &m,
            &format!(
                "soakd_target_process_open_fds{{target=\"{}\",pid=\"{pid}\"}}",
                nginx.addr()
            ),
        );
    }
    let out = soakd(&["status", "--metrics", &format!("http://{metrics}/metrics")]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains(&format!("target {}", nginx.addr())), "{text}");
    assert!(text.contains("open 100 / desired 100"), "{text}");
    assert!(text.contains("p99"), "{text}");
    let (status, stderr) = wait_with_timeout(child, 30);
    assert!(status.success(), "{stderr}");
}

#[test]
fn status_of_nothing_exits_2() {
    let out = soakd(&[
        "status",
        "--metrics",
        &format!("http://127.0.0.1:{}/metrics", free_port()),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read soakd metrics"));
}

/// A metrics port that cannot be bound stops the run before any
/// connection is opened.
#[test]
fn unbindable_metrics_port_exits_2_before_connecting() {
    let server = raw_server(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let url = server.url("/");
    let out = soakd(&["run", &url, "-c", "5", "-d", "2s", "--metrics-listen", &addr]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--metrics-listen"), "{stderr}");
    assert_eq!(server.accepted(), 0);
}

/// `--hdr-log` writes a log the HdrHistogram tools read: a header and one
/// tagged interval per `--hdr-log-interval` (default 10 s; here: the final partial one).
#[test]
fn hdr_interval_log_is_written() {
    let target = BuiltinTarget::start(&[]);
    let log = temp_path("latency", "hlog");
    let url = target.url("/");
    let out = soakd(&[
        "run",
        &url,
        "-c",
        "10",
        "-i",
        "10ms",
        "-d",
        "2s",
        "--metrics-listen",
        "off",
        "--hdr-log",
        log.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    assert!(text.contains("#[StartTime:"), "{text}");
    let intervals: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with(&format!("Tag={},", target.addr)))
        .collect();
    assert_eq!(intervals.len(), 1, "{text}");
    assert!(intervals[0].contains(",HISTF"), "{text}");
}

/// SIGHUP re-reads the config: an unchanged workload keeps its
/// connections, a new one starts, a removed one drains, and an invalid file
/// leaves the running plan alone; the reload counters say which happened.
#[test]
fn sighup_reloads_the_config_without_dropping_unchanged_workloads() {
    let target = BuiltinTarget::start(&[]);
    let metrics = format!("127.0.0.1:{}", free_port());
    let dir = util::TempDir::new("reload");
    let path = dir.path().join("soak.toml");
    let workload = |name: &str, conns: u32| {
        format!(
            "[[workload]]\nname = \"{name}\"\nurl = \"{}\"\nconnections = {conns}\ninterval = \"100ms\"\n",
            target.url("/")
        )
    };
    std::fs::write(
        &path,
        format!(
            "metrics_listen = \"{metrics}\"\n{}{}",
            workload("a", 10),
            workload("c", 5)
        ),
    )
    .unwrap();
    let report = temp_path("reload", "json");
    let child = spawn_soakd(&[
        "run",
        "--config",
        path.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    wait_up(&metrics);
    let series = |m: &HashMap<String, f64>, name: &str, target: &str, extra: &str| {
        one(m, &format!("{name}{{target=\"{target}\"{extra}}}"))
    };
    let open = ",state=\"open\"";
    wait_until(
        || {
            let m = parse(&get(&metrics, "/metrics").1);
            series(&m, "soakd_connections", "a", open) == 10.0 && series(&m, "soakd_connections", "c", open) == 5.0
        },
        Duration::from_secs(10),
        "workloads a (10) and c (5) ramped up",
    );
    // SIGHUP's default action ends the process.
    wait_for_handler(child.id(), "HUP");

    std::fs::write(
        &path,
        format!(
            "metrics_listen = \"{metrics}\"\n{}{}",
            workload("a", 10),
            workload("b", 5)
        ),
    )
    .unwrap();
    util::signal(child.id(), "HUP");
    let b_open = format!("soakd_connections{{target=\"b\"{open}}}");
    let c_open = format!("soakd_connections{{target=\"c\"{open}}}");
    let m = wait_for(
        || {
            let m = parse(&get(&metrics, "/metrics").1);
            let done = m.get("soakd_config_reloads_total{result=\"success\"}") == Some(&1.0)
                && m.get(&b_open) == Some(&5.0)
                && m.get(&c_open) == Some(&0.0);
            done.then_some(m)
        },
        Duration::from_secs(10),
        "the reload counted, b's 5 connections open and c's drained",
    );
    assert_eq!(series(&m, "soakd_connections", "a", open), 10.0);
    assert_eq!(
        series(&m, "soakd_connections_opened_total", "a", ""),
        10.0,
        "a's connections were kept"
    );
    assert_eq!(
        sum(&m, "soakd_connections_closed_total")
            - series(&m, "soakd_connections_closed_total", "c", ",reason=\"churn\""),
        0.0
    );
    assert_eq!(series(&m, "soakd_connections", "b", open), 5.0);
    assert_eq!(series(&m, "soakd_connections_desired", "c", ""), 0.0);
    assert_eq!(series(&m, "soakd_connections", "c", open), 0.0);
    assert_eq!(one(&m, "soakd_config_reloads_total{result=\"success\"}"), 1.0);

    std::fs::write(&path, "[[workload]]\nurl = 42\n").unwrap();
    util::signal(child.id(), "HUP");
    let m = wait_for(
        || {
            let m = parse(&get(&metrics, "/metrics").1);
            (m.get("soakd_config_reloads_total{result=\"failure\"}") == Some(&1.0)).then_some(m)
        },
        Duration::from_secs(10),
        "the failed reload counted",
    );
    assert_eq!(one(&m, "soakd_config_reloads_total{result=\"failure\"}"), 1.0);
    assert_eq!(series(&m, "soakd_connections", "a", open), 10.0);
    assert_eq!(series(&m, "soakd_connections", "b", open), 5.0);

    util::signal(child.id(), "TERM");
    let (status, stderr) = wait_with_timeout(child, 20);
    assert!(status.success(), "{stderr}");
    assert!(
        stderr.contains("config reloaded: b added; c removed (draining)"),
        "{stderr}"
    );
    assert!(stderr.contains("config reload failed"), "{stderr}");
    let rep: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let _ = std::fs::remove_file(&report);
    let names: Vec<&str> = rep["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "c", "b"]);
}
