//! The running totals as data: what a `--state` checkpoint carries across
//! a restart, and how a histogram is written in it.
//!
//! A checkpoint is taken on the control thread and written on another
//! (see `state`), so taking one must be cheap: [`Totals::saved`] clones
//! the cumulative counters, the full-run histograms and the timeline's
//! points (a few MB at most, a memory copy; [`Totals::saved_reusing`]
//! copies the histograms into the last checkpoint's, handed back by the
//! writer), and the expensive part, the encoding, happens later through
//! serde on the writer's thread. The
//! structs are the ones the report is built from ([`WorkloadStats`],
//! [`Counters`](super::Counters), the timeline's points), serialized as
//! they are, so a counter another protocol adds is carried without a list
//! of its own here.
//!
//! Histograms are written in HdrHistogram's compressed V2 encoding
//! (deflate, then base64): a 3-digit histogram of soakd's range is about
//! 190 KB in memory and a few hundred bytes encoded, and the encoding is
//! the one the HDR interval log and every HdrHistogram library read.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::timeline::TimelineSaved;
use super::{Disruptions, Totals, WorkloadStats};

/// One restart of a soak that continued from a checkpoint: the report's
/// `resumed` list.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Restart {
    /// When the run continued, seconds since it started.
    pub at: f64,
    /// Run time lost: from the last checkpoint to the restart, seconds.
    /// What happened in it (requests, latencies) is not in the report;
    /// the timeline marks it as a `gap`.
    pub lost_seconds: f64,
}

/// Everything of [`Totals`] that outlives the process. Levels (connections
/// open now), the metrics' windows and the interval histograms of the HDR
/// log start over; counts and full-run histograms continue.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TotalsSaved {
    /// Workload names, in plan order.
    pub names: Vec<String>,
    /// Per workload: its requests' names.
    pub requests: Vec<Vec<String>>,
    /// Cumulative counters and histograms.
    pub stats: Vec<WorkloadStats>,
    /// Most connections open at once.
    pub peak_open: Vec<u64>,
    /// Time from the start until every slot was first open.
    pub ramp: Vec<Option<Duration>>,
    /// Fewest connections open after the ramp.
    pub open_min: Vec<Option<u64>>,
    /// The same over all workloads.
    pub open_min_all: Option<u64>,
    /// The timeline.
    pub timeline: TimelineSaved,
    /// The restarts so far.
    pub resumed: Vec<Restart>,
    /// The outages, excursions and events so far.
    #[serde(flatten)]
    pub disruptions: Disruptions,
    /// The server watch's sources' read counts.
    #[serde(default)]
    pub watch_sources: Vec<super::series::SourceStats>,
}

impl Totals {
    /// The totals as data for a checkpoint (a copy; see the module doc).
    pub fn saved(&self) -> TotalsSaved {
        TotalsSaved {
            names: self.names.clone(),
            requests: self.requests.clone(),
            stats: self.stats.clone(),
            peak_open: self.peak_open.clone(),
            ramp: self.ramp.clone(),
            open_min: self.open_min.clone(),
            open_min_all: self.open_min_all,
            timeline: self.timeline.saved(),
            resumed: self.resumed.clone(),
            disruptions: self.disruptions(),
            watch_sources: self.watch_sources.clone(),
        }
    }

    /// [`Totals::saved`] into the buffers of an earlier copy (`reuse`, one
    /// the state writer handed back once it was written): the histograms
    /// are overwritten in place, a memory copy into pages already mapped,
    /// where a fresh clone maps ~190 KB a histogram and faults each of its
    /// pages in, on the control thread, which shares a core with the
    /// workers (1–6 ms a checkpoint for one workload on the saturated VM,
    /// `SOAKD_STATE_DEBUG`). Anything of another shape is copied afresh.
    pub fn saved_reusing(&self, reuse: Option<TotalsSaved>) -> TotalsSaved {
        let Some(mut s) = reuse else { return self.saved() };
        s.stats.truncate(self.stats.len());
        for (i, src) in self.stats.iter().enumerate() {
            match s.stats.get_mut(i) {
                Some(d) => {
                    // Cleared, then added: an empty histogram of the same
                    // bounds takes the other's counts by one memory copy.
                    d.clear();
                    d.set_requests(src.requests.len());
                    d.add(src);
                }
                None => s.stats.push(src.clone()),
            }
        }
        s.names.clone_from(&self.names);
        s.requests.clone_from(&self.requests);
        s.peak_open.clone_from(&self.peak_open);
        s.ramp.clone_from(&self.ramp);
        s.open_min.clone_from(&self.open_min);
        s.open_min_all = self.open_min_all;
        self.timeline.save_into(&mut s.timeline);
        s.resumed.clone_from(&self.resumed);
        s.disruptions = self.disruptions();
        s.watch_sources.clone_from(&self.watch_sources);
        s
    }

