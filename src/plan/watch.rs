//! The server watch's plan: which of the server's own figures soakd reads
//! while it soaks, where from, and what each is called.
//!
//! A soak exists to find what degrades with time on the server: memory
//! that only grows, descriptors that leak, GC time that creeps. The server
//! rarely runs on soakd's host, but it (or an exporter beside it, or the
//! Prometheus that scrapes its pods) already publishes those figures in
//! Prometheus form. The sources:
//!
//! - `--target-metrics URL`: the server's own exposition (or an
//!   exporter's), scraped every `--target-metrics-interval`; a watch is a
//!   [`Selector`] (`heap=jvm_memory_used_bytes{area="heap"}`) or the rate
//!   of one (`gc=rate(go_gc_duration_seconds_sum)`);
//! - `--prometheus URL`: a watch is a PromQL query, asked each interval;
//!   every series of its answer is trended on its own;
//! - `--target-pidfile FILE`, `--target-cgroup PATH`, `--target-unit
//!   NAME.service`: the server on this host, followed across restarts
//!   (its series `rss`, `fds` and `cpu`).
//!
//! Everything here is checked before anything starts: a bad URL, a
//! selector that does not parse, a watch named twice is exit 2 with the
//! flag named. Whether an endpoint answers and a selector matches is the
//! preflight's (`observe::watch`), also before anything is opened.

use std::path::PathBuf;
use std::time::Duration;

use crate::Error;
use crate::netio::fetch::FetchUrl;

use super::defaults;
use super::tls::{Tls, TlsSpec};

/// Most series the watch keeps (over all watches and sources); past it a
/// new series is dropped and the report says so.
pub const MAX_SERIES: usize = 64;

/// The default watches of a `--target-metrics` endpoint without
/// `--watch`: each taken where the endpoint has it.
pub const DEFAULT_WATCHES: [(&str, &str); 2] = [("rss", "process_resident_memory_bytes"), ("fds", "process_open_fds")];

/// The series a process source (a pidfile, a cgroup) reads.
pub const PROCESS_WATCHES: [(&str, WatchUnit); 3] = [
    ("rss", WatchUnit::Bytes),
    ("fds", WatchUnit::Plain),
    ("cpu", WatchUnit::SecondsPerSecond),
];

/// What the server watch reads (empty: no watch).
#[derive(Clone, Debug, Default)]
pub struct WatchPlan {
    /// `--target-metrics`: expositions to scrape.
    pub endpoints: Vec<Endpoint>,
    /// `--prometheus`: the server whose HTTP API answers the queries.
    pub prometheus: Option<Endpoint>,
    /// `--target-pidfile`: servers on this host, each its pid file's.
    pub pidfiles: Vec<PathBuf>,
    /// `--target-cgroup` / `--target-unit`: servers on this host, every
    /// process of a cgroup.
    pub cgroups: Vec<CgroupSpec>,
    /// The watches of the endpoints or of Prometheus (the process sources
    /// have theirs, [`PROCESS_WATCHES`]).
    pub watches: Vec<WatchSpec>,
    /// How often every source is read.
    pub interval: Duration,
    /// The watches are the defaults of an endpoint without `--watch`
    /// ([`DEFAULT_WATCHES`]): each is taken where the endpoint has it.
    pub defaulted: bool,
}

impl WatchPlan {
    /// No source at all.
    pub fn is_empty(&self) -> bool {
        self.endpoints.is_empty() && self.prometheus.is_none() && self.pidfiles.is_empty() && self.cgroups.is_empty()
    }

    /// The longest one read of a source may take: the interval, at most
    /// 10 s (a scrape that hangs is cut and counted, never waited on).
    pub fn timeout(&self) -> Duration {
        self.interval.min(Duration::from_secs(10))
    }

    /// The names of every watch any source has (for thresholds), in order.
    pub fn names(&self) -> Vec<String> {
        let mut out: Vec<String> = self.watches.iter().map(|w| w.name.clone()).collect();
        if self.endpoints.is_empty() && self.prometheus.is_none() {
            out.clear();
        }
        if !self.pidfiles.is_empty() || !self.cgroups.is_empty() {
            for (name, _) in PROCESS_WATCHES {
                if !out.iter().any(|n| n == name) {
                    out.push(name.to_string());
                }
            }
        }
        out
    }

