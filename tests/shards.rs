//! Shards of one plan (`--shard I/N`) against the built-in target: the
//! shares add up to the plan, each report and metrics endpoint says its
//! share, bad shard input exits 2, and `soakd merge` combines the shards'
//! reports and HDR logs without loss.

mod util;

use std::process::{Command, Stdio};
use std::time::Duration;

use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use serde_json::Value;
use util::{
    BuiltinTarget, TempDir, field as u, free_port, http_get, soakd, soakd_bin, spawn_soakd, wait_output, wait_until,
    wait_with_timeout,
};

fn read_json(path: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every interval of an HDR log, added into one histogram (µs).
fn hdr_log_total(path: &std::path::Path) -> Histogram<u64> {
    use base64::Engine as _;
    let bytes = std::fs::read(path).unwrap();
    let mut total = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).unwrap();
    let mut intervals = 0;
    for e in IntervalLogIterator::new(&bytes) {
        if let LogEntry::Interval(h) = e.unwrap() {
            let raw = base64::engine::general_purpose::STANDARD
                .decode(h.encoded_histogram())
                .unwrap();
            let hist: Histogram<u64> = Deserializer::new().deserialize(&mut std::io::Cursor::new(raw)).unwrap();
            total.add(&hist).unwrap();
            intervals += 1;
        }
    }
    assert!(intervals > 0, "{}: no intervals", path.display());
    total
}

/// Three shards of a 30-connection, 300 req/s plan run side by side: their
/// desired connections add up to 30 (10 each), each report and metrics
/// endpoint names its shard, and together they send about the plan's rate
/// (each shard's slots send at the whole plan's grid, not at the whole
/// plan's rate).
#[test]
fn three_shards_hold_their_shares_of_one_plan() {
    let target = BuiltinTarget::start(&[]);
    let url = target.url("/");
    let dir = TempDir::new("shards");
    let mut children = Vec::new();
    let mut ports = Vec::new();
    for i in 0..3 {
        let report = dir.path().join(format!("r{i}.json"));
        let port = free_port();
        ports.push(port);
        let listen = format!("127.0.0.1:{port}");
        let shard = format!("{i}/3");
        children.push(spawn_soakd(&[
            "run",
            &url,
            "-c",
            "30",
            "-r",
            "300",
            "-d",
            "4s",
            "--shard",
            &shard,
            "--metrics-listen",
            &listen,
            "--report",
            report.to_str().unwrap(),
        ]));
    }
    for (i, port) in ports.iter().enumerate() {
        // Once the shard's run has started, its metrics show its share.
        let metrics = format!("127.0.0.1:{port}");
        wait_until(
            || util::scrape(&metrics).is_some_and(|m| util::metric_sum(&m, "soakd_connections_desired") == 10.0),
            Duration::from_secs(10),
            &format!("shard {i}'s metrics at {metrics} to show 10 connections desired"),
        );
        let text = http_get(&metrics, "/metrics");
        let want = format!("soakd_shard_info{{shard=\"{i}\",shards=\"3\"}} 1");
        assert!(text.contains(&want), "shard {i}: no {want:?} in:\n{text}");
        assert!(
            text.contains("soakd_connections_desired{target=") && text.contains("} 10\n"),
            "{text}"
        );
    }
    let mut desired = 0;
    let mut sent = 0;
    for (i, child) in children.into_iter().enumerate() {
        let (status, stderr) = wait_with_timeout(child, 30);
        assert!(status.success(), "shard {i}: {stderr}");
        let r = read_json(&dir.path().join(format!("r{i}.json")));
        assert_eq!(u(&r, "/shard/index"), i as u64, "{r}");
        assert_eq!(u(&r, "/shard/count"), 3, "{r}");
        assert_eq!(u(&r, "/connections/desired"), 10, "shard {i}'s share of 30");
        assert_eq!(u(&r, "/connections/peak_open"), 10, "shard {i}");
        desired += u(&r, "/connections/desired");
        sent += u(&r, "/requests/sent");
    }
    assert_eq!(desired, 30, "the shares add up to the plan");
    // 300 req/s for 4 s is 1200 requests in all. Had every shard run the
    // whole plan's rate it would be 3600; had each slot taken a phase of
    // its shard's own grid, still 1200 but bunched (checked by the unit
    // tests of the grid places). A wide band: the machine is shared.
    assert!((900..=1500).contains(&sent), "sent {sent}, expected about 1200");
}

