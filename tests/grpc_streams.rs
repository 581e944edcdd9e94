//! Held gRPC server streams (`--stream subscribe`) against a server no one
//! here wrote: grpcio's asyncio server (tests/peers/grpc_stream_server.py,
//! one coroutine per call, so it holds as many streams as soakd opens)
//! serving Subscribe of tests/proto/echo.proto.
//!
//! Shown here: every stream slot holds one call; messages are counted
//! (grpcio's count of what it sent agrees) with their gaps and silences;
//! `--stream-lifetime` cancels and reopens streams; a stream the server
//! ends is counted by its status and reopened; and across grpcio's
//! connection ageing (GOAWAY, a 1 s grace, then the close) the streams are
//! held on the next connections, counted as restarts, with 0 errors. The
//! 60 s form and the memory figures are bench/grpc_streams.sh.

mod util;

use std::path::{Path, PathBuf};

use util::{PyPeer, TempDir, grpc_python, soakd_report};

const SUBSCRIBE: &str = "soakd.test.v1.Echo/Subscribe";

fn proto_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/proto")
}

/// grpcio's asyncio server with these channel options, and its stats
/// file; `None` when the venv lacks grpcio.
fn server(dir: &TempDir, options: &str) -> Option<(PyPeer, PathBuf)> {
    grpc_python()?;
    let stats = dir.path().join("stats.json");
    let peer = PyPeer::start_env(
        "grpc_stream_server.py",
        &[&proto_dir(), &stats],
        &[("SOAKD_GRPC_OPTIONS", options)],
    )?;
    Some((peer, stats))
}

/// One figure of the server's stats file (0 before it is written).
fn server_stat(stats: &Path, key: &str) -> u64 {
    let Ok(bytes) = std::fs::read(stats) else { return 0 };
    serde_json::from_slice::<serde_json::Value>(&bytes).map_or(0, |v| v[key].as_u64().unwrap_or(0))
}

/// `soakd run` of Subscribe with `data`, `c` × `streams`, plus `extra`;
/// the report's workload.
fn subscribe(
    port: u16,
    data: &str,
    c: &str,
    streams: &str,
    secs: &str,
    src: &str,
    extra: &[&str],
) -> serde_json::Value {
    let url = format!("grpc://127.0.0.1:{port}");
    let proto = proto_dir().join("echo.proto").display().to_string();
    let mut args = vec![
        "run",
        &url,
        "--call",
        SUBSCRIBE,
        "--proto",
        &proto,
        "--data",
        data,
        "--stream",
        "subscribe",
        "-c",
        c,
        "--streams",
        streams,
        "-d",
        secs,
        "--source-addr",
        src,
        "--metrics-listen",
        "off",
    ];
    args.extend_from_slice(extra);
    let r = soakd_report(&args, 60);
    assert!(r.status.success(), "exit {}\n{}", r.status, r.stderr);
    r.report["workloads"][0].clone()
}

