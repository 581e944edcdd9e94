//! What a reload changes: the difference between the running plan and a
//! freshly loaded one, as a list the control thread applies.
//!
//! Workloads are matched by name. An unchanged one is left alone (its
//! connections stay up); a changed one gets new settings and load; a new
//! one is added; a missing one drains. Pure, so every case is a unit test.

use crate::plan::{Plan, Workload};

/// One workload's change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Change {
    /// Running workload `old` becomes `new` (indexes into the two plans).
    Changed {
        /// Index in the running plan.
        old: usize,
        /// Index in the new plan.
        new: usize,
        /// Anything but connections, pace and stages changed (request,
        /// target, timeouts, churn, pipeline).
        settings: bool,
        /// Its stages changed: they start over from the first step.
        staged: bool,
        /// The change recycles the open connections (see [`recycles`]).
        recycle: bool,
    },
    /// Workload `new` of the new plan is not running yet.
    Added {
        /// Index in the new plan.
        new: usize,
    },
    /// Running workload `old` is gone from the file: it drains.
    Removed {
        /// Index in the running plan.
        old: usize,
    },
}

/// The changes, and whether settings that only a restart applies differ.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Diff {
    /// Per workload, in the new plan's order, then the removals.
    pub(super) changes: Vec<Change>,
    /// Threads, the metrics address or the HDR log path differ.
    pub(super) needs_restart: bool,
}

/// The difference between `old` (running) and `new` (just loaded).
pub(super) fn diff(old: &Plan, new: &Plan) -> Diff {
    let mut changes = Vec::new();
    let mut kept = vec![false; old.workloads.len()];
    for (ni, nw) in new.workloads.iter().enumerate() {
        match old.workloads.iter().position(|w| w.name == nw.name) {
            Some(oi) => {
                kept[oi] = true;
                let ow = &old.workloads[oi];
                let settings = !same_settings(ow, nw);
                let recycle = recycles(ow, nw);
                let load = ow.connections != nw.connections || ow.model != nw.model;
                let staged = ow.stages != nw.stages || ow.then_stop != nw.then_stop;
                if settings || load || staged {
                    changes.push(Change::Changed {
                        old: oi,
                        new: ni,
                        settings,
                        staged,
                        recycle,
                    });
                }
            }
            None => changes.push(Change::Added { new: ni }),
        }
    }
    for (oi, kept) in kept.into_iter().enumerate() {
        let w = &old.workloads[oi];
        // A workload removed by an earlier reload is already draining.
        let drained = w.connections == 0 && w.stages.is_empty();
        if !(kept || drained) {
            changes.push(Change::Removed { old: oi });
        }
    }
    Diff {
        changes,
        needs_restart: new.threads != old.threads
            || new.metrics_listen != old.metrics_listen
            || new.hdr_log != old.hdr_log
            || new.hdr_log_interval != old.hdr_log_interval
            || new.shard != old.shard
            || new.baseline != old.baseline
            || new.outages != old.outages
            || new.events != old.events
            || thresholds_differ(old, new),
    }
}

/// Thresholds are set up once, at the start (gauges, abort timers), so a
/// changed one waits for the next start.
fn thresholds_differ(old: &Plan, new: &Plan) -> bool {
    let per_workload = |p: &Plan| -> Vec<(String, Vec<crate::plan::Threshold>)> {
        p.workloads
            .iter()
            .filter(|w| !w.thresholds.is_empty())
            .map(|w| (w.name.clone(), w.thresholds.clone()))
            .collect()
    };
    new.thresholds != old.thresholds
        || new.threshold_window != old.threshold_window
        || new.abort_on_fail != old.abort_on_fail
        || per_workload(old) != per_workload(new)
}

