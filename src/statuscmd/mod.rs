//! `soakd status`: a one-shot summary of a running soakd, read from its
//! Prometheus endpoint.
//!
//! The endpoint is scraped twice, `gap` apart. Gauges (connection levels,
//! window latency quantiles) come from the second scrape; rates are counter
//! deltas divided by the time that actually passed between the two scrapes.
//! Counter resets (soakd restarted in between) count the new value as the
//! delta, as Prometheus' `rate()` does.
//!
//! The pieces: [`crate::netio::fetch`] GETs the endpoint over the crate's
//! own HTTP framer, [`exposition`] parses the text format (and is public, as the one
//! exposition parser the integration tests use too), and this module turns
//! two parsed scrapes into the summary.

pub use crate::wire::exposition;

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::Error;
use crate::netio::fetch::{FetchUrl, Fetcher};
use exposition::Sample;

/// How long one scrape of the endpoint may take.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);
/// A metrics body larger than this is refused: a runaway or wrong endpoint.
const MAX_BODY: usize = 64 << 20;

/// Quantile label values shown on the latency line, with their display names.
const SHOWN_QUANTILES: [(&str, &str); 2] = [("0.5", "p50"), ("0.99", "p99")];
/// Response code classes, in display order.
const CODES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];
/// Metrics whose `target` label names a workload shown in the summary.
const TARGET_METRICS: [&str; 6] = [
    "soakd_connections",
    "soakd_connections_desired",
    "soakd_requests_sent_total",
    "soakd_responses_total",
    "soakd_errors_total",
    "soakd_request_duration_window_seconds",
];

/// Scrapes `url` twice, `gap` apart, and returns the printable summary.
///
/// `url` must be `http://host[:port]/path`. Any failure to get a soakd
/// exposition from it (bad URL, refused, timeout, non-200 status, a body that
/// is not Prometheus text or has no `soakd_` metrics) is an
/// [`Error::Usage`] naming the URL and the `--metrics` flag.
pub fn status(url: &str, gap: Duration) -> Result<String, Error> {
    let parsed = FetchUrl::parse(url, false).map_err(|cause| cannot_read(url, &cause))?;
    let fetcher = Fetcher::new(parsed, SCRAPE_TIMEOUT, MAX_BODY);
    let get = || fetcher.get_text("text/plain").map_err(|e| cannot_read(url, &e.detail));

    let start1 = Instant::now();
    let before = get()?;
    let mid1 = start1 + (Instant::now() - start1) / 2;

    let wake = start1 + gap;
    let now = Instant::now();
    if wake > now {
        std::thread::sleep(wake - now);
    }

    let start2 = Instant::now();
    let after = get()?;
    let mid2 = start2 + (Instant::now() - start2) / 2;

    // The midpoint of each request is the best guess of when the server took
    // its snapshot; never divide by zero even if the clock did not move.
    let secs = (mid2 - mid1).as_secs_f64().max(1e-6);
    summarize(&before, &after, secs).map_err(|e| match e {
        Error::Usage(cause) => cannot_read(url, &cause),
        other => other,
    })
}

/// The error for any failure to read a soakd exposition from `url`.
fn cannot_read(url: &str, cause: &str) -> Error {
    Error::Usage(format!(
        "cannot read soakd metrics at {url}: {cause}; is soakd running with --metrics-listen? \
         (pass the address with --metrics URL)"
    ))
}

/// Builds the per-target summary from two expositions taken `secs` apart.
///
/// Errors: [`Error::Usage`] with a bare cause (no URL) when either text is not
/// Prometheus text or the second has no `soakd_` metrics; [`Error::Internal`]
/// when `secs` is not a positive, finite number.
pub(crate) fn summarize(before: &str, after: &str, secs: f64) -> Result<String, Error> {
    if !(secs.is_finite() && secs > 0.0) {
        return Err(Error::Internal(format!(
            "scrape interval must be positive, got {secs} s"
        )));
    }
    let before = Snapshot::parse(before)?;
    let after = Snapshot::parse(after)?;
    if !after.samples.iter().any(|s| s.name.starts_with("soakd_")) {
        return Err(Error::Usage(
            "the endpoint serves no soakd_ metrics, so it is not a soakd metrics endpoint".to_string(),
        ));
    }

    let targets: BTreeSet<&str> = after
        .samples
        .iter()
        .filter(|s| TARGET_METRICS.contains(&s.name.as_str()))
        .filter_map(|s| s.label("target"))
        .collect();
    if targets.is_empty() {
        return Ok("soakd is running but reports no targets\n".to_string());
    }

    let mut out = String::new();
    for (i, target) in targets.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        summarize_target(&mut out, target, &before, &after, secs);
    }
    Ok(out)
}