    /// The unit of watch `name` (the first source's that has it).
    pub fn unit_of(&self, name: &str) -> Option<WatchUnit> {
        if let Some(w) = self.watches.iter().find(|w| w.name == name)
            && (!self.endpoints.is_empty() || self.prometheus.is_some())
        {
            return Some(w.unit);
        }
        let local = !self.pidfiles.is_empty() || !self.cgroups.is_empty();
        PROCESS_WATCHES
            .iter()
            .find(|(n, _)| local && *n == name)
            .map(|(_, u)| *u)
    }
}

/// A URL to read, and how.
#[derive(Clone)]
pub struct Endpoint {
    /// Where.
    pub url: FetchUrl,
    /// Its TLS client (https), from the run's TLS settings.
    pub tls: Option<Tls>,
    /// Extra request headers (`--target-metrics-header`): their values
    /// are never printed.
    pub headers: Vec<(String, String)>,
    /// `--target-metrics-bearer-file`: read before every request (tokens
    /// rotate), sent as `Authorization: Bearer …`, never printed.
    pub bearer_file: Option<PathBuf>,
}

impl std::fmt::Debug for Endpoint {
    /// The URL and the header names: never a header's value or a token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("Endpoint")
            .field("url", &self.url.as_str())
            .field("headers", &names)
            .field("bearer_file", &self.bearer_file)
            .finish_non_exhaustive()
    }
}

/// A cgroup of processes to watch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupSpec {
    /// The cgroup's path below the hierarchy's root
    /// (`/system.slice/nginx.service`).
    pub path: String,
    /// What it was given as (`--target-unit nginx.service`, or the path),
    /// for labels and messages.
    pub given: String,
}

/// The unit of a watch's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WatchUnit {
    /// Bytes (memory).
    Bytes,
    /// Seconds.
    Seconds,
    /// A plain number (descriptors, goroutines).
    Plain,
    /// Bytes per second (the rate of a byte counter).
    BytesPerSecond,
    /// Seconds per second (the rate of a time counter: CPU, GC time).
    SecondsPerSecond,
    /// A count per second (the rate of any other counter).
    PerSecond,
}

impl WatchUnit {
    /// How the report and the metrics name it.
    pub fn name(self) -> &'static str {
        match self {
            WatchUnit::Bytes => "bytes",
            WatchUnit::Seconds => "seconds",
            WatchUnit::Plain => "1",
            WatchUnit::BytesPerSecond => "bytes/s",
            WatchUnit::SecondsPerSecond => "seconds/s",
            WatchUnit::PerSecond => "1/s",
        }
    }

    /// The unit of a name the report wrote.
    pub fn from_name(name: &str) -> Option<WatchUnit> {
        [
            WatchUnit::Bytes,
            WatchUnit::Seconds,
            WatchUnit::Plain,
            WatchUnit::BytesPerSecond,
            WatchUnit::SecondsPerSecond,
            WatchUnit::PerSecond,
        ]
        .into_iter()
        .find(|u| u.name() == name)
    }

    /// The unit a metric's name implies (Prometheus naming: `_bytes`,
    /// `_seconds`, `_total` counters), as a value or as a rate.
    pub fn of_metric(metric: &str, rate: bool) -> WatchUnit {
        let base = metric.strip_suffix("_total").unwrap_or(metric);
        let bytes = base.ends_with("_bytes") || base.contains("_bytes_");
        let seconds = base.ends_with("_seconds") || base.contains("_seconds_");
        match (rate, bytes, seconds) {
            (false, true, _) => WatchUnit::Bytes,
            (false, _, true) => WatchUnit::Seconds,
            (false, _, _) => WatchUnit::Plain,
            (true, true, _) => WatchUnit::BytesPerSecond,
            (true, _, true) => WatchUnit::SecondsPerSecond,
            (true, _, _) => WatchUnit::PerSecond,
        }
    }

    /// A unit given by name in `[[watch]]`'s `unit` (`bytes`, `seconds`,
    /// or `1`/`""` for a plain number), as a value or a rate.
    pub fn given(name: &str, rate: bool) -> Option<WatchUnit> {
        Some(match (name, rate) {
            ("bytes", false) => WatchUnit::Bytes,
            ("seconds", false) => WatchUnit::Seconds,
            ("1" | "", false) => WatchUnit::Plain,
            ("bytes", true) => WatchUnit::BytesPerSecond,
            ("seconds", true) => WatchUnit::SecondsPerSecond,
            ("1" | "", true) => WatchUnit::PerSecond,
            _ => return None,
        })
    }

    /// Sizes (`KiB`, `MiB`) are how its values are written.
    pub fn is_bytes(self) -> bool {
        matches!(self, WatchUnit::Bytes | WatchUnit::BytesPerSecond)
    }
}

