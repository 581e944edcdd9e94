//! Load models against a real nginx: holding thousands of connections,
//! pacing, open-loop rate, request counts, pipelining and churn.
//!
//! Figures asserted here are counts with tolerances derived from the plan
//! (never wall-clock speeds), so they hold on a loaded CI machine.

mod util;

use util::{BuiltinTarget, Nginx, field as u, heavy_lock, soakd_report, total_errors};

fn within(got: u64, want: f64, tolerance: f64) -> bool {
    (got as f64 - want).abs() <= want * tolerance
}

#[test]
fn holds_5000_connections_against_nginx_without_errors() {
    let _heavy = heavy_lock();
    let nginx = Nginx::start("", "");
    let url = nginx.url("/");
    let r = soakd_report(
        &[
            "run",
            &url,
            "-c",
            "5000",
            "--ramp",
            "5000",
            "-i",
            "1s",
            "-d",
            "6s",
            "--metrics-listen",
            "off",
        ],
        60,
    );
    assert!(r.status.success(), "exit {}\n{}", r.status, r.stderr);
    let rep = &r.report;
    assert_eq!(total_errors(rep), 0, "{:#}", rep["errors"]);
    assert_eq!(u(rep, "/connections/peak_open"), 5000);
    assert_eq!(u(rep, "/connections/open_at_end"), 5000);
    assert_eq!(u(rep, "/connections/opened"), 5000);
    assert!(rep["connections"]["ramp_seconds"].as_f64().unwrap() < 5.0);
    // Every connection sent about one request per second once open.
    let completed = u(rep, "/requests/completed");
    assert!(completed >= 5000 * 4, "completed {completed}");
    assert_eq!(u(rep, "/responses/2xx"), completed);
}

#[test]
fn interval_pacing_sends_connections_times_duration_over_interval() {
    let _heavy = heavy_lock();
    let nginx = Nginx::start("", "");
    let url = nginx.url("/");
    let r = soakd_report(
        &[
            "run",
            &url,
            "-c",
            "200",
            "--ramp",
            "100000",
            "-i",
            "100ms",
            "-d",
            "10s",
            "--metrics-listen",
            "off",
        ],
        60,
    );
    assert!(r.status.success(), "{}", r.stderr);
    let completed = u(&r.report, "/requests/completed");
    // 200 connections × 10 s / 100 ms.
    assert!(
        within(completed, 20_000.0, 0.02),
        "completed {completed}, want 20000 ±2%"
    );
    assert_eq!(total_errors(&r.report), 0);
    assert!(r.report["schedule_lag_seconds"]["count"].as_u64().unwrap() >= completed);
}

#[test]
fn open_loop_rate_is_kept() {
    let _heavy = heavy_lock();
    let nginx = Nginx::start("", "");
    let url = nginx.url("/");
    let r = soakd_report(
        &[
            "run",
            &url,
            "-c",
            "100",
            "--ramp",
            "100000",
            "-r",
            "2000",
            "-d",
            "10s",
            "--metrics-listen",
            "off",
        ],
        60,
    );
    assert!(r.status.success(), "{}", r.stderr);
    let completed = u(&r.report, "/requests/completed");
    assert!(
        within(completed, 20_000.0, 0.02),
        "completed {completed}, want 20000 ±2%"
    );
}

#[test]
fn request_count_stops_the_run_at_exactly_n() {
    let _heavy = heavy_lock();
    let nginx = Nginx::start("", "");
    let url = nginx.url("/");
    let r = soakd_report(&["run", &url, "-c", "50", "-n", "7777", "--metrics-listen", "off"], 60);
    assert!(r.status.success(), "{}", r.stderr);
    assert_eq!(u(&r.report, "/requests/completed"), 7777);
    assert_eq!(u(&r.report, "/requests/sent"), 7777);
    assert_eq!(total_errors(&r.report), 0);
}

/// With a target that answers after 50 ms, one connection can complete at
/// most 20 requests/s without pipelining and about 80 with four in flight:
/// pipelining shows up as a count, not a speed.
#[test]
fn pipelining_keeps_several_requests_in_flight() {
    let _heavy = heavy_lock();
    let target = BuiltinTarget::start(&["--delay", "50ms"]);
    let url = target.url("/");
    let one = soakd_report(&["run", &url, "-c", "10", "-d", "2s", "--metrics-listen", "off"], 30);
    let four = soakd_report(
        &[
            "run",
            &url,
            "-c",
            "10",
            "--pipeline",
            "4",
            "-d",
            "2s",
            "--metrics-listen",
            "off",
        ],
        30,
    );
    assert!(
        one.status.success() && four.status.success(),
        "{}\n{}",
        one.stderr,
        four.stderr
    );
    let (c1, c4) = (
        u(&one.report, "/requests/completed"),
        u(&four.report, "/requests/completed"),
    );
    assert!(c1 > 0 && c4 > c1 * 5 / 2, "pipeline 1: {c1}, pipeline 4: {c4}");
    assert!(
        c1 <= 10 * 20 * 2 + 10,
        "pipeline 1 completed {c1}: more than one in flight?"
    );
    assert_eq!(total_errors(&four.report), 0);
    assert_eq!(u(&four.report, "/responses/2xx"), c4);
}

#[test]
fn pipelining_against_nginx_frames_every_response() {
    let _heavy = heavy_lock();
    let nginx = Nginx::start("", "");
    let url = nginx.url("/");
    let r = soakd_report(
        &[
            "run",
            &url,
            "-c",
            "20",
            "--pipeline",
            "8",
            "-n",
            "40000",
            "--metrics-listen",
            "off",
        ],
        60,
    );
    assert!(r.status.success(), "{}", r.stderr);
    assert_eq!(u(&r.report, "/requests/completed"), 40_000);
    assert_eq!(total_errors(&r.report), 0);
}

#[test]
fn close_sends_one_request_per_connection() {
    let _heavy = heavy_lock();
    let nginx = Nginx::start("", "");
    let url = nginx.url("/");
    let r = soakd_report(
        &[
            "run",
            &url,
            "-c",
            "20",
            "--close",
            "-n",
            "2000",
            "--metrics-listen",
            "off",
        ],
        60,
    );
    assert!(r.status.success(), "{}", r.stderr);
    let rep = &r.report;
    assert_eq!(u(rep, "/requests/completed"), 2000);
    assert_eq!(total_errors(rep), 0);
    assert!(u(rep, "/connections/opened") >= 2000);
    assert!(u(rep, "/connections/closed_by_reason/churn") >= 1980);
    assert!((rep["requests_per_connection"].as_f64().unwrap() - 1.0).abs() < 0.02);
}

#[test]
fn planned_churn_recycles_connections() {
    let _heavy = heavy_lock();
    let nginx = Nginx::start("", "");
    let url = nginx.url("/");
    let r = soakd_report(
        &[
            "run",
            &url,
            "-c",
            "10",
            "--max-requests-per-conn",
            "100",
            "-n",
            "5000",
            "--metrics-listen",
            "off",
        ],
        60,
    );
    assert!(r.status.success(), "{}", r.stderr);
    let rep = &r.report;
    assert_eq!(total_errors(rep), 0);
    let churned = u(rep, "/connections/closed_by_reason/churn");
    // 5000 requests at 90-110 per connection: 45-56 recycled connections.
    assert!((40..=60).contains(&churned), "churned {churned}");
}
