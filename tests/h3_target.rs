//! soakd's HTTP/3 client against the built-in target's (`soakd target
//! --tls --h3`), both the real binary: requests counted equal on both
//! sides with checks passing; a GOAWAY every 50 streams that loses
//! nothing, counted alike on both sides; a request never answered, a
//! timeout and not a hang; the target's refusals; `soakd demo --h3`.
//!
//! The target's side is what it prints on stderr when it stops (SIGTERM):
//! `soakd target: HTTP/3 answered N requests, refused N streams
//! (H3_REQUEST_REJECTED), sent N GOAWAYs`.

mod util;

use std::time::{Duration, Instant};

use serde_json::Value;
use util::{BuiltinTarget, RunResult, field, soakd, soakd_report};

/// What the target's HTTP/3 did, from the line it prints when it stops.
#[derive(Debug, PartialEq, Eq)]
struct Served {
    answered: u64,
    rejected: u64,
    goaways: u64,
}

/// `soakd target --tls --h3 EXTRA...`.
fn target(extra: &[&str]) -> BuiltinTarget {
    let mut args = vec!["--tls", "--h3"];
    args.extend_from_slice(extra);
    BuiltinTarget::start(&args)
}

/// Stops the target with SIGTERM and reads back what it served.
fn stop(target: &BuiltinTarget) -> Served {
    util::wait_for_handler(target.pid(), "TERM");
    util::signal(target.pid(), "TERM");
    let line = util::wait_for(
        || {
            let err = target.stderr();
            // Whole: stderr is unbuffered, the line may be seen half written.
            let line = err
                .lines()
                .find(|l| l.starts_with("soakd target: HTTP/3 answered") && l.ends_with(" GOAWAYs"))?;
            Some(line.to_string())
        },
        Duration::from_secs(10),
        "the target's HTTP/3 counts on stderr",
    );
    let n: Vec<u64> = line.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    assert_eq!(n.len(), 3, "{line}");
    Served {
        answered: n[0],
        rejected: n[1],
        goaways: n[2],
    }
}

/// `soakd run https://ADDR/ --http 3 --cacert CERT EXTRA...` against it.
fn run_h3(target: &BuiltinTarget, extra: &[&str]) -> RunResult {
    let cacert = target.cert.clone().expect("the target's certificate");
    run_h3_on(&target.https_url("/"), &cacert, "off", extra)
}

/// `soakd run URL --http 3 --cacert CACERT --metrics-listen METRICS
/// EXTRA...`.
fn run_h3_on(url: &str, cacert: &str, metrics: &str, extra: &[&str]) -> RunResult {
    let mut args = vec![
        "run",
        url,
        "--http",
        "3",
        "--cacert",
        cacert,
        "--metrics-listen",
        metrics,
    ];
    args.extend_from_slice(extra);
    soakd_report(&args, 60)
}

fn errors(r: &RunResult) -> Vec<(String, u64)> {
    util::nonzero_errors(&r.report)
}

fn http(r: &RunResult) -> &Value {
    &r.report["workloads"][0]["http"]
}

/// 20 connections × 10 streams, 20,000 requests from a config file whose
/// workload checks the body for "pong": all completed, none failed a
/// check, no error, and the target answered exactly as many.
#[test]
fn requests_are_counted_equal_on_both_sides_with_checks() {
    let target = target(&[]);
    let dir = util::TempDir::new("h3-target-count");
    let conf = dir.path().join("soak.toml");
    std::fs::write(
        &conf,
        format!(
            r#"
requests = 20000
metrics_listen = "off"

[[workload]]
url = "{url}"
http = "3"
cacert = ["{cacert}"]
connections = 20
streams = 10
expect_status = [200]
expect_body_contains = "pong"
"#,
            url = target.https_url("/"),
            cacert = target.cert.as_deref().unwrap(),
        ),
    )
    .unwrap();
    let started = Instant::now();
    let r = soakd_report(&["run", "--config", conf.to_str().unwrap()], 60);
    eprintln!("20,000 requests in {:?}", started.elapsed());
    assert!(r.status.success(), "exit {}\n{}", r.status, r.stderr);
    assert_eq!(errors(&r), [], "{}", r.stderr);
    assert_eq!(field(&r.report, "/requests/completed"), 20_000);
    assert_eq!(field(&r.report, "/requests/failed"), 0);
    assert_eq!(field(&r.report, "/responses/2xx"), 20_000);
    assert_eq!(field(&r.report, "/requests/sent"), 20_000, "nothing sent twice");
    let checks = &r.report["checks"];
    for kind in ["status", "header", "body", "size"] {
        assert_eq!(checks[kind].as_u64(), Some(0), "{kind}: {checks:#}");
    }
    assert_eq!(http(&r)["version"], "3", "{}", http(&r));
    assert_eq!(
        field(&r.report, "/connections/opened"),
        20,
        "one handshake per connection"
    );
    let served = stop(&target);
    assert_eq!(
        served,
        Served {
            answered: 20_000,
            rejected: 0,
            goaways: 0
        }
    );
}