    /// Continues from `s`, checkpointed at run time `checkpoint_at`, the
    /// run now being at `now` (since its original start): counts and
    /// histograms continue, the timeline marks the time in between as a
    /// gap, and the restart is listed. The workloads must be the ones `s`
    /// was saved with (the state's plan digest makes sure); a workload
    /// missing from `s` starts at zero.
    pub fn restore(&mut self, s: TotalsSaved, checkpoint_at: Duration, now: Duration) {
        let now = now.max(checkpoint_at);
        for (wi, name) in s.names.iter().enumerate() {
            let Some(i) = self.names.iter().position(|n| n == name) else {
                continue;
            };
            self.stats[i] = s.stats[wi].clone();
            self.stats[i].set_requests(self.requests[i].len().max(s.requests[wi].len()));
            self.peak_open[i] = s.peak_open[wi];
            self.ramp[i] = s.ramp[wi];
            self.open_min[i] = s.open_min[wi];
            // Connections start over: the lows of the new ramp are not
            // the server's, so they count once the workload is full again.
            self.reramping[i] = true;
        }
        self.open_min_all = s.open_min_all;
        self.timeline.restore(s.timeline, now);
        let d = s.disruptions;
        self.outages.restore(d.outages, d.excursions, now);
        self.events = d.events;
        // The sources' counts continue where the checkpoint left them
        // (the same sources: the plan digest holds the watch).
        for saved in s.watch_sources {
            match self.watch_sources.iter_mut().find(|w| w.source == saved.source) {
                Some(w) => *w = saved,
                None => self.watch_sources.push(saved),
            }
        }
        self.resumed = s.resumed;
        self.resumed.push(Restart {
            at: ms(now),
            lost_seconds: ms(now - checkpoint_at),
        });
    }
}

/// Seconds, rounded to the millisecond (as the timeline's).
fn ms(d: Duration) -> f64 {
    d.as_millis() as f64 / 1e3
}

/// `#[serde(with = "saved::hist")]`: a histogram as the base64 text of its
/// compressed V2 encoding.
pub mod hist {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use hdrhistogram::Histogram;
    use hdrhistogram::serialization::{Deserializer as HdrDe, Serializer as _, V2DeflateSerializer};
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes `h`.
    pub fn serialize<S: Serializer>(h: &Histogram<u64>, s: S) -> Result<S::Ok, S::Error> {
        let mut buf = Vec::new();
        V2DeflateSerializer::new()
            .serialize(h, &mut buf)
            .map_err(|e| serde::ser::Error::custom(format!("encoding a histogram: {e:?}")))?;
        s.serialize_str(&STANDARD.encode(&buf))
    }

