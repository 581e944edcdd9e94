//! The files a run leaves: written as soon as the run is over (not after
//! `--metrics-linger`), whole or not at all, and somewhere named when they
//! cannot go where asked (issues 17 and 18). Real runs of the binary
//! against the built-in target; the full disk is a real 12 KiB tmpfs.

mod util;

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use util::{BuiltinTarget, TempDir, free_port, pid_alive, signal, soakd_bin, wait_output};

/// Starts `soakd ARGS...` with stderr piped; its lines arrive on the
/// receiver as they are printed (a thread reads them).
fn spawn_reading_stderr(args: &[&str], env: &[(&str, &Path)]) -> (Child, mpsc::Receiver<String>) {
    let mut cmd = Command::new(soakd_bin());
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("start soakd");
    let stderr = child.stderr.take().expect("piped stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

/// Waits (at most `secs`) for a stderr line containing `needle`, keeping
/// every line seen in `seen`; false when stderr closed first (soakd
/// exited), panicking with the lines when the time runs out.
fn wait_for_line(rx: &mpsc::Receiver<String>, needle: &str, secs: u64, seen: &mut Vec<String>) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let hit = line.contains(needle);
                seen.push(line);
                if hit {
                    return true;
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => return false,
            Err(mpsc::RecvTimeoutError::Timeout) => panic!(
                "no stderr line with {needle:?} within {secs} s; stderr so far:\n{}",
                seen.join("\n")
            ),
        }
    }
}

