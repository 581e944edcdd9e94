//! Request mixes and response checks against a real nginx with several
//! locations: the weights hold exactly in nginx's own access log, failed
//! checks are counted by kind without costing connections, and bad mixes
//! are refused before anything starts.

mod util;

use std::collections::BTreeMap;

use serde_json::Value;
use util::{Nginx, TempDir, field as u, soakd, soakd_report};

/// nginx with four locations: one that answers as expected, one that
/// answers 500, one slow one, one whose body lacks the expected text and
/// whose header has another value. The slow one serves a 3,000-byte file
/// behind `limit_req` without `nodelay`, which queues each request to a
/// 2 ms slot (a few ms of latency with ten connections, far above the
/// others'); `return` would answer before limit_req ever runs.
fn api(files: &TempDir) -> Nginx {
    let slow_file = files.path().join("slow.txt");
    std::fs::write(&slow_file, "x".repeat(3000)).unwrap();
    let slow = format!(
        "limit_req zone=slow burst=100000; default_type text/plain; alias {};",
        slow_file.display()
    );
    Nginx::start_locations(
        "limit_req_zone $uri zone=slow:1m rate=500r/s;",
        &[
            ("/ok", r#"default_type application/json; return 200 '{"ok":true}';"#),
            // With a body, nginx keeps the connection open after a 500 (its
            // own error pages close it).
            ("/fail", r#"default_type application/json; return 500 '{"ok":false}';"#),
            ("/slow", &slow),
            (
                "/wrong",
                r#"default_type application/json; add_header X-Version 1; return 200 '{"ok":false}';"#,
            ),
        ],
    )
}

/// Requests per `METHOD PATH` and their statuses in nginx's access log.
fn access_counts(nginx: &Nginx) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for line in nginx.access_log().lines() {
        let mut f = line.split(' ');
        let (m, p) = (f.next().unwrap_or(""), f.next().unwrap_or(""));
        *counts.entry(format!("{m} {p}")).or_insert(0) += 1;
    }
    counts
}

fn by_request<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["workloads"][0]["by_request"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no request {name} in {:#}", report["workloads"][0]["by_request"]))
}

const CONFIG: &str = r#"
requests = 10000
metrics_listen = "off"

[[workload]]
name = "api"
url = "ORIGIN"
connections = 10
expect_body_contains = "\"ok\":true"

[[workload.request]]
name = "ok"
path = "/ok"
weight = 5
expect_header = { "Content-Type" = "application/json" }

[[workload.request]]
name = "fail"
path = "/fail"
weight = 2
expect_status = [200]
expect_body_contains = "\"ok\":false"

[[workload.request]]
name = "slow"
path = "/slow"
weight = 1
expect_body_contains = "xxxx"
max_body_bytes = 100

[[workload.request]]
name = "wrong"
method = "GET"
path = "/wrong"
weight = 2
expect_header = { "X-Version" = "2" }
"#;

/// 10,000 requests in a 5:2:1:2 mix: nginx's access log has each path
/// within ±1% of its share; every check kind is counted exactly for the
/// request that fails it; no connection is lost to a failed check.
#[test]
fn weights_hold_and_checks_count_by_kind() {
    let dir = TempDir::new("mix");
    let nginx = api(&dir);
    let conf = dir.path().join("mix.toml");
    std::fs::write(&conf, CONFIG.replace("ORIGIN", &nginx.url("/"))).unwrap();
    let r = soakd_report(&["run", "--config", conf.to_str().unwrap()], 120);
    assert!(r.status.success(), "exit {}\n{}", r.status, r.stderr);
    let rep = &r.report;
    assert_eq!(u(rep, "/requests/completed"), 10_000, "{rep:#}");

    let log = access_counts(&nginx);
    let total: u64 = log.values().sum();
    assert_eq!(total, 10_000, "{log:?}");
    for (path, weight) in [("/ok", 5u64), ("/fail", 2), ("/slow", 1), ("/wrong", 2)] {
        let got = log.get(&format!("GET {path}")).copied().unwrap_or(0);
        let want = 10_000 * weight / 10;
        assert!(
            got.abs_diff(want) <= 100,
            "{path}: {got} requests, expected {want} ± 1%: {log:?}"
        );
    }

    // Each kind fails for exactly one request, on every one of its answers.
    let count = |name: &str| u(by_request(rep, name), "/count");
    for (name, path) in [("ok", "/ok"), ("fail", "/fail"), ("slow", "/slow"), ("wrong", "/wrong")] {
        assert_eq!(count(name), log[&format!("GET {path}")], "{name}");
    }
    let checks = |name: &str| -> Vec<u64> {
        ["status", "header", "body", "size"]
            .iter()
            .map(|k| u(by_request(rep, name), &format!("/checks/{k}")))
            .collect()
    };
    assert_eq!(checks("ok"), [0, 0, 0, 0]);
    assert_eq!(checks("fail"), [count("fail"), 0, 0, 0], "500 fails only its status");
    assert_eq!(
        checks("slow"),
        [0, 0, 0, count("slow")],
        "3000 bytes over max_body_bytes"
    );
    assert_eq!(checks("wrong"), [0, count("wrong"), count("wrong"), 0]);
    assert_eq!(u(rep, "/checks/status"), count("fail"));
    assert_eq!(u(rep, "/checks/body"), count("wrong"));
    assert_eq!(u(by_request(rep, "fail"), "/responses/5xx"), count("fail"));

    // Failed checks are answers, not errors: the connections stay.
    assert_eq!(u(rep, "/connections/opened"), 10, "{rep:#}");
    assert_eq!(u(rep, "/connections/closed_by_reason/error"), 0);
    assert_eq!(util::total_errors(rep), 0);

    // The slow request leads the summary's table.
    let table = r
        .stderr
        .split("requests of api")
        .nth(1)
        .unwrap_or_else(|| panic!("{}", r.stderr));
    let first = table.lines().nth(2).unwrap_or("");
    assert!(first.trim_start().starts_with("slow"), "{table}");
}

/// A requests file drives a mix from the command line; headers and a body
/// file reach nginx, and the URL is the origin. Pipelined four deep, with
/// a HEAD among the requests: each response is framed as its own request's
/// (a HEAD answer has a Content-Length but no body).
#[test]
fn requests_file_from_the_command_line() {
    let dir = TempDir::new("mixfile");
    let nginx = api(&dir);
    std::fs::write(dir.path().join("item.json"), "{\"a\":1}").unwrap();
    let file = dir.path().join("mix.txt");
    std::fs::write(
        &file,
        format!(
            "# three requests\n3 GET /ok\nAccept: application/json\n\n1 POST {}\nContent-Type: application/json\n@item.json\n\nHEAD /ok\n",
            nginx.url("/wrong")
        ),
    )
    .unwrap();
    let url = nginx.url("/");
    let r = soakd_report(
        &[
            "run",
            &url,
            "--requests-file",
            file.to_str().unwrap(),
            "-c",
            "4",
            "-n",
            "5000",
            "--pipeline",
            "4",
            "--metrics-listen",
            "off",
        ],
        60,
    );
    assert!(r.status.success(), "exit {}\n{}", r.status, r.stderr);
    let log = access_counts(&nginx);
    // The budget of 5,000 is split over the workers, so a connection may
    // stop mid-cycle: within ±1% of the 3:1:1 shares.
    let (get, post, head) = (
        log.get("GET /ok").copied().unwrap_or(0),
        log.get("POST /wrong").copied().unwrap_or(0),
        log.get("HEAD /ok").copied().unwrap_or(0),
    );
    assert_eq!(get + post + head, 5000, "{log:?}");
    assert!(get.abs_diff(3000) <= 50 && head.abs_diff(1000) <= 50, "{log:?}");
    assert_eq!(u(by_request(&r.report, "HEAD /ok"), "/count"), head);
    // nginx answers a POST to a `return` location like a GET.
    assert_eq!(u(by_request(&r.report, "POST /wrong"), "/count"), post);
    assert_eq!(util::total_errors(&r.report), 0);
}

/// Bad mixes exit 2 with a message naming the file, line or key, and
/// nothing is started (the target port is never contacted).
#[test]
fn bad_mixes_exit_2() {
    let dir = TempDir::new("mixbad");
    let p = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let big = dir.path().join("big.bin");
    std::fs::write(&big, vec![b'x'; 16 * 1024 * 1024 + 1]).unwrap();
    let url = "http://127.0.0.1:9/";
    let cases: Vec<(Vec<String>, String)> = vec![
        (
            vec!["--requests-file".into(), p("a.txt", "GET /\nno colon here\n")],
            "a.txt:2: expected a `Name: value` header".into(),
        ),
        (
            vec!["--requests-file".into(), p("b.txt", "0 GET /\n")],
            "b.txt:1: weight 0 is out of range".into(),
        ),
        (
            vec![
                "--requests-file".into(),
                p("c.txt", &(0..65).map(|i| format!("GET /{i}\n\n")).collect::<String>()),
            ],
            "65 requests in one workload, over the limit of 64".into(),
        ),
        (
            vec!["--requests-file".into(), p("d.txt", "POST /\n@big.bin\n")],
            "over the limit of 16 MiB".into(),
        ),
        (
            vec!["--requests-file".into(), p("e.txt", "GET http://example.test/x\n")],
            "is not on the workload's origin".into(),
        ),
        (
            vec!["--requests-file".into(), p("f.txt", "GET /a\n\nGET /a\n")],
            "two requests are named \"GET /a\"".into(),
        ),
        (
            vec![
                "--config".into(),
                p(
                    "g.toml",
                    "[[workload]]\nurl = \"http://127.0.0.1:9/\"\n[[workload.request]]\npath = \"/\"\nexpect_status = [999]\n",
                ),
            ],
            "g.toml:3: workload.request 1: expect_status: 999 is not an HTTP status".into(),
        ),
    ];
    for (args, says) in cases {
        let mut all = vec!["run".to_string()];
        if args[0] != "--config" {
            all.push(url.into());
        }
        all.extend(args);
        let argv: Vec<&str> = all.iter().map(String::as_str).collect();
        let out = soakd(&argv);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{argv:?}: {stderr}");
        assert!(stderr.contains(&says), "{argv:?}: expected {says:?} in {stderr}");
    }
}