/// `-n` splits exactly: shards of a 100-request budget complete 34, 33
/// and 33 (the remainder to the first shard); `SOAKD_SHARD` and
/// `auto/N` with `JOB_COMPLETION_INDEX` name the shard like the flag.
#[test]
fn the_request_budget_splits_and_the_environment_names_the_shard() {
    let target = BuiltinTarget::start(&[]);
    let url = target.url("/");
    let dir = TempDir::new("shard-env");
    let mut completed = Vec::new();
    for (i, env) in [
        ("SOAKD_SHARD", "0/3"),
        ("SOAKD_SHARD", "auto/3"),
        ("JOB_COMPLETION_INDEX", "2"),
    ]
    .into_iter()
    .enumerate()
    {
        let report = dir.path().join(format!("n{i}.json"));
        let mut cmd = Command::new(soakd_bin());
        cmd.args([
            "run",
            &url,
            "-c",
            "9",
            "-n",
            "100",
            "--metrics-listen",
            "off",
            "--report",
        ])
        .arg(&report)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("SOAKD_SHARD")
        .env_remove("JOB_COMPLETION_INDEX")
        .env(env.0, env.1);
        match i {
            1 => {
                cmd.env("JOB_COMPLETION_INDEX", "1");
            }
            2 => {
                cmd.args(["--shard", "auto/3"]);
            }
            _ => {}
        }
        let out = wait_output(cmd.spawn().unwrap(), 30);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let r = read_json(&report);
        assert_eq!(u(&r, "/shard/index"), i as u64, "{r}");
        assert_eq!(u(&r, "/connections/desired"), 3);
        completed.push(u(&r, "/requests/completed"));
    }
    assert_eq!(completed, [34, 33, 33]);
}

#[test]
fn bad_shards_exit_2_naming_the_problem() {
    let url = "http://127.0.0.1:9/";
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["run", url, "--shard", "3/3"], "out of range"),
        (vec!["run", url, "--shard", "0/0"], "at least one shard"),
        (vec!["run", url, "--shard", "two"], "expected I/N"),
        (vec!["run", url, "--shard", "auto/3"], "JOB_COMPLETION_INDEX"),
        (vec!["run", url, "-c", "2", "--shard", "2/3"], "would hold none of it"),
        (
            vec![
                "run",
                url,
                "--shard",
                "1/3",
                "--shard-sources",
                "--source-addr",
                "127.0.0.1",
            ],
            "1 source address(es) for 3 shards",
        ),
        (
            vec!["run", url, "--processes", "3", "--shard", "0/3"],
            "cannot be used with",
        ),
        (
            vec!["run", url, "--processes", "3", "--source-addr", "127.0.0.2"],
            "1 source address(es), and each process takes its own",
        ),
        (vec!["run", url, "-c", "2", "--processes", "3"], "would hold none of it"),
        (
            vec!["run", url, "--processes", "2", "--metrics-listen", "127.0.0.1:65535"],
            "past 65535",
        ),
    ];
    for (args, says) in &cases {
        let out = wait_output(
            Command::new(soakd_bin())
                .args(args)
                .env_remove("JOB_COMPLETION_INDEX")
                .env_remove("SOAKD_SHARD")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
            30,
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: expected {says:?} in {stderr}");
    }
}

