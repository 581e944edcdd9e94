//! Trends: the report's slopes and drifts from the timeline's process
//! samples, and the trend thresholds, with the real binary against the
//! built-in target and a helper process that leaks memory on purpose,
//! watched through `--target-pid`.

mod util;

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::Value;
use util::{BuiltinTarget, soakd, soakd_report};

/// A python3 process that keeps `mib_per_s` MiB a second more resident
/// (written, so the pages are real) for at most two minutes. Killed on
/// drop.
struct Leaker(Child);

impl Leaker {
    fn start(mib_per_s: f64) -> Leaker {
        let script = format!(
            "import sys, time\n\
             keep = []\n\
             step = 0.25\n\
             chunk = int({mib_per_s} * 1048576 * step)\n\
             print('ready', flush=True)\n\
             t0 = time.monotonic()\n\
             while time.monotonic() - t0 < 120:\n\
             \x20   if chunk: keep.append(bytearray(b'\\x01') * chunk)\n\
             \x20   time.sleep(step)\n"
        );
        let mut child = Command::new("python3")
            .args(["-c", &script])
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("the leaker says ready");
        assert_eq!(line.trim(), "ready");
        Leaker(child)
    }

    fn pid(&self) -> String {
        self.0.id().to_string()
    }
}

impl Drop for Leaker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A 30 s paced soak (warmup 3 s) with `--target-pid PID` and thresholds.
fn soak(url: &str, pid: &str, thresholds: &[&str]) -> util::RunResult {
    let mut args = vec![
        "run",
        url,
        "-c",
        "10",
        "-r",
        "200",
        "-d",
        "30s",
        "--metrics-listen",
        "off",
        "--target-pid",
        pid,
    ];
    for t in thresholds {
        args.extend(["--threshold", t]);
    }
    soakd_report(&args, 90)
}

fn slope<'a>(report: &'a Value, metric: &str) -> &'a Value {
    report["trends"]["slopes"]
        .as_array()
        .expect("a slopes array")
        .iter()
        .find(|s| s["metric"] == metric)
        .unwrap_or_else(|| panic!("no {metric} in {}", report["trends"]))
}

fn threshold<'a>(report: &'a Value, text: &str) -> &'a Value {
    report["thresholds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["threshold"] == text)
        .unwrap_or_else(|| panic!("no {text} in {}", report["thresholds"]))
}

