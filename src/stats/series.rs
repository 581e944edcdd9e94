//! The server watch's series as data: what each column of the timeline's
//! watched values is ([`SeriesTable`]: the watch, the source, the labels,
//! the unit, the server's restarts), and how each source's reads went
//! ([`SourceStats`]). Kept apart from the analysis (`watch.rs`), which
//! reads the trends' machinery, so that the timeline, which holds the
//! table, depends on nothing that depends on it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Most series kept (see the module doc).
pub const MAX_SERIES: usize = 64;

/// Why a read of a watch source failed: the closed set of the
/// `soakd_watch_scrape_failures_total` `reason` label.
pub const FAILURE_REASONS: [&str; 10] = [
    "refused",
    "timeout",
    "tls",
    "status",
    "too_large",
    "malformed",
    "io",
    "query",
    "token",
    "gone",
];

/// One watched series: which watch, which source, which labels.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SeriesInfo {
    /// The watch it belongs to (`rss`).
    pub watch: String,
    /// Where it was read: an endpoint's URL, `prometheus`, a pid file's
    /// or a cgroup's path.
    pub source: String,
    /// Its labels as the source gave them.
    pub labels: BTreeMap<String, String>,
    /// The unit of its values (`bytes`, `seconds`, `1`, `bytes/s`,
    /// `seconds/s`, `1/s`).
    pub unit: String,
    /// Run times (seconds) at which its server restarted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub restarts: Vec<f64>,
}

impl SeriesInfo {
    /// `watch{label="value",…}`: how the report, the summary and a failing
    /// threshold name it.
    pub fn name(&self) -> String {
        if self.labels.is_empty() {
            return self.watch.clone();
        }
        format!("{}{{{}}}", self.watch, self.label_text())
    }

    /// The labels as `k="v",…`.
    pub fn label_text(&self) -> String {
        let parts: Vec<String> = self.labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
        parts.join(",")
    }

    /// The `series` label on /metrics: the source, and the labels as
    /// `k=v` after it (`http://10.0.0.5:9100/metrics`,
    /// `http://prom:9090/ pod=api-1,namespace=shop`).
    pub fn series_label(&self) -> String {
        if self.labels.is_empty() {
            return self.source.clone();
        }
        let parts: Vec<String> = self.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("{} {}", self.source, parts.join(","))
    }

    /// The restart segment a value read at run time `t` belongs to.
    pub(super) fn segment(&self, t: f64) -> u32 {
        self.restarts.iter().filter(|r| **r < t).count() as u32
    }
}

/// What the watch read of the run so far: the series, in the order of the
/// timeline's columns, and how many were not kept.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SeriesTable {
    /// The series kept.
    pub series: Vec<SeriesInfo>,
    /// Series not kept: [`MAX_SERIES`] were already.
    pub dropped: u64,
}

impl SeriesTable {
    /// No series (no server watch).
    pub fn is_empty(&self) -> bool {
        self.series.is_empty() && self.dropped == 0
    }

    /// The column of the series of `watch` from `source` with `labels`,
    /// made when it is new (`None` past [`MAX_SERIES`]: counted dropped).
    pub fn column(&mut self, watch: &str, source: &str, labels: &[(String, String)], unit: &str) -> Option<usize> {
        let found = self.series.iter().position(|s| {
            s.watch == watch
                && s.source == source
                && s.labels.len() == labels.len()
                && labels.iter().all(|(k, v)| s.labels.get(k) == Some(v))
        });
        if found.is_some() {
            return found;
        }
        if self.series.len() >= MAX_SERIES {
            self.dropped += 1;
            return None;
        }
        self.series.push(SeriesInfo {
            watch: watch.to_string(),
            source: source.to_string(),
            labels: labels.iter().cloned().collect(),
            unit: unit.to_string(),
            restarts: Vec::new(),
        });
        Some(self.series.len() - 1)
    }
}

/// One source of the watch (an endpoint, a Prometheus server, a pid file,
/// a cgroup) and how its reads went.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SourceStats {
    /// The source: a URL, a pid file's or a cgroup's path, a unit.
    pub source: String,
    /// `metrics`, `prometheus`, `pidfile` or `cgroup`.
    pub kind: String,
    /// Reads (scrapes, queries, /proc reads), failed or not.
    pub reads: u64,
    /// Failed reads by reason (`refused`, `timeout`, `status`,
    /// `too_large`, `malformed`, `query`, `gone`, …).
    pub failures: BTreeMap<String, u64>,
    /// The last read failed: its values are stale.
    pub stale: bool,
    /// The last failure, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Restarts of the server seen here.
    pub restarts: u64,
}
