//! The built-in target's WebSocket routes (`/ws` echo, `/ws/push`) and
//! its `ws-*` faults, seen from a client no one here wrote: PyPI's
//! `websockets` (tests/peers/ws_target_client.py, one JSON line per run),
//! plus raw sockets for the handshake's refusals and the memory an idle
//! socket keeps.

mod util;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use util::{
    BuiltinTarget, field, field_f64, free_port, heavy_lock, metric_sum, scrape, soakd_report, spawn_soakd, test_python,
    vm_rss_kb, wait_until, wait_with_timeout,
};

/// Runs the Python client in `mode` against `url` (bounded: 60 s) and
/// returns what it printed.
fn py(python: &PathBuf, mode: &str, url: &str, extra: &[&str]) -> Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/peers/ws_target_client.py");
    let child = Command::new(python)
        .arg(script)
        .args([mode, url])
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python starts");
    let out = util::wait_output(child, 60);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{mode} {url}: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{mode}: {e}: {stdout}"))
}

fn ws_url(target: &BuiltinTarget, path: &str) -> String {
    format!("ws://{}{path}", target.addr)
}

/// The built-in target twice: plain, and over TLS with the path of the CA
/// file a client needs to verify it.
fn plain_and_tls() -> (BuiltinTarget, BuiltinTarget, String) {
    let tls = BuiltinTarget::start(&["--tls"]);
    let cert = tls.cert.clone().expect("--tls prints its certificate");
    (BuiltinTarget::start(&[]), tls, cert)
}

#[test]
fn echo_ping_and_close_over_plain_and_tls() {
    let Some(python) = test_python() else { return };
    let (plain, tls, cert) = plain_and_tls();
    for (url, extra) in [
        (ws_url(&plain, "/ws"), vec![]),
        (format!("wss://{}/ws", tls.addr), vec!["--cafile", cert.as_str()]),
    ] {
        let got = py(&python, "echo", &url, &extra);
        // Text (with non-ASCII), empty, binary, 300 kB (more than one read),
        // and a fragmented message: each came back the same.
        assert_eq!(got["echoed"], 6, "{url}: {got}");
        assert_eq!(got["pong"], true, "{url}: {got}");
        // The closing handshake: the target answers the client's 1000.
        assert_eq!(got["close_rcvd"], 1000, "{url}: {got}");
    }
    // HTTP still works beside it.
    assert!(util::http_get(&plain.addr, "/").ends_with("pong"));
}

/// Regression (echo_ping_and_close_over_plain_and_tls hung 60 s once): the
/// echo came back in one frame per read, over TLS one per 16 KiB record,
/// and a client that stops reading past 16 queued frames while it still
/// sends (PyPI websockets' sync client) deadlocked with the target's
/// backpressure. The echo now mirrors the client's frames: one frame of
/// 300 kB comes back as one frame, plain and TLS.
#[test]
fn echo_mirrors_the_clients_frames() {
    let Some(python) = test_python() else { return };
    let (plain, tls, cert) = plain_and_tls();
    for (url, extra) in [
        (ws_url(&plain, "/ws"), vec![]),
        (format!("wss://{}/ws", tls.addr), vec!["--cafile", cert.as_str()]),
    ] {
        let got = py(&python, "echo-frames", &url, &extra);
        assert_eq!(got["bytes"], 300_000, "{url}: {got}");
        assert_eq!(got["frames"], 1, "{url}: {got}");
    }
}

#[test]
fn push_keeps_its_interval() {
    let Some(python) = test_python() else { return };
    let target = BuiltinTarget::start(&[]);
    let got = py(&python, "push", &ws_url(&target, "/ws/push?every=100ms"), &["10"]);
    let times: Vec<f64> = got["times"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_f64().unwrap())
        .collect();
    assert_eq!(got["texts"], serde_json::json!(["push"]), "{got}");
    assert_eq!(times.len(), 10);
    // On schedule, not in bursts: no two pushes close together, and ten
    // took about a second (a loaded machine may add to the end).
    for pair in times.windows(2) {
        assert!(
            pair[1] - pair[0] >= 0.05,
            "pushes {:.3}s apart: {got}",
            pair[1] - pair[0]
        );
    }
    assert!((0.9..3.0).contains(&times[9]), "ten pushes in {:.3}s: {got}", times[9]);
}

