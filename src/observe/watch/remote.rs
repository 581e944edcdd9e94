//! The server's figures read over HTTP: a scraped exposition
//! (`--target-metrics`) and a Prometheus server's answers (`--prometheus`).
//!
//! Each read is one blocking GET on the watch's own thread ([`Fetcher`]:
//! a deadline, a body cap). A scrape keeps only what its watches select
//! (the exposition is scanned, [`crate::wire::exposition::scan`]), turns a
//! counter into a rate between two scrapes (a counter that went down was
//! reset: the server restarted, and the new value is the increase, as
//! Prometheus' `rate()` takes it), and notices a restart by the
//! exposition's `process_start_time_seconds` too. A Prometheus answer is
//! the query's instant vector: each series is kept under its labels; a
//! series replaced by another of the same query (a pod replaced) is a
//! restart.

use std::collections::HashMap;
use std::time::Instant;

use serde::Deserialize;

use super::{Reading, Restart, Value};
use crate::netio::fetch::{FetchError, Fetcher};
use crate::plan::watch::{Endpoint, Selector, WatchExpr, WatchSpec, read_token};
use crate::wire::exposition::{Sample, scan};

/// The metric a restart shows in (Prometheus' client libraries all
/// export it).
const START_TIME: &str = "process_start_time_seconds";

/// How a read failed, for the counters (`reason` label) and the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ReadError {
    /// The `reason` label.
    pub(super) reason: &'static str,
    /// In words, for the log.
    pub(super) detail: String,
}

impl From<FetchError> for ReadError {
    fn from(e: FetchError) -> ReadError {
        ReadError {
            reason: e.kind.name(),
            detail: e.detail,
        }
    }
}

/// A fetcher for `e` (its TLS client, headers), with the watch's limits.
pub(super) fn fetcher(e: &Endpoint, timeout: std::time::Duration) -> Fetcher {
    let mut f = Fetcher::new(e.url.clone(), timeout, crate::plan::defaults::WATCH_MAX_BODY);
    f.tls = e.tls.as_ref().map(|t| (t.config.clone(), t.server_name.clone()));
    f.headers = e.headers.clone();
    f
}

/// `fetcher` for one request to `e`: with the `Authorization` header of
/// its bearer file, read now (tokens rotate).
fn for_request(e: &Endpoint, fetcher: &Fetcher) -> Result<Fetcher, ReadError> {
    let mut f = fetcher.clone();
    if let Some(path) = &e.bearer_file {
        let token = read_token(path).map_err(|why| ReadError {
            reason: "token",
            detail: format!("--target-metrics-bearer-file {}: {why}", path.display()),
        })?;
        f.headers.push(("Authorization".into(), format!("Bearer {token}")));
    }
    Ok(f)
}

/// A counter's last value and when it was read, for its rate.
#[derive(Clone, Copy, Debug)]
struct Last {
    value: f64,
    at: Instant,
}

/// A rate watch's series: the watch and the labels.
type SeriesKey = (usize, Vec<(String, String)>);

/// One `--target-metrics` endpoint.
pub(super) struct Scrape {
    endpoint: Endpoint,
    fetcher: Fetcher,
    /// The body's room, kept from scrape to scrape.
    body: Vec<u8>,
    /// `process_start_time_seconds` as last read.
    started: Option<f64>,
    /// Each rate watch's series' last value, and the scrape it was read
    /// in: a series gone from the exposition is forgotten, so the map is
    /// the exposition's size, not its history's.
    counters: HashMap<SeriesKey, (Last, u64)>,
    /// Scrapes so far.
    scrapes: u64,
}

impl Scrape {
    pub(super) fn new(endpoint: &Endpoint, timeout: std::time::Duration) -> Scrape {
        Scrape {
            fetcher: fetcher(endpoint, timeout),
            endpoint: endpoint.clone(),
            body: Vec::new(),
            started: None,
            counters: HashMap::new(),
            scrapes: 0,
        }
    }

