//! Verdicts: thresholds and their exit codes, the live threshold gauge and
//! `--abort-on-fail`, `soakd compare` and `soakd run --baseline`, all with
//! the real binary against the built-in target.

mod util;

use std::time::{Duration, Instant};

use serde_json::Value;
use util::{BuiltinTarget, TempDir, free_port, http_get, soakd, soakd_report, spawn_soakd, wait_with_timeout};

/// A short paced soak: 10 connections, 500 req/s, `secs` seconds.
fn soak_args<'a>(url: &'a str, secs: &'a str) -> Vec<&'a str> {
    vec![
        "run",
        url,
        "-c",
        "10",
        "-r",
        "500",
        "-d",
        secs,
        "--metrics-listen",
        "off",
    ]
}

fn thresholds(report: &Value) -> Vec<(String, bool, Option<f64>)> {
    report["thresholds"]
        .as_array()
        .expect("a thresholds array")
        .iter()
        .map(|t| {
            (
                t["threshold"].as_str().unwrap().to_string(),
                t["pass"].as_bool().unwrap(),
                t["measured"].as_f64(),
            )
        })
        .collect()
}

#[test]
fn passing_thresholds_exit_0_and_a_failing_one_exits_3() {
    let target = BuiltinTarget::start(&[]);
    let url = target.url("/");
    let mut args = soak_args(&url, "2s");
    args.extend([
        "--threshold",
        "p99 < 10s",
        "--threshold",
        "errors<1",
        "--threshold",
        "open_min>=10",
        "--threshold",
        "rps>100",
        "--threshold",
        "error_rate<=0.1%",
    ]);
    let ok = soakd_report(&args, 30);
    assert_eq!(ok.status.code(), Some(0), "{}", ok.stderr);
    let got = thresholds(&ok.report);
    assert_eq!(got.len(), 5, "{got:?}");
    assert!(got.iter().all(|(_, pass, _)| *pass), "{got:?}");
    let by = |name: &str| got.iter().find(|t| t.0 == name).unwrap().2.unwrap();
    assert!(by("p99<10s") > 0.0 && by("p99<10s") < 10.0);
    assert_eq!(by("open_min>=10"), 10.0, "every connection held after the ramp");
    assert!(by("rps>100") > 100.0);
    let t = &ok.report["thresholds"][0];
    assert_eq!(
        (t["workload"].clone(), t["metric"].clone(), t["op"].clone()),
        (Value::Null, "p99".into(), "<".into())
    );
    assert!(ok.stderr.contains("PASS  p99<10s"), "{}", ok.stderr);

    // No loopback response takes under a microsecond.
    args.extend(["--threshold", "p50<1us"]);
    let bad = soakd_report(&args, 30);
    assert_eq!(bad.status.code(), Some(3), "{}", bad.stderr);
    let got = thresholds(&bad.report);
    assert_eq!(
        got.iter().filter(|t| !t.1).map(|t| t.0.as_str()).collect::<Vec<_>>(),
        ["p50<1us"]
    );
    assert!(bad.stderr.contains("FAIL  p50<1us"), "{}", bad.stderr);
    assert!(
        bad.stderr.contains("soakd: FAILED: threshold(s) failed: p50<1us"),
        "{}",
        bad.stderr
    );
}

#[test]
fn per_workload_thresholds_from_a_config_file() {
    let target = BuiltinTarget::start(&[]);
    let dir = TempDir::new("thr-config");
    let cfg = dir.path().join("soak.toml");
    std::fs::write(
        &cfg,
        format!(
            "metrics_listen = \"off\"\nduration = \"2s\"\nthresholds = [\"errors < 1\"]\n\n[[workload]]\nname = \"api\"\nurl = \"{}\"\nconnections = 5\nrate = 200.0\nthresholds = [\"p50 < 1us\", \"rps > 50\"]\n",
            target.url("/")
        ),
    )
    .unwrap();
    let out = soakd_report(&["run", "--config", cfg.to_str().unwrap()], 30);
    assert_eq!(out.status.code(), Some(3), "{}", out.stderr);
    let rows: Vec<(Value, String, bool)> = out.report["thresholds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["workload"].clone(),
                t["threshold"].as_str().unwrap().into(),
                t["pass"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (Value::from("api"), "p50<1us".to_string(), false),
            (Value::from("api"), "rps>50".to_string(), true),
            (Value::Null, "errors<1".to_string(), true),
        ]
    );
}

