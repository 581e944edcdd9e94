//! The command line contract: bad input exits 2 with a message naming the
//! value and nothing started; preflight refuses plans that cannot fit;
//! signals stop the run cleanly; the demo runs.

mod util;

use std::time::{Duration, Instant};

use serde_json::Value;
use util::{
    BuiltinTarget, field as u, free_port, metric_sum, raw_server, scrape, signal, soakd, soakd_report, spawn_soakd,
    stderr_so_far, temp_path, wait_for_handler, wait_until, wait_with_timeout,
};

/// Each row: arguments after `soakd`, and text the error must contain. A
/// raw server stands behind the URL: if soakd started anyway, it would
/// connect, and the server would count it.
#[test]
fn bad_input_exits_2_naming_the_problem_and_opens_nothing() {
    let server = raw_server(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    let url = server.url("/");
    let body_file = temp_path("missing-body", "txt");
    let body_file = body_file.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["run", &url, "-i", "1s", "-r", "10"], "cannot be used with"),
        (vec!["run", &url, "-c", "0"], "--connections"),
        (vec!["run", &url, "-c", "-5"], "-5"),
        (vec!["run", &url, "-c", "many"], "--connections"),
        (vec!["run", &url, "-d", "-5s"], "-5s"),
        (vec!["run", &url, "-d", "10"], "ms, s, m, h or d"),
        (vec!["run", &url, "-i", "0s"], "greater than 0"),
        (vec!["run", &url, "-r", "-3"], "-3"),
        (vec!["run", &url, "--pipeline", "0"], "--pipeline"),
        (vec!["run", &url, "--close", "--pipeline", "4"], "--close"),
        (vec!["run", &url, "--body-file", body_file], "--body-file"),
        (vec!["run", &url, "-H", "no colon here"], "Name: value"),
        (vec!["run", &url, "-H", "Bad Name: x"], "not a valid header name"),
        (vec!["run", &url, "-m", "get"], "upper-case HTTP method"),
        (vec!["run", &url, "--metrics-listen", "nowhere"], "--metrics-listen"),
        (vec!["run", &url, "--insecure"], "not an https:// URL"),
        (vec!["run", "ftp://127.0.0.1/"], "scheme"),
        (vec!["run", "http://user:secret@127.0.0.1:1/"], "user info"),
        (vec!["run", "not a url"], "not valid"),
        (vec!["run"], "needs a target URL"),
        (vec!["run", &url, "--source-addr", "::1"], "family"),
        (vec!["run", &url, "--source-addr", "192.0.2.77"], "cannot be bound"),
        (vec!["run", &url, "--bogus-flag"], "--bogus-flag"),
        (
            vec!["run", &url, "--report", "/nonexistent-dir/r.json"],
            "--report /nonexistent-dir/r.json",
        ),
        (vec!["run", &url, "--hdr-log", "/tmp"], "--hdr-log /tmp: is a directory"),
    ];
    for (args, says) in &cases {
        let out = soakd(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: expected {says:?} in: {stderr}");
        // A credential in the URL is never echoed back.
        assert!(!stderr.contains("secret"), "{args:?}: {stderr}");
        assert!(
            stderr.lines().filter(|l| !l.trim().is_empty()).count() <= 4,
            "{args:?}: {stderr}"
        );
    }
    assert_eq!(server.accepted(), 0, "a bad command line opened connections");
}

