//! The built-in target's HTTP/2 (`soakd target --h2`) against clients no
//! one here wrote: h2load and curl (nghttp2) for load, ALPN and routes;
//! PyPI's h2 through tests/peers/h2_target_probe.py for each fault, frame
//! by frame as it arrives on the wire.

mod util;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use util::{BuiltinTarget, RunResult, cannot_run, field, soakd, soakd_report, test_python};

/// Runs a client with a time bound; None (after `cannot_run`) when it is
/// not installed.
fn client(program: &str, args: &[&str]) -> Option<Output> {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        cannot_run(&format!("{program} is not installed (scripts/test.sh installs it)"));
        return None;
    }
    let out = Command::new("timeout")
        .arg("60")
        .arg(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    Some(out)
}

fn text(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// h2load's summary line `requests: N total, N started, N done, N
/// succeeded, ...` must say `want` succeeded and none failed.
fn h2load_succeeded(out: &Output, want: u64) {
    let all = text(out);
    let line = all
        .lines()
        .find(|l| l.starts_with("requests:"))
        .unwrap_or_else(|| panic!("no requests line:\n{all}"));
    assert!(
        line.contains(&format!("{want} succeeded, 0 failed, 0 errored, 0 timeout")),
        "{all}"
    );
    assert!(all.contains(&format!("status codes: {want} 2xx")), "{all}");
}

#[test]
fn h2load_streams_over_h2c_with_prior_knowledge() {
    let target = BuiltinTarget::start(&["--h2"]);
    let Some(out) = client("h2load", &["-n", "2000", "-c", "4", "-m", "10", &target.url("/")]) else {
        return;
    };
    h2load_succeeded(&out, 2000);
    // /big (64 KiB) against windows smaller than itself: the target sends
    // only what the windows allow and the rest after WINDOW_UPDATE.
    let out = client(
        "h2load",
        &[
            "-n",
            "100",
            "-c",
            "2",
            "-m",
            "10",
            "-w",
            "14",
            "-W",
            "15",
            &target.url("/big"),
        ],
    )
    .unwrap();
    h2load_succeeded(&out, 100);
    assert!(text(&out).contains("6.25MB (6553600) data"), "{}", text(&out));
    // Request bodies, credited back with WINDOW_UPDATE as they arrive.
    let body = util::temp_path("h2-body", "bin");
    std::fs::write(&body, vec![b'b'; 200_000]).unwrap();
    let out = client(
        "h2load",
        &[
            "-n",
            "50",
            "-c",
            "2",
            "-m",
            "5",
            "-d",
            body.to_str().unwrap(),
            &target.url("/status/202"),
        ],
    )
    .unwrap();
    let _ = std::fs::remove_file(&body);
    h2load_succeeded(&out, 50);
}

#[test]
fn alpn_picks_h2_over_tls_and_http1_clients_keep_http1() {
    let target = BuiltinTarget::start(&["--h2", "--tls"]);
    let Some(out) = client("h2load", &["-n", "500", "-c", "2", "-m", "10", &target.https_url("/")]) else {
        return;
    };
    assert!(text(&out).contains("Application protocol: h2"), "{}", text(&out));
    h2load_succeeded(&out, 500);
    let cacert = target.cert.clone().expect("a certificate");
    for (flag, want) in [("--http2", "2"), ("--http1.1", "1.1")] {
        let out = client(
            "curl",
            &[
                "-sS",
                "--cacert",
                &cacert,
                flag,
                "-o",
                "/dev/null",
                "-w",
                "%{http_version} %{http_code}",
                &target.https_url("/status/201"),
            ],
        )
        .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("{want} 201"),
            "{}",
            text(&out)
        );
    }
}

#[test]
fn routes_over_h2c_and_http1_on_the_same_port() {
    let target = BuiltinTarget::start(&["--h2"]);
    let curl = |args: &[&str]| {
        let out = client("curl", args)?;
        assert!(out.status.success(), "{}", text(&out));
        Some(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let Some(got) = curl(&[
        "-sS",
        "--http2-prior-knowledge",
        "-w",
        " %{http_version} %{http_code}",
        &target.url("/status/201"),
    ]) else {
        return;
    };
    assert_eq!(got, "pong 2 201");
    let got = curl(&["-sS", "--http1.1", "-w", " %{http_version}", &target.url("/")]).unwrap();
    assert_eq!(got, "pong 1.1");
    let got = curl(&["-sS", "--http2-prior-knowledge", &target.url("/big")]).unwrap();
    assert_eq!(got.len(), 65536);
    let got = curl(&["-sS", "--http2-prior-knowledge", "-I", &target.url("/status/404")]).unwrap();
    assert!(got.starts_with("HTTP/2 404"), "{got}");
}

/// Runs the h2 probe against `target`; None when the venv is missing.
fn probe(target: &BuiltinTarget, scenario: &str, arg: &str) -> Option<Value> {
    let python = test_python()?;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/peers/h2_target_probe.py");
    let out = Command::new("timeout")
        .arg("30")
        .arg(python)
        .arg(script)
        .args([target.addr.as_str(), scenario, arg])
        .output()
        .unwrap();
    assert!(out.status.success(), "probe {scenario}: {}", text(&out));
    Some(serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out))))
}

