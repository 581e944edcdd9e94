//! Changes the control thread asks of a running worker: a stage begins,
//! a reload changed a workload's settings, or added one.
//!
//! They arrive through the worker's command queue, looked at only when the
//! control thread bumps `commands_sent`, so the loop pays nothing for them
//! in between.

use std::collections::VecDeque;

use super::conn::{Conn, Inflight, Ramp, State, grid_due};
use super::{Command, StageCmd, Worker, WorkloadRt};
use crate::stats::{CloseReason, Gauges, WorkloadStats};

impl Worker {
    /// Applies the stage changes the control thread queued.
    pub(super) fn apply_commands(&mut self, now: u64) {
        let cmds: Vec<Command> = {
            let mut q = self.shared.commands[self.index]
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            std::mem::take(&mut *q)
        };
        for cmd in cmds {
            match cmd {
                Command::Stage(stage) => self.apply_stage(stage, now),
                Command::Settings(wi, rt, recycle) => self.apply_settings(wi as usize, *rt, recycle, now),
                Command::Add(rt) => self.add_workload(*rt, now),
            }
        }
    }

    /// New settings for a workload. With `recycle` (what the connections
    /// send or how they connect changed: see `engine::reload`) they are
    /// recycled after their requests in flight (as churn); otherwise they
    /// carry on.
    pub(super) fn apply_settings(&mut self, wi: usize, mut rt: WorkloadRt, recycle: bool, now: u64) {
        let old = &self.wl[wi];
        // The pace stays (a `Stage` with the reloaded one follows), but its
        // lane step is derived again: `--streams` may have changed.
        rt.set_load(old.connections, old.model);
        let deeper = rt.depth() > self.max_pipeline;
        self.local[wi].set_requests(rt.requests.len());
        self.wl[wi] = rt;
        if deeper {
            self.grow_pipeline(self.wl[wi].depth());
            return;
        }
        if !recycle {
            return;
        }
        let keys: Vec<usize> = self
            .conns
            .iter()
            .filter(|(_, c)| c.workload as usize == wi && !c.retiring && c.state == State::Open)
            .map(|(k, _)| k)
            .collect();
        for key in keys {
            let c = &mut self.conns[key];
            c.draining = true;
            if c.proto.in_flight() == 0 {
                self.close(key, CloseReason::Churn, now);
                self.reconnect(key, now);
            }
        }
    }

    /// Re-sizes the in-flight ring for a deeper pipeline. Every slot's
    /// entries move to the new layout in order (oldest first), so requests
    /// in flight on any workload keep their due times and are answered as
    /// usual; nothing is closed or counted as lost. Runs once per reload.
    pub(super) fn grow_pipeline(&mut self, depth: usize) {
        let old_depth = self.max_pipeline;
        let mut ring = vec![Inflight::default(); self.conns.capacity().max(1) * depth];
        for (key, c) in self.conns.iter_mut() {
            c.proto.relayout(
                &self.inflight[key * old_depth..(key + 1) * old_depth],
                &mut ring[key * depth..(key + 1) * depth],
            );
        }
        self.max_pipeline = depth;
        self.inflight = ring;
    }

    /// A workload added by a reload: it takes the next index everywhere.
    pub(super) fn add_workload(&mut self, mut rt: WorkloadRt, now: u64) {
        let (connections, model) = (rt.connections, rt.model);
        rt.connections = 0;
        let deeper = rt.depth() > self.max_pipeline;
        let depth = rt.depth();
        self.wl.push(rt);
        if deeper {
            self.grow_pipeline(depth);
        }
        self.local
            .push(WorkloadStats::with_requests(self.wl[self.wl.len() - 1].requests.len()));
        self.gauges.push(Gauges::default());
        self.full_at.push(None);
        self.ramp.push(Ramp {
            queue: VecDeque::new(),
            rate: 0.001,
            tokens: 1.0,
            last: now,
        });
        let workload = (self.wl.len() - 1) as u16;
        self.apply_stage(
            StageCmd {
                workload,
                connections,
                model,
            },
            now,
        );
    }

    /// A workload's connections or pacing changed. Slots past the new count
    /// retire (after their requests in flight), new slots join the ramp
    /// queue, and every remaining slot re-joins the schedule's grid.
    pub(super) fn apply_stage(&mut self, cmd: StageCmd, now: u64) {
        let wi = cmd.workload as usize;
        let old = self.wl[wi].connections;
        self.wl[wi].set_load(cmd.connections, cmd.model);
        let keys: Vec<usize> = self
            .conns
            .iter()
            .filter(|(_, c)| c.workload as usize == wi && !c.retiring)
            .map(|(k, _)| k)
            .collect();
        let mut mine = 0u64;
        for key in keys {
            let c = &mut self.conns[key];
            if c.slot >= cmd.connections {
                self.retire(key, now);
                continue;
            }
            mine += 1;
            c.next_due = 0;
            if c.state == State::Open {
                if let Some(step) = c.proto.step(&self.wl[wi]) {
                    c.next_due = grid_due(c.slot, cmd.connections, step, now);
                }
                self.serve(key, now);
            }
        }
        for slot in old..cmd.connections {
            if crate::engine::deal::worker_of(self.shard, slot, self.threads) != Some(self.index) {
                continue;
            }
            mine += 1;
            let key = self.conns.insert(Conn::new(cmd.workload, slot, &self.wl[wi]));
            self.ramp[wi].queue.push_back(key as u32);
            self.gauges[wi].desired += 1;
            self.gauges[wi].backoff += 1;
        }
        let rate = self.wl[wi].ramp as f64 * mine as f64 / cmd.connections.max(1) as f64;
        self.ramp[wi].rate = rate.max(0.001);
    }
}
