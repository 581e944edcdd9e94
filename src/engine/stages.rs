//! Stages: per-workload steps of connections and pace over time.
//!
//! The control thread keeps one [`StageRun`] per staged workload and asks
//! [`due`] each tick which steps have begun; the answer is the commands to
//! send the workers and a line for the log. Pure: no threads, no clock.

use std::time::Duration;

use super::worker::{Command, StageCmd};
use crate::plan::{Plan, Workload};

/// Where a workload is in its stages.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct StageRun {
    /// The workload's index in the plan.
    pub(super) workload: usize,
    /// The step it is in.
    pub(super) index: usize,
    /// Run time at which that step ends.
    pub(super) ends_at: Duration,
}

impl StageRun {
    /// The first step of `w`, begun at `now` (`None` without stages).
    pub(super) fn start(workload: usize, w: &Workload, now: Duration) -> Option<StageRun> {
        w.stages.first().map(|first| StageRun {
            workload,
            index: 0,
            ends_at: now + first.hold,
        })
    }
}

/// The command that sets workload `wi` to `connections` at `model`'s pace.
pub(super) fn load_command(wi: usize, connections: u32, model: crate::plan::LoadModel) -> Command {
    Command::Stage(StageCmd {
        workload: wi as u16,
        connections,
        model,
    })
}

/// Moves every workload whose step is over to its next one; returns the
/// commands for the workers and a note per step begun.
pub(super) fn due(plan: &Plan, runs: &mut [StageRun], elapsed: Duration) -> (Vec<Command>, Vec<String>) {
    let (mut cmds, mut notes) = (Vec::new(), Vec::new());
    for r in runs.iter_mut() {
        let w = &plan.workloads[r.workload];
        while elapsed >= r.ends_at && r.index + 1 < w.stages.len() {
            r.index += 1;
            let st = w.stages[r.index];
            r.ends_at += st.hold;
            cmds.push(load_command(r.workload, st.connections, st.model));
            notes.push(format!(
                "{}: stage {} of {}: {} connections, {}",
                w.name,
                r.index + 1,
                w.stages.len(),
                st.connections,
                st.model
            ));
        }
    }
    (cmds, notes)
}

/// True when the workloads that stop after their stages (`then = "stop"`)
/// exist and have all finished their last step.
pub(super) fn all_stopped(plan: &Plan, runs: &[StageRun], elapsed: Duration) -> bool {
    let stopping = || runs.iter().filter(|r| plan.workloads[r.workload].then_stop);
    stopping().next().is_some()
        && stopping().all(|r| r.index + 1 == plan.workloads[r.workload].stages.len() && elapsed >= r.ends_at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        let text = r#"
[[workload]]
name = "a"
url = "http://127.0.0.1:1/"
stages = [{ connections = 10, hold = "1s" }, { connections = 30, interval = "1s", hold = "2s" }]
then = "stop"
"#;
        crate::config::parse(std::path::Path::new("t.toml"), text, Default::default()).unwrap()
    }

    #[test]
    fn steps_begin_on_time_and_stop_after_the_last() {
        let p = plan();
        let mut runs = vec![StageRun::start(0, &p.workloads[0], Duration::ZERO).unwrap()];
        let (cmds, _) = due(&p, &mut runs, Duration::from_millis(999));
        assert!(cmds.is_empty());
        let (cmds, notes) = due(&p, &mut runs, Duration::from_secs(1));
        assert_eq!(cmds.len(), 1);
        assert!(notes[0].contains("stage 2 of 2: 30 connections"), "{notes:?}");
        assert!(!all_stopped(&p, &runs, Duration::from_millis(2999)));
        assert!(all_stopped(&p, &runs, Duration::from_secs(3)));
    }
}
