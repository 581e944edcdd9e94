//! Peers that write and never read (tests/peers/hostile.py): whatever a
//! server does, what soakd owes it is bounded per connection, so its memory
//! stays flat, and a bound that is hit ends in a classified error, never in
//! silent growth (issue 28: a WebSocket server pinging as fast as it could
//! grew soakd by 120 MB a second, with no error in the report).
//!
//! Each run is 8 s against 10 connections, with soakd's RSS sampled every
//! 200 ms; `bench/hostile.sh` runs the same peers for 30 s and prints the
//! series (bench/README.md has before and after).

mod util;

use std::time::{Duration, Instant};

use serde_json::Value;
use util::{PyPeer, field, spawn_soakd, temp_path, vm_rss_kb, wait_output};

/// soakd's resident memory may not pass this in any run here (it holds
/// about 15 MB; the WebSocket flood took it past 1 GB in 5 s).
const RSS_LIMIT_KB: u64 = 64 * 1024;

/// Runs soakd with `args` for 8 s against `mode`'s peer; returns its
/// report and the highest RSS seen.
fn against(mode: &str, url: impl Fn(u16) -> String, args: &[&str]) -> Option<(Value, u64)> {
    let peer = PyPeer::start("hostile.py", &[&mode])?;
    let report = temp_path("hostile", "json");
    let report_s = report.display().to_string();
    let url = url(peer.port);
    let mut all = vec!["run", url.as_str(), "-c", "10", "-d", "8s", "--metrics-listen", "off"];
    all.extend_from_slice(args);
    all.extend(["--report", &report_s]);
    let child = spawn_soakd(&all);
    let pid = child.id();
    let mut peak = 0;
    let until = Instant::now() + Duration::from_secs(30);
    while let Some(kb) = vm_rss_kb(pid) {
        peak = peak.max(kb);
        if Instant::now() > until {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = wait_output(child, 30);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{mode}: {stderr}");
    let text = std::fs::read_to_string(&report).unwrap_or_else(|e| panic!("{mode}: no report ({e}): {stderr}"));
    let _ = std::fs::remove_file(&report);
    eprintln!("{mode}: peak RSS {peak} KiB");
    assert!(peak < RSS_LIMIT_KB, "{mode}: soakd grew to {peak} KiB");
    Some((serde_json::from_str(&text).unwrap(), peak))
}

/// A WebSocket server that pings as fast as its socket takes it and never
/// reads: soakd answers only the latest ping while earlier bytes are owed
/// (RFC 6455 §5.5.3), so tens of thousands of pings cost it one pong per
/// socket; its own pings go unanswered and end in `ws_ping_timeout`.
#[test]
fn a_websocket_ping_flood_that_never_reads_stays_bounded() {
    let Some((rep, _)) = against(
        "ws-ping-flood",
        |p| format!("ws://127.0.0.1:{p}/"),
        &["--ws-ping", "1s", "--ws-ping-timeout", "2s"],
    ) else {
        return;
    };
    let pings = field(&rep, "/workloads/0/ws/server_pings");
    assert!(pings > 100_000, "the peer flooded: {pings} pings");
    assert!(
        field(&rep, "/errors/ws_ping_timeout") > 0,
        "our pings' pongs never came: {:#}",
        rep["errors"]
    );
}

/// An HTTP/2 server that sends SETTINGS and PINGs without end and never
/// reads: the acknowledgements owed are capped (64 KiB), and past the cap
/// the connection fails as `h2_protocol`.
#[test]
fn an_http2_control_flood_that_never_reads_stays_bounded() {
    let Some((rep, _)) = against("h2-flood", |p| format!("http://127.0.0.1:{p}/"), &["--http", "2"]) else {
        return;
    };
    assert!(field(&rep, "/errors/h2_protocol") >= 10, "{:#}", rep["errors"]);
}

/// An HTTP/1.1 server that never reads nor answers while soakd pipelines
/// 64 requests per connection: what is owed is those requests (written
/// from the workload's shared buffer, nothing per connection), and each
/// one ends in `timeout`.
#[test]
fn an_http1_server_that_never_reads_while_pipelined_stays_bounded() {
    let Some((rep, _)) = against(
        "http1-silent",
        |p| format!("http://127.0.0.1:{p}/"),
        &["--pipeline", "64", "--request-timeout", "3s"],
    ) else {
        return;
    };
    let timeouts = field(&rep, "/errors/timeout");
    assert!(
        timeouts >= 640,
        "every pipelined request timed out: {:#}",
        rep["errors"]
    );
    assert_eq!(field(&rep, "/requests/completed"), 0);
}