/// One `--watch NAME=EXPR` (or `[[watch]]`).
#[derive(Clone, Debug, PartialEq)]
pub struct WatchSpec {
    /// Its name: thresholds and charts say `slope(NAME)`.
    pub name: String,
    /// What it reads.
    pub expr: WatchExpr,
    /// The unit of its values.
    pub unit: WatchUnit,
}

/// What a watch reads.
#[derive(Clone, Debug, PartialEq)]
pub enum WatchExpr {
    /// A scraped metric's value, per matching series.
    Select(Selector),
    /// The per-second rate of a scraped counter (resets handled).
    Rate(Selector),
    /// A PromQL query for `--prometheus`, sent as written.
    Query(String),
}

/// `metric{label="v",other!="w",re=~"a.*",nre!~"b.*"}`: a metric name and
/// label matchers, as PromQL writes a selector.
#[derive(Clone, Debug)]
pub struct Selector {
    /// The metric name.
    pub metric: String,
    /// Every one must hold.
    pub matchers: Vec<Matcher>,
}

impl PartialEq for Selector {
    fn eq(&self, other: &Selector) -> bool {
        self.metric == other.metric && self.matchers == other.matchers
    }
}

/// One label matcher.
#[derive(Clone, Debug)]
pub struct Matcher {
    /// The label.
    pub label: String,
    /// How it is compared.
    pub op: MatchOp,
    /// The value or the pattern as written.
    pub value: String,
    /// The pattern, compiled (fully anchored, as PromQL's).
    regex: Option<regex_lite::Regex>,
}

impl PartialEq for Matcher {
    fn eq(&self, other: &Matcher) -> bool {
        (&self.label, self.op, &self.value) == (&other.label, other.op, &other.value)
    }
}

/// A matcher's comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchOp {
    /// `=`
    Eq,
    /// `!=`
    Ne,
    /// `=~`
    Re,
    /// `!~`
    NotRe,
}

impl Matcher {
    /// Whether a series whose label has `value` (`""` when absent, as in
    /// PromQL) is matched.
    pub fn matches(&self, value: &str) -> bool {
        match self.op {
            MatchOp::Eq => value == self.value,
            MatchOp::Ne => value != self.value,
            MatchOp::Re => self.regex.as_ref().is_some_and(|r| r.is_match(value)),
            MatchOp::NotRe => !self.regex.as_ref().is_some_and(|r| r.is_match(value)),
        }
    }
}

