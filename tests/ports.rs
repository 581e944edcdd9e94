//! The port budget preflight sees: a run started right after another on the
//! same source address finds the first run's TIME_WAIT sockets holding
//! ports, and says so with the numbers before it connects.

mod util;

use util::*;

#[test]
fn back_to_back_runs_are_warned_about_time_wait() {
    let _heavy = heavy_lock();
    let target = BuiltinTarget::start(&[]);
    let url = target.url("/");
    // A source address of its own, so neither this test's TIME_WAITs nor
    // other tests' touch the other.
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
        "--source-addr",
        "127.0.0.77",
        "--metrics-listen",
        "off",
    ];
    let first = soakd_report(&args, 60);
    assert!(first.status.success(), "{}", first.stderr);
    assert_eq!(
        field(&first.report, "/connections/peak_open"),
        12000,
        "{}",
        first.report
    );
    assert!(!first.stderr.contains("TIME_WAIT"), "{}", first.stderr);
    // soakd closed all 12,000 itself: they sit in TIME_WAIT on its side.
    let second = soakd_report(&args, 60);
    let warning = second
        .stderr
        .lines()
        .find(|l| l.contains("source address 127.0.0.77") && l.contains("TIME_WAIT"))
        .unwrap_or_else(|| panic!("no port warning:\n{}", second.stderr));
    let number_after = |text: &str, marker: &str| -> u64 {
        text.split(marker)
            .next()
            .and_then(|s| s.rsplit([' ', '(']).next())
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no number before {marker:?} in {warning}"))
    };
    // All 12,000 ports of the first run are still held; most are in
    // TIME_WAIT already, the rest on their way there (FIN_WAIT2 until the
    // target's close arrives).
    let held = number_after(warning, " of the ");
    let in_tw = number_after(warning, " in TIME_WAIT");
    assert!((11_000..=12_100).contains(&held), "{warning}");
    assert!(in_tw >= 6_000, "{warning}");
    assert!(warning.contains("12000 new connections"), "{warning}");
}

#[test]
fn close_with_reset_leaves_no_time_wait() {
    let _heavy = heavy_lock();
    let target = BuiltinTarget::start(&[]);
    let url = target.url("/");
    let r = soakd_report(
        &[
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
            "--close-with-reset",
            "--source-addr",
            "127.0.0.78",
            "--metrics-listen",
            "off",
        ],
        30,
    );
    assert!(r.status.success(), "{}", r.stderr);
    assert_eq!(total_errors(&r.report), 0, "{}", r.report);
    // Churned and shut down: well over a thousand closes ...
    let closes = field(&r.report, "/connections/closed");
    assert!(closes > 1000, "{}", r.report);
    // ... and none of them left a TIME_WAIT on soakd's side.
    let out = std::process::Command::new("ss")
        .args(["-Htan", "state", "time-wait", "src", "127.0.0.78"])
        .output()
        .expect("ss runs");
    let waiting = String::from_utf8_lossy(&out.stdout).lines().count();
    assert_eq!(
        waiting, 0,
        "{waiting} TIME_WAIT sockets on 127.0.0.78 after {closes} closes"
    );
}
