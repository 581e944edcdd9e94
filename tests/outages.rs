//! Outages found in the data, against real disruptions: nginx stopped and
//! started by two `[[event]]`s (durations against the pauses the event
//! command measured, attribution, reconnect and recovery times, the
//! `outage_max` thresholds); a blackhole made with `tc` in a network
//! namespace the test creates; the built-in target's scheduled restarts
//! and brownouts; a healthy soak with none; events marked from outside by
//! a CI-style script; and the bad input that must be refused before
//! anything starts.

mod util;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use util::{
    BuiltinTarget, NetNs, Nginx, TempDir, field_f64, need_root, scrape, soakd, soakd_report, spawn_soakd,
    spawn_soakd_in, wait_for, wait_until, wait_with_timeout,
};

fn outages(r: &Value) -> &Vec<Value> {
    r["outages"].as_array().expect("the report lists outages")
}

fn f(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("{key} missing in {v}"))
}

/// The nginx an event started again, stopped when the test ends (before
/// the `Nginx` that owns its directory is dropped: declare it after).
struct Reaper(std::path::PathBuf);

impl Drop for Reaper {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(&self.0) {
            let _ = Command::new("kill").args(["-TERM", pid.trim()]).status();
        }
    }
}

/// Two events stop nginx and start it again after 3 s and 8 s: exactly
/// two outages, each attributed to its event and lasting the pause the
/// command measured (within 1 s), every connection back (the 8 s one too:
/// probing finds the server at once, where the backoff alone would retry
/// at 12.7 s), a recovery time each; `outage_max<=5s` fails and
/// `outage_max<=10s` passes.
#[test]
fn nginx_stopped_by_two_events_is_two_outages() {
    let nginx = Nginx::start("", "");
    let _reaper = Reaper(nginx.pid_file());
    let dir = TempDir::new("outage-nginx");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/nginx_bounce.sh");
    let measured = |pause: &str| dir.path().join(format!("pause-{pause}.txt"));
    let event = |name: &str, at: &str, pause: &str| {
        let mut run = vec![
            "bash".to_string(),
            script.display().to_string(),
            nginx.pid_file().display().to_string(),
            nginx.port.to_string(),
            pause.to_string(),
            measured(pause).display().to_string(),
        ];
        run.extend(nginx.start_command());
        format!(
            "[[event]]\nname = \"{name}\"\nat = \"{at}\"\nrun = {}\ntimeout = \"30s\"\n",
            serde_json::to_string(&run).unwrap()
        )
    };
    let config = dir.path().join("soak.toml");
    std::fs::write(
        &config,
        format!(
            "duration = \"33s\"\nthreads = 2\nmetrics_listen = \"off\"\nthresholds = [\"outage_max<=5s\", \"outage_max<=10s\"]\n\
             {}{}\n[[workload]]\nname = \"nginx\"\nurl = \"{}\"\nconnections = 50\ninterval = \"100ms\"\n",
            event("stop 3s", "8s", "3"),
            event("stop 8s", "18s", "8"),
            nginx.url("/")
        ),
    )
    .unwrap();
    let run = soakd_report(&["run", "--config", config.to_str().unwrap()], 90);
    let r = &run.report;
    assert_eq!(run.status.code(), Some(3), "outage_max<=5s fails\n{}", run.stderr);
    let list = outages(r);
    assert_eq!(list.len(), 2, "{list:#?}\n{}", run.stderr);
    for (o, (name, pause)) in list.iter().zip([("stop 3s", "3"), ("stop 8s", "8")]) {
        let text = std::fs::read_to_string(measured(pause)).expect("the event measured its pause");
        let (down, up) = text.trim().split_once(' ').unwrap();
        let pause_s: f64 = up.parse::<f64>().unwrap() - down.parse::<f64>().unwrap();
        let duration = f(o, "duration_seconds");
        eprintln!(
            "{name}: nginx down {pause_s:.2} s (measured by the event), outage {duration:.2} s from {:.2} s; reconnect {:?}, recovery {:?}, errors {}",
            f(o, "start"),
            o["reconnect_seconds"],
            o["recovery_seconds"],
            o["errors"]
        );
        assert!(
            (duration - pause_s).abs() <= 1.0,
            "{name}: {duration} vs {pause_s}: {o:#}"
        );
        assert_eq!(o["event"], name, "{o:#}");
        assert!(f(o, "event_offset_seconds").abs() < 2.0, "{o:#}");
        let reconnect = f(o, "reconnect_seconds");
        assert!(reconnect < 2.0, "every connection back soon after: {o:#}");
        assert!(o["recovery_seconds"].is_f64(), "{o:#}");
        assert!(o["errors"]["connect_refused"].as_u64().unwrap() > 0, "{o:#}");
        assert_eq!(o["desired"], 50);
    }
    assert_eq!(r["connections"]["open_at_end"], 50, "every connection reopened");
    let events = r["events"].as_array().unwrap();
    assert_eq!(events.len(), 2);
    assert!(events.iter().all(|e| e["status"] == "exit 0"), "{events:#?}");
    let verdict = |t: &str| {
        r["thresholds"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["threshold"] == t)
            .unwrap_or_else(|| panic!("{t} judged"))
            .clone()
    };
    assert_eq!(verdict("outage_max<=5s")["pass"], false);
    assert_eq!(verdict("outage_max<=10s")["pass"], true);
    assert!(field_f64(&verdict("outage_max<=10s"), "/measured") > 7.0);
    assert!(run.stderr.contains("outages       2"), "{}", run.stderr);
}