impl Selector {
    /// Parses `metric` or `metric{matchers}`; the error is a cause for
    /// the caller's message.
    pub fn parse(text: &str) -> Result<Selector, String> {
        let text = text.trim();
        let name_end = text
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(text.len());
        let metric = &text[..name_end];
        if metric.is_empty() || metric.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(format!("{text:?} does not start with a metric name"));
        }
        let rest = text[name_end..].trim();
        let mut matchers = Vec::new();
        if !rest.is_empty() {
            let inner = rest
                .strip_prefix('{')
                .and_then(|r| r.strip_suffix('}'))
                .ok_or_else(|| format!("after {metric:?} expected {{label=\"value\", …}}, found {rest:?}"))?;
            let mut at = inner.trim_start();
            while !at.is_empty() {
                let label_end = at
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(at.len());
                let label = &at[..label_end];
                if label.is_empty() {
                    return Err(format!("expected a label name at {at:?}"));
                }
                at = at[label_end..].trim_start();
                let op = [
                    ("=~", MatchOp::Re),
                    ("!~", MatchOp::NotRe),
                    ("!=", MatchOp::Ne),
                    ("=", MatchOp::Eq),
                ]
                .into_iter()
                .find(|(s, _)| at.starts_with(s))
                .ok_or_else(|| format!("expected =, !=, =~ or !~ after label {label}"))?;
                at = at[op.0.len()..].trim_start();
                let (value, next) =
                    quoted(at).ok_or_else(|| format!("the value of label {label} must be in double quotes"))?;
                let regex = match op.1 {
                    MatchOp::Re | MatchOp::NotRe => Some(
                        regex_lite::Regex::new(&format!("^(?:{value})$"))
                            .map_err(|e| format!("{label}{}\"{value}\": not a regular expression ({e})", op.0))?,
                    ),
                    _ => None,
                };
                matchers.push(Matcher {
                    label: label.to_string(),
                    op: op.1,
                    value,
                    regex,
                });
                at = next.trim_start();
                match at.strip_prefix(',') {
                    Some(r) => at = r.trim_start(),
                    None if at.is_empty() => {}
                    None => return Err(format!("expected ',' or '}}' at {at:?}")),
                }
            }
        }
        Ok(Selector {
            metric: metric.to_string(),
            matchers,
        })
    }

    /// Whether a sample of `name` with `labels` is selected.
    pub fn matches(&self, name: &str, labels: &[(String, String)]) -> bool {
        name == self.metric
            && self.matchers.iter().all(|m| {
                let v = labels
                    .iter()
                    .find(|(k, _)| *k == m.label)
                    .map_or("", |(_, v)| v.as_str());
                m.matches(v)
            })
    }
}

/// A double-quoted string at the start of `s` (with `\"`, `\\` and `\n`
/// escapes): its value and what follows it.
fn quoted(s: &str) -> Option<(String, &str)> {
    let body = s.strip_prefix('"')?;
    let mut out = String::new();
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((out, &body[i + 1..])),
            '\\' => match chars.next()?.1 {
                'n' => out.push('\n'),
                other => out.push(other),
            },
            c => out.push(c),
        }
    }
    None
}

/// A watch's name: a short identifier (it is a label value and goes into
/// threshold expressions).
pub fn check_name(what: &str, name: &str) -> Result<(), Error> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(Error::Usage(format!(
            "{what}: {name:?} is not a watch name; use letters, digits and _ (starting with a letter), e.g. rss or heap_used"
        )))
    }
}

/// `NAME=EXPR` of `--watch`, split.
pub fn split_watch(what: &str, given: &str) -> Result<(String, String), Error> {
    let (name, expr) = given.split_once('=').ok_or_else(|| {
        Error::Usage(format!(
            "{what} {given:?}: expected NAME=EXPR, e.g. heap=jvm_memory_used_bytes{{area=\"heap\"}}, gc=rate(go_gc_duration_seconds_sum) or, with --prometheus, mem=container_memory_working_set_bytes{{pod=~\"api-.*\"}}"
        ))
    })?;
    Ok((name.trim().to_string(), expr.trim().to_string()))
}