    /// Reads a histogram written by [`serialize`].
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Histogram<u64>, D::Error> {
        let text = String::deserialize(d)?;
        let bytes = STANDARD
            .decode(text.as_bytes())
            .map_err(|e| serde::de::Error::custom(format!("a histogram's base64: {e}")))?;
        HdrDe::new()
            .deserialize(&mut bytes.as_slice())
            .map(crate::stats::growing)
            .map_err(|e| serde::de::Error::custom(format!("a histogram's encoding: {e:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{ErrorKind, histogram};

    #[test]
    fn a_histogram_round_trips_compactly() {
        let mut s = WorkloadStats::with_requests(2);
        for us in [1u64, 10, 1_000, 123_456, 3_000_000_000] {
            s.latency.record(us).unwrap();
        }
        s.counters.completed = 5;
        s.counters.error(ErrorKind::Reset, 2);
        s.requests[1].latency.record(42).unwrap();
        let json = serde_json::to_string(&s).unwrap();
        // Five histograms, all but one nearly empty: a few hundred bytes,
        // where the full arrays are ~190 KB each.
        assert!(json.len() < 2_000, "{} bytes: {json}", json.len());
        let back: WorkloadStats = serde_json::from_str(&json).unwrap();
        assert_eq!(back.counters, s.counters);
        assert_eq!(back.latency, s.latency);
        assert_eq!(back.requests[1].latency, s.requests[1].latency);
        // The histogram read back adds to a fresh one (same bounds).
        let mut h = histogram();
        h.add(&back.latency).unwrap();
        assert_eq!(h.len(), 5);
    }

    /// `v` with every encoded histogram written again from a fresh one.
    fn canonical(v: serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        match v {
            Value::String(s) if s.starts_with("HIST") => {
                let h: hdrhistogram::Histogram<u64> = hist::deserialize(Value::String(s)).unwrap();
                let mut fresh = histogram();
                fresh.add(&h).unwrap();
                hist::serialize(&fresh, serde_json::value::Serializer).unwrap()
            }
            Value::Array(a) => Value::Array(a.into_iter().map(canonical).collect()),
            Value::Object(o) => Value::Object(o.into_iter().map(|(k, v)| (k, canonical(v))).collect()),
            v => v,
        }
    }

    #[test]
    fn a_reused_copy_is_the_fresh_copy() {
        let mut t = Totals::new(vec!["a".into(), "b".into()], 1, false, false);
        t.set_requests(0, vec!["GET /".into(), "GET /x".into()]);
        t.stats[0].counters.completed = 3;
        t.stats[0].latency.record(1_000).unwrap();
        t.stats[0].requests[1].latency.record(7).unwrap();
        t.stats[1].lag.record(55).unwrap();
        t.timeline.tick(Duration::from_secs(2));
        // A reused histogram keeps the size its old values grew it to, so
        // its encoding names a larger range: compared by what it holds.
        let json = |s: &TotalsSaved| canonical(serde_json::to_value(s).unwrap()).to_string();
        // Reusing an older copy of other counts and another shape (one
        // workload fewer, one request more) gives what a fresh copy does.
        let mut old = Totals::new(vec!["a".into()], 1, false, false);
        old.set_requests(0, vec!["1".into(), "2".into(), "3".into()]);
        old.stats[0].latency.record(9_999).unwrap();
        old.stats[0].counters.completed = 99;
        assert_eq!(json(&t.saved_reusing(Some(old.saved()))), json(&t.saved()));
        // And the other way round: more workloads than now.
        let mut big = Totals::new(vec!["a".into(), "b".into(), "c".into()], 1, false, false);
        big.stats[2].connect.record(5).unwrap();
        assert_eq!(json(&t.saved_reusing(Some(big.saved()))), json(&t.saved()));
        assert_eq!(json(&t.saved_reusing(None)), json(&t.saved()));
    }

    #[test]
    fn restore_continues_counts_and_lists_the_restart() {
        let mut t = Totals::new(vec!["a".into()], 1, false, false);
        t.set_requests(0, vec!["GET /".into()]);
        t.stats[0].counters.completed = 7;
        t.stats[0].latency.record(1_000).unwrap();
        t.ramp[0] = Some(Duration::from_secs(1));
        t.timeline.tick(Duration::from_secs(3));
        let saved: TotalsSaved = serde_json::from_str(&serde_json::to_string(&t.saved()).unwrap()).unwrap();
        let mut u = Totals::new(vec!["a".into()], 1, false, false);
        u.set_requests(0, vec!["GET /".into()]);
        u.restore(saved, Duration::from_secs(3), Duration::from_millis(4_500));
        assert_eq!(u.stats[0].counters.completed, 7);
        assert_eq!(u.stats[0].latency.len(), 1);
        assert_eq!(u.ramp[0], Some(Duration::from_secs(1)));
        assert_eq!(
            u.resumed,
            [Restart {
                at: 4.5,
                lost_seconds: 1.5
            }]
        );
    }

    /// The outages, excursions and events found before a checkpoint are
    /// in the continued run's report, and its outages are counted on.
    #[test]
    fn outages_and_events_survive_a_restart() {
        let rules = crate::stats::outage::Rules {
            errors: 0.05,
            open: 0.9,
            settle: Duration::from_secs(5),
            tolerance: 0.1,
            min_latency_change: 0.001,
        };
        let mut t = Totals::new(vec!["a".into()], 1, false, false);
        t.outages = crate::stats::Outages::new(rules, [("a".to_string(), true)]);
        let mut d = t.disruptions();
        d.outages.push(crate::stats::Outage {
            workload: "a".into(),
            start: 12.0,
            end: Some(15.0),
            ..Default::default()
        });
        d.events.push(crate::stats::EventRecord {
            name: "deploy".into(),
            at: 11.5,
            ..Default::default()
        });
        t.outages.restore(d.outages.clone(), Vec::new(), Duration::ZERO);
        t.events = d.events.clone();
        let saved: TotalsSaved = serde_json::from_str(&serde_json::to_string(&t.saved()).unwrap()).unwrap();
        let mut u = Totals::new(vec!["a".into()], 1, false, false);
        u.outages = crate::stats::Outages::new(rules, [("a".to_string(), true)]);
        u.restore(saved, Duration::from_secs(30), Duration::from_secs(40));
        assert_eq!(u.disruptions(), d);
        assert_eq!(u.outages.count(0), 1);
    }
}
