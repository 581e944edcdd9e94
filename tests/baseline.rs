//! `soakd run --baseline` live and `soakd history`, with the real binary
//! against the built-in target: the verdict of each window on /metrics and
//! in a real Prometheus loading the mixin (the alert pending, every new
//! dashboard query answered), `--abort-on-fail` on a held regression, a
//! faster target judged better, a different load that fails nothing, bad
//! input refused before anything opens, and a series of runs with its
//! first worse run named. Short windows keep it to a minute or so; the
//! 10-minute runs are bench/baseline.sh's.

mod util;

use std::time::{Duration, Instant};

use serde_json::Value;
use util::{
    BuiltinTarget, Prometheus, TempDir, free_port, raw_server, scrape, soakd, spawn_soakd, wait_for, wait_with_timeout,
};

/// A short open-loop soak: 10 connections, 400 req/s.
fn soak<'a>(url: &'a str, secs: &'a str) -> Vec<&'a str> {
    vec![
        "run",
        url,
        "-c",
        "10",
        "-r",
        "400",
        "-d",
        secs,
        "--metrics-listen",
        "off",
    ]
}

/// A baseline report and interval log (1 s intervals) of `secs` against
/// `url`, in `dir` as NAME.json and NAME.hlog; returns the report's path.
fn baseline(dir: &TempDir, name: &str, url: &str, secs: &str) -> String {
    let report = dir.path().join(format!("{name}.json")).display().to_string();
    let log = dir.path().join(format!("{name}.hlog")).display().to_string();
    let mut args = soak(url, secs);
    args.extend(["--report", &report, "--hdr-log", &log, "--hdr-log-interval", "1s"]);
    let out = soakd(&args);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    report
}

