//! The outages and excursions as the report lists them, and the figures
//! summed over one.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::stats::ErrorKind;

/// Why a slice (and an outage) is bad, as bits.
pub(super) const BY_ERRORS: u8 = 1;
pub(super) const BY_CONNECTIONS: u8 = 2;

/// One outage, as the report lists it (times in seconds since the run
/// started).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Outage {
    /// The workload it hit.
    pub workload: String,
    /// When it began.
    pub start: f64,
    /// When it ended; `null` when it had not ended when the run stopped.
    pub end: Option<f64>,
    /// `end − start` (to the stop when it had not ended).
    pub duration_seconds: f64,
    /// What made it: `errors`, `connections`, or both.
    pub cause: Vec<String>,
    /// Errors during it, by kind (kinds seen only).
    pub errors: BTreeMap<String, u64>,
    /// Requests sent and then lost to an error.
    pub failed: u64,
    /// Requests never sent: older than the request timeout when a
    /// connection was free again.
    pub missed: u64,
    /// Responses slower than the minute before allows (see
    /// [`Rules`]), from the start until it recovered.
    pub late: u64,
    /// Connections closed by an error or by the server during it.
    pub connections_lost: u64,
    /// Fewest connections open during it.
    pub open_min: u64,
    /// Connections desired when it began.
    pub desired: u64,
    /// From the end until every desired connection was open again;
    /// `null`: not before the run stopped (or not measured: `--close`
    /// holds no connections).
    pub reconnect_seconds: Option<f64>,
    /// From the end until a second's p99 was back within tolerance of
    /// the minute before; `null`: not recovered before the run stopped.
    pub recovery_seconds: Option<f64>,
    /// The p99 of the minute before (what "recovered" is judged against);
    /// `null` when nothing was measured in it.
    pub baseline_p99: Option<f64>,
    /// The event it is attributed to: the nearest one within
    /// `--event-window` of its start.
    pub event: Option<String>,
    /// Its start minus the event's, seconds.
    pub event_offset_seconds: Option<f64>,
}

/// A latency excursion: the target slowed down without failing (see the
/// module doc).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Excursion {
    /// The workload it hit.
    pub workload: String,
    /// When it began.
    pub start: f64,
    /// When the median came back; `null`: not before the run stopped.
    pub end: Option<f64>,
    /// `end − start` (to the stop when it had not ended).
    pub duration_seconds: f64,
    /// The slowest median of a second during it.
    pub p50_max: Option<f64>,
    /// The slowest p99 of a second during it.
    pub p99_max: Option<f64>,
    /// Responses slower than the minute before allows, until recovered.
    pub late: u64,
    /// From the end until a second's p99 was back within tolerance;
    /// `null`: not recovered before the run stopped.
    pub recovery_seconds: Option<f64>,
    /// The p99 of the minute before.
    pub baseline_p99: Option<f64>,
    /// The event it is attributed to.
    pub event: Option<String>,
    /// Its start minus the event's, seconds.
    pub event_offset_seconds: Option<f64>,
}

/// The figures summed over an outage.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Figures {
    pub(super) errors: [u64; ErrorKind::COUNT],
    pub(super) failed: u64,
    pub(super) missed: u64,
    pub(super) lost: u64,
}

impl Figures {
    pub(super) fn add(&mut self, o: &Figures) {
        for (a, b) in self.errors.iter_mut().zip(o.errors) {
            *a += b;
        }
        self.failed += o.failed;
        self.missed += o.missed;
        self.lost += o.lost;
    }
}

/// The larger of a figure in seconds and one in µs.
pub(super) fn max_secs(a: Option<f64>, us: Option<u64>) -> Option<f64> {
    let b = us.map(|v| v as f64 / 1e6);
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// The summed figures into the report's form.
pub(super) fn fill(o: &mut Outage, f: &Figures, cause: u8, open_min: u64) {
    o.errors = ErrorKind::ALL
        .iter()
        .filter(|k| f.errors[**k as usize] > 0)
        .map(|k| (k.name().to_string(), f.errors[*k as usize]))
        .collect();
    o.failed = f.failed;
    o.missed = f.missed;
    o.connections_lost = f.lost;
    o.open_min = open_min;
    o.cause = cause_names(cause);
}

/// What made an outage, in words (`errors`, `connections`).
pub(super) fn cause_names(cause: u8) -> Vec<String> {
    [(BY_ERRORS, "errors"), (BY_CONNECTIONS, "connections")]
        .iter()
        .filter(|(bit, _)| cause & bit != 0)
        .map(|(_, n)| n.to_string())
        .collect()
}
