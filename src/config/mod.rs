//! The TOML config file: declared workloads for a daemon left running.
//!
//! A file holds globals (metrics address, threads, report and log paths,
//! duration) and one or more `[[workload]]` tables, each the equivalent of a
//! `soakd run URL ...` command line. It is parsed with serde into raw
//! structs that refuse unknown keys, then every workload goes through the
//! same [`settings`] declarations and the same [`WorkloadSpec::build`] as
//! the command line, so a setting means the same thing in both places.
//! Errors name the file, the line, the key and what is expected.
//!
//! A relative path in the file (`body_file`, `cacert`, `cert`, `key`, a
//! request's `body_file`, `report`, `hdr_log`) is relative to the file's
//! own directory, as Prometheus's `rule_files` and a requests file's
//! `@body-file` are, so a file works from any working directory; flags
//! stay relative to the working directory.
//!
//! By concern: [`settings`] declares every workload setting once (flag,
//! key, kind, default, help) and [`kinds`] their kinds of value;
//! `workload` turns a `[[workload]]` table into a workload, `request` its
//! `[[workload.request]]` tables, `stages` its steps, `globals` the
//! file's globals and the flags that override them.
//!
//! ```toml
//! metrics_listen = "127.0.0.1:9469"
//! threads = 2
//!
//! [[workload]]
//! name = "api"
//! url = "http://127.0.0.1:8080/health"
//! connections = 5000
//! interval = "1s"
//! ```

mod events;
mod globals;
pub mod kinds;
mod request;
pub mod settings;
mod stages;
mod watch;
mod workload;

use std::ops::Range;
use std::path::Path;
use std::time::Duration;

use toml::Spanned;

pub use events::DisruptionArgs;
pub use globals::Overrides;
pub use watch::WatchArgs;

use crate::Error;
use crate::plan::{self, Plan};

/// Where things are in the file, for messages.
pub(crate) struct Locator<'a> {
    path: &'a Path,
    text: &'a str,
}

impl Locator<'_> {
    fn line(&self, offset: usize) -> usize {
        self.text[..offset.min(self.text.len())].matches('\n').count() + 1
    }

    /// The file's path, for a message about a key whose place is not
    /// known.
    fn file(&self) -> String {
        self.path.display().to_string()
    }

    /// "FILE:LINE" of `span`.
    fn place(&self, span: Range<usize>) -> String {
        format!("{}:{}", self.path.display(), self.line(span.start))
    }

    /// "FILE:LINE: KEY" for the key whose value is at `span`.
    fn at_span(&self, span: Range<usize>, key: &str) -> String {
        format!("{}: {key}", self.place(span))
    }

    fn at<T>(&self, v: &Spanned<T>, key: &str) -> String {
        self.at_span(v.span(), key)
    }

    fn err<T>(&self, v: &Spanned<T>, key: &str, msg: impl std::fmt::Display) -> Error {
        Error::Usage(format!("{} {msg}", self.at(v, key)))
    }

    /// A TOML or serde error with the file, the line and the line's text
    /// (serde's messages do not always name the key: "invalid type:
    /// string, expected u32").
    fn toml_error(&self, e: &toml::de::Error) -> Error {
        let (line, source) = match e.span() {
            Some(sp) => {
                let n = self.line(sp.start);
                let src = self.text.lines().nth(n - 1).unwrap_or("").trim();
                (format!(":{n}"), format!(" (in `{src}`)"))
            }
            None => (String::new(), String::new()),
        };
        Error::Usage(format!("{}{line}: {}{source}", self.path.display(), e.message()))
    }

    /// An optional duration key (`positive`: zero is refused).
    fn duration(&self, v: &Option<Spanned<String>>, key: &str, positive: bool) -> Result<Option<Duration>, Error> {
        let Some(v) = v else { return Ok(None) };
        kinds::file_duration(v.get_ref(), positive)
            .map(Some)
            .map_err(|e| self.err(v, key, e))
    }

    /// A `thresholds` list, each named by its line.
    fn thresholds(&self, list: &[Spanned<String>]) -> Result<Vec<plan::Threshold>, Error> {
        list.iter()
            .map(|t| plan::Threshold::parse(&self.at(t, "thresholds"), t.get_ref()))
            .collect()
    }
}