/// A watch named `name` reading `expr`: for the endpoints a selector or
/// `rate(selector)`, for Prometheus (`query`) the expression as written.
/// `what` names where it was given, for messages.
pub fn parse_watch(what: &str, name: &str, expr: &str, query: bool, unit: Option<&str>) -> Result<WatchSpec, Error> {
    let given = format!("{name}={expr}");
    let given = given.as_str();
    check_name(what, name)?;
    if expr.is_empty() {
        return Err(Error::Usage(format!("{what} {given:?}: nothing after {name}=")));
    }
    let bad = |why: String| Error::Usage(format!("{what} {given:?}: {why}"));
    let (expr, metric, rate) = if query {
        // The unit of a query's answer is guessed from the first metric
        // name in it (`rate(x_bytes_total[5m])` is bytes/s).
        let first = expr
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .find(|w| w.contains('_') && !w.starts_with(|c: char| c.is_ascii_digit()))
            .unwrap_or("");
        let rate = ["rate(", "irate(", "increase(", "deriv("]
            .iter()
            .any(|f| expr.replace(' ', "").contains(f));
        (WatchExpr::Query(expr.to_string()), first.to_string(), rate)
    } else if let Some(inner) = expr.strip_prefix("rate(").and_then(|r| r.strip_suffix(')')) {
        let s = Selector::parse(inner).map_err(bad)?;
        let m = s.metric.clone();
        (WatchExpr::Rate(s), m, true)
    } else {
        if expr.contains('(') {
            return Err(bad(
                "a --target-metrics watch is a metric name with optional {label matchers}, or rate(…) of one; other PromQL needs --prometheus".into(),
            ));
        }
        let s = Selector::parse(expr).map_err(bad)?;
        let m = s.metric.clone();
        (WatchExpr::Select(s), m, false)
    };
    let unit = match unit {
        None => WatchUnit::of_metric(&metric, rate),
        Some(u) => WatchUnit::given(u, rate).ok_or_else(|| {
            Error::Usage(format!(
                "{what} {name}: unit {u:?} is not one soakd knows; use \"bytes\", \"seconds\" or \"1\" (a plain number)"
            ))
        })?,
    };
    Ok(WatchSpec {
        name: name.to_string(),
        expr,
        unit,
    })
}

/// One watch as given: `--watch NAME=EXPR`, or a `[[watch]]` table.
#[derive(Clone, Debug, Default)]
pub struct GivenWatch {
    /// Where it was given (`--watch`, `soak.toml:12: watch`), for
    /// messages.
    pub at: String,
    /// Its name.
    pub name: String,
    /// Its selector or query.
    pub expr: String,
    /// `unit`, when given.
    pub unit: Option<String>,
    /// `source = "metrics" | "prometheus"`, when given.
    pub source: Option<String>,
}

/// The server watch as given (flags or file keys), before it is checked:
/// [`WatchPlan::build`] makes the plan of it.
#[derive(Clone, Debug, Default)]
pub struct WatchGiven {
    /// `--target-metrics` URLs.
    pub target_metrics: Vec<String>,
    /// `--prometheus`.
    pub prometheus: Option<String>,
    /// The watches.
    pub watches: Vec<GivenWatch>,
    /// `--target-metrics-interval`.
    pub interval: Option<Duration>,
    /// `--target-metrics-header` (checked already).
    pub headers: Vec<(String, String)>,
    /// `--target-metrics-bearer-file`.
    pub bearer_file: Option<PathBuf>,
    /// `--target-metrics-cacert` and its companions, for https URLs.
    pub tls: TlsSpec,
    /// `--target-pidfile`.
    pub pidfiles: Vec<PathBuf>,
    /// `--target-cgroup`.
    pub cgroups: Vec<String>,
    /// `--target-unit`.
    pub units: Vec<String>,
}

/// The flag (or file key) each setting of the watch is given by, for
/// messages: `key("cacert")` is `--target-metrics-cacert` or the file's
/// line and key.
pub type KeyName<'a> = &'a dyn Fn(&str) -> String;

