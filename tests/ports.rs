//! The port budget preflight sees: a run started right after another finds
//! the first run's TIME_WAIT sockets holding ports, and says so with the
//! numbers before it connects; `--close-with-reset` leaves none behind.
//!
//! Both tests run inside a network namespace of their own: TIME_WAIT
//! sockets hold ports for 60 s, and soakd binds its ports on the wildcard
//! address, so thousands of them on the host would starve the tests that
//! run next. The namespace's sockets go with it.

mod util;

use util::*;

/// A namespace, or `None` (with the reason printed) where this cannot run.
fn namespace() -> Option<NetNs> {
    match NetNs::create() {
        Ok(ns) => Some(ns),
        Err(why) => {
            eprintln!("skipped: {why}");
            None
        }
    }
}

/// Runs `soakd ARGS --report FILE` inside `ns`; returns (stderr, report).
fn run_in(ns: &NetNs, args: &[&str]) -> (String, serde_json::Value) {
    let report = temp_path("report", "json");
    let report_s = report.display().to_string();
    let mut all = args.to_vec();
    all.extend(["--report", report_s.as_str(), "--metrics-listen", "off"]);
    let out = wait_output(spawn_soakd_in(&ns.exec(), &all), 60);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{args:?}: {stderr}");
    let text = std::fs::read_to_string(&report).unwrap_or_else(|e| panic!("no report ({e}): {stderr}"));
    let _ = std::fs::remove_file(&report);
    (stderr, serde_json::from_str(&text).expect("report is JSON"))
}

/// Sockets in FIN_WAIT2 inside `ns` (`ss` from iproute2, which the
/// namespace needs anyway).
fn fin_wait2(ns: &NetNs) -> usize {
    let mut cmd = std::process::Command::new(ns.exec()[0]);
    cmd.args(&ns.exec()[1..]).args(["ss", "-Htan", "state", "fin-wait-2"]);
    cmd.output()
        .map(|o| String::from_utf8_lossy(&o.stdout).lines().count())
        .unwrap_or(0)
}

#[test]
fn back_to_back_runs_are_warned_about_time_wait() {
    let _heavy = heavy_lock();
    let Some(ns) = namespace() else { return };
    let target = BuiltinTarget::start_in(&ns.exec(), &[]);
    let url = target.url("/");
    let args = [
        "run",
        url.as_str(),
        "-c",
        "12000",
        "--ramp",
        "20000",
        "-i",
        "10s",
        "-d",
        "2s",
    ];
    let (stderr, report) = run_in(&ns, &args);
    assert_eq!(field(&report, "/connections/peak_open"), 12000, "{report}");
    assert!(!stderr.contains("TIME_WAIT"), "{stderr}");
    // soakd closed all 12,000 itself: they go to TIME_WAIT on its side once
    // the target's closes arrive (FIN_WAIT2 until then). On a busy machine
    // that takes a moment; wait for it (bounded) so the count is the
    // whole first run's.
    let settled = std::time::Instant::now();
    while fin_wait2(&ns) > 0 && settled.elapsed() < std::time::Duration::from_secs(15) {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let (stderr, _) = run_in(&ns, &args);
    let warning = stderr
        .lines()
        .find(|l| l.contains("TIME_WAIT"))
        .unwrap_or_else(|| panic!("no port warning:\n{stderr}"));
    let number_before = |marker: &str| -> u64 {
        warning
            .split(marker)
            .next()
            .and_then(|s| s.rsplit([' ', '(']).next())
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no number before {marker:?} in {warning}"))
    };
    // All 12,000 ports of the first run are still held, in TIME_WAIT.
    let held = number_before(" of the ");
    let in_tw = number_before(" in TIME_WAIT");
    assert!((11_000..=12_100).contains(&held), "{warning}");
    assert!(in_tw >= 6_000, "{warning}");
    assert!(warning.contains("12000 new connections"), "{warning}");
}

#[test]
fn close_with_reset_leaves_no_time_wait() {
    let _heavy = heavy_lock();
    let Some(ns) = namespace() else { return };
    let target = BuiltinTarget::start_in(&ns.exec(), &[]);
    let url = target.url("/");
    let time_waits = || {
        let mut cmd: Vec<&str> = ns.exec().to_vec();
        cmd.extend(["ss", "-Htan", "state", "time-wait"]);
        let out = std::process::Command::new(cmd[0])
            .args(&cmd[1..])
            .output()
            .expect("ss runs");
        String::from_utf8_lossy(&out.stdout).lines().count()
    };
    let churn = [
        "run",
        url.as_str(),
        "-c",
        "200",
        "--max-conn-lifetime",
        "200ms",
        "-i",
        "50ms",
        "-d",
        "2s",
    ];
    let mut args = churn.to_vec();
    args.push("--close-with-reset");
    let (_, report) = run_in(&ns, &args);
    assert_eq!(total_errors(&report), 0, "{report}");
    // Churned and shut down: well over a thousand closes ...
    let closes = field(&report, "/connections/closed");
    assert!(closes > 1000, "{report}");
    // ... and none of them left a TIME_WAIT.
    assert_eq!(time_waits(), 0, "after {closes} closes with --close-with-reset");
    // The same run without the flag leaves one per close (the check above
    // can fail).
    let (_, report) = run_in(&ns, &churn);
    let closes = field(&report, "/connections/closed") as usize;
    assert!(
        time_waits() * 10 >= closes * 9,
        "{} TIME_WAIT after {closes} closes",
        time_waits()
    );
}
