//! Response framing end to end against the built-in target's response
//! shapes, and malformed responses from a raw server.

mod util;

use serde_json::Value;
use util::{BuiltinTarget, field as u, raw_server, soakd_report};

fn errors(r: &Value) -> Vec<(String, u64)> {
    r["errors"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, v)| v.as_u64() != Some(0))
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect()
}

/// Runs 300 requests over 5 connections and checks they all completed
/// cleanly; returns the report.
fn run_clean(target: &BuiltinTarget, path: &str, extra: &[&str]) -> Value {
    let url = target.url(path);
    let mut args = vec!["run", url.as_str(), "-c", "5", "-n", "300", "--metrics-listen", "off"];
    args.extend_from_slice(extra);
    let r = soakd_report(&args, 30);
    assert!(r.status.success(), "{path}: exit {}\n{}", r.status, r.stderr);
    assert_eq!(u(&r.report, "/requests/completed"), 300, "{path}: {:#}", r.report);
    assert_eq!(errors(&r.report), vec![], "{path}");
    r.report
}

#[test]
fn chunked_responses_with_trailers() {
    let t = BuiltinTarget::start(&[]);
    let rep = run_clean(&t, "/chunked", &[]);
    assert_eq!(u(&rep, "/responses/2xx"), 300);
    // Kept alive: no reconnects.
    assert_eq!(u(&rep, "/connections/opened"), 5);
}

#[test]
fn close_delimited_http10_responses() {
    let t = BuiltinTarget::start(&[]);
    let rep = run_clean(&t, "/http10", &[]);
    // Every response ends with the server's close: one connection each,
    // counted as server closes, not errors.
    assert!(u(&rep, "/connections/closed_by_reason/server_close") >= 295, "{rep:#}");
    assert!(u(&rep, "/connections/opened") >= 300);
}

#[test]
fn connection_close_responses_reconnect_at_once() {
    let t = BuiltinTarget::start(&[]);
    let rep = run_clean(&t, "/close", &[]);
    assert!(u(&rep, "/connections/closed_by_reason/server_close") >= 295, "{rep:#}");
    assert_eq!(u(&rep, "/connections/closed_by_reason/error"), 0);
}

#[test]
fn head_requests_expect_no_body() {
    let t = BuiltinTarget::start(&[]);
    let rep = run_clean(&t, "/", &["-m", "HEAD"]);
    assert_eq!(u(&rep, "/responses/2xx"), 300);
    assert_eq!(u(&rep, "/connections/opened"), 5);
}

#[test]
fn interim_1xx_responses_are_skipped() {
    let t = BuiltinTarget::start(&[]);
    let rep = run_clean(&t, "/continue", &[]);
    assert_eq!(u(&rep, "/responses/2xx"), 300);
    assert_eq!(u(&rep, "/responses/1xx"), 0);
}

#[test]
fn status_classes_are_counted() {
    let t = BuiltinTarget::start(&[]);
    let rep = run_clean(&t, "/status/404", &[]);
    assert_eq!(u(&rep, "/responses/4xx"), 300);
    let rep = run_clean(&t, "/status/204", &[]);
    assert_eq!(u(&rep, "/responses/2xx"), 300);
    let rep = run_clean(&t, "/status/503", &[]);
    assert_eq!(u(&rep, "/responses/5xx"), 300);
}

#[test]
fn bodies_spanning_many_reads() {
    let t = BuiltinTarget::start(&[]);
    let rep = run_clean(&t, "/big", &[]);
    assert!(u(&rep, "/bytes/received") >= 300 * 65_536);
}

#[test]
fn post_bodies_are_sent() {
    let t = BuiltinTarget::start(&[]);
    let rep = run_clean(
        &t,
        "/",
        &["-m", "POST", "--body", "hello=world", "-H", "Content-Type: text/plain"],
    );
    assert_eq!(u(&rep, "/responses/2xx"), 300);
}

/// Garbage instead of a status line: counted as `protocol`, the daemon
/// keeps running and backs off instead of hammering the server.
#[test]
fn malformed_responses_are_protocol_errors_with_backoff() {
    for (name, bytes) in [
        ("bad status line", &b"HTTZ/1.1 200 OK\r\n\r\n"[..]),
        (
            "bad chunk size",
            &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"[..],
        ),
        (
            "conflicting lengths",
            &b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"[..],
        ),
        (
            "extra bytes",
            &b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n"[..],
        ),
    ] {
        let server = raw_server(bytes);
        let url = server.url("/");
        let r = soakd_report(&["run", &url, "-c", "5", "-d", "2s", "--metrics-listen", "off"], 30);
        assert!(r.status.success(), "{name}: exit {}\n{}", r.status, r.stderr);
        assert!(!r.stderr.contains("panicked"), "{name}: {}", r.stderr);
        let protocol = u(&r.report, "/errors/protocol");
        assert!(protocol >= 5, "{name}: {:#}", r.report["errors"]);
        // 5 slots backing off from 100 ms, doubling: a handful of attempts
        // each in 2 s, not a storm.
        assert!(
            protocol <= 60,
            "{name}: {protocol} protocol errors in 2 s: not backing off"
        );
        assert_eq!(errors(&r.report), vec![("protocol".to_string(), protocol)], "{name}");
    }
}