/// `soakd check --shard` prints the share; `--shard-sources` gives each
/// shard its own slice of the addresses.
#[test]
fn check_prints_the_share() {
    let dir = TempDir::new("shard-check");
    let cfg = dir.path().join("soak.toml");
    std::fs::write(
        &cfg,
        "metrics_listen = \"off\"\nrequests = 1000\n[[workload]]\nname = \"api\"\nurl = \"http://127.0.0.1:9/\"\nconnections = 10\nrate = 100.0\n\
         source_addrs = [\"127.0.0.2\", \"127.0.0.3\", \"127.0.0.4\"]\n",
    )
    .unwrap();
    let out = soakd(&[
        "check",
        "--config",
        cfg.to_str().unwrap(),
        "--shard",
        "1/3",
        "--shard-sources",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for want in [
        "shard 1/3: 3 of the 10 connections",
        "30.0 req/s",
        "shard 1/3: 3 of the plan's 10 connections, 30.0 of 100.0 req/s, 333 of 1000 requests",
        "source addresses 127.0.0.3",
    ] {
        assert!(stdout.contains(want), "expected {want:?} in:\n{stdout}");
    }
    assert!(!stdout.contains("127.0.0.2"), "{stdout}");
}

/// Two shards run for real with HDR logs; `soakd merge` adds their counts,
/// and the merged report's p99 is the p99 of the merged HDR log's
/// histograms (both from the same samples: nothing lost or averaged).
#[test]
fn merged_shards_add_up_and_agree_with_the_merged_hdr_logs() {
    let target = BuiltinTarget::start(&[]);
    let url = target.url("/");
    let dir = TempDir::new("shard-merge");
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let children: Vec<_> = (0..2)
        .map(|i| {
            let shard = format!("{i}/2");
            spawn_soakd(&[
                "run",
                &url,
                "-c",
                "20",
                "-r",
                "400",
                "-d",
                "3s",
                "--shard",
                &shard,
                "--metrics-listen",
                "off",
                "--report",
                &p(&format!("r{i}.json")),
                "--hdr-log",
                &p(&format!("h{i}.hlog")),
                // Not the default, so the merged header's interval is
                // seen to come from the shards.
                "--hdr-log-interval",
                "1s",
            ])
        })
        .collect();
    for c in children {
        let (status, stderr) = wait_with_timeout(c, 30);
        assert!(status.success(), "{stderr}");
    }
    let out = soakd(&[
        "merge",
        &p("r0.json"),
        &p("r1.json"),
        "--out",
        &p("merged.json"),
        "--hdr-log",
        &p("h0.hlog"),
        "--hdr-log",
        &p("h1.hlog"),
        "--hdr-log-out",
        &p("merged.hlog"),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (r0, r1) = (
        read_json(&dir.path().join("r0.json")),
        read_json(&dir.path().join("r1.json")),
    );
    let m = read_json(&dir.path().join("merged.json"));
    for key in [
        "/connections/desired",
        "/connections/opened",
        "/requests/sent",
        "/requests/completed",
        "/responses/2xx",
        "/bytes/sent",
        "/latency_seconds/count",
    ] {
        assert_eq!(u(&m, key), u(&r0, key) + u(&r1, key), "{key}");
    }
    assert_eq!(u(&m, "/connections/desired"), 20);
    assert!(
        m["shard"]["index"].is_null() && m["shard"]["merged"] == serde_json::json!([0, 1]),
        "{m}"
    );
    // The merged log says the shards' interval (it once said 10 s
    // whatever they used).
    let merged_log = std::fs::read_to_string(dir.path().join("merged.hlog")).unwrap();
    let header = merged_log.lines().next().unwrap_or_default();
    assert!(
        header.starts_with("#soakd merge: 2 interval logs") && header.ends_with(" every 1s"),
        "the merged log's header does not state the shards' 1 s interval: {header:?}"
    );
    let logged = hdr_log_total(&dir.path().join("merged.hlog"));
    assert_eq!(
        logged.len(),
        u(&m, "/latency_seconds/count"),
        "every sample is in the merged log"
    );
    let p99 = logged.value_at_quantile(0.99) as f64 / 1e6;
    assert_eq!(m["latency_seconds"]["p99"].as_f64().unwrap(), p99, "{m}");
    assert_eq!(m["workloads"][0]["latency_seconds"]["p99"].as_f64().unwrap(), p99);
    // The timelines line up by wall clock and their counts add: the merged
    // timeline accounts for every completed request of both shards.
    let timeline_sum = |r: &Value| -> u64 {
        r["timeline"]["points"]
            .as_array()
            .expect("a timeline")
            .iter()
            .map(|p| p["completed"].as_u64().unwrap())
            .sum()
    };
    assert!(timeline_sum(&r0) > 0 && timeline_sum(&r1) > 0);
    assert_eq!(
        timeline_sum(&m),
        timeline_sum(&r0) + timeline_sum(&r1),
        "{}",
        m["timeline"]
    );
    let points = m["timeline"]["points"].as_array().unwrap().len();
    let longest = [&r0, &r1].map(|r| r["timeline"]["points"].as_array().unwrap().len());
    assert!(
        points <= longest.iter().max().unwrap() + 1,
        "one grid, not the shards' points side by side"
    );

    // The merged report is a report like any other: the HTML page draws
    // its timeline, and `soakd compare` judges it against itself as same.
    let out = soakd(&[
        "report",
        &p("merged.json"),
        "--hdr-log",
        &p("merged.hlog"),
        "--html",
        &p("merged.html"),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let page = std::fs::read_to_string(dir.path().join("merged.html")).unwrap();
    // Six time and percentile charts, and the memory chart (the shards'
    // points carry soakd's own RSS).
    assert_eq!(page.matches("<svg").count(), 7, "seven charts");
    assert!(page.matches("<polyline").count() >= 4, "the time charts have lines");
    let out = soakd(&["compare", &p("merged.json"), &p("merged.json")]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));

    // Reports of different plans are refused.
    let other = dir.path().join("other.json");
    let mut changed = r1.clone();
    changed["workloads"][0]["name"] = "elsewhere:80".into();
    std::fs::write(&other, changed.to_string()).unwrap();
    let out = soakd(&["merge", &p("r0.json"), other.to_str().unwrap(), "--out", &p("x.json")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("different plans"));
}

/// The plan in deploy/kubernetes/configmap.yaml is a valid config, and
/// each of the 3 shards the manifests run holds a third of it. Its URL
/// names a cluster Service, so it is pointed at loopback here (no DNS).
#[test]
fn the_kubernetes_plan_checks_for_every_shard() {
    let yaml =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/kubernetes/configmap.yaml")).unwrap();
    let toml: String = yaml
        .split_once("soakd.toml: |\n")
        .expect("a soakd.toml key")
        .1
        .lines()
        .take_while(|l| l.is_empty() || l.starts_with("    "))
        .map(|l| format!("{}\n", l.strip_prefix("    ").unwrap_or(l)))
        .collect();
    let url = toml
        .lines()
        .find_map(|l| l.strip_prefix("url = "))
        .expect("a url")
        .split('"')
        .nth(1)
        .unwrap()
        .to_string();
    let dir = TempDir::new("k8s-plan");
    let cfg = dir.path().join("soakd.toml");
    std::fs::write(
        &cfg,
        toml.replace(&url, "http://127.0.0.1:9/health")
            .replace("0.0.0.0:9469", "127.0.0.1:0"),
    )
    .unwrap();
    for i in 0..3 {
        let out = soakd(&["check", "--config", cfg.to_str().unwrap(), "--shard", &format!("{i}/3")]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(
            stdout.contains(&format!("shard {i}/3: 15000 of the plan's 45000 connections")),
            "{stdout}"
        );
    }
}

/// Two shards of a WebSocket subscribe workload, merged: the `ws` section
/// is combined (it was `null`): counts add, closes by code add, the ping
/// RTT and silence histograms merge, so the merged counts are the sums
/// and the longest silence is the longest shard's.
#[test]
fn merged_shards_combine_their_websocket_sections() {
    let target = BuiltinTarget::start(&[]);
    let url = format!("ws://{}/ws/push?every=100ms", target.addr);
    let dir = TempDir::new("shard-merge-ws");
    let args = [
        "run",
        &url,
        "-c",
        "6",
        "-d",
        "3s",
        "--ws-subscribe",
        "go",
        "--ws-ping",
        "200ms",
    ];
    let (shards, m) = util::run_shards_and_merge(&dir, 2, &args);
    let ws = |r: &Value| r["workloads"][0]["ws"].clone();
    let merged = ws(&m);
    assert_eq!(merged["mode"], "subscribe", "{merged:#}");
    let sum = |path: &str| {
        shards
            .iter()
            .map(|r| ws(r).pointer(path).and_then(Value::as_u64).unwrap())
            .sum::<u64>()
    };
    for path in [
        "/upgrades",
        "/messages_sent",
        "/messages_received",
        "/pings",
        "/pongs",
        "/ping_rtt_seconds/count",
        "/silence_seconds/count",
        "/closes/normal",
    ] {
        assert_eq!(
            merged.pointer(path).and_then(Value::as_u64),
            Some(sum(path)),
            "{path}: {merged:#}"
        );
    }
    assert_eq!(merged["upgrades"], 6, "{merged:#}");
    assert!(merged["messages_received"].as_u64().unwrap() >= 6 * 15, "{merged:#}");
    let longest = shards
        .iter()
        .map(|r| ws(r)["silence_seconds"]["max"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert_eq!(merged["silence_seconds"]["max"].as_f64(), Some(longest), "{merged:#}");
}

/// Ports `base..base+n` that nothing listens on now (the shards of
/// `--processes` listen on consecutive ports).
fn free_ports(n: u16) -> u16 {
    for _ in 0..50 {
        let base = free_port();
        if base.checked_add(n).is_some() && (0..n).all(|i| std::net::TcpListener::bind(("127.0.0.1", base + i)).is_ok())
        {
            return base;
        }
    }
    panic!("no {n} consecutive free ports");
}

/// The descriptors of `pid` that are TCP sockets.
fn sockets_of(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| std::fs::read_link(e.path()).is_ok_and(|l| l.to_string_lossy().starts_with("socket:")))
                .count()
        })
        .unwrap_or(0)
}

/// `soakd run --processes 3` against two `soakd target --reuse-port`
/// processes sharing one address: one command runs the three shares (each
/// names its shard on its own metrics port, listed in targets.json), both
/// servers hold some of the connections, and the merged report and HDR
/// log add up the shards' kept reports exactly.
#[test]
fn one_command_runs_the_shards_and_merges_them() {
    let first = BuiltinTarget::start(&["--reuse-port"]);
    let addr = first
        .url("/")
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let second = BuiltinTarget::start_on(&addr, &["--reuse-port"]);
    let url = first.url("/");
    let dir = TempDir::new("processes");
    let report = dir.path().join("r.json");
    let hdr = dir.path().join("r.hdr");
    let base = free_ports(3);
    let listen = format!("127.0.0.1:{base}");
    let child = spawn_soakd(&[
        "run",
        &url,
        "--processes",
        "3",
        "-c",
        "30",
        "-r",
        "300",
        "-d",
        "5s",
        "--source-addr",
        "127.0.0.2",
        "--source-addr",
        "127.0.0.3",
        "--source-addr",
        "127.0.0.4",
        "--metrics-listen",
        &listen,
        "--report",
        report.to_str().unwrap(),
        "--hdr-log",
        hdr.to_str().unwrap(),
    ]);
    // Each shard on its port, naming itself; together the plan's 30.
    let desired = |i: u16| {
        let at = format!("127.0.0.1:{}", base + i);
        let m = util::scrape(&at)?;
        let key = format!("soakd_shard_info{{shard=\"{i}\",shards=\"3\"}}");
        assert_eq!(m.get(&key), Some(&1.0), "{at}: {key} missing");
        Some(util::metric_sum(&m, "soakd_connections_desired"))
    };
    wait_until(
        || (0..3).map(desired).sum::<Option<f64>>() == Some(30.0),
        Duration::from_secs(10),
        "the shards' metrics adding up to the plan's 30 connections",
    );
    wait_until(
        || sockets_of(first.pid()) + sockets_of(second.pid()) >= 32,
        Duration::from_secs(10),
        "30 connections over the two servers",
    );
    let (a, b) = (sockets_of(first.pid()), sockets_of(second.pid()));
    assert!(a > 1 && b > 1, "SO_REUSEPORT spread nothing: {a} and {b} sockets");
    let sd = std::fs::read_to_string(dir.path().join("r.json.shards/targets.json")).unwrap();
    for i in 0..3 {
        assert!(sd.contains(&format!("\"127.0.0.1:{}\"", base + i)), "{sd}");
    }
    let out = wait_output(child, 60);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("running the plan as 3 processes"), "{stderr}");
    // One summary, the parent's: the shards print none.
    assert_eq!(stderr.matches("latency ").count(), 1, "{stderr}");
    let merged = read_json(&report);
    let shards: Vec<Value> = (0..3)
        .map(|i| read_json(&dir.path().join(format!("r.json.shards/shard-{i}.json"))))
        .collect();
    assert_eq!(merged["shard"]["merged"], serde_json::json!([0, 1, 2]), "{merged}");
    assert_eq!(u(&merged, "/connections/desired"), 30);
    let completed: u64 = shards.iter().map(|r| u(r, "/requests/completed")).sum();
    assert_eq!(u(&merged, "/requests/completed"), completed);
    assert!((1200..=1700).contains(&completed), "300/s for 5 s: {completed}");
    assert_eq!(u(&merged, "/requests/failed"), 0, "{merged}");
    assert_eq!(hdr_log_total(&hdr).len(), completed);
}

/// SIGTERM to the parent reaches every shard (they drain, as one process
/// does), the merged report is written, and a threshold that fails in the
/// shards makes the one command's exit code 3. Under a service manager the
/// parent alone speaks to it: READY=1 once, watchdog pings, STOPPING=1.
#[test]
fn a_signal_to_the_parent_drains_every_shard() {
    use std::os::unix::net::UnixDatagram;
    let target = BuiltinTarget::start(&[]);
    let dir = TempDir::new("processes-term");
    let report = dir.path().join("r.json");
    let sock_path = dir.path().join("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    let child = Command::new(soakd_bin())
        .args(["run", &target.url("/"), "--processes", "2", "-c", "10", "-i", "100ms"])
        .args(["--metrics-listen", "off", "--threshold", "rps>=100000", "--report"])
        .arg(&report)
        .env("NOTIFY_SOCKET", &sock_path)
        .env("WATCHDOG_USEC", "1000000")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut messages = Vec::new();
    let mut buf = [0u8; 512];
    let mut receive = |messages: &mut Vec<String>| {
        if let Ok(n) = sock.recv(&mut buf) {
            messages.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
    };
    let t = std::time::Instant::now();
    while sockets_of(target.pid()) < 11 && t.elapsed() < Duration::from_secs(10) {
        receive(&mut messages);
    }
    assert!(
        sockets_of(target.pid()) >= 11,
        "the shards' 10 connections never opened"
    );
    let t = std::time::Instant::now();
    while t.elapsed() < Duration::from_millis(1600) {
        receive(&mut messages);
    }
    util::signal(pid, "TERM");
    let t = std::time::Instant::now();
    while t.elapsed() < Duration::from_millis(500) {
        receive(&mut messages);
    }
    let out = wait_output(child, 30);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("shard(s) 0, 1 failed their thresholds"), "{stderr}");
    // Each shard drained, as one process does on SIGTERM.
    assert_eq!(stderr.matches("finishing requests in flight").count(), 2, "{stderr}");
    let merged = read_json(&report);
    assert_eq!(merged["shard"]["merged"], serde_json::json!([0, 1]), "{merged}");
    assert!(u(&merged, "/requests/completed") > 0);
    assert_eq!(u(&merged, "/requests/failed"), 0, "{merged}");
    assert_eq!(messages.iter().filter(|m| *m == "READY=1").count(), 1, "{messages:?}");
    assert!(
        messages.iter().filter(|m| *m == "WATCHDOG=1").count() >= 2,
        "{messages:?}"
    );
    assert!(messages.iter().any(|m| m == "STOPPING=1"), "{messages:?}");
}