/// Appends the summary block of one target to `out`.
fn summarize_target(out: &mut String, target: &str, before: &Snapshot, after: &Snapshot, secs: f64) {
    let rate = |name: &str, label: Option<(&str, &str)>| counter_delta(before, after, name, target, label) / secs;

    // Writing to a String cannot fail.
    let _ = writeln!(out, "target {target}");

    let conn = |state: &str| fmt_count(after.value("soakd_connections", target, Some(("state", state))));
    let _ = writeln!(
        out,
        "  {:<13}open {} / desired {}   connecting {}   backoff {}",
        "connections",
        conn("open"),
        fmt_count(after.value("soakd_connections_desired", target, None)),
        conn("connecting"),
        conn("backoff"),
    );

    let mut codes: Vec<String> = CODES.iter().map(|c| (*c).to_string()).collect();
    for extra in label_values(before, after, "soakd_responses_total", target, "code") {
        if !codes.contains(&extra) {
            codes.push(extra);
        }
    }
    let code_rates: Vec<(String, f64)> = codes
        .into_iter()
        .map(|code| {
            let r = rate("soakd_responses_total", Some(("code", code.as_str())));
            (code, r)
        })
        .collect();
    let completed: f64 = code_rates.iter().map(|(_, r)| r).sum();
    let _ = writeln!(
        out,
        "  {:<13}{:.1} sent   {:.1} completed",
        "requests/s",
        rate("soakd_requests_sent_total", None),
        completed,
    );

    let responses: Vec<String> = code_rates
        .iter()
        .map(|(code, r)| format!("{code} {}", fmt_rate(*r)))
        .collect();
    let _ = writeln!(out, "  {:<13}{}", "responses/s", responses.join("  "));

    let mut kinds: Vec<String> = crate::stats::ErrorKind::ALL
        .iter()
        .map(|k| k.name().to_string())
        .collect();
    for extra in label_values(before, after, "soakd_errors_total", target, "kind") {
        if !kinds.contains(&extra) {
            kinds.push(extra);
        }
    }
    let errors: Vec<String> = kinds
        .iter()
        .filter_map(|kind| {
            let r = rate("soakd_errors_total", Some(("kind", kind.as_str())));
            (r > 0.0).then(|| format!("{kind} {r:.1}"))
        })
        .collect();
    let errors = if errors.is_empty() {
        "none".to_string()
    } else {
        errors.join("  ")
    };
    let _ = writeln!(out, "  {:<13}{}", "errors/s", errors);

    let latency: Vec<String> = SHOWN_QUANTILES
        .iter()
        .map(|(q, shown)| {
            let v = after.value("soakd_request_duration_window_seconds", target, Some(("quantile", q)));
            format!("{shown} {}", fmt_latency(v))
        })
        .collect();
    let _ = writeln!(out, "  {:<13}{}   (last 10 s)", "latency", latency.join("   "));
}

/// The increase of a counter series between the two snapshots; a series
/// missing before counts from 0, a decrease is a reset (the new value counts).
fn counter_delta(before: &Snapshot, after: &Snapshot, name: &str, target: &str, label: Option<(&str, &str)>) -> f64 {
    let Some(now) = after.value(name, target, label) else {
        return 0.0;
    };
    let then = before.value(name, target, label).unwrap_or(0.0);
    let delta = if now >= then { now - then } else { now };
    if delta.is_finite() { delta } else { 0.0 }
}

/// Values of `label` on series of `name` for `target`, from both snapshots, sorted.
fn label_values(before: &Snapshot, after: &Snapshot, name: &str, target: &str, label: &str) -> BTreeSet<String> {
    [before, after]
        .iter()
        .flat_map(|snap| snap.samples.iter())
        .filter(|s| s.name == name && s.label("target") == Some(target))
        .filter_map(|s| s.label(label).map(str::to_string))
        .collect()
}

