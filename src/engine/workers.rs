//! The worker threads as one value that cannot be leaked.
//!
//! [`Workers`] spawns the threads, carries their wakers and handles, and
//! changes their phase. Dropping it (an early return on a setup or poll
//! error, a panic on the control thread) tells every spawned worker to exit
//! and joins it, so no error path leaves a thread connecting on its own.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

use mio::{Poll, Waker};

use super::deal::{Share, deal};
use super::worker::{Command, PHASE_EXIT, Shared, WAKER, Worker, WorkerSpec, WorkloadRt, socket};
use crate::plan::Plan;
use crate::{Error, preflight};

/// The running worker threads.
pub(super) struct Workers {
    /// What they share with the control thread.
    pub(super) shared: Arc<Shared>,
    wakers: Vec<Waker>,
    handles: Vec<JoinHandle<std::io::Result<()>>>,
}

impl Workers {
    /// Deals `plan` to `threads` workers and starts them. On an error the
    /// ones already started are stopped again (by `Drop`).
    pub(super) fn spawn(plan: &Plan, threads: usize, shared: Arc<Shared>) -> Result<Workers, Error> {
        let wl: Vec<WorkloadRt> = plan.workloads.iter().map(WorkloadRt::of).collect();
        let mut workers = Workers {
            shared,
            wakers: Vec::with_capacity(threads),
            handles: Vec::with_capacity(threads),
        };
        for (index, Share { slots, budget, ramp }) in deal(plan, threads).into_iter().enumerate() {
            // The mailbox knows the worker's share before its first flush,
            // so an early aggregation never takes a worker for one without
            // slots (and its ramp as done).
            {
                let mut mb = workers.shared.mailboxes[index]
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                for &(wi, _) in &slots {
                    mb.gauges[wi as usize].desired += 1;
                    mb.gauges[wi as usize].backoff += 1;
                }
            }
            let poll = Poll::new().map_err(|e| Error::io("creating a worker poll", e))?;
            let waker = Waker::new(poll.registry(), WAKER).map_err(|e| Error::io("creating a waker", e))?;
            let ports = preflight::local_port_range()
                .and_then(|(lo, hi)| socket::PortPicker::new(lo, hi, index, threads, fastrand::u32(..)))
                .map(|mut p| {
                    p.reserve(preflight::reserved_ports());
                    p
                });
            let spec = WorkerSpec {
                index,
                poll,
                slots,
                budget,
                ramp,
                ports,
                threads,
                shard: plan.shard,
            };
            let worker = Worker::new(spec, workers.shared.clone(), wl.clone())
                .map_err(|e| Error::io("setting up a worker", e))?;
            let handle = std::thread::Builder::new()
                .name(format!("soakd-worker-{index}"))
                .spawn(move || worker.run())
                .map_err(|e| Error::io("starting a worker thread", e))?;
            workers.wakers.push(waker);
            workers.handles.push(handle);
        }
        Ok(workers)
    }

    /// Moves every worker to `phase` and wakes it to see it.
    pub(super) fn set_phase(&self, phase: u8) {
        self.shared.phase.store(phase, Ordering::Release);
        self.wake();
    }

    /// Hands the workers the outage mask (see `worker/probe.rs`) and
    /// wakes them to see it.
    pub(super) fn set_outage(&self, mask: u64) {
        self.shared.outage.store(mask, Ordering::Release);
        self.wake();
    }

    /// Wakes every worker (new commands, a new phase).
    pub(super) fn wake(&self) {
        for w in &self.wakers {
            let _ = w.wake();
        }
    }

    /// Queues `cmds` for every worker and wakes them.
    pub(super) fn send(&self, cmds: &[Command]) {
        if cmds.is_empty() {
            return;
        }
        for q in &self.shared.commands {
            q.lock().unwrap_or_else(|p| p.into_inner()).extend(cmds.iter().cloned());
        }
        self.shared.commands_sent.fetch_add(1, Ordering::Release);
        self.wake();
    }

    /// True when a worker returned on its own, which only a failure does.
    pub(super) fn any_finished(&self) -> bool {
        self.handles.iter().any(|h| h.is_finished())
    }

    /// Tells every worker to exit and waits for it; the first failure wins.
    pub(super) fn join(&mut self) -> Result<(), Error> {
        self.set_phase(PHASE_EXIT);
        let mut failure = Ok(());
        for h in self.handles.drain(..) {
            let outcome = match h.join() {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(Error::io("worker event loop", e)),
                Err(_) => Err(Error::Internal("a worker thread panicked".into())),
            };
            if failure.is_ok() {
                failure = outcome;
            }
        }
        failure
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        if !self.handles.is_empty() {
            let _ = self.join();
        }
    }
}
