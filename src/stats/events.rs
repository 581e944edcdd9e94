//! What happened to the target during a run, as soakd recorded it: the
//! commands it ran at a time (a deploy, a stop) and the events marked from
//! outside (`SIGUSR2`, `--event-socket`), and which of them each outage
//! and latency excursion is attributed to.
//!
//! The records are data (the observers fill them in as commands start and
//! end); the report lists them and the HTML page draws them on every time
//! chart.

use serde::{Deserialize, Serialize};

use super::{Excursion, Outage};

/// One event of the run (times in seconds since the run started).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct EventRecord {
    /// Its name.
    pub name: String,
    /// Where it came from: `command` (soakd ran it), `signal` (SIGUSR2)
    /// or `socket` (a line on `--event-socket`).
    pub source: String,
    /// When it started (a mark: when it came).
    pub at: f64,
    /// When its command ended; `null` for a mark, or a command still
    /// running when the report was made.
    pub end: Option<f64>,
    /// The command's exit code, when it exited.
    pub exit_code: Option<i32>,
    /// How it ended, in words: `exit 0`, `exit 3`, `killed by signal 9`,
    /// `timed out after 10m (killed)`, `could not start: …`, `running`,
    /// `marked`.
    pub status: String,
    /// The program and its arguments (empty for a mark).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// The file its output went to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
}

impl EventRecord {
    /// The command ran and exited with code 0 (a mark is fine too).
    pub fn ok(&self) -> bool {
        self.command.is_empty() || self.exit_code == Some(0)
    }
}

/// What happened to the target during a run: the outages and latency
/// excursions found, and the events. The report carries it (flattened:
/// its `outages`, `excursions` and `events`), and so does a `--state`
/// checkpoint.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Disruptions {
    /// The outages, in the order they began.
    #[serde(default)]
    pub outages: Vec<Outage>,
    /// The latency excursions.
    #[serde(default)]
    pub excursions: Vec<Excursion>,
    /// The events: commands soakd ran, marks from outside.
    #[serde(default)]
    pub events: Vec<EventRecord>,
}

impl Disruptions {
    /// Attributes each outage and excursion to its nearest event within
    /// `window` seconds (see [`nearest`]).
    pub fn attribute(&mut self, window: f64) {
        attribute(&mut self.outages, &mut self.excursions, &self.events, window);
    }
}

/// The event an outage (or excursion) starting at `start` is attributed
/// to: among those that started within `window` seconds of it, the last
/// one at or before it, else the first one after it (a mark a CI job sends
/// once its deploy began); with the offset `start − event`.
pub fn nearest(start: f64, events: &[EventRecord], window: f64) -> Option<(&EventRecord, f64)> {
    let before = events
        .iter()
        .filter(|e| e.at <= start && start - e.at <= window)
        .max_by(|a, b| a.at.total_cmp(&b.at));
    let after = || {
        events
            .iter()
            .filter(|e| e.at > start && e.at - start <= window)
            .min_by(|a, b| a.at.total_cmp(&b.at))
    };
    before.or_else(after).map(|e| (e, start - e.at))
}

/// Attributes each outage and excursion to its nearest event (see
/// [`nearest`]).
pub fn attribute(outages: &mut [Outage], excursions: &mut [Excursion], events: &[EventRecord], window: f64) {
    for o in outages {
        (o.event, o.event_offset_seconds) = match nearest(o.start, events, window) {
            Some((e, off)) => (Some(e.name.clone()), Some(off)),
            None => (None, None),
        };
    }
    for x in excursions {
        (x.event, x.event_offset_seconds) = match nearest(x.start, events, window) {
            Some((e, off)) => (Some(e.name.clone()), Some(off)),
            None => (None, None),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(name: &str, at: f64) -> EventRecord {
        EventRecord {
            name: name.into(),
            at,
            ..EventRecord::default()
        }
    }

    #[test]
    fn the_nearest_event_within_the_window() {
        let events = [ev("deploy", 10.0), ev("failover", 100.0), ev("mark", 205.0)];
        let at = |s: f64| nearest(s, &events, 60.0).map(|(e, off)| (e.name.as_str(), off));
        assert_eq!(at(10.5), Some(("deploy", 0.5)));
        assert_eq!(at(69.0), Some(("deploy", 59.0)));
        assert_eq!(
            at(71.0),
            Some(("failover", -29.0)),
            "none before within 60 s: the next one"
        );
        assert_eq!(at(101.0), Some(("failover", 1.0)), "the last one before wins");
        assert_eq!(at(200.0), Some(("mark", -5.0)));
        assert_eq!(at(400.0), None);
        let mut outages = vec![Outage {
            start: 11.0,
            ..Outage::default()
        }];
        let mut excursions = vec![Excursion {
            start: 300.0,
            ..Excursion::default()
        }];
        attribute(&mut outages, &mut excursions, &events, 60.0);
        assert_eq!(
            (outages[0].event.as_deref(), outages[0].event_offset_seconds),
            (Some("deploy"), Some(1.0))
        );
        assert_eq!(excursions[0].event, None);
    }
}