/// A gauge as a whole number, `-` when absent or not a number.
fn fmt_count(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:.0}"),
        _ => "-".to_string(),
    }
}

/// A rate with one decimal, or a bare `0` when nothing happened.
fn fmt_rate(r: f64) -> String {
    if r == 0.0 { "0".to_string() } else { format!("{r:.1}") }
}

/// A latency in seconds shown in milliseconds with three significant digits
/// or so; `-` when there were no samples (NaN) or the series is absent.
fn fmt_latency(v: Option<f64>) -> String {
    match v {
        Some(s) if s.is_finite() => {
            let ms = s * 1000.0;
            if ms < 10.0 {
                format!("{ms:.2} ms")
            } else if ms < 100.0 {
                format!("{ms:.1} ms")
            } else {
                format!("{ms:.0} ms")
            }
        }
        _ => "-".to_string(),
    }
}

/// One parsed exposition.
#[derive(Debug)]
struct Snapshot {
    samples: Vec<Sample>,
}

impl Snapshot {
    /// Parses exposition text; a parse failure is a [`Error::Usage`] cause.
    fn parse(text: &str) -> Result<Snapshot, Error> {
        let samples =
            exposition::parse(text).map_err(|e| Error::Usage(format!("not Prometheus text exposition ({e})")))?;
        Ok(Snapshot { samples })
    }

