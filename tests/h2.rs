//! HTTP/2 end to end with the real binary: nginx over h2c and TLS, and
//! hostile servers written with PyPI's `h2` (tests/peers/h2_server.py):
//! GOAWAY that loses nothing, REFUSED_STREAM retried, resets, a window
//! that never opens, a stream limit of one, floods and huge header blocks,
//! a reload that removes the slots handed-back requests wait for.

mod util;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;
use util::{Nginx, field as u, heavy_lock, soakd_report, temp_path, total_errors};

fn errors(r: &Value) -> Vec<(String, u64)> {
    util::nonzero_errors(r)
}

/// nginx with HTTP/2 and an access log of `PROTOCOL STATUS` per request.
fn nginx_h2(ssl: Option<&str>) -> (Nginx, PathBuf) {
    let log = temp_path("h2-access", "log");
    let nginx = Nginx::start_h2(
        "log_format h2proto '$server_protocol $status';",
        &format!("access_log {} h2proto; return 200 \"pong\";", log.display()),
        ssl,
    );
    (nginx, log)
}

/// Every line of nginx's access log says HTTP/2.0 200; returns how many.
fn all_http2(log: &PathBuf) -> usize {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    for line in text.lines() {
        assert_eq!(line, "HTTP/2.0 200", "a request was not HTTP/2");
    }
    text.lines().count()
}

#[test]
fn h2c_against_nginx_completes_every_request_over_http2() {
    let (nginx, log) = nginx_h2(None);
    let url = nginx.url("/");
    let r = soakd_report(
        &[
            "run",
            &url,
            "--http",
            "2",
            "-c",
            "8",
            "--streams",
            "10",
            "-n",
            "4000",
            "--metrics-listen",
            "off",
        ],
        60,
    );
    assert!(r.status.success(), "exit {}\n{}", r.status, r.stderr);
    assert_eq!(errors(&r.report), vec![], "{:#}", r.report);
    assert_eq!(u(&r.report, "/requests/completed"), 4000);
    assert_eq!(u(&r.report, "/responses/2xx"), 4000);
    assert_eq!(
        u(&r.report, "/connections/opened"),
        8,
        "one connection per slot, streams on it"
    );
    util::wait_until(
        || all_http2(&log) == 4000,
        Duration::from_secs(5),
        "nginx's log of 4000 HTTP/2 requests",
    );
}

/// A self-signed certificate for 127.0.0.1 (the client runs --insecure:
/// verification is tests/tls.rs's subject) as nginx's ssl directives.
fn self_signed() -> String {
    let dir = util::make_temp_dir("h2-tls");
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    let cert = params.self_signed(&key).unwrap();
    let (c, k) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&c, cert.pem()).unwrap();
    std::fs::write(&k, key.serialize_pem()).unwrap();
    format!("ssl_certificate {}; ssl_certificate_key {};", c.display(), k.display())
}

#[test]
fn tls_auto_negotiates_h2_with_alpn_and_1_1_stays_1_1() {
    let ssl = self_signed();
    let (nginx, log) = nginx_h2(Some(&ssl));
    let url = nginx.https_url("/");
    // auto is the default for https://: ALPN picks h2.
    let r = soakd_report(
        &[
            "run",
            &url,
            "--insecure",
            "-c",
            "4",
            "--streams",
            "5",
            "-n",
            "1000",
            "--metrics-listen",
            "off",
        ],
        60,
    );
    assert!(r.status.success(), "exit {}\n{}", r.status, r.stderr);
    assert_eq!(errors(&r.report), vec![]);
    assert_eq!(u(&r.report, "/requests/completed"), 1000);
    util::wait_until(
        || all_http2(&log) == 1000,
        Duration::from_secs(5),
        "1000 HTTP/2 requests logged",
    );
    // --http 1.1 offers only http/1.1.
    let r = soakd_report(
        &[
            "run",
            &url,
            "--insecure",
            "--http",
            "1.1",
            "-c",
            "2",
            "-n",
            "100",
            "--metrics-listen",
            "off",
        ],
        60,
    );
    assert!(r.status.success(), "{}", r.stderr);
    assert_eq!(u(&r.report, "/requests/completed"), 100);
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.lines().filter(|l| *l == "HTTP/1.1 200").count(), 100);
}