/// The frames the probe logged, as (type, stream, END_STREAM, detail).
fn frames(v: &Value) -> Vec<(u64, u64, bool, Value)> {
    v["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f[0].as_u64().unwrap(),
                f[1].as_u64().unwrap(),
                f[2].as_bool().unwrap(),
                f[3].clone(),
            )
        })
        .collect()
}

const DATA: u64 = 0x0;
const HEADERS: u64 = 0x1;
const RST_STREAM: u64 = 0x3;
const GOAWAY: u64 = 0x7;

/// Streams whose response ended (END_STREAM on HEADERS or DATA).
fn ended(v: &Value) -> Vec<u64> {
    frames(v)
        .into_iter()
        .filter(|(t, _, end, _)| (*t == DATA || *t == HEADERS) && *end)
        .map(|(_, s, _, _)| s)
        .collect()
}

#[test]
fn settings_ping_and_routes_as_h2_sees_them() {
    let target = BuiltinTarget::start(&["--h2"]);
    let Some(v) = probe(&target, "basic", "") else { return };
    assert_eq!(v["settings"]["MAX_CONCURRENT_STREAMS"], 128);
    assert_eq!(v["ping_acked"], true);
    for (sid, path) in v["paths"].as_object().unwrap() {
        let want = if path == "/status/201" { "201" } else { "200" };
        assert_eq!(v["responses"][sid], want, "{path}");
        let body = if path == "/big" { 65536 } else { 4 };
        assert_eq!(v["bodies"][sid], body, "{path}");
        if path == "/chunked" {
            assert_eq!(v["trailers"][sid]["x-trailer"], "done");
        }
        if path == "/continue" {
            assert_eq!(v["informational"][sid], "100");
        }
    }
}

#[test]
fn goaway_after_n_streams_finishes_those_at_or_below_it_and_closes() {
    let target = BuiltinTarget::start(&["--h2", "--fault", "goaway@5"]);
    // Ten streams at once: the fifth (stream 9) is the GOAWAY's last.
    let Some(v) = probe(&target, "concurrent", "10") else {
        return;
    };
    let f = frames(&v);
    let goaways: Vec<_> = f.iter().filter(|x| x.0 == GOAWAY).collect();
    assert_eq!(goaways.len(), 1, "{f:?}");
    assert_eq!(goaways[0].3["last_stream_id"], 9);
    assert_eq!(goaways[0].3["error_code"], 0, "graceful");
    assert_eq!(ended(&v), [1, 3, 5, 7, 9], "{f:?}");
    assert!(!f.iter().any(|x| x.0 == RST_STREAM), "{f:?}");
    assert_eq!(v["closed"], true, "the target closes once stream 9 is done");
}

#[test]
fn goaway_error_carries_its_code_and_the_last_stream_answered() {
    let target = BuiltinTarget::start(&["--h2", "--fault", "goaway-error@3"]);
    let Some(v) = probe(&target, "sequential", "5") else {
        return;
    };
    assert_eq!(v["goaway"]["error_code"], 2, "INTERNAL_ERROR");
    assert_eq!(v["goaway"]["last_stream_id"], 3);
    assert_eq!(ended(&v), [1, 3]);
    assert_eq!(v["closed"], true);
}

#[test]
fn rst_stream_resets_every_nth_stream() {
    let target = BuiltinTarget::start(&["--h2", "--fault", "rst-stream@3"]);
    let Some(v) = probe(&target, "sequential", "6") else {
        return;
    };
    let resets = v["resets"].as_object().unwrap();
    let mut reset: Vec<&str> = resets.keys().map(String::as_str).collect();
    reset.sort();
    assert_eq!(reset, ["11", "5"], "{v}");
    assert!(resets.values().all(|c| c == 2), "INTERNAL_ERROR: {v}");
    assert_eq!(v["responses"].as_object().unwrap().len(), 4);
}

