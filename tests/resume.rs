//! `--state`: a soak killed with SIGKILL and started again with the same
//! command continues to its original end; the systemd unit's ExecStart
//! does the same; each state that cannot be continued is refused (exit 2)
//! with a message naming the file and the fix. The real binary against
//! the built-in target throughout.

mod util;

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use util::{
    BuiltinTarget, TempDir, free_port, metric_sum, scrape, signal, spawn_soakd, stderr_so_far, wait_for, wait_output,
    wait_until,
};

fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
}

fn report(path: &Path) -> Value {
    serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap()
}

/// The run time of the checkpoint in a state file (its body's `at`).
fn checkpoint_at(path: &Path) -> Option<f64> {
    let text = fs::read_to_string(path).ok()?;
    let body: Value = serde_json::from_str(text.lines().nth(1)?).ok()?;
    Some(body["at"]["secs"].as_f64()? + body["at"]["nanos"].as_f64()? / 1e9)
}

/// The issue's "must show" (120 s, killed at ~50 s, when it was built;
/// 48 s and ~22 s here, to keep the suite under 15 minutes): a paced run
/// (200 req/s) with `--checkpoint-interval 5s`, SIGKILLed and started
/// again with the same command, ends at the original end time, counts
/// rate × 48 s
/// within rate × (lost + 1 s), lists the restart, marks the gap in the
/// timeline and the HTML page, appends to the HDR log, and its counters on
/// /metrics continue from the checkpoint.
#[test]
fn a_killed_soak_continues_to_its_original_end() {
    let target = BuiltinTarget::start(&[]);
    let dir = TempDir::new("resume");
    let state = dir.path().join("soak.state");
    let rep = dir.path().join("r.json");
    let html = dir.path().join("r.html");
    let hlog = dir.path().join("l.hlog");
    let metrics = format!("127.0.0.1:{}", free_port());
    let url = target.url("/");
    let args: Vec<String> = [
        "run",
        &url,
        "-c",
        "20",
        "-i",
        "100ms",
        "-d",
        "48s",
        "--state",
        state.to_str().unwrap(),
        "--checkpoint-interval",
        "5s",
        "--metrics-listen",
        &metrics,
        "--report",
        rep.to_str().unwrap(),
        "--html-report",
        html.to_str().unwrap(),
        "--hdr-log",
        hlog.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let rate = 200.0;

    let first = spawn_soakd(&args);
    let t0 = Instant::now();
    // ~22 s in, with at least one checkpoint past 15 s on disk.
    wait_until(
        || t0.elapsed() >= Duration::from_secs(22) && checkpoint_at(&state).is_some_and(|a| a >= 15.0),
        Duration::from_secs(40),
        "22 s of the first run and a checkpoint after 15 s",
    );
    let before = wait_for(
        || scrape(&metrics).map(|m| metric_sum(&m, "soakd_requests_sent_total")),
        Duration::from_secs(10),
        "a scrape before the kill",
    );
    assert!(before > rate * 15.0, "{before} requests sent before the kill");
    let at_checkpoint = checkpoint_at(&state).unwrap();
    signal(first.id(), "KILL");
    let killed = Instant::now();
    let out = wait_output(first, 10);
    assert!(!out.status.success());

    let second = spawn_soakd(&args);
    wait_until(
        || stderr_so_far(&second).contains("continuing the soak"),
        Duration::from_secs(10),
        "the restarted soakd to say it continues",
    );
    let restart = killed.elapsed().as_secs_f64();
    // Prometheus sees a counter that kept growing from the checkpoint,
    // not a reset.
    let after = wait_for(
        || scrape(&metrics).map(|m| metric_sum(&m, "soakd_requests_sent_total")),
        Duration::from_secs(10),
        "a scrape after the restart",
    );
    assert!(
        after >= rate * (at_checkpoint - 1.0),
        "after the restart soakd_requests_sent_total is {after}, checkpointed at {at_checkpoint} s (before the kill: {before})"
    );
    let out = wait_output(second, 50);
    let ended = unix_now();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");

    let r = report(&rep);
    let started = r["timeline"]["started_at_unix_seconds"].as_f64().unwrap();
    assert!(
        (ended - (started + 48.0)).abs() <= 2.0,
        "ended {:.1} s after the original start, planned 48 s",
        ended - started
    );
    let resumed = r["resumed"].as_array().expect("a resumed list");
    assert_eq!(resumed.len(), 1, "{resumed:?}");
    let lost = resumed[0]["lost_seconds"].as_f64().unwrap();
    eprintln!("lost_seconds {lost:.2} (checkpoint interval 5 s, restart took {restart:.2} s)");
    assert!(lost <= 5.0 + restart + 0.5, "lost {lost} s, restart took {restart} s");
    assert!(lost > 0.0);
    // The text summary lists the restart: how many, the time lost, and
    // when (UTC clock time and run time).
    let at = resumed[0]["at"].as_f64().unwrap();
    let clock = humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs_f64(started + at)).to_string();
    let line = format!(
        "  resumed       1 restart, {lost:.1} s lost (at {} UTC, {at:.1} s into the run)\n",
        &clock[11..19]
    );
    assert!(
        stderr.contains(&line),
        "the summary lists the restart as {line:?}:\n{stderr}"
    );
    let completed = r["requests"]["completed"].as_f64().unwrap();
    let want = rate * 48.0;
    assert!(
        (completed - want).abs() <= rate * (lost + 1.0),
        "{completed} completed, {want} planned, {lost} s lost"
    );
    let points = r["timeline"]["points"].as_array().unwrap();
    let gaps: Vec<&Value> = points.iter().filter(|p| p["gap"] == true).collect();
    assert_eq!(gaps.len(), 1, "one gap point");
    assert_eq!(gaps[0]["completed"], 0);
    assert!(
        fs::read_to_string(&html).unwrap().contains(r#"<rect class="gap""#),
        "the HTML page shades the gap"
    );
    let log = fs::read_to_string(&hlog).unwrap();
    assert!(log.contains("#soakd continued the run"), "the HDR log was appended to");
    assert_eq!(log.matches("#[StartTime").count(), 1, "one header");
    let last_start: f64 = log
        .lines()
        .filter(|l| l.starts_with("Tag="))
        .filter_map(|l| l.split(',').nth(1)?.parse().ok())
        .fold(0.0, f64::max);
    assert!(last_start > 30.0, "intervals go on in the run's time: {last_start}");
}

/// The systemd unit's ExecStart, run as written (the binary, the config
/// and the state directory mapped to this machine), killed and run again:
/// the second run continues the first (what `Restart=on-failure` does).
#[test]
fn the_units_exec_start_continues_a_soak() {
    let unit = fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/systemd/soakd.service")).unwrap();
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("an ExecStart line");
    assert!(unit.contains("StateDirectory=soakd"), "{unit}");
    assert!(exec.contains("--state /var/lib/soakd/"), "{exec}");
    let target = BuiltinTarget::start(&[]);
    let dir = TempDir::new("unit");
    let config = dir.path().join("soakd.toml");
    let rep = dir.path().join("r.json");
    fs::write(
        &config,
        format!(
            "duration = \"12s\"\nmetrics_listen = \"off\"\nreport = \"{}\"\n[[workload]]\nurl = \"{}\"\nconnections = 5\ninterval = \"100ms\"\n",
            rep.display(),
            target.url("/")
        ),
    )
    .unwrap();
    let var_lib = format!("{}/", dir.path().display());
    let line = exec
        .replace("/etc/soakd/soakd.toml", config.to_str().unwrap())
        .replace("/var/lib/soakd/", &var_lib);
    let words: Vec<&str> = line.split_whitespace().collect();
    assert!(words[0].ends_with("/soakd"), "{line}");
    let state = Path::new(words[words.iter().position(|w| *w == "--state").unwrap() + 1]).to_path_buf();

    let first = spawn_soakd(&words[1..]);
    let t0 = Instant::now();
    wait_until(
        || t0.elapsed() >= Duration::from_secs(4) && state.exists(),
        Duration::from_secs(20),
        "4 s of the first run and its first checkpoint",
    );
    signal(first.id(), "KILL");
    let _ = wait_output(first, 10);
    let out = wait_output(spawn_soakd(&words[1..]), 30);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = report(&rep);
    assert_eq!(r["resumed"].as_array().map(Vec::len), Some(1), "{r}");
    let secs = r["duration_seconds"].as_f64().unwrap();
    assert!(
        (11.5..14.0).contains(&secs),
        "{secs} s: the run counts from its first start"
    );
    // A finished soak is not started again by a restart: exit 2, and
    // RestartPreventExitStatus=2 keeps systemd from retrying.
    let again = wait_output(spawn_soakd(&words[1..]), 10);
    assert_eq!(again.status.code(), Some(2));
    assert!(unit.contains("RestartPreventExitStatus=2"));
}

/// Runs `soakd ARGS` expecting exit 2; returns stderr.
fn refused(args: &[&str]) -> String {
    let out = wait_output(spawn_soakd(args), 20);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    stderr
}

/// Every state that cannot be continued: exit 2 and a message naming the
/// file and the fix, before anything connects. Short runs: the whole test
/// takes a few seconds.
#[test]
fn states_that_cannot_continue_are_refused() {
    let target = BuiltinTarget::start(&[]);
    let dir = TempDir::new("refused");
    let state = dir.path().join("s.state");
    let s = state.to_str().unwrap();
    let url = target.url("/");
    let run = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "run",
            &url,
            "-d",
            "1s",
            "-i",
            "100ms",
            "--metrics-listen",
            "off",
            "--state",
            s,
        ]
        .iter()
        .map(|x| x.to_string())
        .collect();
        v.extend(extra.iter().map(|x| x.to_string()));
        v
    };
    let strs = |v: &[String]| -> Vec<String> { v.to_vec() };
    let go = |v: Vec<String>| {
        let a: Vec<&str> = v.iter().map(String::as_str).collect();
        wait_output(spawn_soakd(&a), 20)
    };
    let no = |v: Vec<String>| {
        let a: Vec<&str> = v.iter().map(String::as_str).collect();
        refused(&a)
    };

    // A finished run: its state says so.
    let out = go(strs(&run(&["-c", "2"])));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let e = no(run(&["-c", "2"]));
    assert!(e.contains(s) && e.contains("finished") && e.contains("--fresh"), "{e}");

    // Another plan: the settings that differ are named.
    let e = no(run(&["-c", "3"]));
    assert!(
        e.contains(s) && e.contains("connections: was 2, now 3") && e.contains("--fresh"),
        "{e}"
    );

    // Truncated, then damaged: never taken for a new soak.
    let good = fs::read(&state).unwrap();
    fs::write(&state, &good[..good.len() / 2]).unwrap();
    let e = no(run(&["-c", "2"]));
    assert!(e.contains(s) && e.contains("truncated") && e.contains("--fresh"), "{e}");
    let mut bad = good.clone();
    let i = good.len() - 10;
    bad[i] = if bad[i] == b'0' { b'1' } else { b'0' };
    fs::write(&state, &bad).unwrap();
    let e = no(run(&["-c", "2"]));
    assert!(e.contains(s) && e.contains("damaged"), "{e}");
    fs::write(&state, b"not a state\n").unwrap();
    let e = no(run(&["-c", "2"]));
    assert!(e.contains("not a soakd state file"), "{e}");

    // Another format version: the soakd that wrote it is named.
    // (The header's version set to 99, whatever this soakd writes.)
    let text = String::from_utf8(good.clone()).unwrap();
    let (head, body) = text.split_once('\n').unwrap();
    let mut head: Value = serde_json::from_str(head).unwrap();
    head["version"] = 99.into();
    fs::write(&state, format!("{head}\n{body}")).unwrap();
    let e = no(run(&["-c", "2"]));
    assert!(
        e.contains(s) && e.contains("written by soakd 0.1.0") && e.contains("version 99"),
        "{e}"
    );

    // --fresh moves it aside and starts over.
    let out = go(run(&["-c", "2", "--fresh"]));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let aside: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("s.state.old-"))
        .collect();
    assert_eq!(aside.len(), 1, "the old state moved aside");

    // A directory that takes no file: preflight, nothing started.
    let blocker = dir.path().join("file");
    fs::write(&blocker, b"").unwrap();
    let inside = blocker.join("s.state");
    let t0 = Instant::now();
    let e = refused(&[
        "run",
        &url,
        "-d",
        "1s",
        "--metrics-listen",
        "off",
        "--state",
        inside.to_str().unwrap(),
    ]);
    assert!(e.contains("--state") && e.contains(inside.to_str().unwrap()), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(5));

    // Its companions need it.
    let e = refused(&["run", &url, "--checkpoint-interval", "5s"]);
    assert!(e.contains("--state"), "{e}");
    let e = refused(&["run", &url, "--fresh"]);
    assert!(e.contains("--state"), "{e}");
}