#[test]
fn paced_connections_times_ten_streams_without_errors() {
    let _heavy = heavy_lock();
    let (nginx, log) = nginx_h2(None);
    let url = nginx.url("/");
    // 300 connections × 10 streams, 3000 requests/s for 5 s.
    let r = soakd_report(
        &[
            "run",
            &url,
            "--http",
            "2",
            "-c",
            "300",
            "--streams",
            "10",
            "--ramp",
            "3000",
            "-r",
            "3000",
            "-d",
            "5s",
            "--metrics-listen",
            "off",
        ],
        60,
    );
    assert!(r.status.success(), "exit {}\n{}", r.status, r.stderr);
    assert_eq!(total_errors(&r.report), 0, "{:#}", r.report["errors"]);
    let completed = u(&r.report, "/requests/completed");
    assert!(completed >= 3000 * 4, "completed {completed}");
    assert_eq!(u(&r.report, "/connections/opened"), 300);
    util::wait_until(
        || all_http2(&log) as u64 >= completed,
        Duration::from_secs(5),
        "every request logged",
    );
}

/// `-i` paces each stream slot, as it paces each connection over HTTP/1.1:
/// 4 connections × 5 streams at `-i 100ms` are 200 requests a second (40
/// if `-i` paced connections); `-r` stays the workload's total rate.
#[test]
fn interval_paces_each_stream_slot_and_rate_stays_the_total() {
    let (nginx, log) = nginx_h2(None);
    let url = nginx.url("/");
    let run = |pace: &[&str]| {
        let mut args = vec!["run", &url, "--http", "2", "-c", "4", "--streams", "5", "-d", "3s"];
        args.extend_from_slice(pace);
        args.extend_from_slice(&["--metrics-listen", "off"]);
        let r = soakd_report(&args, 60);
        assert!(r.status.success(), "exit {}\n{}", r.status, r.stderr);
        assert_eq!(total_errors(&r.report), 0, "{:#}", r.report["errors"]);
        assert_eq!(
            u(&r.report, "/workloads/0/http/streams"),
            5,
            "{:#}",
            r.report["workloads"][0]["http"]
        );
        r
    };
    // 200/s for 3 s is 600 due, less what fell due while connecting.
    let paced = run(&["-i", "100ms"]);
    let sent = u(&paced.report, "/requests/sent");
    assert!(
        (480..=620).contains(&sent),
        "-i 100ms over 4 × 5 stream slots sent {sent}"
    );
    // The same slots at `-r 100`: 300, not 5 times that.
    let rated = run(&["-r", "100"]);
    let sent_r = u(&rated.report, "/requests/sent");
    assert!((240..=310).contains(&sent_r), "-r 100 sent {sent_r}");
    let completed = u(&paced.report, "/requests/completed") + u(&rated.report, "/requests/completed");
    util::wait_until(
        || all_http2(&log) as u64 >= completed,
        Duration::from_secs(5),
        "every request logged",
    );
}

#[test]
fn http2_required_of_an_http1_server_is_not_negotiated() {
    // nginx without http2: its answer to the preface is not HTTP/2.
    let nginx = Nginx::start("", "");
    let url = nginx.url("/");
    let r = soakd_report(
        &[
            "run",
            &url,
            "--http",
            "2",
            "-c",
            "2",
            "-d",
            "2s",
            "--metrics-listen",
            "off",
        ],
        30,
    );
    let errs = errors(&r.report);
    assert!(
        !errs.is_empty() && errs.iter().all(|(k, _)| k == "h2_not_negotiated"),
        "{errs:?}"
    );
    assert_eq!(u(&r.report, "/requests/completed"), 0);
}

