//! gRPC unary soaks through the HTTP/2 engine against a server no one here
//! wrote: grpcio (Python, tests/peers/grpc_server.py) serving
//! tests/proto/echo.proto with reflection.
//!
//! Shown here: `soakd run grpc://... --call` from `--proto`, from
//! `--protoset` and from the server's reflection completes every call with
//! OK and 0 errors, and grpcio counts as many calls as soakd does; the
//! report's `grpc` figures hold all 17 codes; bad input exits 2.

mod util;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use util::{
    Prometheus, PyPeer, TempDir, free_port, grpc_python, soakd_report, soakd_timeout, spawn_soakd, wait_for,
    wait_with_timeout,
};

const CALL: &str = "soakd.test.v1.Echo/Unary";

fn proto_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/proto")
}

/// grpcio serving the test service with v1alpha reflection, and its stats
/// file; `None` when the venv lacks grpcio.
fn server(dir: &TempDir) -> Option<(PyPeer, PathBuf)> {
    grpc_python()?;
    let stats = dir.path().join("stats.json");
    let peer = PyPeer::start("grpc_server.py", &[&proto_dir(), &stats, &"v1alpha"])?;
    Some((peer, stats))
}

/// Unary calls grpcio has answered (0 before its first call).
fn server_calls(stats: &PathBuf) -> u64 {
    let Ok(bytes) = std::fs::read(stats) else { return 0 };
    let v: serde_json::Value = serde_json::from_slice(&bytes).expect("JSON");
    v["calls"]["Unary"].as_u64().unwrap_or(0)
}

/// `soakd run` of the unary method on `url` with the schema from `proto`,
/// then `rest`; its report within `timeout_s`.
fn run_call(url: &str, proto: &str, rest: &[&str], timeout_s: u64) -> util::RunResult {
    let mut args = vec!["run", url, "--call", CALL, "--proto", proto];
    args.extend_from_slice(rest);
    soakd_report(&args, timeout_s)
}

/// Runs `n` unary calls with the schema `schema` and checks both sides.
fn unary_run(port: u16, stats: &PathBuf, schema: &[&str], n: u64) {
    let url = format!("grpc://127.0.0.1:{port}");
    let before = server_calls(stats);
    let n_s = n.to_string();
    let mut args = vec![
        "run",
        url.as_str(),
        "--call",
        CALL,
        "--data",
        r#"{"text": "soak"}"#,
        "-c",
        "4",
        "--streams",
        "4",
        "--requests",
        &n_s,
        "--source-addr",
        "127.0.31.2",
        "--metrics-listen",
        "off",
    ];
    args.extend_from_slice(schema);
    let r = soakd_report(&args, 60);
    assert!(r.status.success(), "{schema:?}: exit {}\n{}", r.status, r.stderr);
    assert_eq!(util::total_errors(&r.report), 0, "{schema:?}: {}", r.report);
    let w = &r.report["workloads"][0];
    let grpc = &w["http"]["grpc"];
    assert_eq!(grpc["method"], CALL, "{w}");
    let calls = grpc["calls"].as_object().expect("calls by code");
    assert_eq!(calls.len(), 17, "every code is listed: {calls:?}");
    assert_eq!(calls["ok"], n, "{calls:?}");
    assert_eq!(calls.values().map(|v| v.as_u64().unwrap()).sum::<u64>(), n);
    assert_eq!(grpc["error_rate"], 0.0, "{grpc}");
    assert_eq!(
        server_calls(stats) - before,
        n,
        "grpcio's count equals soakd's ({schema:?})"
    );
}