#[test]
fn max_streams_is_advertised_and_streams_beyond_it_refused() {
    // A delay keeps the first stream open while the others arrive.
    let target = BuiltinTarget::start(&["--h2", "--fault", "max-streams=1", "--delay", "300ms"]);
    let Some(v) = probe(&target, "concurrent-early", "3") else {
        return;
    };
    assert_eq!(v["settings"]["MAX_CONCURRENT_STREAMS"], 1);
    assert_eq!(v["resets"]["3"], 7, "REFUSED_STREAM: {v}");
    assert_eq!(v["resets"]["5"], 7, "REFUSED_STREAM: {v}");
    assert_eq!(v["responses"]["1"], "200");
}

#[test]
fn window_stall_takes_a_small_window_and_never_opens_it() {
    let target = BuiltinTarget::start(&["--h2", "--fault", "window-stall"]);
    let Some(v) = probe(&target, "post", "10000") else {
        return;
    };
    assert_eq!(v["settings"]["INITIAL_WINDOW_SIZE"], 1024);
    assert_eq!(v["body_sent"], 1024, "the client stalls at the window");
    assert_eq!(v["window_updates"], 0);
    assert!(v["responses"].get("1").is_none(), "the POST is never answered: {v}");
    // The connection itself still answers a request without a body.
    assert_eq!(v["responses"][v["get"].to_string()], "200");
}

#[test]
fn settings_flood_sends_settings_without_end() {
    let target = BuiltinTarget::start(&["--h2", "--fault", "settings-flood"]);
    let Some(v) = probe(&target, "flood", "1") else { return };
    let n = v["settings_frames"].as_u64().unwrap();
    assert!(n > 1000, "{n} SETTINGS frames in 1 s");
    // The target is not held by one flooded client.
    let Some(out) = client("curl", &["-sS", "--http1.1", &target.url("/")]) else {
        return;
    };
    assert_eq!(String::from_utf8_lossy(&out.stdout), "pong");
}

#[test]
fn h2_faults_without_h2_and_http1_faults_with_it_are_usage_errors() {
    for (args, says) in [
        (&["--fault", "goaway@10"][..], "add --h2"),
        (&["--h2", "--fault", "reset"][..], "with --h2 use an HTTP/2 fault"),
        (&["--h2", "--fault", "max-streams"][..], "max-streams=K"),
        (&["--h2", "--fault", "window-stall@2"][..], "takes no @N"),
    ] {
        let mut argv = vec!["target", "--listen", "127.0.0.1:0"];
        argv.extend_from_slice(args);
        let out = soakd(&argv);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(text(&out).contains(says), "{args:?}: {}", text(&out));
    }
}

// ---------------------------------------------------------------------------
// soakd's own HTTP/2 client against each fault, classified as issue 19 says
// ---------------------------------------------------------------------------

/// `soakd run URL --http 2 -t 1 EXTRA...` against the target, its report.
fn soakd_h2(target: &BuiltinTarget, path: &str, extra: &[&str]) -> RunResult {
    let url = target.url(path);
    let mut args = vec!["run", url.as_str(), "--http", "2", "-t", "1", "--metrics-listen", "off"];
    args.extend_from_slice(extra);
    soakd_report(&args, 90)
}

/// The kinds of error a report counted, with their counts (zeros left out).
fn errors(r: &RunResult) -> Vec<(String, u64)> {
    util::nonzero_errors(&r.report)
}

fn http(r: &RunResult) -> &Value {
    &r.report["workloads"][0]["http"]
}

#[test]
fn soakd_loses_nothing_to_graceful_goaways() {
    let target = BuiltinTarget::start(&["--h2", "--fault", "goaway@100"]);
    let r = soakd_h2(&target, "/", &["-c", "4", "--streams", "5", "-n", "2000"]);
    assert!(r.status.success(), "{}", r.stderr);
    assert_eq!(errors(&r), [], "a graceful GOAWAY is not an error: {}", r.stderr);
    assert_eq!(field(&r.report, "/requests/completed"), 2000);
    assert_eq!(http(&r)["version"], "2");
    let goaways = http(&r)["goaways"]["NO_ERROR"].as_u64().unwrap_or(0);
    assert!(
        goaways >= 10,
        "{goaways} GOAWAYs for 2,000 streams at 100 each: {}",
        http(&r)
    );
}