/// The Python peer in `mode`, with the file it writes its counts to.
struct Peer {
    /// Kept for its lifetime: dropping it stops the server.
    _peer: util::PyPeer,
    port: u16,
    stats: PathBuf,
}

impl Peer {
    fn start(mode: &[&str]) -> Option<Peer> {
        let stats = temp_path("h2-peer", "json");
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&stats];
        args.extend(mode.iter().map(|m| m as &dyn AsRef<std::ffi::OsStr>));
        let peer = util::PyPeer::start("h2_server.py", &args)?;
        Some(Peer {
            port: peer.port,
            _peer: peer,
            stats,
        })
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    fn stat(&self, key: &str) -> u64 {
        let text = std::fs::read_to_string(&self.stats).unwrap_or_default();
        serde_json::from_str::<Value>(&text).map_or(0, |v| v[key].as_u64().unwrap_or(0))
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.stats);
    }
}

fn run_h2(peer: &Peer, extra: &[&str], timeout: u64) -> util::RunResult {
    let url = peer.url();
    let mut args = vec!["run", url.as_str(), "--http", "2", "--metrics-listen", "off"];
    args.extend_from_slice(extra);
    soakd_report(&args, timeout)
}

/// The one long test here: a server that sends a graceful GOAWAY every 100
/// streams, paced at 200 requests/s, for 20 s (40 GOAWAYs; the issue's
/// minute was shown when it was built, and 20 s keeps the suite under 15
/// minutes).
#[test]
fn graceful_goaway_every_100_streams_for_20_seconds_loses_nothing() {
    let Some(peer) = Peer::start(&["goaway", "100"]) else {
        return;
    };
    let _heavy = heavy_lock();
    let r = run_h2(
        &peer,
        &["-c", "4", "--streams", "5", "-r", "200", "-d", "20s", "--ramp", "1000"],
        60,
    );
    assert!(r.status.success(), "exit {}\n{}", r.status, r.stderr);
    assert_eq!(errors(&r.report), vec![], "GOAWAY is not an error");
    let completed = u(&r.report, "/requests/completed");
    let sent = u(&r.report, "/requests/sent");
    // 200/s for 20 s is 4,000; the Python peer on a loaded machine may
    // answer fewer in time (speed is not what this asserts).
    assert!(completed >= 2_000, "completed {completed}");
    assert_eq!(u(&r.report, "/requests/failed"), 0);
    assert_eq!(
        sent,
        completed + u(&r.report, "/requests/in_flight_at_end"),
        "every request sent is answered or shown in flight"
    );
    // Every request answered exactly once: the server answered as many as
    // soakd completed (nothing processed twice, nothing lost).
    util::wait_until(
        || peer.stat("answered") == completed,
        Duration::from_secs(5),
        "the server's answers equal soakd's completed",
    );
    assert!(
        peer.stat("goaways") >= completed / 100 - 4,
        "goaways {}",
        peer.stat("goaways")
    );
}

#[test]
fn a_server_that_closes_before_its_settings_is_not_http2() {
    let Some(peer) = Peer::start(&["close-first"]) else {
        return;
    };
    let r = run_h2(&peer, &["-c", "2", "-d", "2s"], 30);
    let errs = errors(&r.report);
    assert!(
        !errs.is_empty() && errs.iter().all(|(k, _)| k == "h2_not_negotiated"),
        "a close before SETTINGS is h2_not_negotiated, not eof: {errs:?}"
    );
    assert_eq!(u(&r.report, "/requests/sent"), 0);
}

