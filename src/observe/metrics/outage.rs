//! The outage and event families: whether a target is in an outage now,
//! how many it had and what the last one cost (`soakd_outage_*`), and the
//! run's events (`soakd_event_*`), which the Grafana dashboard draws as
//! annotations. Declared like the rest in [`super`]'s table, from the same
//! snapshot; every target's outage series exist from the first scrape, as
//! does every event the plan runs.
//!
//! Event names come from outside too (`SIGUSR2`, `--event-socket`), so
//! the `name` label is bounded: the first [`MAX_NAMES`] names get their
//! own series, later ones are counted under `name="other"`.

use prometheus::proto::{self, MetricType};

use super::{Family, Fill, value};
use crate::stats::{EventRecord, Totals};

/// Most event names with series of their own.
pub const MAX_NAMES: usize = 20;
/// The name later ones are counted under.
const OTHER: &str = "other";

/// One target's outage figures as of the last update.
#[derive(Clone, Debug, Default)]
pub struct OutageSnapshot {
    /// In an outage now.
    pub active: bool,
    /// Outages so far (the one going on included).
    pub count: u64,
    /// The last one that ended: its duration, reconnect and recovery
    /// times (NaN: not measured, or not reconnected or recovered yet; 0
    /// before any outage).
    pub last: [f64; 3],
}

impl OutageSnapshot {
    /// Workload `wi`'s figures of `t`.
    pub fn of(t: &Totals, wi: usize) -> OutageSnapshot {
        let last = match t.outages.last_ended(wi) {
            Some(o) => [
                o.duration_seconds,
                o.reconnect_seconds.unwrap_or(f64::NAN),
                o.recovery_seconds.unwrap_or(f64::NAN),
            ],
            None => [0.0; 3],
        };
        OutageSnapshot {
            active: t.outages.active(wi),
            count: t.outages.count(wi),
            last,
        }
    }
}

/// One event name's figures.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EventSnapshot {
    /// The `name` label.
    pub name: String,
    /// Where its first occurrence came from: `command`, `signal`,
    /// `socket`.
    pub source: String,
    /// Occurrences (commands started, marks).
    pub count: u64,
    /// Commands that did not exit 0 (or did not start, or timed out).
    pub failures: u64,
}

/// The events by name: those the plan runs first (at 0 until they run),
/// then the others in the order they came, the names past
/// [`MAX_NAMES`] folded into `other`.
pub fn events_by_name(planned: &[String], events: &[EventRecord]) -> Vec<EventSnapshot> {
    let mut out: Vec<EventSnapshot> = Vec::new();
    let slot = |out: &mut Vec<EventSnapshot>, name: &str, source: &str| -> usize {
        if let Some(i) = out.iter().position(|e| e.name == name) {
            return i;
        }
        let (name, source) = if out.len() + 1 >= MAX_NAMES {
            (OTHER, "mixed")
        } else {
            (name, source)
        };
        match out.iter().position(|e| e.name == name) {
            Some(i) => i,
            None => {
                out.push(EventSnapshot {
                    name: name.to_string(),
                    source: source.to_string(),
                    ..EventSnapshot::default()
                });
                out.len() - 1
            }
        }
    };
    for name in planned {
        slot(&mut out, name, "command");
    }
    for e in events {
        let i = slot(&mut out, &e.name, &e.source);
        out[i].count += 1;
        if e.end.is_some() && !e.ok() {
            out[i].failures += 1;
        }
    }
    out
}

/// One series per event name, of `v`.
fn by_name(kind: MetricType, snap: &super::Snapshot, out: &mut Vec<proto::Metric>, v: fn(&EventSnapshot) -> u64) {
    for e in &snap.events {
        out.push(value(kind, &[("name", &e.name)], v(e) as f64));
    }
}