#[test]
fn unary_calls_from_proto_protoset_and_reflection_all_complete() {
    let dir = TempDir::new("grpc-unary");
    let Some((peer, stats)) = server(&dir) else { return };
    let proto = proto_dir().join("echo.proto").display().to_string();
    let import = proto_dir().display().to_string();
    unary_run(peer.port, &stats, &["--proto", &proto, "--import-path", &import], 500);
    let set = dir.path().join("echo.protoset");
    let ok = Command::new(grpc_python().unwrap())
        .args(["-m", "grpc_tools.protoc", "--include_imports"])
        .arg(format!("-I{import}"))
        .arg(format!("--descriptor_set_out={}", set.display()))
        .arg("echo.proto")
        .status()
        .expect("run grpc_tools.protoc");
    assert!(ok.success());
    unary_run(peer.port, &stats, &["--protoset", &set.display().to_string()], 500);
    // Neither: the schema comes from the server's reflection (v1alpha).
    unary_run(peer.port, &stats, &[], 500);
}

/// Calls that end with a status other than OK are the `grpc_error_rate`
/// threshold's figure: grpcio fails every 4th call UNAVAILABLE, so a
/// limit of 10% fails (exit 3) and one of 30% passes, in the same run;
/// the report's figure is the same quarter. On a workload that makes no
/// gRPC call the threshold is bad input.
#[test]
fn grpc_error_rate_threshold_judges_the_non_ok_calls() {
    let dir = TempDir::new("grpc-error-rate");
    let Some((peer, _stats)) = server(&dir) else { return };
    let url = format!("grpc://127.0.0.1:{}", peer.port);
    let proto = proto_dir().join("echo.proto").display().to_string();
    let r = run_call(
        &url,
        &proto,
        &[
            "--data",
            r#"{"text": "abort-every-4"}"#,
            "-c",
            "1",
            "--requests",
            "400",
            "--threshold",
            "grpc_error_rate<=10%",
            "--threshold",
            "grpc_error_rate<=30%",
            "--source-addr",
            "127.0.31.6",
            "--metrics-listen",
            "off",
        ],
        60,
    );
    assert_eq!(r.status.code(), Some(3), "a failed threshold\n{}", r.stderr);
    let grpc = &r.report["workloads"][0]["http"]["grpc"];
    // --requests counts answers (OK): the failed calls come on top, one
    // in four of all calls (one connection, one stream: in order).
    let (ok, unavailable) = (
        grpc["calls"]["ok"].as_u64().unwrap(),
        grpc["calls"]["unavailable"].as_u64().unwrap(),
    );
    assert_eq!(ok, 400, "{grpc}");
    assert_eq!(unavailable, (ok + unavailable) / 4, "{grpc}");
    let rate = unavailable as f64 / (ok + unavailable) as f64;
    assert_eq!(grpc["error_rate"].as_f64(), Some(rate), "{grpc}");
    let th = r.report["thresholds"].as_array().expect("thresholds");
    let judged: Vec<(bool, f64)> = th
        .iter()
        .map(|t| (t["pass"].as_bool().unwrap(), t["measured"].as_f64().unwrap()))
        .collect();
    assert_eq!(judged, vec![(false, rate), (true, rate)], "{th:?}");
    // The summary says it too.
    let line = format!(
        "{CALL}  calls {}  non-OK {unavailable} ({:.3}%): unavailable {unavailable}",
        ok + unavailable,
        rate * 100.0
    );
    assert!(r.stderr.contains(&line), "{line:?} in\n{}", r.stderr);

    let out = soakd_timeout(
        &[
            "run",
            "http://127.0.0.1:1/",
            "--threshold",
            "grpc_error_rate<1%",
            "-d",
            "1s",
        ],
        30,
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no workload makes gRPC calls"), "{err}");
}

/// The dashboard's gRPC row and SoakdGrpcErrorRatio against a real
/// Prometheus loading grafana/rules.yml and alerts.yml, scraping soakd
/// while grpcio fails every 4th call: every query of the row returns
/// series, the non-OK ratio is the quarter, and the alert is pending (its
/// `for` is 10 minutes: grafana/tests/grpc_test.yml tests the firing).
#[test]
fn the_grpc_row_and_alert_read_soakd_in_prometheus() {
    let dir = TempDir::new("grpc-dashboard");
    let Some((peer, _stats)) = server(&dir) else { return };
    let metrics = format!("127.0.0.1:{}", free_port());
    let Some(prom) = Prometheus::start(&[&metrics], &["grafana/rules.yml", "grafana/alerts.yml"]) else {
        return;
    };
    let url = format!("grpc://127.0.0.1:{}", peer.port);
    let proto = proto_dir().join("echo.proto").display().to_string();
    let child = spawn_soakd(&[
        "run",
        &url,
        "--call",
        CALL,
        "--proto",
        &proto,
        "--data",
        r#"{"text": "abort-every-4"}"#,
        "-c",
        "2",
        "-r",
        "200",
        "-d",
        "40s",
        "--source-addr",
        "127.0.31.7",
        "--metrics-listen",
        &metrics,
    ]);
    let queries = util::dashboard_row_queries("gRPC");
    for (title, expr) in &queries {
        wait_for(
            || (!prom.query(expr).is_empty()).then_some(()),
            Duration::from_secs(30),
            &format!("data for panel {title:?}: {expr}"),
        );
    }
    let asked = queries.len();
    assert!(asked >= 2, "{asked} queries");
    let ratio = prom.query("target_method:soakd_grpc_non_ok_ratio:rate5m");
    assert_eq!(ratio.len(), 1, "{ratio:?}");
    assert_eq!(ratio[0].0["method"], CALL);
    assert!((ratio[0].1 - 0.25).abs() < 0.03, "{ratio:?}");
    wait_for(
        || {
            let v = prom.query("ALERTS{alertname=\"SoakdGrpcErrorRatio\",alertstate=\"pending\"}");
            (!v.is_empty()).then_some(())
        },
        Duration::from_secs(20),
        "SoakdGrpcErrorRatio pending",
    );
    util::signal(child.id(), "TERM");
    let (status, stderr) = wait_with_timeout(child, 60);
    assert!(status.success(), "{stderr}");
}

/// `--h2-ping` against grpcio's keepalive enforcement. A server that
/// allows pings this often ACKs every one: the report has the PINGs and
/// their round trips, and no error. A server whose policy forbids them
/// (`min_ping_interval_without_data_ms` far above `--h2-ping`, two strikes
/// allowed) sends GOAWAY ENHANCE_YOUR_CALM "too_many_pings": classified as
/// `too_many_pings`, and the log names the server's policy and the fix.
#[test]
fn h2_ping_is_timed_and_a_server_forbidding_it_is_too_many_pings() {
    let dir = TempDir::new("grpc-ping");
    if grpc_python().is_none() {
        return;
    }
    let stats = dir.path().join("stats.json");
    let proto = proto_dir().join("echo.proto").display().to_string();
    let run = |options: &str, load: &[&str], source: &str| {
        let peer = PyPeer::start_env(
            "grpc_server.py",
            &[&proto_dir(), &stats, &"v1alpha"],
            &[("SOAKD_GRPC_OPTIONS", options), ("SOAKD_GRPC_LAZY_STATS", "1")],
        )
        .expect("grpcio");
        let url = format!("grpc://127.0.0.1:{}", peer.port);
        let mut args = vec![
            "run",
            url.as_str(),
            "--call",
            CALL,
            "--proto",
            proto.as_str(),
            "--h2-ping",
            "100ms",
            "-d",
            "3s",
            "--source-addr",
            source,
            "--metrics-listen",
            "off",
        ];
        args.extend_from_slice(load);
        soakd_report(&args, 60)
    };

    let allowed = r#"[["grpc.http2.min_ping_interval_without_data_ms", 10], ["grpc.keepalive_permit_without_calls", 1], ["grpc.http2.max_ping_strikes", 0]]"#;
    let r = run(allowed, &["-c", "2", "-r", "50"], "127.0.31.8");
    assert!(r.status.success(), "exit {}\n{}", r.status, r.stderr);
    assert_eq!(util::total_errors(&r.report), 0, "{}", r.report);
    let ping = &r.report["workloads"][0]["http"]["ping"];
    let (sent, acked) = (ping["sent"].as_u64().unwrap(), ping["acked"].as_u64().unwrap());
    // 2 connections × ~3 s / 100 ms, the first at a random point of the
    // first interval; at most one per connection unanswered at the end.
    assert!(sent >= 40, "{ping}");
    assert!(acked + 2 >= sent && acked <= sent, "{ping}");
    assert_eq!(ping["rtt_seconds"]["count"].as_u64(), Some(acked), "{ping}");
    assert!(ping["rtt_seconds"]["p99"].as_f64().unwrap() > 0.0, "{ping}");
    assert!(
        r.stderr.contains(&format!("pings {sent} (acked {acked}, rtt p99 ")),
        "{}",
        r.stderr
    );

    let strict = r#"[["grpc.http2.min_ping_interval_without_data_ms", 60000], ["grpc.http2.max_ping_strikes", 1]]"#;
    let r = run(strict, &["-c", "1", "-i", "10s"], "127.0.31.9");
    let pings = r.report["errors"]["too_many_pings"].as_u64().unwrap_or(0);
    assert!(pings >= 1, "{}\n{}", r.report["errors"], r.stderr);
    assert_eq!(
        r.report["errors"]["goaway_error"].as_u64().unwrap_or(0),
        0,
        "{}",
        r.report["errors"]
    );
    assert!(
        r.stderr.contains("too_many_pings")
            && r.stderr
                .contains("--h2-ping 100ms is more often than its keepalive policy allows"),
        "{}",
        r.stderr
    );
    // On a workload that does not speak HTTP/2: bad input.
    let out = soakd_timeout(&["run", "http://127.0.0.1:1/", "--h2-ping", "1s", "-d", "1s"], 30);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--h2-ping is HTTP/2's keepalive and this workload speaks HTTP/1.1"),
        "{err}"
    );
}