#[test]
fn a_header_list_over_the_servers_limit_is_not_sent() {
    let Some(peer) = Peer::start(&["max-header-list", "300"]) else {
        return;
    };
    // The request's list: 4 pseudo-fields plus user-agent, about 200
    // bytes; the header below adds 32 + 5 + 200.
    let big = format!("x-big: {}", "y".repeat(200));
    let r = run_h2(&peer, &["-c", "1", "-n", "20", "-H", &big], 30);
    assert!(r.status.success(), "exit {}\n{}", r.status, r.stderr);
    assert_eq!(errors(&r.report), vec![("h2_header_list_too_large".to_string(), 20)]);
    assert_eq!(u(&r.report, "/requests/missed"), 20);
    assert_eq!(u(&r.report, "/requests/sent"), 0);
    assert_eq!(peer.stat("requests"), 0, "nothing was sent");
    // Under the limit the same server answers.
    let r = run_h2(&peer, &["-c", "1", "-n", "20"], 30);
    assert_eq!(errors(&r.report), vec![]);
    assert_eq!(u(&r.report, "/requests/completed"), 20);
}

#[test]
fn refused_streams_are_retried_and_resets_counted() {
    let Some(peer) = Peer::start(&["refuse", "10"]) else {
        return;
    };
    let r = run_h2(&peer, &["-c", "2", "--streams", "4", "-n", "1000"], 60);
    assert!(r.status.success(), "exit {}\n{}", r.status, r.stderr);
    assert_eq!(errors(&r.report), vec![], "REFUSED_STREAM is retried, not an error");
    assert_eq!(u(&r.report, "/requests/completed"), 1000);
    assert!(peer.stat("refused") >= 100, "refused {}", peer.stat("refused"));
    drop(peer);

    // A server that refuses every stream gets each request four times
    // (three retries), then it fails as h2_retries_exhausted: no endless
    // resending. Each failure goes back into the budget (as any failure
    // does), so the run is bounded by -d here.
    let Some(peer) = Peer::start(&["refuse", "1"]) else {
        return;
    };
    let r = run_h2(&peer, &["-c", "1", "--streams", "2", "-d", "1s"], 60);
    assert!(r.status.success(), "exit {}\n{}", r.status, r.stderr);
    let errs = errors(&r.report);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(errs[0].0, "h2_retries_exhausted");
    let failed = u(&r.report, "/requests/failed");
    assert!(failed >= 2 && failed == errs[0].1, "{failed} failed, {errs:?}");
    assert_eq!(u(&r.report, "/requests/completed"), 0);
    let refused = peer.stat("refused");
    let at_end = u(&r.report, "/requests/in_flight_at_end");
    assert!(
        refused >= 4 * failed && refused <= 4 * (failed + at_end + 2),
        "{refused} refusals for {failed} failed requests ({at_end} in flight at the end)"
    );
    drop(peer);

    let Some(peer) = Peer::start(&["reset", "10"]) else {
        return;
    };
    let r = run_h2(&peer, &["-c", "2", "--streams", "4", "-n", "1000"], 60);
    let errs = errors(&r.report);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(errs[0].0, "stream_reset");
    assert_eq!(errs[0].1, peer.stat("reset"), "one error per reset stream");
}

#[test]
fn a_window_that_never_opens_times_out() {
    let Some(peer) = Peer::start(&["stall"]) else { return };
    let r = run_h2(
        &peer,
        &[
            "-c",
            "1",
            "--method",
            "POST",
            "--body",
            "hello",
            "--request-timeout",
            "1s",
            "-d",
            "3s",
        ],
        30,
    );
    let errs = errors(&r.report);
    assert!(!errs.is_empty() && errs.iter().all(|(k, _)| k == "timeout"), "{errs:?}");
    assert_eq!(u(&r.report, "/requests/completed"), 0);
}