#[test]
fn a_bad_threshold_exits_2_naming_it_and_what_is_allowed() {
    for (expr, says) in [
        ("p98<5ms", "unknown metric \"p98\""),
        ("p99<5", "has no unit"),
        ("p99=5ms", "not a comparison operator"),
    ] {
        let out = soakd(&[
            "run",
            "http://127.0.0.1:9/",
            "--threshold",
            expr,
            "--metrics-listen",
            "off",
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{expr}: {err}");
        assert!(err.contains(expr) && err.contains(says), "{expr}: {err}");
        assert!(
            err.contains("open_min") && err.contains("<="),
            "lists what is allowed: {err}"
        );
    }
    let out = soakd(&[
        "run",
        "http://127.0.0.1:9/",
        "--threshold",
        "tls_handshake_p99<20ms",
        "--metrics-listen",
        "off",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("tls_handshake_p99") && err.contains("https://"), "{err}");
}

/// The gauge is there from the first scrape, 1 for a threshold that holds
/// and 0 for one that does not; --abort-on-fail then stops the run long
/// before its 60 s, drained, with the reason in the report and exit 3.
#[test]
fn live_gauge_and_abort_on_fail() {
    let target = BuiltinTarget::start(&[]);
    let url = target.url("/");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let report = util::temp_path("abort", "json");
    let started = Instant::now();
    let child = spawn_soakd(&[
        "run",
        &url,
        "-c",
        "5",
        "-r",
        "200",
        "-d",
        "60s",
        "--metrics-listen",
        &listen,
        "--threshold",
        "p50<1us",
        "--threshold",
        "p99<10s",
        "--threshold-window",
        "2s",
        "--abort-on-fail",
        "3s",
        "--report",
        report.to_str().unwrap(),
    ]);
    // Before the abort (3 s of failing), the gauges say which fails.
    let seen = util::wait_for(
        || {
            if !util::port_accepts(&listen) {
                return None;
            }
            let seen = http_get(&listen, "/metrics");
            seen.contains("soakd_threshold_passing{target=\"*\",threshold=\"p50<1us\"} 0")
                .then_some(seen)
        },
        Duration::from_secs(10),
        "the gauge of threshold p50<1us to say failing (0)",
    );
    assert!(
        seen.contains("soakd_threshold_passing{target=\"*\",threshold=\"p50<1us\"} 0"),
        "{seen}"
    );
    assert!(
        seen.contains("soakd_threshold_passing{target=\"*\",threshold=\"p99<10s\"} 1"),
        "{seen}"
    );
    let (status, stderr) = wait_with_timeout(child, 40);
    assert_eq!(status.code(), Some(3), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(30), "aborted early: {stderr}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let _ = std::fs::remove_file(&report);
    let why = r["aborted"].as_str().expect("the report says why it stopped");
    assert!(why.contains("p50<1us") && why.contains("failed for"), "{why}");
    assert!(r["duration_seconds"].as_f64().unwrap() < 20.0);
    assert_eq!(r["requests"]["in_flight_at_end"], 0, "drained like a SIGTERM");
    assert!(stderr.contains("ABORTED"), "{stderr}");
}

/// A report compared with itself: every row `same`, exit 0.
#[test]
fn a_report_compared_with_itself_is_the_same() {
    let target = BuiltinTarget::start(&[]);
    let dir = TempDir::new("cmp-self");
    let (report, log) = (dir.path().join("a.json"), dir.path().join("a.hlog"));
    let url = target.url("/");
    let mut args = soak_args(&url, "2s");
    let (rs, ls) = (report.to_str().unwrap(), log.to_str().unwrap());
    args.extend(["--report", rs, "--hdr-log", ls, "--hdr-log-interval", "250ms"]);
    let out = soakd(&args);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let out = soakd(&["compare", rs, rs, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let c: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = c["rows"].as_array().unwrap();
    assert!(rows.len() >= 8, "{c}");
    assert!(rows.iter().all(|r| r["verdict"] == "same"), "{c}");
    // The report named its log, so the latency rows used the rank test.
    let p50 = rows.iter().find(|r| r["metric"] == "p50").unwrap();
    assert_eq!(p50["method"], "rank_test", "{c}");

    // Bad input: exit 2 naming the file.
    let out = soakd(&["compare", rs, "/nonexistent/new.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/new.json"));
    std::fs::write(dir.path().join("x.json"), "{\"a\": 1}").unwrap();
    let out = soakd(&["compare", rs, dir.path().join("x.json").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a soakd report"));
}

/// A server 2 ms slower per request: p50 `worse` by the rank test, exit 3,
/// both from `soakd compare` and from `soakd run --baseline`. On loopback
/// the baseline's p50 is a fraction of a millisecond, so +2 ms is many
/// times it and far above the noise floor.
#[test]
fn a_server_2ms_slower_is_worse() {
    let fast = BuiltinTarget::start(&[]);
    let slow = BuiltinTarget::start(&["--delay", "2ms"]);
    let dir = TempDir::new("cmp-slow");
    let path = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let (fast_url, slow_url) = (fast.url("/"), slow.url("/"));
    for (url, name) in [(&fast_url, "base"), (&slow_url, "slow")] {
        let (r, l) = (path(&format!("{name}.json")), path(&format!("{name}.hlog")));
        let mut args = soak_args(url, "3s");
        args.extend(["--report", &r, "--hdr-log", &l, "--hdr-log-interval", "250ms"]);
        let out = soakd(&args);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let out = soakd(&["compare", &path("base.json"), &path("slow.json"), "--json"]);
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    let c: Value = serde_json::from_slice(&out.stdout).unwrap();
    let p50 = c["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == "p50")
        .unwrap();
    assert_eq!(
        (p50["verdict"].as_str(), p50["method"].as_str()),
        (Some("worse"), Some("rank_test")),
        "{c}"
    );
    assert!(p50["abs_change"].as_f64().unwrap() > 0.0015, "{c}");
    // The table says so too.
    let out = soakd(&["compare", &path("base.json"), &path("slow.json")]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("WORSE") && text.contains("rank test"), "{text}");

    // The HTML page of the new run shows the verdicts against the baseline.
    let page = path("slow.html");
    let out = soakd(&[
        "report",
        &path("slow.json"),
        "--baseline",
        &path("base.json"),
        "--html",
        &page,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("<td>p50</td>") && html.contains("<td class=fail>worse</td><td>rank_test</td>"),
        "the verdicts table: {}",
        &html[html.find("Verdicts").unwrap_or(0)..][..2000.min(html.len() - html.find("Verdicts").unwrap_or(0))]
    );

    // The same verdict folded into `soakd run`'s exit code.
    let base = path("base.json");
    let mut args = soak_args(&slow_url, "3s");
    let log = path("again.hlog");
    args.extend(["--baseline", &base, "--hdr-log", &log, "--hdr-log-interval", "250ms"]);
    let out = soakd(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("worse than the baseline") && err.contains("p50"), "{err}");
    // And a bad --baseline stops the run before it starts.
    let mut args = soak_args(&fast_url, "30s");
    args.extend(["--baseline", "/nonexistent/base.json"]);
    let started = Instant::now();
    let out = soakd(&args);
    assert_eq!(out.status.code(), Some(2));
    assert!(started.elapsed() < Duration::from_secs(10));
}