/// True when the two differ at most in connections, pace and stages.
/// Whether the change from `a` to `b` recycles the workload's open
/// connections: what they connect to or send changed (the target: URL,
/// requests with their checks, TLS, the WebSocket plan), or a setting
/// declared `reload recycle` (`config::settings`: its recycle key). The
/// rule is derived from the declarations, not a list kept here.
fn recycles(a: &Workload, b: &Workload) -> bool {
    a.target != b.target || a.recycle_key != b.recycle_key
}

fn same_settings(a: &Workload, b: &Workload) -> bool {
    let mut b = b.clone();
    b.connections = a.connections;
    b.model = a.model;
    b.stages.clone_from(&a.stages);
    b.then_stop = a.then_stop;
    b.thresholds.clone_from(&a.thresholds);
    b == *a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(text: &str) -> Plan {
        crate::config::parse(std::path::Path::new("t.toml"), text, Default::default()).unwrap()
    }

    const A: &str = "[[workload]]\nname = \"a\"\nurl = \"http://127.0.0.1:1/\"\nconnections = 10\n";
    const B: &str = "[[workload]]\nname = \"b\"\nurl = \"http://127.0.0.1:2/\"\nconnections = 5\n";

    #[test]
    fn unchanged_file_changes_nothing() {
        let p = plan(&format!("{A}{B}"));
        assert_eq!(diff(&p, &p.clone()), Diff::default());
    }

    #[test]
    fn load_settings_added_removed() {
        let old = plan(&format!("{A}{B}"));
        let more = plan(&format!("{}{B}", A.replace("connections = 10", "connections = 20")));
        assert_eq!(
            diff(&old, &more).changes,
            vec![Change::Changed {
                old: 0,
                new: 0,
                settings: false,
                staged: false,
                recycle: false
            }]
        );
        let deeper = plan(&format!("{A}pipeline = 4\n{B}"));
        assert_eq!(
            diff(&old, &deeper).changes,
            vec![Change::Changed {
                old: 0,
                new: 0,
                settings: true,
                staged: false,
                recycle: false
            }]
        );
        // A setting declared `reload recycle` (here `http`), or a change of
        // what is sent, recycles; a live one (the pipeline above) does not.
        let http2 = plan(&format!("{A}http = \"2\"\n{B}"));
        let method = plan(&format!("{A}method = \"HEAD\"\n{B}"));
        let timeout = plan(&format!("{A}request_timeout = \"9s\"\n{B}"));
        for (p, recycles) in [(&http2, true), (&method, true), (&timeout, false)] {
            let changes = diff(&old, p).changes;
            assert!(
                matches!(changes[..], [Change::Changed { settings: true, recycle, .. }] if recycle == recycles),
                "{changes:?}"
            );
        }
        let c = B.replace("\"b\"", "\"c\"");
        let swapped = plan(&format!("{A}{c}"));
        assert_eq!(
            diff(&old, &swapped).changes,
            vec![Change::Added { new: 1 }, Change::Removed { old: 1 }]
        );
        let threads = plan(&format!("threads = 7\n{A}{B}"));
        assert!(diff(&old, &threads).needs_restart);
        let mut sharded = old.clone();
        sharded.shard = crate::plan::Shard { index: 0, count: 2 };
        assert!(diff(&old, &sharded).needs_restart);
        // Outage rules and events are set up at the start.
        let settle = plan(&format!("outage_settle = \"9s\"\n{A}{B}"));
        assert!(diff(&old, &settle).needs_restart);
        let event = plan(&format!(
            "[[event]]\nname = \"e\"\nat = \"1m\"\nrun = [\"true\"]\n{A}{B}"
        ));
        assert!(diff(&old, &event).needs_restart);
        assert!(diff(&old, &event).changes.is_empty(), "the workloads stay");
    }

    #[test]
    fn a_drained_workload_is_not_removed_twice() {
        let mut old = plan(&format!("{A}{B}"));
        old.workloads[1].connections = 0;
        let new = plan(A);
        assert!(diff(&old, &new).changes.is_empty());
    }
}