impl WatchPlan {
    /// Checks what was given and makes the plan (no source: an empty
    /// plan, and any watch setting without one is refused).
    pub fn build(g: WatchGiven, key: KeyName<'_>) -> Result<WatchPlan, Error> {
        let remote = !g.target_metrics.is_empty() || g.prometheus.is_some();
        let local = !g.pidfiles.is_empty() || !g.cgroups.is_empty() || !g.units.is_empty();
        if !remote {
            let stray = [
                (!g.watches.is_empty(), "watch"),
                (g.interval.is_some() && !local, "interval"),
                (!g.headers.is_empty(), "header"),
                (g.bearer_file.is_some(), "bearer_file"),
                (!g.tls.given().is_empty(), "cacert"),
            ];
            if let Some((_, k)) = stray.iter().find(|(given, _)| *given) {
                return Err(Error::Usage(format!(
                    "{} reads the server's metrics, but no {} or {} says where from; add one (e.g. --target-metrics http://10.0.0.5:9100/metrics) or drop it",
                    key(k),
                    key("target_metrics"),
                    key("prometheus")
                )));
            }
        }
        let interval = g.interval.unwrap_or(defaults::WATCH_INTERVAL);
        if interval < Duration::from_secs(1) {
            return Err(Error::Usage(format!(
                "{} {}: read every second at most (a server's exporter is not a load target); give 1s or more",
                key("interval"),
                humantime::format_duration(interval)
            )));
        }
        if let Some(path) = &g.bearer_file {
            read_token(path)
                .map_err(|why| Error::Usage(format!("{} {}: {why}", key("bearer_file"), path.display())))?;
        }
        let endpoint = |url: &str, k: &str| -> Result<Endpoint, Error> {
            let url = FetchUrl::parse(url, true).map_err(|why| Error::Usage(format!("{} {url:?}: {why}", key(k))))?;
            let tls = if url.is_https() {
                let mut t = super::tls::build(&g.tls, url.host(), &|s| key(s))?;
                if let Some(config) = std::sync::Arc::get_mut(&mut t.config) {
                    config.alpn_protocols = vec![b"http/1.1".to_vec()];
                }
                Some(t)
            } else {
                None
            };
            Ok(Endpoint {
                url,
                tls,
                headers: g.headers.clone(),
                bearer_file: g.bearer_file.clone(),
            })
        };
        let endpoints = g
            .target_metrics
            .iter()
            .map(|u| endpoint(u, "target_metrics"))
            .collect::<Result<Vec<_>, _>>()?;
        let prometheus = g.prometheus.as_deref().map(|u| endpoint(u, "prometheus")).transpose()?;
        if !g.tls.given().is_empty() && !endpoints.iter().chain(&prometheus).any(|e| e.url.is_https()) {
            return Err(Error::Usage(format!(
                "{} is a TLS setting, but no {} or {} URL is https://; use https:// or drop it",
                key(g.tls.given()[0]),
                key("target_metrics"),
                key("prometheus")
            )));
        }
        let both = !endpoints.is_empty() && prometheus.is_some();
        let mut watches: Vec<WatchSpec> = Vec::new();
        for w in &g.watches {
            let query = match w.source.as_deref() {
                Some("prometheus") if prometheus.is_some() => true,
                Some("metrics") if !endpoints.is_empty() => false,
                Some(s @ ("prometheus" | "metrics")) => {
                    return Err(Error::Usage(format!(
                        "{} {}: source = {s:?}, but no {} is given",
                        w.at,
                        w.name,
                        key(if s == "metrics" { "target_metrics" } else { "prometheus" })
                    )));
                }
                Some(other) => {
                    return Err(Error::Usage(format!(
                        "{} {}: source = {other:?}; use \"metrics\" (the --target-metrics endpoints) or \"prometheus\"",
                        w.at, w.name
                    )));
                }
                None if both => {
                    return Err(Error::Usage(format!(
                        "{} {}: with both {} and {} each watch says which it reads; in a config file's [[watch]] give source = \"metrics\" or \"prometheus\"",
                        w.at,
                        w.name,
                        key("target_metrics"),
                        key("prometheus")
                    )));
                }
                None => prometheus.is_some(),
            };
            let spec = parse_watch(&w.at, &w.name, &w.expr, query, w.unit.as_deref())?;
            if watches.iter().any(|x| x.name == spec.name) {
                return Err(Error::Usage(format!(
                    "{} {}: a watch of that name is given twice; name each once",
                    w.at, spec.name
                )));
            }
            watches.push(spec);
        }
        let defaulted = watches.is_empty() && !endpoints.is_empty() && prometheus.is_none();
        if defaulted {
            for (name, metric) in DEFAULT_WATCHES {
                watches.push(WatchSpec {
                    name: name.to_string(),
                    expr: WatchExpr::Select(Selector::parse(metric).expect("a default selector parses")),
                    unit: WatchUnit::of_metric(metric, false),
                });
            }
        }
        if prometheus.is_some() && !watches.iter().any(|w| matches!(w.expr, WatchExpr::Query(_))) {
            return Err(Error::Usage(format!(
                "{} asks a Prometheus server, but no {} query says what: add e.g. --watch 'mem=container_memory_working_set_bytes{{namespace=\"shop\"}}'",
                key("prometheus"),
                key("watch")
            )));
        }
        let mut cgroups = Vec::new();
        for c in &g.cgroups {
            cgroups.push(CgroupSpec {
                path: cgroup_path(c).map_err(|why| Error::Usage(format!("{} {c:?}: {why}", key("cgroup"))))?,
                given: c.clone(),
            });
        }
        for u in &g.units {
            if !u.contains('.') || u.contains('/') || u.chars().any(char::is_whitespace) {
                return Err(Error::Usage(format!(
                    "{} {u:?}: expected a systemd unit name such as nginx.service",
                    key("unit")
                )));
            }
            // Resolved to its cgroup when the watch starts
            // (`systemctl show`): a unit not loaded is refused then.
            cgroups.push(CgroupSpec {
                path: String::new(),
                given: u.clone(),
            });
        }
        Ok(WatchPlan {
            endpoints,
            prometheus,
            pidfiles: g.pidfiles,
            cgroups,
            watches,
            interval,
            defaulted,
        })
    }

