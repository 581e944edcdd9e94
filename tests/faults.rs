//! Faults of the target: a stalled server (coordinated omission), a killed
//! and restarted server, a refused port.

mod util;

use std::thread::sleep;
use std::time::Duration;

use serde_json::Value;
use util::{
    BuiltinTarget, Nginx, field as u, field_f64 as f, free_port, heavy_lock, metric_sum, scrape, spawn_soakd,
    stall_then_stop, temp_path, wait_until, wait_with_timeout,
};

fn read_report(path: &std::path::Path, stderr: &str) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("no report ({e})\n{stderr}"));
    let _ = std::fs::remove_file(path);
    serde_json::from_str(&text).unwrap()
}

/// The coordinated-omission proof: nginx is frozen for 1 s in the middle of
/// an open-loop run. Requests due during the freeze are measured from when
/// they were due, so the tail shows the stall (p99 ≥ 0.7 s) while the median
/// stays low.
#[test]
fn open_loop_latency_counts_a_stall_from_due_time() {
    let _heavy = heavy_lock();
    let nginx = Nginx::start("", "");
    let report = temp_path("co", "json");
    let url = nginx.url("/");
    let metrics = format!("127.0.0.1:{}", free_port());
    let child = spawn_soakd(&[
        "run",
        &url,
        "-c",
        "50",
        "--ramp",
        "100000",
        "-r",
        "500",
        "-d",
        "60s",
        "--metrics-listen",
        &metrics,
        "--report",
        report.to_str().unwrap(),
    ]);
    wait_until(
        || scrape(&metrics).is_some_and(|m| metric_sum(&m, "soakd_responses_total") >= 1000.0),
        Duration::from_secs(20),
        "2 s of responses from nginx (1,000)",
    );
    // The stall under test: nginx stays frozen for 1 s, and p99 must show it.
    stall_then_stop(&child, || nginx.stop_workers(), || nginx.cont_workers());
    let (status, stderr) = wait_with_timeout(child, 30);
    assert!(status.success(), "{stderr}");
    let rep = read_report(&report, &stderr);
    let p99 = f(&rep, "/latency_seconds/p99");
    let p50 = f(&rep, "/latency_seconds/p50");
    assert!(p99 >= 0.7, "p99 {p99}: the stall was not measured");
    assert!(p50 < 0.1, "p50 {p50}");
    // The schedule was kept: about 500/s, stall included.
    let per_second = f(&rep, "/requests/per_second");
    assert!(per_second >= 450.0, "{per_second}/s: {}", rep["requests"]);
    assert_eq!(u(&rep, "/errors/timeout"), 0);
}

/// The target dies with requests in flight and comes back 1.5 s later:
/// in-flight requests fail as `eof`/`reset`, reconnects are refused and
/// back off, and every slot is connected again by the end.
#[test]
fn killed_and_restarted_target_is_classified_and_recovered() {
    let _heavy = heavy_lock();
    // A 500 ms response delay keeps a request in flight on every connection.
    let mut target = BuiltinTarget::start(&["--delay", "500ms"]);
    let addr = target.addr.clone();
    let report = temp_path("restart", "json");
    let url = target.url("/");
    let metrics = format!("127.0.0.1:{}", free_port());
    let child = spawn_soakd(&[
        "run",
        &url,
        "-c",
        "200",
        "--ramp",
        "10000",
        "-d",
        "9s",
        "--metrics-listen",
        &metrics,
        "--report",
        report.to_str().unwrap(),
    ]);
    wait_until(
        || scrape(&metrics).is_some_and(|m| metric_sum(&m, "soakd_requests_in_flight") == 200.0),
        Duration::from_secs(10),
        "a request in flight on each of the 200 connections (soakd's metrics)",
    );
    target.kill();
    // The outage under test: the target stays away for 1.5 s, long enough
    // for several refused reconnects and their backoff.
    sleep(Duration::from_millis(1500));
    let _back = BuiltinTarget::start_on(&addr, &["--delay", "500ms"]);
    let (status, stderr) = wait_with_timeout(child, 40);
    assert!(status.success(), "{stderr}");
    let rep = read_report(&report, &stderr);
    let refused = u(&rep, "/errors/connect_refused");
    let lost = u(&rep, "/errors/eof") + u(&rep, "/errors/reset");
    assert!(lost >= 100, "in-flight requests lost: {lost}; {:#}", rep["errors"]);
    assert!(refused >= 1, "{:#}", rep["errors"]);
    // Backoff (100 ms doubling) bounds the attempts: 200 slots × ~5 tries
    // in a 1.5 s outage. A busy loop would make millions.
    assert!(refused <= 200 * 8, "{refused} refused connects: reconnect storm");
    assert_eq!(u(&rep, "/connections/open_at_end"), 200, "{:#}", rep["connections"]);
    assert_eq!(u(&rep, "/errors/protocol"), 0);
    assert_eq!(
        u(&rep, "/requests/sent"),
        u(&rep, "/requests/completed") + u(&rep, "/requests/failed") + u(&rep, "/requests/in_flight_at_end"),
        "accounting: {:#}",
        rep["requests"]
    );
}

/// Nobody listening: every attempt is `connect_refused`, with backoff, and
/// the run still ends on time with exit 0.
#[test]
fn refused_connections_back_off() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/");
    let r = util::soakd_report(&["run", &url, "-c", "20", "-d", "3s", "--metrics-listen", "off"], 30);
    assert!(r.status.success(), "{}", r.stderr);
    let refused = u(&r.report, "/errors/connect_refused");
    // 20 slots, backoff 100, 200, 400, 800, 1600 ms (half jittered): at most
    // about 7 attempts each in 3 s.
    assert!((20..=20 * 8).contains(&refused), "refused {refused}");
    assert_eq!(u(&r.report, "/connections/opened"), 0);
    assert!(r.report["connections"]["ramp_seconds"].is_null());
}