/// Reads and validates `path` into a plan; flags in `over` win over the
/// file's globals.
pub fn load(path: &Path, over: Overrides) -> Result<Plan, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Error::Usage(format!(
            "--config {}: cannot read it ({e}); give a readable TOML file",
            path.display()
        ))
    })?;
    parse(path, &text, over)
}

/// [`load`] on text already read (tests and `soakd check` use it too).
/// Relative paths in the text are relative to `path`'s directory.
pub fn parse(path: &Path, text: &str, over: Overrides) -> Result<Plan, Error> {
    let loc = Locator { path, text };
    let file: globals::FileGlobals = toml::from_str(text).map_err(|e| loc.toml_error(&e))?;
    if file.workload.is_empty() {
        return Err(Error::Usage(format!(
            "{}: no [[workload]] table; add at least one with a url and connections",
            path.display()
        )));
    }
    let cx = kinds::FileCx {
        base: path.parent().unwrap_or(Path::new("")),
    };
    let workloads = workload::build_all(&file.workload, &loc, &cx)?;
    globals::plan(file, workloads, over, &loc, &cx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{LoadModel, ReportDest};

    fn parse_text(text: &str) -> Result<Plan, String> {
        parse(Path::new("soak.toml"), text, Overrides::default()).map_err(|e| e.to_string())
    }

    #[test]
    fn a_full_file() {
        let plan = parse_text(
            r#"
metrics_listen = "off"
threads = 3
duration = "2h"

[[workload]]
name = "api"
url = "http://127.0.0.1:8080/health?x=1"
connections = 5000
ramp = 500
interval = "1s"
headers = { "X-Test" = "1" }
source_addrs = ["127.0.0.2", "127.0.0.3"]
max_requests_per_conn = 1000

[[workload]]
url = "http://127.0.0.1:8081/"
connections = 10
rate = 250.5
pipeline = 2
"#,
        )
        .unwrap();
        assert_eq!(plan.threads, 3);
        assert_eq!(plan.metrics_listen, None);
        assert_eq!(plan.duration, Some(Duration::from_secs(7200)));
        assert_eq!(plan.workloads.len(), 2);
        let (a, b) = (&plan.workloads[0], &plan.workloads[1]);
        assert_eq!((a.name.as_str(), a.connections, a.ramp), ("api", 5000, 500));
        assert_eq!(a.model, LoadModel::Interval(Duration::from_secs(1)));
        assert_eq!(a.conn.source_addrs.len(), 2);
        assert!(String::from_utf8_lossy(&a.target.requests[0].bytes).contains("X-Test: 1\r\n"));
        assert_eq!((b.name.as_str(), b.conn.pipeline), ("127.0.0.1:8081", 2));
        assert_eq!(b.model, LoadModel::Rate(250.5));
        assert!(crate::plan::describe(&plan).contains("total: 5010 connections, 5250.5 req/s"));
    }

    #[test]
    fn request_tables_inherit_checks_and_name_their_line() {
        let plan = parse_text(
            r#"
[[workload]]
name = "api"
url = "http://127.0.0.1:8080"
headers = { "Accept" = "application/json" }
expect_status = [200]
max_body_bytes = 100

[[workload.request]]
name = "list"
path = "/items?page=1"
weight = 8

[[workload.request]]
method = "POST"
path = "/items"
body = '{"a":1}'
expect_status = [201]
"#,
        )
        .unwrap();
        let r = &plan.workloads[0].target.requests;
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].name.as_str(), r[0].weight), ("list", 8));
        assert_eq!((r[1].name.as_str(), r[1].weight), ("POST /items", 1));
        let c0 = r[0].checks.as_deref().unwrap();
        let c1 = r[1].checks.as_deref().unwrap();
        assert_eq!((c0.status.as_deref(), c0.max_body), (Some(&[200][..]), Some(100)));
        assert_eq!((c1.status.as_deref(), c1.max_body), (Some(&[201][..]), Some(100)));
        let text = String::from_utf8_lossy(&r[1].bytes);
        assert!(text.starts_with("POST /items HTTP/1.1\r\n"), "{text}");
        assert!(
            text.contains("Accept: application/json\r\n") && text.ends_with("{\"a\":1}"),
            "{text}"
        );

        for (file, says) in [
            (
                "[[workload]]\nurl = \"http://127.0.0.1:1/\"\n[[workload.request]]\npath = \"/\"\nwieght = 2\n",
                "soak.toml:5: unknown field `wieght`",
            ),
            (
                "[[workload]]\nurl = \"http://127.0.0.1:1/\"\n\n[[workload.request]]\npath = \"/\"\nweight = 0\n",
                "soak.toml:4: workload.request 1: weight 0 is out of range",
            ),
            (
                "[[workload]]\nurl = \"http://127.0.0.1:1/api\"\n[[workload.request]]\npath = \"/\"\n",
                "the URL is the origin only",
            ),
            (
                "[[workload]]\nurl = \"http://127.0.0.1:1/\"\nmethod = \"POST\"\n[[workload.request]]\npath = \"/\"\n",
                "set it on each request of the mix",
            ),
            (
                "[[workload]]\nurl = \"http://127.0.0.1:1/\"\n[[workload.request]]\npath = \"/\"\nexpect_body_contains = \"\"\n",
                "expect_body_contains is empty",
            ),
        ] {
            let e = parse_text(file).unwrap_err();
            assert!(e.contains(says), "expected {says:?} in {e}");
        }
    }

    /// A relative path in the file is relative to the file's directory;
    /// a flag's stays as given (relative to the working directory).
    #[test]
    fn relative_paths_follow_the_file() {
        let text = "report = \"out/r.json\"\nhdr_log = \"l.hlog\"\n[[workload]]\nurl = \"http://127.0.0.1:1/\"\n";
        let plan = parse(Path::new("/srv/soak/x.toml"), text, Overrides::default()).unwrap();
        assert_eq!(plan.report, Some(ReportDest::File("/srv/soak/out/r.json".into())));
        assert_eq!(plan.hdr_log.as_deref(), Some(Path::new("/srv/soak/l.hlog")));
        let over = Overrides {
            report: Some("r.json".into()),
            ..Overrides::default()
        };
        let plan = parse(Path::new("/srv/soak/x.toml"), text, over).unwrap();
        assert_eq!(plan.report, Some(ReportDest::File("r.json".into())));
        let e = parse_text_at(
            "/srv/soak/x.toml",
            "[[workload]]\nurl = \"http://127.0.0.1:1/\"\nbody_file = \"p.json\"\n",
        );
        assert!(e.contains("/srv/soak/p.json: cannot read it"), "{e}");
        let e = parse_text_at(
            "/srv/soak/x.toml",
            "[[workload]]\nurl = \"http://127.0.0.1:1\"\n[[workload.request]]\npath = \"/\"\nbody_file = \"q.json\"\n",
        );
        assert!(e.contains("/srv/soak/q.json"), "{e}");
    }

    fn parse_text_at(path: &str, text: &str) -> String {
        parse(Path::new(path), text, Overrides::default())
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn overrides_win() {
        let text = "threads = 3\nmetrics_listen = \"off\"\n[[workload]]\nurl = \"http://127.0.0.1:1/\"\n";
        let over = Overrides {
            threads: Some(1),
            metrics_listen: Some(Some("127.0.0.1:9999".parse().unwrap())),
            ..Overrides::default()
        };
        let plan = parse(Path::new("x.toml"), text, over).unwrap();
        assert_eq!(plan.threads, 1);
        assert_eq!(plan.metrics_listen, Some("127.0.0.1:9999".parse().unwrap()));
    }

    #[test]
    fn stages_inherit_and_the_first_one_starts() {
        let plan = parse_text(
            "[[workload]]\nurl = \"http://127.0.0.1:1/\"\nconnections = 7\nrate = 10.0\nthen = \"stop\"\nstages = [\n  { connections = 100, hold = \"1m\" },\n  { interval = \"1s\", hold = \"2m\" },\n  { connections = 500, hold = \"3m\" },\n]\n",
        )
        .unwrap();
        let w = &plan.workloads[0];
        assert_eq!(
            (w.connections, w.model, w.then_stop),
            (100, LoadModel::Rate(10.0), true)
        );
        let got: Vec<(u32, LoadModel, u64)> = w
            .stages
            .iter()
            .map(|s| (s.connections, s.model, s.hold.as_secs()))
            .collect();
        let iv = LoadModel::Interval(Duration::from_secs(1));
        assert_eq!(got, [(100, LoadModel::Rate(10.0), 60), (100, iv, 120), (500, iv, 180)]);
        assert_eq!(plan.total_connections(), 500, "limits must fit the largest stage");
        assert!(crate::plan::describe(&plan).contains("stage 3: 500 connections"));
        let e =
            parse_text("[[workload]]\nurl = \"http://127.0.0.1:1/\"\nstages = [{ connections = 5 }]\n").unwrap_err();
        assert!(e.contains("soak.toml") && e.contains("hold"), "{e}");
        let e =
            parse_text("[[workload]]\nurl = \"http://127.0.0.1:1/\"\nthen = \"later\"\nstages = [{ hold = \"1s\" }]\n")
                .unwrap_err();
        assert!(e.contains("soak.toml:3") && e.contains("then"), "{e}");
    }

    /// The baseline's keys, paths relative to the file; flags win.
    #[test]
    fn a_baseline_from_the_file() {
        let text = "baseline = \"runs/base.json\"\nbaseline_hdr_log = \"runs/base.hlog\"\ntolerance = \"5%\"\nbaseline_window = \"1m\"\nabort_on_fail = \"3m\"\n[[workload]]\nurl = \"http://127.0.0.1:1/\"\n";
        let plan = parse(Path::new("/etc/soakd/soak.toml"), text, Overrides::default()).unwrap();
        let b = plan.baseline.clone().unwrap();
        assert_eq!(b.report, Path::new("/etc/soakd/runs/base.json"));
        assert_eq!(b.hdr_log.as_deref(), Some(Path::new("/etc/soakd/runs/base.hlog")));
        assert_eq!((b.tolerance, b.window), (0.05, Duration::from_secs(60)));
        assert!(
            crate::plan::describe(&plan).contains("judged every 1m (tolerance 5%), abort after a regression held 3m"),
            "{}",
            crate::plan::describe(&plan)
        );
        let over = Overrides {
            baseline: Some("other.json".into()),
            baseline_window: Some(Duration::from_secs(120)),
            ..Overrides::default()
        };
        let b = parse(Path::new("/etc/soakd/soak.toml"), text, over)
            .unwrap()
            .baseline
            .unwrap();
        assert_eq!(
            (b.report.to_str(), b.window),
            (Some("other.json"), Duration::from_secs(120))
        );
    }

    #[test]
    fn thresholds_globally_and_per_workload() {
        let plan = parse_text(
            "thresholds = [\"p99 < 50ms\"]\nthreshold_window = \"5m\"\nabort_on_fail = \"2m\"\nhdr_log_interval = \"1s\"\n[[workload]]\nname = \"api\"\nurl = \"http://127.0.0.1:1/\"\nthresholds = [\"error_rate<=0.1%\", \"open_min >= 90\"]\n",
        )
        .unwrap();
        assert_eq!(plan.thresholds.len(), 1);
        assert_eq!(plan.thresholds[0].text, "p99<50ms");
        let described = crate::plan::describe(&plan);
        assert!(
            described.contains("  thresholds error_rate<=0.1%, open_min>=90\n"),
            "{described}"
        );
        assert!(
            described.contains("thresholds over all workloads: p99<50ms (live window 5m, abort after failing 2m)"),
            "{described}"
        );
        assert_eq!(plan.threshold_window, Some(Duration::from_secs(300)));
        assert_eq!(plan.abort_on_fail, Some(Duration::from_secs(120)));
        assert_eq!(plan.hdr_log_interval, Duration::from_secs(1));
        let texts: Vec<(Option<usize>, &str)> = plan
            .all_thresholds()
            .into_iter()
            .map(|(w, t)| (w, t.text.as_str()))
            .collect();
        assert_eq!(
            texts,
            [
                (Some(0), "error_rate<=0.1%"),
                (Some(0), "open_min>=90"),
                (None, "p99<50ms")
            ]
        );
        // A flag's thresholds replace the file's run-wide ones.
        let over = Overrides {
            thresholds: Some(vec![crate::plan::Threshold::parse("--threshold", "rps>5").unwrap()]),
            ..Overrides::default()
        };
        let plan = parse(
            Path::new("x.toml"),
            "thresholds = [\"p99<5ms\"]\n[[workload]]\nurl = \"http://127.0.0.1:1/\"\n",
            over,
        )
        .unwrap();
        assert_eq!(plan.thresholds[0].text, "rps>5");
    }

    /// Every bad file names the file, the line and the key.
    #[test]
    fn errors_name_file_line_and_key() {
        let cases = [
            (
                "[[workload]]\nurl = \"http://127.0.0.1:1/\"\nconections = 5\n",
                "soak.toml:3",
                "conections",
            ),
            (
                "[[workload]]\nurl = \"http://127.0.0.1:1/\"\ninterval = \"1s\"\nrate = 5.0\n",
                "soak.toml:4",
                "rate",
            ),
            (
                "[[workload]]\nurl = \"http://127.0.0.1:1/\"\ninterval = \"soon\"\n",
                "soak.toml:3",
                "interval",
            ),
            (
                "[[workload]]\nurl = \"http://127.0.0.1:1/\"\nconnections = 0\n",
                "soak.toml:3",
                "connections",
            ),
            (
                "[[workload]]\nurl = \"http://127.0.0.1:1/\"\ninsecure = true\n",
                "soak.toml:3",
                "insecure is a TLS setting",
            ),
            (
                "[[workload]]\nurl = \"https://127.0.0.1:1/\"\ntls_min = \"1.1\"\n",
                "soak.toml:3",
                "tls_min",
            ),
            (
                "[[workload]]\nurl = \"http://127.0.0.1:1/\"\nconnections = \"many\"\n",
                "soak.toml:3",
                "connections",
            ),
            (
                "threads = 0\n[[workload]]\nurl = \"http://127.0.0.1:1/\"\n",
                "soak.toml:1",
                "threads",
            ),
            (
                "[[workload]]\nurl = \"http://127.0.0.1:1/\"\nsource_addrs = [\"nope\"]\n",
                "soak.toml:3",
                "source_addrs",
            ),
            (
                "[[workload]]\nname = \"a\"\nurl = \"http://127.0.0.1:1/\"\n[[workload]]\nname = \"a\"\nurl = \"http://127.0.0.1:2/\"\n",
                "soak.toml:5",
                "name",
            ),
            (
                "[[workload]]\nurl = \"http://127.0.0.1:1/\"\nclose = true\npipeline = 2\n",
                "soak.toml:4",
                "pipeline",
            ),
            (
                "metrics_listen = \"here\"\n[[workload]]\nurl = \"http://127.0.0.1:1/\"\n",
                "soak.toml:1",
                "metrics_listen",
            ),
            ("duration = \"5\"\n", "soak.toml", "workload"),
            (
                "[[workload]]\nurl = \"http://127.0.0.1:1/\"\nthresholds = [\"p99 < 5\"]\n",
                "soak.toml:3",
                "thresholds \"p99 < 5\": p99 is a latency",
            ),
            (
                "thresholds = [\"p42<5ms\"]\n[[workload]]\nurl = \"http://127.0.0.1:1/\"\n",
                "soak.toml:1",
                "unknown metric",
            ),
            (
                "[[workload]]\nurl = \"http://127.0.0.1:1/\"\nthresholds = [\"tls_handshake_p99<5ms\"]\n",
                "soak.toml:3",
                "not an https:// URL",
            ),
            (
                "thresholds = [\"tls_handshake_p99<5ms\"]\n[[workload]]\nurl = \"http://127.0.0.1:1/\"\n",
                "soak.toml:1",
                "no workload speaks TLS",
            ),
            (
                "abort_on_fail = \"soon\"\n[[workload]]\nurl = \"http://127.0.0.1:1/\"\n",
                "soak.toml:1",
                "abort_on_fail",
            ),
            (
                "baseline = \"b.json\"\ntolerance = \"lots\"\n[[workload]]\nurl = \"http://127.0.0.1:1/\"\n",
                "soak.toml:2",
                "invalid tolerance",
            ),
            (
                "baseline_window = \"1m\"\n[[workload]]\nurl = \"http://127.0.0.1:1/\"\n",
                "baseline_window",
                "no --baseline REPORT",
            ),
        ];
        for (text, at, key) in cases {
            let e = parse_text(text).unwrap_err();
            assert!(e.contains(at) && e.contains(key), "{text:?}: {e}");
        }
    }
}