#[test]
fn a_leaking_target_fails_its_slope_threshold_with_the_slope_measured() {
    let target = BuiltinTarget::start(&[]);
    let leaker = Leaker::start(2.0);
    let out = soak(&target.url("/"), &leaker.pid(), &["target_rss_slope<=10MiB/min"]);
    assert_eq!(out.status.code(), Some(3), "{}", out.stderr);
    let s = slope(&out.report, "target_rss_slope");
    let per_s = s["slope"].as_f64().unwrap();
    let want = 2.0 * 1048576.0;
    assert!((per_s / want - 1.0).abs() < 0.25, "{per_s} bytes/s vs {want}: {s}");
    assert_eq!(s["significant"], true, "{s}");
    assert!(s["points"].as_u64().unwrap() >= 20, "{s}");
    assert!(s["from_seconds"].as_f64().unwrap() >= 3.0, "after the warmup: {s}");
    let t = threshold(&out.report, "target_rss_slope<=10MiB/min");
    assert_eq!(t["pass"], false, "{t}");
    assert_eq!(t["note"], "significant", "{t}");
    // The points carry the sample; the summary says it in MiB/min.
    let p = &out.report["timeline"]["points"][5];
    assert_eq!(
        p["targets"][0]["pid"].as_u64().unwrap().to_string(),
        leaker.pid(),
        "{p}"
    );
    assert!(p["targets"][0]["rss_bytes"].as_u64().unwrap() > 1 << 20, "{p}");
    assert!(p["soakd_rss_bytes"].as_u64().unwrap() > 1 << 20, "{p}");
    assert!(
        out.stderr.contains("FAIL  target_rss_slope<=10MiB/min") && out.stderr.contains("MiB/min"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_steady_target_passes_every_trend_threshold() {
    let target = BuiltinTarget::start(&[]);
    let pid = target.pid().to_string();
    let out = soak(
        &target.url("/"),
        &pid,
        &[
            "target_rss_slope<=10MiB/min",
            "target_fds_slope<=60/min",
            "soakd_rss_slope<=10MiB/min",
            "p99_drift<=200%",
            "error_rate_drift<=10%",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", out.stderr);
    for t in out.report["thresholds"].as_array().unwrap() {
        assert_eq!(t["pass"], true, "{t}");
        assert!(t["measured"].is_number(), "judged: {t}");
    }
    let fds = slope(&out.report, "target_fds_slope");
    assert!(fds["slope"].is_number(), "{fds}");
    // A held-connection soak: the target's descriptors stay where the ramp
    // put them.
    let s = fds["slope"].as_f64().unwrap();
    assert!(s.abs() < 0.1, "{fds}");
    assert!(out.stderr.contains("trends (after"), "{}", out.stderr);
}

#[test]
fn target_trend_thresholds_need_a_target_pid() {
    let out = soakd(&[
        "run",
        "http://127.0.0.1:9/",
        "--threshold",
        "target_rss_slope<=10MiB/h",
        "--metrics-listen",
        "off",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("target_rss_slope<=10MiB/h") && err.contains("--target-pid"),
        "{err}"
    );
    let out = soakd(&[
        "run",
        "http://127.0.0.1:9/",
        "--threshold",
        "target_rss_slope<=10MB/h",
        "--metrics-listen",
        "off",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("10MiB/h"), "says how to write it: {err}");
}

/// A config with two workloads, one of them against a target that slows
/// down fast, and `thresholds` written in its workload table.
fn two_workloads(steady: &str, slowing: &str, slow_threshold: &str) -> std::path::PathBuf {
    let path = util::temp_path("trends-workloads", "toml");
    std::fs::write(
        &path,
        format!(
            "metrics_listen = \"off\"\n\n\
             [[workload]]\nname = \"steady\"\nurl = \"{steady}\"\nconnections = 5\nrate = 100\nwarmup = \"2s\"\n\n\
             [[workload]]\nname = \"slowing\"\nurl = \"{slowing}\"\nconnections = 5\nrate = 100\nwarmup = \"2s\"\n\
             thresholds = [\"{slow_threshold}\"]\n"
        ),
    )
    .unwrap();
    path
}

#[test]
fn each_workload_has_its_own_drifts_and_thresholds() {
    // The steady target answers after 5 ms too: a median of tens of
    // microseconds doubles whenever the machine gets busy (+100% was
    // seen with two CPU hogs beside the suite), one of 5 ms does not.
    let steady = BuiltinTarget::start(&["--delay", "5ms"]);
    // 5 ms growing 600% a minute: ~8 ms in the first steady quarter,
    // ~16 ms in the last.
    let slowing = BuiltinTarget::start(&["--delay", "5ms", "--slowdown", "600%/min"]);
    let cfg = two_workloads(&steady.url("/"), &slowing.url("/"), "p50_drift<=20%");
    let out = soakd_report(&["run", "--config", cfg.to_str().unwrap(), "-d", "26s"], 90);
    assert_eq!(out.status.code(), Some(3), "{}", out.stderr);
    let w = out.report["trends"]["workloads"]
        .as_array()
        .expect("per-workload trends");
    assert_eq!(w.len(), 2, "{w:?}");
    assert_eq!(w[1]["workload"], "slowing");
    let drift = |i: usize, m: &str| {
        w[i]["drifts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["metric"] == m)
            .unwrap()
            .clone()
    };
    let slow = drift(1, "p50_drift");
    assert_eq!(slow["significant"], true, "{slow}");
    assert!(slow["drift"].as_f64().unwrap() > 0.5, "{slow}");
    // The steady workload's median barely moves.
    let fast = drift(0, "p50_drift");
    assert!(fast["drift"].as_f64().unwrap() < 0.5, "{fast}");
    // The points carry each workload's share.
    let p = &out.report["timeline"]["points"][5];
    assert_eq!(p["workloads"].as_array().map(Vec::len), Some(2), "{p}");
    // The workload's threshold judged its own drift.
    let t = threshold(&out.report, "p50_drift<=20%");
    assert_eq!(t["workload"], "slowing", "{t}");
    assert_eq!(t["pass"], false, "{t}");
    assert!(out.stderr.contains("workload slowing"), "{}", out.stderr);
    // A slope in a workload table is refused: one server, one soakd.
    let cfg = two_workloads(&steady.url("/"), &slowing.url("/"), "soakd_rss_slope<=10MiB/h");
    let out = soakd(&["check", "--config", cfg.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("soakd_rss_slope") && err.contains("run-wide"), "{err}");
}