/// `goaway@50`: each connection gets a GOAWAY at its 50th request stream
/// and closes once those below it are answered; the streams soakd opened
/// above it are refused (H3_REQUEST_REJECTED) and sent again. Every
/// request is answered once, none fails, and soakd counts the GOAWAYs and
/// retries the target sent and refused.
#[test]
fn goaway_every_50_streams_loses_nothing_and_is_counted_alike() {
    let target = target(&["--fault", "goaway@50"]);
    let r = run_h3(&target, &["-c", "4", "--streams", "5", "-n", "2000"]);
    assert!(r.status.success(), "exit {}\n{}", r.status, r.stderr);
    assert_eq!(errors(&r), [], "a GOAWAY is not an error\n{}", r.stderr);
    assert_eq!(field(&r.report, "/requests/completed"), 2000);
    assert_eq!(field(&r.report, "/requests/failed"), 0);
    let served = stop(&target);
    assert_eq!(served.answered, 2000, "each request answered once: {served:?}");
    let h = http(&r);
    assert_eq!(h["version"], "3", "{h}");
    // 2,000 at 50 a connection: 40 GOAWAYs, less the 4 connections still
    // short of their 50th when the run ends.
    assert!(served.goaways >= 2000 / 50 - 4, "{served:?}");
    let goaways = h["goaways"]["GOAWAY"].as_u64().unwrap_or(0);
    assert_eq!(goaways, served.goaways, "{h}");
    // The streams opened above a GOAWAY are handed back when it arrives
    // (RFC 9114 §5.2), each sent again once: as many as the target refused.
    assert!(served.rejected > 0, "{served:?}");
    assert_eq!(field(&r.report, "/workloads/0/http/retried"), served.rejected, "{h}");
    assert_eq!(
        field(&r.report, "/connections/closed_by_reason/server_close"),
        served.goaways
    );
}

/// `never-answer@3`: the third request, and every later one on its
/// connection, is never answered: each is a timeout after
/// `--request-timeout`, the run ends on time, and nothing else fails.
#[test]
fn a_request_never_answered_is_a_timeout_not_a_hang() {
    let target = target(&["--fault", "never-answer@3"]);
    let started = Instant::now();
    let r = run_h3(
        &target,
        &["-c", "2", "-i", "200ms", "-d", "3s", "--request-timeout", "1s"],
    );
    let took = started.elapsed();
    assert!(took < Duration::from_secs(10), "took {took:?}");
    let kinds = errors(&r);
    assert_eq!(kinds.len(), 1, "{kinds:?}\n{}", r.stderr);
    assert_eq!(kinds[0].0, "timeout", "{kinds:?}");
    assert!(kinds[0].1 >= 2, "{kinds:?}");
    let completed = field(&r.report, "/requests/completed");
    assert!(completed >= 2, "the first two were answered: {completed}");
    assert_eq!(stop(&target).answered, completed);
}

/// The target's own refusals with --h3, each a usage error (exit 2)
/// saying why.
#[test]
fn h3_without_tls_and_faults_it_cannot_act_are_usage_errors() {
    for (args, says) in [
        (&["--h3"][..], "--h3 needs --tls"),
        (&["--h3", "--tls", "--fault", "reset"][..], "does not act on HTTP/3"),
        (
            &["--h3", "--tls", "--restart-every", "1m"][..],
            "cannot be combined with --h3",
        ),
    ] {
        let mut argv = vec!["target", "--listen", "127.0.0.1:0"];
        argv.extend_from_slice(args);
        let out = soakd(&argv);
        let text = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {text}");
        assert!(text.contains(says), "{args:?}: {text}");
    }
}

/// `soakd demo --h3`: the target serves HTTP/3 and the soak speaks it,
/// trusting the certificate the target made.
#[test]
fn demo_soaks_the_target_over_h3() {
    let r = soakd_report(
        &[
            "demo",
            "--h3",
            "-c",
            "20",
            "-i",
            "100ms",
            "-d",
            "2s",
            "--metrics-listen",
            "off",
        ],
        60,
    );
    assert!(r.status.success(), "{}", r.stderr);
    assert_eq!(http(&r)["version"], "3", "{}", http(&r));
    assert_eq!(errors(&r), [], "{}", r.stderr);
    assert!(field(&r.report, "/requests/completed") >= 200, "{}", r.stderr);
    assert!(r.stderr.contains("over HTTP/3"), "{}", r.stderr);
}