#[test]
fn each_fault_is_seen_on_the_wire() {
    let Some(python) = test_python() else { return };

    // ws-no-pong: our ping is never answered; the echo goes on.
    let target = BuiltinTarget::start(&["--fault", "ws-no-pong"]);
    let got = py(&python, "no-pong", &ws_url(&target, "/ws"), &[]);
    assert_eq!(got["pong"], false, "{got}");
    assert_eq!(got["echo"], "still there", "{got}");

    // ws-close@3: two messages echoed, the third answered by close 1011.
    let target = BuiltinTarget::start(&["--fault", "ws-close@3"]);
    let got = py(&python, "close-after", &ws_url(&target, "/ws"), &["10"]);
    assert_eq!(got["echoed"], 2, "{got}");
    assert_eq!(got["rcvd"], 1011, "{got}");

    // ws-bad-frame@2: the second answer has a reserved opcode; the client
    // fails the connection with 1002.
    let target = BuiltinTarget::start(&["--fault", "ws-bad-frame@2"]);
    let got = py(&python, "bad-frame", &ws_url(&target, "/ws"), &["10"]);
    assert_eq!(got["echoed"], 1, "{got}");
    assert_eq!(got["sent"], 1002, "{got}");

    // ws-oversize@2: the second answer is 1 MiB + 1 byte, over the
    // client's 1 MiB limit: it closes with 1009.
    let target = BuiltinTarget::start(&["--fault", "ws-oversize@2"]);
    let got = py(&python, "oversize", &ws_url(&target, "/ws"), &["10"]);
    assert_eq!(got["echoed"], 1, "{got}");
    assert_eq!(got["sent"], 1009, "{got}");

    // ws-ping-flood: 100 pings every 100 ms, every one answered by the
    // client; bounded (about 1,100 in a second, never a storm).
    let target = BuiltinTarget::start(&["--fault", "ws-ping-flood"]);
    let got = py(&python, "flood", &ws_url(&target, "/ws"), &["1"]);
    let pings = got["pings"].as_u64().unwrap();
    assert!((300..=1500).contains(&pings), "{got}");
    assert!(got["pongs_sent"].as_u64().unwrap() >= pings, "{got}");
}