/// The same contract for config files: each row breaks one key (every
/// global and every workload key has a row), and both `soakd check` and
/// `soakd run` exit 2 with one message naming the file, the line and the
/// key, having opened nothing. The rows' URL is a raw server that counts
/// connections.
#[test]
fn bad_config_files_exit_2_naming_line_and_key_and_open_nothing() {
    let server = raw_server(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    let url = server.url("/");
    let missing = temp_path("missing-body", "txt");
    let missing = missing.to_str().unwrap();
    let w = format!("[[workload]]\nurl = \"{url}\"\n");
    // (file text, line the message must name, key it must name)
    let cases: Vec<(String, u32, &str)> = vec![
        (format!("metrics_listen = \"here\"\n{w}"), 1, "metrics_listen"),
        (format!("metrics_linger = \"forever\"\n{w}"), 1, "metrics_linger"),
        (format!("threads = 0\n{w}"), 1, "threads"),
        (format!("report = 5\n{w}"), 1, "report"),
        (format!("hdr_log = []\n{w}"), 1, "hdr_log"),
        (format!("duration = \"-5s\"\n{w}"), 1, "duration"),
        (format!("duration = \"10\"\n{w}"), 1, "duration"),
        (format!("requests = 0\n{w}"), 1, "requests"),
        (format!("treads = 2\n{w}"), 1, "treads"),
        ("[[workload]]\nconnections = 5\n".to_string(), 1, "url"),
        ("[[workload]]\nurl = \"ftp://127.0.0.1/\"\n".to_string(), 2, "scheme"),
        (
            "[[workload]]\nurl = \"http://u:p@127.0.0.1:1/\"\n".to_string(),
            2,
            "user info",
        ),
        (format!("{w}name = \"\"\n"), 3, "name"),
        (format!("{w}name = \"a\"\n{w}name = \"a\"\n"), 6, "name"),
        (format!("{w}connections = 0\n"), 3, "connections"),
        (format!("{w}connections = -5\n"), 3, "connections"),
        (format!("{w}ramp = 0\n"), 3, "ramp"),
        (format!("{w}interval = \"0s\"\n"), 3, "interval"),
        (format!("{w}interval = \"soon\"\n"), 3, "interval"),
        (format!("{w}rate = -3.0\n"), 3, "rate"),
        (format!("{w}interval = \"1s\"\nrate = 5.0\n"), 4, "rate"),
        (format!("{w}interval = \"1s\"\nclosed = true\n"), 3, "closed"),
        (format!("{w}pipeline = 0\n"), 3, "pipeline"),
        (format!("{w}pipeline = 5000\n"), 3, "pipeline"),
        (format!("{w}close = \"yes\"\n"), 3, "close"),
        (format!("{w}method = \"GE T\"\n"), 3, "method"),
        (format!("{w}headers = {{ \"Bad Name\" = \"x\" }}\n"), 3, "headers"),
        (
            format!("{w}body = \"x\"\nbody_file = \"/etc/hostname\"\n"),
            4,
            "body_file",
        ),
        (format!("{w}body_file = \"{missing}\"\n"), 3, "body_file"),
        (format!("{w}connect_timeout = \"5\"\n"), 3, "connect_timeout"),
        (format!("{w}request_timeout = \"0s\"\n"), 3, "request_timeout"),
        (format!("{w}source_addrs = [\"nope\"]\n"), 3, "source_addrs"),
        (format!("{w}max_requests_per_conn = 0\n"), 3, "max_requests_per_conn"),
        (format!("{w}max_conn_lifetime = \"soon\"\n"), 3, "max_conn_lifetime"),
        (format!("{w}target_pids = [\"nginx\"]\n"), 3, "target_pids"),
        (
            format!("{w}then = \"later\"\nstages = [{{ hold = \"1s\" }}]\n"),
            3,
            "then",
        ),
        (format!("{w}stages = [{{ connections = 10 }}]\n"), 3, "hold"),
        (
            format!("{w}stages = [{{ connections = 0, hold = \"1s\" }}]\n"),
            3,
            "connections",
        ),
        (format!("{w}conections = 5\n"), 3, "conections"),
    ];
    let dir = temp_path("bad-config", "d");
    std::fs::create_dir_all(&dir).unwrap();
    // Every row is checked before failing, so one run shows every miss.
    let mut misses: Vec<String> = Vec::new();
    for (i, (text, line, key)) in cases.iter().enumerate() {
        let file = dir.join(format!("case{i}.toml"));
        std::fs::write(&file, text).unwrap();
        let file = file.to_str().unwrap();
        let mut refused = false;
        for cmd in ["check", "run"] {
            if cmd == "run" && !refused {
                continue; // check accepted it: a run would start for real
            }
            let out = soakd(&[cmd, "--config", file]);
            refused = out.status.code() == Some(2);
            let stderr = String::from_utf8_lossy(&out.stderr);
            let at = format!("{file}:{line}");
            let lines = stderr.lines().filter(|l| !l.trim().is_empty()).count();
            if out.status.code() != Some(2) || !stderr.contains(&at) || !stderr.contains(key) || lines > 4 {
                misses.push(format!(
                    "{cmd} {text:?}: want exit 2, {at:?} and {key:?}; got {:?}: {stderr}",
                    out.status.code()
                ));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(misses.is_empty(), "{}", misses.join("\n"));
    assert_eq!(server.accepted(), 0, "a bad config file opened connections");
}

#[test]
fn preflight_refuses_more_connections_than_open_files() {
    let server = raw_server(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    let url = server.url("/");
    let out = soakd(&["run", &url, "-c", "100000", "--metrics-listen", "off"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("open-file limit"), "{stderr}");
    assert!(stderr.contains("100000"), "{stderr}");
    assert_eq!(server.accepted(), 0);
}

#[test]
fn sigint_drains_and_writes_the_report() {
    let target = BuiltinTarget::start(&[]);
    let report = temp_path("sigint", "json");
    let url = target.url("/");
    let metrics = format!("127.0.0.1:{}", free_port());
    let child = spawn_soakd(&[
        "run",
        &url,
        "-c",
        "50",
        "-i",
        "100ms",
        "--ramp",
        "10000",
        "--metrics-listen",
        &metrics,
        "--report",
        report.to_str().unwrap(),
    ]);
    wait_for_handler(child.id(), "INT");
    let open = format!("soakd_connections{{target=\"{}\",state=\"open\"}}", target.addr);
    wait_until(
        || {
            scrape(&metrics)
                .is_some_and(|m| m.get(&open) == Some(&50.0) && metric_sum(&m, "soakd_responses_total") > 0.0)
        },
        Duration::from_secs(15),
        "50 connections open and a response in (soakd's metrics)",
    );
    signal(child.id(), "INT");
    let (status, stderr) = wait_with_timeout(child, 15);
    assert!(status.success(), "{stderr}");
    let rep: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let _ = std::fs::remove_file(&report);
    assert_eq!(u(&rep, "/connections/open_at_end"), 50);
    assert_eq!(u(&rep, "/connections/closed_by_reason/shutdown"), 50);
    assert!(u(&rep, "/requests/completed") > 0);
    assert!(stderr.contains("latency"), "summary missing: {stderr}");
}

#[test]
fn sigusr1_prints_the_summary_and_goes_on() {
    let target = BuiltinTarget::start(&[]);
    let url = target.url("/");
    let child = spawn_soakd(&["run", &url, "-c", "10", "-i", "100ms", "--metrics-listen", "off"]);
    // SIGUSR1's default action ends the process: wait for soakd's handler.
    wait_for_handler(child.id(), "USR1");
    signal(child.id(), "USR1");
    wait_until(
        || stderr_so_far(&child).contains("connections   desired"),
        Duration::from_secs(10),
        "the summary SIGUSR1 asks for on stderr",
    );
    assert!(util::pid_alive(child.id()), "SIGUSR1 ended the run");
    signal(child.id(), "TERM");
    let (status, stderr) = wait_with_timeout(child, 15);
    assert!(status.success(), "{stderr}");
    // Once for SIGUSR1, once at exit.
    assert_eq!(stderr.matches("connections   desired").count(), 2, "{stderr}");
}

/// Responses that never come keep the drain waiting up to 5 s; a second
/// signal ends it at once.
#[test]
fn second_signal_exits_at_once() {
    let target = BuiltinTarget::start(&["--delay", "60s"]);
    let url = target.url("/");
    let metrics = format!("127.0.0.1:{}", free_port());
    let child = spawn_soakd(&["run", &url, "-c", "10", "--metrics-listen", &metrics]);
    wait_for_handler(child.id(), "INT");
    wait_until(
        || scrape(&metrics).is_some_and(|m| metric_sum(&m, "soakd_requests_in_flight") == 10.0),
        Duration::from_secs(15),
        "10 requests in flight (soakd's metrics)",
    );
    signal(child.id(), "INT");
    wait_until(
        || stderr_so_far(&child).contains("stopping: finishing requests in flight"),
        Duration::from_secs(10),
        "soakd to start draining after the first SIGINT",
    );
    let t = Instant::now();
    signal(child.id(), "INT");
    let (status, stderr) = wait_with_timeout(child, 15);
    assert!(status.success(), "{stderr}");
    assert!(
        t.elapsed() < Duration::from_secs(4),
        "took {:?} after the second signal",
        t.elapsed()
    );
    assert!(stderr.contains("in flight 10"), "{stderr}");
}

#[test]
fn demo_runs_against_its_embedded_target() {
    let r = soakd_report(&["demo", "-c", "50", "-d", "2s", "--metrics-listen", "off"], 30);
    assert!(r.status.success(), "{}", r.stderr);
    assert!(r.stderr.contains("built-in target"), "{}", r.stderr);
    assert_eq!(u(&r.report, "/connections/peak_open"), 50);
    assert!(u(&r.report, "/requests/completed") >= 50);
    assert_eq!(u(&r.report, "/errors/connect_refused"), 0);
}

#[test]
fn target_prints_its_address_and_answers() {
    let t = BuiltinTarget::start(&[]);
    let resp = util::http_get(&t.addr, "/");
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert!(resp.ends_with("pong"), "{resp}");
}

/// A config file with two workloads runs both, each reported under its
/// name; `soakd check` prints the plan; a bad file is refused with its
/// line and key.
#[test]
fn config_file_runs_several_workloads() {
    let target = BuiltinTarget::start(&[]);
    let dir = util::TempDir::new("config");
    let path = dir.path().join("soak.toml");
    std::fs::write(
        &path,
        format!(
            "metrics_listen = \"off\"\n\n[[workload]]\nname = \"paced\"\nurl = \"{}\"\nconnections = 20\ninterval = \"100ms\"\n\n[[workload]]\nname = \"chunked\"\nurl = \"{}\"\nconnections = 5\nrate = 50.0\n",
            target.url("/"),
            target.url("/chunked")
        ),
    )
    .unwrap();
    let cfg = path.to_str().unwrap();
    let out = soakd(&["check", "--config", cfg]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        text.contains("workload paced") && text.contains("workload chunked"),
        "{text}"
    );
    assert!(
        text.contains("total: 25 connections, 250.0 req/s") && text.contains("preflight: ok"),
        "{text}"
    );

    let r = soakd_report(&["run", "--config", cfg, "-d", "2s"], 30);
    assert!(r.status.success(), "{}", r.stderr);
    let names: Vec<&str> = r.report["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["paced", "chunked"]);
    for w in r.report["workloads"].as_array().unwrap() {
        assert!(u(w, "/requests/completed") > 0, "{w:#}");
        assert_eq!(util::total_errors(w), 0);
    }
    assert_eq!(u(&r.report, "/connections/peak_open"), 25);

    std::fs::write(
        &path,
        "[[workload]]\nurl = \"http://127.0.0.1:1/\"\nintervall = \"1s\"\n",
    )
    .unwrap();
    for args in [&["check", "--config", cfg][..], &["run", "--config", cfg][..]] {
        let out = soakd(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("soak.toml:3") && stderr.contains("intervall"),
            "{stderr}"
        );
    }
    let out = soakd(&["run", "--config", cfg, "-c", "5"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--connections describes a workload"));
}

/// The systemd notify protocol, without systemd: READY=1 once running,
/// WATCHDOG=1 pings while the workers check in, STOPPING=1 on SIGTERM.
#[test]
fn notifies_a_service_manager() {
    use std::os::unix::net::UnixDatagram;
    let target = BuiltinTarget::start(&[]);
    let dir = util::TempDir::new("notify");
    let sock_path = dir.path().join("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let url = target.url("/");
    let child = std::process::Command::new(util::soakd_bin())
        .args(["run", &url, "-c", "5", "-i", "100ms", "--metrics-listen", "off"])
        .env("NOTIFY_SOCKET", &sock_path)
        .env("WATCHDOG_USEC", "1000000")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut messages = Vec::new();
    let mut buf = [0u8; 512];
    let t = Instant::now();
    let mut signalled = false;
    while t.elapsed() < Duration::from_secs(6) {
        if let Ok(n) = sock.recv(&mut buf) {
            messages.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
        if !signalled && t.elapsed() > Duration::from_millis(2500) {
            signal(child.id(), "TERM");
            signalled = true;
        }
    }
    let (status, stderr) = wait_with_timeout(child, 15);
    assert!(status.success(), "{stderr}");
    assert_eq!(messages.first().map(String::as_str), Some("READY=1"), "{messages:?}");
    assert!(
        messages.iter().filter(|m| *m == "WATCHDOG=1").count() >= 3,
        "{messages:?}"
    );
    assert!(messages.iter().any(|m| m == "STOPPING=1"), "{messages:?}");
}

/// Stages step the connections up and down and end the run: the classic
/// sweep, with the desired count following each step.
#[test]
fn stages_step_connections_and_stop() {
    let target = BuiltinTarget::start(&[]);
    let dir = util::TempDir::new("stages");
    let path = dir.path().join("stages.toml");
    std::fs::write(
        &path,
        format!(
            "metrics_listen = \"off\"\n[[workload]]\nname = \"sweep\"\nurl = \"{}\"\nramp = 10000\nthen = \"stop\"\nstages = [\n  {{ connections = 10, interval = \"100ms\", hold = \"1s\" }},\n  {{ connections = 30, interval = \"50ms\", hold = \"1500ms\" }},\n  {{ connections = 5, hold = \"1s\" }},\n]\n",
            target.url("/")
        ),
    )
    .unwrap();
    let r = soakd_report(&["run", "--config", path.to_str().unwrap()], 30);
    assert!(r.status.success(), "{}", r.stderr);
    let rep = &r.report;
    assert_eq!(u(rep, "/connections/peak_open"), 30);
    assert_eq!(u(rep, "/connections/open_at_end"), 5);
    assert_eq!(u(rep, "/connections/desired"), 5);
    assert_eq!(u(rep, "/connections/closed_by_reason/churn"), 25, "the retired slots");
    assert_eq!(util::total_errors(rep), 0);
    // 10 × 10/s × 1 s + 30 × 20/s × 1.5 s + 5 × 20/s × 1 s = 1,100.
    let completed = u(rep, "/requests/completed");
    assert!((1000..=1200).contains(&completed), "completed {completed}");
    let secs = rep["duration_seconds"].as_f64().unwrap();
    assert!(
        (3.4..6.0).contains(&secs),
        "ran {secs} s: the stages should end it after 3.5 s"
    );
    assert!(r.stderr.contains("stage 2 of 3: 30 connections"), "{}", r.stderr);
}