    /// Scrapes once: the values of `watches` (indices `ids` in the plan's
    /// list) into `out`, and whether the server restarted since the last
    /// scrape. Returns how many samples matched each watch (the preflight
    /// says which matched nothing).
    pub(super) fn read(
        &mut self,
        watches: &[(usize, &WatchSpec)],
        out: &mut Reading,
        source: usize,
    ) -> Result<Vec<usize>, ReadError> {
        let got = for_request(&self.endpoint, &self.fetcher)?.get_into("text/plain;version=0.0.4", &mut self.body);
        // A runaway answer's room is not kept.
        if self.body.capacity() > 4 << 20 && got.is_err() {
            self.body = Vec::new();
        }
        got?;
        let text = std::str::from_utf8(&self.body).map_err(|_| ReadError {
            reason: "malformed",
            detail: "the exposition is not UTF-8 text".into(),
        })?;
        let now = Instant::now();
        self.scrapes += 1;
        let scrape = self.scrapes;
        let mut matched = vec![0usize; watches.len()];
        let mut started = None;
        let mut reset = false;
        let want = |name: &str| {
            name == START_TIME
                || watches
                    .iter()
                    .any(|(_, w)| selector(w).is_some_and(|s| s.metric == name))
        };
        let mut each = |s: Sample| {
            if s.name == START_TIME && s.labels.is_empty() {
                started = Some(s.value);
            }
            for (k, (id, w)) in watches.iter().enumerate() {
                let Some(sel) = selector(w) else { continue };
                if !sel.matches(&s.name, &s.labels) || !s.value.is_finite() {
                    continue;
                }
                matched[k] += 1;
                let value = match w.expr {
                    WatchExpr::Rate(_) => {
                        let key = (*id, s.labels.clone());
                        let fresh = Last {
                            value: s.value,
                            at: now,
                        };
                        let Some((last, _)) = self.counters.insert(key, (fresh, scrape)) else {
                            continue;
                        };
                        let secs = now.duration_since(last.at).as_secs_f64();
                        if secs <= 0.0 {
                            continue;
                        }
                        if s.value < last.value {
                            reset = true;
                            s.value / secs
                        } else {
                            (s.value - last.value) / secs
                        }
                    }
                    _ => s.value,
                };
                out.values.push(Value {
                    watch: *id,
                    source,
                    labels: s.labels.clone(),
                    value,
                });
            }
        };
        scan(text, want, &mut each).map_err(|e| ReadError {
            reason: "malformed",
            detail: format!("not a Prometheus exposition ({e})"),
        })?;
        if let (Some(before), Some(now)) = (self.started, started)
            && (now - before).abs() > 0.5
        {
            out.restarts.push(Restart {
                source,
                watch: None,
                why: format!("{START_TIME} went from {before} to {now}"),
            });
        } else if reset {
            out.restarts.push(Restart {
                source,
                watch: None,
                why: "a counter went down (reset)".into(),
            });
        }
        if started.is_some() {
            self.started = started;
        }
        self.counters.retain(|_, (_, seen)| *seen == scrape);
        Ok(matched)
    }
}

/// The selector a scraped watch reads.
fn selector(w: &WatchSpec) -> Option<&Selector> {
    match &w.expr {
        WatchExpr::Select(s) | WatchExpr::Rate(s) => Some(s),
        WatchExpr::Query(_) => None,
    }
}

/// A Prometheus server's answer to `/api/v1/query`.
#[derive(Debug, Deserialize)]
struct Answer {
    status: String,
    #[serde(default)]
    data: Option<AnswerData>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

/// The `data` of an answer.
#[derive(Debug, Deserialize)]
#[serde(tag = "resultType", content = "result", rename_all = "lowercase")]
enum AnswerData {
    Vector(Vec<VectorSample>),
    Scalar((f64, String)),
    Matrix(serde::de::IgnoredAny),
    String(serde::de::IgnoredAny),
}

/// One series of an instant vector.
#[derive(Debug, Deserialize)]
struct VectorSample {
    metric: std::collections::BTreeMap<String, String>,
    value: (f64, String),
}

/// A series' labels and value.
type Labelled = (Vec<(String, String)>, f64);

/// The Prometheus server of `--prometheus`.
pub(super) struct Query {
    endpoint: Endpoint,
    fetcher: Fetcher,
    body: Vec<u8>,
    /// Each watch's series (label sets) at the last answer.
    seen: HashMap<usize, Vec<Vec<(String, String)>>>,
}

impl Query {
    pub(super) fn new(endpoint: &Endpoint, timeout: std::time::Duration) -> Query {
        Query {
            fetcher: fetcher(endpoint, timeout),
            endpoint: endpoint.clone(),
            body: Vec::new(),
            seen: HashMap::new(),
        }
    }

