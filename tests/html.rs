//! The HTML report, end to end: a real soak against the built-in target
//! writes it with `--html-report`, a real browser (headless Chromium)
//! renders it, and the screenshot is decoded and looked at. `soakd report`
//! turns the same JSON (plus its HDR log and a baseline) into a page too,
//! and bad paths are refused before anything runs.

mod util;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;
use util::{BuiltinTarget, TempDir, field as u, soakd, soakd_timeout, wait_output};

/// The six charts every page has, by `<title>`.
const CHARTS: [&str; 7] = [
    "Latency over time",
    "Latency by percentile",
    "Requests per second",
    "Errors per second by kind",
    "Connections open",
    "Schedule lag p99",
    // soakd's own memory is sampled in every run (the server's with
    // --target-pid).
    "Memory: the server and soakd",
];

/// The browser, or `None` (then the test is skipped, except in CI).
fn chromium() -> Option<PathBuf> {
    let found = ["chromium", "chromium-browser"].iter().find_map(|name| {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(name))
                .find(|p| p.is_file())
        })
    });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "chromium is not installed, and CI must run the browser test: scripts/test.sh installs it"
        );
        eprintln!("SKIPPED: chromium is not installed (scripts/test.sh installs it; `apt-get install chromium`)");
    }
    found
}

