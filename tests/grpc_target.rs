//! `soakd target --grpc`: the built-in target's gRPC service, soaked by
//! soakd's own gRPC client (the client is tested against grpcio in
//! tests/grpc.rs; here the target's faults are what is shown).
//!
//! Shown: every non-OK status of `--grpc-status CODE@N` is counted under
//! its own code, exactly; the echo decodes as `EchoReply` (a message check
//! on it passes); a target slower than `--request-timeout` ends each call
//! once, without a hang; `--max-connection-age` ages connections out
//! (GOAWAY, grace, close) and an open-loop soak across it loses nothing;
//! bad target flags exit 2.

mod util;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use util::{BuiltinTarget, TempDir, soakd_report, soakd_timeout};

const CALL: &str = "soakd.test.v1.Echo/Unary";

fn proto() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/proto/echo.proto")
        .display()
        .to_string()
}

/// `soakd run` of the unary method against `target`, then `rest`.
fn run(target: &BuiltinTarget, rest: &[&str]) -> util::RunResult {
    let url = format!("grpc://{}", target.addr);
    let proto = proto();
    let mut args = vec!["run", url.as_str(), "--call", CALL, "--proto", proto.as_str()];
    args.extend_from_slice(rest);
    args.extend_from_slice(&["--metrics-listen", "off"]);
    soakd_report(&args, 60)
}

/// `--grpc-status CODE@2` on one thread, closed loop on one connection
/// until 10 calls are answered: exactly 9 more ended with CODE, counted
/// under its label and as `grpc_status` errors, for each of the 16 codes.
#[test]
fn every_status_code_is_classified_exactly() {
    let codes = [
        "cancelled",
        "unknown",
        "invalid_argument",
        "deadline_exceeded",
        "not_found",
        "already_exists",
        "permission_denied",
        "resource_exhausted",
        "failed_precondition",
        "aborted",
        "out_of_range",
        "unimplemented",
        "internal",
        "unavailable",
        "data_loss",
        "unauthenticated",
    ];
    for code in codes {
        let status = format!("{code}@2");
        let target = BuiltinTarget::start(&["--grpc", "--grpc-status", &status]);
        let r = run(&target, &["-c", "1", "--requests", "10", "--data", r#"{"text": "hi"}"#]);
        assert!(r.status.success(), "{code}: {}", r.stderr);
        let calls = &r.report["workloads"][0]["http"]["grpc"]["calls"];
        let nonzero: Vec<(&String, u64)> = calls
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k, v.as_u64().unwrap()))
            .filter(|(_, n)| *n > 0)
            .collect();
        // Calls 2, 4, … fail: the 10th OK is the 19th call.
        let mut want = vec![("ok", 10), (code, 9)];
        want.sort();
        assert_eq!(
            nonzero.iter().map(|(k, n)| (k.as_str(), *n)).collect::<Vec<_>>(),
            want,
            "{code}"
        );
        assert_eq!(r.report["errors"]["grpc_status"], 9, "{code}: {}", r.report["errors"]);
        assert_eq!(util::total_errors(&r.report), 9, "{code}: {}", r.report["errors"]);
    }
}

/// The echo is an `EchoReply` holding the request: a message check on the
/// decoded reply passes on every call; another method is UNIMPLEMENTED.
#[test]
fn the_echo_decodes_and_other_methods_are_unimplemented() {
    let target = BuiltinTarget::start(&["--grpc"]);
    let dir = TempDir::new("grpc-target-echo");
    let config = dir.path().join("soak.toml");
    std::fs::write(
        &config,
        format!(
            "[[workload]]\nurl = \"grpc://{}\"\ncall = \"{CALL}\"\nproto = [{:?}]\ndata = '{{\"text\": \"hi\", \"big\": 7}}'\nconnections = 2\nexpect_grpc_message = '{{\"echo\": {{\"text\": \"hi\", \"big\": 7}}}}'\n",
            target.addr,
            proto()
        ),
    )
    .unwrap();
    let r = soakd_report(
        &[
            "run",
            "--config",
            &config.display().to_string(),
            "--requests",
            "200",
            "--metrics-listen",
            "off",
        ],
        60,
    );
    assert!(r.status.success(), "{}", r.stderr);
    assert_eq!(util::total_errors(&r.report), 0, "{}", r.report["errors"]);
    assert_eq!(r.report["checks"]["body"], 0, "{}", r.report["checks"]);
    assert_eq!(r.report["workloads"][0]["http"]["grpc"]["calls"]["ok"], 200);

    let url = format!("grpc://{}", target.addr);
    let proto = proto();
    let r = soakd_report(
        &[
            "run",
            &url,
            "--call",
            "soakd.test.v1.Echo/Lookup",
            "--proto",
            &proto,
            "-i",
            "50ms",
            "-d",
            "1s",
            "-c",
            "1",
            "--metrics-listen",
            "off",
        ],
        60,
    );
    let sent = r.report["workloads"][0]["requests"]["sent"].as_u64().unwrap_or(0);
    assert!(sent > 0, "no call was sent: {}", r.report["workloads"][0]["requests"]);
    assert_eq!(
        r.report["workloads"][0]["http"]["grpc"]["calls"]["unimplemented"].as_u64(),
        Some(sent),
        "{}",
        r.report["workloads"][0]["http"]["grpc"]
    );
}