    /// Asks every query of `watches`; values into `out`. Returns how many
    /// series each answer had. A query Prometheus refuses fails the
    /// read with its own words (`bad_data: parse error at char 5: …`).
    pub(super) fn read(
        &mut self,
        watches: &[(usize, &WatchSpec)],
        out: &mut Reading,
        source: usize,
    ) -> Result<Vec<usize>, ReadError> {
        let mut counts = Vec::with_capacity(watches.len());
        for (id, w) in watches {
            let WatchExpr::Query(q) = &w.expr else {
                counts.push(0);
                continue;
            };
            let series = self.ask(q)?;
            counts.push(series.len());
            let labels_now: Vec<Vec<(String, String)>> = series.iter().map(|(l, _)| l.clone()).collect();
            if let Some(before) = self.seen.get(id) {
                let gone = before.iter().filter(|l| !labels_now.contains(l)).count();
                let new = labels_now.iter().filter(|l| !before.contains(l)).count();
                if gone > 0 && new > 0 {
                    out.restarts.push(Restart {
                        source,
                        watch: Some(*id),
                        why: format!(
                            "{}: {gone} series replaced by {new} new (a pod or instance replaced)",
                            w.name
                        ),
                    });
                }
            }
            self.seen.insert(*id, labels_now);
            for (labels, value) in series {
                out.values.push(Value {
                    watch: *id,
                    source,
                    labels,
                    value,
                });
            }
        }
        Ok(counts)
    }

    /// One instant query: its series (labels without `__name__`) and
    /// values.
    fn ask(&mut self, query: &str) -> Result<Vec<Labelled>, ReadError> {
        let mut f = for_request(&self.endpoint, &self.fetcher)?;
        let time = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let target = format!("/api/v1/query?query={}&time={time:.3}", encode(query));
        f.url = f
            .url
            .with_target(&format!("{}{}", base_path(self.endpoint.url.as_str()), target));
        let got = f.get_into("application/json", &mut self.body);
        let answer: Option<Answer> = serde_json::from_slice(&self.body).ok();
        if self.body.capacity() > 4 << 20 {
            self.body = Vec::new();
        }
        match (got, answer) {
            (_, Some(a)) if a.status == "error" => Err(ReadError {
                reason: "query",
                detail: format!(
                    "Prometheus refused {query:?}: {}: {}",
                    a.error_type.unwrap_or_default(),
                    a.error.unwrap_or_default()
                ),
            }),
            (Err(e), _) => Err(e.into()),
            (Ok(()), None) => Err(ReadError {
                reason: "malformed",
                detail: "the answer is not a Prometheus API answer (JSON with status and data)".into(),
            }),
            (Ok(()), Some(a)) => match a.data {
                Some(AnswerData::Vector(v)) => Ok(v
                    .into_iter()
                    .filter_map(|s| {
                        let value: f64 = s.value.1.parse().ok().filter(|v: &f64| v.is_finite())?;
                        let labels = s.metric.into_iter().filter(|(k, _)| k != "__name__").collect();
                        Some((labels, value))
                    })
                    .collect()),
                Some(AnswerData::Scalar((_, v))) => Ok(v
                    .parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite())
                    .map(|v| (Vec::new(), v))
                    .into_iter()
                    .collect()),
                Some(_) => Err(ReadError {
                    reason: "query",
                    detail: format!(
                        "{query:?} answers a range or a string; a watch needs an instant vector or a scalar"
                    ),
                }),
                None => Err(ReadError {
                    reason: "malformed",
                    detail: "the answer has no data".into(),
                }),
            },
        }
    }
}