/// The outage and event families.
pub(super) const FAMILIES: &[Family] = &[
    Family {
        name: "soakd_outage_active",
        help: "1 while the target is in an outage (errors over --outage-errors of attempts, or open connections under --outage-open of those desired, until both stayed back for --outage-settle), else 0.",
        kind: MetricType::GAUGE,
        labels: &["target"],
        fill: Fill::Target(|x, out| out.push(x.one(u64::from(x.w.outage.active)))),
    },
    Family {
        name: "soakd_outages_total",
        help: "Outages found so far (counted when one begins).",
        kind: MetricType::COUNTER,
        labels: &["target"],
        fill: Fill::Target(|x, out| out.push(x.one(x.w.outage.count))),
    },
    Family {
        name: "soakd_outage_last_duration_seconds",
        help: "How long the last outage that ended lasted (0 before any).",
        kind: MetricType::GAUGE,
        labels: &["target"],
        fill: Fill::Target(|x, out| out.push(value(x.kind, &[("target", x.t)], x.w.outage.last[0]))),
    },
    Family {
        name: "soakd_outage_last_reconnect_seconds",
        help: "After the last outage ended: the time until every desired connection was open again (NaN until then; 0 before any outage).",
        kind: MetricType::GAUGE,
        labels: &["target"],
        fill: Fill::Target(|x, out| out.push(value(x.kind, &[("target", x.t)], x.w.outage.last[1]))),
    },
    Family {
        name: "soakd_outage_last_recovery_seconds",
        help: "After the last outage ended: the time until a second's latency p99 was back within tolerance of the minute before it (NaN until then; 0 before any outage).",
        kind: MetricType::GAUGE,
        labels: &["target"],
        fill: Fill::Target(|x, out| out.push(value(x.kind, &[("target", x.t)], x.w.outage.last[2]))),
    },
    Family {
        name: "soakd_event_info",
        help: "Always 1, one series per event name (commands the run runs, marks from SIGUSR2 or --event-socket; past 20 names: name=\"other\"); source says where its first one came from.",
        kind: MetricType::GAUGE,
        labels: &["name", "source"],
        fill: Fill::Global(|kind, snap, out| {
            for e in &snap.events {
                out.push(value(kind, &[("name", &e.name), ("source", &e.source)], 1.0));
            }
        }),
    },
    Family {
        name: "soakd_events_total",
        help: "Events by name: commands started and marks received (the dashboard's annotations).",
        kind: MetricType::COUNTER,
        labels: &["name"],
        fill: Fill::Global(|kind, snap, out| by_name(kind, snap, out, |e| e.count)),
    },
    Family {
        name: "soakd_event_failures_total",
        help: "Event commands that did not exit 0 (a non-zero exit, a signal, a timeout, a failed start).",
        kind: MetricType::COUNTER,
        labels: &["name"],
        fill: Fill::Global(|kind, snap, out| by_name(kind, snap, out, |e| e.failures)),
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(name: &str, source: &str, exit: Option<i32>) -> EventRecord {
        EventRecord {
            name: name.into(),
            source: source.into(),
            end: exit.map(|_| 1.0),
            exit_code: exit,
            command: if source == "command" {
                vec!["x".into()]
            } else {
                Vec::new()
            },
            ..EventRecord::default()
        }
    }

    #[test]
    fn names_are_bounded_and_planned_ones_exist_from_the_start() {
        let planned = vec!["deploy".to_string()];
        let none = events_by_name(&planned, &[]);
        assert_eq!(none.len(), 1);
        assert_eq!((none[0].count, none[0].failures), (0, 0));
        let mut events = vec![ev("deploy", "command", Some(0)), ev("deploy", "command", Some(2))];
        events.push(ev("ci", "socket", None));
        for i in 0..50 {
            events.push(ev(&format!("m{i}"), "socket", None));
        }
        let by = events_by_name(&planned, &events);
        assert_eq!(by.len(), MAX_NAMES);
        assert_eq!((by[0].name.as_str(), by[0].count, by[0].failures), ("deploy", 2, 1));
        assert_eq!((by[1].name.as_str(), by[1].source.as_str()), ("ci", "socket"));
        let other = by.last().unwrap();
        assert_eq!(other.name, "other");
        assert_eq!(other.count, 50 - (MAX_NAMES as u64 - 3));
    }
}