#[test]
fn soakd_counts_reset_streams_as_stream_reset() {
    let target = BuiltinTarget::start(&["--h2", "--fault", "rst-stream@10"]);
    let r = soakd_h2(&target, "/", &["-c", "2", "--streams", "5", "-n", "500"]);
    let kinds = errors(&r);
    assert_eq!(kinds.len(), 1, "{kinds:?}");
    assert_eq!(kinds[0].0, "stream_reset", "{kinds:?}");
    assert_eq!(http(&r)["resets"]["INTERNAL_ERROR"], kinds[0].1, "{}", http(&r));
}

#[test]
fn soakd_never_opens_a_second_stream_past_max_streams_1() {
    // A delay keeps each stream open long enough for a second to be tried.
    let target = BuiltinTarget::start(&["--h2", "--fault", "max-streams=1", "--delay", "20ms"]);
    let r = soakd_h2(&target, "/", &["-c", "2", "--streams", "10", "-d", "2s"]);
    assert!(r.status.success(), "{}", r.stderr);
    assert_eq!(http(&r)["streams_limit"], 1, "{}", http(&r));
    // The target refuses any stream beyond the first with REFUSED_STREAM:
    // none means soakd never had two open.
    assert!(http(&r)["resets"].get("REFUSED_STREAM").is_none(), "{}", http(&r));
    assert_eq!(errors(&r), []);
    assert!(field(&r.report, "/requests/completed") > 20);
}

#[test]
fn soakd_times_out_on_a_window_that_never_opens() {
    let target = BuiltinTarget::start(&["--h2", "--fault", "window-stall"]);
    let body = "b".repeat(4000);
    let r = soakd_h2(
        &target,
        "/",
        &[
            "-c",
            "1",
            "-m",
            "POST",
            "--body",
            &body,
            "--request-timeout",
            "1s",
            "-d",
            "3s",
        ],
    );
    let kinds = errors(&r);
    assert_eq!(kinds.len(), 1, "{kinds:?}");
    assert_eq!(kinds[0].0, "timeout", "{kinds:?}");
    assert_eq!(field(&r.report, "/requests/completed"), 0);
}

#[test]
fn soakd_counts_a_goaway_with_an_error_code_as_goaway_error() {
    let target = BuiltinTarget::start(&["--h2", "--fault", "goaway-error@50"]);
    let r = soakd_h2(&target, "/", &["-c", "2", "--streams", "5", "-d", "2s"]);
    let kinds = errors(&r);
    assert!(kinds.iter().any(|(k, _)| k == "goaway_error"), "{kinds:?}");
    assert!(
        http(&r)["goaways"]["INTERNAL_ERROR"].as_u64().unwrap_or(0) > 0,
        "{}",
        http(&r)
    );
}

#[test]
fn soakd_ends_a_settings_flood_in_h2_protocol() {
    let target = BuiltinTarget::start(&["--h2", "--fault", "settings-flood"]);
    let r = soakd_h2(&target, "/", &["-c", "2", "-d", "2s"]);
    let kinds = errors(&r);
    assert_eq!(kinds.len(), 1, "{kinds:?}");
    assert_eq!(kinds[0].0, "h2_protocol", "{kinds:?}");
}

#[test]
fn demo_soaks_the_target_over_h2() {
    for tls in [false, true] {
        let mut args = vec![
            "demo",
            "--h2",
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
        let r = soakd_report(&args, 60);
        assert!(r.status.success(), "{}", r.stderr);
        assert_eq!(http(&r)["version"], "2", "tls {tls}: {}", http(&r));
        assert_eq!(errors(&r), [], "tls {tls}");
        assert!(field(&r.report, "/requests/completed") >= 200, "tls {tls}");
    }
}

/// Thresholds, shards, `merge` and `compare` over HTTP/2: two shards of
/// one plan against a target that sends a graceful GOAWAY every 50
/// streams; their thresholds pass (and a failing one exits 3), the merged
/// report's `http` section adds the shards' GOAWAYs and retries, and the
/// merged report compares as the same as itself.
#[test]
fn thresholds_shards_merge_and_compare_over_h2() {
    let target = BuiltinTarget::start(&["--h2", "--fault", "goaway@50"]);
    let url = target.url("/");
    let dir = util::TempDir::new("h2-shards");
    let args = [
        "run",
        &url,
        "--http",
        "2",
        "-c",
        "4",
        "--streams",
        "5",
        "-r",
        "400",
        "-d",
        "3s",
        "--threshold",
        "p99<5s",
        "--threshold",
        "errors<1",
        "--threshold",
        "rps>50",
    ];
    let (shards, m) = util::run_shards_and_merge(&dir, 2, &args);
    for r in &shards {
        let h = &r["workloads"][0]["http"];
        assert_eq!(h["version"], "2", "{h}");
        assert!(field(r, "/workloads/0/http/goaways/NO_ERROR") >= 3, "{h}");
        assert!(
            r["thresholds"].as_array().unwrap().iter().all(|t| t["pass"] == true),
            "{}",
            r["thresholds"]
        );
    }
    for key in [
        "/requests/completed",
        "/workloads/0/http/goaways/NO_ERROR",
        "/workloads/0/http/retried",
    ] {
        let sum: u64 = shards.iter().map(|r| field(r, key)).sum();
        assert_eq!(field(&m, key), sum, "{key}: {}", m["workloads"][0]["http"]);
    }
    assert_eq!(m["workloads"][0]["http"]["version"], "2");
    assert_eq!(field(&m, "/errors/stream_reset") + field(&m, "/errors/goaway_error"), 0);
    let merged = dir.path().join("merged.json");
    let merged = merged.to_str().unwrap();
    let out = soakd(&["compare", merged, merged]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));

    // A threshold the run cannot meet fails it over HTTP/2 as over 1.1.
    let r = soakd_h2(
        &target,
        "/",
        &["-c", "2", "--streams", "5", "-d", "1s", "--threshold", "p50<1us"],
    );
    assert_eq!(r.status.code(), Some(3), "{}", r.stderr);
}