/// Waits (at most `secs`) for `child` to exit; its exit code.
fn wait_exit(child: &mut Child, secs: u64) -> Option<i32> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status.code();
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("soakd still running {secs} s after the signal");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Issue 17: with `--metrics-linger 30s` the report (and the HTML page) is
/// on disk within 1 s of "run over", while soakd still lingers; a SIGTERM
/// during the linger ends it at once, leaves both files whole, and the
/// exit code is the run's verdict (0: the signal only ends the linger).
#[test]
fn the_report_is_written_before_the_linger_and_survives_a_signal_in_it() {
    let target = BuiltinTarget::start(&[]);
    let dir = TempDir::new("report-linger");
    let report = dir.path().join("r.json");
    let html = dir.path().join("r.html");
    let url = target.url("/");
    // The metrics port was free a moment ago; another process may take it
    // first (then soakd exits 2 naming it): try another, three times.
    let (mut child, seen) = (0..3)
        .find_map(|_| {
            let metrics = format!("127.0.0.1:{}", free_port());
            let args = [
                "run",
                url.as_str(),
                "-c",
                "5",
                "-d",
                "1s",
                "--metrics-listen",
                metrics.as_str(),
                "--metrics-linger",
                "30s",
                "--report",
                report.to_str().unwrap(),
                "--html-report",
                html.to_str().unwrap(),
            ];
            let (mut child, rx) = spawn_reading_stderr(&args, &[]);
            let mut seen = Vec::new();
            if wait_for_line(&rx, "run over", 30, &mut seen) {
                return Some((child, seen));
            }
            let status = child.wait().expect("wait for soakd");
            let text = seen.join("\n");
            assert!(
                text.contains(&metrics) && status.code() == Some(2),
                "soakd exited ({status}) before \"run over\":\n{text}"
            );
            None
        })
        .expect("three metrics ports taken in a row");
    let over = Instant::now();
    // Written before the line is printed; allow the 1 s the issue asks.
    while !(report.exists() && html.exists()) {
        assert!(
            over.elapsed() < Duration::from_secs(1),
            "no report and page 1 s after \"run over\" (report {}, page {}); stderr:\n{}",
            report.exists(),
            html.exists(),
            seen.join("\n")
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(pid_alive(child.id()), "soakd should still linger");
    let before = std::fs::read(&report).unwrap();
    let r = soakd::report::read(&report, "--report").expect("the report parses while soakd lingers");
    assert!(r.all.requests.completed > 0, "the run completed requests");
    assert!(
        !dir.path()
            .read_dir()
            .unwrap()
            .any(|e| e.unwrap().file_name().to_string_lossy().ends_with(".tmp")),
        "no temporary file is left beside the report"
    );

    signal(child.id(), "TERM");
    let code = wait_exit(&mut child, 10);
    assert_eq!(code, Some(0), "the signal ends the linger; the verdict is the run's");
    assert_eq!(std::fs::read(&report).unwrap(), before, "the report is unchanged");
    soakd::report::read(&report, "--report").expect("the report is whole");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.trim_end().ends_with("</html>"), "the HTML page is whole");
}

/// Root may mount a tmpfs; anyone else skips, unless
/// `SOAKD_REQUIRE_ROOT=1` says this run must test it.
fn can_mount() -> bool {
    if util::is_root() {
        return true;
    }
    assert!(
        std::env::var("SOAKD_REQUIRE_ROOT").as_deref() != Ok("1"),
        "SOAKD_REQUIRE_ROOT=1 but not root: the full-disk test needs root to mount a tmpfs"
    );
    eprintln!("SKIPPED: the full-disk test mounts a tmpfs and needs root (set SOAKD_REQUIRE_ROOT=1 to require it)");
    false
}

/// A tmpfs of 12 KiB mounted at a fresh directory, unmounted on drop.
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(at: PathBuf) -> SmallDisk {
        std::fs::create_dir(&at).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=12k", "tmpfs"])
            .arg(&at)
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "mount -t tmpfs -o size=12k failed as root: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        SmallDisk(at)
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Issue 18: the report cannot be written on a full disk. The old report
/// there stays as it was (no truncated file that looks like a report, no
/// temporary file), the report goes to `$TMPDIR` under a name printed on
/// stderr, and the exit code is 1 (the file asked for is missing). With
/// `$TMPDIR` unusable too, the report is printed on stderr.
#[test]
fn a_full_disk_keeps_the_old_report_and_the_report_goes_elsewhere() {
    if !can_mount() {
        return;
    }
    let target = BuiltinTarget::start(&[]);
    let dir = TempDir::new("report-full-disk");
    let disk = SmallDisk::mount(dir.path().join("disk"));
    let report = disk.0.join("r.json");
    let old = b"{\"the old report\": true}\n";
    std::fs::write(&report, old).unwrap();
    // One of the three pages left: far less than a report (tens of KiB).
    std::fs::write(disk.0.join("filler"), vec![b'x'; 4096]).unwrap();
    let spare = dir.path().join("spare");
    std::fs::create_dir(&spare).unwrap();
    let url = target.url("/");
    let args = [
        "run",
        url.as_str(),
        "-c",
        "5",
        "-d",
        "1s",
        "--metrics-listen",
        "off",
        "--report",
        report.to_str().unwrap(),
    ];
    let run = |tmpdir: &Path| {
        let mut cmd = Command::new(soakd_bin());
        cmd.args(args)
            .env("TMPDIR", tmpdir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let out = wait_output(cmd.spawn().expect("start soakd"), 60);
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };

    let (code, stderr) = run(&spare);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot write the report to {}", report.display()))
            && stderr.contains("No space left on device"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&report).unwrap(), old, "the old report is left as it was");
    let left: Vec<String> = disk
        .0
        .read_dir()
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !left.iter().any(|n| n.ends_with(".tmp")),
        "a temporary file is left: {left:?}"
    );
    let fallback: Vec<PathBuf> = spare.read_dir().unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(fallback.len(), 1, "{fallback:?}");
    assert!(
        stderr.contains(&format!("the report is in {} instead", fallback[0].display())),
        "the fallback is named on stderr: {stderr}"
    );
    let r = soakd::report::read(&fallback[0], "the fallback").expect("the fallback report is whole");
    assert!(r.all.requests.completed > 0);

    // Nothing writable but stderr.
    let (code, stderr) = run(&dir.path().join("no-such-dir"));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("the report was printed on stderr instead"), "{stderr}");
    let json = stderr
        .split_once("soakd: the report follows, as nothing else could take it:\n")
        .map(|(_, rest)| rest)
        .expect("the report on stderr");
    let end = json.find("\n}\n").expect("the JSON's end") + 2;
    let v: serde_json::Value = serde_json::from_str(&json[..end]).expect("the JSON on stderr parses");
    assert!(v["duration_seconds"].as_f64().is_some());
    assert_eq!(std::fs::read(&report).unwrap(), old);
    drop(disk);
}