#[test]
fn max_concurrent_streams_one_is_respected() {
    let Some(peer) = Peer::start(&["max-streams", "1"]) else {
        return;
    };
    let r = run_h2(&peer, &["-c", "2", "--streams", "10", "-n", "200"], 60);
    assert!(r.status.success(), "exit {}\n{}", r.status, r.stderr);
    assert_eq!(errors(&r.report), vec![]);
    assert_eq!(u(&r.report, "/requests/completed"), 200);
    assert_eq!(peer.stat("max_open"), 1, "never a second stream open on a connection");
}

#[test]
fn floods_and_huge_header_blocks_end_in_a_classified_error() {
    for (mode, kind) in [
        ("continuation-flood", "h2_protocol"),
        ("big-header", "h2_protocol"),
        ("ping-flood", "h2_protocol"),
        ("settings-flood", "h2_protocol"),
    ] {
        let Some(peer) = Peer::start(&[mode]) else { return };
        let r = run_h2(&peer, &["-c", "1", "-d", "2s"], 30);
        let errs = errors(&r.report);
        assert!(!errs.is_empty(), "{mode}: no error");
        assert!(errs.iter().all(|(k, _)| k == kind), "{mode}: {errs:?}");
        let rss = r.report.pointer("/process/max_rss_bytes").and_then(Value::as_u64);
        if let Some(rss) = rss {
            assert!(rss < 200 << 20, "{mode}: soakd grew to {rss} bytes");
        }
    }
}

#[test]
fn latency_counts_from_the_due_time_through_a_server_stall() {
    let Some(peer) = Peer::start(&["delay-once", "1"]) else {
        return;
    };
    // 10 streams on one connection at 100 requests/s; the server stalls
    // for 1 s at the start. About 100 requests fall due during the stall
    // while only 10 streams can be open: the others wait in the schedule,
    // and each one's latency counts from when it was due (the
    // coordinated-omission proof). A client measuring from the write
    // would see 10 slow requests (3%); from the due time about 100 are,
    // spread from 1 s down to 0.
    let r = run_h2(&peer, &["-c", "1", "--streams", "10", "-r", "100", "-d", "3s"], 30);
    assert!(r.status.success(), "exit {}\n{}", r.status, r.stderr);
    assert_eq!(errors(&r.report), vec![]);
    let lat = &r.report["latency_seconds"];
    let max = lat["max"].as_f64().unwrap();
    assert!(max >= 0.9, "the first requests waited out the stall: max {max}");
    let p90 = lat["p90"].as_f64().unwrap();
    assert!(
        p90 >= 0.2,
        "the requests due during the stall count from their due time: p90 {p90}"
    );
}