    /// The watch's names and units, to check thresholds on them: `None`
    /// when there is no watch of that name.
    pub fn watch_unit(&self, name: &str) -> Option<WatchUnit> {
        self.unit_of(name)
    }
}

/// A cgroup path as `/proc/PID/cgroup` writes it (`/system.slice/x`), from
/// that or a full path under `/sys/fs/cgroup` (v2, or a v1 controller's
/// hierarchy).
pub fn cgroup_path(given: &str) -> Result<String, String> {
    if !given.starts_with('/') || given.contains("..") {
        return Err(
            "expected an absolute cgroup path such as /system.slice/nginx.service or /sys/fs/cgroup/memory/mygroup"
                .into(),
        );
    }
    let Some(rest) = given.strip_prefix("/sys/fs/cgroup") else {
        return Ok(given.trim_end_matches('/').to_string());
    };
    // A v1 controller's directory comes first (memory, cpuacct,
    // cpu,cpuacct, unified, systemd); v2 has none.
    let rest = rest.trim_start_matches('/');
    let first = rest.split('/').next().unwrap_or("");
    let controller = ["memory", "cpuacct", "cpu,cpuacct", "cpu", "pids", "unified", "systemd"].contains(&first);
    let path = if controller { &rest[first.len()..] } else { rest };
    Ok(format!("/{}", path.trim_matches('/')))
}