/// A target 500 ms late and `--request-timeout 200ms`: every call ends
/// once, as soakd's own `timeout` (the connection keeps talking: the
/// late answers, then the cancels), none answered, no hang.
#[test]
fn a_target_past_the_deadline_ends_each_call_once() {
    let target = BuiltinTarget::start(&["--grpc", "--delay", "500ms"]);
    let started = Instant::now();
    let r = run(
        &target,
        &["-c", "2", "--streams", "2", "--request-timeout", "200ms", "-d", "3s"],
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "no hang: {:?}",
        started.elapsed()
    );
    let w = &r.report["workloads"][0];
    let sent = w["requests"]["sent"].as_u64().unwrap();
    let timeouts = r.report["errors"]["timeout"].as_u64().unwrap_or(0);
    let in_flight = w["requests"]["in_flight_at_end"].as_u64().unwrap_or(0);
    assert!(sent >= 20, "4 streams × 3 s / 200 ms: {sent}");
    assert_eq!(w["http"]["grpc"]["calls"]["ok"], 0, "none answered in time");
    assert_eq!(
        sent,
        timeouts + in_flight,
        "each call ended once: {}",
        r.report["errors"]
    );
}

/// `--max-connection-age 1s` with a 500 ms grace: every connection gets a
/// GOAWAY after a second and is closed half a second later; an open-loop
/// soak at 200 calls/s across the rotations loses no call.
#[test]
fn connection_ageing_rotates_connections_and_loses_no_call() {
    let target = BuiltinTarget::start(&[
        "--grpc",
        "--max-connection-age",
        "1s",
        "--max-connection-age-grace",
        "500ms",
    ]);
    let r = run(
        &target,
        &["-c", "4", "-r", "200", "-d", "5s", "--data", r#"{"text": "hi"}"#],
    );
    assert!(r.status.success(), "{}", r.stderr);
    assert_eq!(util::total_errors(&r.report), 0, "{}", r.report["errors"]);
    let w = &r.report["workloads"][0];
    let rotations = w["connections"]["closed_by_reason"]["server_close"].as_u64().unwrap();
    assert!(
        rotations >= 8,
        "4 connections aged out every 1.5 s for 5 s: {rotations}"
    );
    let goaways: u64 = w["http"]["goaways"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert!(goaways >= rotations, "{}", w["http"]);
    assert_eq!(w["requests"]["failed"], 0);
    assert!(w["requests"]["completed"].as_u64().unwrap() >= 900, "{}", w["requests"]);
}

/// The gRPC flags need `--grpc`, and a bad code names the codes: exit 2.
#[test]
fn bad_grpc_target_flags_exit_2() {
    for (args, says) in [
        (&["--grpc-status", "unavailable@2"][..], "--grpc"),
        (&["--grpc", "--grpc-status", "gone@2"][..], "is not a gRPC status code"),
        (&["--grpc", "--grpc-status", "ok"][..], "give an error code"),
    ] {
        let mut all = vec!["target", "--listen", "127.0.0.1:0"];
        all.extend_from_slice(args);
        let out = soakd_timeout(&all, 10);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// `soakd demo --grpc` (and over TLS): the target's service soaked by
/// unary calls from the schema built into the binary; every call OK.
#[test]
fn demo_grpc_soaks_the_service() {
    for tls in [false, true] {
        let mut args = vec![
            "demo",
            "--grpc",
            "-c",
            "5",
            "-i",
            "100ms",
            "-d",
            "2s",
            "--metrics-listen",
            "off",
        ];
        if tls {
            args.push("--tls");
        }
        let r = soakd_report(&args, 60);
        assert!(r.status.success(), "{}", r.stderr);
        let w = &r.report["workloads"][0];
        let ok = w["http"]["grpc"]["calls"]["ok"].as_u64().unwrap();
        assert!(ok >= 500, "5 connections × 10 streams × 10/s × 2 s: {ok}");
        // The banner says that rate, streams included.
        assert!(
            r.stderr
                .contains("one call every 100ms on each of its 10 streams: 500 calls/s"),
            "{}",
            r.stderr
        );
        assert_eq!(util::total_errors(&r.report), 0, "{}", r.report["errors"]);
        assert_eq!(
            w["url"]
                .as_str()
                .map(|u| u.starts_with(if tls { "grpcs://" } else { "grpc://" })),
            Some(true)
        );
    }
}

/// `Subscribe` pushes every `interval_ms` on each held stream, `Chat`
/// echoes each message, and held streams ride the target's connection
/// ageing as restarts, not errors.
#[test]
fn server_streams_and_bidi_echo_are_served() {
    let target = BuiltinTarget::start(&["--grpc"]);
    let url = format!("grpc://{}", target.addr);
    let proto = proto();
    let held = |url: &str, extra: &[&str]| {
        let mut args = vec![
            "run",
            url,
            "--call",
            "soakd.test.v1.Echo/Subscribe",
            "--proto",
            proto.as_str(),
            "--data",
            r#"{"count": 0, "interval_ms": 100}"#,
            "--stream",
            "subscribe",
            "-c",
            "4",
            "--streams",
            "5",
            "--metrics-listen",
            "off",
        ];
        args.extend_from_slice(extra);
        soakd_report(&args, 60)
    };
    let r = held(&url, &["-d", "3s"]);
    assert!(r.status.success(), "{}", r.stderr);
    assert_eq!(util::total_errors(&r.report), 0, "{}", r.report["errors"]);
    let s = &r.report["workloads"][0]["http"]["grpc"]["streams"];
    assert_eq!(s["opened"], 20, "{s}");
    let got = s["messages_received"].as_u64().unwrap();
    assert!((450..=650).contains(&got), "20 streams × ~30 pushes: {got}");
    let gap = s["gap_seconds"]["p50"].as_f64().unwrap();
    assert!((0.09..0.2).contains(&gap), "{gap}");

    let r = soakd_report(
        &[
            "run",
            &url,
            "--call",
            "soakd.test.v1.Echo/Chat",
            "--proto",
            &proto,
            "--stream-message",
            r#"{"text": "x"}"#,
            "-c",
            "2",
            "--streams",
            "2",
            "-d",
            "2s",
            "--metrics-listen",
            "off",
        ],
        60,
    );
    assert!(r.status.success(), "{}", r.stderr);
    assert_eq!(util::total_errors(&r.report), 0, "{}", r.report["errors"]);
    let s = &r.report["workloads"][0]["http"]["grpc"]["streams"];
    let (sent, received) = (
        s["messages_sent"].as_u64().unwrap(),
        s["messages_received"].as_u64().unwrap(),
    );
    assert!(sent >= 1000 && sent - received <= 4, "each message echoed: {s}");

    let ageing = BuiltinTarget::start(&[
        "--grpc",
        "--max-connection-age",
        "1s",
        "--max-connection-age-grace",
        "300ms",
    ]);
    let r = held(&format!("grpc://{}", ageing.addr), &["-d", "4s"]);
    assert!(r.status.success(), "{}", r.stderr);
    assert_eq!(util::total_errors(&r.report), 0, "{}", r.report["errors"]);
    let s = &r.report["workloads"][0]["http"]["grpc"]["streams"];
    assert!(
        s["restarts"].as_u64().unwrap() >= 20,
        "4 connections × 5 streams aged out every 1.3 s: {s}"
    );
    assert!(
        s["silence_seconds"]["max"].as_f64().unwrap() < 1.0,
        "streams came back at once: {s}"
    );
}