/// The dashboard's HTTP/3 row against a real Prometheus scraping soakd
/// while the target sends a GOAWAY every 50 streams: the GOAWAYs and the
/// connections open on HTTP/3 panels return series. The stream resets
/// panel's query is valid and its series are exported (by code, all 0:
/// the built-in target resets no stream soakd has not already handed back
/// at the GOAWAY; tests/h3.rs has resets from aioquic).
#[test]
fn the_h3_dashboard_row_reads_soakd_in_prometheus() {
    let target = target(&["--fault", "goaway@50"]);
    let metrics = format!("127.0.0.1:{}", util::free_port());
    let Some(prom) = util::Prometheus::start(&[&metrics], &["grafana/rules.yml"]) else {
        return;
    };
    let url = target.https_url("/");
    let cacert = target.cert.clone().unwrap();
    let child = util::spawn_soakd(&[
        "run",
        &url,
        "--http",
        "3",
        "--cacert",
        &cacert,
        "-c",
        "2",
        "--streams",
        "5",
        "-r",
        "200",
        "-d",
        "40s",
        "--metrics-listen",
        &metrics,
    ]);
    let queries = util::dashboard_row_queries("HTTP/3");
    assert_eq!(queries.len(), 3, "{queries:?}");
    assert!(queries[1].1.contains("soakd_h3_stream_resets_total"), "{queries:?}");
    let rejected = "soakd_h3_stream_resets_total{job=\"soakd\",code=\"H3_REQUEST_REJECTED\"}";
    util::wait_for(
        || (prom.query(rejected).len() == 1).then_some(()),
        Duration::from_secs(30),
        rejected,
    );
    // Answered (status success, checked by `query`), empty.
    assert_eq!(prom.query(&queries[1].1), vec![]);
    for (title, expr) in [&queries[0], &queries[2]] {
        util::wait_for(
            || (!prom.query(expr).is_empty()).then_some(()),
            Duration::from_secs(30),
            &format!("data for panel {title:?}: {expr}"),
        );
    }
    let open = prom.query(&queries[2].1);
    assert_eq!(open.len(), 1, "{open:?}");
    assert!(open[0].1 >= 1.0, "{open:?}");
    util::signal(child.id(), "TERM");
    let (status, stderr) = util::wait_with_timeout(child, 30);
    assert!(status.success(), "{stderr}");
}

/// Mutual TLS over QUIC: a target that requires client certificates
/// (`--tls-client-ca`) refuses a client without one, a TLS failure and
/// nothing answered, and serves one with `--cert`/`--key` a clean soak.
#[test]
fn client_certificates_over_quic() {
    let pki = util::Pki::new();
    let (cert, key) = pki.server();
    let (client, client_key) = pki.issue("client", &["soakd-client"], (2020, 2100));
    let ca = pki.ca();
    let target = target(&["--tls-cert", &cert, "--tls-key", &key, "--tls-client-ca", &ca]);
    let url = target.https_url("/");
    let run = |extra: &[&str]| {
        let mut args = vec!["-c", "2", "-i", "100ms", "-d", "1500ms"];
        args.extend_from_slice(extra);
        run_h3_on(&url, &ca, "off", &args)
    };
    let without = run(&[]);
    let kinds = errors(&without);
    assert_eq!(kinds.len(), 1, "{kinds:?}\n{}", without.stderr);
    assert_eq!(kinds[0].0, "tls_handshake", "{kinds:?}\n{}", without.stderr);
    // Backoff, not a storm: 2 slots for 1.5 s.
    assert!(kinds[0].1 < 30, "{kinds:?}");
    assert_eq!(field(&without.report, "/responses/2xx"), 0);
    assert!(without.stderr.contains("certificate"), "{}", without.stderr);

    let with = run(&["--cert", &client, "--key", &client_key]);
    assert_eq!(errors(&with), [], "{}", with.stderr);
    let completed = field(&with.report, "/requests/completed");
    assert!(completed >= 20, "{completed}");
    assert_eq!(stop(&target).answered, completed);
}

/// A target killed and started again on its address with the same key:
/// the new process has no state for the connections soakd held, and
/// answers their next packets with stateless resets it can make because
/// its reset key comes from the same private key (RFC 9000 §10.3). soakd
/// counts one `quic_stateless_reset` per connection, nothing else, and
/// reconnects: the soak goes on against the new process.
#[test]
fn a_restarted_target_resets_the_connections_it_lost() {
    let pki = util::Pki::new();
    let (cert, key) = pki.server();
    let ca = pki.ca();
    let mut first = target(&["--tls-cert", &cert, "--tls-key", &key]);
    let addr = first.addr.clone();
    let url = first.https_url("/");
    let metrics = format!("127.0.0.1:{}", util::free_port());
    let run = {
        let (ca, metrics) = (ca.clone(), metrics.clone());
        std::thread::spawn(move || run_h3_on(&url, &ca, &metrics, &["-c", "3", "-i", "100ms", "-d", "4s"]))
    };
    let open = format!("soakd_connections{{target=\"{addr}\",state=\"open\"}}");
    util::wait_until(
        || util::scrape(&metrics).is_some_and(|m| m.get(&open) == Some(&3.0)),
        Duration::from_secs(10),
        "3 QUIC connections open (soakd's metrics)",
    );
    first.kill();
    let second = util::BuiltinTarget::start_on(&addr, &["--tls", "--h3", "--tls-cert", &cert, "--tls-key", &key]);
    let r = run.join().unwrap();
    assert!(r.status.success(), "exit {}\n{}", r.status, r.stderr);
    assert_eq!(errors(&r), [("quic_stateless_reset".to_string(), 3)], "{}", r.stderr);
    assert_eq!(field(&r.report, "/connections/opened"), 6, "each connection made again");
    assert_eq!(field(&r.report, "/connections/open_at_end"), 3);
    assert!(stop(&second).answered > 0, "the soak went on against the new process");
}