/// The token of a bearer file: its first line, trimmed (never printed).
pub fn read_token(path: &std::path::Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read it ({e}); give a readable file"))?;
    let token = text.lines().next().unwrap_or("").trim().to_string();
    if token.is_empty() {
        return Err("it is empty; it should hold the bearer token".into());
    }
    if token.contains(|c: char| c.is_control()) {
        return Err("its token has a control character".into());
    }
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_parse_and_match() {
        let s =
            Selector::parse(r#"jvm_memory_used_bytes{area="heap", id!="x", pool=~"G1.*",gen!~"old|perm"}"#).unwrap();
        assert_eq!(s.metric, "jvm_memory_used_bytes");
        assert_eq!(s.matchers.len(), 4);
        let labels = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        assert!(s.matches(
            "jvm_memory_used_bytes",
            &labels(&[("area", "heap"), ("pool", "G1 Eden")])
        ));
        assert!(!s.matches("jvm_memory_used_bytes", &labels(&[("area", "heap"), ("pool", "xG1")])));
        assert!(!s.matches(
            "jvm_memory_used_bytes",
            &labels(&[("area", "heap"), ("pool", "G1"), ("gen", "old")])
        ));
        assert!(!s.matches("jvm_memory_used_bytes", &labels(&[("area", "nonheap"), ("pool", "G1")])));
        assert!(!s.matches("other", &labels(&[("area", "heap"), ("pool", "G1")])));
        // An absent label is "" (PromQL's rule).
        let s = Selector::parse(r#"m{a=""}"#).unwrap();
        assert!(s.matches("m", &[]));
        assert_eq!(Selector::parse("up").unwrap().matchers.len(), 0);
        assert_eq!(Selector::parse(r#"m{a="x\"y"}"#).unwrap().matchers[0].value, "x\"y");
        for (bad, says) in [
            ("", "metric name"),
            ("9m", "metric name"),
            ("m{a=1}", "double quotes"),
            ("m{a}", "expected ="),
            ("m{a=\"1\"", "expected {label"),
            ("m{a=\"1\" b=\"2\"}", "expected ','"),
            ("m{a=~\"(\"}", "not a regular expression"),
        ] {
            let err = Selector::parse(bad).unwrap_err();
            assert!(err.contains(says), "{bad:?}: {err}");
        }
    }

    fn parse_watch(what: &str, given: &str, query: bool, unit: Option<&str>) -> Result<WatchSpec, Error> {
        let (name, expr) = split_watch(what, given)?;
        super::parse_watch(what, &name, &expr, query, unit)
    }

    #[test]
    fn watches_parse_with_their_units() {
        let w = parse_watch("--watch", "heap=jvm_memory_used_bytes{area=\"heap\"}", false, None).unwrap();
        assert_eq!((w.name.as_str(), w.unit), ("heap", WatchUnit::Bytes));
        assert!(matches!(w.expr, WatchExpr::Select(_)));
        let w = parse_watch("--watch", "gc=rate(go_gc_duration_seconds_sum)", false, None).unwrap();
        assert_eq!(w.unit, WatchUnit::SecondsPerSecond);
        assert!(matches!(w.expr, WatchExpr::Rate(_)));
        let w = parse_watch("--watch", "reqs=rate(http_requests_total)", false, None).unwrap();
        assert_eq!(w.unit, WatchUnit::PerSecond);
        let w = parse_watch("--watch", "g=go_goroutines", false, None).unwrap();
        assert_eq!(w.unit, WatchUnit::Plain);
        let w = parse_watch("--watch", "x=some_gauge", false, Some("bytes")).unwrap();
        assert_eq!(w.unit, WatchUnit::Bytes);
        let q = r#"mem=container_memory_working_set_bytes{namespace="shop",pod=~"api-.*"}"#;
        let w = parse_watch("--watch", q, true, None).unwrap();
        assert_eq!(w.unit, WatchUnit::Bytes);
        assert_eq!(
            w.expr,
            WatchExpr::Query(r#"container_memory_working_set_bytes{namespace="shop",pod=~"api-.*"}"#.into())
        );
        let w = parse_watch("--watch", "io=sum(rate(node_disk_written_bytes_total[5m]))", true, None).unwrap();
        assert_eq!(w.unit, WatchUnit::BytesPerSecond);
        for (bad, says) in [
            ("rss", "expected NAME=EXPR"),
            ("9x=up", "not a watch name"),
            ("a b=up", "not a watch name"),
            ("x=", "nothing after"),
            ("x=sum(up)", "needs --prometheus"),
            ("x=up{a=1}", "double quotes"),
        ] {
            let err = parse_watch("--watch", bad, false, None).unwrap_err().to_string();
            assert!(err.contains(says), "{bad:?}: {err}");
            assert!(err.starts_with("--watch"), "{err}");
        }
        let err = parse_watch("--watch", "x=up", false, Some("furlongs"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"bytes\", \"seconds\" or \"1\""), "{err}");
    }
}
