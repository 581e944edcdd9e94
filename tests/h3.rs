//! HTTP/3 end to end with the real binary, against a server soakd did not
//! write: PyPI's aioquic (tests/peers/h3_server.py). Requests counted equal
//! on both sides; connections held past the server's idle timeout by the
//! keep-alive (and lost without it); a GOAWAY every 50 requests that loses
//! nothing; a stream reset, a silent server, nothing listening on the UDP
//! port and a certificate soakd does not trust, each classified.
//!
//! aioquic completes only some tens of handshakes a second here, so every
//! test keeps to a few connections.

mod util;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;
use util::{field as u, soakd_report, temp_path};

/// The aioquic peer in `mode`, with its directory (certificate, counts).
struct Peer {
    /// Kept for its lifetime: dropping it stops the server.
    _peer: util::PyPeer,
    port: u16,
    dir: PathBuf,
}

impl Peer {
    fn start(mode: &[&str]) -> Option<Peer> {
        let dir = temp_path("h3-peer", "d");
        std::fs::create_dir_all(&dir).expect("a temp dir");
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&dir];
        args.extend(mode.iter().map(|m| m as &dyn AsRef<std::ffi::OsStr>));
        let peer = util::PyPeer::start("h3_server.py", &args)?;
        Some(Peer {
            port: peer.port,
            _peer: peer,
            dir,
        })
    }

    fn url(&self) -> String {
        format!("https://127.0.0.1:{}/", self.port)
    }

    fn cacert(&self) -> String {
        self.dir.join("cert.pem").display().to_string()
    }

    fn stat(&self, key: &str) -> u64 {
        let text = std::fs::read_to_string(self.dir.join("stats.json")).unwrap_or_default();
        serde_json::from_str::<Value>(&text).map_or(0, |v| v[key].as_u64().unwrap_or(0))
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn run_h3(peer: &Peer, extra: &[&str], timeout: u64) -> util::RunResult {
    let url = peer.url();
    let cacert = peer.cacert();
    let mut args = vec![
        "run",
        url.as_str(),
        "--http",
        "3",
        "--cacert",
        cacert.as_str(),
        "--metrics-listen",
        "off",
        "--ramp",
        "20",
    ];
    args.extend_from_slice(extra);
    soakd_report(&args, timeout)
}

fn errors(r: &Value) -> Vec<(String, u64)> {
    util::nonzero_errors(r)
}

#[test]
fn requests_are_counted_equal_on_both_sides() {
    let Some(peer) = Peer::start(&["plain"]) else {
        return;
    };
    let r = run_h3(&peer, &["-c", "4", "--streams", "4", "-n", "600"], 60);
    assert!(r.status.success(), "exit {}\n{}", r.status, r.stderr);
    assert_eq!(errors(&r.report), vec![], "{}", r.stderr);
    assert_eq!(u(&r.report, "/requests/completed"), 600);
    assert_eq!(u(&r.report, "/responses/2xx"), 600);
    assert_eq!(peer.stat("requests"), 600, "the server answered what soakd counted");
    assert_eq!(peer.stat("connections"), 4, "one handshake per connection");
    let http = &r.report["workloads"][0]["http"];
    assert_eq!(http["version"], "3", "{http:#}");
}

/// A mix of two requests with checks, from a file: the server answers
/// both with 200 "ok", so the one that expects "pong" fails its body check
/// on every answer and the other passes every check.
#[test]
fn a_mix_with_checks_over_http3() {
    let Some(peer) = Peer::start(&["plain"]) else {
        return;
    };
    let conf = temp_path("h3-mix", "toml");
    std::fs::write(
        &conf,
        format!(
            r#"
requests = 300
metrics_listen = "off"

[[workload]]
url = "{url}"
http = "3"
cacert = ["{cacert}"]
connections = 2
streams = 3

[[workload.request]]
name = "good"
path = "/good"
weight = 2
expect_status = [200]
expect_body_contains = "ok"
expect_header = {{ "Content-Type" = "text/plain" }}

[[workload.request]]
name = "bad"
path = "/bad"
weight = 1
expect_body_contains = "pong"
"#,
            url = peer.url(),
            cacert = peer.cacert()
        ),
    )
    .unwrap();
    let r = soakd_report(&["run", "--config", conf.to_str().unwrap()], 60);
    let _ = std::fs::remove_file(&conf);
    assert!(r.status.success(), "exit {}\n{}", r.status, r.stderr);
    assert_eq!(u(&r.report, "/requests/completed"), 300);
    assert_eq!(peer.stat("requests"), 300);
    assert_eq!(r.report["checks"]["body"], 100, "{:#}", r.report["checks"]);
    for kind in ["status", "header"] {
        assert_eq!(r.report["checks"][kind], 0, "{:#}", r.report["checks"]);
    }
}

/// The server's idle timeout is 4 s and the connections send nothing of
/// their own for 10 s (at most one request each, then an hour's pace):
/// the keep-alive (by default half the negotiated idle timeout, 2 s) holds
/// them, so the server sees no new connection; with it off they time out
/// (twice each) and soakd reconnects, counted as `quic_idle_timeout`.
#[test]
fn keepalive_holds_connections_past_the_servers_idle_timeout() {
    let Some(peer) = Peer::start(&["idle", "4"]) else {
        return;
    };
    let r = run_h3(&peer, &["-c", "3", "-i", "1h", "-d", "10s"], 60);
    assert!(r.status.success(), "exit {}\n{}", r.status, r.stderr);
    assert_eq!(errors(&r.report), vec![], "{}", r.stderr);
    assert_eq!(peer.stat("connections"), 3, "no connection was made twice");
    assert_eq!(peer.stat("idle_closed"), 0);
    assert_eq!(u(&r.report, "/connections/open_at_end"), 3);

    let before = peer.stat("connections");
    let r = run_h3(
        &peer,
        &["-c", "3", "-i", "1h", "-d", "10s", "--h3-keepalive", "off"],
        60,
    );
    let idle = r.report["errors"]["quic_idle_timeout"].as_u64().unwrap_or(0);
    assert!(
        idle >= 3,
        "without keep-alive the idle timeout ends them: {:?}",
        errors(&r.report)
    );
    assert!(peer.stat("connections") >= before + 6, "soakd reconnected after each");
}

/// A GOAWAY after every 50 requests of a connection, then a close: every
/// request is answered exactly once, none fails.
#[test]
fn goaway_every_50_requests_loses_nothing() {
    let Some(peer) = Peer::start(&["goaway", "50"]) else {
        return;
    };
    let r = run_h3(&peer, &["-c", "2", "--streams", "4", "-r", "100", "-d", "8s"], 60);
    assert!(r.status.success(), "exit {}\n{}", r.status, r.stderr);
    assert_eq!(errors(&r.report), vec![], "GOAWAY is not an error\n{}", r.stderr);
    let completed = u(&r.report, "/requests/completed");
    assert!(completed >= 300, "completed {completed}");
    assert_eq!(u(&r.report, "/requests/failed"), 0);
    assert_eq!(
        u(&r.report, "/requests/sent"),
        completed + u(&r.report, "/requests/in_flight_at_end"),
        "every request sent is answered or shown in flight"
    );
    util::wait_until(
        || peer.stat("requests") == completed,
        Duration::from_secs(5),
        "the server's answers equal soakd's completed",
    );
    assert!(
        peer.stat("goaways") >= completed / 50 - 2,
        "goaways {}",
        peer.stat("goaways")
    );
    let http = &r.report["workloads"][0]["http"];
    assert_eq!(http["goaways"]["GOAWAY"], peer.stat("goaways"), "{http:#}");
}

#[test]
fn a_reset_stream_fails_one_request_and_keeps_the_connection() {
    let Some(peer) = Peer::start(&["reset", "10"]) else {
        return;
    };
    let r = run_h3(&peer, &["-c", "1", "-n", "100"], 60);
    let resets = r.report["errors"]["stream_reset"].as_u64().unwrap_or(0);
    assert_eq!(resets, peer.stat("resets"), "{:?}", errors(&r.report));
    assert!(resets >= 9, "{:?}", errors(&r.report));
    assert_eq!(
        u(&r.report, "/requests/completed"),
        100,
        "failed requests go back in the budget"
    );
    assert_eq!(peer.stat("connections"), 1, "the connection stayed");
    let http = &r.report["workloads"][0]["http"];
    assert_eq!(http["resets"]["H3_INTERNAL_ERROR"], resets, "{http:#}");
}

/// 50 requests with `--h3-0rtt` and planned churn (`-c 1`, a new
/// connection every 4-6 requests, the budget jittered): all answered,
/// each once on the server, none an error, whatever became of the 0-RTT.
fn zero_rtt_churn(peer: &Peer) -> util::RunResult {
    let r = run_h3(
        peer,
        &["-c", "1", "-n", "50", "--max-requests-per-conn", "5", "--h3-0rtt", "on"],
        60,
    );
    assert!(r.status.success(), "exit {}\n{}", r.status, r.stderr);
    assert_eq!(errors(&r.report), vec![], "{}", r.stderr);
    assert_eq!(u(&r.report, "/requests/completed"), 50);
    assert_eq!(peer.stat("requests"), 50, "none was answered twice");
    r
}

/// `--h3-0rtt` with planned churn (a new connection every 4-6 requests):
/// every connection after the first resumes its session and sends its
/// first requests as 0-RTT data, which aioquic accepts; nothing is lost
/// or sent twice.
#[test]
fn zero_rtt_requests_on_resumed_connections() {
    let Some(peer) = Peer::start(&["plain"]) else {
        return;
    };
    let r = zero_rtt_churn(&peer);
    let http = &r.report["workloads"][0]["http"];
    let accepted = http["zero_rtt_accepted"].as_u64().unwrap_or(0);
    assert!(
        accepted >= 5,
        "{http:#}\n{:?}",
        std::fs::read_to_string(peer.dir.join("stats.json"))
    );
    // Both sides count the same 0-RTT handshakes, but for the last: the
    // slot reconnects once its budget is spent, and that handshake may
    // finish on the server after soakd stopped looking.
    let early = peer.stat("early_data");
    assert!(
        early == accepted || early == accepted + 1,
        "soakd {accepted}, aioquic {early}"
    );
    assert_eq!(http["zero_rtt_rejected"], 0);
}

/// `--h3-0rtt` against a server that forgets its session tickets: each
/// resumed connection's 0-RTT requests are rejected with the full
/// handshake that follows, and soakd sends them again once it is done:
/// nothing is lost, nothing is answered twice, none is an error.
#[test]
fn zero_rtt_requests_a_server_rejects_are_sent_again() {
    let Some(peer) = Peer::start(&["forget-tickets"]) else {
        return;
    };
    let r = zero_rtt_churn(&peer);
    assert_eq!(peer.stat("resumed"), 0, "the server resumed no session");
    assert_eq!(peer.stat("early_data"), 0);
    let http = &r.report["workloads"][0]["http"];
    assert_eq!(http["zero_rtt_accepted"], 0, "{http:#}");
    // A new connection every 4-6 requests (the budget is jittered): each
    // after the first holds a ticket, tries 0-RTT and is refused.
    let rejected = http["zero_rtt_rejected"].as_u64().unwrap_or(0);
    assert!(rejected >= 5, "{http:#}");
    // Each refused handshake's one early request (`-c 1`, one stream) is
    // sent again, but the last: the slot reconnects once its budget is
    // spent, and that handshake has no request to carry.
    let retried = http["retried"].as_u64().unwrap_or(0);
    assert!(retried == rejected || retried + 1 == rejected, "{http:#}");
}

#[test]
fn a_server_that_never_answers_is_a_timeout_not_a_hang() {
    let Some(peer) = Peer::start(&["silent"]) else {
        return;
    };
    let started = std::time::Instant::now();
    let r = run_h3(
        &peer,
        &["-c", "2", "-i", "200ms", "-d", "3s", "--request-timeout", "1s"],
        60,
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    let timeouts = r.report["errors"]["timeout"].as_u64().unwrap_or(0);
    assert!(timeouts >= 4, "{:?}", errors(&r.report));
    assert_eq!(u(&r.report, "/requests/completed"), 0);
}

#[test]
fn a_certificate_soakd_does_not_trust_is_tls_certificate() {
    let Some(peer) = Peer::start(&["plain"]) else {
        return;
    };
    // The system's roots, not the peer's self-signed certificate.
    let url = peer.url();
    let r = soakd_report(
        &[
            "run",
            &url,
            "--http",
            "3",
            "-c",
            "2",
            "-d",
            "2s",
            "--metrics-listen",
            "off",
        ],
        60,
    );
    let bad = r.report["errors"]["tls_certificate"].as_u64().unwrap_or(0);
    assert!(bad >= 2, "{:?}\n{}", errors(&r.report), r.stderr);
    assert_eq!(peer.stat("connections"), 0);
    assert!(r.stderr.contains("certificate"), "{}", r.stderr);
}

/// A server that speaks no QUIC version soakd does answers with Version
/// Negotiation: `quic_version`, at once, not a timeout.
#[test]
fn a_server_of_another_quic_version_is_quic_version() {
    let Some(peer) = Peer::start(&["v2-only"]) else {
        return;
    };
    let r = run_h3(&peer, &["-c", "2", "-d", "2s", "--connect-timeout", "5s"], 60);
    let n = r.report["errors"]["quic_version"].as_u64().unwrap_or(0);
    assert!(n >= 2, "{:?}\n{}", errors(&r.report), r.stderr);
    assert_eq!(r.report["errors"]["connect_timeout"].as_u64().unwrap_or(0), 0);
    assert_eq!(peer.stat("connections"), 0);
}

#[test]
fn nothing_listening_on_the_udp_port_is_a_connect_timeout() {
    // A UDP port nothing listens on: bound, read back, closed.
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("a UDP port")
        .port();
    let url = format!("https://127.0.0.1:{port}/");
    let started = std::time::Instant::now();
    let r = soakd_report(
        &[
            "run",
            &url,
            "--http",
            "3",
            "--insecure",
            "-c",
            "2",
            "-d",
            "3s",
            "--connect-timeout",
            "1s",
            "--metrics-listen",
            "off",
        ],
        60,
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    let n = r.report["errors"]["connect_timeout"].as_u64().unwrap_or(0);
    assert!(n >= 2, "{:?}\n{}", errors(&r.report), r.stderr);
    assert_eq!(u(&r.report, "/requests/completed"), 0);
}

#[test]
fn http3_needs_an_https_url_and_says_so() {
    let out = util::soakd_timeout(&["run", "http://127.0.0.1:1/", "--http", "3", "-d", "1s"], 30);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--http 3 needs an https:// URL"), "{err}");
    let out = util::soakd_timeout(
        &[
            "run",
            "https://127.0.0.1:1/",
            "--http",
            "3",
            "--pipeline",
            "4",
            "-d",
            "1s",
        ],
        30,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--streams"));
}