/// A server slower than `--request-timeout`: soakd sends the deadline as
/// `grpc-timeout`, and grpcio enforces it too. Each call ends once, as
/// either the server's DEADLINE_EXCEEDED (a `grpc_status` error counted
/// under `deadline_exceeded`) or soakd's own expiry (`timeout`), never
/// both; nothing hangs and the run ends on time. (soakd's clock starts
/// when it writes the call, the server's when it reads it: soakd's own
/// expiry is normally first.) On a connection that keeps talking (here
/// PING ACKs, `--h2-ping`) soakd's expiry cancels the one stream
/// (RST_STREAM CANCEL), as a gRPC client cancels one call: the
/// connection lives through every timeout.
#[test]
fn a_server_past_the_deadline_ends_each_call_once() {
    let dir = TempDir::new("grpc-deadline");
    if grpc_python().is_none() {
        return;
    }
    let stats = dir.path().join("stats.json");
    let proto = proto_dir().join("echo.proto").display().to_string();
    let pings = r#"[["grpc.http2.min_ping_interval_without_data_ms", 10], ["grpc.keepalive_permit_without_calls", 1], ["grpc.http2.max_ping_strikes", 0]]"#;
    for (options, extra, source) in [
        ("[]", &["-c", "2"][..], "127.0.31.10"),
        (
            pings,
            &["-c", "1", "--streams", "4", "--h2-ping", "100ms"][..],
            "127.0.31.12",
        ),
    ] {
        let peer = PyPeer::start_env(
            "grpc_server.py",
            &[&proto_dir(), &stats, &"v1alpha"],
            &[("SOAKD_GRPC_OPTIONS", options), ("SOAKD_GRPC_LAZY_STATS", "1")],
        )
        .expect("grpcio");
        let url = format!("grpc://127.0.0.1:{}", peer.port);
        let started = std::time::Instant::now();
        let mut args = vec![
            "--data",
            r#"{"text": "sleep-ms-1000"}"#,
            "--request-timeout",
            "300ms",
            "-d",
            "3s",
            "--source-addr",
            source,
            "--metrics-listen",
            "off",
        ];
        args.extend_from_slice(extra);
        let r = run_call(&url, &proto, &args, 60);
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no hang: {:?}",
            started.elapsed()
        );
        let w = &r.report["workloads"][0];
        let sent = w["requests"]["sent"].as_u64().unwrap();
        let timeouts = r.report["errors"]["timeout"].as_u64().unwrap_or(0);
        let server = w["http"]["grpc"]["calls"]["deadline_exceeded"].as_u64().unwrap();
        let status_errors = r.report["errors"]["grpc_status"].as_u64().unwrap_or(0);
        let in_flight = w["requests"]["in_flight_at_end"].as_u64().unwrap_or(0);
        assert!(sent >= 10, "{extra:?}: 3 s / 300 ms per stream: {sent}");
        assert_eq!(w["http"]["grpc"]["calls"]["ok"], 0, "no call answered");
        assert_eq!(status_errors, server, "every non-OK status is deadline_exceeded");
        assert_eq!(sent, timeouts + server + in_flight, "{extra:?}: each call ended once");
        if options == pings {
            assert!(timeouts >= 10, "{}", r.report["errors"]);
            assert_eq!(
                w["connections"]["opened"], 1,
                "timeouts on a talking connection cancel their streams only: {}",
                w["connections"]
            );
        }
    }
}