/// Whether the kernel has netem (`tc qdisc add … netem` inside `ns`);
/// the reason when it does not.
fn netem(ns: &NetNs) -> Result<(), String> {
    let out = Command::new("ip")
        .args([
            "netns", "exec", &ns.name, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "loss", "100%",
        ])
        .output()
        .map_err(|e| format!("cannot run tc: {e}"))?;
    if out.status.success() {
        let _ = Command::new("ip")
            .args(["netns", "exec", &ns.name, "tc", "qdisc", "del", "dev", "lo", "root"])
            .status();
        return Ok(());
    }
    let config = Command::new("sh")
        .args([
            "-c",
            "zcat /proc/config.gz 2>/dev/null | grep -E 'NET_SCH_NETEM|^CONFIG_MODULES|^# CONFIG_MODULES'",
        ])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().replace('\n', ", "))
        .unwrap_or_default();
    Err(format!(
        "tc says {:?}; kernel config: {config}",
        String::from_utf8_lossy(&out.stderr).trim()
    ))
}

/// A blackhole on the path to the target for 5 s (packets dropped, not
/// refused), made in a network namespace the test creates: one outage of
/// 5 ± 1 s, its requests failed as timeouts (or resets), and a recovery
/// time. The drop is `tc … netem loss 100%`; on a kernel built without
/// netem (this one says `# CONFIG_NET_SCH_NETEM is not set` and cannot
/// load modules), a token bucket of one byte drops every packet the same
/// way (`tc … tbf rate 8bit burst 1 limit 1`), and the test says which.
#[test]
fn a_blackhole_in_a_namespace_is_one_outage() {
    if !need_root("a blackhole in a network namespace") {
        return;
    }
    let ns = NetNs::create().unwrap_or_else(|why| panic!("cannot create a network namespace as root: {why}"));
    let (qdisc, how): (Vec<&str>, String) = match netem(&ns) {
        Ok(()) => (vec!["netem", "loss", "100%"], "netem loss 100%".into()),
        Err(why) => (
            vec!["tbf", "rate", "8bit", "burst", "1", "limit", "1"],
            format!("netem is not available ({why}): tbf with a 1-byte bucket drops every packet instead"),
        ),
    };
    eprintln!("blackhole: {how}");
    let target = BuiltinTarget::start_in(&ns.exec(), &[]);
    let dir = TempDir::new("outage-blackhole");
    let report = dir.path().join("r.json");
    let child = spawn_soakd_in(
        &ns.exec(),
        &[
            "run",
            &target.url("/"),
            "-c",
            "50",
            "-i",
            "100ms",
            "-d",
            "30s",
            // Errors are counted when they are seen: a lost request one
            // request timeout after it was sent, a connect one connect
            // timeout after it began. Short ones keep both ends of the
            // outage close to the blackhole's.
            "--request-timeout",
            "300ms",
            "--connect-timeout",
            "300ms",
            "--metrics-listen",
            "127.0.0.1:9469",
            "--report",
            report.to_str().unwrap(),
        ],
    );
    let tc = |args: &[&str]| {
        let mut all = vec!["netns", "exec", &ns.name, "tc", "qdisc"];
        all.extend(args);
        let out = Command::new("ip").args(&all).output().expect("run tc");
        assert!(
            out.status.success(),
            "tc {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    // Outages are looked for once the ramp is done and the minute before
    // has latency in it: every connection open and two seconds of
    // responses (50 connections every 100 ms: 500 a second) on /metrics,
    // which listens in the namespace (its own port space: 9469 is free).
    wait_until(
        || {
            ns.scrape("127.0.0.1:9469").is_some_and(|m| {
                m.get(&format!(
                    "soakd_connections{{target=\"{}\",state=\"open\"}}",
                    target.addr
                )) == Some(&50.0)
                    && util::metric_sum(&m, "soakd_responses_total") >= 1000.0
            })
        },
        Duration::from_secs(20),
        "50 connections open and 1,000 responses",
    );
    let mut add = vec!["add", "dev", "lo", "root"];
    add.extend(&qdisc);
    tc(&add);
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(5));
    tc(&["del", "dev", "lo", "root"]);
    let held = t0.elapsed().as_secs_f64();
    let (status, stderr) = wait_with_timeout(child, 60);
    assert!(status.success(), "{stderr}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let list = outages(&r);
    assert_eq!(list.len(), 1, "{list:#?}\n{stderr}");
    let o = &list[0];
    let duration = f(o, "duration_seconds");
    eprintln!(
        "blackhole held {held:.2} s: outage {duration:.2} s from {:.2} s, errors {}, reconnect {:?}, recovery {:?}",
        f(o, "start"),
        o["errors"],
        o["reconnect_seconds"],
        o["recovery_seconds"]
    );
    assert!((duration - 5.0).abs() <= 1.0, "{o:#}");
    let errors = o["errors"].as_object().unwrap();
    let timeouts: u64 = ["timeout", "connect_timeout", "reset"]
        .iter()
        .filter_map(|k| errors.get(*k).and_then(Value::as_u64))
        .sum();
    let all: u64 = errors.values().filter_map(Value::as_u64).sum();
    assert!(
        timeouts > 0 && timeouts == all,
        "classified as timeouts or resets: {o:#}"
    );
    assert!(o["recovery_seconds"].is_f64(), "{o:#}");
    drop(target);
}

/// The built-in target's restarts (every 20 s, 3 s down) are found once
/// each, and its brownout (200 ms more per response for 4 s from 28 s,
/// nothing failing) as one latency excursion with a recovery time, not as
/// an outage.
///
/// A recovery is a second whose p99 is back within `soakd compare`'s
/// tolerance (10%, at least 1 ms) of the minute before's. Two inputs are
/// set so that a busy machine (the suite's other tests, CI's neighbours)
/// cannot hide it, without changing what is asserted:
///
/// - the target answers after 100 ms (`--delay`), so the tolerance is
///   10 ms of scheduling noise rather than 1 ms above a 0.7 ms p99 (a
///   loaded core alone makes one second's p99 of 200 responses exceed
///   that: the brownout's recovery was not found in 2 of 2 runs with
///   8 CPU hogs started as it ended);
/// - each disruption is followed by at least 7 s before the next one or
///   the end (the brownout ends at 32 s, the restarts at 23 s and 43 s),
///   where the old schedule left 3 s.
#[test]
fn the_built_in_targets_restarts_and_brownouts_are_found_once_each() {
    let target = BuiltinTarget::start(&[
        "--delay",
        "100ms",
        "--restart-every",
        "20s",
        "--down-for",
        "3s",
        "--brownout-every",
        "28s",
        "--brownout-for",
        "4s",
        "--brownout-delay",
        "200ms",
    ]);
    let run = soakd_report(
        &[
            "run",
            &target.url("/"),
            "-c",
            "100",
            "-i",
            "500ms",
            "-d",
            "50s",
            "--metrics-listen",
            "off",
            "--threshold",
            "outages<=2",
            "--threshold",
            "downtime<=20%",
        ],
        120,
    );
    let r = &run.report;
    assert!(run.status.success(), "{}", run.stderr);
    let list = outages(r);
    let spans: Vec<(f64, f64)> = list.iter().map(|o| (f(o, "start"), f(o, "duration_seconds"))).collect();
    eprintln!("restarts: {spans:?}; excursions: {:#}", r["excursions"]);
    let seconds: Vec<String> = r["timeline"]["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| format!("{} {} {} {}", p["t"], p["open_min"], p["completed"], p["errors"]))
        .collect();
    assert_eq!(
        list.len(),
        2,
        "restarts at 20 s and 40 s: {list:#?}\n(t open_min completed errors):\n{}\n{}",
        seconds.join("\n"),
        run.stderr
    );
    // The target's schedule counts from its own start, soakd's clock from
    // the run's: on a loaded machine soakd's start can trail by seconds
    // (1.8 s seen under scripts/test.sh), so the restarts are placed by
    // their distance and the brownout by the same offset.
    let offset = 20.0 - f(&list[0], "start");
    assert!(
        (-0.5..3.0).contains(&offset),
        "soakd started {offset} s after the target? {list:#?}"
    );
    for (o, at) in list.iter().zip([20.0, 40.0]) {
        assert!((f(o, "start") + offset - at).abs() < 1.0, "{o:#}");
        assert!((f(o, "duration_seconds") - 3.0).abs() <= 1.0, "{o:#}");
        assert!(o["reconnect_seconds"].as_f64().is_some_and(|r| r < 2.0), "{o:#}");
        assert!(o["recovery_seconds"].is_f64(), "{o:#}");
    }
    let excursions = r["excursions"].as_array().unwrap();
    // An excursion needs the median beyond the p99 of the minute before
    // (compare's tolerance): when the machine alone pushed that p99 past
    // the brownout's 300 ms (the first outage's baseline tells), the
    // brownout is inside the noise and, by that rule, not an excursion.
    let noise = f(&list[0], "baseline_p99");
    if excursions.is_empty() && noise > 0.25 {
        eprintln!("the brownout is inside this machine's noise (p99 {noise} s before the first restart): not judged");
        return;
    }
    assert_eq!(excursions.len(), 1, "the brownout at 28 s: {excursions:#?}");
    let x = &excursions[0];
    assert!((f(x, "start") + offset - 28.0).abs() < 1.5, "{x:#}");
    assert!((f(x, "duration_seconds") - 4.0).abs() <= 1.5, "{x:#}");
    assert!(f(x, "p50_max") > 0.25, "{x:#}");
    assert!(x["recovery_seconds"].is_f64(), "{x:#}");
    assert!(run.stderr.contains("slowdowns     1"), "{}", run.stderr);
}

/// A steady soak has no outage and no excursion; the outage thresholds
/// pass with nothing to count.
#[test]
fn a_healthy_soak_has_no_outage() {
    let target = BuiltinTarget::start(&[]);
    let run = soakd_report(
        &[
            "run",
            &target.url("/"),
            "-c",
            "100",
            "-i",
            "100ms",
            "-d",
            "15s",
            "--metrics-listen",
            "off",
            "--threshold",
            "outages<=0",
            "--threshold",
            "downtime<=0%",
            "--threshold",
            "recovery_max<=0s",
        ],
        60,
    );
    assert!(run.status.success(), "{}", run.stderr);
    assert_eq!(outages(&run.report).len(), 0);
    assert_eq!(run.report["excursions"].as_array().unwrap().len(), 0);
    assert!(!run.stderr.contains("outages "), "{}", run.stderr);
}

/// A CI-style script marks a deploy while the soak runs, by a line on the
/// --event-socket FIFO and by SIGUSR2 with a name file: both are in the
/// report, and on /metrics while the run goes on.
#[test]
fn an_external_event_from_a_ci_script_is_in_the_report_and_on_metrics() {
    let target = BuiltinTarget::start(&[]);
    let dir = TempDir::new("outage-ci");
    let fifo = dir.path().join("events.fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let name_file = dir.path().join("event-name");
    let report = dir.path().join("r.json");
    let port = util::free_port();
    let metrics = format!("127.0.0.1:{port}");
    let child = spawn_soakd(&[
        "run",
        &target.url("/"),
        "-c",
        "20",
        "-i",
        "100ms",
        "-d",
        "8s",
        "--metrics-listen",
        &metrics,
        "--event-socket",
        fifo.to_str().unwrap(),
        "--event-name-file",
        name_file.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/ci_event.sh");
    let ci = Command::new("bash")
        .arg(&script)
        .arg(format!("http://{metrics}/metrics"))
        .arg(&fifo)
        .arg("deploy-42")
        .arg(child.id().to_string())
        .arg(&name_file)
        .arg("canary-7")
        .stdin(Stdio::null())
        .status()
        .expect("run the CI script");
    assert!(ci.success());
    let m = wait_for(
        || scrape(&metrics).filter(|m| m.get("soakd_events_total{name=\"canary-7\"}") == Some(&1.0)),
        Duration::from_secs(5),
        "both events on /metrics",
    );
    assert_eq!(m.get("soakd_events_total{name=\"deploy-42\"}"), Some(&1.0), "{m:?}");
    assert_eq!(
        m.get("soakd_event_info{name=\"deploy-42\",source=\"socket\"}"),
        Some(&1.0),
        "{m:?}"
    );
    let (status, stderr) = wait_with_timeout(child, 30);
    assert!(status.success(), "{stderr}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let events: Vec<(String, String)> = r["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap().into(), e["source"].as_str().unwrap().into()))
        .collect();
    assert_eq!(
        events,
        [
            ("deploy-42".into(), "socket".into()),
            ("canary-7".into(), "signal".into())
        ]
    );
    assert!(stderr.contains("event \"deploy-42\" marked (socket)"), "{stderr}");
}

/// An event command past its time limit is killed and reported so, one
/// still running at the end is stopped, one that fails counts as a
/// failure; a line on the Unix socket soakd makes at --event-socket marks
/// an event (and the socket is gone after the run).
#[test]
fn event_commands_time_out_and_a_unix_socket_marks_events() {
    let target = BuiltinTarget::start(&[]);
    let dir = TempDir::new("outage-events");
    let socket = dir.path().join("events.sock");
    let config = dir.path().join("soak.toml");
    std::fs::write(
        &config,
        format!(
            "duration = \"6s\"\nmetrics_listen = \"off\"\nevent_socket = \"events.sock\"\n\
             [[event]]\nname = \"slow\"\nat = \"1s\"\nrun = [\"sleep\", \"30\"]\ntimeout = \"1s\"\n\
             [[event]]\nname = \"fails\"\nat = \"1s\"\nrun = [\"false\"]\n\
             [[event]]\nname = \"left running\"\nat = \"4s\"\nrun = [\"sleep\", \"30\"]\n\
             [[workload]]\nurl = \"{}\"\nconnections = 5\ninterval = \"100ms\"\n",
            target.url("/")
        ),
    )
    .unwrap();
    let report = dir.path().join("r.json");
    let child = spawn_soakd(&[
        "run",
        "--config",
        config.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    let mut stream = wait_for(
        || std::os::unix::net::UnixStream::connect(&socket).ok(),
        Duration::from_secs(10),
        "soakd's event socket",
    );
    use std::io::Write as _;
    stream.write_all(b"release 1.2\n").unwrap();
    drop(stream);
    let (status, stderr) = wait_with_timeout(child, 30);
    assert!(status.success(), "{stderr}");
    assert!(!socket.exists(), "the socket soakd made is removed");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let by: std::collections::HashMap<&str, &Value> = r["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), e))
        .collect();
    assert_eq!(by["slow"]["status"], "timed out after 1s (killed)", "{by:#?}");
    assert!(f(by["slow"], "end") - f(by["slow"], "at") < 2.0, "{by:#?}");
    assert_eq!(
        (by["fails"]["status"].as_str(), by["fails"]["exit_code"].as_i64()),
        (Some("exit 1"), Some(1))
    );
    let left = by["left running"]["status"].as_str().unwrap();
    assert!(left.starts_with("stopped at the end of the run"), "{left}");
    assert_eq!(by["release 1.2"]["source"], "socket");
    let log = std::fs::read_to_string(format!("{}.events.log", report.display())).unwrap();
    assert!(log.contains("==== soakd event \"fails\""), "{log}");
}

/// Events and disruption settings that cannot work are refused before
/// anything starts (exit 2), with what to do.
#[test]
fn bad_event_and_outage_settings_are_refused() {
    let dir = TempDir::new("outage-bad");
    let plain = dir.path().join("plain.txt");
    std::fs::write(&plain, "x").unwrap();
    let config = dir.path().join("bad.toml");
    std::fs::write(
        &config,
        "[[event]]\nname = \"past\"\nat = \"2001-01-01T00:00:00Z\"\nrun = [\"true\"]\n[[workload]]\nurl = \"http://127.0.0.1:1/\"\n",
    )
    .unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["run", "http://127.0.0.1:1/", "--event", "5s=no-such-program-soakd"],
            "not a program on PATH",
        ),
        (
            vec!["run", "http://127.0.0.1:1/", "-d", "10s", "--event", "20s=true"],
            "not within the run",
        ),
        (
            vec!["run", "http://127.0.0.1:1/", "--event", "soon=true"],
            "is not a time",
        ),
        (
            vec!["run", "http://127.0.0.1:1/", "--event-socket", plain.to_str().unwrap()],
            "neither a FIFO nor a socket",
        ),
        (
            vec!["run", "http://127.0.0.1:1/", "--outage-errors", "0%"],
            "--outage-errors",
        ),
        (vec!["run", "--config", config.to_str().unwrap()], "is in the past"),
        (vec!["target", "--restart-every", "5s"], "--down-for"),
        (
            vec!["target", "--brownout-every", "5s", "--brownout-for", "1s"],
            "--brownout-delay",
        ),
    ];
    for (args, says) in cases {
        let out = soakd(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}