/// The path a Prometheus server is served under (`http://h/prom/` →
/// `/prom`), so its API is `{base}/api/v1/query`.
fn base_path(url: &str) -> String {
    let path = url::Url::parse(url).map(|u| u.path().to_string()).unwrap_or_default();
    path.trim_end_matches('/').to_string()
}

/// `s` percent-encoded for a query string.
fn encode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::watch::{GivenWatch, WatchGiven, WatchPlan};

    /// An exposition response.
    fn exposition(body: &str) -> Vec<u8> {
        format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
    }

    /// A counter read as a rate; a counter that went down is a reset (a
    /// restart), its new value the increase; a new process start time is
    /// a restart; a series gone from the exposition is forgotten.
    #[test]
    fn rates_resets_and_restarts() {
        let (url, _server) = crate::netio::testing::serve(vec![
            exposition("process_start_time_seconds 100\nreqs_total{path=\"/a\"} 10\nreqs_total{path=\"/b\"} 5\n"),
            exposition("process_start_time_seconds 100\nreqs_total{path=\"/a\"} 30\n"),
            exposition("process_start_time_seconds 100\nreqs_total{path=\"/a\"} 4\n"),
            exposition("process_start_time_seconds 200\nreqs_total{path=\"/a\"} 9\n"),
        ]);
        let given = WatchGiven {
            target_metrics: vec![url],
            watches: vec![GivenWatch {
                at: "--watch".into(),
                name: "reqs".into(),
                expr: "rate(reqs_total)".into(),
                ..GivenWatch::default()
            }],
            ..WatchGiven::default()
        };
        let plan = WatchPlan::build(given, &|k: &str| k.to_string()).unwrap();
        let mut scrape = Scrape::new(&plan.endpoints[0], std::time::Duration::from_secs(5));
        let watches = [(0usize, &plan.watches[0])];
        let mut reads = Vec::new();
        for _ in 0..4 {
            let mut r = Reading::default();
            let matched = scrape.read(&watches, &mut r, 0).unwrap();
            reads.push((matched, r));
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        // The first scrape has no rate yet (two reads make one).
        assert_eq!(reads[0].0, vec![2]);
        assert!(reads[0].1.values.is_empty());
        // 10 → 30 over ~50 ms: a rate, and /b gone is forgotten.
        let v = &reads[1].1.values;
        assert_eq!(v.len(), 1);
        assert!(v[0].value > 100.0, "{v:?}");
        assert_eq!(scrape.counters.len(), 1);
        // 30 → 4: a reset, the 4 counted as the increase, a restart.
        assert_eq!(reads[2].1.restarts.len(), 1, "{:?}", reads[2].1.restarts);
        assert!(reads[2].1.restarts[0].why.contains("reset"));
        assert!(reads[2].1.values[0].value > 0.0);
        // A new process start time: a restart, said so.
        let r = &reads[3].1.restarts;
        assert_eq!(r.len(), 1);
        assert!(
            r[0].why.contains("process_start_time_seconds went from 100 to 200"),
            "{r:?}"
        );
    }

    #[test]
    fn answers_parse() {
        let v: Answer = serde_json::from_str(
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"__name__":"up","pod":"a"},"value":[1712.5,"1"]}]}}"#,
        )
        .unwrap();
        assert!(matches!(v.data, Some(AnswerData::Vector(ref s)) if s.len() == 1 && s[0].metric["pod"] == "a"));
        let e: Answer =
            serde_json::from_str(r#"{"status":"error","errorType":"bad_data","error":"parse error at char 4"}"#)
                .unwrap();
        assert_eq!(e.error.as_deref(), Some("parse error at char 4"));
        let s: Answer =
            serde_json::from_str(r#"{"status":"success","data":{"resultType":"scalar","result":[1712.5,"42"]}}"#)
                .unwrap();
        assert!(matches!(s.data, Some(AnswerData::Scalar((_, ref v))) if v == "42"));
        assert_eq!(base_path("http://h:9090/"), "");
        assert_eq!(base_path("http://h:9090/prom/"), "/prom");
        assert_eq!(encode("a{b=\"c d\"}"), "a%7Bb%3D%22c+d%22%7D");
    }
}