/// A request mix with checks over h2c: nginx with two locations, one that
/// passes the checks and one that fails its status and body checks; every
/// request is counted under its name, every failed check under its kind,
/// and nginx's access log shows HTTP/2.0 for each.
#[test]
fn a_request_mix_with_checks_over_h2c() {
    let log = temp_path("h2-mix", "log");
    let nginx = Nginx::start_h2(
        "log_format h2mix '$server_protocol $uri $status';",
        &format!(
            "access_log {} h2mix; location = /ok {{ return 200 \"fine\"; }} location = /bad {{ return 503 \"down\"; }}",
            log.display()
        ),
        None,
    );
    let conf = temp_path("h2-mix", "toml");
    std::fs::write(
        &conf,
        format!(
            r#"
requests = 2000
metrics_listen = "off"

[[workload]]
name = "mix"
url = "{}"
http = "2"
streams = 5
connections = 4

[[workload.request]]
name = "ok"
path = "/ok"
weight = 3
expect_status = [200]
expect_body_contains = "fine"
expect_header = {{ "Content-Type" = "text/plain" }}

[[workload.request]]
name = "bad"
path = "/bad"
weight = 1
expect_status = [200]
expect_body_contains = "fine"
"#,
            nginx.url("/")
        ),
    )
    .unwrap();
    let r = soakd_report(&["run", "--config", conf.to_str().unwrap()], 60);
    let _ = std::fs::remove_file(&conf);
    assert!(r.status.success(), "exit {}\n{}", r.status, r.stderr);
    let rep = &r.report;
    assert_eq!(errors(rep), vec![], "a failed check is not an error");
    assert_eq!(u(rep, "/requests/completed"), 2000);
    let req = |name: &str| -> Value {
        rep["workloads"][0]["by_request"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no request {name}"))
    };
    let (ok, bad) = (req("ok"), req("bad"));
    let (n_ok, n_bad) = (u(&ok, "/count"), u(&bad, "/count"));
    assert_eq!(n_ok + n_bad, 2000);
    assert!(n_ok.abs_diff(1500) <= 20, "3:1 mix: ok {n_ok}, bad {n_bad}");
    let checks = |r: &Value| -> Vec<u64> {
        ["status", "header", "body", "size"]
            .iter()
            .map(|k| u(r, &format!("/checks/{k}")))
            .collect()
    };
    assert_eq!(checks(&ok), [0, 0, 0, 0], "status, header and body pass");
    assert_eq!(checks(&bad), [n_bad, 0, n_bad, 0], "503 \"down\" fails status and body");
    // nginx answered each request once, over HTTP/2.
    util::wait_until(
        || std::fs::read_to_string(&log).unwrap_or_default().lines().count() == 2000,
        Duration::from_secs(5),
        "2000 access log lines",
    );
    let text = std::fs::read_to_string(&log).unwrap();
    let mut by_uri = std::collections::BTreeMap::<String, u64>::new();
    for line in text.lines() {
        let mut f = line.split(' ');
        assert_eq!(f.next(), Some("HTTP/2.0"), "{line}");
        *by_uri.entry(f.next().unwrap_or("").to_string()).or_default() += 1;
    }
    assert_eq!(by_uri.get("/ok").copied(), Some(n_ok));
    assert_eq!(by_uri.get("/bad").copied(), Some(n_bad));
    drop(nginx);
}

/// A reload that shrinks `connections` while requests a GOAWAY handed
/// back wait for a new connection. The peer sends each of the first six
/// connections away with a GOAWAY naming stream 0, so every connection's
/// four streams were not processed and wait in the worker's retry list;
/// the connections that replace them get no SETTINGS (they cannot send)
/// until the test releases them, after the reload. So at the reload 24
/// requests wait, four under each slot, and the slots that go take
/// theirs with them:
///
/// - `-t 1`, 6 → 2 connections: slots 2–5 leave; their 16 requests move
///   to slot 0 or 1 (the workload's slots left on that worker) and are
///   sent there once released. Nothing is lost: every request sent is
///   completed, none is in flight at the end. (Without the move they
///   would never be sent again and end in flight.)
/// - `-t 2`, 6 → 1: worker 1 held slots 1, 3 and 5 and keeps none; their
///   12 requests leave the retry list and stay what they are, sent and
///   unanswered: in flight at the end, exactly 12, and the run still ends
///   at once (its worker does not wait for them). Worker 0's slots 2 and 4
///   hand theirs to slot 0.
///
/// Either way: no error, `sent = completed + failed + in flight at end`,
/// the server answered each request once, and the GOAWAYs and retries are
/// in /metrics and the report's `http` section.
#[test]
fn a_reload_that_removes_slots_moves_their_handed_back_requests() {
    for (threads, after, lost) in [(1u32, 2u32, 0u64), (2, 1, 12)] {
        let Some(peer) = Peer::start(&["goaway-hold", "4", "6"]) else {
            return;
        };
        reload_while_requests_wait(&peer, threads, after, lost);
    }
}

fn reload_while_requests_wait(peer: &Peer, threads: u32, after: u32, lost: u64) {
    let case = format!("-t {threads}, 6 → {after} connections");
    let metrics = format!("127.0.0.1:{}", util::free_port());
    let dir = util::TempDir::new("h2-reload");
    let conf = dir.path().join("soak.toml");
    let config = |connections: u32| {
        format!(
            "threads = {threads}\nmetrics_listen = \"{metrics}\"\n\n\
             [[workload]]\nname = \"w\"\nurl = \"{}\"\nhttp = \"2\"\nstreams = 4\n\
             connections = {connections}\nramp = 1000\nconnect_timeout = \"30s\"\n",
            peer.url()
        )
    };
    std::fs::write(&conf, config(6)).unwrap();
    let report = temp_path("h2-reload", "json");
    let child = util::spawn_soakd(&[
        "run",
        "--config",
        conf.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    // Six GOAWAYs (24 requests handed back) and six new connections held
    // before their SETTINGS: every slot has its four requests waiting.
    util::wait_until(
        || peer.stat("goaways") == 6 && peer.stat("connections") == 12,
        Duration::from_secs(20),
        &format!("{case}: six GOAWAYs and six held connections"),
    );
    let scrape = || util::scrape(&metrics).unwrap_or_default();
    let series = |m: &std::collections::HashMap<String, f64>, name: &str, has: &str| -> f64 {
        m.iter()
            .filter(|(k, _)| k.split('{').next() == Some(name) && k.contains(has))
            .map(|(_, v)| v)
            .sum()
    };
    util::wait_until(
        || {
            let m = scrape();
            series(&m, "soakd_h2_goaways_total", "NO_ERROR") == 6.0
                && series(&m, "soakd_requests_in_flight", "") == 24.0
        },
        Duration::from_secs(10),
        &format!("{case}: /metrics shows the 6 GOAWAYs and the 24 requests waiting"),
    );
    assert_eq!(peer.stat("answered"), 0);

    util::wait_for_handler(child.id(), "HUP");
    std::fs::write(&conf, config(after)).unwrap();
    util::signal(child.id(), "HUP");
    util::wait_until(
        || {
            let m = scrape();
            series(&m, "soakd_config_reloads_total", "success") == 1.0
                && series(&m, "soakd_connections_desired", "") == f64::from(after)
                && util::metric_sum(&m, "soakd_connections") == f64::from(after)
        },
        Duration::from_secs(10),
        &format!("{case}: the reload applied, {after} slot(s) left"),
    );
    // Released: the slots left get their SETTINGS and send what waits.
    std::fs::write(format!("{}.release", peer.stats.display()), b"").unwrap();
    util::wait_until(
        || peer.stat("answered") >= 24 - lost + 100,
        Duration::from_secs(20),
        &format!("{case}: the requests that waited and 100 more answered"),
    );
    util::signal(child.id(), "TERM");
    let out = util::wait_output(child, 30);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{case}: exit {}\n{stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{case}: {stderr}");
    let rep: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let _ = std::fs::remove_file(&report);
    let _ = std::fs::remove_file(format!("{}.release", peer.stats.display()));
    assert_eq!(errors(&rep), vec![], "{case}: a handed-back request is not an error");
    let (sent, completed) = (u(&rep, "/requests/sent"), u(&rep, "/requests/completed"));
    let (failed, in_flight) = (u(&rep, "/requests/failed"), u(&rep, "/requests/in_flight_at_end"));
    assert_eq!(failed, 0, "{case}");
    assert_eq!(
        sent,
        completed + failed + in_flight,
        "{case}: every request sent is accounted for"
    );
    assert_eq!(
        in_flight, lost,
        "{case}: the requests of a worker left without a slot stay in flight; all others are answered"
    );
    util::wait_until(
        || peer.stat("answered") == completed,
        Duration::from_secs(5),
        &format!("{case}: the server's answers equal soakd's completed"),
    );
    let http = &rep["workloads"][0]["http"];
    assert_eq!(http["goaways"], serde_json::json!({"NO_ERROR": 6}), "{case}: {http}");
    assert_eq!(u(http, "/retried"), 24, "{case}: {http}");
}