/// `expect_grpc_status` (a config key, per workload or request): the
/// codes listed end a call well. grpcio fails every 4th call UNAVAILABLE;
/// with `["ok", "unavailable"]` those calls are answers, not errors, and
/// still counted by code. An HTTP check on a gRPC workload, and a name
/// that is no code, are bad input.
#[test]
fn expect_grpc_status_lists_the_codes_that_end_a_call_well() {
    let dir = TempDir::new("grpc-expect");
    let Some((peer, _stats)) = server(&dir) else { return };
    let proto = proto_dir().join("echo.proto").display().to_string();
    let config = |extra: &str| {
        let path = dir.path().join("soak.toml");
        std::fs::write(
            &path,
            format!(
                "[[workload]]\nurl = \"grpc://127.0.0.1:{}\"\ncall = \"{CALL}\"\nproto = [{proto:?}]\ndata = '{{\"text\": \"abort-every-4\"}}'\nconnections = 1\nsource_addrs = [\"127.0.31.11\"]\n{extra}\n",
                peer.port
            ),
        )
        .unwrap();
        path.display().to_string()
    };
    let path = config(r#"expect_grpc_status = ["ok", "unavailable"]"#);
    let r = soakd_report(
        &["run", "--config", &path, "--requests", "400", "--metrics-listen", "off"],
        60,
    );
    assert!(r.status.success(), "exit {}\n{}", r.status, r.stderr);
    assert_eq!(util::total_errors(&r.report), 0, "{}", r.report["errors"]);
    let calls = &r.report["workloads"][0]["http"]["grpc"]["calls"];
    assert_eq!(
        calls["ok"].as_u64().unwrap() + calls["unavailable"].as_u64().unwrap(),
        400,
        "{calls}"
    );
    assert_eq!(calls["unavailable"], 100, "{calls}");

    // expect_grpc_message: the decoded reply holds what is given (its
    // canonical form: an unset number is 0, an int64 a string); checked
    // on OK replies only, so the 100 UNAVAILABLE calls are not judged.
    let ok_listed = r#"expect_grpc_status = ["ok", "unavailable"]"#;
    for (want, failed) in [
        (r#"{"echo": {"text": "abort-every-4", "number": 0, "big": 0}}"#, 0),
        (r#"{"echo": {"text": "other"}}"#, 300),
    ] {
        let path = config(&format!("{ok_listed}\nexpect_grpc_message = '{want}'"));
        let r = soakd_report(
            &["run", "--config", &path, "--requests", "400", "--metrics-listen", "off"],
            60,
        );
        // Failed checks are counted, as HTTP's are; a threshold fails the run.
        assert!(r.status.success(), "{want}: exit {}\n{}", r.status, r.stderr);
        let rep = &r.report;
        assert_eq!(util::total_errors(rep), 0, "{want}: {}", rep["errors"]);
        assert_eq!(rep["checks"]["body"], failed, "{want}: {}", rep["checks"]);
        assert_eq!(
            rep["connections"]["opened"], 1,
            "{want}: a failed check keeps the connection"
        );
    }

    for (extra, message) in [
        (
            "expect_status = [200]",
            "expect_status checks an HTTP response, and a gRPC call's answer is a status: use",
        ),
        (
            r#"expect_grpc_status = ["ok", "gone"]"#,
            r#""gone" is not a gRPC status code; expected one of ok, cancelled"#,
        ),
        (
            r#"expect_grpc_message = '{"echo": {"nope": 1}}'"#,
            "expect_grpc_message: ",
        ),
        (
            r#"expect_grpc_message = '[1]'"#,
            "is not a JSON object; give the fields the reply must contain",
        ),
    ] {
        let out = soakd_timeout(&["check", "--config", &config(extra)], 30);
        assert_eq!(out.status.code(), Some(2), "{extra}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(message), "{extra}: {err}");
    }
    // The gRPC keys on an HTTP workload (or one of its requests).
    let http = dir.path().join("http.toml");
    for extra in [
        "expect_grpc_status = [\"ok\"]",
        "[[workload.request]]\npath = \"/\"\nexpect_grpc_message = '{}'",
    ] {
        std::fs::write(&http, format!("[[workload]]\nurl = \"http://127.0.0.1:1/\"\n{extra}\n")).unwrap();
        let out = soakd_timeout(&["check", "--config", &http.display().to_string()], 30);
        assert_eq!(out.status.code(), Some(2), "{extra}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("checks a gRPC call, and this workload speaks HTTP"),
            "{extra}: {err}"
        );
    }
}

/// grpcio ages every connection out after 2 s (GOAWAY, a 1 s grace, then
/// the close): an open-loop unary soak across the rotations loses nothing
/// (calls above a GOAWAY's last stream are sent again on the next
/// connection) and grpcio answers exactly what soakd counts. The 60 s
/// run at 2,000 calls/s is in docs/grpc.md; this is its short form.
#[test]
fn connection_ageing_loses_no_call() {
    let dir = TempDir::new("grpc-ageing");
    if grpc_python().is_none() {
        return;
    }
    let stats = dir.path().join("stats.json");
    let options = r#"[["grpc.max_connection_age_ms", 2000], ["grpc.max_connection_age_grace_ms", 1000]]"#;
    let peer = PyPeer::start_env(
        "grpc_server.py",
        &[&proto_dir(), &stats, &"v1alpha"],
        &[("SOAKD_GRPC_OPTIONS", options), ("SOAKD_GRPC_LAZY_STATS", "1")],
    )
    .expect("grpcio");
    let url = format!("grpc://127.0.0.1:{}", peer.port);
    let proto = proto_dir().join("echo.proto").display().to_string();
    let r = run_call(
        &url,
        &proto,
        &[
            "-c",
            "10",
            "--streams",
            "10",
            "-r",
            "1000",
            "-d",
            "12s",
            "--source-addr",
            "127.0.31.5",
            "--metrics-listen",
            "off",
        ],
        60,
    );
    assert!(r.status.success(), "exit {}\n{}", r.status, r.stderr);
    assert_eq!(util::total_errors(&r.report), 0, "{}", r.report);
    let w = &r.report["workloads"][0];
    let rotations = w["connections"]["closed_by_reason"]["server_close"].as_u64().unwrap();
    assert!(
        rotations >= 30,
        "10 connections aged out every 2-3 s for 12 s: {rotations}"
    );
    let ok = w["http"]["grpc"]["calls"]["ok"].as_u64().unwrap();
    assert!(ok >= 10_000, "{ok}");
    util::wait_until(
        || server_calls(&stats) == ok,
        std::time::Duration::from_secs(5),
        "grpcio's count",
    );
}

#[test]
fn bad_grpc_input_exits_2_before_anything_opens() {
    let dir = TempDir::new("grpc-bad");
    let Some((peer, stats)) = server(&dir) else { return };
    let url = format!("grpc://127.0.0.1:{}", peer.port);
    let proto = proto_dir().join("echo.proto").display().to_string();
    let cases: &[(&[&str], &str)] = &[
        (
            &["--call", "soakd.test.v1.Echo/Unray", "--proto", &proto],
            "did you mean soakd.test.v1.Echo/Unary",
        ),
        (
            &["--call", CALL, "--proto", &proto, "--data", r#"{"nope": 1}"#],
            "unrecognized field name 'nope'",
        ),
        (&["--proto", &proto], "needs the method to call: give --call"),
        (&["--call", "soakd.test.v1.Nope/X"], "has no service soakd.test.v1.Nope"),
        (
            &["--call", CALL, "--proto", &proto, "--http", "1.1"],
            "gRPC runs on HTTP/2 only",
        ),
    ];
    for (extra, want) in cases {
        let mut args = vec![
            "run",
            url.as_str(),
            "-c",
            "1",
            "--requests",
            "1",
            "--metrics-listen",
            "off",
        ];
        args.extend_from_slice(extra);
        let out = soakd_timeout(&args, 30);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(want), "{extra:?}: {err}");
    }
    let out = soakd_timeout(
        &["run", "http://127.0.0.1:1/", "--call", CALL, "--metrics-listen", "off"],
        30,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is a gRPC setting"));
    assert_eq!(server_calls(&stats), 0, "nothing was called");
}

/// A mix of methods: `[[workload.request]]` tables each naming a call and
/// its message, by weight, schema from grpcio's reflection. Each call is
/// counted by code on its own (the report's requests, and
/// `soakd_grpc_calls_total` by method), grpcio's counts agree, and the
/// same mix as a requests file does the same.
#[test]
fn a_mix_of_methods_counts_each_call_by_code() {
    let dir = TempDir::new("grpc-mix");
    let Some((peer, stats)) = server(&dir) else { return };
    let metrics = format!("127.0.0.1:{}", free_port());
    let config = dir.path().join("mix.toml");
    std::fs::write(
        &config,
        format!(
            r#"[[workload]]
url = "grpc://127.0.0.1:{}"
connections = 2
source_addrs = ["127.0.31.13"]
[[workload.request]]
call = "soakd.test.v1.Echo/Unary"
data = '{{"text": "hi"}}'
weight = 3
[[workload.request]]
name = "lookup miss"
call = "soakd.test.v1.Echo/Lookup"
data = '{{"text": "nobody"}}'
expect_grpc_status = ["ok", "not_found"]
"#,
            peer.port
        ),
    )
    .unwrap();
    let report = dir.path().join("report.json");
    let child = spawn_soakd(&[
        "run",
        "--config",
        &config.display().to_string(),
        "--requests",
        "400",
        "--metrics-listen",
        &metrics,
        "--metrics-linger",
        "5s",
        "--report",
        &report.display().to_string(),
    ]);
    let series = |method: &str, code: &str| {
        format!(
            "soakd_grpc_calls_total{{target=\"127.0.0.1:{}\",method=\"soakd.test.v1.Echo/{method}\",code=\"{code}\"}}",
            peer.port
        )
    };
    let last = wait_for(
        || util::scrape(&metrics).filter(|m| util::metric_sum(m, "soakd_grpc_calls_total") >= 400.0),
        Duration::from_secs(30),
        "400 calls counted on /metrics",
    );
    let (status, stderr) = wait_with_timeout(child, 30);
    assert!(status.success(), "{stderr}");
    assert_eq!(last.get(&series("Unary", "ok")), Some(&300.0), "{last:?}");
    assert_eq!(last.get(&series("Lookup", "not_found")), Some(&100.0), "{last:?}");
    assert_eq!(
        last.get(&series("Lookup", "ok")),
        Some(&0.0),
        "every code present from the start"
    );
    let rep: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(util::total_errors(&rep), 0, "not_found is listed: {}", rep["errors"]);
    let w = &rep["workloads"][0];
    let by = w["by_request"].as_array().unwrap();
    assert_eq!(
        (by[0]["name"].as_str(), by[0]["grpc_calls"]["ok"].as_u64()),
        (Some("soakd.test.v1.Echo/Unary"), Some(300))
    );
    assert_eq!(
        (by[1]["name"].as_str(), by[1]["grpc_calls"]["not_found"].as_u64()),
        (Some("lookup miss"), Some(100))
    );
    assert_eq!(
        w["http"]["grpc"]["method"],
        "soakd.test.v1.Echo/Unary, soakd.test.v1.Echo/Lookup"
    );
    assert!(
        stderr.contains("lookup miss  calls 100  non-OK 100 (100.000%): not_found 100"),
        "{stderr}"
    );
    let server = |m: &str| {
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&stats).unwrap()).unwrap();
        v["calls"][m].as_u64().unwrap_or(0)
    };
    assert_eq!((server("Unary"), server("Lookup")), (300, 100));

    // The same mix as a requests file, with the schema from the .proto.
    std::fs::write(dir.path().join("hi.json"), r#"{"text": "known"}"#).unwrap();
    let calls = dir.path().join("calls.txt");
    std::fs::write(
        &calls,
        "3 soakd.test.v1.Echo/Unary\n@hi.json\n\nsoakd.test.v1.Echo/Lookup\n@hi.json\n",
    )
    .unwrap();
    let proto = proto_dir().join("echo.proto").display().to_string();
    let url = format!("grpc://127.0.0.1:{}", peer.port);
    let r = soakd_report(
        &[
            "run",
            &url,
            "--proto",
            &proto,
            "--requests-file",
            &calls.display().to_string(),
            "--requests",
            "40",
            "-c",
            "1",
            "--source-addr",
            "127.0.31.14",
            "--metrics-listen",
            "off",
        ],
        60,
    );
    assert!(r.status.success(), "{}", r.stderr);
    let by = r.report["workloads"][0]["by_request"].as_array().unwrap().clone();
    assert_eq!(
        (by[0]["grpc_calls"]["ok"].as_u64(), by[1]["grpc_calls"]["ok"].as_u64()),
        (Some(30), Some(10)),
        "{by:?}"
    );

    // Bad mixes: exit 2, nothing started.
    for (extra, says) in [
        (
            "call = \"soakd.test.v1.Echo/Unary\"\n",
            "with several calls (a mix of methods) set the method and message on each request",
        ),
        (
            "[[workload.request]]\ndata = '{}'\n",
            "call is missing; give the method this request calls",
        ),
        (
            "[[workload.request]]\ncall = \"soakd.test.v1.Echo/Subscribe\"\n",
            "is a server_streaming method, and a mix holds unary calls",
        ),
        (
            "[[workload.request]]\ncall = \"soakd.test.v1.Echo/Unary\"\npath = \"/x\"\n",
            "path is an HTTP request's",
        ),
    ] {
        let bad = dir.path().join("bad.toml");
        let text = format!(
            "[[workload]]\nurl = \"grpc://127.0.0.1:{}\"\nproto = [{proto:?}]\n{}[[workload.request]]\ncall = \"soakd.test.v1.Echo/Lookup\"\n",
            peer.port,
            if extra.starts_with("call") { extra } else { "" },
        ) + if extra.starts_with("call") { "" } else { extra };
        std::fs::write(&bad, text).unwrap();
        let out = soakd_timeout(&["check", "--config", &bad.display().to_string()], 30);
        assert_eq!(out.status.code(), Some(2), "{extra}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{extra}: {err}");
    }
}