    /// The value of series `name` for `target` (and `label`, if given),
    /// summed over any other labels; `None` when no such series exists.
    fn value(&self, name: &str, target: &str, label: Option<(&str, &str)>) -> Option<f64> {
        let mut found = None;
        for s in &self.samples {
            if s.name != name || s.label("target") != Some(target) {
                continue;
            }
            if let Some((k, v)) = label
                && s.label(k) != Some(v)
            {
                continue;
            }
            found = Some(found.unwrap_or(0.0) + s.value);
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netio::testing::serve;

    /// An exposition for one target with the given counters.
    fn exposition(target: &str, sent: u64, ok: u64, e5xx: u64, refused: u64, reset: u64, lat: (&str, &str)) -> String {
        let (p50, p99) = lat;
        format!(
            "# HELP soakd_connections Connection slots by state.\n\
             # TYPE soakd_connections gauge\n\
             soakd_connections{{target=\"{target}\",state=\"open\"}} 1000\n\
             soakd_connections{{target=\"{target}\",state=\"connecting\"}} 2\n\
             soakd_connections{{target=\"{target}\",state=\"backoff\"}} 3\n\
             soakd_connections_desired{{target=\"{target}\"}} 1005\n\
             soakd_requests_sent_total{{target=\"{target}\"}} {sent}\n\
             soakd_responses_total{{target=\"{target}\",code=\"1xx\"}} 0\n\
             soakd_responses_total{{target=\"{target}\",code=\"2xx\"}} {ok}\n\
             soakd_responses_total{{target=\"{target}\",code=\"3xx\"}} 0\n\
             soakd_responses_total{{target=\"{target}\",code=\"4xx\"}} 0\n\
             soakd_responses_total{{target=\"{target}\",code=\"5xx\"}} {e5xx}\n\
             soakd_errors_total{{target=\"{target}\",kind=\"connect_refused\"}} {refused}\n\
             soakd_errors_total{{target=\"{target}\",kind=\"reset\"}} {reset}\n\
             soakd_errors_total{{target=\"{target}\",kind=\"timeout\"}} 4\n\
             soakd_request_duration_window_seconds{{target=\"{target}\",quantile=\"0.5\"}} {p50}\n\
             soakd_request_duration_window_seconds{{target=\"{target}\",quantile=\"0.9\"}} {p99}\n\
             soakd_request_duration_window_seconds{{target=\"{target}\",quantile=\"0.99\"}} {p99}\n\
             soakd_request_duration_window_seconds{{target=\"{target}\",quantile=\"0.999\"}} {p99}\n\
             soakd_connections_opened_total{{target=\"{target}\"}} 1000\n\
             soakd_build_info{{version=\"0.1.0\"}} 1\n"
        )
    }

    #[test]
    fn summary_of_one_target() {
        let before = exposition("127.0.0.1:8080", 1000, 900, 10, 5, 0, ("0.0002", "0.0005"));
        let after = exposition("127.0.0.1:8080", 3000, 2890, 12, 11, 2, ("0.00021", "0.00053"));
        let out = summarize(&before, &after, 2.0).unwrap();
        let want = "target 127.0.0.1:8080\n\
                    \x20 connections  open 1000 / desired 1005   connecting 2   backoff 3\n\
                    \x20 requests/s   1000.0 sent   996.0 completed\n\
                    \x20 responses/s  1xx 0  2xx 995.0  3xx 0  4xx 0  5xx 1.0\n\
                    \x20 errors/s     connect_refused 3.0  reset 1.0\n\
                    \x20 latency      p50 0.21 ms   p99 0.53 ms   (last 10 s)\n";
        assert_eq!(out, want);
    }

    #[test]
    fn summary_without_errors_or_samples() {
        let before = exposition("t", 0, 0, 0, 0, 0, ("NaN", "NaN"));
        let after = exposition("t", 0, 0, 0, 0, 0, ("NaN", "NaN"));
        let out = summarize(&before, &after, 1.0).unwrap();
        assert!(out.contains("  requests/s   0.0 sent   0.0 completed\n"), "{out}");
        assert!(
            out.contains("  responses/s  1xx 0  2xx 0  3xx 0  4xx 0  5xx 0\n"),
            "{out}"
        );
        assert!(out.contains("  errors/s     none\n"), "{out}");
        assert!(out.contains("  latency      p50 -   p99 -   (last 10 s)\n"), "{out}");
    }

    #[test]
    fn targets_are_sorted_and_escaped_names_survive() {
        let names = ["b.example:80", "a \"quoted\" name", "127.0.0.1:9000"];
        let escaped = |n: &str| n.replace('\\', "\\\\").replace('"', "\\\"");
        let text: String = names
            .iter()
            .map(|n| exposition(&escaped(n), 1, 1, 0, 0, 0, ("0.001", "0.002")))
            .collect();
        let out = summarize(&text, &text, 1.0).unwrap();
        let headers: Vec<&str> = out.lines().filter(|l| l.starts_with("target ")).collect();
        assert_eq!(
            headers,
            vec![
                "target 127.0.0.1:9000",
                "target a \"quoted\" name",
                "target b.example:80"
            ]
        );
        assert_eq!(
            out.matches("\n\ntarget ").count(),
            2,
            "blank line between targets:\n{out}"
        );
        assert!(out.contains("p50 1.00 ms   p99 2.00 ms"), "{out}");
    }

    #[test]
    fn latency_formatting() {
        assert_eq!(fmt_latency(Some(0.000_213)), "0.21 ms");
        assert_eq!(fmt_latency(Some(0.012_34)), "12.3 ms");
        assert_eq!(fmt_latency(Some(1.5)), "1500 ms");
        assert_eq!(fmt_latency(Some(f64::NAN)), "-");
        assert_eq!(fmt_latency(None), "-");
    }

    #[test]
    fn counter_reset_and_new_series() {
        // soakd restarted between scrapes: the new value is the delta.
        let before = exposition("t", 5000, 5000, 0, 0, 0, ("0.001", "0.001"));
        let after = exposition("t", 40, 30, 0, 0, 0, ("0.001", "0.001"))
            + "soakd_errors_total{target=\"t\",kind=\"future_kind\"} 2\n";
        let out = summarize(&before, &after, 1.0).unwrap();
        assert!(out.contains("  requests/s   40.0 sent   30.0 completed\n"), "{out}");
        assert!(out.contains("  errors/s     future_kind 2.0\n"), "{out}");
    }

    #[test]
    fn missing_series_print_dashes() {
        let text = "soakd_requests_sent_total{target=\"t\"} 1\n";
        let out = summarize(text, text, 1.0).unwrap();
        assert!(out.contains("open - / desired -   connecting -   backoff -"), "{out}");
        assert!(out.contains("p50 -   p99 -"), "{out}");
    }

    #[test]
    fn not_a_soakd() {
        let text = "process_open_fds 10\nup 1\n";
        let err = summarize(text, text, 1.0).unwrap_err();
        assert!(matches!(&err, Error::Usage(m) if m.contains("not a soakd")), "{err}");
        let err = summarize("", "", 1.0).unwrap_err();
        assert!(matches!(&err, Error::Usage(m) if m.contains("not a soakd")), "{err}");
        let err = summarize("<html>", "<html>", 1.0).unwrap_err();
        assert!(
            matches!(&err, Error::Usage(m) if m.contains("not Prometheus text")),
            "{err}"
        );
        let out = summarize(
            "soakd_build_info{version=\"1\"} 1\n",
            "soakd_build_info{version=\"1\"} 1\n",
            1.0,
        )
        .unwrap();
        assert!(out.contains("no targets"), "{out}");
        assert!(matches!(summarize("", "", 0.0), Err(Error::Internal(_))));
    }

    fn ok_length(body: &str) -> Vec<u8> {
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    }

    fn ok_chunked(body: &str) -> Vec<u8> {
        let (a, b) = body.split_at(body.len() / 2);
        format!(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
            a.len(),
            b.len()
        )
        .into_bytes()
    }

    #[test]
    fn status_scrapes_twice() {
        let before = exposition("127.0.0.1:8080", 0, 0, 0, 0, 0, ("NaN", "NaN"));
        let after = exposition("127.0.0.1:8080", 100, 100, 0, 0, 0, ("0.0002", "0.0005"));
        let (url, server) = serve(vec![ok_length(&before), ok_chunked(&after)]);
        let started = Instant::now();
        let out = status(&url, Duration::from_millis(200)).unwrap();
        assert!(started.elapsed() >= Duration::from_millis(200));
        let requests = server.join().unwrap();
        assert_eq!(requests.len(), 2);
        for req in &requests {
            assert!(req.starts_with("GET /metrics HTTP/1.1\r\n"), "{req}");
            assert!(req.contains(&format!("Host: {}\r\n", &url[7..url.len() - 8])), "{req}");
            assert!(req.contains("Connection: close\r\n"), "{req}");
        }
        assert!(out.starts_with("target 127.0.0.1:8080\n"), "{out}");
        assert!(out.contains("p50 0.20 ms   p99 0.50 ms"), "{out}");
        // 100 requests in about 0.2 s (the exact figure depends on scheduling).
        let sent: f64 = out
            .lines()
            .find_map(|l| l.strip_prefix("  requests/s   "))
            .and_then(|l| l.split(' ').next())
            .unwrap()
            .parse()
            .unwrap();
        assert!(sent > 50.0 && sent <= 1000.0, "{out}");
    }

    #[test]
    fn status_close_delimited_body() {
        let body = exposition("t", 1, 1, 0, 0, 0, ("0.001", "0.001"));
        let resp = format!("HTTP/1.0 200 OK\r\n\r\n{body}").into_bytes();
        let (url, server) = serve(vec![resp.clone(), resp]);
        let out = status(&url, Duration::ZERO).unwrap();
        server.join().unwrap();
        assert!(out.contains("errors/s     none"), "{out}");
    }

    #[test]
    fn status_rejects_wrong_endpoints() {
        // A failed fetch ends the command at once; a body is only judged
        // after both scrapes, so those cases serve it twice.
        let cases: Vec<(Vec<u8>, usize, &str)> = vec![
            (
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_vec(),
                1,
                "HTTP status 404",
            ),
            (ok_length("<!doctype html><p>hello</p>"), 2, "not Prometheus text"),
            (ok_length("go_goroutines 7\n"), 2, "not a soakd"),
        ];
        for (response, times, want) in cases {
            let (url, server) = serve(vec![response; times]);
            let err = status(&url, Duration::ZERO).unwrap_err();
            server.join().unwrap();
            let Error::Usage(msg) = &err else {
                panic!("expected a usage error, got {err:?}");
            };
            assert!(msg.contains(&url), "{msg}");
            assert!(msg.contains(want), "{msg}");
            assert!(
                msg.contains("--metrics-listen") && msg.contains("--metrics URL"),
                "{msg}"
            );
        }
    }

    #[test]
    fn status_unreachable() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}/metrics");
        let err = status(&url, Duration::ZERO).unwrap_err();
        assert_eq!(err.to_string().matches(&url).count(), 1, "{err}");
        assert!(
            matches!(&err, Error::Usage(m) if m.contains("cannot read soakd metrics at")),
            "{err}"
        );
    }

    #[test]
    fn status_bad_url() {
        let err = status("ftp://127.0.0.1/metrics", Duration::ZERO).unwrap_err();
        assert!(matches!(&err, Error::Usage(m) if m.contains("only http://")), "{err}");
    }
}