/// 4 connections × 5 streams for 3 s of a push every 100 ms: 20 calls
/// held, every message counted (grpcio sent as many, give or take the
/// ones in flight at the stop), gaps of 100 ms, no error, no request.
#[test]
fn each_stream_slot_holds_one_call_and_counts_its_messages() {
    let dir = TempDir::new("grpc-held");
    let Some((peer, stats)) = server(&dir, "[]") else {
        return;
    };
    let w = subscribe(
        peer.port,
        r#"{"count": 0, "interval_ms": 100}"#,
        "4",
        "5",
        "3s",
        "127.0.43.10",
        &[],
    );
    assert_eq!(util::total_errors(&w), 0, "{w:#}");
    let s = &w["http"]["grpc"]["streams"];
    assert_eq!(s["opened"], 20, "{s:#}");
    assert_eq!(
        (s["restarts"].as_u64(), s["lifetime_ends"].as_u64()),
        (Some(0), Some(0))
    );
    let got = s["messages_received"].as_u64().unwrap();
    // 20 streams × ~30 pushes.
    assert!((450..=650).contains(&got), "{got}");
    assert_eq!(w["requests"]["sent"], 0, "held streams are not requests");
    let gap = s["gap_seconds"]["p50"].as_f64().unwrap();
    assert!((0.09..0.2).contains(&gap), "{gap}");
    assert!(s["silence_seconds"]["count"].as_u64().unwrap() >= 20, "{s:#}");
    util::wait_until(
        || server_stat(&stats, "open") == 0 && server_stat(&stats, "started") == 20,
        std::time::Duration::from_secs(5),
        "grpcio to see every stream end",
    );
    let sent = server_stat(&stats, "sent");
    assert!(
        sent >= got && sent - got <= 20,
        "grpcio sent {sent}, soakd counted {got}"
    );

    // The same live on /metrics: the held streams' series from the first
    // scrape, the gauge at 20 once they are open, messages counting up.
    let metrics = format!("127.0.0.1:{}", util::free_port());
    let url = format!("grpc://127.0.0.1:{}", peer.port);
    let proto = proto_dir().join("echo.proto").display().to_string();
    let mut child = util::spawn_soakd(&[
        "run",
        &url,
        "--call",
        SUBSCRIBE,
        "--proto",
        &proto,
        "--data",
        r#"{"count": 0, "interval_ms": 100}"#,
        "--stream",
        "subscribe",
        "-c",
        "4",
        "--streams",
        "5",
        "-d",
        "30s",
        "--source-addr",
        "127.0.43.15",
        "--metrics-listen",
        &metrics,
    ]);
    let sum = |m: &std::collections::HashMap<String, f64>, n: &str| util::metric_sum(m, n);
    util::wait_until(
        || {
            util::scrape(&metrics).is_some_and(|m| {
                sum(&m, "soakd_grpc_streams_open") == 20.0
                    && sum(&m, "soakd_grpc_streams_opened_total") == 20.0
                    && sum(&m, "soakd_grpc_stream_messages_received_total") >= 40.0
                    && m.keys().any(|k| k.starts_with("soakd_grpc_stream_restarts_total{"))
                    && sum(&m, "soakd_grpc_stream_silence_seconds_count") >= 20.0
            })
        },
        std::time::Duration::from_secs(15),
        "20 held streams on /metrics",
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// `--stream-lifetime 1s` over 3.5 s: each stream is cancelled after about
/// a second (grpcio sees it cancelled) and opened anew; a stream the
/// server ends (3 messages, then OK) is counted ok and opened again after a
/// backoff step, not an error.
#[test]
fn lifetimes_end_streams_and_server_ends_are_counted_and_reopened() {
    let dir = TempDir::new("grpc-lifetime");
    let Some((peer, stats)) = server(&dir, "[]") else {
        return;
    };
    let w = subscribe(
        peer.port,
        r#"{"count": 0, "interval_ms": 50}"#,
        "2",
        "2",
        "3500ms",
        "127.0.43.11",
        &["--stream-lifetime", "1s"],
    );
    assert_eq!(util::total_errors(&w), 0, "{w:#}");
    let s = &w["http"]["grpc"]["streams"];
    let ends = s["lifetime_ends"].as_u64().unwrap();
    // 4 lanes, a stream every 0.9-1.1 s for 3.5 s: 3 ends each.
    assert!((8..=14).contains(&ends), "{s:#}");
    assert_eq!(s["opened"].as_u64().unwrap(), 4 + ends);
    util::wait_until(
        || server_stat(&stats, "cancelled") == 4 + ends && server_stat(&stats, "open") == 0,
        std::time::Duration::from_secs(5),
        "grpcio to see the cancels",
    );

    let w = subscribe(
        peer.port,
        r#"{"count": 3, "interval_ms": 50}"#,
        "1",
        "2",
        "2s",
        "127.0.43.11",
        &[],
    );
    assert_eq!(util::total_errors(&w), 0, "{w:#}");
    let ok = w["http"]["grpc"]["calls"]["ok"].as_u64().unwrap();
    // Each lane: ~100 ms of stream, then a 50-100 ms backoff, for 2 s.
    assert!(ok >= 6, "{w:#}");
    let s = &w["http"]["grpc"]["streams"];
    assert!(s["opened"].as_u64().unwrap() >= ok, "{s:#}");
    assert!(s["messages_received"].as_u64().unwrap() >= 3 * ok, "{s:#}");
}

/// grpcio ages every connection out after 2 s (GOAWAY, a 1 s grace, then
/// the end of its held calls and the close): 10 connections × 10 streams
/// held for 12 s across the rotations. The streams the drain ends come
/// back on the next connections, counted as restarts; 0 errors; and the
/// pushes keep coming (no stream silent for long).
#[test]
fn held_streams_ride_connection_ageing_as_restarts() {
    let dir = TempDir::new("grpc-held-ageing");
    let options = r#"[["grpc.max_connection_age_ms", 2000], ["grpc.max_connection_age_grace_ms", 1000]]"#;
    let Some((peer, _stats)) = server(&dir, options) else {
        return;
    };
    let w = subscribe(
        peer.port,
        r#"{"count": 0, "interval_ms": 100}"#,
        "10",
        "10",
        "12s",
        "127.0.43.12",
        &[],
    );
    assert_eq!(util::total_errors(&w), 0, "{w:#}");
    let rotations = w["connections"]["closed_by_reason"]["server_close"].as_u64().unwrap();
    assert!(
        rotations >= 30,
        "10 connections aged out every 2-3 s for 12 s: {rotations}"
    );
    let s = &w["http"]["grpc"]["streams"];
    let restarts = s["restarts"].as_u64().unwrap();
    assert!(
        restarts >= 10 * rotations / 2,
        "{restarts} restarts for {rotations} rotations\n{s:#}"
    );
    // Every stream opened after the first 100 is a restart coming back.
    // A restart not yet reopened when the run stops (its connection closed
    // in the last moments, not yet back) is at most one per lane.
    let opened = s["opened"].as_u64().unwrap();
    assert!(
        opened <= 100 + restarts && 100 + restarts - opened <= 100,
        "{opened} opened for {restarts} restarts\n{s:#}"
    );
    // 100 streams × 10 pushes a second, less the reconnects' gaps.
    let got = s["messages_received"].as_u64().unwrap();
    assert!(got >= 8_000, "{got}");

    // Bidirectional streams in closed loop through the same ageing: after
    // a GOAWAY nothing new is sent; a message awaiting its reply when the
    // drain ends its stream is sent again on the next connection: nothing
    // lost, no error.
    // 5 s: the first drain ends its streams at 2-3.2 s (age ±10% plus the
    // 1 s grace), well inside the run.
    let w = send_streams(peer.port, "soakd.test.v1.Echo/Chat", "5", "127.0.43.16", &["-d", "5s"]);
    assert_eq!(util::total_errors(&w), 0, "{w:#}");
    let s = &w["http"]["grpc"]["streams"];
    assert!(s["restarts"].as_u64().unwrap() >= 5, "{s:#}");
    let (sent, done) = (
        s["messages_sent"].as_u64().unwrap(),
        w["requests"]["completed"].as_u64().unwrap(),
    );
    assert_eq!(sent, done + w["http"]["retried"].as_u64().unwrap(), "{w:#}");
}

/// Bad stream settings exit 2 before anything opens, each with its fix:
/// a server-streaming method without `--stream subscribe`, subscribe on a
/// unary method, an unknown mode, a lifetime without a held stream.
#[test]
fn bad_stream_settings_exit_2_with_the_fix() {
    let proto = proto_dir().join("echo.proto").display().to_string();
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "grpc://127.0.0.1:9", "--proto", proto.as_str(), "-d", "1s"];
        args.extend_from_slice(extra);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_soakd"))
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let e = run(&["--call", SUBSCRIBE]);
    assert!(e.contains("server_streaming method: add --stream subscribe"), "{e}");
    let e = run(&["--call", "soakd.test.v1.Echo/Unary", "--stream", "subscribe"]);
    assert!(
        e.contains("holds server-streaming calls, and soakd.test.v1.Echo/Unary is a unary method"),
        "{e}"
    );
    let e = run(&["--call", SUBSCRIBE, "--stream", "watch"]);
    assert!(
        e.contains("--stream \"watch\": the stream mode is one of subscribe"),
        "{e}"
    );
    let e = run(&["--call", SUBSCRIBE, "--stream-lifetime", "1m"]);
    assert!(
        e.contains("--stream-lifetime is how long a held stream lives, and no stream is held"),
        "{e}"
    );
    let e = run(&["--call", SUBSCRIBE, "--stream", "subscribe", "--stream-lifetime", "0s"]);
    assert!(e.contains("expected a duration greater than 0"), "{e}");
}

/// `soakd run` of a client or bidirectional method with `--stream-message`,
/// 2 connections × `streams`, plus `extra`; the report's workload.
fn send_streams(port: u16, method: &str, streams: &str, src: &str, extra: &[&str]) -> serde_json::Value {
    let url = format!("grpc://127.0.0.1:{port}");
    let proto = proto_dir().join("echo.proto").display().to_string();
    let mut args = vec![
        "run",
        &url,
        "--call",
        method,
        "--proto",
        &proto,
        "--stream-message",
        r#"{"text": "hi"}"#,
        "-c",
        "2",
        "--streams",
        streams,
        "--source-addr",
        src,
        "--metrics-listen",
        "off",
    ];
    args.extend_from_slice(extra);
    let r = soakd_report(&args, 60);
    assert!(r.status.success(), "exit {}\n{}", r.status, r.stderr);
    r.report["workloads"][0].clone()
}

/// Bidirectional streams (Chat): each message is a request timed to the
/// next reply, in closed loop (the next after each reply) and paced (`-i`
/// per stream slot: 6 slots × 10 a second for 2 s); grpcio received and
/// answered exactly what soakd sent and counted.
#[test]
fn bidi_messages_go_on_each_streams_schedule_timed_to_the_reply() {
    let dir = TempDir::new("grpc-bidi");
    let Some((peer, stats)) = server(&dir, "[]") else {
        return;
    };
    let w = send_streams(peer.port, "soakd.test.v1.Echo/Chat", "2", "127.0.43.13", &["-d", "2s"]);
    assert_eq!(util::total_errors(&w), 0, "{w:#}");
    let s = &w["http"]["grpc"]["streams"];
    assert_eq!(s["mode"], "bidi");
    assert_eq!(s["opened"], 4);
    let sent = s["messages_sent"].as_u64().unwrap();
    assert!(sent >= 500, "closed loop on 4 streams for 2 s: {sent}");
    assert_eq!(
        w["requests"]["completed"].as_u64(),
        Some(sent),
        "each reply completes its message"
    );
    assert!(w["latency_seconds"]["count"].as_u64().unwrap() >= sent, "{w:#}");
    util::wait_until(
        || server_stat(&stats, "chat_sent") == sent,
        std::time::Duration::from_secs(5),
        "grpcio's count of Chat messages",
    );
    assert_eq!(server_stat(&stats, "chat_received"), sent);

    let w = send_streams(
        peer.port,
        "soakd.test.v1.Echo/Chat",
        "3",
        "127.0.43.13",
        &["-i", "100ms", "-d", "2s"],
    );
    assert_eq!(util::total_errors(&w), 0, "{w:#}");
    let done = w["requests"]["completed"].as_u64().unwrap();
    assert!((100..=130).contains(&done), "6 slots x 10/s x 2 s: {done}");
    assert_eq!(w["requests"]["missed"], 0, "{w:#}");
}

/// Client streams (Collect) at `-r 100` over 4 stream slots, each
/// half-closed after `--stream-lifetime 1s` (grpcio answers it, counted
/// ok) and opened anew; every message sent reached grpcio. Closed loop is
/// refused: a client stream's messages get no reply to wait for.
#[test]
fn client_streams_send_on_the_schedule_and_half_close_at_their_lifetime() {
    let dir = TempDir::new("grpc-client");
    let Some((peer, stats)) = server(&dir, "[]") else {
        return;
    };
    let w = send_streams(
        peer.port,
        "soakd.test.v1.Echo/Collect",
        "2",
        "127.0.43.14",
        &["-r", "100", "--stream-lifetime", "1s", "-d", "2500ms"],
    );
    assert_eq!(util::total_errors(&w), 0, "{w:#}");
    let s = &w["http"]["grpc"]["streams"];
    assert_eq!(s["mode"], "client");
    let sent = s["messages_sent"].as_u64().unwrap();
    assert!((230..=260).contains(&sent), "100/s for 2.5 s: {sent}");
    let ends = s["lifetime_ends"].as_u64().unwrap();
    assert!(ends >= 4, "{s:#}");
    assert!(w["http"]["grpc"]["calls"]["ok"].as_u64().unwrap() >= ends, "{w:#}");
    util::wait_until(
        || server_stat(&stats, "collect_received") == sent,
        std::time::Duration::from_secs(5),
        "grpcio's count of Collect messages",
    );

    let proto = proto_dir().join("echo.proto").display().to_string();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_soakd"))
        .args([
            "run",
            "grpc://127.0.0.1:9",
            "--proto",
            &proto,
            "--call",
            "soakd.test.v1.Echo/Collect",
        ])
        .args(["--stream-message", "{}", "-d", "1s"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("closed loop has nothing to wait for"));
}

/// The dashboard's "gRPC held streams" row reads soakd's stream series in
/// a real Prometheus loading grafana/rules.yml: every panel query returns
/// data, and the open streams are the 2 × 5 held.
#[test]
fn the_held_streams_row_reads_soakd_in_prometheus() {
    use std::time::Duration;
    let dir = TempDir::new("grpc-held-dashboard");
    let Some((peer, _stats)) = server(&dir, "[]") else {
        return;
    };
    let metrics = format!("127.0.0.1:{}", util::free_port());
    let Some(prom) = util::Prometheus::start(&[&metrics], &["grafana/rules.yml", "grafana/alerts.yml"]) else {
        return;
    };
    let url = format!("grpc://127.0.0.1:{}", peer.port);
    let proto = proto_dir().join("echo.proto").display().to_string();
    let child = util::spawn_soakd(&[
        "run",
        &url,
        "--call",
        SUBSCRIBE,
        "--proto",
        &proto,
        "--data",
        r#"{"count": 0, "interval_ms": 50}"#,
        "--stream",
        "subscribe",
        "-c",
        "2",
        "--streams",
        "5",
        "-d",
        "40s",
        "--source-addr",
        "127.0.43.20",
        "--metrics-listen",
        &metrics,
    ]);
    let queries = util::dashboard_row_queries("gRPC held streams");
    assert!(queries.len() >= 6, "{queries:?}");
    for (title, expr) in &queries {
        util::wait_for(
            || (!prom.query(expr).is_empty()).then_some(()),
            Duration::from_secs(30),
            &format!("data for panel {title:?}: {expr}"),
        );
    }
    let open = prom.query("target_method:soakd_grpc_streams_open:sum");
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!((open[0].0["method"].as_str(), open[0].1), (SUBSCRIBE, 10.0));
    util::signal(child.id(), "TERM");
    let (status, stderr) = util::wait_with_timeout(child, 60);
    assert!(status.success(), "{stderr}");
}