/// Sends `request` on a fresh connection and reads until the server
/// closes (bounded by a 5 s read timeout).
fn raw(addr: &str, request: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// Reads a response head byte by byte, so nothing after it is taken.
fn read_head(s: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    String::from_utf8(head).unwrap()
}

fn upgrade_request(path: &str, version: &str) -> String {
    format!(
        "GET {path} HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Version: {version}\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    )
}

#[test]
fn upgrades_are_checked_and_refusals_say_why() {
    let target = BuiltinTarget::start(&[]);
    // RFC 6455's own example key and accept value.
    let mut s = TcpStream::connect(&target.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(upgrade_request("/ws", "13").as_bytes()).unwrap();
    let head = read_head(&mut s);
    assert!(head.starts_with("HTTP/1.1 101 "), "{head}");
    assert!(
        head.contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"),
        "{head}"
    );

    let plain_get = raw(&target.addr, "GET /ws HTTP/1.1\r\nHost: t\r\n\r\n");
    assert!(plain_get.starts_with("HTTP/1.1 400 "), "{plain_get}");
    assert!(plain_get.contains("not a WebSocket upgrade"), "{plain_get}");
    let old = raw(&target.addr, &upgrade_request("/ws", "8"));
    assert!(old.starts_with("HTTP/1.1 426 "), "{old}");
    assert!(old.contains("Sec-WebSocket-Version: 13\r\n"), "{old}");
    let bad_every = raw(&target.addr, &upgrade_request("/ws/push?every=forever", "13"));
    assert!(bad_every.starts_with("HTTP/1.1 400 "), "{bad_every}");
    assert!(
        bad_every.contains("every=forever") && bad_every.contains("e.g."),
        "{bad_every}"
    );
    // An HTTP fault hits the upgrade like any request: a refused handshake.
    let faulty = BuiltinTarget::start(&["--fault", "bad-status"]);
    let got = raw(&faulty.addr, &upgrade_request("/ws", "13"));
    assert!(got.starts_with("HTTP/1.1 2x0 "), "{got}");
}

/// A masked client frame, as a client must send it.
fn frame(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    soakd::wire::ws::encode_frame(
        &mut out,
        true,
        soakd::wire::ws::Opcode::Text,
        payload,
        Some([1, 2, 3, 4]),
    );
    out
}

/// An idle upgraded socket keeps no buffer: 2,000 sockets, each of which
/// has exchanged a message, cost the target little resident memory each.
#[test]
fn idle_sockets_keep_no_buffer() {
    let _heavy = heavy_lock();
    const SOCKETS: usize = 2000;
    let target = BuiltinTarget::start(&[]);
    let before = vm_rss_kb(target.pid()).expect("target's VmRSS");
    let request = upgrade_request("/ws", "13");
    let message = frame(&[b'm'; 100]);
    let mut held = Vec::with_capacity(SOCKETS);
    for _ in 0..SOCKETS {
        let mut s = TcpStream::connect(&target.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        // The head and the first frame in one write: the frame follows the
        // upgrade in the same read.
        s.write_all(&[request.as_bytes(), &message].concat()).unwrap();
        held.push(s);
    }
    for s in &mut held {
        assert!(read_head(s).starts_with("HTTP/1.1 101 "));
        let mut echo = vec![0; 102];
        s.read_exact(&mut echo).unwrap();
        assert!(echo.ends_with(&[b'm'; 100]));
    }
    let after = vm_rss_kb(target.pid()).expect("target's VmRSS");
    let per_socket = (after.saturating_sub(before) * 1024) as f64 / SOCKETS as f64;
    assert!(
        per_socket <= 2048.0,
        "{per_socket:.0} bytes per idle socket ({before} → {after} KiB)"
    );
    eprintln!("target: {per_socket:.0} bytes of resident memory per idle WebSocket");
}

// ---------------------------------------------------------------------------
// soakd's own client against the target
// ---------------------------------------------------------------------------

/// The error kinds of a report that are not zero.
fn errors(report: &Value) -> std::collections::BTreeMap<String, u64> {
    util::nonzero_errors(report).into_iter().collect()
}

#[test]
fn demo_soaks_the_echo_over_plain_and_tls() {
    for tls in [false, true] {
        let mut args = vec![
            "demo",
            "--ws",
            "-c",
            "20",
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
        let r = soakd_report(&args, 30);
        assert!(r.status.success(), "{}", r.stderr);
        let scheme = if tls { "wss://" } else { "ws://" };
        let url = r.report["workloads"][0]["url"].as_str().unwrap().to_string();
        assert!(url.starts_with(scheme) && url.ends_with("/ws"), "{url}");
        assert!(
            field(&r.report, "/requests/completed") >= 200,
            "{}",
            r.report["requests"]
        );
        assert_eq!(errors(&r.report), Default::default(), "{}", r.stderr);
        assert!(r.stderr.contains("one message every 100ms"), "{}", r.stderr);
        // The summary shows the echoes as the ws line's replies, not as
        // HTTP responses (`2xx`).
        assert!(
            r.stderr.contains("  replies ") && !r.stderr.contains("  responses "),
            "{}",
            r.stderr
        );
    }
}

/// Each message fault ends its socket in exactly one way, after exactly
/// N - 1 echoes, and the slot reconnects: ws-close@N as `ws_closed` (the
/// server's close 1011), ws-bad-frame@N and ws-oversize@N (over the
/// default 1 MiB limit) as `ws_protocol`.
#[test]
fn message_faults_are_classified_exactly_and_slots_reconnect() {
    for (fault, kind) in [
        ("ws-close@4", "ws_closed"),
        ("ws-bad-frame@4", "ws_protocol"),
        ("ws-oversize@4", "ws_protocol"),
    ] {
        let target = BuiltinTarget::start(&["--fault", fault]);
        let url = ws_url(&target, "/ws");
        let r = soakd_report(
            &[
                "run",
                &url,
                "-c",
                "10",
                "-i",
                "50ms",
                "-d",
                "3s",
                "--ws-message",
                "hi",
                "--metrics-listen",
                "off",
            ],
            30,
        );
        let rep = &r.report;
        let opened = field(rep, "/connections/opened");
        let failed = field(rep, "/requests/failed");
        let open_at_end = field(rep, "/connections/open_at_end");
        // Sockets that saw their fault before the stop: all but those open
        // at it. A message in flight at the stop may be a socket's N-th:
        // that socket, counted open at the stop, ends by its fault during
        // the drain. So the faulted sockets are `ended` plus at most those
        // open at the end, and each of them ends exactly one way.
        let ended = opened - open_at_end;
        assert!(
            opened > 10,
            "{fault}: the slots reconnect ({opened} opened)\n{}",
            r.stderr
        );
        assert_eq!(
            errors(rep).keys().collect::<Vec<_>>(),
            [kind],
            "{fault}: {}",
            rep["errors"]
        );
        let faulted = field(rep, &format!("/errors/{kind}"));
        assert!(
            (ended..=ended + open_at_end).contains(&faulted),
            "{fault}: one error per socket ended ({faulted} errors, {ended} ended before the stop, {open_at_end} open at it)"
        );
        assert_eq!(failed, faulted, "{fault}: the faulted message is the one lost");
        assert_eq!(
            field(rep, "/connections/closed_by_reason/error"),
            faulted,
            "{fault}: {}",
            rep["connections"]
        );
        if fault.starts_with("ws-close") {
            // Each counted by its code: 1011 is internal_error.
            assert_eq!(
                field(rep, "/workloads/0/ws/closes/internal_error"),
                faulted,
                "{fault}: {}",
                rep["workloads"][0]["ws"]["closes"]
            );
        }
        // Three echoes before each fault; a socket still open at the end
        // has had up to three.
        let completed = field(rep, "/requests/completed");
        assert!(
            completed >= 3 * ended && completed <= 3 * opened,
            "{fault}: {completed} echoes on {opened} sockets, {ended} ended"
        );
    }
}

/// A ping flood on held sockets: every socket stays open, no error, every
/// ping answered (counted), and the run ends on time (the flood is bounded
/// by the target and soakd answers it without a storm of its own).
#[test]
fn a_ping_flood_is_absorbed() {
    let target = BuiltinTarget::start(&["--fault", "ws-ping-flood"]);
    let url = ws_url(&target, "/ws");
    let r = soakd_report(&["run", &url, "-c", "20", "-d", "3s", "--metrics-listen", "off"], 30);
    assert!(r.status.success(), "{}", r.stderr);
    assert_eq!(errors(&r.report), Default::default(), "{}", r.stderr);
    assert_eq!(field(&r.report, "/connections/opened"), 20);
    assert_eq!(field(&r.report, "/connections/open_at_end"), 20);
    // Every ping answered and counted: at least each socket's first burst
    // of 100, at most what 100 every 100 ms for 3 s can be (with a burst
    // to spare at each end).
    let pings = field(&r.report, "/workloads/0/ws/server_pings");
    assert!((2_000..=20 * 100 * 32).contains(&pings), "{pings} pings answered");
}

/// The coordinated-omission proof over WebSocket: the target is stopped
/// (SIGSTOP) for 1 s in the middle of an open-loop echo run. Messages due
/// during the stall are timed from when they were due, so p99 shows it
/// while the median stays low.
#[test]
fn a_stalled_echo_shows_in_p99_not_p50() {
    let _heavy = heavy_lock();
    let target = BuiltinTarget::start(&[]);
    let url = ws_url(&target, "/ws");
    let metrics = format!("127.0.0.1:{}", free_port());
    let report = util::temp_path("ws-co", "json");
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
        "--ws-message",
        "hi",
        "--metrics-listen",
        &metrics,
        "--report",
        report.to_str().unwrap(),
    ]);
    wait_until(
        || scrape(&metrics).is_some_and(|m| metric_sum(&m, "soakd_responses_total") >= 1000.0),
        Duration::from_secs(20),
        "2 s of echoes (1,000)",
    );
    // The stall under test: the target stays frozen for 1 s.
    util::stall_then_stop(
        &child,
        || util::signal(target.pid(), "STOP"),
        || util::signal(target.pid(), "CONT"),
    );
    let (status, stderr) = wait_with_timeout(child, 30);
    assert!(status.success(), "{stderr}");
    let rep: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let _ = std::fs::remove_file(&report);
    let p99 = field_f64(&rep, "/latency_seconds/p99");
    let p50 = field_f64(&rep, "/latency_seconds/p50");
    assert!(p99 >= 0.7, "p99 {p99}: the stall was not measured");
    assert!(p50 < 0.1, "p50 {p50}");
    // The schedule was kept: about 500/s, stall included.
    assert!(field_f64(&rep, "/requests/per_second") >= 450.0, "{}", rep["requests"]);
    assert_eq!(errors(&rep), Default::default());
}

/// ws-no-pong seen by soakd: held sockets ping every 200 ms with a 300 ms
/// ping timeout; against the plain target every ping gets its pong and
/// nothing fails, against ws-no-pong every socket ends as exactly
/// `ws_ping_timeout` (no other kind) and its slot reconnects.
#[test]
fn unanswered_pings_time_out_as_ws_ping_timeout() {
    for (fault, answered) in [(None, true), (Some("ws-no-pong"), false)] {
        let target = BuiltinTarget::start(&fault.map_or(vec![], |f| vec!["--fault", f]));
        let url = ws_url(&target, "/ws");
        let r = soakd_report(
            &[
                "run",
                &url,
                "-c",
                "5",
                "-d",
                "3s",
                "--ws-ping",
                "200ms",
                "--ws-ping-timeout",
                "300ms",
                "--metrics-listen",
                "off",
            ],
            30,
        );
        assert!(r.status.success(), "{}", r.stderr);
        let pings = field(&r.report, "/workloads/0/ws/pings");
        let pongs = field(&r.report, "/workloads/0/ws/pongs");
        let opened = field(&r.report, "/connections/opened");
        if answered {
            assert!(pings >= 20, "{pings} pings");
            // A ping sent just before the stop may miss its pong.
            assert!(pongs + 5 >= pings && pongs > 0, "{pongs} pongs for {pings} pings");
            assert_eq!(errors(&r.report), Default::default(), "{}", r.stderr);
            assert_eq!(opened, 5);
        } else {
            assert_eq!(pongs, 0, "{fault:?}: {pings} pings");
            let errs = errors(&r.report);
            assert_eq!(errs.keys().collect::<Vec<_>>(), ["ws_ping_timeout"], "{}", r.stderr);
            // Each socket that ended, ended so; the slots came back
            // (through the backoff) and timed out again.
            let ended = opened - field(&r.report, "/connections/open_at_end");
            assert_eq!(errs["ws_ping_timeout"], ended, "{}", r.report["connections"]);
            assert!(ended >= 10, "{ended} sockets timed out in 3 s");
            assert_eq!(field(&r.report, "/connections/closed_by_reason/error"), ended);
            assert!(r.stderr.contains("--ws-ping-timeout"), "{}", r.stderr);
        }
    }
}

/// `--expect-message-contains`: a reply without the text is a failed body
/// check, counted per reply, and the socket is kept (no error, no
/// reconnect); a reply with it passes.
#[test]
fn message_checks_count_failures_and_keep_the_socket() {
    let target = BuiltinTarget::start(&[]);
    let url = ws_url(&target, "/ws");
    for (expect, failing) in [("ell", false), ("bye", true)] {
        let r = soakd_report(
            &[
                "run",
                &url,
                "-c",
                "5",
                "-i",
                "50ms",
                "-d",
                "2s",
                "--ws-message",
                "hello",
                "--expect-message-contains",
                expect,
                "--metrics-listen",
                "off",
            ],
            30,
        );
        assert!(r.status.success() || failing, "{}", r.stderr);
        let rep = &r.report;
        let replies = field(rep, "/workloads/0/ws/replies");
        assert!(replies >= 100, "{expect}: {replies} replies");
        let failed = field(rep, "/checks/body");
        assert_eq!(failed, if failing { replies } else { 0 }, "{expect}: {}", rep["checks"]);
        assert_eq!(errors(rep), Default::default(), "{expect}: {}", r.stderr);
        assert_eq!(field(rep, "/connections/opened"), 5, "{expect}: the sockets were kept");
    }
}

/// `--ws-reply none` on the push route: messages go out on the schedule
/// untimed (a request timeout shorter than the run never fires), and the
/// server's pushes are still counted as received.
#[test]
fn untimed_messages_and_pushes_are_counted() {
    let target = BuiltinTarget::start(&[]);
    let url = ws_url(&target, "/ws/push?every=100ms");
    let r = soakd_report(
        &[
            "run",
            &url,
            "-c",
            "5",
            "-i",
            "100ms",
            "-d",
            "2s",
            "--request-timeout",
            "200ms",
            "--ws-message",
            "ignored",
            "--ws-reply",
            "none",
            "--metrics-listen",
            "off",
        ],
        30,
    );
    assert!(r.status.success(), "{}", r.stderr);
    let rep = &r.report;
    assert_eq!(errors(rep), Default::default(), "{}", r.stderr);
    let w = &rep["workloads"][0]["ws"];
    let sent = field(rep, "/workloads/0/ws/messages_sent");
    let received = field(rep, "/workloads/0/ws/messages_received");
    assert!((50..=120).contains(&sent), "{w:#}");
    assert!(received >= 50, "{w:#}");
    assert_eq!(field(rep, "/workloads/0/ws/replies"), 0, "{w:#}");
    assert_eq!(field(rep, "/requests/sent"), 0, "{}", rep["requests"]);
    assert_eq!(field(rep, "/connections/opened"), 5);
}

/// Subscribe mode records each socket's longest silence per 1 s interval,
/// including a silence still running: pushes every 3 s (longer than the
/// interval) show silences of about 1, 2 and 3 s, though no push ends
/// the shorter ones.
#[test]
fn a_running_silence_is_recorded_each_interval() {
    let target = BuiltinTarget::start(&[]);
    let url = ws_url(&target, "/ws/push?every=3s");
    let r = soakd_report(
        &[
            "run",
            &url,
            "-c",
            "4",
            "-d",
            "5s",
            "--ws-subscribe",
            "go",
            "--metrics-listen",
            "off",
        ],
        30,
    );
    assert!(r.status.success(), "{}", r.stderr);
    let s = &r.report["workloads"][0]["ws"]["silence_seconds"];
    // About one sample per socket and second (4 sockets, ~4 intervals
    // after the ramp), not one per push (a push every 3 s: ~4 in all).
    let count = s["count"].as_u64().unwrap();
    assert!((10..=24).contains(&count), "{s:#}");
    let (min, max) = (s["min"].as_f64().unwrap(), s["max"].as_f64().unwrap());
    assert!(min < 1.3, "a short running silence: {s:#}");
    assert!((2.5..3.6).contains(&max), "the longest silence, ~3 s: {s:#}");
}

/// SIGHUP reload of a WebSocket setting (`ws_ping` off → 100ms): the
/// workload's sockets are recycled onto the new settings and ping from
/// then on. Beside it an HTTP workload has no `soakd_ws_*` series, while
/// the ws workload has them (zero) from the start.
#[test]
fn sighup_reloads_a_ws_setting() {
    let target = BuiltinTarget::start(&[]);
    let metrics = format!("127.0.0.1:{}", free_port());
    let dir = util::TempDir::new("ws-reload");
    let path = dir.path().join("soak.toml");
    let config = |ping: &str| {
        format!(
            "metrics_listen = \"{metrics}\"\n\
             [[workload]]\nname = \"h\"\nurl = \"{}\"\nconnections = 2\ninterval = \"100ms\"\n\
             [[workload]]\nname = \"w\"\nurl = \"{}\"\nconnections = 5\nws_ping = \"{ping}\"\n",
            target.url("/"),
            ws_url(&target, "/ws")
        )
    };
    std::fs::write(&path, config("off")).unwrap();
    let child = spawn_soakd(&["run", "--config", path.to_str().unwrap()]);
    let at = |m: &std::collections::HashMap<String, f64>, series: &str| m.get(series).copied();
    let w_open = "soakd_connections{target=\"w\",state=\"open\"}";
    let m = util::wait_for(
        || {
            let m = scrape(&metrics)?;
            (at(&m, w_open) == Some(5.0) && at(&m, "soakd_connections{target=\"h\",state=\"open\"}") == Some(2.0))
                .then_some(m)
        },
        Duration::from_secs(10),
        "5 WebSockets and 2 HTTP connections open",
    );
    assert_eq!(at(&m, "soakd_ws_closes_total{target=\"w\",code=\"normal\"}"), Some(0.0));
    assert_eq!(at(&m, "soakd_ws_pings_total{target=\"w\"}"), Some(0.0));
    let http_ws: Vec<&String> = m
        .keys()
        .filter(|k| k.starts_with("soakd_ws_") && k.contains("target=\"h\""))
        .collect();
    assert!(http_ws.is_empty(), "ws series for an HTTP target: {http_ws:?}");
    util::wait_for_handler(child.id(), "HUP");
    std::fs::write(&path, config("100ms")).unwrap();
    util::signal(child.id(), "HUP");
    wait_until(
        || {
            scrape(&metrics).is_some_and(|m| {
                at(&m, "soakd_ws_pongs_total{target=\"w\"}").unwrap_or(0.0) >= 10.0 && at(&m, w_open) == Some(5.0)
            })
        },
        Duration::from_secs(15),
        "the reloaded sockets to ping and get pongs",
    );
    util::signal(child.id(), "TERM");
    let (status, stderr) = wait_with_timeout(child, 20);
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains("config reloaded"), "{stderr}");
}

/// SIGHUP reload that turns an HTTP workload into a WebSocket one (same
/// name, `url` now the target's `/ws` echo, with a message and an
/// interval): its `soakd_ws_*` series appear and grow, and the report has
/// its `ws` section. Regression: only a workload a reload *added* was
/// flagged, so a switched one fed ws counters no scrape showed.
#[test]
fn sighup_switching_http_to_ws_and_back_shows_then_removes_the_ws_series() {
    let target = BuiltinTarget::start(&[]);
    let metrics = format!("127.0.0.1:{}", free_port());
    let dir = util::TempDir::new("ws-switch");
    let path = dir.path().join("soak.toml");
    let report = dir.path().join("report.json");
    let config = |url: &str, ws: &str| {
        format!(
            "metrics_listen = \"{metrics}\"\n\
             [[workload]]\nname = \"s\"\nurl = \"{url}\"\nconnections = 3\ninterval = \"100ms\"\n{ws}"
        )
    };
    std::fs::write(&path, config(&target.url("/"), "")).unwrap();
    let child = spawn_soakd(&[
        "run",
        "--config",
        path.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    let sent = "soakd_ws_messages_sent_total{target=\"s\"}";
    let m = util::wait_for(
        || {
            let m = scrape(&metrics)?;
            (m.get("soakd_requests_sent_total{target=\"s\"}").copied().unwrap_or(0.0) >= 5.0).then_some(m)
        },
        Duration::from_secs(10),
        "the HTTP workload to send requests",
    );
    assert_eq!(m.get(sent), None, "ws series for an HTTP workload");
    util::wait_for_handler(child.id(), "HUP");
    std::fs::write(&path, config(&ws_url(&target, "/ws"), "ws_message = \"hi\"\n")).unwrap();
    util::signal(child.id(), "HUP");
    let first = util::wait_for(
        || scrape(&metrics)?.get(sent).copied().filter(|v| *v > 0.0),
        Duration::from_secs(15),
        "soakd_ws_messages_sent_total of the switched workload",
    );
    wait_until(
        || {
            scrape(&metrics)
                .and_then(|m| m.get(sent).copied())
                .is_some_and(|v| v >= first + 10.0)
        },
        Duration::from_secs(15),
        "soakd_ws_messages_sent_total to grow",
    );
    let m = scrape(&metrics).expect("a scrape");
    assert_eq!(
        m.get("soakd_ws_closes_total{target=\"s\",code=\"normal\"}"),
        Some(&0.0),
        "every ws series is present"
    );
    assert!(
        m.get("soakd_ws_messages_received_total{target=\"s\"}")
            .is_some_and(|v| *v > 0.0)
    );
    // And back to HTTP: the series go, the report keeps what the sockets
    // saw, under the mode `none`.
    let sent_before = m[sent];
    let requests = "soakd_requests_sent_total{target=\"s\"}";
    let http_before = m[requests];
    std::fs::write(&path, config(&target.url("/"), "")).unwrap();
    util::signal(child.id(), "HUP");
    wait_until(
        || {
            scrape(&metrics)
                .is_some_and(|m| !m.contains_key(sent) && m.get(requests).is_some_and(|v| *v >= http_before + 10.0))
        },
        Duration::from_secs(15),
        "the ws series to go and HTTP requests to flow again",
    );
    util::signal(child.id(), "TERM");
    let (status, stderr) = wait_with_timeout(child, 20);
    assert!(status.success(), "{stderr}");
    let rep: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let w = &rep["workloads"][0]["ws"];
    assert!(
        w.is_object(),
        "no ws section after the switch back: {:#}",
        rep["workloads"][0]
    );
    assert_eq!(w["mode"], "none", "{w:#}");
    assert!(
        field(&rep, "/workloads/0/ws/messages_sent") >= sent_before as u64,
        "{w:#}"
    );
    assert!(field(&rep, "/workloads/0/ws/replies") > 0, "{w:#}");
    assert!(field(&rep, "/workloads/0/ws/upgrades") >= 3, "{w:#}");
}