fn read(path: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Each window's verdict of `metric` in a report's `baseline` section.
fn verdicts(report: &Value, metric: &str) -> Vec<String> {
    report["baseline"]["windows"]
        .as_array()
        .expect("a baseline section with windows")
        .iter()
        .map(|w| {
            w["rows"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["metric"] == metric)
                .unwrap()["verdict"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

/// A server 20 ms slower than the baseline's: soakd_baseline_verdict 1 for
/// p50 and p99 from the first window, present (0) from the first scrape;
/// in Prometheus, SoakdLatencyRegression pending (its `for` is 10
/// minutes: grafana/tests/baseline_test.yml tests the firing) and every
/// query of the dashboard that reads the baseline answered; the report's
/// windows and the summary's regression line; exit 3.
#[test]
fn a_slower_server_is_worse_live_in_prometheus_and_on_the_dashboard() {
    let fast = BuiltinTarget::start(&[]);
    // 20 ms, not 2: the p99 must be worse too, and on a machine whose
    // cores are busy with others the baseline's own p99 is a few
    // milliseconds of scheduling (2 ms slower was not worse at p99 with
    // two CPU hogs beside the suite).
    let slow = BuiltinTarget::start(&["--delay", "20ms"]);
    let dir = TempDir::new("baseline-live");
    let base = baseline(&dir, "base", &fast.url("/"), "6s");
    let port = free_port();
    let metrics = format!("127.0.0.1:{port}");
    let Some(prom) = Prometheus::start(&[&metrics], &["grafana/rules.yml", "grafana/alerts.yml"]) else {
        return;
    };
    let report = dir.path().join("new.json").display().to_string();
    let url = slow.url("/");
    let child = spawn_soakd(&[
        "run",
        &url,
        "-c",
        "10",
        "-r",
        "400",
        "-d",
        "14s",
        "--baseline",
        &base,
        "--baseline-window",
        "5s",
        "--metrics-listen",
        &metrics,
        "--metrics-linger",
        "30s",
        "--report",
        &report,
    ]);
    // From the first scrape: the baseline's figures, verdicts 0.
    let first = wait_for(|| scrape(&metrics), Duration::from_secs(10), "the first scrape");
    let t = slow.addr.as_str();
    let key = |name: &str, extra: &str| format!("{name}{{target=\"{t}\"{extra}}}");
    assert_eq!(
        first.get(&key("soakd_baseline_verdict", ",metric=\"p50\"")),
        Some(&0.0),
        "{first:?}"
    );
    assert!(first[&key("soakd_baseline_latency_seconds", ",quantile=\"0.99\"")] > 0.0);
    assert!((first[&key("soakd_baseline_requests_per_second", "")] - 400.0).abs() < 40.0);
    assert_eq!(first.get(&key("soakd_baseline_load_matches", "")), Some(&1.0));
    // In Prometheus: worse, and the alert pending.
    wait_for(
        || {
            let v = prom.query("soakd_baseline_verdict{metric=~\"p50|p99\"} == 1");
            (v.len() == 2).then_some(())
        },
        Duration::from_secs(30),
        "p50 and p99 worse in Prometheus",
    );
    wait_for(
        || {
            let v = prom.query("ALERTS{alertname=\"SoakdLatencyRegression\",alertstate=\"pending\"}");
            (!v.is_empty()).then_some(())
        },
        Duration::from_secs(20),
        "SoakdLatencyRegression pending",
    );
    // Every dashboard query that reads the baseline (the latency panels'
    // dashed lines, the row "Against the baseline") has data.
    let dash: Value = serde_json::from_str(&std::fs::read_to_string("grafana/dashboards/soakd.json").unwrap()).unwrap();
    let mut asked = 0;
    for p in dash["panels"].as_array().unwrap() {
        for q in p["targets"].as_array().into_iter().flatten() {
            let expr = q["expr"].as_str().unwrap();
            let in_row = [
                "Verdict of each window against the baseline",
                "Change against the baseline",
                "Requests / s vs the baseline",
                "Error ratio vs the baseline",
                "Baseline load",
            ]
            .contains(&p["title"].as_str().unwrap());
            if !(expr.contains("baseline") || in_row) {
                continue;
            }
            let expr = expr
                .replace("$__rate_interval", "1m")
                .replace("$job", "soakd")
                .replace("$instance", ".*")
                .replace("$target", ".*");
            // Rates of rules need a few evaluations: wait for data.
            wait_for(
                || (!prom.query(&expr).is_empty()).then_some(()),
                Duration::from_secs(20),
                &format!("data for panel {:?}: {expr}\n{}", p["title"], prom.log()),
            );
            asked += 1;
        }
    }
    assert!(asked >= 8, "{asked} queries");
    // The report is written before the linger: then end the linger.
    wait_for(
        || std::path::Path::new(&report).exists().then_some(()),
        Duration::from_secs(30),
        "the report",
    );
    util::signal(child.id(), "TERM");
    let (status, stderr) = wait_with_timeout(child, 60);
    assert_eq!(status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("regression started at 0s"), "{stderr}");
    let r = read(&report);
    let p50 = verdicts(&r, "p50");
    assert!(p50.len() >= 3 && p50.iter().all(|v| v == "worse"), "{p50:?}");
    assert!(verdicts(&r, "p99").iter().all(|v| v == "worse"));
    assert_eq!(r["baseline"]["metrics"][0]["first_worse_at"], 0.0);
    assert_eq!(r["baseline"]["hdr_log"], base.replace(".json", ".hlog"));
    assert_eq!(
        r["baseline"]["windows"][0]["rows"][0]["method"], "rank_test",
        "five 1 s intervals a window against the baseline's six: {}",
        r["baseline"]["windows"][0]
    );
}

/// A faster server than the baseline's is better, exit 0; a regression
/// held for --abort-on-fail stops the run, exit 3; a different load shows
/// its verdicts but fails nothing.
#[test]
fn better_abort_and_another_load() {
    let fast = BuiltinTarget::start(&[]);
    let slow = BuiltinTarget::start(&["--delay", "2ms"]);
    let dir = TempDir::new("baseline-better");
    let slow_base = baseline(&dir, "slow", &slow.url("/"), "6s");
    let report = dir.path().join("better.json").display().to_string();
    let url = fast.url("/");
    let mut args = soak(&url, "7s");
    args.extend(["--baseline", &slow_base, "--baseline-window", "3s", "--report", &report]);
    let out = soakd(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("no window worse than the baseline; better:"),
        "{stderr}"
    );
    assert!(verdicts(&read(&report), "p50").iter().all(|v| v == "better"));

    // The other way round, held 3 s: stopped by --abort-on-fail.
    let fast_base = baseline(&dir, "fast", &fast.url("/"), "6s");
    let report = dir.path().join("aborted.json").display().to_string();
    let slow_url = slow.url("/");
    let mut args = soak(&slow_url, "60s");
    args.extend([
        "--baseline",
        &fast_base,
        "--baseline-window",
        "2s",
        "--abort-on-fail",
        "3s",
        "--report",
        &report,
    ]);
    let started = Instant::now();
    let out = soakd(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(30), "stopped early: {stderr}");
    let why = read(&report)["aborted"].as_str().unwrap_or_default().to_string();
    assert!(
        why.contains("worse than the baseline") && why.contains("--abort-on-fail"),
        "{why}"
    );

    // Twice the connections: said at start and in the report, no exit 3
    // for the slower server.
    let report = dir.path().join("other.json").display().to_string();
    let args = [
        "run",
        &slow_url,
        "-c",
        "20",
        "-r",
        "400",
        "-d",
        "4s",
        "--metrics-listen",
        "off",
        "--baseline",
        &fast_base,
        "--baseline-window",
        "2s",
        "--report",
        &report,
    ];
    let out = soakd(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("its load differs from this run's (connections 10 → 20)")
            && stderr.contains("not a regression verdict"),
        "{stderr}"
    );
    let r = read(&report);
    assert_eq!(r["baseline"]["load_differs"][0], "connections 10 → 20");
    assert!(verdicts(&r, "p50").contains(&"worse".to_string()));
}

/// Bad input exits 2 with a message naming the file and the fix, before
/// any connection is opened (the target sees none).
#[test]
fn bad_baselines_are_refused_before_anything_opens() {
    let target = raw_server(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    let fast = BuiltinTarget::start(&[]);
    let dir = TempDir::new("baseline-bad");
    let slow = BuiltinTarget::start(&["--delay", "1ms"]);
    let base = baseline(&dir, "a", &fast.url("/"), "2s");
    // Another run's log: another workload (the other target's address).
    let other = baseline(&dir, "b", &slow.url("/"), "2s");
    let two = dir.path().join("two.json").display().to_string();
    std::fs::write(
        &two,
        r#"{"duration_seconds": 5.0, "workloads": [{"name": "api"}, {"name": "web"}]}"#,
    )
    .unwrap();
    let garbage = dir.path().join("garbage.json").display().to_string();
    std::fs::write(&garbage, "not json\n").unwrap();
    let stranger = dir.path().join("stranger.json").display().to_string();
    std::fs::write(&stranger, r#"{"workloads": []}"#).unwrap();
    let url = target.url("/");
    let other_log = other.replace(".json", ".hlog");
    for (extra, says) in [
        (
            vec!["--baseline", "/nonexistent/base.json"],
            "--baseline /nonexistent/base.json: cannot read it",
        ),
        (
            vec!["--baseline", garbage.as_str()],
            "garbage.json: not JSON (expected ident at line 1 column 2); give the JSON file `soakd run --report` wrote",
        ),
        (
            vec!["--baseline", stranger.as_str()],
            "stranger.json: not a soakd report",
        ),
        (
            vec!["--baseline", two.as_str()],
            "no workload of it pairs with this run's (it has api, web; this run has",
        ),
        (
            vec!["--baseline", base.as_str(), "--baseline-hdr-log", other_log.as_str()],
            "not the interval log of --baseline",
        ),
        (
            vec!["--baseline", base.as_str(), "--baseline-hdr-log", "/nonexistent/a.hlog"],
            "--baseline-hdr-log /nonexistent/a.hlog: cannot read it",
        ),
        (
            vec!["--baseline-window", "1m"],
            "goes with a baseline, but no --baseline REPORT",
        ),
        (
            vec!["--baseline", base.as_str(), "--baseline-window", "0s"],
            "greater than 0",
        ),
        (
            vec!["--abort-on-fail", "1m"],
            "neither a threshold nor a baseline is given",
        ),
    ] {
        let mut args = soak(&url, "30s");
        args.extend(extra.iter().copied());
        let started = Instant::now();
        let out = soakd(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {stderr}");
        assert!(stderr.contains(says), "{extra:?}: {stderr}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }
    assert_eq!(target.accepted(), 0, "nothing was opened");
    // The same checks from a config file's keys.
    let config = dir.path().join("soak.toml");
    std::fs::write(
        &config,
        format!("baseline = \"two.json\"\nduration = \"30s\"\nmetrics_listen = \"off\"\n[[workload]]\nurl = \"{url}\"\nconnections = 1\n"),
    )
    .unwrap();
    let out = soakd(&["run", "--config", config.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("two.json: no workload of it pairs"));
    assert_eq!(target.accepted(), 0);
}

/// Six runs: four of the same server, one 2 ms slower, one back to
/// normal. `soakd history` names the fifth as the first worse than the one
/// before it and the sixth better than the fifth, exit 0; without the
/// sixth, the newest is worse: exit 3. A directory of reports reads the
/// same (other JSON in it skipped with a note), given in any order.
#[test]
fn history_names_the_first_worse_run() {
    let fast = BuiltinTarget::start(&[]);
    let slow = BuiltinTarget::start(&["--delay", "2ms"]);
    let dir = TempDir::new("history");
    let runs = dir.path().join("runs");
    std::fs::create_dir(&runs).unwrap();
    let mut reports = Vec::new();
    for (i, url) in [
        fast.url("/"),
        fast.url("/"),
        fast.url("/"),
        fast.url("/"),
        slow.url("/"),
        fast.url("/"),
    ]
    .iter()
    .enumerate()
    {
        let report = runs.join(format!("run{}.json", 6 - i)).display().to_string();
        let log = runs.join(format!("run{}.hlog", 6 - i)).display().to_string();
        let mut args = soak(url, "3s");
        args.extend(["--report", &report, "--hdr-log", &log, "--hdr-log-interval", "250ms"]);
        // The history must see five runs of one fast server and one of a
        // slow one. A run of the fast server that a busy machine (parallel
        // tests, a build) slowed past the 1 ms floor is not that input: it is
        // run again (at most three times), not judged.
        for attempt in 1.. {
            let out = soakd(&args);
            assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
            let p99 = read(&report)["latency_seconds"]["p99"].as_f64().unwrap();
            if i == 4 || p99 < 0.001 || attempt == 3 {
                break;
            }
            eprintln!("run {}: p99 {p99} s on the fast server, a busy machine: again", 6 - i);
        }
        reports.push(report);
    }
    std::fs::write(runs.join("notes.json"), "{\"not\": \"a report\"}").unwrap();
    let html = dir.path().join("history.html");
    // Named run6 … run1 in start order: sorted by start, not by name.
    let out = soakd(&["history", runs.to_str().unwrap(), "--html", html.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{text}{stderr}");
    assert!(stderr.contains("skipping") && stderr.contains("notes.json"), "{stderr}");
    assert!(
        text.contains("first run worse than the one before it: run 5 (") && text.contains("run2.json): "),
        "{text}"
    );
    assert!(
        text.contains("newest, run 6 (") && text.contains("better than run 5"),
        "{text}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(page.matches("<svg").count(), 5);
    assert!(
        page.contains("class=\"worse\"") && page.contains("class=\"better\""),
        "run 5 worse, run 6 better"
    );
    // The newest worse: exit 3, in JSON too.
    let out = soakd(&[
        "history",
        &reports[0],
        &reports[1],
        &reports[2],
        &reports[3],
        &reports[4],
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    let h: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (h["first_worse"].as_u64(), h["newest_worse"].as_bool()),
        (Some(5), Some(true))
    );
    let p50 = &h["runs"][4]["workloads"][0]["cells"][0];
    assert_eq!(
        (p50["metric"].as_str(), p50["vs_previous"]["verdict"].as_str()),
        (Some("p50"), Some("worse"))
    );
    assert_eq!(p50["vs_previous"]["method"], "rank_test");
    // Bad input: one report, a missing one.
    let out = soakd(&["history", &reports[0]]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least two reports"));
    let out = soakd(&["history", &reports[0], "/nonexistent/r.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/r.json"));
}