/// Renders `html` headless into a 1200×2400 PNG and returns its path.
fn screenshot(browser: &Path, html: &Path, dir: &Path) -> PathBuf {
    let png = dir.join("page.png");
    let profile = dir.join("profile");
    let child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg("--window-size=1200,2400")
        .arg(format!("file://{}", html.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start chromium");
    let out = wait_output(child, 180);
    assert!(
        png.is_file(),
        "chromium wrote no screenshot ({})\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    png
}

/// Distinct colours, the share of pixels that are not white, and whether
/// `rgb` appears exactly (a chart's line colour).
fn look_at(png: &Path, rgb: [u8; 3]) -> (usize, f64, bool) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(png).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (1200, 2400), "the window size");
    let channels = info.color_type.samples();
    assert!(channels >= 3, "{:?}", info.color_type);
    let mut colours = std::collections::HashSet::new();
    let (mut non_white, mut found) = (0usize, false);
    let pixels = buf[..info.buffer_size()].chunks(channels);
    let total = pixels.len();
    for px in pixels {
        let c = [px[0], px[1], px[2]];
        colours.insert(c);
        non_white += usize::from(c != [255, 255, 255]);
        found |= c == rgb;
    }
    (colours.len(), non_white as f64 / total as f64, found)
}

/// What every page must hold: the seven charts and nothing fetched from
/// anywhere.
fn check_page(page: &str, target_url: &str) {
    assert_eq!(page.matches("<svg").count(), CHARTS.len(), "seven charts");
    for title in CHARTS {
        assert!(
            page.contains(&format!("<title>{title}</title>")),
            "chart {title:?} missing"
        );
    }
    for bad in ["<script", "<link", "url(", " src=", "@import"] {
        assert!(
            !page.contains(bad),
            "the page references {bad:?}: it must be self-contained"
        );
    }
    // The only URL in the page is the target's, as text.
    for scheme in ["http://", "https://"] {
        for (i, _) in page.match_indices(scheme) {
            assert!(
                page[i..].starts_with(target_url),
                "an external URL at byte {i}: {:?}",
                &page[i..(i + 60).min(page.len())]
            );
        }
    }
}

#[test]
fn a_real_soak_writes_a_page_a_browser_renders() {
    let dir = TempDir::new("html");
    let target = BuiltinTarget::start(&["--fault", "reset@40"]);
    let url = target.url("/");
    let (json, hlog, html) = (
        dir.path().join("r.json"),
        dir.path().join("r.hlog"),
        dir.path().join("r.html"),
    );
    let out = soakd_timeout(
        &[
            "run",
            &url,
            "-c",
            "40",
            "-i",
            "100ms",
            "-d",
            "4s",
            "--metrics-listen",
            "off",
            "--report",
            json.to_str().unwrap(),
            "--hdr-log",
            hlog.to_str().unwrap(),
            "--html-report",
            html.to_str().unwrap(),
        ],
        60,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}\n{stderr}", out.status);
    assert!(stderr.contains("HTML report written to"), "{stderr}");

    // The timeline: a point a second, counts that add up to the totals.
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let points = report["timeline"]["points"].as_array().unwrap();
    assert!((4..=6).contains(&points.len()), "{} points", points.len());
    let sum = |k: &str| points.iter().map(|p| p[k].as_u64().unwrap()).sum::<u64>();
    assert_eq!(sum("completed"), u(&report, "/requests/completed"));
    assert_eq!(sum("sent"), u(&report, "/requests/sent"));
    let resets: u64 = points.iter().filter_map(|p| p["errors"]["reset"].as_u64()).sum();
    assert!(resets > 0, "the target resets every 40th request");
    assert_eq!(resets, u(&report, "/errors/reset"));
    // Resets close connections, so a point may end with a few reconnecting.
    let open = |p: &Value| p["open"].as_u64().unwrap();
    assert!(
        points[..points.len() - 1].iter().all(|p| open(p) > 0),
        "open during the run"
    );
    assert!(points.iter().map(open).max().unwrap() <= u(&report, "/connections/peak_open"));
    assert!(points[1]["p99"].as_f64().unwrap() > 0.0);
    assert!(report["timeline"]["started_at"].as_str().unwrap().ends_with('Z'));
    assert!(
        report["workloads"][0]["histograms"]["latency"]
            .as_str()
            .is_some_and(|h| !h.is_empty()),
        "the full-run histogram the spectrum can be drawn from"
    );

    let page = std::fs::read_to_string(&html).unwrap();
    check_page(&page, &url);
    assert!(page.contains("reset/s"), "the error kind has its line");
    assert!(
        page.contains("from the HDR interval log"),
        "the run's log drew the spectrum"
    );

    let Some(browser) = chromium() else { return };
    let png = screenshot(&browser, &html, dir.path());
    // p99's orange (#ff7f0e) is drawn in the legends and lines.
    let (colours, ink, orange) = look_at(&png, [0xff, 0x7f, 0x0e]);
    assert!(colours > 50, "{colours} distinct colours: a blank or broken page");
    assert!(ink > 0.02, "{:.3} of the pixels are not white", ink);
    assert!(orange, "no chart line was drawn");
}

#[test]
fn soakd_report_overlays_a_baseline_and_refuses_bad_paths() {
    let dir = TempDir::new("html-report");
    let target = BuiltinTarget::start(&[]);
    let url = target.url("/");
    let json = dir.path().join("r.json");
    let out = soakd(&[
        "run",
        &url,
        "-c",
        "10",
        "-i",
        "100ms",
        "-d",
        "2s",
        "--metrics-listen",
        "off",
        "--report",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let html = dir.path().join("cmp.html");
    let out = soakd(&[
        "report",
        json.to_str().unwrap(),
        "--baseline",
        json.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    check_page(&page, &url);
    assert!(page.contains("p99 (baseline)") && page.contains("stroke-dasharray"));
    assert!(page.contains("all (baseline)"), "the summary has the baseline's row");
    assert!(page.contains("from the report&#39;s latency histograms"));

    // Bad input: exit 2, naming the file and what to give instead.
    let missing = dir.path().join("missing.json");
    let out = soakd(&["report", missing.to_str().unwrap(), "--html", html.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("missing.json") && stderr.contains("--report"),
        "{stderr}"
    );
    let not_json = dir.path().join("r.hlog");
    std::fs::write(&not_json, "#[StartTime: 1]\n").unwrap();
    let out = soakd(&["report", not_json.to_str().unwrap(), "--html", html.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not JSON"));
    let out = soakd(&[
        "report",
        json.to_str().unwrap(),
        "--hdr-log",
        json.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "a JSON file is not an HDR log");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--hdr-log"));
    // --html-report to a directory that does not exist: refused before
    // the run starts (no summary: nothing ran).
    let out = soakd(&[
        "run",
        &target.url("/"),
        "-d",
        "30s",
        "--metrics-listen",
        "off",
        "--html-report",
        "/nonexistent-dir/page.html",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--html-report /nonexistent-dir/page.html"), "{stderr}");
    assert!(
        !stderr.contains("requests      sent"),
        "the run must not start: {stderr}"
    );
}

/// The gRPC section of a report whose gRPC workload had non-OK calls: the
/// page has the table (calls, the non-OK rate, the codes seen), and a
/// browser draws the non-OK codes in the page's failure red (#c00, used
/// for nothing else on a page without thresholds); the same workload with
/// every call OK draws no red, and an HTTP run's page has no section.
#[test]
fn the_grpc_table_a_browser_renders() {
    let dir = TempDir::new("html-grpc");
    let page_of = |name: &str, calls: Value, rate: f64| {
        let json = dir.path().join(format!("{name}.json"));
        let report = serde_json::json!({
            "duration_seconds": 60.0,
            "workloads": [{"name": "echo", "url": "grpc://127.0.0.1:50051",
                "http": {"requested": "2", "version": "2", "streams": 10,
                    "grpc": {"method": "soakd.test.v1.Echo/Unary", "calls": calls, "error_rate": rate}}}]
        });
        std::fs::write(&json, report.to_string()).unwrap();
        let html = dir.path().join(format!("{name}.html"));
        let out = soakd(&["report", json.to_str().unwrap(), "--html", html.to_str().unwrap()]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let page = std::fs::read_to_string(&html).unwrap();
        (html, page)
    };
    let (failing, page) = page_of(
        "failing",
        serde_json::json!({"ok": 7500, "unavailable": 2000, "deadline_exceeded": 500, "internal": 0}),
        0.25,
    );
    assert!(page.contains("<h2>gRPC calls</h2>"), "{page}");
    assert!(page.contains(
        "<td>echo</td><td>soakd.test.v1.Echo/Unary</td><td>10000</td><td>25.000%</td><td>ok 7500 · \
<span class=fail>deadline_exceeded 500</span> · <span class=fail>unavailable 2000</span></td>"
    ));
    let (healthy, page) = page_of("healthy", serde_json::json!({"ok": 10000, "unavailable": 0}), 0.0);
    assert!(page.contains("<td>0.000%</td><td>ok 10000</td>"), "{page}");
    let plain = dir.path().join("plain.json");
    std::fs::write(&plain, r#"{"duration_seconds": 1.0, "workloads": [{"name": "web"}]}"#).unwrap();
    let plain_html = dir.path().join("plain.html");
    let out = soakd(&[
        "report",
        plain.to_str().unwrap(),
        "--html",
        plain_html.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    assert!(!std::fs::read_to_string(&plain_html).unwrap().contains("gRPC"));

    let Some(browser) = chromium() else { return };
    let red = [0xcc, 0x00, 0x00];
    let shot = |html: &Path, sub: &str| {
        let d = dir.path().join(sub);
        std::fs::create_dir_all(&d).unwrap();
        screenshot(&browser, html, &d)
    };
    let (_, _, drawn) = look_at(&shot(&failing, "failing"), red);
    assert!(drawn, "the non-OK codes were not drawn in red");
    let (_, _, drawn) = look_at(&shot(&healthy, "healthy"), red);
    assert!(!drawn, "red on a page whose calls were all OK");
}
