//! Dealing a plan to the workers.
//!
//! Connection slots go to workers round-robin by slot index, which keeps
//! each worker's share of every workload (and of the schedule's phases)
//! even; the `--requests` budget and the ramp rates are split in
//! proportion. A sharded process deals only its shard's slots (slot `s`
//! is shard `s % N`'s), round-robin by their place among those, so the
//! workers of every shard stay as even as the workers of one process.

use crate::plan::{Plan, Shard};

/// The worker (of `threads`) that holds `slot` in this process, or `None`
/// when the slot belongs to another shard.
pub(super) fn worker_of(shard: Shard, slot: u32, threads: usize) -> Option<usize> {
    shard.owns(slot).then(|| shard.local(slot) as usize % threads)
}

/// One worker's part of the plan.
pub(super) struct Share {
    /// (workload, slot index within the workload), the slots it owns.
    pub(super) slots: Vec<(u16, u32)>,
    /// Its share of `--requests`.
    pub(super) budget: Option<u64>,
    /// Per workload: new connections per second it may open.
    pub(super) ramp: Vec<f64>,
}

/// Deals this shard's slots of every workload to `threads` workers and
/// splits its request budget and ramp rates in proportion.
pub(super) fn deal(plan: &Plan, threads: usize) -> Vec<Share> {
    let mut slots: Vec<Vec<(u16, u32)>> = vec![Vec::new(); threads];
    for (wi, w) in plan.workloads.iter().enumerate() {
        for s in 0..w.connections {
            if let Some(k) = worker_of(plan.shard, s, threads) {
                slots[k].push((wi as u16, s));
            }
        }
    }
    let total: u64 = slots.iter().map(|s| s.len() as u64).sum();
    let mut budgets: Vec<Option<u64>> = vec![None; threads];
    if let Some(n) = plan.max_requests.map(|n| plan.shard.share(n)) {
        let mut given = 0;
        for (i, b) in budgets.iter_mut().enumerate() {
            let share = if i + 1 == threads {
                n - given
            } else {
                n * slots[i].len() as u64 / total.max(1)
            };
            given += share;
            *b = Some(share);
        }
    }
    slots
        .into_iter()
        .zip(budgets)
        .map(|(slots, budget)| {
            let ramp = plan
                .workloads
                .iter()
                .enumerate()
                .map(|(wi, w)| {
                    let mine = slots.iter().filter(|(x, _)| *x as usize == wi).count() as f64;
                    w.ramp as f64 * mine / w.connections.max(1) as f64
                })
                .collect();
            Share { slots, budget, ramp }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(conns: &[u32], requests: Option<u64>) -> Plan {
        let text: String = conns
            .iter()
            .enumerate()
            .map(|(i, c)| {
                format!("[[workload]]\nname = \"w{i}\"\nurl = \"http://127.0.0.1:1/\"\nconnections = {c}\nramp = 100\n")
            })
            .collect();
        let text = match requests {
            Some(n) => format!("requests = {n}\n{text}"),
            None => text,
        };
        crate::config::parse(std::path::Path::new("t.toml"), &text, Default::default()).unwrap()
    }

    #[test]
    fn slots_budget_and_ramp_add_up() {
        let p = plan(&[10, 3], Some(1001));
        let shares = deal(&p, 4);
        assert_eq!(shares.iter().map(|s| s.slots.len()).sum::<usize>(), 13);
        assert_eq!(shares.iter().map(|s| s.budget.unwrap()).sum::<u64>(), 1001);
        for wi in 0..2 {
            let r: f64 = shares.iter().map(|s| s.ramp[wi]).sum();
            assert!((r - 100.0).abs() < 1e-9, "{r}");
        }
        // Round-robin by slot index: worker k holds slots k, k+4, ...
        assert!(shares[1].slots.iter().all(|(_, s)| s % 4 == 1));
    }

    #[test]
    fn shards_deal_their_own_grid_places_and_add_up_to_the_plan() {
        let whole = plan(&[10, 7], Some(1001));
        let mut slots = Vec::new();
        let (mut budget, mut ramp) = (0, [0.0; 2]);
        for index in 0..3 {
            let mut p = whole.clone();
            p.shard = Shard { index, count: 3 };
            for sh in deal(&p, 2) {
                assert!(
                    sh.slots.iter().all(|&(_, s)| s % 3 == index),
                    "shard {index} holds another's slot"
                );
                slots.extend(sh.slots);
                budget += sh.budget.unwrap();
                for (sum, r) in ramp.iter_mut().zip(&sh.ramp) {
                    *sum += r;
                }
            }
        }
        slots.sort_unstable();
        let every: Vec<(u16, u32)> = (0..10).map(|s| (0, s)).chain((0..7).map(|s| (1, s))).collect();
        assert_eq!(slots, every, "every slot of the plan once");
        assert_eq!(budget, 1001);
        for r in ramp {
            assert!((r - 100.0).abs() < 1e-9, "{r}");
        }
    }
}
