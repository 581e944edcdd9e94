//! WebSocket targets (`ws://`, `wss://`): the real binary against Python's
//! `websockets` package (a server soakd's authors did not write, which
//! pings every second and drops a client whose pong is a second late),
//! the same through nginx as a reverse proxy, over TLS with a private CA,
//! and a deliberately broken raw server for each protocol oddity.
//!
//! The peers print what they saw (`open`, `closed CODE`, `got close
//! CODE`) on stdout; the tests wait for those lines, never for time.

mod util;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use serde_json::Value;
use util::*;

/// A Python peer server (tests/peers/SCRIPT) and the lines it printed.
struct Peer {
    child: Child,
    port: u16,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Peer {
    /// Starts the peer, or `None` (the test is skipped, loudly, by
    /// `test_python`) when the venv is missing.
    fn start(script: &str, args: &[&str]) -> Option<Peer> {
        Peer::start_in(&[], script, args)
    }

    /// [`Peer::start`] under a command prefix (`ip netns exec NS`, which
    /// execs it: killing the child kills the peer).
    fn start_in(prefix: &[&str], script: &str, args: &[&str]) -> Option<Peer> {
        let python = test_python()?;
        let path = format!("{}/tests/peers/{script}", env!("CARGO_MANIFEST_DIR"));
        let mut command = match prefix.split_first() {
            Some((program, rest)) => {
                let mut c = Command::new(program);
                c.args(rest).arg(python);
                c
            }
            None => Command::new(python),
        };
        let mut child = command
            .arg(path)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the python peer");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stdout = child.stdout.take().unwrap();
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        let port = wait_for(
            || {
                lines
                    .lock()
                    .unwrap()
                    .iter()
                    .find_map(|l| l.strip_prefix("port ").map(|p| p.parse::<u16>().unwrap()))
            },
            Duration::from_secs(20),
            "the python peer to listen",
        );
        Some(Peer { child, port, lines })
    }

    fn url(&self, path: &str) -> String {
        format!("ws://127.0.0.1:{}{path}", self.port)
    }

    /// How many printed lines are exactly `line`.
    fn count(&self, line: &str) -> usize {
        self.lines.lock().unwrap().iter().filter(|l| *l == line).count()
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ws(r: &Value, workload: usize) -> &Value {
    &r["workloads"][workload]["ws"]
}

fn errors_of(r: &Value, kind: &str) -> u64 {
    r["errors"][kind].as_u64().unwrap_or(0)
}

fn closes(r: &Value) -> u64 {
    ws(r, 0)["closes"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum()
}

/// Held sockets answer the server's pings (it drops any that do not) and
/// ping it themselves: 300 sockets for 20 s, no error, no close.
#[test]
fn held_sockets_survive_a_pinging_server() {
    let _heavy = heavy_lock();
    let Some(peer) = Peer::start("ws_server.py", &[]) else {
        return;
    };
    let run = soakd_report(
        &[
            "run",
            "--metrics-listen",
            "off",
            &peer.url("/echo"),
            "-c",
            "300",
            "-d",
            "20s",
            "--ws-ping",
            "1s",
        ],
        90,
    );
    let r = &run.report;
    assert!(run.status.success(), "{}", run.stderr);
    assert_eq!(total_errors(r), 0, "{}", run.stderr);
    // Every ping answered in time (the default --ws-ping-timeout, 10s).
    assert_eq!(errors_of(r, "ws_ping_timeout"), 0, "{}", run.stderr);
    assert_eq!(closes(r), 0, "{:#}", ws(r, 0));
    let w = ws(r, 0);
    assert_eq!(w["mode"], "hold");
    assert_eq!(w["upgrades"].as_u64(), Some(300), "{w:#}");
    // The server pings each socket every second: ~19 each were answered.
    assert!(w["server_pings"].as_u64().unwrap() >= 300 * 10, "{w:#}");
    // And soakd's own pings came back, their round trip measured.
    let pongs = w["pongs"].as_u64().unwrap();
    assert!(pongs >= 300 * 10, "{w:#}");
    assert_eq!(w["ping_rtt_seconds"]["count"].as_u64(), Some(pongs));
    assert_eq!(field(r, "/connections/closed_by_reason/error"), 0);
    // The stop closed each with 1000 (the server saw it).
    wait_until(
        || peer.count("closed 1000") == 300,
        Duration::from_secs(20),
        "the server to see 300 closes with 1000",
    );
}

/// Request/response: each message is timed to its echo; replies are
/// counted, and the reply latency is the workload's latency.
#[test]
fn echo_replies_are_timed_from_the_due_time() {
    let Some(peer) = Peer::start("ws_server.py", &[]) else {
        return;
    };
    let run = soakd_report(
        &[
            "run",
            "--metrics-listen",
            "off",
            &peer.url("/echo"),
            "-c",
            "10",
            "-i",
            "100ms",
            "-d",
            "3s",
            "--ws-message",
            "hello",
        ],
        60,
    );
    let r = &run.report;
    assert_eq!(total_errors(r), 0, "{}", run.stderr);
    let w = ws(r, 0);
    assert_eq!(w["mode"], "request");
    let (sent, replies) = (w["messages_sent"].as_u64().unwrap(), w["replies"].as_u64().unwrap());
    // 10 connections × 10/s × 3 s, give or take the ramp and the stop.
    assert!((200..=320).contains(&sent), "{w:#}");
    assert!(replies + 10 >= sent && replies <= sent, "{w:#}");
    assert_eq!(field(r, "/requests/completed"), replies);
    assert!(field_f64(r, "/schedule_lag_seconds/count") > 0.0);
    let p50 = w["reply_seconds"]["p50"].as_f64().unwrap();
    assert!(p50 < 0.1, "{w:#}");
    assert!(run.stderr.contains("ws 127.0.0.1:"), "{}", run.stderr);
}

/// The coordinated-omission proof over WebSocket: the echo server stalls
/// for a second (SIGSTOP); messages due during the stall are timed from
/// when they were due, so the p99 shows the stall and the p50 does not.
///
/// The run ends 2 s after the stall (`stall_then_stop`), not at a fixed
/// duration that a busy machine could reach before the stall.
#[test]
fn a_stalled_server_shows_in_the_p99_not_the_p50() {
    let Some(peer) = Peer::start("ws_server.py", &["--no-ping"]) else {
        return;
    };
    let pid = peer.child.id();
    let metrics = format!("127.0.0.1:{}", free_port());
    let child = spawn_soakd(&[
        "run",
        "--metrics-listen",
        &metrics,
        &peer.url("/echo"),
        "-c",
        "10",
        "-i",
        "50ms",
        "-d",
        "60s",
        "--ws-message",
        "tick",
        "--report",
        "-",
    ]);
    wait_until(
        || scrape(&metrics).is_some_and(|m| metric_sum(&m, "soakd_responses_total") >= 400.0),
        Duration::from_secs(20),
        "2 s of echoes (400)",
    );
    stall_then_stop(&child, || signal(pid, "STOP"), || signal(pid, "CONT"));
    let out = wait_output(child, 60);
    let r: Value = serde_json::from_slice(&out.stdout).expect("a JSON report on stdout");
    assert_eq!(total_errors(&r), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let w = ws(&r, 0);
    let (p50, p99) = (
        w["reply_seconds"]["p50"].as_f64().unwrap(),
        w["reply_seconds"]["p99"].as_f64().unwrap(),
    );
    assert!(p99 >= 0.7, "the stall is hidden: {w:#}");
    assert!(p50 < 0.1, "the stall leaked into the median: {w:#}");
}

/// Regression: soakd failed a socket whose server was still writing an
/// oversized message and closed it at once, with that message's bytes
/// unread; the kernel answered with a reset, and the server's write failed
/// before it read soakd's close 1009 (`protocol_oddities_are_classified`
/// failed that way under load). In a namespace whose TCP buffers are too
/// small for the 2 MiB message, that write is always still going: the
/// server now hears 1009 on every socket, as RFC 6455 §7.1.1 has it (the
/// socket lingers, discarding, until the server closes), where it heard
/// only resets before.
#[test]
fn an_oversized_message_is_refused_with_1009_while_the_server_still_writes() {
    if !need_root("small TCP buffers in a network namespace") {
        return;
    }
    let ns = NetNs::create().unwrap_or_else(|why| panic!("cannot create a network namespace as root: {why}"));
    ns.sysctl("net.ipv4.tcp_rmem", "4096 16384 65536");
    ns.sysctl("net.ipv4.tcp_wmem", "4096 16384 65536");
    let Some(peer) = Peer::start_in(&ns.exec(), "ws_raw.py", &[]) else {
        return;
    };
    let out = wait_output(
        spawn_soakd_in(
            &ns.exec(),
            &[
                "run",
                "--metrics-listen",
                "off",
                &peer.url("/oversize"),
                "-c",
                "1",
                "-d",
                "1s",
                "--ws-ping",
                "off",
                "--report",
                "-",
            ],
        ),
        60,
    );
    let r: Value = serde_json::from_slice(&out.stdout).expect("a JSON report on stdout");
    let failed = errors_of(&r, "ws_protocol");
    assert!(failed > 0, "{:#}", r["errors"]);
    assert_eq!(total_errors(&r), failed, "{:#}", r["errors"]);
    // Each socket's server reports what it heard once soakd's side ended.
    wait_until(
        || peer.lines().len() > failed as usize,
        Duration::from_secs(10),
        "a line from the server for every failed socket",
    );
    let heard = peer.lines()[1..].to_vec();
    assert!(
        heard.iter().all(|l| l == "got close 1009"),
        "every socket's server heard the close 1009: {heard:?}"
    );
}

/// `soakd run` subscribing (`--ws-subscribe go`) to the peer's `/push`
/// with `conns` sockets for `secs`.
fn subscribe(peer: &Peer, conns: &str, secs: &str) -> util::RunResult {
    let url = peer.url("/push");
    let args = [
        "run",
        "--metrics-listen",
        "off",
        &url,
        "-c",
        conns,
        "-d",
        secs,
        "--ws-subscribe",
        "go",
    ];
    soakd_report(&args, 60)
}

/// Subscribe: one message after the handshake, then the pushes are counted
/// and the silences between them measured.
#[test]
fn pushes_are_counted_with_their_silences() {
    let Some(peer) = Peer::start("ws_server.py", &["--push-every", "0.05"]) else {
        return;
    };
    let run = subscribe(&peer, "20", "3s");
    let r = &run.report;
    assert_eq!(total_errors(r), 0, "{}", run.stderr);
    let w = ws(r, 0);
    assert_eq!(w["mode"], "subscribe");
    assert_eq!(w["messages_sent"].as_u64(), Some(20), "{w:#}");
    // ~20/s per socket for ~3 s.
    assert!(w["messages_received"].as_u64().unwrap() >= 20 * 30, "{w:#}");
    let longest = w["silence_seconds"]["max"].as_f64().unwrap();
    assert!(longest > 0.03 && longest < 1.0, "{w:#}");
}

/// Subscribe: a stream that goes quiet and then ends (one push, 0.6 s of
/// silence, a close 1000) still shows its 0.6 s silence, recorded when the
/// socket closes. Regression: only the once-a-second walk recorded
/// silences, so a socket closed mid-interval lost that interval's sample
/// (here all of it: the close comes before the first walk at 1 s).
#[test]
fn a_silence_ended_by_a_close_is_recorded() {
    let Some(peer) = Peer::start("ws_server.py", &["--quiet", "0.6"]) else {
        return;
    };
    let run = subscribe(&peer, "1", "2s");
    let r = &run.report;
    assert_eq!(total_errors(r), 0, "{}", run.stderr);
    let w = ws(r, 0);
    // The quiet socket's close, then its successor's pushes every 50 ms.
    assert_eq!(w["closes"]["normal"].as_u64(), Some(1), "{w:#}");
    assert!(w["messages_received"].as_u64().unwrap() >= 10, "{w:#}");
    let longest = w["silence_seconds"]["max"].as_f64().unwrap();
    eprintln!("0.6 s quiet, then a close: longest silence {longest} s");
    assert!((0.55..0.95).contains(&longest), "the quiet 0.6 s: {w:#}");
}

/// SIGTERM: every socket starts the closing handshake and the server sees
/// code 1000.
#[test]
fn sigterm_closes_with_1000() {
    let Some(peer) = Peer::start("ws_server.py", &[]) else {
        return;
    };
    let child = spawn_soakd(&[
        "run",
        "--metrics-listen",
        "off",
        &peer.url("/echo"),
        "-c",
        "20",
        "-d",
        "60s",
    ]);
    wait_until(|| peer.count("open") == 20, Duration::from_secs(20), "20 sockets open");
    signal(child.id(), "TERM");
    let (status, stderr) = wait_with_timeout(child, 30);
    assert!(status.success(), "{stderr}");
    wait_until(
        || peer.count("closed 1000") == 20,
        Duration::from_secs(10),
        "the server to see 20 closes with 1000",
    );
    assert!(stderr.contains("shutdown 20"), "{stderr}");
}

/// A socket that fails during the stop's closing handshake (the server
/// answers our close with a bad frame) ends the stop's wait for it.
/// Regression: the failure reset the socket before its closing handshake
/// was counted off, so each worker waited for it until the 5 s drain
/// timeout; the bound below is that timeout, not a speed.
#[test]
fn a_failure_during_the_closing_handshake_does_not_hold_the_stop() {
    let Some(peer) = Peer::start("ws_raw.py", &[]) else {
        return;
    };
    let child = spawn_soakd(&[
        "run",
        "--metrics-listen",
        "off",
        &peer.url("/close-bad"),
        "-c",
        "3",
        "-d",
        "60s",
        "--ws-ping",
        "off",
        "--ws-subscribe",
        "go",
    ]);
    // A socket subscribes once upgraded: then the stop closes it.
    wait_until(
        || peer.count("subscribed") == 3,
        Duration::from_secs(20),
        "3 sockets upgraded",
    );
    let stopped = std::time::Instant::now();
    signal(child.id(), "TERM");
    let (status, stderr) = wait_with_timeout(child, 30);
    let took = stopped.elapsed();
    eprintln!("the stop with 3 failed closing handshakes took {took:?}");
    assert!(status.success(), "{stderr}");
    assert_eq!(peer.count("got close 1000"), 3, "{:?}", peer.lines());
    assert!(
        took < DRAIN_TIMEOUT,
        "the stop took {took:?}: it waited out the drain timeout\n{stderr}"
    );
}

/// `plan::defaults::DRAIN_TIMEOUT`: how long a stop waits for sockets.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Through nginx as a reverse proxy (the Upgrade headers passed on).
#[test]
fn echo_through_nginx() {
    let Some(peer) = Peer::start("ws_server.py", &[]) else {
        return;
    };
    let nginx = Nginx::start(
        "",
        &format!(
            "proxy_pass http://127.0.0.1:{}; proxy_http_version 1.1; \
             proxy_set_header Upgrade $http_upgrade; proxy_set_header Connection \"upgrade\"; \
             proxy_read_timeout 3600s;",
            peer.port
        ),
    );
    let url = nginx.url("/echo").replacen("http://", "ws://", 1);
    let run = soakd_report(
        &[
            "run",
            "--metrics-listen",
            "off",
            &url,
            "-c",
            "50",
            "-d",
            "4s",
            "--ws-message",
            "via nginx",
            "--ws-ping",
            "1s",
        ],
        60,
    );
    let r = &run.report;
    assert_eq!(total_errors(r), 0, "{}\n{}", run.stderr, nginx.logs());
    let w = ws(r, 0);
    assert_eq!(w["upgrades"].as_u64(), Some(50), "{w:#}");
    assert!(w["replies"].as_u64().unwrap() > 1000, "{w:#}");
    assert!(w["pongs"].as_u64().unwrap() >= 50, "{w:#}");
    assert_eq!(closes(r), 0);
}

/// `wss://` with a private CA: verified with `--cacert`, refused without.
#[test]
fn wss_with_a_private_ca() {
    let dir = TempDir::new("wss");
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "soakd ws test CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let params = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
    let cert = params
        .signed_by(&key, &Issuer::from_params(&ca_params, &ca_key))
        .unwrap();
    let p = |n: &str| dir.path().join(n).display().to_string();
    std::fs::write(p("ca.pem"), ca.pem()).unwrap();
    std::fs::write(p("server.pem"), cert.pem()).unwrap();
    std::fs::write(p("server.key"), key.serialize_pem()).unwrap();
    let Some(peer) = Peer::start("ws_server.py", &["--cert", &p("server.pem"), "--key", &p("server.key")]) else {
        return;
    };
    let url = format!("wss://127.0.0.1:{}/echo", peer.port);
    let run = soakd_report(
        &[
            "run",
            "--metrics-listen",
            "off",
            &url,
            "-c",
            "10",
            "-d",
            "3s",
            "--ws-message",
            "secret",
            "--cacert",
            &p("ca.pem"),
        ],
        60,
    );
    let r = &run.report;
    assert_eq!(total_errors(r), 0, "{}", run.stderr);
    assert_eq!(ws(r, 0)["upgrades"].as_u64(), Some(10));
    assert!(ws(r, 0)["replies"].as_u64().unwrap() > 100);
    assert_eq!(r["tls"]["verified"], true);
    let bad = soakd_report(&["run", "--metrics-listen", "off", &url, "-c", "2", "-d", "1s"], 60);
    assert!(errors_of(&bad.report, "tls_certificate") > 0, "{}", bad.stderr);
    assert_eq!(field(&bad.report, "/workloads/0/ws/upgrades"), 0);
}

/// A refused upgrade is `ws_handshake`, its status counted; so is a
/// subprotocol the server does not choose. Nothing hangs.
#[test]
fn refused_upgrades_are_handshake_errors() {
    let Some(peer) = Peer::start("ws_server.py", &[]) else {
        return;
    };
    let run = soakd_report(
        &[
            "run",
            "--metrics-listen",
            "off",
            &peer.url("/nope"),
            "-c",
            "2",
            "-d",
            "2s",
        ],
        60,
    );
    let r = &run.report;
    assert!(errors_of(r, "ws_handshake") > 0, "{}", run.stderr);
    assert!(field(r, "/responses/4xx") > 0, "{r:#}");
    assert_eq!(total_errors(r), errors_of(r, "ws_handshake"));
    assert!(run.stderr.contains("answered 404"), "{}", run.stderr);
    let proto = soakd_report(
        &[
            "run",
            "--metrics-listen",
            "off",
            &peer.url("/echo"),
            "-c",
            "2",
            "-d",
            "2s",
            "--ws-subprotocol",
            "chat.v9",
        ],
        60,
    );
    assert!(errors_of(&proto.report, "ws_handshake") > 0, "{}", proto.stderr);
    assert!(proto.stderr.contains("subprotocol"), "{}", proto.stderr);
    let ok = Peer::start("ws_server.py", &["--subprotocol", "chat.v9"]).unwrap();
    let good = soakd_report(
        &[
            "run",
            "--metrics-listen",
            "off",
            &ok.url("/echo"),
            "-c",
            "2",
            "-d",
            "2s",
            "--ws-subprotocol",
            "chat.v9",
        ],
        60,
    );
    assert_eq!(total_errors(&good.report), 0, "{}", good.stderr);
}

/// Each protocol oddity of the raw server is classified exactly, and soakd
/// answers with the close code the RFC gives.
#[test]
fn protocol_oddities_are_classified() {
    let Some(peer) = Peer::start("ws_raw.py", &[]) else {
        return;
    };
    // (path, error kind, close code soakd sends back; None: none expected)
    let cases: &[(&str, &str, Option<u16>)] = &[
        ("/reserved", "ws_protocol", Some(1002)),
        ("/opcode", "ws_protocol", Some(1002)),
        ("/masked", "ws_protocol", Some(1002)),
        ("/badutf8", "ws_protocol", Some(1007)),
        ("/oversize", "ws_protocol", Some(1009)),
        ("/ctl-long", "ws_protocol", Some(1002)),
        ("/ctl-frag", "ws_protocol", Some(1002)),
        ("/close-1011", "ws_closed", Some(1011)),
        ("/close-nocode", "ws_closed", None),
    ];
    for &(path, kind, code) in cases {
        let before = peer.lines().len();
        let run = soakd_report(
            &[
                "run",
                "--metrics-listen",
                "off",
                &peer.url(path),
                "-c",
                "1",
                "-d",
                "1s",
                "--ws-ping",
                "off",
            ],
            60,
        );
        let r = &run.report;
        assert!(errors_of(r, kind) > 0, "{path}: {:#}\n{}", r["errors"], run.stderr);
        assert_eq!(total_errors(r), errors_of(r, kind), "{path}: {:#}", r["errors"]);
        let said: Vec<String> = peer.lines()[before..].to_vec();
        match code {
            Some(c) => assert!(
                said.contains(&format!("got close {c}")),
                "{path}: the server heard {said:?}"
            ),
            // A close without a code is answered with a close without one
            // (read as 1005 by the server).
            None => assert!(said.contains(&"got close 1005".to_string()), "{path}: {said:?}"),
        }
    }
    // A normal close is no error: counted by code, and the slot reconnects.
    let run = soakd_report(
        &[
            "run",
            "--metrics-listen",
            "off",
            &peer.url("/close-1000"),
            "-c",
            "1",
            "-d",
            "2s",
        ],
        60,
    );
    let r = &run.report;
    assert_eq!(total_errors(r), 0, "{}", run.stderr);
    assert!(ws(r, 0)["closes"]["normal"].as_u64().unwrap() >= 2, "{:#}", ws(r, 0));
    // A control frame between fragments, and frames split into 1-byte
    // writes, are fine.
    let run = soakd_report(
        &[
            "run",
            "--metrics-listen",
            "off",
            &peer.url("/interleaved"),
            "-c",
            "1",
            "-d",
            "1s",
        ],
        60,
    );
    assert_eq!(total_errors(&run.report), 0, "{}", run.stderr);
    assert_eq!(ws(&run.report, 0)["messages_received"].as_u64(), Some(1));
    assert_eq!(ws(&run.report, 0)["server_pings"].as_u64(), Some(1));
    let run = soakd_report(
        &[
            "run",
            "--metrics-listen",
            "off",
            &peer.url("/push-split"),
            "-c",
            "2",
            "-d",
            "2s",
            "--ws-subscribe",
            "x",
        ],
        60,
    );
    assert_eq!(total_errors(&run.report), 0, "{}", run.stderr);
    assert_eq!(ws(&run.report, 0)["messages_received"].as_u64(), Some(40));
}

/// `--ws-reply none` with `--ws-binary` against a server that reads and
/// never answers: messages go out on the schedule as binary frames (the
/// server sees each one as such), are counted as sent, and nothing waits
/// for a reply, so no timeout and no request in flight.
#[test]
fn untimed_binary_messages_reach_a_silent_server() {
    let Some(peer) = Peer::start("ws_server.py", &[]) else {
        return;
    };
    let run = soakd_report(
        &[
            "run",
            "--metrics-listen",
            "off",
            &peer.url("/sink"),
            "-c",
            "5",
            "-i",
            "100ms",
            "-d",
            "2s",
            "--request-timeout",
            "300ms",
            "--ws-message",
            "bytes",
            "--ws-binary",
            "--ws-reply",
            "none",
        ],
        60,
    );
    let r = &run.report;
    assert!(run.status.success(), "{}", run.stderr);
    assert_eq!(total_errors(r), 0, "{}", run.stderr);
    let w = ws(r, 0);
    let sent = w["messages_sent"].as_u64().unwrap();
    // 5 sockets × 10/s × 2 s, give or take the ramp and the stop.
    assert!((50..=120).contains(&sent), "{w:#}");
    assert_eq!(w["replies"].as_u64(), Some(0), "{w:#}");
    // Not requests: none sent, none in flight, none failed.
    assert_eq!(field(r, "/requests/sent"), 0, "{}", r["requests"]);
    assert_eq!(field(r, "/requests/failed"), 0, "{}", r["requests"]);
    wait_until(
        || peer.count("msg binary") as u64 == sent,
        Duration::from_secs(10),
        "the server to see every message as a binary frame",
    );
    assert_eq!(peer.count("msg text"), 0, "{:?}", peer.lines());
}

/// Bad WebSocket settings exit 2 with a message naming the flag, before
/// anything starts.
#[test]
fn bad_settings_exit_2() {
    for (args, needle) in [
        (
            &[
                "run",
                "--metrics-listen",
                "off",
                "http://127.0.0.1:1/",
                "--ws-message",
                "x",
            ][..],
            "--ws-message",
        ),
        (
            &[
                "run",
                "--metrics-listen",
                "off",
                "ws://127.0.0.1:1/",
                "--ws-message",
                "x",
                "--ws-subscribe",
                "y",
            ][..],
            "--ws-subscribe",
        ),
        (
            &["run", "--metrics-listen", "off", "ws://127.0.0.1:1/", "-i", "1s"][..],
            "hold",
        ),
        (
            &[
                "run",
                "--metrics-listen",
                "off",
                "ws://127.0.0.1:1/",
                "--ws-ping",
                "soon",
            ][..],
            "--ws-ping",
        ),
        (&["run", "--metrics-listen", "off", "ftp://127.0.0.1:1/"][..], "ws://"),
        // Closed loop waits for replies; `none` says none come.
        (
            &[
                "run",
                "--metrics-listen",
                "off",
                "ws://127.0.0.1:1/",
                "--ws-message",
                "x",
                "--ws-reply",
                "none",
            ][..],
            "--interval",
        ),
        (
            &[
                "run",
                "--metrics-listen",
                "off",
                "ws://127.0.0.1:1/",
                "--ws-ping-timeout",
                "1ms",
            ][..],
            "--ws-ping-timeout",
        ),
        (
            &[
                "run",
                "--metrics-listen",
                "off",
                "ws://127.0.0.1:1/",
                "--ws-ping",
                "off",
                "--ws-ping-timeout",
                "5s",
            ][..],
            "--ws-ping",
        ),
    ] {
        let out = soakd_timeout(args, 20);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}