/// A reload that changes `http` from 1.1 to 2 moves every connection to
/// HTTP/2 (issue 28: the recycle rule compared the WebSocket settings but
/// not the HTTP/2 ones, so keep-alive connections stayed on HTTP/1.1 for
/// ever, and the report said `requested "2"`, `version "1.1"`). Against the
/// built-in target, which speaks both on one port; and back again.
#[test]
fn sighup_changing_http_moves_every_connection_to_the_new_version() {
    use std::time::Duration;
    use util::{free_port, scrape, spawn_soakd, wait_for_handler, wait_until};
    let target = BuiltinTarget::start(&["--h2"]);
    let metrics = format!("127.0.0.1:{}", free_port());
    let dir = util::TempDir::new("h2-reload-version");
    let path = dir.path().join("soak.toml");
    let report = dir.path().join("report.json");
    let config = |http: &str| {
        format!(
            "metrics_listen = \"{metrics}\"\n[[workload]]\nname = \"s\"\nurl = \"{}\"\n\
             connections = 6\ninterval = \"50ms\"\nhttp = \"{http}\"\n",
            target.url("/")
        )
    };
    let open = |m: &std::collections::HashMap<String, f64>, v: &str| {
        m.get(&format!("soakd_http_connections_open{{target=\"s\",version=\"{v}\"}}"))
            .copied()
            .unwrap_or(-1.0)
    };
    let metrics_at = metrics.as_str();
    let on = |v11: f64, v2: f64| {
        move || {
            scrape(metrics_at).is_some_and(|m| {
                open(&m, "1.1") == v11
                    && open(&m, "2") == v2
                    && m.get("soakd_http_version_info{target=\"s\",version=\"2\"}") == Some(&(v2 / 6.0))
            })
        }
    };
    std::fs::write(&path, config("1.1")).unwrap();
    let child = spawn_soakd(&[
        "run",
        "--config",
        path.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    wait_until(on(6.0, 0.0), Duration::from_secs(15), "6 connections on HTTP/1.1");
    wait_for_handler(child.id(), "HUP");
    std::fs::write(&path, config("2")).unwrap();
    util::signal(child.id(), "HUP");
    wait_until(on(0.0, 6.0), Duration::from_secs(15), "every connection on HTTP/2");
    let sent = |m: &std::collections::HashMap<String, f64>| m["soakd_requests_sent_total{target=\"s\"}"];
    let before = sent(&scrape(&metrics).unwrap());
    wait_until(
        || scrape(&metrics).is_some_and(|m| sent(&m) >= before + 30.0),
        Duration::from_secs(15),
        "requests to flow over HTTP/2",
    );
    std::fs::write(&path, config("1.1")).unwrap();
    util::signal(child.id(), "HUP");
    wait_until(
        on(6.0, 0.0),
        Duration::from_secs(15),
        "every connection back on HTTP/1.1",
    );
    util::signal(child.id(), "TERM");
    let (status, stderr) = util::wait_with_timeout(child, 20);
    assert!(status.success(), "{stderr}");
    let rep: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(util::total_errors(&rep), 0, "{:#}", rep["errors"]);
    assert!(
        field(&rep, "/connections/closed_by_reason/churn") >= 12,
        "both reloads recycled"
    );
}
